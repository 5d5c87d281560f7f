//! `ringdb advise --report DIR`: the advice as one page. The recommendation and its reasons
//! first, then every candidate's prediction as a chart (with the measured figure beside it
//! where `--verify` ran it), the verification as the ladder's charts, the cycles per I/O the
//! prediction used, and what the probe found.

use super::bars::{BarChart, BarSeries};
use super::html::{HtmlReport, Section};
use super::ladder_chart::{MEASURED_COLOUR, MODEL_COLOUR};
use super::{cycles_per_io_svg, ladder_svg, latency_svg};
use crate::advise::{Advice, Candidate, Verification};
use ringdb_lab::probe::ProbeReport;

/// The advice's page; `subtitle` is the line under the title (machine, date).
pub fn advice_page(advice: &Advice, subtitle: &str) -> HtmlReport {
    let mut page = HtmlReport::new("ringdb advise")
        .subtitle(subtitle)
        .section(recommendation_section(advice))
        .section(candidates_section(advice));
    if let Some(v) = &advice.verification {
        page = page.section(verification_section(v));
    }
    page.section(
        Section::new("Cycles per I/O (measured here)")
            .paragraph(format!(
                "Device ceiling: {:.0} reads+writes per second with {} ring(s), {:.0} with one. \
                 Read latency {:.1} us, write {:.1} us; an operation in memory costs {:.0} cycles.",
                advice.calibration.device_iops,
                advice.machine.threads,
                advice.device_iops_one_ring,
                advice.calibration.read_lat_us,
                advice.calibration.write_lat_us,
                advice.calibration.c_tx
            ))
            .svg(cycles_per_io_svg(&advice.calibration)),
    )
    .section(probe_section(&advice.probe))
}

fn recommendation_section(a: &Advice) -> Section {
    let mut s = Section::new("Recommendation").paragraph(format!(
        "Workload: {}; {:.2} page reads and {:.2} writes per operation ({}); {} thread(s), {} \
         operations in flight{}.",
        a.workload,
        a.io_per_op.reads,
        a.io_per_op.writes,
        a.io_source,
        a.machine.threads,
        a.machine.concurrency,
        a.max_latency_us.map_or(String::new(), |l| format!(
            ", mean latency at most {l:.0} us"
        ))
    ));
    s = match a.recommendation() {
        Some(c) => s.paragraph(format!(
            "Recommended: {} ({}), {} ring(s) of {} tasks: predicted {:.0} operations per second \
             at {:.0} cycles per operation, bound by {}.",
            c.name,
            c.description,
            c.rings,
            c.tasks_per_ring,
            c.ops_per_s,
            c.cpu_cycles_per_op,
            c.bound
        )),
        None => s.paragraph("No candidate can run on this target (each one's reason is below)."),
    };
    if let Some(v) = &a.verification {
        s = s.paragraph(format!("Verified on the engine: {}", v.verdict));
    }
    s = s.list(
        a.reasons
            .iter()
            .filter(|r| r.guideline != "probe")
            .map(|r| format!("[{}] {}", r.guideline, r.text))
            .collect(),
    );
    if a.undetermined.is_empty() {
        s
    } else {
        s.paragraph("Not determined here:")
            .list(a.undetermined.clone())
    }
}

fn candidates_section(a: &Advice) -> Section {
    let ranked: Vec<&Candidate> = a.ranking.iter().map(|&i| &a.candidates[i]).collect();
    let measured = |c: &Candidate| {
        a.verification.as_ref().and_then(|v| {
            v.candidates
                .iter()
                .find(|m| m.name == c.name && m.status == "ok")
                .map(|m| m.measured_ops_per_s)
        })
    };
    let chart = BarChart {
        title: "Operations per second by candidate, predicted (and measured where verified)".into(),
        y_label: "operations per second".into(),
        categories: ranked.iter().map(|c| c.name.clone()).collect(),
        series: vec![
            BarSeries {
                name: "predicted".into(),
                colour: MODEL_COLOUR,
                values: ranked.iter().map(|c| Some(c.ops_per_s)).collect(),
                labels: (1..=ranked.len()).map(|r| Some(format!("#{r}"))).collect(),
            },
            BarSeries {
                name: "measured".into(),
                colour: MEASURED_COLOUR,
                values: ranked.iter().map(|c| measured(c)).collect(),
                labels: vec![None; ranked.len()],
            },
        ],
        caption: unsupported_caption(&a.candidates),
        log_y: false,
        empty_message: "no candidate can run here".into(),
    };
    Section::new("Candidates")
        .svg(chart.render())
        .table(
            [
                "rank",
                "candidate",
                "rings",
                "pred ops/s",
                "app cyc/op",
                "cpu cyc/op",
                "lat us",
                "bound",
                "what",
            ]
            .map(String::from)
            .to_vec(),
            ranked
                .iter()
                .enumerate()
                .map(|(i, c)| candidate_row(i + 1, c))
                .collect(),
        )
        .list(
            a.candidates
                .iter()
                .filter(|c| c.status != "ok")
                .map(|c| format!("{}: {}", c.name, c.status))
                .collect(),
        )
}

fn candidate_row(rank: usize, c: &Candidate) -> Vec<String> {
    vec![
        rank.to_string(),
        c.name.clone(),
        c.rings.to_string(),
        format!("{:.0}", c.ops_per_s),
        format!("{:.0}", c.app_cycles_per_op),
        format!("{:.0}", c.cpu_cycles_per_op),
        format!("{:.1}", c.latency_us),
        c.bound.clone(),
        c.description.clone(),
    ]
}

fn unsupported_caption(candidates: &[Candidate]) -> String {
    let names: Vec<&str> = candidates
        .iter()
        .filter(|c| c.status != "ok")
        .map(|c| c.name.as_str())
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!("unsupported here: {}", names.join(", "))
    }
}

fn verification_section(v: &Verification) -> Section {
    let rows = v
        .candidates
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.status.clone(),
                c.rings.to_string(),
                format!("{:.0}", c.predicted_ops_per_s),
                format!("{:.0}", c.measured_ops_per_s),
                format!("{:.0}", c.predicted_with_measured_io),
                format!("{:.2}", c.reads_per_op),
                format!("{:.2}", c.writes_per_op),
                format!("{:.0}", c.cycles_per_op),
                format!("{:.0}", c.predicted_cycles_per_op),
                format!("{:.0}", c.lat_us_p50),
                format!("{:.0}", c.lat_us_p99),
            ]
        })
        .collect();
    Section::new("Verification on the engine")
        .paragraph(format!(
            "{} The model's bars use the reads and writes each run measured.",
            v.verdict
        ))
        .svg(ladder_svg(&v.ladder))
        .svg(latency_svg(&v.ladder.steps))
        .table(
            [
                "candidate",
                "status",
                "rings",
                "predicted",
                "measured",
                "model (measured I/O)",
                "reads/op",
                "writes/op",
                "cyc/op",
                "model cyc/op",
                "p50 us",
                "p99 us",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        )
}

fn probe_section(p: &ProbeReport) -> Section {
    let mut rows = vec![
        vec!["kernel".to_string(), p.kernel_release.clone()],
        vec![
            "io_uring".to_string(),
            if p.uring_available {
                "available".to_string()
            } else {
                format!("unavailable: {}", p.setup_error.as_deref().unwrap_or("?"))
            },
        ],
        vec![
            "CPUs (online / allowed)".to_string(),
            format!(
                "{} / {}",
                p.online_cpus.map_or("?".into(), |c| c.to_string()),
                p.allowed_cpus.map_or("?".into(), |c| c.to_string())
            ),
        ],
        vec![
            "memlock (soft)".to_string(),
            p.memlock_soft.map_or("?".into(), |m| m.to_string()),
        ],
        vec![
            "device".to_string(),
            p.device
                .as_ref()
                .map_or("none (not on a block device)".into(), |d| d.name.clone()),
        ],
        vec![
            "reads".to_string(),
            p.read_path.as_ref().map_or("not checked".into(), |r| {
                if r.punted_to_iowq {
                    format!("punted to io-wq ({} workers)", r.iowq_workers)
                } else {
                    "complete inline".into()
                }
            }),
        ],
    ];
    for c in p.setup_flags.iter().chain(&p.registrations) {
        let outcome = if c.ok {
            "ok".to_string()
        } else {
            format!("refused: {}", c.error.as_deref().unwrap_or("?"))
        };
        rows.push(vec![c.name.to_string(), outcome]);
    }
    Section::new("What the probe found")
        .table(vec!["what".into(), "found".into()], rows)
        .list(p.warnings.clone())
}
