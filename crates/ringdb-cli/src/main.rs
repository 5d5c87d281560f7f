//! `ringdb`: the command line of the ringdb storage engine and I/O lab.

// The doc comments on the commands are clap's help text, printed verbatim (`k<i>` is not HTML,
// `[io]` names a section of a configuration file, not a link).
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

mod advise_cmd;
mod cluster_cmd;
mod config_flags;
mod hints;
mod hints_bench;
mod hints_db;
mod hints_net;
mod hints_tpcc;
mod io_cmd;
mod kv_cmd;
mod ladder_cmd;
mod micro_cmd;
mod net_cmd;
mod probe_cmd;
mod serve_cmd;
mod tpcc_cmd;
mod tpcc_shards;
mod ycsb_cmd;
mod ycsb_model;
mod ycsb_shards;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ringdb", version, about = "io_uring-native storage engine and I/O lab", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Raw I/O benchmark in fio's vocabulary, over any engine and io_uring switch.
    Io(Box<io_cmd::IoArgs>),
    /// What this kernel and device support, with the paper's guidelines applied as warnings.
    Probe(probe_cmd::ProbeArgs),
    /// One of the paper's microbenchmarks (nop-batch, sqpoll-wakeup, iowq, batch-latency,
    /// block-size, scale-out, fixed-buffers, durable), the shard hand-off (handoff), or a
    /// breakdown (scan, point-cost, txn-cost): a table, --json and --plot FILE.svg.
    Micro(micro_cmd::MicroArgs),
    /// The paper's Fig. 5: YCSB updates with io_uring features switched on step by step,
    /// each beside the cost model's prediction (the README's main job).
    Ladder(Box<ladder_cmd::LadderArgs>),
    /// Which io_uring configuration pays off here: the cost model over costs measured on the
    /// target, every candidate ranked with the paper's guidelines as reasons; --verify runs the
    /// best ones on the engine.
    Advise(Box<advise_cmd::AdviseArgs>),
    /// A YCSB workload (a-f, update-only) on an embedded database: load, timed run,
    /// throughput per second, latency percentiles, page faults per operation.
    Ycsb(Box<ycsb_cmd::YcsbArgs>),
    /// TPC-C (all five transactions, serializable, 128 tasks by default) on an embedded
    /// database, ending with the consistency checks (exit 1 when they fail); --check runs only
    /// the checks, --ladder the paper's Fig. 6.
    Tpcc(Box<tpcc_cmd::TpccArgs>),
    /// Inserts keys k<i> with values derived from i, one commit (or --batch keys) each, from
    /// parallel tasks; with --ack-log, records each acknowledged key (for crash tests).
    PutMany(Box<kv_cmd::PutManyArgs>),
    /// Prints a key's value (exit 1 when it is absent).
    Get(kv_cmd::GetArgs),
    /// Prints every key and value, one per line (tab-separated), in key order.
    Dump(kv_cmd::DumpArgs),
    /// Recovers the database, verifies the tree's invariants and every page's checksum and
    /// prints the key count; exits non-zero on any problem.
    Check(kv_cmd::CheckArgs),
    /// Serves the database over the Redis protocol (redis-cli, redis-benchmark, any Redis
    /// client): one network worker per shard, replies to writes once they are durable.
    Serve(Box<serve_cmd::ServeArgs>),
    /// The controller of a ringdb cluster: pushes a topology (which node serves which of the
    /// 16384 slots) to every node at a new epoch, or checks that they hold it.
    Cluster(cluster_cmd::ClusterArgs),
    Pingpong(net_cmd::PingArgs),
    Shuffle(net_cmd::ShuffleArgs),
}

fn main() -> ExitCode {
    // The matches travel with the arguments: `--config` needs to know which flags were typed.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let typed = matches
        .subcommand()
        .map_or_else(clap::ArgMatches::default, |(_, typed)| typed.clone());
    let result = match cli.cmd {
        Cmd::Io(args) => io_cmd::run(*args, &typed),
        Cmd::Probe(args) => probe_cmd::run(args),
        Cmd::Micro(args) => micro_cmd::run(args),
        Cmd::Ladder(args) => ladder_cmd::run(*args, &typed),
        Cmd::Ycsb(args) => ycsb_cmd::run(*args, &typed),
        Cmd::Advise(args) => advise_cmd::run(*args),
        Cmd::Tpcc(args) => match tpcc_cmd::run(*args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Cmd::PutMany(args) => kv_cmd::put_many(*args),
        Cmd::Get(args) => match kv_cmd::get(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Cmd::Dump(args) => kv_cmd::dump(args),
        Cmd::Check(args) => match kv_cmd::check(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Cmd::Serve(args) => serve_cmd::run(*args),
        Cmd::Cluster(args) => cluster_cmd::run(args),
        Cmd::Pingpong(args) => net_cmd::run_pingpong(args),
        Cmd::Shuffle(args) => net_cmd::run_shuffle(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringdb: error: {e}");
            if let Some(hint) = hints::hint(e.as_ref()) {
                eprintln!("ringdb: hint: {hint}");
            }
            ExitCode::from(2)
        }
    }
}
