//! Tests of the report module: escaping, SVG well-formedness and content, and the charts'
//! behaviour on ladders where nothing ran or figures are not finite.

use super::*;
use crate::ladder::{Calibration, LadderReport, Step};

fn step(name: &str, tps: f64, predicted_tps: f64) -> Step {
    Step {
        name: name.into(),
        status: "ok".into(),
        tps,
        predicted_tps,
        lat_us_p50: tps / 100.0,
        lat_us_p99: tps / 10.0,
        speedup_posix: tps / 1000.0,
        ..Step::default()
    }
}

fn not_run(name: &str, status: &str) -> Step {
    Step {
        name: name.into(),
        status: status.into(),
        ..Step::default()
    }
}

fn report(steps: Vec<Step>) -> LadderReport {
    LadderReport {
        target: "/tmp/<ladder>.ringdb".into(),
        records: 20_000,
        value_size: 128,
        page_size: 4096,
        pool_pages: 1024,
        data_pages: 3500,
        calibration: calibration(),
        steps,
        host: ringdb_lab::host::Host::current(),
    }
}

fn calibration() -> Calibration {
    Calibration {
        tsc_ghz: 2.5,
        c_read_single: 9000.0,
        c_read_batch: 4000.0,
        c_write_batch: 5000.0,
        c_read_batch_fixed: 3500.0,
        c_write_batch_fixed: 4500.0,
        c_read_sqpoll: 800.0,
        c_write_sqpoll: 900.0,
        c_read_libaio: 6000.0,
        c_write_libaio: 7000.0,
        ..Calibration::default()
    }
}

/// Parses `svg` as XML (panicking with the parser's message if it is not) and counts the
/// `<rect>` elements filled with `colour` (`#RRGGBB`).
fn rects_filled(svg: &str, colour: &str) -> usize {
    let document = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    document
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(colour))
        .count()
}

fn svg_texts(svg: &str) -> Vec<String> {
    let document = roxmltree::Document::parse(svg).unwrap();
    document
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

const BLUE: &str = "#1F77B4";
const ORANGE: &str = "#FFA03C";

#[test]
fn the_ladder_chart_has_one_bar_per_step_and_series_and_names_what_did_not_run() {
    let r = report(vec![
        step("posix", 1000.0, 1100.0),
        step("+async", 5000.0, 4000.0),
        step("+batch-submit", 7000.0, 6000.0),
        not_run("+passthrough", "unsupported here: no NVMe char device"),
        not_run("+iopoll", "unsupported here: no poll queues"),
        not_run("+sqpoll", "failed: boom"),
    ]);
    let svg = ladder_svg(&r);
    // Three measured bars and three model bars, each colour also once in the legend.
    assert_eq!(rects_filled(&svg, BLUE), 3 + 1);
    assert_eq!(rects_filled(&svg, ORANGE), 3 + 1);
    let texts = svg_texts(&svg);
    for name in ["posix", "+async", "+batch-submit", "5.00x", "7.00x"] {
        assert!(texts.iter().any(|t| t == name), "{name} in {texts:?}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t == "unsupported here: +passthrough, +iopoll; failed: +sqpoll"),
        "{texts:?}"
    );
}

#[test]
fn a_ladder_where_nothing_ran_says_so() {
    let r = report(vec![not_run("+passthrough", "unsupported here: no NVMe")]);
    let svg = ladder_svg(&r);
    assert_eq!(rects_filled(&svg, BLUE), 0);
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "no step ran here"), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("+passthrough")),
        "{texts:?}"
    );
    assert!(svg_texts(&latency_svg(&[]))
        .iter()
        .any(|t| t == "no step ran here"));
}

#[test]
fn figures_that_are_not_finite_or_zero_do_not_panic() {
    let mut odd = step("posix", f64::NAN, f64::INFINITY);
    odd.lat_us_p50 = f64::NEG_INFINITY;
    odd.lat_us_p99 = 0.0;
    odd.speedup_posix = f64::NAN;
    let zero = step("+async", 0.0, 0.0);
    let r = report(vec![odd, zero]);
    let svg = ladder_svg(&r);
    assert_eq!(rects_filled(&svg, BLUE), 2 + 1);
    let latency = latency_svg(&r.steps);
    assert_eq!(rects_filled(&latency, "#2CA02C"), 2 + 1, "p50 bars");
    let nothing = Calibration {
        c_read_single: f64::NAN,
        ..Calibration::default()
    };
    let svg = cycles_per_io_svg(&nothing);
    assert!(svg_texts(&svg)
        .iter()
        .any(|t| t == "no configuration could be measured here"));
}

#[test]
fn the_latency_axis_turns_logarithmic_over_a_wide_range() {
    let narrow = latency_svg(&[step("posix", 1000.0, 1.0), step("+async", 2000.0, 1.0)]);
    assert!(svg_texts(&narrow).iter().any(|t| t == "microseconds"));
    let wide = latency_svg(&[step("posix", 10.0, 1.0), step("+async", 100_000.0, 1.0)]);
    assert!(svg_texts(&wide)
        .iter()
        .any(|t| t == "microseconds (log scale)"));
    // p50 and p99 of both steps: four bars, each colour once more in the legend.
    assert_eq!(
        rects_filled(&wide, "#2CA02C") + rects_filled(&wide, "#9467BD"),
        4 + 2
    );
}

#[test]
fn the_cycles_chart_leaves_out_and_names_what_was_not_measurable() {
    let svg = cycles_per_io_svg(&calibration());
    let texts = svg_texts(&svg);
    for name in [
        "single",
        "batched",
        "batched+regbufs",
        "SQPOLL (app)",
        "libaio",
    ] {
        assert!(texts.iter().any(|t| t == name), "{name} in {texts:?}");
    }
    assert!(!texts.iter().any(|t| t == "passthrough"), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.ends_with("not measurable here: passthrough, IOPOLL")),
        "{texts:?}"
    );
    // Five reads (single included) and four writes, plus a legend swatch each.
    assert_eq!(rects_filled(&svg, BLUE), 5 + 1);
    assert_eq!(rects_filled(&svg, "#D62728"), 4 + 1);
}

#[test]
fn the_page_escapes_text_and_inlines_svg() {
    let svg = ladder_svg(&report(vec![step("posix", 1000.0, 900.0)]));
    let page = HtmlReport::new("a <script>alert(1)</script> title")
        .subtitle("host & date")
        .section(
            Section::new("S <1>")
                .paragraph("<script>x</script>")
                .list(vec!["a<b".into()])
                .table(
                    vec!["name".into(), "tx/s".into()],
                    vec![vec!["<i>".into(), "1234".into()]],
                )
                .svg(svg.clone()),
        )
        .render();
    assert!(!page.contains("<script"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("host &amp; date") && page.contains("a&lt;b"));
    assert!(page.contains("<td>&lt;i&gt;</td><td class=\"num\">1234</td>"));
    assert!(page.contains(svg.trim()));
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    // No external URL: the only one is the SVG namespace, which names and fetches nothing.
    assert!(!page.replace(SVG_NAMESPACE, "").contains("http"), "{page}");
}

const SVG_NAMESPACE: &str = "http://www.w3.org/2000/svg";

#[test]
fn the_ladder_page_is_written_into_its_folder() {
    let r = report(vec![
        step("posix", 1000.0, 1100.0),
        not_run("+iopoll", "unsupported here: no poll queues"),
    ]);
    let dir = std::env::temp_dir().join(format!("ringdb-report-{}", std::process::id()));
    let path = ladder_page(&r, &machine_line(&r.target))
        .write(&dir.join("a/b"))
        .unwrap();
    let page = std::fs::read_to_string(&path).unwrap();
    assert_eq!(path, dir.join("a/b/index.html"));
    assert_eq!(page.matches("<svg").count(), 3, "three charts");
    assert!(page.contains("/tmp/&lt;ladder&gt;.ringdb"));
    assert!(page.contains("unsupported here: no poll queues"));
    // A folder where a file is: a typed error naming it.
    let blocked = dir.join("file");
    std::fs::write(&blocked, "x").unwrap();
    let error = HtmlReport::new("t")
        .write(&blocked.join("sub"))
        .unwrap_err();
    assert!(
        matches!(&error, crate::BenchError::WriteReport { path, .. } if path == &blocked.join("sub")),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
