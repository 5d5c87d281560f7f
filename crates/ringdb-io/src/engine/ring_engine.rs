//! The io_uring engines, written once: [`RingEngine`] drives a [`Ring`] for any kind of
//! command (plain file I/O for `uring`/`uring-sync`, NVMe passthrough for `uring-passthrough`).
//! A [`RingCommands`] says how a request becomes a submission entry and how a completion entry
//! becomes an [`IoCompletion`]; everything else (room, submit policy, reaping, counting, draining
//! on drop) is here and in the ring core.

use super::doorbell::{check_user_data, DoorbellWakes};
use super::ring_doorbell::RingDoorbell;
use super::{Engine, EngineStats, IoCompletion, IoRequest};
use crate::config::{EngineKind, IoConfig};
use crate::error::{IoError, Result};
use crate::ring::{Ring, RingAddress, RingSetup};
use io_uring::cqueue;
use io_uring::squeue;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

/// How one kind of io_uring engine turns requests into entries and completions back.
pub trait RingCommands {
    /// The submission entry type (64 or 128 bytes); the doorbell's poll and messages are
    /// 64-byte entries widened into it.
    type Submission: squeue::EntryMarker + From<squeue::Entry>;
    /// The completion entry type (16 or 32 bytes).
    type Completion: cqueue::EntryMarker;

    /// The entry for `request`, and the tag its completion will carry. May reserve state for
    /// the request (released by [`RingCommands::complete`] or [`RingCommands::abandon`]).
    fn prepare(&mut self, request: &IoRequest) -> Result<(Self::Submission, u64)>;

    /// Releases what `prepare` reserved for `tag` when its entry could not be queued.
    fn abandon(&mut self, tag: u64);

    /// The completion for the entry tagged `tag` that finished with `result`.
    fn complete(&mut self, tag: u64, result: i32) -> IoCompletion;

    /// Whether `prepare` takes [`OpKind::PollIn`](super::OpKind::PollIn) requests.
    fn polls(&self) -> bool {
        false
    }
}

/// An io_uring engine: a [`Ring`] plus the commands it carries.
pub struct RingEngine<Commands: RingCommands> {
    ring: Ring<Commands::Submission, Commands::Completion>,
    commands: Commands,
    kind: EngineKind,
    /// `uring-sync`: every push is submitted and waited for at once.
    synchronous: bool,
    depth: usize,
    in_flight: usize,
    completed: u64,
    reaps: u64,
    /// The doorbell's poll and messages (see `ring_doorbell.rs`), never counted in flight.
    doorbell: RingDoorbell,
}

impl<Commands: RingCommands> RingEngine<Commands> {
    /// Builds the ring `config` describes and registers `files` and `buffers` as it says.
    pub(crate) fn open(
        config: &IoConfig,
        files: &[RawFd],
        buffers: Option<&[libc::iovec]>,
        commands: Commands,
    ) -> Result<Self> {
        debug_assert!(config.engine.is_uring());
        let ring = Ring::new(&RingSetup::from_config(config))?;
        if config.register_files && !files.is_empty() {
            ring.register_files(files)?;
        }
        if config.fixed_buffers {
            let buffers = buffers.ok_or(IoError::NoBufferPool)?;
            // SAFETY: the caller owns the memory behind `buffers` and keeps it alive (and does
            // not free it) for the engine's whole lifetime, as `open_engine` documents.
            unsafe { ring.register_buffers(buffers) }?;
        }
        if let Some(cpu) = config.cpu {
            ring.pin_io_workers(cpu)?;
        }
        let depth = config.effective_depth() as usize;
        assert!(depth <= ring.submission_entries() as usize);
        Ok(RingEngine {
            ring,
            commands,
            kind: config.engine,
            synchronous: config.engine == EngineKind::UringSync,
            depth,
            in_flight: 0,
            completed: 0,
            reaps: 0,
            doorbell: RingDoorbell::new(!config.iopoll),
        })
    }

    /// The commands this engine carries (e.g. the NVMe namespaces behind its files).
    pub fn commands(&self) -> &Commands {
        &self.commands
    }

    /// Hands pending entries to the kernel and waits for `wait_for` completions; with
    /// `watch`, the doorbell's poll is armed first, so the wait also ends at a ring.
    fn submit_and_wait(&mut self, wait_for: usize, watch: bool) -> Result<()> {
        let wait_for = wait_for.min(self.in_flight);
        if watch && wait_for > 0 {
            self.doorbell.arm(&mut self.ring)?;
        }
        self.ring.submit(wait_for)?;
        Ok(())
    }
}

impl<Commands: RingCommands> Engine for RingEngine<Commands> {
    fn kind(&self) -> EngineKind {
        self.kind
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn supports_poll(&self) -> bool {
        // `uring-sync` waits for each request as it is pushed: a poll would block there.
        !self.synchronous && self.commands.polls()
    }

    fn pending(&self) -> usize {
        // Doorbell entries go to the kernel in the call that queues them; should an enter
        // have taken none of them, they still never count as requests.
        self.ring.pending().min(self.in_flight)
    }

    unsafe fn push(&mut self, request: &IoRequest) -> Result<()> {
        check_user_data(request.user_data)?;
        if request.op == super::OpKind::PollIn && !self.supports_poll() {
            return Err(super::poll_refused(self.kind));
        }
        if self.in_flight >= self.depth {
            return Err(IoError::QueueFull {
                engine: self.kind,
                in_flight: self.in_flight,
                depth: self.depth,
            });
        }
        let (entry, tag) = self.commands.prepare(request)?;
        // SAFETY: the push contract makes the caller keep the buffer valid until the
        // completion is reaped; the entry holds only that pointer and plain values.
        if let Err(e) = unsafe { self.ring.push(&entry) } {
            self.commands.abandon(tag);
            return Err(e);
        }
        self.in_flight += 1;
        if self.synchronous {
            // Not ended by a doorbell: uring-sync's request is done when push returns.
            self.submit_and_wait(1, false)?;
        }
        Ok(())
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        self.submit_and_wait(wait_for, true)
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        if self.in_flight > 0 {
            // An error here (e.g. EINTR storms) only means nothing new was collected; the
            // completions already posted are still read below.
            let _ = self.ring.prepare_reap();
        }
        let before = out.len();
        for entry in &mut self.ring.completion() {
            let entry: cqueue::Entry = entry.into();
            if RingDoorbell::is_reserved(entry.user_data()) {
                self.doorbell.complete(entry.user_data(), entry.result());
                continue;
            }
            out.push(self.commands.complete(entry.user_data(), entry.result()));
        }
        let reaped = out.len() - before;
        assert!(
            reaped <= self.in_flight,
            "{reaped} completions with {} requests in flight",
            self.in_flight
        );
        self.in_flight -= reaped;
        if reaped > 0 {
            self.reaps += 1;
            self.completed += reaped as u64;
        }
        reaped
    }

    fn stats(&self) -> EngineStats {
        let ring = self.ring.stats();
        EngineStats {
            submitted: ring
                .submitted
                .saturating_sub(self.doorbell.reserved_entries),
            completed: self.completed,
            enters: ring.enters,
            reaps: self.reaps,
        }
    }

    fn watch_doorbell(&mut self, eventfd: Option<Arc<OwnedFd>>) -> bool {
        self.doorbell.watch(eventfd)
    }

    fn wait_for_doorbell(&mut self, eventfd: &Arc<OwnedFd>) -> Result<DoorbellWakes> {
        debug_assert_eq!(
            self.in_flight, 0,
            "a doorbell sleep with requests in flight"
        );
        if !self.doorbell.watch(Some(Arc::clone(eventfd))) {
            return super::doorbell::sleep_on_eventfd(std::os::fd::AsFd::as_fd(&**eventfd));
        }
        self.doorbell.arm(&mut self.ring)?;
        // Ends at the poll's completion or at a doorbell message; reap counts them.
        self.ring.submit(1)?;
        Ok(DoorbellWakes::default())
    }

    fn take_doorbell_wakes(&mut self) -> DoorbellWakes {
        self.doorbell.take_wakes()
    }

    fn doorbell_address(&self) -> Result<Option<RingAddress>> {
        if !self.doorbell.is_supported() {
            return Ok(None);
        }
        self.ring.address().map(Some)
    }

    fn post_doorbell_message(&mut self, to: &RingAddress) -> Result<bool> {
        self.doorbell.post(&mut self.ring, to)
    }
}

impl<Commands: RingCommands> Drop for RingEngine<Commands> {
    fn drop(&mut self) {
        // Never let the ring (and with it the caller's buffers) go while the kernel may still
        // write into them. The doorbell stops first, so no ring wakes the drain's waits.
        self.doorbell.watch(None);
        let _ = self.drain();
        self.doorbell.close(&mut self.ring);
    }
}
