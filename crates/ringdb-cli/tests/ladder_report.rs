//! `ringdb ladder --plot` and `--report` end to end on a small data set: the chart names the
//! steps that ran, the page holds the charts, and a path that cannot be written is an error.

mod common;

use common::{ringdb, tmp};

/// Arguments of a two-step quick ladder on `target`.
fn quick_ladder<'a>(target: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "ladder",
        "--target",
        target,
        "--pool",
        "2M",
        "--records",
        "20000",
        "--tasks",
        "16",
        "--quick",
        "--runtime",
        "300ms",
        "--steps",
        "posix,+async",
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn plot_and_report_write_the_chart_and_the_page() {
    let target = tmp("ladder-report.ringdb");
    let plot = tmp("ladder.svg");
    let dir = tmp("ladder-report");
    let args = quick_ladder(
        target.to_str().unwrap(),
        &[
            "--plot",
            plot.to_str().unwrap(),
            "--report",
            dir.to_str().unwrap(),
        ],
    );
    let out = ringdb(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let svg = std::fs::read_to_string(&plot).expect("the chart");
    assert!(svg.trim_start().starts_with("<svg"), "{svg}");
    // Each name is the text of a `<text>` element, on a line of its own.
    for name in ["posix", "+async"] {
        assert!(svg.lines().any(|l| l.trim() == name), "{name} in the chart");
    }
    let page = std::fs::read_to_string(dir.join("index.html")).expect("the page");
    assert!(page.contains("<svg"), "a chart in the page");
    assert_eq!(
        page.matches("<svg").count(),
        3,
        "ladder, latency, cycles per I/O"
    );
    assert!(page.contains("<td>+async</td>"), "the steps table");
    assert!(!page.contains("<script"));
    for path in [&target, &plot] {
        let _ = std::fs::remove_file(path);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_chart_that_cannot_be_written_is_an_error_naming_it() {
    let target = tmp("ladder-noplot.ringdb");
    let plot = tmp("no-such-folder").join("ladder.svg");
    let args = quick_ladder(
        target.to_str().unwrap(),
        &["--plot", plot.to_str().unwrap()],
    );
    let out = ringdb(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("writing the report") && stderr.contains("ladder.svg"),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&target);
}
