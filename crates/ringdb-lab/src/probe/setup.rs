//! Setup flags, each tried by building a small ring with it (and only the flag it requires):
//! the kernel version says little, since distributions backport and sysctls forbid.

use super::ring::TRY_ENTRIES;
use super::FeatureCheck;
use io_uring::{cqueue, squeue, IoUring};

/// Builds a small ring with each setup flag (and only what it requires).
pub(super) fn try_setup_flags() -> Vec<FeatureCheck> {
    type Plain = IoUring<squeue::Entry, cqueue::Entry>;
    let build = |f: &dyn Fn(&mut io_uring::Builder) -> &mut io_uring::Builder| {
        let mut b = Plain::builder();
        f(&mut b);
        b.build(TRY_ENTRIES).map(drop)
    };
    let check = FeatureCheck::from_result;
    vec![
        check("SQPOLL", None, build(&|b| b.setup_sqpoll(10))),
        check("IOPOLL", None, build(&|b| b.setup_iopoll())),
        check("COOP_TASKRUN", None, build(&|b| b.setup_coop_taskrun())),
        check(
            "TASKRUN_FLAG",
            Some("COOP_TASKRUN"),
            build(&|b| b.setup_coop_taskrun().setup_taskrun_flag()),
        ),
        check("SINGLE_ISSUER", None, build(&|b| b.setup_single_issuer())),
        check(
            "DEFER_TASKRUN",
            Some("SINGLE_ISSUER"),
            build(&|b| b.setup_single_issuer().setup_defer_taskrun()),
        ),
        check(
            "SQE128",
            None,
            IoUring::<squeue::Entry128, cqueue::Entry>::builder()
                .build(TRY_ENTRIES)
                .map(drop),
        ),
        check(
            "CQE32",
            None,
            IoUring::<squeue::Entry, cqueue::Entry32>::builder()
                .build(TRY_ENTRIES)
                .map(drop),
        ),
        check("NO_SQARRAY", None, build(&|b| b.setup_no_sqarray())),
        check("SUBMIT_ALL", None, build(&|b| b.setup_submit_all())),
    ]
}
