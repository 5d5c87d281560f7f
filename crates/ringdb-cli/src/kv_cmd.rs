//! `ringdb put-many | get | dump | check`: the database from the command line, for users and
//! for the crash tests (a child runs `put-many` with an ack log and is killed at random).

use clap::Args;
use ringdb::WriteBatch;
use ringdb::{Db, Durability, Options};
use ringdb_bench::units::parse_size;
use ringdb_io::EngineKind;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Args, Clone)]
pub struct DbArgs {
    /// Database directory (or a raw device: /dev/ngXnY through passthrough, or a block
    /// device).
    #[arg(long, default_value = "ringdb-data/kv")]
    db: PathBuf,
    /// Shards of a new database (default: one per CPU); an existing one keeps its own.
    #[arg(long)]
    shards: Option<usize>,
    /// off | none | fdatasync | thread | odsync | nvme-flush
    #[arg(long, default_value = "fdatasync")]
    durability: String,
    /// Buffer pool size (the whole database's, divided among its shards).
    #[arg(long, default_value = "16M")]
    pool: String,
    /// O_DIRECT for the data file (0 on filesystems that refuse it, e.g. tmpfs).
    #[arg(long, default_value_t = 1)]
    direct: u8,
    /// auto (io_uring where it works here, else libaio or posix, with a warning) | posix |
    /// libaio | uring-sync | uring | uring-passthrough
    #[arg(long, default_value = "auto")]
    engine: String,
    /// Registered buffers (the buffer pool's frames; io_uring engines).
    #[arg(long)]
    fixedbufs: bool,
    /// With a log: may eviction write pages back between checkpoints: auto (in mode none
    /// only) | on | off (only checkpoints write pages).
    #[arg(long, default_value = "auto")]
    steal: String,
    /// Poll for completions (IOPOLL ring): with a log only on an NVMe namespace through
    /// passthrough (durability nvme-flush), where a sync is an NVMe Flush on the same ring.
    #[arg(long)]
    iopoll: bool,
    /// Pin each shard's thread to a CPU: on (the default of the embedded commands) or off
    /// (the default of `serve`, whose CPUs its clients, the kernel's network work and other
    /// programs share: a pinned shard waits while another program holds its CPU).
    #[arg(long, value_parser = ["on", "off"])]
    pin: Option<String>,
}

impl DbArgs {
    /// The database's path, as given.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.db
    }

    pub(crate) fn open(&self, fresh: bool) -> Result<Db, Box<dyn std::error::Error>> {
        self.open_pinned_by_default(fresh, true)
    }

    /// Opens the database; its shards are pinned as `--pin` says, else as `pin_by_default`.
    pub(crate) fn open_pinned_by_default(
        &self,
        fresh: bool,
        pin_by_default: bool,
    ) -> Result<Db, Box<dyn std::error::Error>> {
        let durability: Durability = self.durability.parse()?;
        let mut opts = Options::default();
        opts.io.engine = self.engine.parse()?;
        if self.iopoll {
            // An explicit switch: it runs, or the open fails saying why (`auto` would drop it).
            if opts.io.engine == EngineKind::Auto {
                opts.io.engine = EngineKind::Uring;
            }
            opts.io.iopoll = true;
        }
        if opts.io.engine.accepts_uring_switches() {
            opts.io.setup = ringdb_io::SetupMode::Defer;
        }
        opts.io.fixed_buffers = self.fixedbufs;
        let pool_pages = parse_size(&self.pool)? as usize / opts.page_size;
        let mut builder = Db::builder(&self.db).options(Options {
            pool_pages,
            durability,
            direct: self.direct != 0,
            steal: self.steal.parse()?,
            fresh,
            ..opts
        });
        if let Some(shards) = self.shards {
            builder = builder.shards(shards);
        }
        let pin = self
            .pin
            .as_deref()
            .map_or(pin_by_default, |pin| pin == "on");
        let db = builder.pin(pin).open()?;
        if let Some(first) = db.stats()?.shards.first() {
            crate::ycsb_cmd::warn_fallbacks(&first.io);
        }
        Ok(db)
    }
}

#[derive(Args)]
pub struct PutManyArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Keys `k<start>` .. `k<start+count-1>`.
    #[arg(long)]
    count: u64,
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Keys per commit (a write batch; all or nothing after a crash).
    #[arg(long, default_value_t = 1)]
    batch: u64,
    /// Concurrent tasks committing.
    #[arg(long, default_value_t = 32)]
    tasks: u64,
    /// After each acknowledged commit, append its keys' numbers here (one per line) and
    /// flush: what a crash test may expect to find.
    #[arg(long)]
    ack_log: Option<PathBuf>,
    /// Start from an empty database.
    #[arg(long)]
    fresh: bool,
}

/// The value `put-many` stores for key number `i` (checkable by anyone).
pub fn value_of(i: u64) -> String {
    let n = (i.wrapping_mul(2654435761) % 97) as usize;
    format!("v{i}-{}", &"abcdefghijklmnopqrstuvwxyz".repeat(4)[..n])
}

pub fn put_many(a: PutManyArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.batch == 0 || a.tasks == 0 {
        return Err("--batch and --tasks must be at least 1".into());
    }
    let db = a.db.open(a.fresh)?;
    let ack = match &a.ack_log {
        Some(p) => Some(Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => None,
    };
    let commits = a.count.div_ceil(a.batch);
    let committer = Arc::new(Committer {
        db: db.clone(),
        next: AtomicU64::new(0),
        ack,
        failed: Mutex::new(None),
        start: a.start,
        count: a.count,
        batch: a.batch,
        commits,
    });
    let t0 = std::time::Instant::now();
    let threads: Vec<_> = (0..a.tasks.min(commits))
        .map(|_| {
            let committer = committer.clone();
            std::thread::spawn(move || committer.run())
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a committing thread panicked")?;
    }
    if let Some(e) = committer
        .failed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(e.into());
    }
    let secs = t0.elapsed().as_secs_f64();
    let stats = db.stats()?;
    drop(committer);
    db.close()?;
    let (records, syncs) = stats.shards.iter().fold((0, 0), |(r, s), shard| {
        let wal = shard.wal.unwrap_or_default();
        (r + wal.records, s + wal.syncs)
    });
    println!(
        "put-many: {} keys in {commits} commits, {secs:.2} s, {:.0} commits/s, durability {}, \
         {} shards, {:.1} commits per durability point",
        a.count,
        commits as f64 / secs,
        stats.shards[0].durability,
        stats.shards.len(),
        records as f64 / syncs.max(1) as f64
    );
    Ok(())
}

/// What `put-many`'s threads share: each takes the next commit number until all `commits` are
/// taken, writes that batch of keys (across shards when they hash to several), and appends
/// them to the ack log once the commit returned.
struct Committer {
    db: Db,
    /// The next commit number to take.
    next: AtomicU64,
    ack: Option<Arc<std::fs::File>>,
    /// The first failure of any thread; the others stop at their next commit.
    failed: Mutex<Option<String>>,
    /// First key number, keys in all, keys per commit, and commits in all.
    start: u64,
    count: u64,
    batch: u64,
    commits: u64,
}

impl Committer {
    fn run(&self) {
        loop {
            if self
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
            {
                return;
            }
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.commits {
                return;
            }
            let first = self.start + c * self.batch;
            let last = (first + self.batch).min(self.start + self.count);
            if let Err(e) = self.commit(first, last) {
                self.failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(e);
                return;
            }
        }
    }

    /// Commits keys `first..last` as one write batch, then acknowledges them.
    fn commit(&self, first: u64, last: u64) -> Result<(), String> {
        let mut wb = WriteBatch::new();
        for i in first..last {
            wb.put(format!("k{i}").as_bytes(), value_of(i).as_bytes());
        }
        self.db.write(&wb).map_err(|e| e.to_string())?;
        let Some(f) = &self.ack else {
            return Ok(());
        };
        let mut line = String::new();
        for i in first..last {
            line.push_str(&format!("{i}\n"));
        }
        // One write per commit: whole lines, flushed to the kernel at once.
        (&**f)
            .write_all(line.as_bytes())
            .map_err(|e| format!("ack log: {e}"))
    }
}

#[derive(Args)]
pub struct GetArgs {
    #[command(flatten)]
    db: DbArgs,
    key: String,
}

pub fn get(a: GetArgs) -> Result<bool, Box<dyn std::error::Error>> {
    let db = a.db.open(false)?;
    let v = db.get(a.key.as_bytes())?;
    db.close()?;
    match v {
        Some(v) => {
            println!("{}", String::from_utf8_lossy(&v));
            Ok(true)
        }
        None => {
            eprintln!("{}: not found", a.key);
            Ok(false)
        }
    }
}

#[derive(Args)]
pub struct DumpArgs {
    #[command(flatten)]
    db: DbArgs,
}

pub fn dump(a: DumpArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = a.db.open(false)?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for pair in db.range::<&[u8], _>(..) {
        let (k, v) = pair?;
        writeln!(
            out,
            "{}\t{}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        )?;
    }
    out.flush()?;
    drop(out);
    db.close()?;
    Ok(())
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Recovers, verifies every shard's tree and every page's checksum; Ok(false) on any problem.
pub fn check(a: CheckArgs) -> Result<bool, Box<dyn std::error::Error>> {
    let db = a.db.open(false)?;
    let reports = db.verify()?;
    let ok = reports.iter().all(|r| r.is_ok());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        for (shard, report) in reports.iter().enumerate() {
            println!(
                "check shard {shard}: {} keys, {} leaves, {} inner pages, height {}, {} pages \
                 checked, {} free",
                report.keys,
                report.leaves,
                report.inner,
                report.height,
                report.pages_checked,
                report.free_pages
            );
            for p in &report.problems {
                println!("problem: shard {shard}: {p}");
            }
        }
        println!("{}", if ok { "OK" } else { "FAILED" });
    }
    db.close()?;
    Ok(ok)
}
