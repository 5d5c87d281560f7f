//! Building a ring: which setup flags a [`RingSetup`] turns into, the queue sizes, and the
//! typed refusal when the kernel will not build it.

use crate::config::{IoConfig, SetupMode, SqPoll};
use crate::error::{IoError, Result, SetupRefusal, Switch};
use io_uring::{cqueue, squeue, IoUring};
use std::io;

/// Everything needed to build one ring. [`RingSetup::from_config`] derives it from an
/// [`IoConfig`]; network transports fill it in directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSetup {
    /// How completions' task work runs (default, cooperative, or deferred to the issuer).
    pub mode: SetupMode,
    /// A kernel thread polls the submission queue.
    pub sqpoll: Option<SqPoll>,
    /// Completions are polled from the device (`IORING_SETUP_IOPOLL`).
    pub iopoll: bool,
    /// `IORING_SETUP_SINGLE_ISSUER` even without deferred task work (implied by
    /// [`SetupMode::Defer`]).
    pub single_issuer: bool,
    /// Submission-queue entries wanted (rounded up to a power of two, at least 2).
    pub submission_entries: u32,
    /// Completion-queue entries; `None` means twice the submission queue.
    pub completion_entries: Option<u32>,
    /// `IORING_REGISTER_RING_FDS`: enter the ring by its registered index.
    pub register_ring_fd: bool,
}

impl RingSetup {
    /// A plain ring of `submission_entries` entries: every switch off.
    pub fn new(submission_entries: u32) -> Self {
        RingSetup {
            mode: SetupMode::Default,
            sqpoll: None,
            iopoll: false,
            single_issuer: false,
            submission_entries,
            completion_entries: None,
            register_ring_fd: false,
        }
    }

    /// The ring an engine opened with `config` uses: one submission entry per request it may
    /// keep in flight.
    pub fn from_config(config: &IoConfig) -> Self {
        RingSetup {
            mode: config.setup,
            sqpoll: config.sqpoll,
            iopoll: config.iopoll,
            single_issuer: false,
            submission_entries: config.effective_depth(),
            completion_entries: config.cq_size,
            register_ring_fd: config.register_ring_fd,
        }
    }

    /// Submission-queue entries the ring will have (what the kernel is asked for).
    pub fn rounded_submission_entries(&self) -> u32 {
        self.submission_entries.next_power_of_two().max(2)
    }

    /// Builds the io_uring instance (registrations are the caller's next step).
    pub(crate) fn build<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        &self,
    ) -> Result<IoUring<S, C>> {
        let mut builder = IoUring::<S, C>::builder();
        let mut features = Vec::new();
        if std::mem::size_of::<S>() > 64 || std::mem::size_of::<C>() > 16 {
            features.push("SQE128|CQE32");
        }
        match self.mode {
            SetupMode::Default => {}
            SetupMode::Coop => {
                builder.setup_coop_taskrun().setup_taskrun_flag();
                features.push("COOP_TASKRUN");
            }
            SetupMode::Defer => {
                builder
                    .setup_defer_taskrun()
                    .setup_single_issuer()
                    .setup_taskrun_flag();
                features.push("DEFER_TASKRUN|SINGLE_ISSUER");
            }
        }
        if self.single_issuer && self.mode != SetupMode::Defer {
            builder.setup_single_issuer();
            features.push("SINGLE_ISSUER");
        }
        if let Some(sqpoll) = self.sqpoll {
            builder.setup_sqpoll(sqpoll.idle_ms);
            if let Some(cpu) = sqpoll.cpu {
                builder.setup_sqpoll_cpu(cpu);
            }
            features.push("SQPOLL");
        }
        if self.iopoll {
            builder.setup_iopoll();
            features.push("IOPOLL");
        }
        let submission_entries = self.rounded_submission_entries();
        let completion_entries = self
            .completion_entries
            .unwrap_or(2 * submission_entries)
            .max(submission_entries);
        builder.setup_cqsize(completion_entries);
        let uring = builder
            .build(submission_entries)
            .map_err(|e| self.refusal(&features, e))?;
        assert!(uring.params().sq_entries() >= submission_entries);
        assert!(uring.params().cq_entries() >= completion_entries);
        Ok(uring)
    }

    /// The typed refusal for a ring the kernel would not build.
    fn refusal(&self, features: &[&str], error: io::Error) -> IoError {
        if error.raw_os_error() == Some(libc::EPERM) {
            if let Some(value) = crate::limits::io_uring_disabled().filter(|v| *v != 0) {
                return IoError::UringDisabled { value };
            }
        }
        if error.raw_os_error() == Some(libc::ENOSYS) {
            return IoError::Unsupported {
                switch: Switch::IoUring,
                reason:
                    "this kernel has no io_uring (ENOSYS); use an engine without it (posix, libaio)"
                        .into(),
            };
        }
        let big_entries = features.first() == Some(&"SQE128|CQE32");
        let refusal = match (big_entries, self.sqpoll.is_some(), error.raw_os_error()) {
            (true, _, Some(libc::EINVAL)) => SetupRefusal::LargeEntriesUnsupported,
            (false, true, Some(libc::EINVAL)) => SetupRefusal::SqpollCpu,
            (false, false, Some(libc::EINVAL)) => SetupRefusal::FlagUnsupported,
            (_, _, Some(libc::ENOMEM)) => SetupRefusal::LockedMemory,
            _ => SetupRefusal::Other,
        };
        let features = if features.is_empty() {
            format!("{} entries", self.submission_entries)
        } else {
            features.join("+")
        };
        IoError::SetupRefused {
            features,
            refusal,
            source: error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqe128_refusal_is_typed_and_says_why() {
        let setup = RingSetup::new(8);
        let e = setup.refusal(
            &["SQE128|CQE32"],
            io::Error::from_raw_os_error(libc::EINVAL),
        );
        assert!(
            matches!(
                e,
                IoError::SetupRefused {
                    refusal: SetupRefusal::LargeEntriesUnsupported,
                    ..
                }
            ),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("SQE128") && msg.contains("5.19"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn queue_sizes_round_up() {
        let mut setup = RingSetup::new(3);
        assert_eq!(setup.rounded_submission_entries(), 4);
        setup.submission_entries = 1;
        assert_eq!(setup.rounded_submission_entries(), 2);
        let ring = setup.build::<squeue::Entry, cqueue::Entry>().unwrap();
        assert_eq!(ring.params().sq_entries(), 2);
        assert_eq!(ring.params().cq_entries(), 4);
    }
}
