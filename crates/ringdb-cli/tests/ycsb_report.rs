//! `ringdb ycsb`'s report shows what moves a run's CPU per operation besides the engine: the
//! cycles per operation of each whole second (a VM's host can change every operation's cost
//! for seconds at a time) and which CPUs the data's device interrupted during the run.
//! Nothing here asserts timings.

mod common;

use common::{ringdb, tmp};
use serde_json::Value;

#[test]
fn each_whole_second_has_its_cycles_per_operation_and_the_devices_interrupts_are_counted() {
    let db = tmp("ycsb-report-seconds");
    let db_arg = db.to_str().expect("utf-8 path");
    let args = [
        "ycsb",
        "--db",
        db_arg,
        "--load",
        "--records",
        "2000",
        "--pool",
        "16M",
        "--tasks",
        "4",
        "--workload",
        "b",
        "--runtime",
        "2200ms",
        "--no-model",
        "--json",
    ];
    let out = ringdb(&args);
    let _ = std::fs::remove_dir_all(&db);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let run = &v["run"];
    let seconds = run["per_second"].as_array().expect("per_second");
    let cycles = run["cycles_per_op_per_second"]
        .as_array()
        .expect("cycles_per_op_per_second");
    assert_eq!(seconds.len(), 2, "{run}");
    assert_eq!(cycles.len(), seconds.len(), "{run}");
    // Both whole seconds had operations and a sample after them (the run went on past 2 s).
    for c in cycles {
        let c = c
            .as_f64()
            .unwrap_or_else(|| panic!("a second without cycles: {run}"));
        assert!(c > 0.0, "{run}");
    }
    // Where the data sits on a PCI disk with MSI vectors, its interrupts are counted per CPU;
    // elsewhere (tmpfs, overlay, zram) the report says there were none to count.
    let irq = &v["device_interrupts"];
    if irq.is_null() {
        eprintln!("the data's device has no MSI vectors here: nothing counted");
    } else {
        let per_cpu: u64 = irq["per_cpu"]
            .as_array()
            .expect("per_cpu")
            .iter()
            .map(|n| n.as_u64().expect("a count"))
            .sum();
        assert_eq!(irq["total"].as_u64(), Some(per_cpu), "{irq}");
        assert!(
            irq["device"].as_str().is_some_and(|d| !d.is_empty()),
            "{irq}"
        );
    }
}
