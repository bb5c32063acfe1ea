//! The O(1) claim, in instructions: under valgrind's callgrind (exact,
//! repeatable counts, whatever else the machine is doing), instructions per
//! decision of the O(1) schedulers must not grow from N = 256 to N = 65,536
//! (within 10%), while heap-based WFQ's grow with log N.
//!
//! Per-decision counts are the difference between two runs that differ only
//! in the number of decisions, so setup cost cancels out.

use std::process::Command;

fn valgrind() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Total instructions of `propshare bench-insns` under callgrind.
fn instructions(scheduler: &str, clients: usize, decisions: u64) -> u64 {
    let out_file =
        std::env::temp_dir().join(format!("propshare-cg-{}-{scheduler}-{clients}-{decisions}", std::process::id()));
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--collect-atstart=yes"])
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(env!("CARGO_BIN_EXE_propshare"))
        .args([
            "bench-insns",
            "--scheduler",
            scheduler,
            "--clients",
            &clients.to_string(),
            "--cpus",
            "1",
            "--decisions",
            &decisions.to_string(),
        ])
        .output()
        .expect("valgrind runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&out_file).expect("callgrind output");
    let _ = std::fs::remove_file(&out_file);
    text.lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("a totals line")
}

fn per_decision(scheduler: &str, clients: usize) -> f64 {
    let (d1, d2) = (4_000u64, 24_000u64);
    let (a, b) = (instructions(scheduler, clients, d1), instructions(scheduler, clients, d2));
    (b - a) as f64 / (d2 - d1) as f64
}

#[test]
fn constant_time_schedulers_are_flat_in_instructions() {
    if !valgrind() {
        assert!(
            std::env::var_os("PROPSHARE_REQUIRE_VALGRIND").is_none(),
            "PROPSHARE_REQUIRE_VALGRIND is set but valgrind is missing"
        );
        eprintln!("skipped: valgrind not found");
        return;
    }
    let known: Vec<&str> = propshare::registry::names().collect();
    let flat: Vec<&str> =
        ["rr", "wrr", "srr", "gr3", "gdq", "dwrr", "vtrr"].into_iter().filter(|s| known.contains(s)).collect();
    let mut report = String::new();
    for s in &flat {
        let (small, large) = (per_decision(s, 256), per_decision(s, 65_536));
        report.push_str(&format!("{s}: {small:.0} -> {large:.0} instructions per decision\n"));
        assert!(
            large <= small * 1.10,
            "{s} grows with N: {small:.0} -> {large:.0} instructions per decision\n{report}"
        );
    }
    let (small, large) = (per_decision("wfq", 256), per_decision("wfq", 65_536));
    report.push_str(&format!("wfq: {small:.0} -> {large:.0}\n"));
    assert!(large > small * 1.3, "heap WFQ should grow with log N: {small:.0} -> {large:.0}\n{report}");
    eprintln!("{report}");
}
