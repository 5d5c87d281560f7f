//! The server's network side: listeners, one worker thread per shard, each with its own ring
//! (`worker.rs`), and the handle that stops them.

mod conn;
mod epoll;
mod provided;
mod ring_reader;
mod transport;
mod wake;
mod worker;

use crate::config::{Placement, TransportKind};
use crate::error::ServeError;
use crate::shared::ServerShared;
pub use ring_reader::RingReader;
use ringdb::Db;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Backlog of each listener.
const LISTEN_BACKLOG: i32 = 1024;

fn os_error(what: &str) -> ServeError {
    ServeError::Listen {
        what: what.to_string(),
        source: std::io::Error::last_os_error(),
    }
}

/// A TCP listener on `address` that other workers may bind too (SO_REUSEPORT).
pub fn tcp_listener(address: SocketAddr) -> Result<OwnedFd, ServeError> {
    let family = if address.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket takes no pointers; the result is checked.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_error("socket"));
    }
    // SAFETY: a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let on: libc::c_int = 1;
    for option in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        // SAFETY: passes a live int of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&on as *const libc::c_int).cast(),
                4,
            )
        };
        if rc != 0 {
            return Err(os_error("setsockopt"));
        }
    }
    let (storage, length) = socket_address(address);
    // SAFETY: `storage` holds a valid address of `length` bytes for the socket's family.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            length,
        )
    };
    if rc != 0 {
        return Err(ServeError::Listen {
            what: format!("bind {address}"),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: listen on a bound socket we own.
    if unsafe { libc::listen(fd.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
        return Err(os_error("listen"));
    }
    Ok(fd)
}

fn socket_address(address: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value of the type.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let length = match address {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, length as libc::socklen_t)
}

/// The address a TCP listener is bound to.
pub fn local_address(fd: &OwnedFd) -> Result<SocketAddr, ServeError> {
    let listener =
        std::net::TcpListener::from(fd.try_clone().map_err(|source| ServeError::Listen {
            what: "dup".into(),
            source,
        })?);
    listener.local_addr().map_err(|source| ServeError::Listen {
        what: "getsockname".into(),
        source,
    })
}

/// A Unix-socket listener at `path` (a stale socket file is replaced).
pub fn unix_listener(path: &Path) -> Result<OwnedFd, ServeError> {
    let _ = std::fs::remove_file(path);
    let listener =
        std::os::unix::net::UnixListener::bind(path).map_err(|source| ServeError::Listen {
            what: format!("bind {}", path.display()),
            source,
        })?;
    Ok(OwnedFd::from(listener))
}

/// Starts `workers` threads, each with its own TCP listener on `address` (if any); the first
/// also takes `unix`.
pub fn start_workers(
    db: &Db,
    shared: &Arc<ServerShared>,
    workers: usize,
    address: Option<SocketAddr>,
    mut unix: Option<OwnedFd>,
) -> Result<Vec<JoinHandle<Result<(), std::io::Error>>>, ServeError> {
    assert!(workers >= 1);
    let mut prepared = Vec::with_capacity(workers);
    let mut address = address;
    for _ in 0..workers {
        let mut listeners = Vec::new();
        if let Some(wanted) = address {
            let listener = tcp_listener(wanted)?;
            // Port 0 asks for any port: the other workers bind the one the first was given.
            let bound = local_address(&listener)?;
            shared.set_bound_address(bound);
            address = Some(bound);
            listeners.push(listener);
        }
        listeners.extend(unix.take());
        prepared.push(listeners);
    }
    let on_shards = on_shards(db, shared, workers)?;
    let mut threads = Vec::with_capacity(workers);
    for (index, listeners) in prepared.into_iter().enumerate() {
        let (started, ready) = std::sync::mpsc::sync_channel(1);
        let start = WorkerStart {
            index,
            listeners,
            db: db.clone(),
            shared: shared.clone(),
            on_shard: on_shards,
            started,
        };
        let thread = std::thread::Builder::new()
            .name(format!("ringdb-serve-{index}"))
            .spawn(move || start.run())
            .map_err(|source| ServeError::Ring { source })?;
        threads.push(thread);
        let started = ready
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("a network worker ended at start")));
        if let Err(source) = started {
            shared.request_shutdown();
            return Err(ServeError::Ring { source });
        }
    }
    Ok(threads)
}

/// Whether the workers run on the shards' threads (see [`Placement`]).
fn on_shards(db: &Db, shared: &ServerShared, workers: usize) -> Result<bool, ServeError> {
    let network = shared.config().network;
    let wanted = match network.placement {
        Placement::Threads => return Ok(false),
        Placement::Shards => true,
        Placement::Auto => false,
    };
    let why_not = if workers != db.shard_count() {
        Some(format!(
            "{workers} workers for {} shards (one per shard is needed)",
            db.shard_count()
        ))
    } else if network.transport == TransportKind::Epoll {
        Some("the network uses epoll".to_string())
    } else {
        match db.run_on(0, |shard| async move { shard.io().supports_poll() }) {
            Ok(true) => None,
            Ok(false) => Some("the shards' I/O engine is not io_uring".to_string()),
            Err(error) => Some(error.to_string()),
        }
    };
    match why_not {
        None => Ok(true),
        Some(reason) if wanted => Err(ServeError::Ring {
            source: std::io::Error::other(format!(
                "the network cannot run on the shards' threads: {reason}"
            )),
        }),
        Some(reason) => {
            tracing::info!("network workers on threads of their own: {reason}");
            Ok(false)
        }
    }
}

/// What a worker's thread needs to start it.
struct WorkerStart {
    index: usize,
    listeners: Vec<OwnedFd>,
    db: Db,
    shared: Arc<ServerShared>,
    on_shard: bool,
    /// Told once the worker is set up, or why it could not be.
    started: std::sync::mpsc::SyncSender<std::io::Result<()>>,
}

impl WorkerStart {
    /// Sets the worker up and serves: on this thread, or as a task of shard `index` (this
    /// thread then waits for it).
    fn run(self) -> std::io::Result<()> {
        let WorkerStart {
            index,
            listeners,
            db,
            shared,
            on_shard,
            started,
        } = self;
        if !on_shard {
            let worker = announce(worker::Worker::new(listeners, db, shared, false), &started)?;
            return worker.run();
        }
        let runner = db.clone();
        let served = runner.run_on(index, move |shard| async move {
            let worker = announce(worker::Worker::new(listeners, db, shared, true), &started)?;
            worker
                .serve_on_shard(shard.io().clone(), shard.doorbell())
                .await
        });
        served.unwrap_or_else(|error| Err(std::io::Error::other(error.to_string())))
    }
}

/// Tells the starting thread how the worker's setup went.
fn announce<T>(
    setup: std::io::Result<T>,
    started: &std::sync::mpsc::SyncSender<std::io::Result<()>>,
) -> std::io::Result<T> {
    let _ = started.send(match &setup {
        Ok(_) => Ok(()),
        Err(error) => Err(std::io::Error::new(error.kind(), error.to_string())),
    });
    setup
}
