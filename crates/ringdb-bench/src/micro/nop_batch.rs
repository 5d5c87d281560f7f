//! `nop-batch` (paper Sec. 2.1): cycles per NOP against the number of NOPs handed to the kernel
//! by one `io_uring_enter`. The syscall's fixed cost is shared by the batch, so cycles per
//! operation fall with batch size (the paper: about 5-6x fewer at batch 16 than at 1).

use super::{MicroOpts, MicroResult, Plot, Series};
use crate::error::Result;
use ringdb_io::{open_engine, Engine, EngineKind, IoCompletion, IoConfig, IoRequest, SetupMode};
use ringdb_lab::counters::{rdtsc, tsc_hz};
use serde_json::json;
use std::time::Instant;

const BATCHES: &[u32] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];
const QUICK_BATCHES: &[u32] = &[1, 16, 256];
/// Time per point with `--quick`, at most.
const QUICK_POINT: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs batches of `batch` NOPs (push all, one enter that submits and waits for all, reap)
/// for `runtime`; returns (NOPs, TSC ticks, enters).
fn measure(
    engine: &mut dyn Engine,
    batch: u32,
    runtime: std::time::Duration,
) -> Result<(u64, u64, u64)> {
    let mut out: Vec<IoCompletion> = Vec::with_capacity(batch as usize);
    let enters0 = engine.stats().enters;
    // Warm up: the first enters fault in the rings.
    for _ in 0..64 {
        one_batch(engine, batch, &mut out)?;
    }
    let enters1 = engine.stats().enters;
    let start = Instant::now();
    let t0 = rdtsc();
    let mut nops = 0u64;
    while start.elapsed() < runtime {
        // Check the clock every few batches only: Instant::now costs as much as a small batch.
        for _ in 0..16 {
            one_batch(engine, batch, &mut out)?;
            nops += batch as u64;
        }
    }
    let ticks = rdtsc().saturating_sub(t0);
    let _ = enters0;
    Ok((nops, ticks, engine.stats().enters - enters1))
}

fn one_batch(engine: &mut dyn Engine, batch: u32, out: &mut Vec<IoCompletion>) -> Result<()> {
    for i in 0..batch {
        // SAFETY: a NOP carries no buffer, so nothing must outlive it.
        unsafe { engine.push(&IoRequest::nop(i as u64))? };
    }
    engine.submit(batch as usize)?;
    out.clear();
    let mut got = engine.reap(out);
    while got < batch as usize {
        engine.submit(batch as usize - got)?;
        got += engine.reap(out);
    }
    for c in out.iter() {
        if c.result < 0 {
            return Err(ringdb_io::IoError::from_completion("nop", 0, c.result).into());
        }
    }
    Ok(())
}

pub fn run(opts: &MicroOpts) -> Result<MicroResult> {
    let batches = if opts.quick { QUICK_BATCHES } else { BATCHES };
    let runtime = opts.runtime_capped_when_quick(QUICK_POINT);
    let mut r = MicroResult::new(
        "nop-batch",
        "paper Sec. 2.1: batching amortises io_uring_enter (about 5-6x fewer cycles per op at batch 16)",
        &["setup", "batch", "nops", "cycles_per_nop", "ns_per_nop", "enters_per_nop", "vs_batch_1"],
    );
    let hz = tsc_hz();
    let mut series = Vec::new();
    for mode in [SetupMode::Default, SetupMode::Defer] {
        series.push(measure_mode(&mut r, opts, mode, batches, runtime)?);
    }
    for s in &series {
        let at = |b: f64| s.points.iter().find(|p| p.0 == b).map(|p| p.1);
        if let (Some(one), Some(sixteen)) = (at(1.0), at(16.0)) {
            r.notes.push(format!(
                "{}: batch 16 costs {:.2}x the cycles per NOP of batch 1 ({:.1}x fewer; the paper reports 5-6x fewer){}",
                s.label,
                sixteen / one,
                one / sixteen,
                if sixteen / one <= 1.0 / 3.0 { "" } else { "; above 1/3 here" }
            ));
        }
    }
    r.notes.push(format!(
        "cycles are TSC ticks ({:.2} GHz) of the submitting thread, which does nothing else; NOPs complete inline, so one enter per batch submits and reaps it",
        hz / 1e9
    ));
    r.plot = Some(
        Plot::new(
            "io_uring NOP: cycles per operation vs batch size",
            "NOPs per io_uring_enter",
            "cycles per NOP",
            series,
        )
        .log_x()
        .log_y(),
    );
    Ok(r)
}

/// Every batch size on one ring of `mode`, a row each into `r`; returns their cycles per NOP
/// as a plot line.
fn measure_mode(
    r: &mut MicroResult,
    opts: &MicroOpts,
    mode: SetupMode,
    batches: &[u32],
    runtime: std::time::Duration,
) -> Result<Series> {
    let hz = tsc_hz();
    let cfg = IoConfig {
        setup: mode,
        queue_depth: *batches.iter().max().unwrap_or(&256),
        ..IoConfig::new(EngineKind::Uring)
    };
    let mut engine = open_engine(&cfg, &[], None)?;
    let mut points = Vec::new();
    let mut base = None;
    for &b in batches {
        let (nops, ticks, enters) = measure(engine.as_mut(), b, runtime)?;
        let cyc = ticks as f64 / nops.max(1) as f64;
        let base_cyc = *base.get_or_insert(cyc);
        if opts.progress {
            eprintln!("nop-batch {} batch {b}: {cyc:.0} cycles/NOP", mode.name());
        }
        r.row(vec![
            json!(mode.name()),
            json!(b),
            json!(nops),
            json!(cyc),
            json!(cyc / hz * 1e9),
            json!(enters as f64 / nops.max(1) as f64),
            json!(cyc / base_cyc),
        ]);
        points.push((b as f64, cyc));
    }
    Ok(Series {
        label: format!("setup {}", mode.name()),
        points,
    })
}
