//! Transaction latency per step: the median beside the 99th percentile. Synchronous steps
//! and asynchronous ones differ by orders of magnitude (one transaction at a time against
//! hundreds in flight), so the axis turns logarithmic when the bars span more than 100x.

use super::bars::{finite_or_zero, BarChart, BarSeries};
use crate::ladder::Step;
use plotters::style::RGBColor;

/// Ratio of the highest to the lowest bar above which the y axis is logarithmic.
const LOG_AXIS_SPAN: f64 = 100.0;

/// p50 and p99 transaction latency of each step that ran, as an SVG document.
pub fn latency_svg(steps: &[Step]) -> String {
    let ran: Vec<&Step> = steps.iter().filter(|s| s.status == "ok").collect();
    let values: Vec<f64> = ran
        .iter()
        .flat_map(|s| [s.lat_us_p50, s.lat_us_p99])
        .map(finite_or_zero)
        .filter(|&v| v > 0.0)
        .collect();
    let highest = values.iter().copied().fold(0.0, f64::max);
    let lowest = values.iter().copied().fold(f64::INFINITY, f64::min);
    let log_y = lowest.is_finite() && highest / lowest > LOG_AXIS_SPAN;
    let series = |name: &str, colour: RGBColor, pick: fn(&Step) -> f64| BarSeries {
        name: name.into(),
        colour,
        values: ran.iter().map(|s| Some(pick(s))).collect(),
        labels: vec![None; ran.len()],
    };
    BarChart {
        title: "Transaction latency by step".into(),
        y_label: if log_y {
            "microseconds (log scale)".into()
        } else {
            "microseconds".into()
        },
        categories: ran.iter().map(|s| s.name.clone()).collect(),
        series: vec![
            series("p50", RGBColor(44, 160, 44), |s| s.lat_us_p50),
            series("p99", RGBColor(148, 103, 189), |s| s.lat_us_p99),
        ],
        caption: super::ladder_chart::not_run_caption(steps),
        log_y,
        empty_message: "no step ran here".into(),
    }
    .render()
}
