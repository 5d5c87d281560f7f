//! The baseline: readiness notification with `epoll_wait` (level-triggered) and non-blocking
//! `send`/`recv` system calls.

use super::{Event, Handler, Transport, TransportStats};
use crate::config::{NetConfig, TransportKind};
use crate::error::{CloseStage, NetError, NetSetting, Result};
use crate::sys::{set_nonblocking, Conn, Region, SlotPool};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

struct EConn {
    conn: Conn,
    /// Sends in order: (slot, bytes already sent, len).
    queue: VecDeque<(u32, usize, usize)>,
    want_out: bool,
    closed: bool,
}

pub struct EpollTransport {
    epfd: OwnedFd,
    conns: Vec<EConn>,
    pool: SlotPool,
    recv: Region,
    recv_size: usize,
    done: VecDeque<usize>,
    events: Vec<libc::epoll_event>,
    io_timeout: Duration,
    stats: TransportStats,
}

impl EpollTransport {
    pub fn new(cfg: &NetConfig, conns: Vec<Conn>) -> Result<Self> {
        // SAFETY: epoll_create1 takes no pointers; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(NetError::io("epoll_create1", io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut t = EpollTransport {
            epfd,
            conns: Vec::with_capacity(conns.len()),
            pool: SlotPool::new(cfg.send_buf_size, cfg.send_bufs)?,
            recv: Region::new(cfg.recv_buf_size)?,
            recv_size: cfg.recv_buf_size,
            done: VecDeque::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; conns.len().max(1) * 2],
            io_timeout: cfg.io_timeout,
            stats: TransportStats::default(),
        };
        for (i, c) in conns.into_iter().enumerate() {
            set_nonblocking(c.raw(), true)?;
            t.conns.push(EConn {
                conn: c,
                queue: VecDeque::new(),
                want_out: false,
                closed: false,
            });
            t.ctl(libc::EPOLL_CTL_ADD, i, false)?;
        }
        Ok(t)
    }

    fn ctl(&mut self, op: i32, i: usize, out: bool) -> Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32
                | if out { libc::EPOLLOUT as u32 } else { 0 },
            u64: i as u64,
        };
        // SAFETY: ev is valid for the call; both fds are open and owned by self.
        let r = unsafe {
            libc::epoll_ctl(self.epfd.as_raw_fd(), op, self.conns[i].conn.raw(), &mut ev)
        };
        if r < 0 {
            return Err(NetError::io("epoll_ctl", io::Error::last_os_error()));
        }
        self.conns[i].want_out = out;
        Ok(())
    }

    fn peer_err(&self, i: usize, e: io::Error) -> NetError {
        NetError::Peer {
            conn: i,
            peer: self.conns[i].conn.peer.clone(),
            source: e,
        }
    }

    /// Sends as much of `i`'s queue as the socket takes now.
    fn flush(&mut self, i: usize) -> Result<()> {
        while let Some(&(slot, off, len)) = self.conns[i].queue.front() {
            let p = self.pool.ptr(slot, off);
            // SAFETY: p..p+len-off lies inside the slot, which the transport owns until the
            // send completes; send(2) only reads it during the call.
            let n = unsafe {
                libc::send(
                    self.conns[i].conn.raw(),
                    p as *const libc::c_void,
                    len - off,
                    libc::MSG_NOSIGNAL,
                )
            };
            self.stats.syscalls += 1;
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(self.peer_err(i, e)),
                }
            }
            let n = n as usize;
            self.stats.bytes_sent += n as u64;
            self.stats.send_ops += 1;
            if off + n < len {
                self.stats.short_sends += 1;
                self.conns[i].queue.front_mut().expect("front exists").1 = off + n;
                continue;
            }
            self.conns[i].queue.pop_front();
            self.pool.free(slot);
            self.done.push_back(i);
        }
        let want = !self.conns[i].queue.is_empty();
        if want != self.conns[i].want_out {
            self.ctl(libc::EPOLL_CTL_MOD, i, want)?;
        }
        Ok(())
    }

    /// Reads what is there on `i`; returns events delivered.
    fn drain(&mut self, i: usize, h: &mut Handler<'_>) -> Result<usize> {
        let mut n_ev = 0;
        // Bounded: fairness between connections, the level-triggered epoll comes back.
        for _ in 0..16 {
            if self.conns[i].closed {
                break;
            }
            let buf = self.recv.as_ptr();
            // SAFETY: buf..buf+recv_size is our receive region; recv(2) writes only during the call.
            let n = unsafe {
                libc::recv(
                    self.conns[i].conn.raw(),
                    buf as *mut libc::c_void,
                    self.recv_size,
                    0,
                )
            };
            self.stats.syscalls += 1;
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(self.peer_err(i, e)),
                }
            }
            let n = n as usize;
            self.stats.recv_ops += 1;
            if n == 0 && !self.conns[i].conn.datagram {
                self.conns[i].closed = true;
                self.ctl(libc::EPOLL_CTL_DEL, i, false)?;
                h(Event::Closed { conn: i })?;
                n_ev += 1;
                break;
            }
            self.stats.bytes_recv += n as u64;
            h(Event::Recv {
                conn: i,
                data: self.recv.slice(0, n),
            })?;
            n_ev += 1;
            if n < self.recv_size && !self.conns[i].conn.datagram {
                break;
            }
        }
        Ok(n_ev)
    }
}

impl Transport for EpollTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Epoll
    }

    fn num_conns(&self) -> usize {
        self.conns.len()
    }

    fn slot_size(&self) -> usize {
        self.pool.slot_size
    }

    fn alloc(&mut self) -> Option<u32> {
        self.pool.alloc()
    }

    fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        self.pool.slot_mut(slot)
    }

    fn send(&mut self, conn: usize, slot: u32, len: usize) -> Result<()> {
        NetError::check_range(NetSetting::SendLength, len, 0, self.pool.slot_size)?;
        if self.conns[conn].closed {
            return Err(NetError::PeerClosed {
                peer: self.conns[conn].conn.peer.clone(),
                when: CloseStage::BeforeSend,
            });
        }
        self.conns[conn].queue.push_back((slot, 0, len));
        if self.conns[conn].queue.len() == 1 {
            self.flush(conn)?;
        }
        Ok(())
    }

    fn pending_sends(&self) -> usize {
        self.conns.iter().map(|c| c.queue.len()).sum::<usize>() + self.done.len()
    }

    fn poll(&mut self, timeout: Option<Duration>, h: &mut Handler<'_>) -> Result<usize> {
        let mut n_ev = 0;
        while let Some(c) = self.done.pop_front() {
            h(Event::SendDone { conn: c })?;
            n_ev += 1;
        }
        let timeout = timeout.unwrap_or(self.io_timeout);
        let ms = if n_ev > 0 {
            0
        } else {
            timeout.as_millis().min(i32::MAX as u128) as i32
        };
        let cap = self.events.len() as i32;
        // SAFETY: events has room for `cap` entries; epoll_wait writes at most that many.
        let r =
            unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), self.events.as_mut_ptr(), cap, ms) };
        self.stats.syscalls += 1;
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(n_ev);
            }
            return Err(NetError::io("epoll_wait", e));
        }
        for k in 0..r as usize {
            let ev = self.events[k];
            let (flags, i) = (ev.events, ev.u64 as usize);
            if flags & libc::EPOLLOUT as u32 != 0 {
                self.flush(i)?;
            }
            if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32
                != 0
            {
                n_ev += self.drain(i, h)?;
            }
        }
        while let Some(c) = self.done.pop_front() {
            h(Event::SendDone { conn: c })?;
            n_ev += 1;
        }
        Ok(n_ev)
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}
