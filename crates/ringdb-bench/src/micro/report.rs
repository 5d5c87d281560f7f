//! A microbenchmark's result: rows of named columns, notes, and an optional plot.

use crate::error::{BenchError, Result};
use plotters::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// One line of a plot.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart of one or more series.
#[derive(Clone, Debug, Serialize)]
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
}

impl Plot {
    /// A plot of `series` on linear axes.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        series: Vec<Series>,
    ) -> Plot {
        Plot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            series,
        }
    }

    /// The same plot with a logarithmic x axis.
    pub fn log_x(self) -> Plot {
        Plot {
            log_x: true,
            ..self
        }
    }

    /// The same plot with a logarithmic y axis.
    pub fn log_y(self) -> Plot {
        Plot {
            log_y: true,
            ..self
        }
    }
}

/// What a microbenchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct MicroResult {
    /// `ringdb micro` name, e.g. `nop-batch`.
    pub name: String,
    /// What it mirrors in the paper, e.g. "Sec. 2.1, batching amortises io_uring_enter".
    pub mirrors: String,
    pub columns: Vec<String>,
    /// One JSON value per column, numbers as numbers.
    pub rows: Vec<Vec<Value>>,
    /// Findings in words: the comparison with the paper, caveats of this machine.
    pub notes: Vec<String>,
    pub plot: Option<Plot>,
}

impl MicroResult {
    pub fn new(name: &str, mirrors: &str, columns: &[&str]) -> Self {
        MicroResult {
            name: name.into(),
            mirrors: mirrors.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
            plot: None,
        }
    }

    /// Appends a row; it must have one value per column.
    pub fn row(&mut self, values: Vec<Value>) {
        assert_eq!(
            values.len(),
            self.columns.len(),
            "row width of {}",
            self.name
        );
        self.rows.push(values);
    }

    /// The value in `column` of every row, as numbers (non-numbers are skipped).
    pub fn column_f64(&self, column: &str) -> Vec<f64> {
        let Some(i) = self.columns.iter().position(|c| c == column) else {
            return Vec::new();
        };
        self.rows.iter().filter_map(|r| r[i].as_f64()).collect()
    }

    /// An aligned text table followed by the notes.
    pub fn render_table(&self) -> String {
        let cell = |v: &Value| match v {
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.abs() < 10.0 => format!("{f:.3}"),
                Some(f) if n.is_f64() => format!("{f:.1}"),
                _ => n.to_string(),
            },
            Value::String(s) => s.clone(),
            Value::Null => "-".into(),
            other => other.to_string(),
        };
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(cell).collect())
            .collect();
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|i| {
                cells
                    .iter()
                    .map(|r| r[i].len())
                    .chain(std::iter::once(self.columns[i].len()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut s = format!("{} ({})\n", self.name, self.mirrors);
        let line = |vals: &[String]| {
            vals.iter()
                .zip(&widths)
                .map(|(v, w)| format!("{v:>w$}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        s.push_str(&line(&self.columns));
        s.push('\n');
        for r in &cells {
            s.push_str(&line(r));
            s.push('\n');
        }
        for n in &self.notes {
            s.push_str(&format!("- {n}\n"));
        }
        s
    }

    /// Writes the plot as SVG. Fails when this result has no plot.
    pub fn write_svg(&self, path: &Path) -> Result<()> {
        let plot = self.plot.as_ref().ok_or_else(|| BenchError::NoPlot {
            benchmark: self.name.to_string(),
        })?;
        draw_svg(plot, path).map_err(|e| BenchError::Plot {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }
}

fn draw_svg(p: &Plot, path: &Path) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let pts = p.series.iter().flat_map(|s| s.points.iter().copied());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err("no points to plot".into());
    }
    let tx = |v: f64| if p.log_x { v.max(1e-12).log10() } else { v };
    let ty = |v: f64| if p.log_y { v.max(1e-12).log10() } else { v };
    let (ax0, ax1) = (tx(x0), tx(x1) + if x1 == x0 { 1.0 } else { 0.0 });
    let (ay0, ay1) = if p.log_y {
        (ty(y0), ty(y1) + 0.1)
    } else {
        (0f64.min(y0), y1 * 1.1 + if y1 == 0.0 { 1.0 } else { 0.0 })
    };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&p.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(ax0..ax1, ay0..ay1)?;
    let fmt = |log: bool| {
        move |v: &f64| {
            if log {
                format!("{:.0}", 10f64.powf(*v))
            } else {
                format!("{v:.0}")
            }
        }
    };
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&fmt(p.log_x))
        .y_label_formatter(&fmt(p.log_y))
        .draw()?;
    for (i, s) in p.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let data: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (tx(x), ty(y))).collect();
        chart
            .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(
            data.into_iter()
                .map(|pt| Circle::new(pt, 3, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_json_and_svg() {
        let mut r = MicroResult::new("demo", "nothing", &["batch", "cycles"]);
        r.row(vec![json!(1), json!(5000.0)]);
        r.row(vec![json!(16), json!(900.5)]);
        r.notes.push("a note".into());
        r.plot = Some(Plot {
            title: "demo".into(),
            x_label: "batch".into(),
            y_label: "cycles".into(),
            log_x: true,
            log_y: false,
            series: vec![Series {
                label: "nop".into(),
                points: vec![(1.0, 5000.0), (16.0, 900.5)],
            }],
        });
        let t = r.render_table();
        assert!(
            t.contains("batch") && t.contains("900.5") && t.contains("- a note"),
            "{t}"
        );
        assert_eq!(r.column_f64("cycles"), vec![5000.0, 900.5]);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["rows"][1][0], 16);
        let p = std::env::temp_dir().join(format!("ringdb-plot-{}.svg", std::process::id()));
        r.write_svg(&p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        assert!(svg.contains("<svg") && svg.contains("demo"));
    }
}
