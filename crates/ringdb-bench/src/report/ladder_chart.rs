//! The ladder as a chart (the paper's Fig. 5): for each step that ran, the measured
//! transactions per second beside the model's prediction, with the speedup over `posix`
//! written above the measured bar. Steps that did not run are named under the chart, so a
//! reader sees what is missing and why rather than a shorter ladder.

use super::bars::{BarChart, BarSeries};
use crate::ladder::{LadderReport, Step};
use plotters::style::RGBColor;

/// Colour of the measured bars.
pub(crate) const MEASURED_COLOUR: RGBColor = RGBColor(31, 119, 180);
/// Colour of the model's bars.
pub(crate) const MODEL_COLOUR: RGBColor = RGBColor(255, 160, 60);

/// The ladder as grouped bars (measured and predicted tx/s per step that ran), as an SVG
/// document. A ladder in which no step ran gives an SVG that says so.
pub fn ladder_svg(report: &LadderReport) -> String {
    let ran: Vec<&Step> = report.steps.iter().filter(|s| s.status == "ok").collect();
    let measured = BarSeries {
        name: "measured tx/s".into(),
        colour: MEASURED_COLOUR,
        values: ran.iter().map(|s| Some(s.tps)).collect(),
        labels: ran.iter().map(|s| speedup_label(s.speedup_posix)).collect(),
    };
    let predicted = BarSeries {
        name: "model tx/s".into(),
        colour: MODEL_COLOUR,
        values: ran.iter().map(|s| Some(s.predicted_tps)).collect(),
        labels: vec![None; ran.len()],
    };
    BarChart {
        title: "Transactions per second by step, measured beside the model".into(),
        y_label: "transactions per second".into(),
        categories: ran.iter().map(|s| s.name.clone()).collect(),
        series: vec![measured, predicted],
        caption: not_run_caption(&report.steps),
        log_y: false,
        empty_message: "no step ran here".into(),
    }
    .render()
}

/// `2.31x` above a measured bar (its speedup over posix), nothing when posix did not run.
fn speedup_label(speedup_over_posix: f64) -> Option<String> {
    (speedup_over_posix.is_finite() && speedup_over_posix > 0.0)
        .then(|| format!("{speedup_over_posix:.2}x"))
}

/// "unsupported here: +passthrough, +iopoll; failed: +sqpoll", or empty when every step ran.
pub(crate) fn not_run_caption(steps: &[Step]) -> String {
    let named = |prefix: &str| -> Vec<&str> {
        steps
            .iter()
            .filter(|s| s.status.starts_with(prefix))
            .map(|s| s.name.as_str())
            .collect()
    };
    let mut parts = Vec::new();
    let unsupported = named("unsupported");
    if !unsupported.is_empty() {
        parts.push(format!("unsupported here: {}", unsupported.join(", ")));
    }
    let failed = named("failed");
    if !failed.is_empty() {
        parts.push(format!("failed: {}", failed.join(", ")));
    }
    let other: Vec<&str> = steps
        .iter()
        .filter(|s| s.status != "ok")
        .filter(|s| !s.status.starts_with("unsupported") && !s.status.starts_with("failed"))
        .map(|s| s.name.as_str())
        .collect();
    if !other.is_empty() {
        parts.push(format!("did not run: {}", other.join(", ")));
    }
    parts.join("; ")
}
