//! A grouped bar chart drawn with `plotters` into an SVG string: the one drawing every chart
//! of the report shares, so that they look alike and each chart's file only says what its
//! bars are.
//!
//! Step names and legends are placed in pixel coordinates on the whole canvas (not as axis
//! labels), so each group's name sits under the group's centre whatever the axis picks for
//! its ticks. Values that are not finite, or negative, are drawn as zero-height bars: a chart
//! never panics on what a measurement produced.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Canvas width, pixels (the HTML page is at most ~1000 px wide).
const WIDTH_PIXELS: u32 = 960;
/// Canvas height, pixels.
const HEIGHT_PIXELS: u32 = 440;
/// Fraction of a group's width its bars take together.
const GROUP_FILL: f64 = 0.8;
/// Room above the tallest bar for the labels written on top, as a fraction of the range.
const HEADROOM: f64 = 1.18;
/// Fewest decades a logarithmic axis shows beyond the data (room for the labels on top).
const LOG_HEADROOM_DECADES: f64 = 0.25;

/// One series of bars: one value per category, in a colour named in the legend.
pub(crate) struct BarSeries {
    /// Name in the legend.
    pub name: String,
    /// Fill colour.
    pub colour: RGBColor,
    /// One value per category (`None`: no bar there).
    pub values: Vec<Option<f64>>,
    /// Text written above each bar (`None`: nothing).
    pub labels: Vec<Option<String>>,
}

/// A grouped bar chart: categories along x, one bar per series in each group.
pub(crate) struct BarChart {
    /// Title at the top.
    pub title: String,
    /// Description of the y axis.
    pub y_label: String,
    /// Group names, left to right.
    pub categories: Vec<String>,
    /// The series, drawn left to right within each group.
    pub series: Vec<BarSeries>,
    /// A line under the chart (what is left out and why); empty for none.
    pub caption: String,
    /// Draw the y axis in decades.
    pub log_y: bool,
    /// What the chart says in place of bars when there are no categories.
    pub empty_message: String,
}

/// A plotters failure, kept as text: the SVG backend writes into a `String` and cannot fail
/// on I/O, so this only carries layout errors up to the fallback in [`BarChart::render`].
type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

impl BarChart {
    /// The chart as an SVG document. A drawing error (none is expected with the string
    /// backend) gives an SVG that states it instead of a panic.
    pub fn render(&self) -> String {
        for series in &self.series {
            assert_eq!(
                series.values.len(),
                self.categories.len(),
                "{}",
                series.name
            );
            assert_eq!(
                series.labels.len(),
                self.categories.len(),
                "{}",
                series.name
            );
        }
        let mut svg = String::new();
        let outcome = {
            let root = SVGBackend::with_string(&mut svg, (WIDTH_PIXELS, HEIGHT_PIXELS))
                .into_drawing_area();
            let drawn = if self.categories.is_empty() {
                self.draw_empty(&root)
            } else {
                self.draw(&root)
            };
            drawn.and_then(|()| root.present().map_err(|e| e.into()))
        };
        match outcome {
            Ok(()) => svg,
            Err(e) => message_svg(&self.title, &format!("the chart could not be drawn: {e}")),
        }
    }

    fn draw_empty(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        root.fill(&WHITE)?;
        self.draw_title(root)?;
        let centre = (WIDTH_PIXELS as i32 / 2, HEIGHT_PIXELS as i32 / 2);
        let style = text_style(18, BLACK, HPos::Center, VPos::Center);
        root.draw(&Text::new(self.empty_message.clone(), centre, style))?;
        self.draw_caption(root)
    }

    fn draw(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        root.fill(&WHITE)?;
        self.draw_title(root)?;
        self.draw_legend(root)?;
        let (y_low, y_high) = self.y_range();
        let groups = self.categories.len() as f64;
        let bottom_margin = if self.caption.is_empty() { 10 } else { 34 };
        let mut chart = ChartBuilder::on(root)
            .margin_top(62)
            .margin_right(20)
            .margin_bottom(bottom_margin)
            .x_label_area_size(34)
            .y_label_area_size(84)
            .build_cartesian_2d(0.0..groups, y_low..y_high)?;
        let log_y = self.log_y;
        // In decades, one tick per decade; otherwise a handful of round numbers.
        let y_ticks = if log_y {
            (y_high - y_low).ceil() as usize + 1
        } else {
            6
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(y_ticks)
            .light_line_style(RGBColor(238, 238, 238))
            .y_desc(self.y_label.as_str())
            .y_label_formatter(&|v: &f64| axis_number(if log_y { 10f64.powf(*v) } else { *v }))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        self.draw_bars(root, &mut chart, y_low)?;
        self.draw_category_names(root, &chart, y_low)?;
        self.draw_caption(root)
    }

    /// The y axis' range in plotted units (decades when logarithmic).
    fn y_range(&self) -> (f64, f64) {
        let values: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .map(|&v| finite_or_zero(v))
            .collect();
        let highest = values.iter().copied().fold(0.0, f64::max);
        if !self.log_y {
            return (
                0.0,
                if highest > 0.0 {
                    highest * HEADROOM
                } else {
                    1.0
                },
            );
        }
        let lowest = values
            .iter()
            .copied()
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        if !lowest.is_finite() {
            return (0.0, 1.0);
        }
        let low = lowest.log10().floor();
        let high = (highest.log10() + LOG_HEADROOM_DECADES).max(low + 1.0);
        (low, high)
    }

    fn draw_bars(
        &self,
        root: &DrawingArea<SVGBackend, Shift>,
        chart: &mut ChartContext<SVGBackend, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
        y_low: f64,
    ) -> DrawResult {
        let width = GROUP_FILL / self.series.len().max(1) as f64;
        for (index, series) in self.series.iter().enumerate() {
            for (group, value) in series.values.iter().enumerate() {
                let Some(value) = value else { continue };
                let left = group as f64 + (1.0 - GROUP_FILL) / 2.0 + index as f64 * width;
                let top = self.plotted(*value, y_low);
                let bar =
                    Rectangle::new([(left, y_low), (left + width, top)], series.colour.filled());
                chart.draw_series(std::iter::once(bar))?;
                if let Some(label) = &series.labels[group] {
                    let at = chart.backend_coord(&(left + width / 2.0, top));
                    let style = text_style(13, BLACK, HPos::Center, VPos::Bottom);
                    root.draw(&Text::new(label.clone(), (at.0, at.1 - 3), style))?;
                }
            }
        }
        Ok(())
    }

    /// A value's height in plotted units: zero-height for what cannot be drawn.
    fn plotted(&self, value: f64, y_low: f64) -> f64 {
        let value = finite_or_zero(value);
        if !self.log_y {
            value
        } else if value > 0.0 {
            value.log10().max(y_low)
        } else {
            y_low
        }
    }
}

/// The chart's pieces outside the plotting area, in pixels on the whole canvas.
impl BarChart {
    fn draw_title(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        let style = text_style(20, BLACK, HPos::Left, VPos::Top);
        root.draw(&Text::new(self.title.clone(), (16, 10), style))?;
        Ok(())
    }

    /// One swatch and name per series, in a row under the title.
    fn draw_legend(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        let mut x = 100;
        let y = 40;
        for series in &self.series {
            let swatch = Rectangle::new([(x, y - 6), (x + 14, y + 6)], series.colour.filled());
            root.draw(&swatch)?;
            let style = text_style(14, BLACK, HPos::Left, VPos::Center);
            root.draw(&Text::new(series.name.clone(), (x + 20, y), style))?;
            x += 40 + 8 * series.name.chars().count() as i32;
        }
        Ok(())
    }

    /// Each category's name under its group's centre.
    fn draw_category_names(
        &self,
        root: &DrawingArea<SVGBackend, Shift>,
        chart: &ChartContext<SVGBackend, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
        bottom: f64,
    ) -> DrawResult {
        for (group, name) in self.categories.iter().enumerate() {
            let at = chart.backend_coord(&(group as f64 + 0.5, bottom));
            let style = text_style(13, BLACK, HPos::Center, VPos::Top);
            root.draw(&Text::new(name.clone(), (at.0, at.1 + 8), style))?;
        }
        Ok(())
    }

    fn draw_caption(&self, root: &DrawingArea<SVGBackend, Shift>) -> DrawResult {
        if self.caption.is_empty() {
            return Ok(());
        }
        let style = text_style(13, RGBColor(70, 70, 70), HPos::Left, VPos::Bottom);
        let at = (16, HEIGHT_PIXELS as i32 - 8);
        root.draw(&Text::new(self.caption.clone(), at, style))?;
        Ok(())
    }
}

/// A sans-serif text style of `size` pixels, anchored at `horizontal`/`vertical`.
fn text_style(size: u32, colour: RGBColor, horizontal: HPos, vertical: VPos) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&colour)
        .pos(Pos::new(horizontal, vertical))
}

/// `value`, or 0 for what is not a finite non-negative number.
pub(crate) fn finite_or_zero(value: f64) -> f64 {
    if value.is_finite() && value > 0.0 {
        value
    } else {
        0.0
    }
}

/// An axis number in a few characters: `950`, `12.5k`, `3.2M`, `0.25`.
pub(crate) fn axis_number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        let millions = format!("{:.1}", value / 1e6);
        format!("{}M", millions.trim_end_matches(".0"))
    } else if magnitude >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if magnitude >= 1e3 {
        let thousands = format!("{:.1}", value / 1e3);
        format!("{}k", thousands.trim_end_matches(".0"))
    } else if magnitude >= 10.0 || magnitude == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 0.1 {
        format!("{value:.2}")
    } else {
        format!("{value:.1e}")
    }
}

/// A small SVG that states `message` under `title`, for what cannot be drawn as a chart.
pub(crate) fn message_svg(title: &str, message: &str) -> String {
    let escape = super::html::escape;
    format!(
        "<svg width=\"{WIDTH_PIXELS}\" height=\"120\" viewBox=\"0 0 {WIDTH_PIXELS} 120\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect x=\"0\" y=\"0\" width=\"{WIDTH_PIXELS}\" height=\"120\" fill=\"#FFFFFF\"/>\n<text x=\"16\" y=\"30\" font-family=\"sans-serif\" font-size=\"20\">{}</text>\n<text x=\"16\" y=\"70\" font-family=\"sans-serif\" font-size=\"15\">{}</text>\n</svg>\n",
        escape(title),
        escape(message)
    )
}
