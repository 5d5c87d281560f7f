//! Why: the paper's four guidelines (seeds/000 Sec. 5.1) applied to what the probe found, what
//! the calibration measured and what the model predicts, one line each, naming the figure that
//! decides it.

use super::candidate::{Candidate, Machine};
use super::workload::IoPerOp;
use crate::ladder::Calibration;
use ringdb_lab::probe::ProbeReport;
use serde::Serialize;

/// One line of the advice's reasoning.
#[derive(Clone, Debug, Serialize)]
pub struct Reason {
    /// The guideline it applies (`GL1` .. `GL4`), or `probe` for the probe's own findings.
    pub guideline: &'static str,
    /// The line.
    pub text: String,
}

/// Everything the reasons look at.
pub(super) struct Facts<'a> {
    pub(super) probe: &'a ProbeReport,
    pub(super) calibration: &'a Calibration,
    pub(super) io: IoPerOp,
    pub(super) machine: Machine,
    pub(super) candidates: &'a [Candidate],
    /// Candidate indices, best first (from `rank`).
    pub(super) order: &'a [usize],
}

impl Facts<'_> {
    fn named(&self, name: &str) -> Option<&Candidate> {
        self.candidates
            .iter()
            .find(|c| c.name == name && c.status == "ok")
    }

    fn best(&self) -> Option<&Candidate> {
        self.order.first().map(|&i| &self.candidates[i])
    }
}

/// The reasons, guideline by guideline.
pub(super) fn reasons(f: &Facts) -> Vec<Reason> {
    let mut out = Vec::new();
    let mut say = |guideline, text: String| out.push(Reason { guideline, text });
    if let Some(text) = io_bottleneck(f) {
        say("GL1", text);
    }
    if let Some(text) = ring_per_thread(f) {
        say("GL2", text);
    }
    say("GL3", setup_mode(f));
    if let Some(text) = sqpoll(f) {
        say("GL3", text);
    }
    if let Some(text) = iowq(f) {
        say("GL3", text);
    }
    if let Some(text) = registered_buffers(f) {
        say("GL4", text);
    }
    for c in f.candidates.iter().filter(|c| c.status != "ok") {
        say("GL4", format!("{}: {}", c.name, c.status));
    }
    for w in &f.probe.warnings {
        say("probe", w.clone());
    }
    out
}

/// GL1: what share of an operation's cycles is I/O, and what asynchronous I/O gains over
/// blocking I/O here.
fn io_bottleneck(f: &Facts) -> Option<String> {
    let best = f.best()?;
    let io_share = 1.0 - f.calibration.c_tx / best.app_cycles_per_op.max(1.0);
    let per_op = format!(
        "{:.2} reads, {:.2} writes per operation",
        f.io.reads, f.io.writes
    );
    if f.io.reads + f.io.writes < 0.05 {
        return Some(format!(
            "I/O is {:.0}% of an operation's cycles ({per_op}): the workload runs from memory, \
             so io_uring's gains are limited; choose by CPU cost",
            io_share * 100.0
        ));
    }
    let posix = f.named("posix")?;
    let asynchronous = f
        .order
        .iter()
        .map(|&i| &f.candidates[i])
        .find(|c| c.name != "posix")?;
    let gain = asynchronous.ops_per_s / posix.ops_per_s.max(f64::MIN_POSITIVE);
    let verdict = if gain < 1.1 {
        "asynchronous I/O does not pay here: the blocking threads already reach what bounds it"
    } else {
        "asynchronous I/O pays"
    };
    Some(format!(
        "I/O is {:.0}% of an operation's cycles ({per_op}); blocking I/O waits {:.0} us per \
         read: the best asynchronous configuration, {}, is predicted at {gain:.1}x posix \
         ({:.0} vs {:.0} ops/s): {verdict}",
        io_share * 100.0,
        f.calibration.read_lat_us,
        asynchronous.name,
        asynchronous.ops_per_s,
        posix.ops_per_s
    ))
}

/// GL2: a ring per thread, and what bounds the best configuration.
fn ring_per_thread(f: &Facts) -> Option<String> {
    let best = f.best()?;
    let bound = match best.bound.as_str() {
        "device" => format!(
            "it is bound by the device ({:.0} reads+writes/s measured): more cores would not \
             help, fewer cycles per I/O leave CPU to the application",
            f.calibration.device_iops
        ),
        "cpu" => "it is bound by the CPU: more rings on more cores scale it, and every cycle \
                  saved per I/O is throughput"
            .to_string(),
        "concurrency" => format!(
            "it is bound by the {} operations the application keeps in flight: more \
             concurrency would raise it",
            f.machine.concurrency
        ),
        other => format!("it is bound by {other}"),
    };
    Some(format!(
        "one ring per thread: {} ring(s) on {} thread(s), {} tasks each; {bound}",
        best.rings, f.machine.threads, best.tasks_per_ring
    ))
}

/// GL3: DEFER_TASKRUN with SINGLE_ISSUER where the kernel takes it.
fn setup_mode(f: &Facts) -> String {
    match f.probe.check("DEFER_TASKRUN") {
        Some(c) if c.ok => "task work: DEFER_TASKRUN + SINGLE_ISSUER (accepted by this kernel): \
                            completions run when the ring's thread asks, never preempting it"
            .into(),
        Some(c) => format!(
            "task work: DEFER_TASKRUN refused here ({}): use COOP_TASKRUN, the next best",
            c.error.as_deref().unwrap_or("refused")
        ),
        None => "task work: io_uring could not be probed; the fallback engines need none".into(),
    }
}

/// GL3: SQPOLL pays only when its core is amortised.
fn sqpoll(f: &Facts) -> Option<String> {
    let sq = f.candidates.iter().find(|c| c.name == "+sqpoll")?;
    if sq.status != "ok" {
        return Some(format!("SQPOLL: not recommended: {}", sq.status));
    }
    let without = f
        .order
        .iter()
        .map(|&i| &f.candidates[i])
        .find(|c| c.name != "+sqpoll")?;
    let verdict = if sq.ops_per_s > without.ops_per_s * 1.03 {
        "recommended"
    } else {
        "not recommended"
    };
    Some(format!(
        "SQPOLL: a poller needs a core of its own; on {} thread(s) {} ring(s) with pollers are \
         predicted at {:.0} ops/s ({:.0} cycles/op with the pollers' cores) vs {:.0} ops/s for \
         {} ({:.0} cycles/op): {verdict}",
        f.machine.threads,
        sq.rings,
        sq.ops_per_s,
        sq.cpu_cycles_per_op,
        without.ops_per_s,
        without.name,
        without.cpu_cycles_per_op
    ))
}

/// GL3: reads the device cannot take without blocking go to io-wq workers.
fn iowq(f: &Facts) -> Option<String> {
    let check = f.probe.read_path.as_ref()?;
    let (uring, libaio) = (f.calibration.c_read_batch, f.calibration.c_read_libaio);
    if !check.punted_to_iowq {
        return Some(format!(
            "reads complete inline on this device (no io-wq workers seen): io_uring costs {uring:.0} \
             cycles per batched read, libaio {libaio:.0}"
        ));
    }
    let cheaper = if libaio > 0.0 && libaio < uring {
        "libaio is cheaper per I/O here"
    } else {
        "io_uring stays cheaper per I/O even so"
    };
    Some(format!(
        "io_uring punts every read on this device to io-wq ({} workers seen; no NOWAIT): \
         {uring:.0} cycles per batched read vs {libaio:.0} with libaio: {cheaper}",
        check.iowq_workers
    ))
}

/// GL4: registered buffers, priced from the calibration.
fn registered_buffers(f: &Facts) -> Option<String> {
    let (plain, fixed) = (f.calibration.c_read_batch, f.calibration.c_read_batch_fixed);
    if plain <= 0.0 || fixed <= 0.0 {
        return None;
    }
    let saving = 1.0 - fixed / plain;
    let when = match f.best().map(|b| b.bound.as_str()) {
        Some("cpu") => "the best configuration is CPU-bound: worth it",
        Some("device") => "the best configuration is device-bound: it saves CPU, not throughput",
        _ => "worth it when CPU-bound",
    };
    Some(format!(
        "registered buffers {} {:.0}% of cycles per read here ({plain:.0} -> {fixed:.0}): {when}",
        if saving >= 0.0 { "save" } else { "cost" },
        saving.abs() * 100.0
    ))
}

#[cfg(test)]
mod tests {
    use super::super::candidate::{predict_all, rank};
    use super::*;
    use crate::ladder::LadderOpts;
    use ringdb_lab::probe::{probe, ReadPathCheck};

    fn costs(c_read_batch: f64, c_read_libaio: f64) -> Calibration {
        Calibration {
            tsc_ghz: 2.0,
            read_lat_us: 4.0,
            write_lat_us: 6.0,
            c_tx: 3000.0,
            c_restart: 3000.0,
            c_read_single: c_read_batch * 1.3,
            c_read_batch,
            c_write_batch: c_read_batch,
            c_read_batch_fixed: c_read_batch * 0.85,
            c_write_batch_fixed: c_read_batch * 0.85,
            c_read_sqpoll: 1000.0,
            c_write_sqpoll: 1000.0,
            c_read_libaio,
            c_write_libaio: c_read_libaio,
            ..Default::default()
        }
    }

    fn lines(cal: &Calibration, punted: bool) -> Vec<Reason> {
        let mut report = probe(None);
        report.read_path = Some(ReadPathCheck {
            reads: 8,
            iowq_workers: if punted { 2 } else { 0 },
            punted_to_iowq: punted,
        });
        let io = IoPerOp {
            reads: 0.7,
            writes: 0.1,
        };
        let machine = Machine {
            threads: 2,
            concurrency: 256,
        };
        let candidates = predict_all(&LadderOpts::new("/tmp/advise-test"), cal, io, machine);
        let order = rank(&candidates, None);
        reasons(&Facts {
            probe: &report,
            calibration: cal,
            io,
            machine,
            candidates: &candidates,
            order: &order,
        })
    }

    #[test]
    fn io_wq_punting_names_the_cheaper_interface() {
        let punted = lines(&costs(9000.0, 6000.0), true);
        assert!(
            punted
                .iter()
                .any(|r| r.guideline == "GL3" && r.text.contains("libaio is cheaper")),
            "{punted:?}"
        );
        let inline = lines(&costs(6000.0, 9000.0), false);
        assert!(inline.iter().any(|r| r.text.contains("complete inline")));
        assert!(!inline.iter().any(|r| r.text.contains("libaio is cheaper")));
    }

    #[test]
    fn registered_buffers_and_the_bottleneck_are_priced() {
        let all = lines(&costs(8000.0, 9000.0), false);
        let regbufs = all
            .iter()
            .find(|r| r.text.starts_with("registered buffers"))
            .unwrap();
        assert!(regbufs.text.contains("save 15%"), "{}", regbufs.text);
        let gl1 = all.iter().find(|r| r.guideline == "GL1").unwrap();
        assert!(gl1.text.contains("x posix"), "{}", gl1.text);
    }
}
