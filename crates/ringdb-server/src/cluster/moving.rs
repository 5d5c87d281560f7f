//! What a node tracks while slot ranges move away from it: the keys of those slots written
//! since the migration began (sent again before the switch), the writes in progress, and the
//! fence that makes writes to the moving slots wait (`-TRYAGAIN`) for the last pass.
//!
//! Every write of a cluster node holds a [`WriteTicket`] from before it runs until it is
//! applied. Without a migration the ticket is one atomic count; during one, a ticket of a
//! write to a moving slot records its keys as dirty when dropped, after the write is applied,
//! so a pass that takes the dirty keys afterwards reads the written value.

use super::in_ranges;
use crate::command::Reply;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The error a fenced write gets (Redis's text; cluster clients retry it).
pub const TRY_AGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

/// How long a finished migration keeps its slots fenced waiting for the topology that moves
/// them (a controller that died after the copy does not stop the slots' writes for good).
pub const FENCE_HOLD_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// The dirty keys a migration holds at most: past it the migration fails (and is retried).
pub const DIRTY_KEYS_MAX: usize = 1 << 20;

/// A migration under way on this node.
struct Migration {
    ranges: Vec<(u16, u16)>,
    /// Its migrator still runs (else it finished and waits, fenced, for the new topology).
    running: bool,
    /// When the migrator finished: past [`FENCE_HOLD_MAX`] without the topology that hands
    /// the slots over, the fence is lifted and the slots cannot be handed over any more.
    finished_at: Option<std::time::Instant>,
    fenced: bool,
    dirty: HashSet<Vec<u8>>,
    /// Writes to moving slots begun and not yet applied.
    in_flight: usize,
}

/// The node's migration state.
#[derive(Default)]
pub struct Moving {
    /// Whether a migration is under way (read without the lock on every write).
    active: AtomicBool,
    /// Writes begun without a migration and not yet applied.
    untracked: AtomicUsize,
    migration: Mutex<Option<Migration>>,
}

/// Held by a write from before it runs until it is applied.
pub struct WriteTicket {
    moving: Arc<Moving>,
    kind: Kind,
}

/// What a ticket does when dropped.
enum Kind {
    /// Begun outside any migration: counted in `untracked`.
    Untracked,
    /// Begun during a migration, on slots that do not move.
    Ignored,
    /// The keys of moving slots it writes, dirty once it is applied.
    Tracked(Vec<Vec<u8>>),
}

impl Drop for WriteTicket {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.kind, Kind::Ignored) {
            Kind::Ignored => {}
            Kind::Untracked => {
                let before = self.moving.untracked.fetch_sub(1, Ordering::SeqCst);
                debug_assert!(before > 0, "an untracked write was counted");
            }
            Kind::Tracked(keys) => {
                let mut migration = self.moving.lock();
                if let Some(migration) = migration.as_mut() {
                    migration.in_flight -= 1;
                    migration.dirty.extend(keys);
                }
            }
        }
    }
}

impl Moving {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Migration>> {
        self.migration.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ticket for a write of `keys`, or `-TRYAGAIN` when one is in a fenced slot.
    pub fn begin_write(self: &Arc<Self>, keys: &[&[u8]]) -> Result<WriteTicket, Reply> {
        // Counted before the flag is read, and the migration's start sets the flag before it
        // waits for the count to fall to zero: one of the two sees the other.
        self.untracked.fetch_add(1, Ordering::SeqCst);
        if !self.active.load(Ordering::SeqCst) {
            return Ok(self.ticket(Kind::Untracked));
        }
        self.untracked.fetch_sub(1, Ordering::SeqCst);
        let mut guard = self.lock();
        self.lapse_if_expired(&mut guard);
        let moved: Vec<Vec<u8>> = match guard.as_ref() {
            Some(migration) => keys
                .iter()
                .filter(|key| in_ranges(&migration.ranges, super::slot::key_slot(key)))
                .map(|key| key.to_vec())
                .collect(),
            None => Vec::new(),
        };
        let Some(migration) = guard.as_mut().filter(|_| !moved.is_empty()) else {
            // Not a moving slot (or the migration just ended).
            return Ok(self.ticket(Kind::Ignored));
        };
        if migration.fenced {
            return Err(Reply::error(TRY_AGAIN));
        }
        migration.in_flight += 1;
        Ok(self.ticket(Kind::Tracked(moved)))
    }

    fn ticket(self: &Arc<Self>, kind: Kind) -> WriteTicket {
        WriteTicket {
            moving: self.clone(),
            kind,
        }
    }

    /// Starts tracking a migration of `ranges`, once every write begun before it is applied
    /// (waits at most `wait`). Refused while another runs.
    pub fn start(&self, ranges: Vec<(u16, u16)>, wait: std::time::Duration) -> Result<(), String> {
        {
            let mut guard = self.lock();
            if guard.as_ref().is_some_and(|migration| migration.running) {
                return Err("ERR a slot migration is already under way on this node".into());
            }
            // A finished migration whose topology never came is replaced.
            *guard = Some(Migration {
                ranges,
                running: true,
                finished_at: None,
                fenced: false,
                dirty: HashSet::new(),
                in_flight: 0,
            });
        }
        self.active.store(true, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + wait;
        while self.untracked.load(Ordering::SeqCst) > 0 {
            if std::time::Instant::now() > deadline {
                self.end();
                return Err("ERR writes in progress did not finish".into());
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        Ok(())
    }

    /// The keys written since the last call (at most [`DIRTY_KEYS_MAX`] were kept).
    pub fn take_dirty(&self) -> Result<Vec<Vec<u8>>, String> {
        let mut guard = self.lock();
        let migration = guard.as_mut().ok_or("ERR the migration ended")?;
        if migration.dirty.len() > DIRTY_KEYS_MAX {
            return Err("ERR too many keys written during the migration: try again".into());
        }
        Ok(std::mem::take(&mut migration.dirty).into_iter().collect())
    }

    /// Fences the moving slots (writes get `-TRYAGAIN`) and waits, at most `wait`, for the
    /// writes in progress to be applied.
    pub fn fence(&self, wait: std::time::Duration) -> Result<(), String> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            {
                let mut guard = self.lock();
                let migration = guard.as_mut().ok_or("ERR the migration ended")?;
                migration.fenced = true;
                if migration.in_flight == 0 {
                    return Ok(());
                }
            }
            if std::time::Instant::now() > deadline {
                return Err("ERR writes to the moving slots did not finish".into());
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// The migrator is done: the slots stay fenced until a topology moves them away.
    pub fn finished(&self) {
        if let Some(migration) = self.lock().as_mut() {
            migration.running = false;
            migration.finished_at = Some(std::time::Instant::now());
        }
    }

    /// Whether a migration is under way (FLUSHDB is refused meanwhile).
    pub fn active(&self) -> bool {
        if !self.active.load(Ordering::SeqCst) {
            return false;
        }
        let mut guard = self.lock();
        self.lapse_if_expired(&mut guard);
        guard.is_some()
    }

    /// Ends a finished migration whose topology did not come within [`FENCE_HOLD_MAX`]: the
    /// slots are this node's alone again (and must be copied again to move).
    fn lapse_if_expired(&self, guard: &mut Option<Migration>) {
        let expired = guard.as_ref().is_some_and(|migration| {
            migration
                .finished_at
                .is_some_and(|at| at.elapsed() > FENCE_HOLD_MAX)
        });
        if expired {
            *guard = None;
            self.active.store(false, Ordering::SeqCst);
        }
    }

    /// Ends the migration (failed, or its slots now belong to another node).
    pub fn end(&self) {
        self.active.store(false, Ordering::SeqCst);
        *self.lock() = None;
    }

    /// Whether `slots` may leave this node: a finished migration copied them all and still
    /// fences them. A topology that gives away a slot without one is refused, so a write
    /// accepted here is never left behind.
    pub fn may_hand_over(&self, slots: &[u16]) -> Result<(), String> {
        let guard = self.lock();
        let held = guard.as_ref().filter(|migration| {
            migration.fenced
                && migration
                    .finished_at
                    .is_some_and(|at| at.elapsed() <= FENCE_HOLD_MAX)
        });
        let Some(migration) = held else {
            return Err(format!(
                "ERR slot {} would leave this node, which has not copied it (ringdb cluster push moves slots first)",
                slots[0]
            ));
        };
        match slots.iter().find(|&&slot| !in_ranges(&migration.ranges, slot)) {
            Some(slot) => Err(format!(
                "ERR slot {slot} would leave this node, which has not copied it (ringdb cluster push moves slots first)"
            )),
            None => Ok(()),
        }
    }
}
