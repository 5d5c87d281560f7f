//! One self-contained HTML page: a title, a subtitle line, then sections of paragraphs,
//! lists, tables and inline SVG charts.
//!
//! Self-contained because a report is copied around, attached to issues and opened years
//! later: the style is inline, there is no script and no external URL, and every chart is
//! inlined. Every piece of text is HTML-escaped (a step's status or a path can hold any
//! character); SVG documents are inlined as given, since they are markup already.

use crate::error::{BenchError, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The page's style: readable on a laptop (at most ~1000 px wide), bordered zebra tables with
/// numbers right-aligned, charts scaled down to the column.
const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;\
max-width:1000px;margin:24px auto;padding:0 16px;color:#222;line-height:1.45}\
h1{font-size:1.7em;margin-bottom:4px}h2{margin-top:32px;border-bottom:1px solid #ccc;\
padding-bottom:4px}.subtitle{color:#555;margin-top:0}\
table{border-collapse:collapse;margin:12px 0;font-size:0.8em;display:block;overflow-x:auto}\
th,td{border:1px solid #bbb;padding:3px 4px;text-align:left}th{white-space:nowrap}\
th{background:#e8e8e8}tr:nth-child(even) td{background:#f5f5f5}td.num{text-align:right;\
white-space:nowrap;font-variant-numeric:tabular-nums}svg{max-width:100%;height:auto;display:block;margin:12px 0}";

/// What a section holds, in order.
#[derive(Clone, Debug)]
enum Block {
    Paragraph(String),
    List(Vec<String>),
    Table {
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    Svg(String),
}

/// One section of a report: a heading, then paragraphs, lists, tables and charts in the
/// order they were added.
#[derive(Clone, Debug)]
pub struct Section {
    heading: String,
    blocks: Vec<Block>,
}

impl Section {
    /// An empty section under `heading`.
    pub fn new(heading: impl Into<String>) -> Section {
        Section {
            heading: heading.into(),
            blocks: Vec::new(),
        }
    }

    /// Adds a paragraph of text.
    pub fn paragraph(mut self, text: impl Into<String>) -> Section {
        self.blocks.push(Block::Paragraph(text.into()));
        self
    }

    /// Adds a bulleted list.
    pub fn list(mut self, items: Vec<String>) -> Section {
        self.blocks.push(Block::List(items));
        self
    }

    /// Adds a table: a header row, then rows of cells (a cell that reads as a number is
    /// right-aligned).
    pub fn table(mut self, header: Vec<String>, rows: Vec<Vec<String>>) -> Section {
        self.blocks.push(Block::Table { header, rows });
        self
    }

    /// Adds an SVG document (e.g. from [`ladder_svg`](super::ladder_svg)), inlined as is.
    pub fn svg(mut self, svg: String) -> Section {
        self.blocks.push(Block::Svg(svg));
        self
    }
}

/// A report page under construction: a title, a subtitle line, sections in order.
///
/// ```
/// use ringdb_bench::report::{HtmlReport, Section};
/// let page = HtmlReport::new("demo")
///     .subtitle("host, date")
///     .section(Section::new("Figures").paragraph("1 < 2").table(
///         vec!["name".into(), "tx/s".into()],
///         vec![vec!["posix".into(), "9150".into()]],
///     ))
///     .render();
/// assert!(page.contains("1 &lt; 2") && page.contains("<td class=\"num\">9150</td>"));
/// ```
#[derive(Clone, Debug)]
pub struct HtmlReport {
    title: String,
    subtitle: String,
    sections: Vec<Section>,
}

impl HtmlReport {
    /// An empty report titled `title`.
    pub fn new(title: impl Into<String>) -> HtmlReport {
        HtmlReport {
            title: title.into(),
            subtitle: String::new(),
            sections: Vec::new(),
        }
    }

    /// Sets the line under the title (machine, date, target).
    pub fn subtitle(mut self, subtitle: impl Into<String>) -> HtmlReport {
        self.subtitle = subtitle.into();
        self
    }

    /// Appends a section.
    pub fn section(mut self, section: Section) -> HtmlReport {
        self.sections.push(section);
        self
    }

    /// The whole page: HTML5, inline style, no script, no external URL.
    pub fn render(&self) -> String {
        let mut page = String::with_capacity(16 << 10);
        page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        let _ = writeln!(page, "<title>{}</title>", escape(&self.title));
        let _ = writeln!(page, "<style>{STYLE}</style>\n</head>\n<body>");
        let _ = writeln!(page, "<h1>{}</h1>", escape(&self.title));
        if !self.subtitle.is_empty() {
            let _ = writeln!(page, "<p class=\"subtitle\">{}</p>", escape(&self.subtitle));
        }
        for section in &self.sections {
            render_section(&mut page, section);
        }
        page.push_str("</body>\n</html>\n");
        page
    }

    /// Creates `dir` (and its parents) and writes the page to `dir/index.html`; returns that
    /// path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join("index.html");
        std::fs::create_dir_all(dir).map_err(|source| BenchError::WriteReport {
            path: dir.to_path_buf(),
            source,
        })?;
        write_file(&path, &self.render())?;
        Ok(path)
    }
}

/// Writes `text` to `path`, as a typed error naming the file when it cannot.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| BenchError::WriteReport {
        path: path.to_path_buf(),
        source,
    })
}

fn render_section(page: &mut String, section: &Section) {
    let _ = writeln!(page, "<section>\n<h2>{}</h2>", escape(&section.heading));
    for block in &section.blocks {
        match block {
            Block::Paragraph(text) => {
                let _ = writeln!(page, "<p>{}</p>", escape(text));
            }
            Block::List(items) => {
                page.push_str("<ul>\n");
                for item in items {
                    let _ = writeln!(page, "<li>{}</li>", escape(item));
                }
                page.push_str("</ul>\n");
            }
            Block::Table { header, rows } => render_table(page, header, rows),
            Block::Svg(svg) => {
                page.push_str(svg.trim());
                page.push('\n');
            }
        }
    }
    page.push_str("</section>\n");
}

fn render_table(page: &mut String, header: &[String], rows: &[Vec<String>]) {
    page.push_str("<table>\n<thead><tr>");
    for cell in header {
        let _ = write!(page, "<th>{}</th>", escape(cell));
    }
    page.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        page.push_str("<tr>");
        for cell in row {
            let class = if reads_as_number(cell) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(page, "<td{class}>{}</td>", escape(cell));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody>\n</table>\n");
}

/// Whether a cell is a figure (`1234`, `-0.5`, `2.31x`, `45%`, `-`), to right-align it.
fn reads_as_number(cell: &str) -> bool {
    let figure = cell.trim().trim_end_matches(['x', '%']);
    figure == "-" || (!figure.is_empty() && figure.parse::<f64>().is_ok())
}

/// `text` with the five characters that mean something in HTML replaced by entities.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}
