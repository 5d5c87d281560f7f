//! Power cuts among eviction writes (`buffer/steal.rs`): under a log, eviction writes pages
//! whose records changed in place between checkpoints, after the log is durable past them and,
//! in mode `fdatasync`, after their images are in the log. A cut drops or tears those writes;
//! recovery must write the logged image back where a page is torn or older and replay the
//! rest, losing no acknowledged update and splitting no batch. Driven by seeds like
//! `sim_crash.rs` (`RINGDB_SIM_SEED=<n>` runs one).

mod sim_disk;

use ringdb::WriteBatch;
use ringdb::{Durability, LocalDb, Options};
use ringdb_io::SimDisk;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Tasks updating keys, each its own range of `KEYS_PER_TASK` keys.
const TASKS: u64 = 8;
const KEYS_PER_TASK: u64 = 400;
/// Keys per batch at most (each round of a task updates a window of its keys).
const BATCH_MAX: u64 = 3;

fn opts() -> Options {
    Options {
        pool_pages: 32,
        durability: Durability::Fdatasync,
        wal_bytes: 1 << 20,
        // Stealing in a mode that syncs: page images in the log, torn pages to repair.
        steal: ringdb::Steal::Always,
        ..Options::default()
    }
}

fn open(sim: &SimDisk) -> Result<LocalDb, ringdb::OpenError> {
    sim_disk::open(sim, opts())
}

fn key(k: u64) -> Vec<u8> {
    format!("u{k:07}").into_bytes()
}

/// The value round `round` writes to key `k` (same length every round: updates in place).
fn value(k: u64, round: u64) -> Vec<u8> {
    format!("k{k:07}r{round:09}:{}", "v".repeat(60)).into_bytes()
}

/// The keys task `task` updates in its round `round`.
fn window(task: u64, round: u64) -> std::ops::Range<u64> {
    let len = 1 + round % BATCH_MAX;
    let first = task * KEYS_PER_TASK + (round * 7) % (KEYS_PER_TASK - BATCH_MAX);
    first..first + len
}

/// Per task: its last acknowledged round and the round in flight at the cut.
#[derive(Clone, Copy, Default)]
struct TaskState {
    acked: Option<u64>,
    in_flight: Option<u64>,
}

fn load(sim: &SimDisk) {
    let mut db = open(sim).expect("open to load");
    let mut wb = WriteBatch::new();
    for k in 0..TASKS * KEYS_PER_TASK {
        wb.put(&key(k), &value(k, 0));
        if wb.len() == 64 {
            db.write(&wb).expect("load");
            wb = WriteBatch::new();
        }
    }
    db.write(&wb).expect("load");
    db.close().expect("close after the load");
}

/// Runs the update tasks from `first_round` on and cuts the power once eviction has written
/// pages, no checkpoint runs and at least `pending` data-file writes are un-synced (so they
/// are eviction writes). Returns each task's state and whether the cut came that way.
fn run_until_cut(sim: &SimDisk, first_round: u64, pending: usize) -> (Vec<TaskState>, bool) {
    let mut db = open(sim).expect("open before the cut");
    let states = Rc::new(RefCell::new(vec![TaskState::default(); TASKS as usize]));
    let off = Rc::new(Cell::new(false));
    let h = db.handle();
    for task in 0..TASKS {
        let (h, states, off) = (h.clone(), states.clone(), off.clone());
        db.runtime().spawn(async move {
            let mut round = first_round;
            while !off.get() {
                let mut wb = WriteBatch::new();
                for k in window(task, round) {
                    wb.put(&key(k), &value(k, round));
                }
                states.borrow_mut()[task as usize].in_flight = Some(round);
                if h.write(&wb).await.is_err() {
                    return; // the power is off
                }
                let mut st = states.borrow_mut();
                st[task as usize] = TaskState {
                    acked: Some(round),
                    in_flight: None,
                };
                round += 1;
            }
        });
    }
    let writes_at_start = h.tree().buffer().stats().writes;
    let sim_seen = sim.clone();
    let inside = sim_disk::spawn_cutter(&mut db, sim, off, 2_000_000, move || {
        let evicted = h.tree().buffer().stats().writes > writes_at_start;
        if evicted && !h.checkpoint_running() && sim_seen.unsynced_writes(0) >= pending {
            sim_disk::Look::Cut
        } else {
            sim_disk::Look::Wait
        }
    });
    let _ = db.runtime().run();
    drop(db);
    let st = states.borrow().clone();
    (st, inside.get())
}

/// Every key holds its last acknowledged round's value, or the value of the round in flight
/// at the cut, and each in-flight batch is wholly old or wholly new.
fn check(sim: &SimDisk, states: &[Vec<TaskState>], seed: u64) {
    let mut db = open(sim).unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
    // Per key, the round of its last acknowledged write (0: the load).
    let mut expect = vec![0u64; (TASKS * KEYS_PER_TASK) as usize];
    let mut maybe: Vec<(u64, std::ops::Range<u64>)> = Vec::new();
    for cut in states {
        for (task, st) in cut.iter().enumerate() {
            let task = task as u64;
            if let Some(r) = st.acked {
                // Rounds run in order: replay every acknowledged round of this cut's run.
                let from = cut_start(states, cut, task);
                for round in from..=r {
                    for k in window(task, round) {
                        expect[k as usize] = round;
                    }
                }
            }
            if let Some(r) = st.in_flight {
                maybe.push((r, window(task, r)));
            }
        }
    }
    let _ = &maybe;
    for (k, &round) in expect.iter().enumerate() {
        let k = k as u64;
        let got = db.get(&key(k)).unwrap().expect("every key exists");
        let pending = maybe.iter().find(|(_, w)| w.contains(&k)).map(|&(r, _)| r);
        let ok = got == value(k, round) || pending.is_some_and(|r| got == value(k, r));
        assert!(
            ok,
            "seed {seed}: key {k}: {:?} is neither round {round} nor {pending:?}",
            String::from_utf8_lossy(&got)
        );
    }
    db.close().unwrap();
}

/// The first round a task ran in the run `cut` (each run starts where the last one left).
fn cut_start(states: &[Vec<TaskState>], cut: &[TaskState], _task: u64) -> u64 {
    let i = states
        .iter()
        .position(|c| std::ptr::eq(c.as_slice(), cut))
        .expect("a cut");
    run_first_round(i as u64)
}

/// Each run's first round: far past the last run's, so rounds never repeat.
fn run_first_round(run: u64) -> u64 {
    1 + run * 1_000_000
}

fn seeds() -> Vec<u64> {
    match std::env::var("RINGDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RINGDB_SIM_SEED is a number")],
        Err(_) => (1..=10).collect(),
    }
}

#[test]
fn power_cuts_among_eviction_writes_lose_nothing_acknowledged() {
    let (mut inside_cuts, mut data_tears) = (0, 0);
    for seed in seeds() {
        let sim = sim_disk::new_disk(seed);
        load(&sim);
        let mut states = Vec::new();
        for run in 0..3u64 {
            let pending = 1 + ((seed * 5 + run * 3) % 6) as usize;
            let (st, inside) = run_until_cut(&sim, run_first_round(run), pending);
            states.push(st);
            let sim_stats = sim.stats();
            inside_cuts += inside as u32;
            if matches!(sim_stats.last_tear, Some(t) if t.file == 0) {
                data_tears += 1;
            }
            eprintln!(
                "seed {seed} cut {run}: among eviction writes {inside} (>= {pending} un-synced data writes); dropped {}, kept {}, tear {:?}",
                sim_stats.cut_writes_dropped, sim_stats.cut_writes_kept, sim_stats.last_tear
            );
            check(&sim, &states, seed);
        }
    }
    eprintln!("{inside_cuts} cuts among eviction writes, {data_tears} tore a data page");
    if std::env::var("RINGDB_SIM_SEED").is_err() {
        assert!(
            inside_cuts >= 20,
            "only {inside_cuts} cuts among eviction writes"
        );
        assert!(data_tears >= 3, "only {data_tears} torn data pages");
    }
}
