//! The CLI's words for the TPC-C runner's typed errors: which flag of `ringdb tpcc` fixes a
//! pool too small for the hot set, or a database loaded at another scale.

use ringdb_bench::error::BenchError;
use ringdb_bench::tpcc::{TpccRunError, TpccScale};
use std::error::Error;

/// A hint in flag words for `error` when it is a [`TpccRunError`] a flag can fix.
pub fn tpcc_hint(error: &(dyn Error + 'static)) -> Option<String> {
    let run = match error.downcast_ref::<BenchError>() {
        Some(BenchError::TpccRun(run)) => run,
        Some(BenchError::TpccScaleMismatch { loaded, requested }) => {
            return Some(scale_hint(loaded, requested))
        }
        _ => error.downcast_ref::<TpccRunError>()?,
    };
    let text = match run {
        TpccRunError::PoolTooSmallForHotSet {
            hot_set_pages,
            page_size_bytes,
            ..
        } => {
            let bytes = hot_set_pages * *page_size_bytes as u64;
            format!(
                "raise --pool to at least {}M, or lower --tasks",
                bytes.div_ceil(1 << 20)
            )
        }
        TpccRunError::FewerWarehousesThanShards { shards, .. } => {
            format!("load at least --warehouses {shards}, or lower --shards")
        }
        _ => return None,
    };
    Some(text)
}

/// A database loaded at another scale: the warehouse count to run it with, or the population
/// flag that matches it.
fn scale_hint(loaded: &TpccScale, requested: &TpccScale) -> String {
    if loaded.warehouses != requested.warehouses {
        format!(
            "run with --warehouses {}, or add --load to load {} warehouses (replacing the database)",
            loaded.warehouses, requested.warehouses
        )
    } else {
        "add or drop --small to match the database, or add --load to load it again".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpcc_errors_get_flag_hints() {
        let pool = BenchError::TpccRun(TpccRunError::PoolTooSmallForHotSet {
            pool_pages: 1024,
            hot_set_pages: 3700,
            page_size_bytes: 4096,
            items: 100_000,
            tasks: 128,
        });
        assert_eq!(
            tpcc_hint(&pool).unwrap(),
            "raise --pool to at least 15M, or lower --tasks"
        );
        let other = BenchError::TpccScaleMismatch {
            loaded: TpccScale::small(2),
            requested: TpccScale::small(3),
        };
        let text = tpcc_hint(&other).unwrap();
        assert!(
            text.contains("--warehouses 2") && text.contains("--load"),
            "{text}"
        );
        let population = BenchError::TpccScaleMismatch {
            loaded: TpccScale::small(2),
            requested: TpccScale::standard(2),
        };
        assert!(tpcc_hint(&population).unwrap().contains("--small"));
        let io = std::io::Error::other("not a TPC-C error");
        assert!(tpcc_hint(&io).is_none());
    }
}
