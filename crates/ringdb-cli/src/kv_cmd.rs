//! `ringdb put-many | get | dump | check`: the database from the command line, for users and
//! for the crash tests (a child runs `put-many` with an ack log and is killed at random).

use clap::Args;
use ringdb::WriteBatch;
use ringdb::{Db, DbHandle, Durability, Options};
use ringdb_bench::units::parse_size;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::ops::Bound;
use std::path::PathBuf;
use std::rc::Rc;

#[derive(Args, Clone)]
pub struct DbArgs {
    /// Database directory (or a raw device: /dev/ngXnY through passthrough, or a block
    /// device).
    #[arg(long, default_value = "ringdb-data/kv")]
    db: PathBuf,
    /// off | none | fdatasync | thread | odsync | nvme-flush
    #[arg(long, default_value = "fdatasync")]
    durability: String,
    /// Buffer pool size.
    #[arg(long, default_value = "16M")]
    pool: String,
    /// O_DIRECT for the data file (0 on filesystems that refuse it, e.g. tmpfs).
    #[arg(long, default_value_t = 1)]
    direct: u8,
    /// Poll for completions (IOPOLL ring): with a log only on an NVMe namespace through
    /// passthrough (durability nvme-flush), where a sync is an NVMe Flush on the same ring.
    #[arg(long)]
    iopoll: bool,
}

impl DbArgs {
    fn open(&self, fresh: bool) -> Result<Db, Box<dyn std::error::Error>> {
        let durability: Durability = self.durability.parse()?;
        let mut opts = Options::default();
        if self.iopoll {
            // An explicit switch: it runs, or the open fails saying why (`auto` would drop it).
            opts.io.engine = ringdb_io::EngineKind::Uring;
            opts.io.iopoll = true;
        }
        let pool_pages = parse_size(&self.pool)? as usize / opts.page_size;
        let db = Db::open(
            &self.db,
            Options {
                pool_pages,
                durability,
                direct: self.direct != 0,
                fresh,
                ..opts
            },
        )?;
        crate::ycsb_cmd::warn_fallbacks(&db.stats().io);
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
    let mut db = a.db.open(a.fresh)?;
    let ack = match &a.ack_log {
        Some(p) => Some(Rc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => None,
    };
    let commits = a.count.div_ceil(a.batch);
    let next = Rc::new(Cell::new(0u64));
    let failed: Rc<RefCell<Option<String>>> = Rc::default();
    let t0 = std::time::Instant::now();
    let h = db.handle();
    let rt = db.runtime();
    for _ in 0..a.tasks.min(commits) {
        let committer = Committer {
            h: h.clone(),
            next: next.clone(),
            ack: ack.clone(),
            failed: failed.clone(),
            start: a.start,
            count: a.count,
            batch: a.batch,
            commits,
        };
        rt.spawn(committer.run());
    }
    rt.run()?;
    if let Some(e) = failed.borrow_mut().take() {
        return Err(e.into());
    }
    let secs = t0.elapsed().as_secs_f64();
    let st = db.stats();
    db.close()?;
    let wal = st.wal.unwrap_or_default();
    println!(
        "put-many: {} keys in {commits} commits, {secs:.2} s, {:.0} commits/s, durability {}, {:.1} commits per durability point",
        a.count,
        commits as f64 / secs,
        st.durability,
        wal.commits_per_sync()
    );
    Ok(())
}

/// One of `put-many`'s tasks: takes the next commit number until all `commits` are taken,
/// writes that batch of keys, and appends them to the ack log once the commit returned.
struct Committer {
    h: DbHandle,
    /// The next commit number to take, shared by the tasks.
    next: Rc<Cell<u64>>,
    ack: Option<Rc<std::fs::File>>,
    /// The first failure of any task; the others stop at their next commit.
    failed: Rc<RefCell<Option<String>>>,
    /// First key number, keys in all, keys per commit, and commits in all.
    start: u64,
    count: u64,
    batch: u64,
    commits: u64,
}

impl Committer {
    async fn run(self) {
        loop {
            if self.failed.borrow().is_some() {
                return;
            }
            let c = self.next.get();
            if c >= self.commits {
                return;
            }
            self.next.set(c + 1);
            let first = self.start + c * self.batch;
            let last = (first + self.batch).min(self.start + self.count);
            if let Err(e) = self.commit(first, last).await {
                self.failed.borrow_mut().get_or_insert(e);
                return;
            }
        }
    }

    /// Commits keys `first..last` as one write batch, then acknowledges them.
    async fn commit(&self, first: u64, last: u64) -> Result<(), String> {
        let mut wb = WriteBatch::new();
        for i in first..last {
            wb.put(format!("k{i}").as_bytes(), value_of(i).as_bytes());
        }
        self.h.write(&wb).await.map_err(|e| e.to_string())?;
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
    let mut db = a.db.open(false)?;
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
    let mut db = a.db.open(false)?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let mut from: Option<Vec<u8>> = None;
    loop {
        let start = match &from {
            Some(k) => Bound::Excluded(k.as_slice()),
            None => Bound::Unbounded,
        };
        let page = db.range(start, Bound::Unbounded, 1024)?;
        let Some(last) = page.last() else { break };
        from = Some(last.0.clone());
        for (k, v) in &page {
            writeln!(
                out,
                "{}\t{}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )?;
        }
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

/// Recovers, verifies the tree and every page's checksum; Ok(false) on any problem.
pub fn check(a: CheckArgs) -> Result<bool, Box<dyn std::error::Error>> {
    let mut db = a.db.open(false)?;
    let report = db.verify()?;
    let ok = report.is_ok();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "check: {} keys, {} leaves, {} inner pages, height {}, {} pages checked, {} free",
            report.keys,
            report.leaves,
            report.inner,
            report.height,
            report.pages_checked,
            report.free_pages
        );
        for p in &report.problems {
            println!("problem: {p}");
        }
        println!("{}", if ok { "OK" } else { "FAILED" });
    }
    db.close()?;
    Ok(ok)
}
