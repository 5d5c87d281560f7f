//! `ringdb io` writes the fields the issue names, as JSON and CSV, and verifies data bit-exact.

mod common;

use common::{ringdb, tmp};

#[test]
fn json_has_every_field_and_csv_has_a_row() {
    let f = tmp("out.dat");
    let csv = tmp("out.csv");
    let out = ringdb(&[
        "io",
        "--filename",
        f.to_str().unwrap(),
        "--size",
        "4M",
        "--ios",
        "2000",
        "--iodepth",
        "8",
        "--json",
        "--output",
        csv.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    for k in [
        "iops",
        "mib_s",
        "cpu_pct",
        "cycles_per_io",
        "enters_per_io",
        "iowq_workers",
    ] {
        assert!(v[k].is_number(), "field {k} missing in {v}");
    }
    for k in ["avg", "p50", "p95", "p99", "p999", "max"] {
        assert!(v["lat_us"][k].is_number(), "lat_us.{k} missing");
    }
    assert_eq!(v["ios"], 2000);
    assert!(v["iops"].as_f64().unwrap() > 0.0);
    // On a PCI disk with MSI vectors the device's interrupts are counted per CPU (the file
    // here is on the build machine's disk; on tmpfs or overlay there are none to count).
    let irq = &v["device_interrupts"];
    if irq.is_null() {
        eprintln!("no MSI vectors to count under {}", f.display());
    } else {
        let per_cpu = irq["per_cpu"].as_array().expect("per_cpu");
        let sum: u64 = per_cpu.iter().map(|n| n.as_u64().expect("a count")).sum();
        assert_eq!(irq["total"].as_u64(), Some(sum), "{irq}");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("tool,label,rw,bs"));
    assert!(
        lines[1].starts_with("ringdb,uring+defer,randread,4096"),
        "{}",
        lines[1]
    );
    let _ = std::fs::remove_file(&f);
    let _ = std::fs::remove_file(&csv);
}

#[test]
fn write_then_verify_through_the_cli() {
    let f = tmp("verify.dat");
    let p = f.to_str().unwrap();
    let w = ringdb(&[
        "io",
        "--filename",
        p,
        "--size",
        "1M",
        "--rw",
        "write",
        "--ios",
        "256",
        "--verify",
        "--seed",
        "9",
    ]);
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let r = ringdb(&[
        "io",
        "--filename",
        p,
        "--size",
        "1M",
        "--rw",
        "read",
        "--ios",
        "256",
        "--verify",
        "--seed",
        "9",
        "--engine",
        "libaio",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("verified: 256 blocks"));
    let bad = ringdb(&[
        "io",
        "--filename",
        p,
        "--size",
        "1M",
        "--rw",
        "read",
        "--ios",
        "256",
        "--verify",
        "--seed",
        "10",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("verification failed"));
    let _ = std::fs::remove_file(&f);
}

#[test]
fn numjobs_run_one_ring_each_and_add_up() {
    let f = tmp("jobs.dat");
    let out = ringdb(&[
        "io",
        "--filename",
        f.to_str().unwrap(),
        "--size",
        "4M",
        "--ios",
        "500",
        "--numjobs",
        "2",
        "--rw",
        "randrw",
        "--rwmixread",
        "70",
        "--iodepth",
        "4",
        "--json",
    ]);
    let _ = std::fs::remove_file(&f);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ios"], 1000, "2 jobs x 500 I/Os");
    assert_eq!(v["numjobs"], 2);
}

#[test]
fn a_buffer_span_spreads_the_buffers_and_verification_stays_exact() {
    let f = tmp("span.dat");
    let p = f.to_str().unwrap();
    let run = |rw: &str, extra: &[&str]| {
        let mut args = vec![
            "io",
            "--filename",
            p,
            "--size",
            "2M",
            "--rw",
            rw,
            "--ios",
            "512",
            "--iodepth",
            "8",
            "--buffer-span",
            "1M",
            "--verify",
            "--seed",
            "5",
        ];
        args.extend_from_slice(extra);
        ringdb(&args)
    };
    let w = run("write", &[]);
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    // Registered buffers too: each request names the index of the buffer it uses.
    for extra in [&["--json"][..], &["--json", "--fixedbufs"][..]] {
        let r = run("randread", extra);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("JSON on stdout");
        assert_eq!(v["buffer_span_bytes"], 1 << 20, "{v}");
        assert_eq!(v["verified_blocks"], 512, "{v}");
    }
    // Less than one buffer per request in flight is refused, naming the flag.
    let small = ringdb(&[
        "io",
        "--filename",
        p,
        "--size",
        "2M",
        "--ios",
        "10",
        "--iodepth",
        "8",
        "--buffer-span",
        "16K",
    ]);
    assert_eq!(small.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&small.stderr);
    assert!(
        stderr.contains("buffer span") && stderr.contains("--buffer-span"),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&f);
}
