//! Reports as pictures: SVG charts of the ladder and of the calibration, and one
//! self-contained HTML page that holds them with tables (`ringdb ladder --report`,
//! `ringdb advise --report`).
//!
//! Text tables are what a terminal shows; a report is what is read later and elsewhere, and
//! ten steps of fifteen columns are read faster as bars. The charts are drawn with `plotters`
//! into strings, so a page inlines them and needs no file beside it. The parts:
//! - `bars`: the grouped bar chart every chart here is drawn with;
//! - `ladder_chart`, `latency_chart`, `cycles_chart`: what each chart's bars are;
//! - `html`: the page builder ([`HtmlReport`], [`Section`]);
//! - `ladder_page`: the ladder's page; `subtitle`: the machine line under a title.

mod advice_page;
mod bars;
mod cycles_chart;
mod html;
mod ladder_chart;
mod ladder_page;
mod latency_chart;
mod subtitle;

pub use advice_page::advice_page;
pub(crate) use bars::{BarChart, BarSeries};
pub use cycles_chart::cycles_per_io_svg;
pub use html::{escape, write_file, HtmlReport, Section};
pub use ladder_chart::ladder_svg;
pub use ladder_page::ladder_page;
pub use latency_chart::latency_svg;
pub use subtitle::machine_line;

#[cfg(test)]
mod tests;
