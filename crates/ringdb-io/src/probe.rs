//! PLACEHOLDER: being written.
pub fn io_uring_disabled() -> Option<u32> { None }
pub fn memlock_limit() -> (Option<u64>, Option<u64>) { (None, None) }
