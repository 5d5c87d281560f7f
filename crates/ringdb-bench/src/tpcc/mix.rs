//! The transaction mix (clause 5.2.3): NewOrder 45%, Payment 43%, OrderStatus, Delivery and
//! StockLevel 4% each, drawn per transaction (the minimum percentages of the standard, with
//! NewOrder taking the rest, as the usual drivers do).

use rand::{Rng, RngExt};
use serde::Serialize;

/// The five TPC-C transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TxKind {
    /// Clause 2.4: enter an order of 5-15 lines.
    NewOrder,
    /// Clause 2.5: a customer pays.
    Payment,
    /// Clause 2.6: a customer's last order and its lines.
    OrderStatus,
    /// Clause 2.7: deliver the oldest undelivered order of each district.
    Delivery,
    /// Clause 2.8: items of the district's last 20 orders whose stock is low.
    StockLevel,
}

/// Each kind with its share of the mix, in percent (they sum to 100).
pub const MIX_PERCENT: [(TxKind, u32); 5] = [
    (TxKind::NewOrder, 45),
    (TxKind::Payment, 43),
    (TxKind::OrderStatus, 4),
    (TxKind::Delivery, 4),
    (TxKind::StockLevel, 4),
];

impl TxKind {
    /// Every kind, in the standard's order.
    pub const ALL: [TxKind; 5] = [
        TxKind::NewOrder,
        TxKind::Payment,
        TxKind::OrderStatus,
        TxKind::Delivery,
        TxKind::StockLevel,
    ];

    /// The transaction's name as the standard spells it.
    pub fn name(self) -> &'static str {
        match self {
            TxKind::NewOrder => "NewOrder",
            TxKind::Payment => "Payment",
            TxKind::OrderStatus => "OrderStatus",
            TxKind::Delivery => "Delivery",
            TxKind::StockLevel => "StockLevel",
        }
    }

    /// The kind's position in [`TxKind::ALL`] (for per-kind counters).
    pub fn index(self) -> usize {
        self as usize
    }

    /// A kind drawn by the mix.
    pub fn draw(rng: &mut impl Rng) -> TxKind {
        let mut roll = rng.random_range(0..100u32);
        for (kind, percent) in MIX_PERCENT {
            if roll < percent {
                return kind;
            }
            roll -= percent;
        }
        unreachable!("the mix's percentages sum to 100")
    }
}

impl std::fmt::Display for TxKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_mix_has_its_shares() {
        assert_eq!(MIX_PERCENT.iter().map(|(_, p)| p).sum::<u32>(), 100);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut counts = [0u32; 5];
        for _ in 0..100_000 {
            counts[TxKind::draw(&mut rng).index()] += 1;
        }
        for (kind, percent) in MIX_PERCENT {
            let share = f64::from(counts[kind.index()]) / 1_000.0;
            assert!((share - f64::from(percent)).abs() < 1.0, "{kind}: {share}%");
        }
    }
}
