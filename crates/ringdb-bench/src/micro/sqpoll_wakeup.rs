//! PLACEHOLDER: being written.
use super::{MicroOpts, MicroResult};
use crate::error::{BenchError, Result};

pub fn run(_opts: &MicroOpts) -> Result<MicroResult> {
    Err(BenchError::InvalidArg(
        "sqpoll_wakeup: not built yet".into(),
    ))
}
