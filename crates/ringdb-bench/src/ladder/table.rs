//! The ladder's report as a table: the data set, the calibrated costs, then one row per step.

use super::{Calibration, LadderReport, Step};

/// The ladder as a table.
pub fn table(r: &LadderReport) -> String {
    let mut s = data_set_line(r);
    s.push_str(&costs_line(&r.calibration));
    s.push_str(&column_headers());
    for st in &r.steps {
        s.push_str(&step_row(st));
    }
    s
}

fn data_set_line(r: &LadderReport) -> String {
    format!(
        "target {}  records {}  value {} B  page {} B  pool {} pages  data {} pages ({:.1}x pool)\n",
        r.target,
        r.records,
        r.value_size,
        r.page_size,
        r.pool_pages,
        r.data_pages,
        r.data_pages as f64 / r.pool_pages as f64
    )
}

/// The calibrated costs on one line, then a blank line.
pub(crate) fn costs_line(c: &Calibration) -> String {
    format!(
        "costs: read {:.1} us, write {:.1} us (batched: {:.1} us per write), c_tx {:.0} cyc (restart {:.0}, of it descent {:.0}, checksum {:.0}, of a page just read {:.0}), read single/batch/fixed {:.0}/{:.0}/{:.0} cyc, write batch/fixed {:.0}/{:.0} cyc, passthrough r/w {:.0}/{:.0} cyc, iopoll r/w {:.0}/{:.0} cyc, sqpoll app r/w {:.0}/{:.0} cyc, libaio r/w {:.0}/{:.0} cyc, device {:.0} IOPS (runs {:.0?}), TSC {:.2} GHz\n\n",
        c.read_lat_us, c.write_lat_us, c.batch_write_us_per_write, c.c_tx, c.c_restart, c.c_descent, c.c_checksum, c.c_checksum_read, c.c_read_single, c.c_read_batch,
        c.c_read_batch_fixed, c.c_write_batch, c.c_write_batch_fixed, c.c_read_passthrough,
        c.c_write_passthrough, c.c_read_iopoll, c.c_write_iopoll, c.c_read_sqpoll,
        c.c_write_sqpoll, c.c_read_libaio, c.c_write_libaio, c.device_iops, c.device_iops_runs, c.tsc_ghz
    )
}

/// The steps table's columns, shared with the HTML page (`report::ladder_page`).
pub(crate) const STEP_COLUMNS: [&str; 16] = [
    "step",
    "tx/s",
    "model",
    "meas/m",
    "vs prev",
    "vs posix",
    "faults",
    "cyc/tx",
    "model cyc",
    "enters",
    "writes",
    "p50 us",
    "p99 us",
    "iowq",
    "io/raw",
    "bound",
];

fn column_headers() -> String {
    let c = STEP_COLUMNS;
    format!(
        "{:<14} {:>10} {:>10} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8} {:>5} {:>6}  {}\n",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]
    )
}

/// One step's row; a step that did not run shows its status instead of figures.
fn step_row(st: &Step) -> String {
    if st.status != "ok" {
        return format!("{:<14} {}\n", st.name, st.status);
    }
    format!(
        "{:<14} {:>10.0} {:>10.0} {:>7.2} {:>7} {:>7} {:>7.2} {:>9.0} {:>9.0} {:>7.2} {:>7.2} {:>8.1} {:>8.1} {:>5} {:>6.2}  {}\n",
        st.name,
        st.tps,
        st.predicted_tps,
        st.tps / st.predicted_tps.max(1e-9),
        speedup(st.speedup_prev),
        speedup(st.speedup_posix),
        st.faults_per_tx,
        st.cycles_per_tx,
        st.predicted_cycles_per_tx,
        st.enters_per_tx,
        st.writes_per_tx,
        st.lat_us_p50,
        st.lat_us_p99,
        st.iowq_workers,
        st.ios_vs_raw,
        st.bound
    )
}

/// `1.23x`, or `-` when there was nothing to compare with.
fn speedup(x: f64) -> String {
    if x > 0.0 {
        format!("{x:.2}x")
    } else {
        "-".into()
    }
}
