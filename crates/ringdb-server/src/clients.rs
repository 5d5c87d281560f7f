//! Every open connection, as `CLIENT LIST` shows it and `CLIENT KILL` finds it.
//!
//! A connection lives on one worker's thread, its session with it; other connections see it
//! through this table only. The worker registers a connection when it accepts it and the
//! registration leaves the table before the socket is closed (it is the connection's first
//! field, so it drops first). `CLIENT KILL` shuts a socket down under the table's lock, so the
//! descriptor it shuts is the registered connection's, never a later one that reused the
//! number: the owning worker then sees its operations end and frees the connection as when
//! the peer closes. What a session changes about itself (its name, library, protocol) is
//! copied here by the commands that change it; how long it has been idle is one atomic the
//! worker stores when a batch starts.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The most connections one `CLIENT KILL` or `CLIENT LIST` looks at (a bound on the walk;
/// the client limit is lower).
const CONNECTIONS_MAX: usize = 1 << 20;

/// What a session tells about itself (`CLIENT SETNAME`, `SETINFO`, `HELLO`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Described {
    pub name: String,
    pub library_name: String,
    pub library_version: String,
    pub resp: u8,
}

/// One registered connection.
struct Entry {
    socket: RawFd,
    peer: String,
    local: String,
    created: Instant,
    described: Described,
    /// Milliseconds since `created` when the connection's last batch started.
    active_ms: Arc<AtomicU64>,
}

/// The table of open connections (one per server).
#[derive(Default)]
pub struct ClientTable {
    entries: Mutex<BTreeMap<u64, Entry>>,
}

/// Which connections `CLIENT KILL` ends (its filters, all of which must match).
#[derive(Debug, Default)]
pub struct KillFilter {
    pub id: Option<u64>,
    pub peer: Option<String>,
    pub local: Option<String>,
    /// `USER name`: only the default user exists, so another name matches nobody.
    pub user_matches: bool,
    /// `MAXAGE seconds`: older connections only.
    pub max_age_secs: Option<u64>,
    /// The connection asking, spared unless `SKIPME no`.
    pub skip: Option<u64>,
}

/// A connection's place in the table: leaves it when dropped.
pub struct Registration {
    table: Arc<ClientTable>,
    id: u64,
    created: Instant,
    active_ms: Arc<AtomicU64>,
}

impl Registration {
    /// Marks the connection active now (a batch of its requests starts).
    pub fn touch(&self) {
        let elapsed = self.created.elapsed().as_millis() as u64;
        self.active_ms.store(elapsed, Ordering::Relaxed);
    }
}

impl Registration {
    /// How long since the connection's last batch started (or since it was accepted).
    pub fn idle(&self) -> std::time::Duration {
        let active = std::time::Duration::from_millis(self.active_ms.load(Ordering::Relaxed));
        self.created.elapsed().saturating_sub(active)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let removed = self.table.lock().remove(&self.id);
        debug_assert!(removed.is_some(), "connection {} registered once", self.id);
    }
}

impl ClientTable {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers connection `id` on `socket`; it stays until the registration drops.
    pub fn register(
        self: &Arc<Self>,
        id: u64,
        socket: RawFd,
        peer: String,
        local: String,
    ) -> Registration {
        let created = Instant::now();
        let active_ms = Arc::new(AtomicU64::new(0));
        let entry = Entry {
            socket,
            peer,
            local,
            created,
            described: Described {
                resp: 2,
                ..Described::default()
            },
            active_ms: active_ms.clone(),
        };
        let previous = self.lock().insert(id, entry);
        assert!(previous.is_none(), "client id {id} registered twice");
        Registration {
            table: self.clone(),
            id,
            created,
            active_ms,
        }
    }

    /// Copies what connection `id` says about itself.
    pub fn describe(&self, id: u64, described: Described) {
        if let Some(entry) = self.lock().get_mut(&id) {
            entry.described = described;
        }
    }

    /// `CLIENT LIST` lines of the connections `wanted` (all when `None`), by id; `own`
    /// replaces the asking connection's line (it knows more about itself).
    pub fn lines(&self, wanted: Option<&[u64]>, own: (u64, &str)) -> String {
        let entries = self.lock();
        let mut text = String::new();
        for (id, entry) in entries.iter().take(CONNECTIONS_MAX) {
            if wanted.is_some_and(|ids| !ids.contains(id)) {
                continue;
            }
            match *id == own.0 {
                true => text.push_str(own.1),
                false => text.push_str(&line(*id, entry)),
            }
            text.push('\n');
        }
        text
    }

    /// `laddr` of connection `id` (empty when not registered: a test driving sessions alone).
    pub fn local_address(&self, id: u64) -> String {
        self.lock()
            .get(&id)
            .map_or(String::new(), |entry| entry.local.clone())
    }

    /// Ends every connection `filter` matches but the asking one (`own`), whose match is
    /// returned beside the count of the others: it closes itself after its reply.
    pub fn kill(&self, filter: &KillFilter, own: u64) -> (usize, bool) {
        let entries = self.lock();
        let (mut killed, mut itself) = (0, false);
        for (id, entry) in entries.iter().take(CONNECTIONS_MAX) {
            if !filter.matches(*id, entry) {
                continue;
            }
            if *id == own {
                itself = true;
                continue;
            }
            // SAFETY: the descriptor is the registered connection's and still open: it leaves
            // this table (under this lock) before its socket is closed. No memory is passed.
            unsafe { libc::shutdown(entry.socket, libc::SHUT_RDWR) };
            killed += 1;
        }
        (killed, itself)
    }
}

impl KillFilter {
    fn matches(&self, id: u64, entry: &Entry) -> bool {
        self.user_matches
            && self.skip != Some(id)
            && self.id.is_none_or(|wanted| wanted == id)
            && self.peer.as_ref().is_none_or(|peer| *peer == entry.peer)
            && self
                .local
                .as_ref()
                .is_none_or(|local| *local == entry.local)
            && self
                .max_age_secs
                .is_none_or(|age| entry.created.elapsed().as_secs() >= age)
    }
}

fn line(id: u64, entry: &Entry) -> String {
    let age = entry.created.elapsed();
    let active = entry.active_ms.load(Ordering::Relaxed);
    let idle_secs = (age.as_millis() as u64).saturating_sub(active) / 1000;
    let d = &entry.described;
    format!(
        "id={id} addr={} laddr={} fd={} name={} age={} idle={idle_secs} flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 user=default resp={} lib-name={} lib-ver={}",
        entry.peer, entry.local, entry.socket, d.name, age.as_secs(), d.resp, d.library_name, d.library_version,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_leave_the_table_and_filters_match_what_they_name() {
        let table = Arc::new(ClientTable::default());
        let first = table.register(1, -1, "127.0.0.1:1000".into(), "127.0.0.1:6379".into());
        let second = table.register(2, -1, "127.0.0.1:1001".into(), "127.0.0.1:6379".into());
        table.describe(
            2,
            Described {
                name: "two".into(),
                resp: 3,
                ..Described::default()
            },
        );
        let lines = table.lines(None, (1, "mine"));
        assert!(
            lines.starts_with("mine\nid=2 addr=127.0.0.1:1001 "),
            "{lines}"
        );
        assert!(
            lines.contains(" name=two ") && lines.contains(" resp=3 "),
            "{lines}"
        );
        assert_eq!(table.lines(Some(&[2]), (1, "mine")).lines().count(), 1);
        // By address: only the asking connection matches, and it is not shut down here.
        let filter = KillFilter {
            peer: Some("127.0.0.1:1000".into()),
            user_matches: true,
            ..KillFilter::default()
        };
        assert_eq!(table.kill(&filter, 1), (0, true));
        let skipped = KillFilter {
            skip: Some(1),
            ..filter
        };
        assert_eq!(table.kill(&skipped, 1), (0, false));
        drop(first);
        drop(second);
        assert_eq!(table.lines(None, (0, "")), "");
    }
}
