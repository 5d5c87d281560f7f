//! Measures the model's costs on the run's own database and target, after the load and before
//! the run: the mix with every page resident (`c_tx`), raw reads and writes of the run's engine
//! and switches (`c_read` with the verification of each page read, `c_write`, through the
//! ladder's calibration), and a cold page's checksum.
//!
//! Memory: the mix runs in the database's own pool; the raw runs' buffers spread over as much
//! memory again (the run's I/O lands in the pool's frames), or over what the process has left
//! beside the pool where that is less (a container's memory cgroup, [`raw_buffer_bytes`]), so
//! that a run the user sized to a memory limit is not killed by its calibration.

use super::placement::{self, CpuIoCosts};
use super::{ModelCosts, TxSource};
use crate::error::{BenchError, Result};
use crate::ladder::calibrate::{
    checksum_cycles_over, io_cycles, read_cycles_and_checksum, CHECKSUM_REGION_BYTES,
};
use crate::ladder::LadderOpts;
use crate::rawio::RwMode;
use crate::ycsb::{self, Distribution, Op, OpGenerator, PhaseReport, RunSpec, Workload};
use ringdb::LocalDb;
use ringdb_io::{EffectiveIo, IoConfig, Switches};
use ringdb_lab::counters::tsc_hz;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Keys the calibration's inserts create start here, far above any loaded key, so the run's
/// own inserts still create new keys.
pub const CALIBRATION_INSERT_BASE: u64 = 1 << 62;
/// The data "fits" when its pages take at most this share of the pool.
const FIT_SHARE: f64 = 0.9;
/// Share of the pool the hot key range's pages fill when the data does not fit.
const HOT_RANGE_SHARE: f64 = 0.5;
/// Most page reads per operation a run "in memory" may make.
const MAX_READS_PER_OP: f64 = 0.01;
/// Bytes of the scratch file the writes are measured on.
const SCRATCH_BYTES: u64 = 64 << 20;
/// Pairs per range call while warming the hot range.
const WARM_CHUNK: usize = 4096;
/// Keys whose descent `c_descent` averages.
const DESCENT_SAMPLES: u64 = 20_000;
/// A large prime: `i * DESCENT_STRIDE mod keys` visits the range out of order.
const DESCENT_STRIDE: u64 = 2_654_435_761;
/// Mixed into the run's seed: the calibration draws other keys than the run.
const CALIBRATION_SEED: u64 = 0xC0FF_EE00_D15E_A5E5;
/// Memory kept free beside the raw runs' buffers (the rest of the process, the rings).
const SPARE_BYTES: u64 = 16 << 20;
/// Share of what is left beyond [`SPARE_BYTES`] the buffers may take.
const LEFT_SHARE: f64 = 0.5;

/// What the calibration needs to know about the run.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// The run's workload.
    pub workload: Workload,
    /// The run's key distribution.
    pub distribution: Distribution,
    /// Records loaded (keys `0..records`).
    pub records: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// The run's concurrent tasks.
    pub tasks: usize,
    /// The run's seed (the calibration draws from another).
    pub seed: u64,
    /// Length of each measurement: the mix in memory, raw reads, raw writes.
    pub measure: Duration,
    /// The database's data file or device ([`data_file`]): where reads are measured.
    pub data: PathBuf,
    /// The run's I/O configuration as asked (the engine `auto` resolved to is read from the
    /// database).
    pub io: IoConfig,
}

/// The data file of the database at `db` (a directory's data file, else `db` itself).
pub fn data_file(db: &Path) -> PathBuf {
    if db.is_dir() {
        db.join(ringdb::DATA_FILE)
    } else {
        db.to_path_buf()
    }
}

/// Where writes are measured beside `data` (a scratch file, removed afterwards); `None` on a
/// block device, which has no room beside the database.
pub fn scratch_file(data: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let block = std::fs::metadata(data).is_ok_and(|m| m.file_type().is_block_device());
    (!block).then(|| data.with_extension("model-scratch"))
}

/// Measures the model's costs on `db` (loaded) for the run `spec` describes; `progress` gets a
/// line per step.
pub fn calibrate(
    db: &mut LocalDb,
    spec: &ModelSpec,
    progress: &dyn Fn(&str),
) -> Result<ModelCosts> {
    let start = Instant::now();
    progress("c_tx: the run's mix with every page resident");
    let (c_tx, c_tx_source, c_tx_reads_per_op) = tx_cycles(db, spec)?;
    let c_descent = descent_cycles(db, &c_tx_source, spec.records)?;
    let page_size = db.handle().tree().buffer().page_size();
    let pool_bytes = (db.handle().tree().buffer().config().frames * page_size) as u64;
    let (raw_buffer_bytes, checksum_bytes) =
        memory_budget(pool_bytes, page_size, spec.tasks, progress)?;
    let io = effective_config(&spec.io, &db.stats().io);
    let runs = RawRuns {
        opts: LadderOpts {
            page_size,
            tasks: spec.tasks,
            calibrate: spec.measure,
            ..LadderOpts::new(&spec.data)
        },
        data: &spec.data,
        read_bytes: readable_bytes(&spec.data, db.stats().pages, page_size),
        // The run's reads land in the pool's frames, and its write-backs leave from them: the
        // raw runs' buffers spread over as much memory (`ringdb io --buffer-span`), where the
        // memory left allows.
        buffer_bytes: raw_buffer_bytes,
        io,
        progress,
    };
    // The raw runs go where the database's thread is now (which CPU takes the device's
    // interrupts matters to a read's cost), and for an unpinned run also to a CPU of the
    // other kind (`placement`).
    let first = spec.io.cpu.or_else(ringdb_io::affinity::current_cpu);
    let allowed = ringdb_io::affinity::allowed_cpus();
    let pinned = spec.io.cpu.is_some();
    let (io_by_cpu, interrupt_cpu) =
        placement::measure_on_both_kinds(&spec.data, first, pinned, &allowed, |cpu| runs.on(cpu))?;
    let (c_read, c_checksum_read, c_write) = {
        let first = &io_by_cpu[0];
        (first.c_read, first.c_checksum_read, first.c_write)
    };
    let write_target = c_write.and(scratch_file(&spec.data));
    Ok(ModelCosts {
        tsc_ghz: tsc_hz() / 1e9,
        c_tx,
        c_tx_source,
        c_tx_reads_per_op,
        c_restart: c_tx,
        c_descent,
        c_checksum: checksum_cycles_over(page_size, checksum_bytes),
        c_checksum_read,
        c_read,
        c_write,
        write_target,
        interrupt_cpu,
        io_by_cpu,
        raw_buffer_bytes,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// `c_tx`: cycles per operation of the run's mix with every page resident (all the data, or a
/// hot range filling about half the pool), checked to read ~0 pages.
fn tx_cycles(db: &mut LocalDb, spec: &ModelSpec) -> Result<(f64, TxSource, f64)> {
    let pool_pages = db.handle().tree().buffer().config().frames;
    let data_pages = db.stats().pages.max(1);
    let records = spec.records.max(1);
    let (first_key, keys, source) = if data_pages as f64 <= FIT_SHARE * pool_pages as f64 {
        (0, records, TxSource::InMemory)
    } else {
        let share = HOT_RANGE_SHARE * pool_pages as f64 / data_pages as f64;
        let keys = ((records as f64 * share) as u64).clamp(1, records);
        let first_key = (records - keys) / 2;
        let pages = (keys as u128 * data_pages as u128 / records as u128) as u64;
        let source = TxSource::HotRange {
            first_key,
            keys,
            pages,
            pool_pages,
        };
        (first_key, keys, source)
    };
    warm(db, first_key, keys)?;
    let r = run_mix(db, spec, first_key, keys)?;
    if r.reads_per_op > MAX_READS_PER_OP {
        return Err(BenchError::CalibrationFaulted {
            reads_per_op: r.reads_per_op,
            range_pages: (keys as u128 * data_pages as u128 / records as u128) as u64,
            pool_pages,
        });
    }
    Ok((r.cycles_per_op, source, r.reads_per_op))
}

/// `c_descent`: mean cycles of a descent from the root to the (resident) leaf over keys of
/// the range `c_tx` was measured on, through the tree's measurement hook. A restart that
/// resumes at the page its wait read skips about this much of `c_tx`.
fn descent_cycles(db: &mut LocalDb, source: &TxSource, records: u64) -> Result<f64> {
    let (first, keys) = match source {
        TxSource::InMemory => (0, records.max(1)),
        TxSource::HotRange {
            first_key, keys, ..
        } => (*first_key, (*keys).max(1)),
    };
    descent_cycles_over(db, first, keys)
}

/// Mean cycles of a descent to the resident leaf of keys `first..first + keys` (drawn out of
/// order); keys whose path is not resident are skipped, 0 when none was.
pub(crate) fn descent_cycles_over(db: &mut LocalDb, first: u64, keys: u64) -> Result<f64> {
    let keys = keys.max(1);
    let handle = db.handle();
    let tree = handle.tree();
    let (mut cycles, mut traced) = (0u64, 0u64);
    for i in 0..DESCENT_SAMPLES.min(keys) {
        // Keys spread over the range in a scattered order, as the mix draws them: a descent
        // in key order would find the previous one's nodes in the CPU's caches.
        let key = ycsb::key_bytes(first + i.wrapping_mul(DESCENT_STRIDE) % keys);
        // `None`: a page on the way is not resident (the hook never waits): not counted.
        if let Some(trace) = tree.trace_get(&key).map_err(ringdb::DbError::from)? {
            cycles += trace.descent_cycles;
            traced += 1;
        }
    }
    Ok(if traced == 0 {
        0.0
    } else {
        cycles as f64 / traced as f64
    })
}

/// Reads every leaf of keys `first..first + keys` into the pool (range scans, with the scan's
/// read-ahead).
fn warm(db: &mut LocalDb, first: u64, keys: u64) -> Result<()> {
    let h = db.handle();
    let end = ycsb::key_bytes(first.saturating_add(keys));
    let chunks = keys / WARM_CHUNK as u64 + 2;
    db.runtime()
        .block_on(async {
            let mut from = ycsb::key_bytes(first).to_vec();
            let mut start = Bound::Included(from.as_slice());
            // Each chunk moves past WARM_CHUNK keys of the range: the range ends within `chunks`.
            for _ in 0..chunks {
                let pairs = h.range(start, Bound::Excluded(&end), WARM_CHUNK).await?;
                let Some((last, _)) = pairs.last() else {
                    break;
                };
                from.clone_from(last);
                start = Bound::Excluded(from.as_slice());
                if pairs.len() < WARM_CHUNK {
                    break;
                }
            }
            Ok::<_, ringdb::ReadError>(())
        })?
        .map_err(ringdb::DbError::from)?;
    Ok(())
}

/// A short run of the run's mix over keys `first..first + keys` (inserts above
/// [`CALIBRATION_INSERT_BASE`]).
fn run_mix(db: &mut LocalDb, spec: &ModelSpec, first: u64, keys: u64) -> Result<PhaseReport> {
    let records = spec.records;
    let mut gen = OpGenerator::new(
        spec.workload,
        spec.distribution,
        records,
        spec.seed ^ CALIBRATION_SEED,
    )
    .with_tasks(spec.tasks);
    let run = RunSpec {
        tasks: spec.tasks,
        duration: spec.measure,
        value_size: spec.value_size,
        max_ops: None,
        progress: false,
        label: "model: c_tx".into(),
    };
    ycsb::run(db, &run, move |_| {
        Some(map_op(gen.next_op(), records, first, keys))
    })
}

/// `op` with its key moved into the calibration's keys: a loaded key into
/// `first..first + keys`, a new one (`>= records`) above [`CALIBRATION_INSERT_BASE`].
pub(crate) fn map_op(op: Op, records: u64, first: u64, keys: u64) -> Op {
    let key = |k: u64| {
        if k >= records {
            CALIBRATION_INSERT_BASE + (k - records)
        } else {
            first + k % keys.max(1)
        }
    };
    match op {
        Op::Read(k) => Op::Read(key(k)),
        Op::Update(k) => Op::Update(key(k)),
        Op::Insert(k) => Op::Insert(key(k)),
        Op::Scan(k, n) => Op::Scan(key(k), n),
        Op::ReadModifyWrite(k) => Op::ReadModifyWrite(key(k)),
    }
}

/// Bytes in a MiB, for messages.
const MIB: f64 = (1u64 << 20) as f64;

/// The memory the raw runs' buffers spread over: `pool_bytes` (as the run's I/O does), or
/// half of what `headroom` leaves beyond [`SPARE_BYTES`] when that is less; refused when not
/// even `least_bytes` (a page per task) fits. Without a known headroom: the pool's.
fn raw_buffer_bytes(
    pool_bytes: u64,
    least_bytes: u64,
    headroom: Option<&ringdb_io::limits::MemoryHeadroom>,
) -> Result<u64> {
    let (Some(headroom), Some(usable)) = (headroom, usable_bytes(headroom)) else {
        return Ok(pool_bytes);
    };
    if usable < least_bytes.min(pool_bytes) {
        return Err(BenchError::CalibrationMemory {
            needed_bytes: least_bytes,
            spare_bytes: SPARE_BYTES,
            left_bytes: headroom.bytes,
            within: within(Some(headroom)),
        });
    }
    Ok(pool_bytes.min(usable).max(least_bytes.min(pool_bytes)))
}

/// The memory the raw runs' buffers spread over and the checksum's region, in bytes: as
/// usual (the pool's, [`CHECKSUM_REGION_BYTES`]) unless what the process has left says less
/// (then `progress` says so); refused when not even a page per task fits.
fn memory_budget(
    pool_bytes: u64,
    page_size: usize,
    tasks: usize,
    progress: &dyn Fn(&str),
) -> Result<(u64, usize)> {
    let least_bytes = (page_size * tasks.max(1)) as u64;
    let headroom = ringdb_io::limits::memory_headroom();
    let raw_buffer_bytes = raw_buffer_bytes(pool_bytes, least_bytes, headroom.as_ref())?;
    let checksum_bytes = usable_bytes(headroom.as_ref())
        .map_or(CHECKSUM_REGION_BYTES, |usable| {
            CHECKSUM_REGION_BYTES.min(usable as usize)
        })
        .max(page_size);
    if raw_buffer_bytes < pool_bytes || checksum_bytes < CHECKSUM_REGION_BYTES {
        progress(&format!(
            "raw runs' buffers over {:.1} MiB (the pool's: {:.1} MiB), a page's checksum timed over {:.1} MiB (not {} MiB): {} leaves no more",
            raw_buffer_bytes as f64 / MIB,
            pool_bytes as f64 / MIB,
            checksum_bytes as f64 / MIB,
            CHECKSUM_REGION_BYTES >> 20,
            within(headroom.as_ref())
        ));
    }
    Ok((raw_buffer_bytes, checksum_bytes))
}

/// What the calibration's buffers may take of `headroom`: [`LEFT_SHARE`] of what it leaves
/// beyond [`SPARE_BYTES`]; `None` when nothing is known.
fn usable_bytes(headroom: Option<&ringdb_io::limits::MemoryHeadroom>) -> Option<u64> {
    headroom.map(|h| (h.bytes.saturating_sub(SPARE_BYTES) as f64 * LEFT_SHARE) as u64)
}

/// Which limit leaves the headroom, for messages.
fn within(headroom: Option<&ringdb_io::limits::MemoryHeadroom>) -> String {
    match headroom.and_then(|h| h.cgroup.as_ref().filter(|c| c.left_bytes == h.bytes)) {
        Some(cgroup) => format!(
            "the memory cgroup {} (limit {:.1} MiB)",
            cgroup.path.display(),
            cgroup.limit_bytes as f64 / MIB
        ),
        None => "the machine's available memory".to_string(),
    }
}

/// The run's configuration with the engine and switches that actually run (what `auto`
/// resolved to).
fn effective_config(asked: &IoConfig, effective: &EffectiveIo) -> IoConfig {
    let switches = effective.switches.unwrap_or_else(|| Switches::of(asked));
    IoConfig {
        engine: effective.engine,
        setup: switches.setup,
        fixed_buffers: switches.fixed_buffers,
        ..asked.clone()
    }
}

/// Bytes of `data` the reads spread over: the database's pages, no more than the file holds
/// (so the data file is never extended), in whole pages.
fn readable_bytes(data: &Path, pages: u64, page_size: usize) -> u64 {
    let ps = page_size as u64;
    let want = pages.saturating_mul(ps);
    let len = std::fs::metadata(data)
        .ok()
        .filter(|m| m.is_file())
        .map_or(want, |m| m.len());
    (want.min(len) / ps).max(1) * ps
}

/// The raw read and write runs of the run's engine and switches, pinned to one CPU at a time.
struct RawRuns<'a> {
    opts: LadderOpts,
    /// The database's data (read) and where the scratch file goes beside it (written).
    data: &'a Path,
    /// Bytes of the data the reads spread over.
    read_bytes: u64,
    /// Memory the buffers spread over: the pool's, or what is left ([`raw_buffer_bytes`]).
    buffer_bytes: u64,
    io: IoConfig,
    progress: &'a dyn Fn(&str),
}

impl RawRuns<'_> {
    /// Cycles per page read (with the verification's apart) and per page write, pinned to
    /// `cpu`.
    fn on(&self, cpu: Option<u32>) -> Result<CpuIoCosts> {
        let on = cpu.map_or(String::new(), |c| format!(" on CPU {c}"));
        let opts = LadderOpts {
            cpu,
            ..self.opts.clone()
        };
        let io = IoConfig {
            cpu,
            ..self.io.clone()
        };
        (self.progress)(&format!(
            "c_read: raw page reads of the run's engine over the data{on}"
        ));
        let span = Some(self.buffer_bytes);
        let (c_read, c_checksum_read) =
            read_cycles_and_checksum(&opts, self.read_bytes, self.data, io.clone(), span)?;
        (self.progress)(&format!(
            "c_write: raw page writes of the run's engine beside the data{on}"
        ));
        let c_write = self.write_cycles(&opts, io)?;
        Ok(CpuIoCosts {
            cpu,
            c_read,
            c_checksum_read,
            c_write,
        })
    }

    /// Cycles per page write on a scratch file beside the data (removed after); `None` on a
    /// block device.
    fn write_cycles(&self, opts: &LadderOpts, io: IoConfig) -> Result<Option<f64>> {
        let Some(scratch) = scratch_file(self.data) else {
            return Ok(None);
        };
        let span = Some(self.buffer_bytes);
        let cycles = io_cycles(opts, SCRATCH_BYTES, &scratch, RwMode::RandWrite, io, span);
        let _ = std::fs::remove_file(&scratch);
        Ok(Some(cycles?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_keys_stay_in_the_range_and_inserts_above_the_loaded_keys() {
        assert_eq!(map_op(Op::Read(5), 100, 0, 100), Op::Read(5));
        assert_eq!(map_op(Op::Read(95), 100, 40, 20), Op::Read(55));
        assert_eq!(map_op(Op::Scan(3, 7), 100, 40, 20), Op::Scan(43, 7));
        assert_eq!(
            map_op(Op::Insert(102), 100, 40, 20),
            Op::Insert(CALIBRATION_INSERT_BASE + 2)
        );
        assert_eq!(
            map_op(Op::Read(101), 100, 0, 100),
            Op::Read(CALIBRATION_INSERT_BASE + 1)
        );
    }

    fn headroom(bytes: u64) -> ringdb_io::limits::MemoryHeadroom {
        ringdb_io::limits::MemoryHeadroom {
            bytes,
            available_bytes: Some(bytes),
            cgroup: None,
        }
    }

    #[test]
    fn the_raw_runs_buffers_fit_what_is_left_beside_the_pool() {
        const MIB: u64 = 1 << 20;
        let pool = 64 * MIB;
        let least = 512 * 1024;
        // Room enough (or nothing known): the pool's span.
        assert_eq!(raw_buffer_bytes(pool, least, None).unwrap(), pool);
        let plenty = headroom(20_000 * MIB);
        assert_eq!(raw_buffer_bytes(pool, least, Some(&plenty)).unwrap(), pool);
        // A cgroup leaving 40 MiB: half of what is left beyond the spare 16 MiB.
        let tight = headroom(40 * MIB);
        assert_eq!(
            raw_buffer_bytes(pool, least, Some(&tight)).unwrap(),
            12 * MIB
        );
        // Not even a page per task: refused, saying how much it needs.
        let none_left = headroom(16 * MIB + MIB / 2);
        let refused = raw_buffer_bytes(pool, least, Some(&none_left)).unwrap_err();
        assert!(
            matches!(refused, BenchError::CalibrationMemory { .. }),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("only 16 MiB are left"),
            "{refused}"
        );
    }
}
