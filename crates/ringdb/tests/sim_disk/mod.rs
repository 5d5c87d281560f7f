//! Opening a database on a simulated disk (`ringdb_io::SimDisk`): its files 0, 1 and 2 are the
//! data file, the log and the double-write file. Shared by the power-cut tests.

// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

use ringdb::{FileSet, LocalDb, Options, Storage};
use ringdb_io::SimDisk;
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

/// The direct I/O alignment the simulated data file asks for: a 4 KiB-sector disk's, the
/// strictest a page-aligned engine meets.
pub const DIRECT_ALIGN_BYTES: u64 = 4096;

/// A simulated machine's disk for one database (files: data, log, double-write) under
/// `seed`: the data file is `O_DIRECT`, as a directory opens it, so a read or write of it
/// from memory that is not aligned fails with `EINVAL` as it would on a real disk.
pub fn new_disk(seed: u64) -> SimDisk {
    let sim = SimDisk::new(seed, 3);
    sim.set_direct(0, DIRECT_ALIGN_BYTES);
    sim
}

/// Opens (or recovers) the database on `sim` with `opts`, through an engine of queue depth 64.
pub fn open(sim: &SimDisk, opts: Options) -> Result<LocalDb, ringdb::OpenError> {
    let storage = Storage {
        engine: sim.engine(64),
        len_bytes: FileSet {
            data: sim.len(0),
            log: sim.len(1),
            double_write: sim.len(2),
        },
        capacity_pages: None,
        wal_file: None,
        is_block_device: false,
    };
    LocalDb::open_on(storage, Path::new("sim"), opts)
}

/// What the power-cutting task decides on each look.
pub enum Look {
    /// The moment the test waits for: cut now.
    Cut,
    /// The moment did not come in time: cut anyway.
    GiveUp,
    /// Look again.
    Wait,
}

/// Spawns the task that cuts `sim`'s power: it asks `look` until it says to cut (at most
/// `looks_max` times), then cuts and sets `off`. Returns whether the cut came at the moment
/// `look` waited for. Each look waits on a NOP, not a yield: it goes through the engine, so
/// the executor submits and reaps what the others wait for instead of spinning on this task.
pub fn spawn_cutter(
    db: &mut LocalDb,
    sim: &SimDisk,
    off: Rc<Cell<bool>>,
    looks_max: u64,
    mut look: impl FnMut() -> Look + 'static,
) -> Rc<Cell<bool>> {
    let inside = Rc::new(Cell::new(false));
    let (flag, sim) = (inside.clone(), sim.clone());
    let io = db.runtime().io();
    db.runtime().spawn(async move {
        for _ in 0..looks_max {
            match look() {
                Look::Cut => {
                    flag.set(true);
                    break;
                }
                Look::GiveUp => break,
                Look::Wait => {
                    let _ = io.nop().await;
                }
            }
        }
        sim.power_cut();
        off.set(true);
    });
    inside
}
