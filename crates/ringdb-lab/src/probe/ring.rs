//! A plain ring, set up for real: whether io_uring works at all, the features the kernel
//! reports, its supported opcodes, and each registration tried on a ring of its own.

use super::format::describe_errno;
use super::opcodes::{known_opcode_name, opcode_name};
use super::{FeatureCheck, ProbeReport};
use io_uring::{IoUring, Probe};
use std::fs;
use std::os::fd::AsRawFd;

/// Entries of the small rings built to try a feature.
pub(super) const TRY_ENTRIES: u32 = 8;

/// Sets up a plain ring: availability, features, supported opcodes, registrations.
pub(super) fn probe_ring(report: &mut ProbeReport) {
    let ring = match IoUring::new(TRY_ENTRIES) {
        Ok(r) => r,
        Err(e) => {
            report.setup_error = Some(describe_errno(&e));
            return;
        }
    };
    report.uring_available = true;
    report.features = ring_features(&ring);
    probe_opcodes(&ring, report);
    report.registrations = try_registrations();
}

/// The opcodes the kernel supports and the well-known ones it lacks (`IORING_REGISTER_PROBE`).
fn probe_opcodes(ring: &IoUring, report: &mut ProbeReport) {
    let mut pr = Probe::new();
    match ring.submitter().register_probe(&mut pr) {
        Ok(()) => {
            for op in 0..=u8::MAX {
                if pr.is_supported(op) {
                    report.opcodes.push(opcode_name(op));
                }
            }
            report.opcodes_missing = (0..=u8::MAX)
                .filter(|op| !pr.is_supported(*op))
                .filter_map(known_opcode_name)
                .map(str::to_string)
                .collect();
        }
        Err(e) => report
            .errors
            .push(format!("IORING_REGISTER_PROBE: {}", describe_errno(&e))),
    }
}

/// The `IORING_FEAT_*` flags the kernel reported for `ring`, without the prefix.
fn ring_features(ring: &IoUring) -> Vec<String> {
    let p = ring.params();
    let all = [
        ("SINGLE_MMAP", p.is_feature_single_mmap()),
        ("NODROP", p.is_feature_nodrop()),
        ("SUBMIT_STABLE", p.is_feature_submit_stable()),
        ("RW_CUR_POS", p.is_feature_rw_cur_pos()),
        ("CUR_PERSONALITY", p.is_feature_cur_personality()),
        ("FAST_POLL", p.is_feature_fast_poll()),
        ("POLL_32BITS", p.is_feature_poll_32bits()),
        ("SQPOLL_NONFIXED", p.is_feature_sqpoll_nonfixed()),
        ("EXT_ARG", p.is_feature_ext_arg()),
        ("NATIVE_WORKERS", p.is_feature_native_workers()),
        ("RSRC_TAGS", p.is_feature_resource_tagging()),
        ("CQE_SKIP", p.is_feature_skip_cqe_on_success()),
        ("LINKED_FILE", p.is_feature_linked_file()),
        ("RECVSEND_BUNDLE", p.is_feature_recvsend_bundle()),
        ("MIN_TIMEOUT", p.is_feature_min_timeout()),
        ("NO_IOWAIT", p.is_feature_no_iowait()),
    ];
    all.iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Each registration on its own fresh ring, so that one failure cannot hide another.
fn try_registrations() -> Vec<FeatureCheck> {
    let ring_fd = IoUring::new(TRY_ENTRIES).and_then(|ring| {
        let mut sub = ring.submitter();
        sub.register_ring_fd()
    });

    // Declared before the ring so that it outlives the registration (the ring drops first).
    let buf = vec![0u8; 4096];
    let buffers = IoUring::new(TRY_ENTRIES).and_then(|ring| {
        let iov = [libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        }];
        // SAFETY: the iovec describes `buf`, which stays allocated and unmoved until after
        // `ring` (and with it the registration) is dropped at the end of this closure; nothing
        // is submitted, so the kernel never writes into it.
        unsafe { ring.submitter().register_buffers(&iov) }
    });

    let files = fs::File::open("/dev/null").and_then(|f| {
        let ring = IoUring::new(TRY_ENTRIES)?;
        ring.submitter().register_files(&[f.as_raw_fd()])
    });

    vec![
        FeatureCheck::from_result("register_ring_fd", None, ring_fd),
        FeatureCheck::from_result("register_buffers (4 KiB)", None, buffers),
        FeatureCheck::from_result("register_files", None, files),
    ]
}
