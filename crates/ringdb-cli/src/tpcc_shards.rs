//! `ringdb tpcc --shards N`: TPC-C with its warehouses partitioned over the shards of a
//! `ringdb::Db` (warehouse w on shard (w - 1) mod N), each shard's tasks homed at its own
//! warehouses; remote warehouses on another shard are reached by a part of the transaction
//! there. Loads when the directory holds no database (or with `--load`), runs, checks.

use crate::tpcc_cmd::{
    checks_json, print_checks, print_run, run_spec, write_json, Settings, TpccArgs,
};
use crate::ycsb_cmd::CmdResult;
use ringdb::{Db, Durability};
use ringdb_bench::tpcc::{self, check_loaded_scale, check_pool};
use serde_json::json;
use std::io::IsTerminal;

/// Runs (or loads, checks) TPC-C on the sharded database at `a.path`; `Ok(false)` when the
/// consistency checks failed.
pub fn run(a: &TpccArgs, settings: &Settings) -> CmdResult<bool> {
    let has_database = a.path.join(ringdb::MANIFEST_FILE).exists();
    if a.check && !has_database {
        return Err(format!("{} holds no sharded database to check", a.path.display()).into());
    }
    let fresh = a.load || !has_database;
    let db = open(a, settings, fresh)?;
    let shards = db.shard_count();
    let load_report = if fresh {
        let scale = settings.scale(a.warehouses.unwrap_or(shards as u32));
        scale.validate()?;
        tpcc::check_shards(&db, scale.warehouses)?;
        check_pool(
            &scale,
            settings.page_size,
            settings.pool_pages / shards,
            a.tasks_for(scale.warehouses).div_ceil(shards),
        )?;
        eprintln!("tpcc: loading {scale} over {shards} shards");
        let started = std::time::Instant::now();
        let (_, report) = tpcc::load_sharded(&db, &scale, std::io::stderr().is_terminal())?;
        db.flush()?;
        let secs = started.elapsed().as_secs_f64();
        eprintln!("tpcc: loaded in {secs:.1} s");
        Some(json!({ "secs": secs, "report": report }))
    } else {
        None
    };
    let (tables, scale, constants) = tpcc::open_loaded_sharded(&db)?;
    if let Some(w) = a.warehouses {
        check_loaded_scale(&scale, &settings.scale(w))?;
    }
    if a.check {
        let checks = tpcc::check_sharded(&db, &tables, &scale)?;
        db.close()?;
        print_checks(&checks);
        let document = json!({ "scale": scale, "shards": shards, "checks": checks_json(&checks) });
        write_json(&a.json, &document)?;
        return Ok(checks.passed());
    }
    eprintln!(
        "tpcc: {scale} over {shards} shards, {} tasks, {:?}",
        a.tasks_for(scale.warehouses),
        settings.duration
    );
    let spec = run_spec(a, settings, scale.warehouses);
    let report = tpcc::run_sharded(&db, &tables, &scale, &constants, &spec)?;
    let checks = tpcc::check_sharded(&db, &tables, &scale)?;
    let stats = db.stats()?;
    db.close()?;
    print_run(&report, &checks);
    let document = json!({
        "scale": scale,
        "shards": shards,
        "load": load_report,
        "run": report,
        "checks": checks_json(&checks),
        "engine_in_effect": stats.shards[0].io,
        "host": ringdb_lab::host::Host::current(),
    });
    write_json(&a.json, &document)?;
    Ok(checks.passed())
}

/// Opens the sharded database (a new one when `fresh`), the pool split over its shards.
/// Without a durability asked for: `off` for a new database (as in the paper), `fdatasync`
/// for one whose shards have a log (so that opening it recovers what the logs hold).
fn open(a: &TpccArgs, settings: &Settings, fresh: bool) -> CmdResult<Db> {
    let mut options = settings.options(a, fresh)?;
    if a.durability.is_none() {
        // Every shard has a log or none does; the first shard's directory tells.
        let logged = a.path.join("shard-000").join(ringdb::WAL_FILE).exists();
        options.durability = if logged && !fresh {
            Durability::Fdatasync
        } else {
            Durability::Off
        };
    }
    let mut builder = Db::builder(&a.path).options(options).fresh(fresh);
    if let Some(shards) = a.shards {
        builder = builder.shards(shards);
    }
    Ok(builder.open()?)
}
