//! The calibration's cycles per page read and per page write by submission configuration:
//! what the model charges each step for an I/O. A configuration this target could not
//! measure (its figure is 0: no NVMe char device for passthrough, no poll queues for IOPOLL)
//! is left out of the bars and named under the chart.

use super::bars::{finite_or_zero, BarChart, BarSeries};
use crate::ladder::Calibration;
use plotters::style::RGBColor;

/// One configuration: its name and its cycles per read and per write (`None`: the
/// calibration does not measure that direction for it).
struct Configuration {
    name: &'static str,
    read_cycles: Option<f64>,
    write_cycles: Option<f64>,
}

/// The configurations in the order of the ladder.
fn configurations(c: &Calibration) -> Vec<Configuration> {
    let both = |name, read, write| Configuration {
        name,
        read_cycles: Some(read),
        write_cycles: Some(write),
    };
    vec![
        Configuration {
            name: "single",
            read_cycles: Some(c.c_read_single),
            write_cycles: None,
        },
        both("batched", c.c_read_batch, c.c_write_batch),
        both(
            "batched+regbufs",
            c.c_read_batch_fixed,
            c.c_write_batch_fixed,
        ),
        both("SQPOLL (app)", c.c_read_sqpoll, c.c_write_sqpoll),
        both("passthrough", c.c_read_passthrough, c.c_write_passthrough),
        both("IOPOLL", c.c_read_iopoll, c.c_write_iopoll),
        both("libaio", c.c_read_libaio, c.c_write_libaio),
    ]
}

/// Cycles per page read and per page write by configuration, as an SVG document.
pub fn cycles_per_io_svg(c: &Calibration) -> String {
    let (measured, unmeasured): (Vec<Configuration>, Vec<Configuration>) =
        configurations(c).into_iter().partition(|k| {
            [k.read_cycles, k.write_cycles]
                .into_iter()
                .flatten()
                .any(|v| finite_or_zero(v) > 0.0)
        });
    let series = |name: &str, colour: RGBColor, pick: fn(&Configuration) -> Option<f64>| {
        BarSeries {
            name: name.into(),
            colour,
            // A direction measured as 0 next to one that was measured: no bar, not a zero.
            values: measured
                .iter()
                .map(|k| pick(k).filter(|&v| finite_or_zero(v) > 0.0))
                .collect(),
            labels: measured
                .iter()
                .map(|k| {
                    pick(k)
                        .filter(|&v| finite_or_zero(v) > 0.0)
                        .map(|v| format!("{v:.0}"))
                })
                .collect(),
        }
    };
    let mut caption = String::from("single: reads only (writes are always batched)");
    if !unmeasured.is_empty() {
        let names: Vec<&str> = unmeasured.iter().map(|k| k.name).collect();
        caption.push_str(&format!("; not measurable here: {}", names.join(", ")));
    }
    BarChart {
        title: "CPU cycles per page I/O by submission configuration".into(),
        y_label: "TSC cycles per I/O (whole process)".into(),
        categories: measured.iter().map(|k| k.name.to_string()).collect(),
        series: vec![
            series("read", RGBColor(31, 119, 180), |k| k.read_cycles),
            series("write", RGBColor(214, 39, 40), |k| k.write_cycles),
        ],
        caption,
        log_y: false,
        empty_message: "no configuration could be measured here".into(),
    }
    .render()
}
