//! `fixed-buffers` (seeds/003; paper Sec. 3.4.1 "+RegBufs"): random 4 KiB reads and writes
//! over numjobs x iodepth, each point run without and with registered buffers
//! (`IORING_REGISTER_BUFFERS` + `READ_FIXED`/`WRITE_FIXED`), and the change between the two.
//!
//! Every point is one [`rawio::run`] (io_uring, DEFER_TASKRUN, files not registered either way,
//! jobs pinned one per CPU while there are enough). The two runs of a pair follow each other,
//! in alternating order, so that drift of the machine does not favour one side.

use super::target::describe_target;
use super::{allowed_cpus, MicroOpts, MicroResult, Plot, Series};
use crate::error::Result;
use crate::rawio::{self, IoReport, IoSpec, RwMode};
use ringdb_io::{EngineKind, IoConfig, SetupMode};
use serde_json::{json, Value};

const BS: u64 = 4096;
const NUMJOBS: &[u32] = &[1, 2];
const QUICK_NUMJOBS: &[u32] = &[1];
const IODEPTHS: &[u32] = &[1, 8, 32];
const QUICK_IODEPTHS: &[u32] = &[1, 32];
const RWS: &[RwMode] = &[RwMode::RandRead, RwMode::RandWrite];

/// Value of the `fixedbufs` column in the rows of the change between a pair.
pub const DELTA: &str = "delta%";

const COLUMNS: &[&str] = &[
    "numjobs",
    "iodepth",
    "rw",
    "fixedbufs",
    "iops",
    "mib_s",
    "lat_avg_us",
    "lat_p50_us",
    "lat_p95_us",
    "lat_p99_us",
    "lat_p999_us",
    "cycles_per_io",
];

/// The measured columns of a report, in `COLUMNS` order after `fixedbufs`.
fn metrics(r: &IoReport) -> [f64; 8] {
    [
        r.iops,
        r.mib_s,
        r.lat_us.avg,
        r.lat_us.p50,
        r.lat_us.p95,
        r.lat_us.p99,
        r.lat_us.p999,
        r.cycles_per_io,
    ]
}

fn pct(before: f64, after: f64) -> Option<f64> {
    (before > 0.0 && before.is_finite() && after.is_finite())
        .then(|| (after - before) / before * 100.0)
}

/// One (numjobs, iodepth, rw) point: without and with registered buffers.
struct Pair {
    numjobs: u32,
    iodepth: u32,
    rw: RwMode,
    without: IoReport,
    with: IoReport,
}

impl Pair {
    fn delta(&self, i: usize) -> Option<f64> {
        pct(metrics(&self.without)[i], metrics(&self.with)[i])
    }

    /// The pair's three table rows: without, with, and the change between them.
    fn rows(&self) -> [Vec<Value>; 3] {
        let head = |fb: &str| {
            vec![
                json!(self.numjobs),
                json!(self.iodepth),
                json!(self.rw.name()),
                json!(fb),
            ]
        };
        let measured = |fb: &str, rep: &IoReport| {
            let mut row = head(fb);
            row.extend(metrics(rep).iter().map(|v| json!(v)));
            row
        };
        let mut delta = head(DELTA);
        delta.extend((0..8).map(|i| self.delta(i).map_or(Value::Null, |d| json!(d))));
        [
            measured("no", &self.without),
            measured("yes", &self.with),
            delta,
        ]
    }
}

const MIRRORS: &str = "seeds/003 and paper Sec. 3.4.1 (+RegBufs): registered buffers skip per-I/O page pinning; without vs with, and the change";

/// The points of one run: job counts x queue depths x [`RWS`].
struct Grid {
    jobs: &'static [u32],
    depths: &'static [u32],
}

impl Grid {
    fn for_opts(opts: &MicroOpts) -> Grid {
        let (jobs, depths) = if opts.quick {
            (QUICK_NUMJOBS, QUICK_IODEPTHS)
        } else {
            (NUMJOBS, IODEPTHS)
        };
        Grid { jobs, depths }
    }

    /// Runs in all: two per point.
    fn runs(&self) -> usize {
        self.jobs.len() * self.depths.len() * RWS.len() * 2
    }
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let grid = Grid::for_opts(opts);
    let mut runner = Runner {
        opts,
        cpus: allowed_cpus(),
        runtime: opts.budgeted_point_runtime(grid.runs()),
        runs: grid.runs(),
        done: 0,
    };
    let mut pairs = Vec::new();
    for &numjobs in grid.jobs {
        for &iodepth in grid.depths {
            for &rw in RWS {
                // ABBA: even pairs run without first, odd pairs with first.
                let with_first = pairs.len() % 2 == 1;
                pairs.push(runner.pair(numjobs, iodepth, rw, with_first)?);
            }
        }
    }
    let mut r = MicroResult::new("fixed-buffers", MIRRORS, COLUMNS);
    for p in &pairs {
        for row in p.rows() {
            r.row(row);
        }
    }
    r.plot = Some(plot(&pairs, &grid));
    notes(
        &mut r,
        &pairs,
        &runner.cpus,
        runner.runtime.as_secs_f64(),
        opts,
    );
    Ok(r)
}

/// Runs the points of one benchmark run and counts them for the progress lines.
struct Runner<'a> {
    opts: &'a MicroOpts,
    cpus: Vec<u32>,
    runtime: std::time::Duration,
    runs: usize,
    done: usize,
}

impl Runner<'_> {
    /// One (numjobs, iodepth, rw) point: both runs, one right after the other, in the order
    /// `with_first` says.
    fn pair(&mut self, numjobs: u32, iodepth: u32, rw: RwMode, with_first: bool) -> Result<Pair> {
        let first = self.measure(numjobs, iodepth, rw, with_first)?;
        let second = self.measure(numjobs, iodepth, rw, !with_first)?;
        let (without, with) = if with_first {
            (second, first)
        } else {
            (first, second)
        };
        Ok(Pair {
            numjobs,
            iodepth,
            rw,
            without,
            with,
        })
    }

    fn measure(&mut self, numjobs: u32, iodepth: u32, rw: RwMode, fixed: bool) -> Result<IoReport> {
        let rep = rawio::run(&self.spec(numjobs, iodepth, rw, fixed))?;
        self.done += 1;
        if self.opts.progress {
            eprintln!(
                "fixed-buffers [{}/{}] numjobs {numjobs} iodepth {iodepth} {rw} fixedbufs {}: {:.0} IOPS, p99 {:.1} us",
                self.done,
                self.runs,
                if fixed { "yes" } else { "no" },
                rep.iops,
                rep.lat_us.p99
            );
        }
        Ok(rep)
    }

    /// io_uring with DEFER_TASKRUN, files not registered; jobs pinned one per CPU while there
    /// are enough CPUs, unpinned otherwise.
    fn spec(&self, numjobs: u32, iodepth: u32, rw: RwMode, fixed: bool) -> IoSpec {
        IoSpec {
            rw,
            bs: BS,
            size: self.opts.size,
            numjobs,
            runtime: Some(self.runtime),
            ios: None,
            direct: true,
            progress: false,
            cpus: if numjobs as usize <= self.cpus.len() {
                self.cpus[..numjobs as usize].to_vec()
            } else {
                Vec::new()
            },
            ..IoSpec::new(
                &self.opts.target,
                IoConfig {
                    setup: SetupMode::Defer,
                    register_files: false,
                    fixed_buffers: fixed,
                    queue_depth: iodepth,
                    ..IoConfig::new(EngineKind::Uring)
                },
            )
        }
    }
}

/// IOPS without and with registered buffers, point by point in table order.
fn plot(pairs: &[Pair], grid: &Grid) -> Plot {
    let series = |label: &str, pick: fn(&Pair) -> &IoReport| Series {
        label: label.into(),
        points: pairs
            .iter()
            .enumerate()
            .map(|(i, p)| ((i + 1) as f64, pick(p).iops))
            .collect(),
    };
    Plot::new(
        "4 KiB random I/O, io_uring+defer: IOPS without vs with registered buffers",
        format!(
            "point # (numjobs {:?} x iodepth {:?} x randread/randwrite, in table order)",
            grid.jobs, grid.depths
        ),
        "IOPS",
        vec![
            series("without fixed buffers", |p| &p.without),
            series("with fixed buffers", |p| &p.with),
        ],
    )
    .log_y()
}

fn notes(r: &mut MicroResult, pairs: &[Pair], cpus: &[u32], runtime_s: f64, opts: &MicroOpts) {
    r.notes.push(
        "seeds/003 (m8id.8xlarge, /dev/shm, 4 KiB, 60 s per point): registered buffers gave +1.7..+5.7% IOPS with 1 job, +1.8% (qd1) and +10.9% (qd16) for randread with 16 jobs, +25.1%/+29.2% for randwrite with 16 jobs, whose p95 fell 40.6% at 16x16; the paper reports +11% YCSB throughput for +RegBufs"
            .into(),
    );
    let iops = 0;
    let cyc = 7;
    let p99 = 5;
    for rw in RWS {
        let of_rw: Vec<&Pair> = pairs.iter().filter(|p| p.rw == *rw).collect();
        let d: Vec<f64> = of_rw.iter().filter_map(|p| p.delta(iops)).collect();
        if d.is_empty() {
            continue;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (lo, hi) = d
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let c: Vec<f64> = of_rw.iter().filter_map(|p| p.delta(cyc)).collect();
        let l: Vec<f64> = of_rw.iter().filter_map(|p| p.delta(p99)).collect();
        let best = of_rw
            .iter()
            .filter_map(|p| p.delta(iops).map(|x| (p, x)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        r.notes.push(format!(
            "this run, {rw}: IOPS change with registered buffers {:+.1}% on average ({lo:+.1}%..{hi:+.1}% over {} points){}; cycles per I/O {:+.1}%, p99 latency {:+.1}% on average",
            mean(&d),
            d.len(),
            best.map_or(String::new(), |(p, x)| format!(
                ", highest at numjobs {} iodepth {} ({x:+.1}%)",
                p.numjobs, p.iodepth
            )),
            mean(&c),
            mean(&l),
        ));
    }
    r.notes.push(format!(
        "noise: one run of {runtime_s:.2} s per point on {} usable CPUs; the two runs of a pair follow each other in alternating order (ABBA), but changes of a few percent are within run-to-run noise here, so only a consistent sign across points means something (seeds/003's single-job gains are of that size too)",
        cpus.len()
    ));
    let workers = pairs
        .iter()
        .flat_map(|p| [&p.without, &p.with])
        .filter_map(|rep| rep.iowq_workers)
        .max()
        .unwrap_or(0);
    if workers > 0 {
        r.notes.push(format!(
            "up to {workers} io-wq workers appeared: some requests were punted to worker threads (a device without NOWAIT, such as zram, or a full queue), which adds cycles to both sides and narrows the difference"
        ));
    }
    let max_jobs = pairs.iter().map(|p| p.numjobs).max().unwrap_or(1);
    r.notes.push(format!(
        "{}; O_DIRECT, io_uring with DEFER_TASKRUN, files not registered either way; jobs pinned one per CPU{}; without registration the kernel pins and unpins each I/O's user page, which is what READ_FIXED/WRITE_FIXED save; seeds/003's gains grew with the number of jobs",
        describe_target(&opts.target),
        if max_jobs as usize > cpus.len() {
            " (unpinned when numjobs exceeds the CPUs)"
        } else {
            ""
        }
    ));
}
