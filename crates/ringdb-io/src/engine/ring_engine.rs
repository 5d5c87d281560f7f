//! The io_uring engines, written once: [`RingEngine`] drives a [`Ring`] for any kind of
//! command (plain file I/O for `uring`/`uring-sync`, NVMe passthrough for `uring-passthrough`).
//! A [`RingCommands`] says how a request becomes a submission entry and how a completion entry
//! becomes an [`IoCompletion`]; everything else (room, submit policy, reaping, counting, draining
//! on drop) is here and in the ring core.

use super::{Engine, EngineStats, IoCompletion, IoRequest};
use crate::config::{EngineKind, IoConfig};
use crate::error::{IoError, Result};
use crate::ring::{Ring, RingSetup};
use io_uring::cqueue;
use io_uring::squeue;
use std::os::fd::RawFd;

/// How one kind of io_uring engine turns requests into entries and completions back.
pub trait RingCommands {
    /// The submission entry type (64 or 128 bytes).
    type Submission: squeue::EntryMarker;
    /// The completion entry type (16 or 32 bytes).
    type Completion: cqueue::EntryMarker;

    /// The entry for `request`, and the tag its completion will carry. May reserve state for
    /// the request (released by [`RingCommands::complete`] or [`RingCommands::abandon`]).
    fn prepare(&mut self, request: &IoRequest) -> Result<(Self::Submission, u64)>;

    /// Releases what `prepare` reserved for `tag` when its entry could not be queued.
    fn abandon(&mut self, tag: u64);

    /// The completion for the entry tagged `tag` that finished with `result`.
    fn complete(&mut self, tag: u64, result: i32) -> IoCompletion;
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
        })
    }

    /// The commands this engine carries (e.g. the NVMe namespaces behind its files).
    pub fn commands(&self) -> &Commands {
        &self.commands
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

    fn pending(&self) -> usize {
        self.ring.pending()
    }

    unsafe fn push(&mut self, request: &IoRequest) -> Result<()> {
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
            self.submit(1)?;
        }
        Ok(())
    }

    fn submit(&mut self, wait_for: usize) -> Result<()> {
        self.ring.submit(wait_for.min(self.in_flight))?;
        Ok(())
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
            submitted: ring.submitted,
            completed: self.completed,
            enters: ring.enters,
            reaps: self.reaps,
        }
    }
}

impl<Commands: RingCommands> Drop for RingEngine<Commands> {
    fn drop(&mut self) {
        // Never let the ring (and with it the caller's buffers) go while the kernel may still
        // write into them.
        let _ = self.drain();
    }
}
