//! The workload as the cost model sees it: cycles per operation with every page in memory, and
//! page reads and writes per operation. A preset (a YCSB mix over uniform keys on a data set a
//! few times the pool) is measured on the engine and its reads and writes estimated from the
//! pool's share of the data; a custom description gives the three figures directly.

use crate::error::{BenchError, BenchSetting, Result};
use serde::Serialize;

/// A YCSB mix the engine runs itself (uniform keys, one record per operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// 100% updates: the paper's Fig. 5 workload.
    UpdateOnly,
    /// YCSB-A: 50% reads, 50% updates.
    YcsbA,
    /// YCSB-B: 95% reads, 5% updates.
    YcsbB,
    /// YCSB-C: 100% reads.
    YcsbC,
}

impl Preset {
    /// Every preset, in the order `--help` lists them.
    pub const ALL: [Preset; 4] = [
        Preset::UpdateOnly,
        Preset::YcsbA,
        Preset::YcsbB,
        Preset::YcsbC,
    ];
    /// The names [`Preset::parse`] accepts.
    pub const NAMES: &'static [&'static str] = &["update-only", "ycsb-a", "ycsb-b", "ycsb-c"];

    /// The preset's name.
    pub fn name(self) -> &'static str {
        Self::NAMES[Self::ALL.iter().position(|p| *p == self).unwrap_or(0)]
    }

    /// The preset named `name` (`tpcc` is refused until TPC-C runs on the engine).
    pub fn parse(name: &str) -> Result<Preset> {
        match Self::NAMES.iter().position(|n| *n == name) {
            Some(i) => Ok(Self::ALL[i]),
            None => Err(BenchError::Unknown {
                setting: BenchSetting::Workload,
                value: name.to_string(),
                one_of: Self::NAMES,
            }),
        }
    }

    /// Percentage of operations that read (the rest update).
    pub fn read_percent(self) -> u8 {
        match self {
            Preset::UpdateOnly => 0,
            Preset::YcsbA => 50,
            Preset::YcsbB => 95,
            Preset::YcsbC => 100,
        }
    }
}

/// What the application does per operation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    /// A preset, measured on the engine.
    Preset {
        /// Which mix.
        preset: Preset,
    },
    /// Figures given by the user.
    Custom {
        /// CPU cycles per operation with every page in memory.
        cycles_per_op: f64,
        /// Page reads per operation.
        reads_per_op: f64,
        /// Page writes per operation.
        writes_per_op: f64,
    },
}

impl Workload {
    /// A custom description, each figure checked: cycles above zero, reads and writes finite
    /// and not negative.
    pub fn custom(cycles_per_op: f64, reads_per_op: f64, writes_per_op: f64) -> Result<Workload> {
        let bad = |what: &'static str, value: f64| BenchError::BadFigure {
            what,
            value,
            reason: "must be a finite number",
        };
        if !cycles_per_op.is_finite() || cycles_per_op <= 0.0 {
            return Err(BenchError::BadFigure {
                what: "cycles per operation",
                value: cycles_per_op,
                reason: "must be above zero (an operation costs some CPU)",
            });
        }
        for (what, value) in [
            ("reads per operation", reads_per_op),
            ("writes per operation", writes_per_op),
        ] {
            if !value.is_finite() {
                return Err(bad(what, value));
            }
            if value < 0.0 {
                return Err(BenchError::BadFigure {
                    what,
                    value,
                    reason: "cannot be negative",
                });
            }
        }
        Ok(Workload::Custom {
            cycles_per_op,
            reads_per_op,
            writes_per_op,
        })
    }

    /// A few words for the report.
    pub fn describe(&self) -> String {
        match self {
            Workload::Preset { preset } => format!(
                "{} ({}% reads, {}% updates, uniform keys)",
                preset.name(),
                preset.read_percent(),
                100 - preset.read_percent()
            ),
            Workload::Custom {
                cycles_per_op,
                reads_per_op,
                writes_per_op,
            } => format!(
                "custom: {cycles_per_op:.0} cycles, {reads_per_op:.2} reads, {writes_per_op:.2} writes per operation"
            ),
        }
    }
}

/// Page reads and writes per operation the model expects.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct IoPerOp {
    /// Page reads (faults) per operation.
    pub reads: f64,
    /// Page writes (dirty victims written back) per operation.
    pub writes: f64,
}

/// Reads and writes per operation of uniform single-record operations, `read_percent`% of
/// them reads, on a data set `data_ratio` times the pool:
/// - a leaf is resident with probability `h = 1 / data_ratio` (the inner nodes, a small
///   part of the data, stay resident), so an operation reads `1 - h` pages;
/// - a page stays resident for `1 / (1 - h)` accesses on average, and is dirty when evicted
///   if any of them updated it: each victim is written with probability
///   `1 - (1 - u)^(1 / (1 - h))`, `u` the update fraction.
pub fn estimate_io(read_percent: u8, data_ratio: f64) -> IoPerOp {
    debug_assert!(read_percent <= 100);
    let resident = if data_ratio <= 1.0 {
        1.0
    } else {
        1.0 / data_ratio
    };
    let reads = 1.0 - resident;
    if reads <= 0.0 {
        return IoPerOp {
            reads: 0.0,
            writes: 0.0,
        };
    }
    let update = 1.0 - read_percent as f64 / 100.0;
    let accesses_per_residency = 1.0 / reads;
    let dirty = 1.0 - (1.0 - update).powf(accesses_per_residency);
    IoPerOp {
        reads,
        writes: reads * dirty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip_and_tpcc_is_refused() {
        for p in Preset::ALL {
            assert_eq!(Preset::parse(p.name()).unwrap(), p);
        }
        let e = Preset::parse("tpcc").unwrap_err().to_string();
        assert!(e.contains("tpcc") && e.contains("ycsb-b"), "{e}");
    }

    #[test]
    fn the_estimate_follows_the_pools_share() {
        let all_updates = estimate_io(0, 3.5);
        assert!((all_updates.reads - (1.0 - 1.0 / 3.5)).abs() < 1e-9);
        assert!((all_updates.writes - all_updates.reads).abs() < 1e-9);
        let reads_only = estimate_io(100, 3.5);
        assert_eq!(reads_only.writes, 0.0);
        let b = estimate_io(95, 3.5);
        assert!(b.writes > 0.0 && b.writes < 0.1 * b.reads, "{b:?}");
        assert_eq!(estimate_io(50, 0.5).reads, 0.0);
    }

    #[test]
    fn custom_figures_that_make_no_sense_are_refused() {
        assert!(Workload::custom(0.0, 1.0, 0.0).is_err());
        assert!(Workload::custom(-5.0, 1.0, 0.0).is_err());
        assert!(Workload::custom(1000.0, -1.0, 0.0).is_err());
        assert!(Workload::custom(1000.0, 1.0, f64::NAN).is_err());
        assert!(Workload::custom(1000.0, 0.7, 0.7).is_ok());
    }
}
