//! The probe report as a readable, aligned table: one step per section (kernel, io_uring,
//! setup flags, opcodes, device, errors and warnings).

use super::format::human_bytes;
use super::table::Table;
use super::ProbeReport;
use crate::device::DeviceInfo;

/// The value, or `-` when unknown.
fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".into())
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

impl ProbeReport {
    /// A readable, aligned table: kernel, io_uring, setup flags, opcodes, device, warnings.
    pub fn render_table(&self) -> String {
        let mut t = Table::default();
        self.render_kernel(&mut t);
        self.render_io_uring(&mut t);
        self.render_setup_flags(&mut t);
        self.render_opcodes(&mut t);
        self.render_device(&mut t);
        self.render_errors_and_warnings(&mut t);
        t.finish()
    }

    fn render_kernel(&self, t: &mut Table) {
        t.section("kernel");
        t.row("release", &self.kernel_release);
        t.row(
            "online cpus",
            &format!(
                "{} (usable by this process: {})",
                or_dash(self.online_cpus.map(|n| n.to_string())),
                or_dash(self.allowed_cpus.map(|n| n.to_string()))
            ),
        );
        t.row(
            "memlock (soft/hard)",
            &format!(
                "{} / {}",
                or_dash(self.memlock_soft.map(|l| l.to_string())),
                or_dash(self.memlock_hard.map(|l| l.to_string()))
            ),
        );
        t.row("CAP_IPC_LOCK", &or_dash(self.cap_ipc_lock.map(yes_no)));
    }

    fn render_io_uring(&self, t: &mut Table) {
        t.section("io_uring");
        t.row(
            "io_uring_disabled",
            &self
                .io_uring_disabled
                .map_or_else(|| "absent (enabled)".into(), |v| v.to_string()),
        );
        t.row(
            "available",
            &match &self.setup_error {
                Some(e) => format!("no ({e})"),
                None => yes_no(self.uring_available),
            },
        );
        if !self.features.is_empty() {
            t.wrapped("features", &self.features);
        }
        for c in &self.registrations {
            t.check(c);
        }
    }

    fn render_setup_flags(&self, t: &mut Table) {
        t.section("setup flags");
        for c in &self.setup_flags {
            match &self.device {
                // The ring builds anywhere; the device decides whether polled I/O works.
                Some(d) if c.name == "IOPOLL" && c.ok && !d.io_poll => t.row(
                    c.name,
                    &format!("ok (ring only: I/O on {} fails, io_poll=0)", d.name),
                ),
                _ => t.check(c),
            }
        }
    }

    fn render_opcodes(&self, t: &mut Table) {
        t.section("opcodes");
        t.wrapped(
            &format!("supported ({})", self.opcodes.len()),
            &self.opcodes,
        );
        if !self.opcodes_missing.is_empty() {
            t.wrapped("missing", &self.opcodes_missing);
        }
    }

    fn render_device(&self, t: &mut Table) {
        t.section("device");
        if let Some(p) = &self.path {
            t.row("path", &p.display().to_string());
        }
        match (&self.device, &self.device_error) {
            (Some(d), _) => render_block_device(t, d),
            (None, Some(e)) => t.row("error", e),
            (None, None) if self.path.is_some() => t.row("block device", "none (tmpfs/overlay?)"),
            (None, None) => t.row("block device", "- (no path given)"),
        }
        if self.nvme_namespaces.is_empty() {
            t.row("/dev/ng*", "none");
        }
        for ns in &self.nvme_namespaces {
            t.row(&ns.path.display().to_string(), &ns.summary());
        }
        if let Some(c) = &self.read_path {
            let v = if c.punted_to_iowq {
                format!(
                    "punted to io-wq ({} workers for {} reads)",
                    c.iowq_workers, c.reads
                )
            } else {
                format!("inline ({} reads, no io-wq worker)", c.reads)
            };
            t.row("io_uring O_DIRECT reads", &v);
        }
    }

    fn render_errors_and_warnings(&self, t: &mut Table) {
        if !self.errors.is_empty() {
            t.section("errors");
            for e in &self.errors {
                t.line(&format!("  - {e}"));
            }
        }
        t.section("warnings");
        if self.warnings.is_empty() {
            t.line("  (none)");
        }
        for w in &self.warnings {
            t.line(&format!("  - {w}"));
        }
    }
}

/// The rows describing the block device under the path.
fn render_block_device(t: &mut Table, d: &DeviceInfo) {
    let name = match &d.disk {
        Some(disk) => format!("{} (partition of {disk})", d.name),
        None => d.name.clone(),
    };
    t.row("name", &format!("{name}  {}:{}", d.major, d.minor));
    t.row("size", &human_bytes(d.size_bytes));
    t.row(
        "block size (log/phys)",
        &format!("{} / {}", d.logical_block_size, d.physical_block_size),
    );
    let n = |v: Option<u32>| or_dash(v.map(|v| v.to_string()));
    t.row("nr_requests", &n(d.nr_requests));
    t.row(
        "max_sectors_kb (hw)",
        &format!("{} ({})", n(d.max_sectors_kb), n(d.max_hw_sectors_kb)),
    );
    t.row("max_segments", &n(d.max_segments));
    t.row(
        "io_poll",
        &match d.poll_queues_hint {
            Some(q) => format!("{} (nvme.poll_queues={q})", yes_no(d.io_poll)),
            None => yes_no(d.io_poll),
        },
    );
    t.row("rotational", &yes_no(d.rotational));
    t.row("scheduler", &or_dash(d.scheduler.clone()));
    t.row(
        "nvme char device",
        &or_dash(d.nvme_char_device.as_ref().map(|p| p.display().to_string())),
    );
}

#[cfg(test)]
mod tests {
    use super::super::table::WRAP;
    use crate::probe::probe;
    use std::path::Path;

    #[test]
    fn render_table_has_sections() {
        let r = probe(Some(Path::new("/")));
        let s = r.render_table();
        for section in [
            "kernel",
            "io_uring",
            "setup flags",
            "opcodes",
            "device",
            "warnings",
        ] {
            assert!(
                s.lines().any(|l| l == section),
                "section {section} missing:\n{s}"
            );
        }
        assert!(s.contains("DEFER_TASKRUN (+SINGLE_ISSUER)"));
        for l in s.lines().filter(|l| !l.starts_with("  - ")) {
            assert!(l.len() <= WRAP + 40, "long line: {l}");
        }
    }
}
