//! The CLI's words for the benchmark layer's typed errors. `ringdb-bench` names the setting that
//! was refused (a [`BenchSetting`]) and the limit it broke; this module knows which flag of
//! `ringdb io`, `ringdb micro`, `ringdb ladder` or `ringdb ycsb` sets each one, and turns the
//! error into a hint line in those words.

use ringdb_bench::error::{BenchError, BenchSetting, FioError};
use ringdb_bench::units::fio_size;
use std::error::Error;

/// A hint in flag words for `error` when it is a [`BenchError`] a flag can fix.
pub fn bench_hint(error: &(dyn Error + 'static)) -> Option<String> {
    let bench = error.downcast_ref::<BenchError>()?;
    let text = match bench {
        BenchError::Unknown { setting, .. } => {
            format!("{} takes one of the names listed", setting_flag(*setting))
        }
        BenchError::OutOfRange {
            setting, min, max, ..
        } if *max == u64::MAX => format!(
            "{} takes at least {}",
            setting_flag(*setting),
            flag_value(*setting, *min)
        ),
        BenchError::OutOfRange {
            setting, min, max, ..
        } => format!(
            "{} takes {}..={}",
            setting_flag(*setting),
            flag_value(*setting, *min),
            flag_value(*setting, *max)
        ),
        BenchError::NotMultiple {
            setting, multiple, ..
        } => format!(
            "{} takes multiples of {}",
            setting_flag(*setting),
            flag_value(*setting, *multiple)
        ),
        BenchError::TooSmall { setting, min, .. } => format!(
            "raise {} to at least {}",
            setting_flag(*setting),
            flag_value(*setting, *min)
        ),
        BenchError::Missing { one_of, .. } => {
            let flags: Vec<&str> = one_of.iter().map(|s| setting_flag(*s)).collect();
            format!("give {}", flags.join(" or "))
        }
        _ => return target_hint(bench),
    };
    Some(text)
}

/// Hints for errors about the target and the tools around a run rather than one setting.
fn target_hint(error: &BenchError) -> Option<String> {
    let text = match error {
        BenchError::PoolTooSmall {
            min_pages,
            page_size_bytes,
            ..
        } => format!(
            "raise --pool to at least {}k",
            min_pages * page_size_bytes / 1024
        ),
        BenchError::SizeExceedsDevice { capacity_bytes, .. } => {
            format!("use --size {capacity_bytes} or less (--size 0: the whole device)")
        }
        BenchError::TargetTooSmall { .. } => {
            "point --target at a larger file or block device".to_string()
        }
        BenchError::UnsupportedTarget { .. } => {
            "point --target at a regular file or a block device".to_string()
        }
        BenchError::FilesystemFull { .. } => "free space, or use a smaller --size".to_string(),
        BenchError::ShortTransfer { .. } => "is the target shorter than --size?".to_string(),
        BenchError::Fio(FioError::NotInstalled) => "install fio, or drop --compare-fio".to_string(),
        BenchError::ClientPolicy { .. } => "run the clients with --client-sched normal".to_string(),
        _ => return None,
    };
    Some(text)
}

/// `value` as the flag of `setting` spells it: sizes as `4k`, `2m`; counts as numbers.
fn flag_value(setting: BenchSetting, value: u64) -> String {
    match setting {
        BenchSetting::BlockSize | BenchSetting::Size | BenchSetting::BufferSpan => fio_size(value),
        _ => value.to_string(),
    }
}

/// The flag that sets `setting` (the same in every command that has it).
pub fn setting_flag(setting: BenchSetting) -> &'static str {
    match setting {
        BenchSetting::ReadWriteMode => "--rw",
        BenchSetting::ReadMix => "--rwmixread",
        BenchSetting::BlockSize => "--bs",
        BenchSetting::Size => "--size",
        BenchSetting::Jobs => "--numjobs",
        BenchSetting::Runtime => "--runtime",
        BenchSetting::Ios => "--ios",
        BenchSetting::MaxThreads => "--max-threads",
        BenchSetting::Tasks => "--tasks",
        BenchSetting::Records => "--records",
        BenchSetting::Pool => "--pool",
        BenchSetting::Step => "--steps",
        BenchSetting::Workload => "--workload",
        BenchSetting::Distribution => "--distribution",
        BenchSetting::Microbenchmark => "`ringdb micro <name>`",
        BenchSetting::Threads => "--threads",
        BenchSetting::Concurrency => "--concurrency",
        BenchSetting::Warehouses => "--warehouses",
        BenchSetting::BufferSpan => "--buffer-span",
        _ => "the setting",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_bench::micro;

    #[test]
    fn settings_get_their_flags() {
        let boxed: Box<dyn Error> = Box::new(BenchError::OutOfRange {
            setting: BenchSetting::Ios,
            value: 0,
            min: 1,
            max: u64::MAX,
        });
        assert_eq!(
            bench_hint(boxed.as_ref()).unwrap(),
            "--ios takes at least 1"
        );
        let range = BenchError::OutOfRange {
            setting: BenchSetting::MaxThreads,
            value: 0,
            min: 1,
            max: 1024,
        };
        assert_eq!(bench_hint(&range).unwrap(), "--max-threads takes 1..=1024");
        let missing = BenchError::Missing {
            one_of: &[BenchSetting::Runtime, BenchSetting::Ios],
            purpose: "a run needs one to stop",
        };
        assert_eq!(bench_hint(&missing).unwrap(), "give --runtime or --ios");
        let small = BenchError::TooSmall {
            setting: BenchSetting::Size,
            value: 100,
            min: 4096,
            needed_by: "one block",
        };
        assert_eq!(bench_hint(&small).unwrap(), "raise --size to at least 4k");
        let multiple = BenchError::NotMultiple {
            setting: BenchSetting::BlockSize,
            value: 1001,
            multiple: 8,
        };
        assert_eq!(bench_hint(&multiple).unwrap(), "--bs takes multiples of 8");
        let unknown = BenchError::Unknown {
            setting: BenchSetting::ReadWriteMode,
            value: "sideways".into(),
            one_of: &["read", "write"],
        };
        assert_eq!(
            bench_hint(&unknown).unwrap(),
            "--rw takes one of the names listed"
        );
        let unknown_name = micro::run("warp-drive", &micro::MicroOpts::new("/tmp")).unwrap_err();
        assert!(bench_hint(&unknown_name).unwrap().contains("ringdb micro"));
        let block = BenchError::OutOfRange {
            setting: BenchSetting::BlockSize,
            value: 0,
            min: 1,
            max: 1 << 30,
        };
        assert_eq!(bench_hint(&block).unwrap(), "--bs takes 1..=1g");
    }

    #[test]
    fn target_and_tool_errors_get_hints() {
        let pool = BenchError::PoolTooSmall {
            pool_pages: 4,
            min_pages: 64,
            page_size_bytes: 4096,
        };
        assert_eq!(bench_hint(&pool).unwrap(), "raise --pool to at least 256k");
        let fio = BenchError::Fio(FioError::NotInstalled);
        assert!(bench_hint(&fio).unwrap().contains("--compare-fio"));
        let verify = BenchError::Verify {
            mismatches: 1,
            checked: 1,
            first_offset: 0,
        };
        assert!(bench_hint(&verify).is_none());
        let io = std::io::Error::other("not a bench error");
        assert!(bench_hint(&io).is_none());
    }

    #[test]
    fn every_setting_has_a_flag() {
        for setting in [
            BenchSetting::ReadWriteMode,
            BenchSetting::ReadMix,
            BenchSetting::BlockSize,
            BenchSetting::Size,
            BenchSetting::Jobs,
            BenchSetting::Runtime,
            BenchSetting::Ios,
            BenchSetting::MaxThreads,
            BenchSetting::Tasks,
            BenchSetting::Records,
            BenchSetting::Pool,
            BenchSetting::Step,
            BenchSetting::Workload,
            BenchSetting::Distribution,
            BenchSetting::BufferSpan,
        ] {
            assert!(setting_flag(setting).starts_with("--"), "{setting:?}");
        }
        assert!(setting_flag(BenchSetting::Microbenchmark).contains("ringdb micro"));
    }
}
