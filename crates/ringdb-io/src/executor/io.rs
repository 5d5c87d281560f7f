//! The [`Io`] handle: what tasks use to issue I/O, lease buffers and spawn. Each request
//! method builds an [`IoRequest`] and awaits its [`OpFuture`], which owns the buffer until the
//! result comes back with it.

use super::buffers::IoBuf;
use super::doorbell::DoorbellRung;
use super::join::{joinable, yield_now, JoinHandle};
use super::op::OpFuture;
use super::pool::PoolBuf;
use super::shared::Inner;
use super::submit_together::SubmitTogether;
use crate::buf::AlignedBuf;
use crate::engine::{FileId, IoRequest, OpKind};
use crate::error::{IoError, Result, Setting};
use std::future::Future;
use std::rc::Rc;

/// The handle tasks use for I/O and spawning. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct Io {
    pub(super) inner: Rc<Inner>,
}

impl Io {
    /// The runtime's counters and its engine's (as [`Runtime::stats`](super::Runtime::stats)).
    pub fn stats(&self) -> super::RuntimeStats {
        self.inner.stats_now()
    }

    /// Starts a task on this runtime. After the runtime is dropped the future is dropped
    /// unpolled and the handle never resolves.
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let (task, handle) = joinable(fut);
        self.inner.spawn_task(task);
        handle
    }

    /// Reads `buf.bytes_len()` bytes at `offset` into `buf`; returns the byte count (short at
    /// end of file: the caller decides).
    pub async fn read<B: IoBuf>(&self, file: FileId, offset: u64, buf: B) -> (Result<usize>, B) {
        self.read_or_write(OpKind::Read, file, offset, buf).await
    }

    /// Writes `buf` at `offset`; returns the byte count.
    pub async fn write<B: IoBuf>(&self, file: FileId, offset: u64, buf: B) -> (Result<usize>, B) {
        self.read_or_write(OpKind::Write, file, offset, buf).await
    }

    async fn read_or_write<B: IoBuf>(
        &self,
        op: OpKind,
        file: FileId,
        offset: u64,
        mut buf: B,
    ) -> (Result<usize>, B) {
        let Ok(len) = u32::try_from(buf.bytes_len()) else {
            return (
                Err(IoError::OutOfRange {
                    setting: Setting::BufferSize,
                    value: buf.bytes_len() as u64,
                    min: 0,
                    max: u32::MAX as u64,
                }),
                buf,
            );
        };
        let ptr = buf.stable_ptr();
        let request = IoRequest {
            op,
            file,
            offset,
            buf: ptr,
            len,
            buf_index: self.registered_index(buf.fixed_index(), ptr, len as usize),
            user_data: 0,
        };
        let (result, buf) = OpFuture::new(self.inner.clone(), request, Some(buf)).await;
        let buf = buf.expect("an OpFuture returns the buffer it was given");
        (result.map(|n| n as usize), buf)
    }

    /// `index` if `[ptr, ptr + len_bytes)` lies inside this runtime's registered buffer
    /// `index`: a buffer of another runtime's pool does plain I/O here.
    fn registered_index(&self, index: Option<u16>, ptr: *mut u8, len_bytes: usize) -> Option<u16> {
        let pool = self.inner.pool.as_ref()?;
        pool.registered_index_of(index?, ptr, len_bytes)
    }

    /// `fsync` (or `fdatasync` with `datasync`) of `file`.
    pub async fn fsync(&self, file: FileId, datasync: bool) -> Result<()> {
        let op = if datasync {
            OpKind::Fdatasync
        } else {
            OpKind::Fsync
        };
        let request = IoRequest::sync(op, file, 0);
        OpFuture::<AlignedBuf>::new(self.inner.clone(), request, None)
            .await
            .0
            .map(|_| ())
    }

    /// A request that does nothing: the pure cost of the submission path.
    pub async fn nop(&self) -> Result<()> {
        OpFuture::<AlignedBuf>::new(self.inner.clone(), IoRequest::nop(0), None)
            .await
            .0
            .map(|_| ())
    }

    /// Whether [`Io::wait_readable`] works on this runtime (its engine is `uring`).
    pub fn supports_poll(&self) -> bool {
        self.inner.engine.borrow().supports_poll()
    }

    /// Resolves once `fd` is readable (`POLLIN`), waiting on the runtime's own ring with its
    /// other I/O: a runtime can serve a second ring (whose descriptor is readable while it
    /// has completions) or an eventfd from the same thread. Refused where
    /// [`Io::supports_poll`] is false. The descriptor must stay open until this resolves: a
    /// dropped future's poll stays in the ring until the descriptor becomes readable.
    pub async fn wait_readable(&self, fd: std::os::fd::RawFd) -> Result<()> {
        let request = IoRequest::poll_in(fd, 0);
        OpFuture::<AlignedBuf>::new(self.inner.clone(), request, None)
            .await
            .0
            .map(|_| ())
    }

    /// A free buffer of the runtime's pool, if one is free and nobody waits for one.
    pub fn lease_buf(&self) -> Option<PoolBuf> {
        self.inner.pool.as_ref()?.try_lease()
    }

    /// A buffer of the runtime's pool, waiting (FIFO) for one to be returned if all are
    /// leased. Fails at once when the runtime has no pool.
    pub async fn lease(&self) -> Result<PoolBuf> {
        let shared = self.inner.pool.clone().ok_or(IoError::NoBufferPool)?;
        Ok(shared.lease().await)
    }

    /// A future that resolves once the runtime's [`Doorbell`](super::Doorbell) was rung since
    /// the last such future resolved (at once if it was). While one is pending and a doorbell
    /// handle exists, the runtime sleeps until rung instead of reporting a stall.
    pub fn doorbell_rung(&self) -> DoorbellRung {
        DoorbellRung::new(self.inner.clone())
    }

    /// Lets the other ready tasks (and the I/O loop) run before this one continues.
    pub async fn yield_now(&self) {
        yield_now().await
    }

    /// Runs `fut` so that the requests its first poll queues go to the kernel together, in
    /// one submission, whatever the batching policy (e.g. a batch of eviction writes under
    /// [`Batching::Each`](crate::config::Batching::Each)). When no other task is ready they
    /// go out with the loop's wait.
    pub fn submit_together<F: Future>(&self, fut: F) -> SubmitTogether<F> {
        SubmitTogether::new(self.inner.clone(), fut)
    }
}
