//! `ringdb ycsb --shards N [--clients M]`: YCSB on a sharded, thread-per-core database: tasks
//! on every shard (`--clients 0`), or M user threads calling the blocking API (reads in
//! `multi_get` batches of `--multi-get K`).

use super::ycsb_cmd::{CmdResult, Settings, YcsbArgs};
use ringdb::Db;
use ringdb_bench::ycsb_sharded::{self, ShardedReport, ShardedSpec};
use serde_json::json;
use std::io::IsTerminal;

/// Runs the sharded benchmark: opens (and loads when new or asked), runs, reports.
pub fn run(a: &YcsbArgs, settings: &Settings, shards: Option<usize>) -> CmdResult {
    let load = a.load || !a.db.join(ringdb::MANIFEST_FILE).exists();
    let mut builder = Db::builder(&a.db).options(settings.db_options(a, load)?);
    if let Some(shards) = shards {
        builder = builder.shards(shards);
    }
    if let Some(spin_us) = a.spin_us {
        builder = builder.spin(std::time::Duration::from_micros(spin_us));
    }
    let db = builder.open()?;
    let progress = std::io::stderr().is_terminal();
    let load_report = if load {
        eprintln!(
            "ycsb: loading {} records on {} shards",
            a.records,
            db.shard_count()
        );
        Some(ycsb_sharded::load(
            &db,
            a.records,
            a.value_size,
            a.tasks.min(64),
            progress,
        )?)
    } else {
        None
    };
    let spec = ShardedSpec {
        workload: settings.workload,
        distribution: settings.distribution,
        records: a.records,
        value_size: a.value_size,
        tasks_per_shard: a.tasks,
        clients: a.clients,
        batch: a.multi_get.max(1),
        batch_clients: a.client_sched == "batch",
        duration: settings.runtime,
        seed: a.seed,
    };
    eprintln!(
        "ycsb: workload {:?} ({:?}), {} shards, {}, {:?}",
        settings.workload,
        settings.distribution,
        db.shard_count(),
        if a.clients == 0 {
            format!("{} tasks per shard", a.tasks)
        } else {
            format!(
                "{} client threads ({}), multi-get {}",
                a.clients,
                if spec.batch_clients {
                    "SCHED_BATCH"
                } else {
                    "SCHED_OTHER"
                },
                spec.batch
            )
        },
        settings.runtime
    );
    warm_up(&db, &spec, settings, progress)?;
    let r = ycsb_sharded::run(&db, &spec, progress)?;
    let wake_us = (a.clients > 0).then(|| ycsb_sharded::wake_up_cost_us(2000));
    db.close()?;
    report(a, load_report.as_ref(), &r, wake_us)
}

/// Runs `spec`'s mix for `--warmup` (other keys, unreported) before the measured run.
fn warm_up(db: &Db, spec: &ShardedSpec, settings: &Settings, progress: bool) -> CmdResult {
    if settings.warmup.is_zero() {
        return Ok(());
    }
    eprintln!("ycsb: warming up for {:?}", settings.warmup);
    let warmup = ShardedSpec {
        duration: settings.warmup,
        seed: spec.seed ^ super::ycsb_cmd::WARMUP_SEED,
        ..*spec
    };
    ycsb_sharded::run(db, &warmup, progress)?;
    Ok(())
}

/// Prints the table (or JSON) and writes `--output`.
fn report(
    a: &YcsbArgs,
    load: Option<&ShardedReport>,
    r: &ShardedReport,
    wake_us: Option<f64>,
) -> CmdResult {
    let warmup = ringdb_bench::units::parse_duration(&a.warmup);
    let warmup_secs = warmup.map_or(0.0, |d| d.as_secs_f64());
    let report = json!({
        "workload": a.workload,
        "distribution": a.distribution,
        "records": a.records,
        "value_size": a.value_size,
        "warmup_secs": warmup_secs,
        "engine": a.engine,
        "load": load,
        "run": r,
        "wake_up_us": wake_us,
        "client_sched": (a.clients > 0).then_some(&a.client_sched),
        "host": ringdb_lab::host::Host::current(),
        // The model prices one shard's run; per-shard calibration is not built.
        "model": if a.no_model { serde_json::Value::Null } else { json!({ "not_computed": "shards" }) },
    });
    let text = serde_json::to_string_pretty(&report)?;
    if a.json {
        println!("{text}");
    } else {
        print_table(load, r, wake_us);
        if !a.no_model {
            println!("model: not computed for shards");
        }
    }
    if let Some(p) = &a.output {
        std::fs::write(p, text + "\n").map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}

fn print_table(load: Option<&ShardedReport>, r: &ShardedReport, wake_us: Option<f64>) {
    if let Some(l) = load {
        println!(
            "load: {} records in {:.1} s ({:.0}/s)",
            l.ops, l.secs, l.ops_per_s
        );
    }
    println!(
        "run:  {:.0} ops/s on {} shards  p50 {:.1} us  p99 {:.1} us  max {:.1} us",
        r.ops_per_s, r.shards, r.lat_us.p50, r.lat_us.p99, r.lat_us.max
    );
    let per_shard: Vec<String> = r
        .per_shard_ops_per_s
        .iter()
        .map(|o| format!("{o:.0}"))
        .collect();
    if r.clients == 0 {
        println!("      per shard ops/s: {}", per_shard.join(" "));
    } else {
        // A client's call is one request on each shard its keys fall on.
        println!("      per shard requests served/s: {}", per_shard.join(" "));
    }
    println!(
        "      page reads/op {:.3}  writes/op {:.3}  cycles/op {:.0}  CPU {:.0}%  hops {}  misses {}",
        r.reads_per_op, r.writes_per_op, r.cycles_per_op, r.cpu_pct, r.hops, r.misses
    );
    if let Some(wake) = wake_us {
        println!(
            "      one cross-thread wake-up here: {wake:.1} us (median of 2000, idle machine; a \
             blocking call parks at once when every CPU runs a shard, else spins 20 us first)"
        );
    }
}
