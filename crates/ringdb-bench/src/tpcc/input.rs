//! A transaction's input: its kind and every random choice of clauses 2.4.1-2.8.1, drawn
//! before it runs, so a retry after a conflict runs the same transaction again and a run is
//! reproducible from its seed.

use super::error::TpccError;
use super::keys;
use super::mix::TxKind;
use super::order_status::ORDER_LINES_MAX;
use super::random::{self, nurand, Constants};
use super::scale::TpccScale;
use super::scale::DISTRICTS_STANDARD;
use rand::{Rng, RngExt};

/// Which customer a Payment or OrderStatus is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerChoice {
    /// By C_ID.
    Id(u32),
    /// By C_LAST: the middle customer of the name group sorted by C_FIRST.
    LastName(String),
}

/// One line of a NewOrder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrderLine {
    /// OL_I_ID (past the last item for the rollback's last line).
    pub item: u32,
    /// OL_SUPPLY_W_ID.
    pub supply_warehouse: u32,
    /// OL_QUANTITY, 1-10.
    pub quantity: u8,
}

/// NewOrder's input (clause 2.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    /// W_ID: the home warehouse.
    pub warehouse: u32,
    /// D_ID.
    pub district: u32,
    /// C_ID.
    pub customer: u32,
    /// The order's lines (5-15).
    pub lines: Vec<NewOrderLine>,
    /// Whether the last line names an unused item: the 1% that roll back.
    pub rollback: bool,
}

/// Payment's input (clause 2.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    /// W_ID: the home warehouse.
    pub warehouse: u32,
    /// D_ID.
    pub district: u32,
    /// C_W_ID: the customer's warehouse (another in 15% when W > 1).
    pub customer_warehouse: u32,
    /// C_D_ID.
    pub customer_district: u32,
    /// The customer, by id (40%) or by last name (60%).
    pub customer: CustomerChoice,
    /// H_AMOUNT, cents (1.00-5,000.00).
    pub amount_cents: i64,
}

/// OrderStatus's input (clause 2.6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    /// W_ID: the home warehouse.
    pub warehouse: u32,
    /// D_ID.
    pub district: u32,
    /// The customer, by id (40%) or by last name (60%).
    pub customer: CustomerChoice,
}

/// Delivery's input (clause 2.7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryInput {
    /// W_ID: the home warehouse.
    pub warehouse: u32,
    /// O_CARRIER_ID, 1-10.
    pub carrier: u8,
    /// The warehouse's districts (all are delivered).
    pub districts: u32,
}

/// StockLevel's input (clause 2.8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StockLevelInput {
    /// W_ID: the home warehouse.
    pub warehouse: u32,
    /// D_ID.
    pub district: u32,
    /// The threshold, 10-20.
    pub threshold: i32,
}

/// The input of one transaction of each kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxChoice {
    /// A NewOrder.
    NewOrder(NewOrderInput),
    /// A Payment.
    Payment(PaymentInput),
    /// An OrderStatus.
    OrderStatus(OrderStatusInput),
    /// A Delivery.
    Delivery(DeliveryInput),
    /// A StockLevel.
    StockLevel(StockLevelInput),
}

/// A transaction to run: its kind and every random choice it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxInput {
    choice: TxChoice,
}

impl TxInput {
    /// Draws a transaction of the mix for a terminal of `home_warehouse` (1..=W).
    pub fn generate(
        scale: &TpccScale,
        constants: &Constants,
        home_warehouse: u32,
        rng: &mut impl Rng,
    ) -> TxInput {
        let kind = TxKind::draw(rng);
        TxInput::generate_kind(scale, constants, home_warehouse, kind, rng)
    }

    /// Draws a transaction of `kind` for a terminal of `home_warehouse` (1..=W): its choices
    /// as the mix would draw them.
    pub fn generate_kind(
        scale: &TpccScale,
        constants: &Constants,
        home_warehouse: u32,
        kind: TxKind,
        rng: &mut impl Rng,
    ) -> TxInput {
        let draw = Draw {
            scale,
            constants,
            home: home_warehouse.clamp(1, scale.warehouses.max(1)),
        };
        let choice = match kind {
            TxKind::NewOrder => TxChoice::NewOrder(draw.new_order(rng)),
            TxKind::Payment => TxChoice::Payment(draw.payment(rng)),
            TxKind::OrderStatus => TxChoice::OrderStatus(draw.order_status(rng)),
            TxKind::Delivery => TxChoice::Delivery(DeliveryInput {
                warehouse: draw.home,
                carrier: rng.random_range(1..=10),
                districts: scale.districts,
            }),
            TxKind::StockLevel => TxChoice::StockLevel(StockLevelInput {
                warehouse: draw.home,
                district: draw.district(rng),
                threshold: rng.random_range(10..=20),
            }),
        };
        TxInput { choice }
    }

    /// A transaction with the given choices (tests, replays).
    pub fn from_choice(choice: TxChoice) -> TxInput {
        TxInput { choice }
    }

    /// Which transaction it is.
    pub fn kind(&self) -> TxKind {
        match &self.choice {
            TxChoice::NewOrder(_) => TxKind::NewOrder,
            TxChoice::Payment(_) => TxKind::Payment,
            TxChoice::OrderStatus(_) => TxKind::OrderStatus,
            TxChoice::Delivery(_) => TxKind::Delivery,
            TxChoice::StockLevel(_) => TxKind::StockLevel,
        }
    }

    /// Its choices.
    pub fn choice(&self) -> &TxChoice {
        &self.choice
    }

    /// Refuses choices outside what the keys and rows can hold (a hand-built input): districts
    /// 1-10, 1-15 order lines, last names of at most 16 bytes.
    pub fn validate(&self) -> Result<(), TpccError> {
        let district_ok = |d: u32| (1..=DISTRICTS_STANDARD).contains(&d);
        let name_ok = |c: &CustomerChoice| match c {
            CustomerChoice::LastName(last) => last.len() <= keys::NAME_KEY_BYTES,
            CustomerChoice::Id(_) => true,
        };
        let rule = match &self.choice {
            TxChoice::NewOrder(i) if !district_ok(i.district) => "a district is 1-10",
            TxChoice::NewOrder(i) if !(1..=ORDER_LINES_MAX).contains(&i.lines.len()) => {
                "an order has 1-15 lines"
            }
            TxChoice::Payment(i)
                if !district_ok(i.district) || !district_ok(i.customer_district) =>
            {
                "a district is 1-10"
            }
            TxChoice::Payment(PaymentInput { customer, .. })
            | TxChoice::OrderStatus(OrderStatusInput { customer, .. })
                if !name_ok(customer) =>
            {
                "a last name is at most 16 bytes"
            }
            TxChoice::OrderStatus(i) if !district_ok(i.district) => "a district is 1-10",
            TxChoice::Delivery(i) if !district_ok(i.districts) => "a warehouse has 1-10 districts",
            TxChoice::StockLevel(i) if !district_ok(i.district) => "a district is 1-10",
            _ => return Ok(()),
        };
        Err(TpccError::InvalidInput { rule })
    }
}

/// What drawing an input needs.
struct Draw<'a> {
    scale: &'a TpccScale,
    constants: &'a Constants,
    home: u32,
}

impl Draw<'_> {
    fn district(&self, rng: &mut impl Rng) -> u32 {
        rng.random_range(1..=self.scale.districts)
    }

    /// A warehouse other than the home one, uniformly (the home one when W = 1).
    fn remote_warehouse(&self, rng: &mut impl Rng) -> u32 {
        let w = self.scale.warehouses;
        if w <= 1 {
            return self.home;
        }
        let other = rng.random_range(1..w);
        if other >= self.home {
            other + 1
        } else {
            other
        }
    }

    fn customer_id(&self, rng: &mut impl Rng) -> u32 {
        let customers = self.scale.customers_per_district;
        nurand(
            rng,
            random::A_CUSTOMER_ID,
            self.constants.customer_id,
            1,
            customers,
        )
    }

    /// By last name 60% (C_RUN over the names the load gave out), by id 40%.
    fn customer(&self, rng: &mut impl Rng) -> CustomerChoice {
        if rng.random_range(1..=100) <= 60 {
            let names = self.scale.last_names();
            let c = self.constants.last_name_run;
            CustomerChoice::LastName(random::last_name(nurand(
                rng,
                random::A_LAST_NAME,
                c,
                0,
                names - 1,
            )))
        } else {
            CustomerChoice::Id(self.customer_id(rng))
        }
    }

    fn new_order(&self, rng: &mut impl Rng) -> NewOrderInput {
        let count = rng.random_range(5..=15);
        let rollback = rng.random_range(1..=100) == 1;
        let items = self.scale.items;
        let lines = (1..=count)
            .map(|number| {
                let item = if rollback && number == count {
                    items + 1
                } else {
                    nurand(rng, random::A_ITEM_ID, self.constants.item_id, 1, items)
                };
                let remote = self.scale.warehouses > 1 && rng.random_range(1..=100) == 1;
                NewOrderLine {
                    item,
                    supply_warehouse: if remote {
                        self.remote_warehouse(rng)
                    } else {
                        self.home
                    },
                    quantity: rng.random_range(1..=10),
                }
            })
            .collect();
        NewOrderInput {
            warehouse: self.home,
            district: self.district(rng),
            customer: self.customer_id(rng),
            lines,
            rollback,
        }
    }

    fn payment(&self, rng: &mut impl Rng) -> PaymentInput {
        let district = self.district(rng);
        let remote = self.scale.warehouses > 1 && rng.random_range(1..=100) > 85;
        let (customer_warehouse, customer_district) = if remote {
            (self.remote_warehouse(rng), self.district(rng))
        } else {
            (self.home, district)
        };
        PaymentInput {
            warehouse: self.home,
            district,
            customer_warehouse,
            customer_district,
            customer: self.customer(rng),
            amount_cents: rng.random_range(100..=500_000),
        }
    }

    fn order_status(&self, rng: &mut impl Rng) -> OrderStatusInput {
        OrderStatusInput {
            warehouse: self.home,
            district: self.district(rng),
            customer: self.customer(rng),
        }
    }
}
