//! Every global-queue baseline runs in the simulator by name, against the
//! exact fluid reference.

use propshare::{Weight, MS};
use propshare_sim::engine::{simulate, ClientSpec, SimConfig, SimReport};

const BASELINES: &[&str] =
    &["wf2q", "wf2q+readjust", "sfq", "sfq+readjust", "stride", "stride+readjust", "lottery", "wrr", "srr", "vtrr"];

fn clients(weights: &[u64]) -> Vec<ClientSpec> {
    weights.iter().enumerate().map(|(i, &w)| ClientSpec::cpu_bound(format!("c{i}"), Weight::new(w).unwrap())).collect()
}

fn sim(name: &str, cpus: usize, weights: &[u64], quanta: u64) -> SimReport {
    simulate(name, SimConfig::new(cpus, 10 * MS, quanta * 10 * MS), clients(weights)).expect("runs")
}

/// Work-conserving on 1, 2 and 4 CPUs: no CPU idles while a client waits.
#[test]
fn every_baseline_runs_and_conserves_work() {
    for &name in BASELINES {
        for cpus in [1, 2, 4] {
            let r = sim(name, cpus, &[1, 2, 3, 4, 5, 6, 7, 8], 500);
            assert_eq!(r.idle_while_waiting, 0, "{name} on {cpus} CPUs");
            assert_eq!(r.busy, cpus as u64 * 500 * 10 * MS, "{name} on {cpus} CPUs");
        }
    }
}

/// The simulator's own lag metric agrees with the one-CPU bounds: WF2Q+
/// within one quantum both ways, SFQ never more than one quantum ahead.
#[test]
fn one_cpu_bounds_seen_by_the_simulator() {
    let q = (10 * MS) as f64;
    let w = [1, 2, 3, 4, 10];
    for c in &sim("wf2q", 1, &w, 2000).clients {
        assert!(
            c.service.max_lag <= q + 1.0 && c.service.min_lag >= -q - 1.0,
            "wf2q {}: {} {}",
            c.name,
            c.service.min_lag,
            c.service.max_lag
        );
    }
    for c in &sim("sfq", 1, &w, 2000).clients {
        assert!(c.service.min_lag >= -q - 1.0, "sfq {}: {}", c.name, c.service.min_lag);
    }
}

/// On 2 CPUs with an infeasible weight (12 of 20), the readjusted tag-based
/// variants give every client its fluid share within 1% of a CPU over 10 s.
#[test]
fn readjusted_variants_track_the_fluid_reference_with_infeasible_weights() {
    for name in ["wf2q+readjust", "sfq+readjust", "stride+readjust"] {
        let r = sim(name, 2, &[1, 1, 2, 4, 12], 1000);
        for c in &r.clients {
            let err = (c.service.received as f64 - c.service.ideal).abs() / (1000.0 * 10.0 * MS as f64);
            assert!(err < 0.01, "{name} {}: received {} ideal {}", c.name, c.service.received, c.service.ideal);
        }
    }
}
