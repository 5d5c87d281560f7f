//! What one transaction of each kind costs, phase by phase (`ringdb micro txn-cost`, issue
//! 36): serializable beside the same transactions without isolation (the paper's engine), so
//! that the price of serializability is a figure and a change to the transaction path shows
//! in the phase that moved.
//!
//! Method: a fresh in-memory database of W=1 (the standard population; the small one with
//! `quick`), no log, engine `uring`, a pool that holds it several times over. After a warm-up
//! of the mix, rounds alternate the isolations' order; in each, every kind runs `per_kind`
//! transactions one at a time (a Delivery is one transaction per district, as the runs do; a
//! StockLevel under serializable runs at read committed, as the runs do), each timed whole
//! and by phase ([`phases`](super::phases)). Both isolations run the same inputs. A sample
//! that a preemption spans (its total far above the median) is dropped; each figure is the
//! mean of the rest.

use super::execute::{execute_in, TxOptions};
use super::phases::{timed_now, Meter, Phase, PhaseTicks, PHASES};
use super::{Constants, TpccError, TpccScale, TpccTables, TxChoice, TxInput, TxKind, MIX_PERCENT};
use crate::error::Result;
use rand::SeedableRng;
use ringdb::{DbHandle, Durability, Isolation, LocalDb, Options};
use ringdb_io::{Batching, EngineKind, IoConfig};
use ringdb_lab::counters::rdtsc;
use std::path::Path;

/// Samples above this many times the median total span a preemption (see `micro/preempted`).
const OUTLIER_FACTOR: u64 = 8;

/// The sizes of one measurement.
#[derive(Clone, Copy, Debug)]
pub struct CostPlan {
    /// The small population (tests, `--quick`) instead of the standard one.
    pub small: bool,
    /// Transactions of each kind per isolation and round (Deliveries: districts).
    pub per_kind: usize,
    /// Rounds; the isolations' order alternates between them.
    pub rounds: usize,
    /// Transactions of the mix run before the measurement.
    pub warmup: usize,
}

/// One database transaction's ticks: per phase, and from begin to the end of its commit.
#[derive(Clone, Copy, Debug)]
struct Sample {
    phases: PhaseTicks,
    total: u64,
}

/// The mean cost of one kind of transaction at one isolation, in time-stamp ticks.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KindCost {
    /// The transaction (a Delivery's figures are for one district).
    pub kind: TxKind,
    /// `serializable` or `off`.
    pub isolation: &'static str,
    /// Mean ticks per phase, in the order of [`PHASES`].
    pub phases: Vec<f64>,
    /// Mean ticks outside every phase: the transaction's own code (rows decoded and
    /// encoded, the async machinery around the calls).
    pub body: f64,
    /// Mean ticks from begin to the end of the commit (or abort).
    pub total: f64,
    /// Samples kept.
    pub samples: usize,
    /// Samples dropped as preempted.
    pub dropped: usize,
}

/// What `txn-cost` measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CostReport {
    /// Every kind at both isolations (serializable first).
    pub kinds: Vec<KindCost>,
    /// Ticks of a transaction of the mix (a Delivery counted as its ten districts), per
    /// isolation: serializable, then off.
    pub mix: [f64; 2],
    /// Pages read from the file during the measurement (0: everything stayed in memory).
    pub page_reads: u64,
    /// The population measured.
    pub scale: TpccScale,
    /// Whether the consistency checks (clause 3.3.2) passed after the measurement.
    pub consistent: bool,
}

/// Loads a fresh W=1 database at `path` and measures it as `plan` says.
pub fn measure_cost(path: &Path, plan: CostPlan, progress: bool) -> Result<CostReport> {
    assert!(
        plan.rounds >= 1 && plan.per_kind >= 1,
        "something to measure"
    );
    let scale = if plan.small {
        TpccScale::small(1)
    } else {
        TpccScale::standard(1)
    };
    let mut db = LocalDb::open(path, options(plan.small))?;
    super::load(&mut db, &scale, progress)?;
    let (tables, scale, constants) = super::open_loaded(&mut db)?;
    let h = db.handle();
    let loaded = (tables, scale, constants);
    let reads_before = db.stats().pool.reads;
    let samples = db
        .runtime()
        .block_on(async move { run_rounds(&h, &loaded, plan).await })??;
    let page_reads = db.stats().pool.reads - reads_before;
    let consistent = super::check(&mut db, &tables, &scale)?.passed();
    db.close()?;
    let mut report = report(samples, page_reads, scale);
    report.consistent = consistent;
    Ok(report)
}

/// The database's options: in memory (a pool several times the data), no log.
fn options(small: bool) -> Options {
    let pool_bytes: usize = if small { 64 << 20 } else { 1 << 30 };
    Options {
        pool_pages: pool_bytes / 4096,
        io: IoConfig {
            queue_depth: 64,
            batching: Batching::Adaptive,
            ..IoConfig::new(EngineKind::Uring)
        },
        fresh: true,
        durability: Durability::Off,
        ..Options::default()
    }
}

/// Samples per kind (in `TxKind::ALL`'s order), serializable then off.
type Samples = [[Vec<Sample>; 5]; 2];

/// The isolations in report order.
const ISOLATIONS: [Isolation; 2] = [Isolation::Serializable, Isolation::Off];

/// The warm-up, then the rounds.
async fn run_rounds(
    h: &DbHandle,
    loaded: &(TpccTables, TpccScale, Constants),
    plan: CostPlan,
) -> std::result::Result<Samples, TpccError> {
    let (tables, scale, constants) = loaded;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(36);
    for _ in 0..plan.warmup {
        let input = TxInput::generate(scale, constants, 1, &mut rng);
        run_measured(h, tables, &input, Isolation::Serializable, &mut |_| {}).await?;
    }
    let mut samples: Samples = Default::default();
    for round in 0..plan.rounds {
        let inputs = round_inputs(loaded, plan.per_kind, round as u64);
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            for (k, kind_inputs) in inputs.iter().enumerate() {
                let into = &mut samples[which][k];
                for input in kind_inputs {
                    let keep = &mut |s| into.push(s);
                    run_measured(h, tables, input, ISOLATIONS[which], keep).await?;
                }
            }
        }
    }
    Ok(samples)
}

/// `per_kind` inputs of each kind (a tenth as many Deliveries: each is ten transactions).
fn round_inputs(
    (_, scale, constants): &(TpccTables, TpccScale, Constants),
    per_kind: usize,
    round: u64,
) -> Vec<Vec<TxInput>> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(round.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    TxKind::ALL
        .iter()
        .map(|&kind| {
            let n = match kind {
                TxKind::Delivery => per_kind.div_ceil(scale.districts as usize),
                _ => per_kind,
            };
            (0..n)
                .map(|_| TxInput::generate_kind(scale, constants, 1, kind, &mut rng))
                .collect()
        })
        .collect()
}

/// Runs `input` at `isolation` one database transaction at a time (a Delivery's districts
/// in turn), handing each one's sample to `keep`.
async fn run_measured(
    h: &DbHandle,
    tables: &TpccTables,
    input: &TxInput,
    isolation: Isolation,
    keep: &mut dyn FnMut(Sample),
) -> std::result::Result<(), TpccError> {
    let parts: Vec<Option<u32>> = match input.choice() {
        TxChoice::Delivery(d) => (1..=d.districts).map(Some).collect(),
        _ => vec![None],
    };
    // StockLevel at read committed under serializable, as the runs do (clause 2.8.2.3).
    let isolation = match input.choice() {
        TxChoice::StockLevel(_) if isolation == Isolation::Serializable => Isolation::ReadCommitted,
        _ => isolation,
    };
    let meter = Meter::arm();
    for part in parts {
        meter.take();
        let start = rdtsc();
        let txn = timed_now(Phase::Begin, || h.begin_with(isolation, None));
        let options = TxOptions::new(isolation);
        execute_in(txn, tables, input, options, true, part).await?;
        let total = rdtsc().saturating_sub(start);
        let phases = meter.take();
        assert!(
            phases.iter().sum::<u64>() <= total,
            "the phases run inside the transaction"
        );
        keep(Sample { phases, total });
    }
    Ok(())
}

/// The means of `samples`, the mix, and the rest of the report.
fn report(samples: Samples, page_reads: u64, scale: TpccScale) -> CostReport {
    let mut kinds = Vec::new();
    let mut mix = [0.0; 2];
    for (which, per_kind) in samples.iter().enumerate() {
        let isolation = ["serializable", "off"][which];
        for (k, kind_samples) in per_kind.iter().enumerate() {
            let cost = kind_cost(TxKind::ALL[k], isolation, kind_samples);
            mix[which] += mix_weight(TxKind::ALL[k], &scale) * cost.total;
            kinds.push(cost);
        }
    }
    CostReport {
        kinds,
        mix,
        page_reads,
        scale,
        consistent: false,
    }
}

/// How many of `kind`'s database transactions one transaction of the mix runs on average.
fn mix_weight(kind: TxKind, scale: &TpccScale) -> f64 {
    let percent = MIX_PERCENT
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(0, |(_, p)| *p);
    let per_transaction = match kind {
        TxKind::Delivery => f64::from(scale.districts),
        _ => 1.0,
    };
    f64::from(percent) / 100.0 * per_transaction
}

/// The means of one kind's samples without the preempted ones.
fn kind_cost(kind: TxKind, isolation: &'static str, samples: &[Sample]) -> KindCost {
    let mut totals: Vec<u64> = samples.iter().map(|s| s.total).collect();
    totals.sort_unstable();
    let cutoff = totals
        .get(totals.len() / 2)
        .map_or(u64::MAX, |m| (*m).max(1).saturating_mul(OUTLIER_FACTOR));
    let kept: Vec<&Sample> = samples.iter().filter(|s| s.total <= cutoff).collect();
    let n = kept.len().max(1) as f64;
    let phases: Vec<f64> = (0..PHASES.len())
        .map(|p| kept.iter().map(|s| s.phases[p] as f64).sum::<f64>() / n)
        .collect();
    let total = kept.iter().map(|s| s.total as f64).sum::<f64>() / n;
    KindCost {
        kind,
        isolation,
        body: total - phases.iter().sum::<f64>(),
        phases,
        total,
        samples: kept.len(),
        dropped: samples.len() - kept.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_measured_at_both_isolations_and_the_phases_fit_the_total() {
        let dir = std::env::temp_dir().join(format!("ringdb-txn-cost-test-{}", std::process::id()));
        let plan = CostPlan {
            small: true,
            per_kind: 30,
            rounds: 2,
            warmup: 50,
        };
        let report = measure_cost(&dir, plan, false);
        let _ = std::fs::remove_dir_all(&dir);
        let report = report.expect("measure");
        assert!(report.consistent, "the checks pass after the measurement");
        assert_eq!(report.kinds.len(), 10);
        for cost in &report.kinds {
            let what = format!("{:?} {}", cost.kind, cost.isolation);
            assert!(cost.samples >= plan.per_kind, "{what}: {cost:?}");
            assert!(cost.total > 0.0 && cost.body >= 0.0, "{what}: {cost:?}");
            let commit = cost.phases[Phase::Commit.index()];
            assert!(cost.phases[Phase::Begin.index()] > 0.0, "{what}");
            if matches!(cost.kind, TxKind::NewOrder | TxKind::Payment) {
                assert!(commit > 0.0, "{what}: the commit applies writes");
                assert!(cost.phases[Phase::Write.index()] > 0.0, "{what}");
                assert!(cost.phases[Phase::ReadForUpdate.index()] > 0.0, "{what}");
                assert!(cost.phases[Phase::Prefetch.index()] > 0.0, "{what}");
            }
        }
        let scans = |kind: TxKind| report.kinds.iter().find(|c| c.kind == kind).unwrap();
        assert!(scans(TxKind::StockLevel).phases[Phase::Scan.index()] > 0.0);
        assert!(scans(TxKind::Delivery).phases[Phase::Scan.index()] > 0.0);
        assert!(report.mix.iter().all(|&m| m > 0.0));
        assert_eq!(report.page_reads, 0, "in memory");
    }

    #[test]
    fn a_delivery_weighs_as_its_ten_districts_in_the_mix() {
        let scale = TpccScale::standard(1);
        let weights: f64 = TxKind::ALL.iter().map(|&k| mix_weight(k, &scale)).sum();
        assert!((weights - (1.0 + 0.04 * 9.0)).abs() < 1e-9, "{weights}");
    }

    #[test]
    fn a_preempted_sample_is_dropped() {
        let sample = |total| Sample {
            phases: [0; PHASES.len()],
            total,
        };
        let mut samples = vec![sample(100); 99];
        samples.push(sample(1_000_000));
        let cost = kind_cost(TxKind::Payment, "off", &samples);
        assert_eq!((cost.samples, cost.dropped), (99, 1));
        assert_eq!(cost.total, 100.0);
    }
}
