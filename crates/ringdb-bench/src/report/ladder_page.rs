//! The ladder's HTML page (`ringdb ladder --report`): the charts, then the calibration and
//! the steps as tables with the same columns as the text table, so the page and the terminal
//! read alike.

use super::html::{HtmlReport, Section};
use super::{cycles_per_io_svg, ladder_svg, latency_svg};
use crate::ladder::{Calibration, LadderReport, Step};

/// Columns of the steps table, as in the text table (`ladder::table`).
use crate::ladder::table::STEP_COLUMNS;

/// The ladder's report page; `subtitle` is the line under the title (machine, date).
pub fn ladder_page(report: &LadderReport, subtitle: &str) -> HtmlReport {
    let data_set = format!(
        "target {}: {} records of {} B values, {} B pages, a pool of {} pages, {} data pages ({:.1}x the pool).",
        report.target,
        report.records,
        report.value_size,
        report.page_size,
        report.pool_pages,
        report.data_pages,
        report.data_pages as f64 / report.pool_pages.max(1) as f64
    );
    HtmlReport::new("ringdb ladder")
        .subtitle(subtitle)
        .section(
            Section::new("Throughput by step")
                .paragraph(data_set)
                .paragraph("Each step switches on one more part of the I/O design; the number above a measured bar is its speedup over posix.")
                .svg(ladder_svg(report)),
        )
        .section(Section::new("Latency").svg(latency_svg(&report.steps)))
        .section(
            Section::new("Cycles per I/O")
                .svg(cycles_per_io_svg(&report.calibration))
                .table(
                    vec!["cost".into(), "value".into(), "unit".into()],
                    calibration_rows(&report.calibration),
                ),
        )
        .section(steps_section(&report.steps))
}

/// The steps table, then why each step that did not run did not (a status is a sentence:
/// in a list it wraps, in a table cell it would widen the table past the page).
fn steps_section(steps: &[Step]) -> Section {
    let section = Section::new("Steps").table(
        STEP_COLUMNS.iter().map(|c| c.to_string()).collect(),
        steps.iter().map(step_cells).collect(),
    );
    let not_run: Vec<String> = steps
        .iter()
        .filter(|s| s.status != "ok")
        .map(|s| format!("{}: {}", s.name, s.status))
        .collect();
    if not_run.is_empty() {
        section
    } else {
        section.paragraph("Steps that did not run:").list(not_run)
    }
}

/// The calibrated costs, one per row: name, value, unit.
fn calibration_rows(c: &Calibration) -> Vec<Vec<String>> {
    let row = |name: &str, value: f64, unit: &str, digits: usize| {
        vec![
            name.to_string(),
            format!("{value:.digits$}"),
            unit.to_string(),
        ]
    };
    vec![
        row("read latency (QD1)", c.read_lat_us, "us", 1),
        row("write latency (QD1)", c.write_lat_us, "us", 1),
        row(
            "batched write, per write",
            c.batch_write_us_per_write,
            "us",
            1,
        ),
        row("transaction in memory (c_tx)", c.c_tx, "cycles", 0),
        row("restart after a fault", c.c_restart, "cycles", 0),
        row(
            "descent, skipped by a resumed restart",
            c.c_descent,
            "cycles",
            0,
        ),
        row("checksum of a page", c.c_checksum, "cycles", 0),
        row(
            "checksum of a page just read",
            c.c_checksum_read,
            "cycles",
            0,
        ),
        row("read, single", c.c_read_single, "cycles", 0),
        row("read, batched", c.c_read_batch, "cycles", 0),
        row("write, batched", c.c_write_batch, "cycles", 0),
        row(
            "read, batched + registered buffers",
            c.c_read_batch_fixed,
            "cycles",
            0,
        ),
        row(
            "write, batched + registered buffers",
            c.c_write_batch_fixed,
            "cycles",
            0,
        ),
        row(
            "read, SQPOLL (application thread)",
            c.c_read_sqpoll,
            "cycles",
            0,
        ),
        row(
            "write, SQPOLL (application thread)",
            c.c_write_sqpoll,
            "cycles",
            0,
        ),
        row("read, passthrough", c.c_read_passthrough, "cycles", 0),
        row("write, passthrough", c.c_write_passthrough, "cycles", 0),
        row("read, IOPOLL", c.c_read_iopoll, "cycles", 0),
        row("write, IOPOLL", c.c_write_iopoll, "cycles", 0),
        row("read, libaio", c.c_read_libaio, "cycles", 0),
        row("write, libaio", c.c_write_libaio, "cycles", 0),
        row("device ceiling (50/50 mix)", c.device_iops, "IOPS", 0),
        row("TSC rate", c.tsc_ghz, "GHz", 2),
    ]
}

/// One step's cells; a step that did not run shows `-` for its figures and "not run" (its
/// status is listed under the table).
fn step_cells(st: &Step) -> Vec<String> {
    if st.status != "ok" {
        let mut cells = vec![st.name.clone()];
        cells.extend(std::iter::repeat_n("-".to_string(), STEP_COLUMNS.len() - 2));
        cells.push("not run".into());
        return cells;
    }
    vec![
        st.name.clone(),
        format!("{:.0}", st.tps),
        format!("{:.0}", st.predicted_tps),
        format!("{:.2}", st.tps / st.predicted_tps.max(1e-9)),
        speedup(st.speedup_prev),
        speedup(st.speedup_posix),
        format!("{:.2}", st.faults_per_tx),
        format!("{:.0}", st.cycles_per_tx),
        format!("{:.0}", st.predicted_cycles_per_tx),
        format!("{:.2}", st.enters_per_tx),
        format!("{:.2}", st.writes_per_tx),
        format!("{:.1}", st.lat_us_p50),
        format!("{:.1}", st.lat_us_p99),
        st.iowq_workers.to_string(),
        format!("{:.2}", st.ios_vs_raw),
        st.bound.clone(),
    ]
}

/// `1.23x`, or `-` when there was nothing to compare with.
fn speedup(x: f64) -> String {
    if x > 0.0 {
        format!("{x:.2}x")
    } else {
        "-".into()
    }
}
