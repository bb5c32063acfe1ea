//! Weight changes must not starve (issue 16, item 1): lag against the exact
//! fluid reference (with readjustment) after a client's weight is dropped and
//! raised again, for every registered scheduler.
//!
//! The shared contract, [`weight_changes_keep_lag_bounded`]: P CPUs, 2P + 1
//! to 2P + 3 CPU-bound clients of weights 1000..=2000 (so the weights are
//! feasible throughout: DFS and GDQ assume it); one of them drops to weight
//! 1..=3 for 0.1 to 0.9 s and is raised to a weight in 1000..=2000 at t2. From
//! t2 on, no client's lag (ideal − received) may exceed the scheduler's bound
//! on the weights in force after t2. Few of these algorithms have a proven
//! lag bound on P CPUs (WF2Q+'s one quantum is for one server), and several
//! baselines err by hundreds of quanta on P CPUs with static weights (SRR,
//! VTRR, CFS's imbalance), so the bound is measured, then widened:
//!
//! * the largest lag any client reaches after t2 in the same run with the
//!   new weights from the start (no dip): what the algorithm does anyway;
//! * plus `4 (N + P) R` quanta, R = ⌈w_max / w_min⌉ (1 or 2 here): generous,
//!   yet a client that does not run for the 2 s after t2 falls at least
//!   2000 P w/Σw ≥ 2000 P/(4P + 5) ≥ 222 quanta behind, more than the
//!   largest widening (4 · 12 · 2 = 96);
//! * SRR (all three forms) runs with `repay=true`: the faithful rule (a
//!   client running elsewhere loses its turn, Gap SRR-2) starves a raised
//!   client that moved to the back of its columns (Gap SRR-4) by hundreds
//!   of quanta ([`srr_raised_client_is_repaid`] shows both);
//! * `rr` ignores weights and gets no bound (it only runs through the changes);
//! * `lottery` adds `4 √n` quanta for n = P·2000 draws (four standard
//!   deviations of its random error), as the two runs draw differently;
//! * the VTRR family gets twice the widening (at most 192 quanta): a client
//!   whose weight changes mid-cycle gets a counter fitted under the
//!   time-counter invariant (Gaps VTRR-3, VTRR-8), and on P CPUs the walk
//!   then misses its share by up to some 60 quanta before the cycle ends;
//! * the WRR family adds two turns of the heaviest client (`w` quanta each):
//!   its rounds (`Σw` quanta, longer than the run here) fall differently
//!   in the two runs; so this only runs WRR through the changes;
//! * the DWRR family adds two round slices of the heaviest client (`w B / U`
//!   quanta): a raised weight waits for the next round, which the paper
//!   allows (item 3 of the issue). They run with `unit=1000` here, so a round
//!   is 3 to 6 quanta; with the registered `unit=1` a round at weight 2000
//!   is 6000 quanta, longer than the whole run;
//! * CFS and EEVDF (all their forms) run on one CPU: on P CPUs which tasks
//!   share a runqueue depends on the history (three equal tasks on two CPUs
//!   get 1, 1/2, 1/2 for ever, see `algo::linux`), so the run without the
//!   dip is no reference for the run with it;
//! * `cfs` (and `cfs+lbfail`, `cfs+readjust`, `cfs+tg`) runs with `keeplag=true`:
//!   the kernel's own rule keeps `v` and starves (Gap CFS-6,
//!   [`raised_weight_is_not_starved`] shows it).

use propshare::{Weight, MS};
use propshare_sim::engine::{ClientSpec, Engine, SimConfig};
use proptest::prelude::*;

const Q: u64 = MS;

/// One client's dip: index, low weight, drop time, raise time, raised weight.
#[derive(Clone, Debug)]
struct Dip {
    client: usize,
    low: u64,
    down: u64,
    up: u64,
    raised: u64,
}

/// The spec a registered name runs under here.
fn spec_for(name: &str) -> String {
    match name {
        "cfs" => "cfs(keeplag=true)".to_string(),
        "cfs+lbfail" => "cfs(lbfail=true,keeplag=true)".to_string(),
        "cfs+readjust" => "cfs(readjust=true,keeplag=true)".to_string(),
        "cfs+tg" => "cfs+tg(keeplag=true)".to_string(),
        n if n.starts_with("dwrr") => format!("{n}(unit=1000)"),
        "srr" => "srr(repay=true)".to_string(),
        "srr+readjust" => "srr(readjust=true,repay=true)".to_string(),
        "srr+readjust+dedicate" => "srr(dedicate=true,repay=true)".to_string(),
        n => n.to_string(),
    }
}

/// The largest lag (quanta) any client reaches after the raise, with the
/// dip (`dipped`) or with `weights` throughout.
fn max_lag_after_raise(spec: &str, cpus: usize, weights: &[u64], dip: &Dip, dipped: bool) -> Result<f64, String> {
    let horizon = dip.up + 2000 * Q;
    let clients: Vec<ClientSpec> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let mut c = ClientSpec::cpu_bound(format!("c{i}"), Weight::new(w).unwrap());
            if dipped && i == dip.client {
                c.weight_changes =
                    vec![(dip.down, Weight::new(dip.low).unwrap()), (dip.up, Weight::new(dip.raised).unwrap())];
            }
            c
        })
        .collect();
    let cfg = SimConfig::new(cpus, Q, horizon);
    let sched = propshare::registry::build(spec, propshare::SchedConfig { cpus, quantum: Q, seed: 7 })
        .map_err(|e| e.to_string())?;
    let mut e = Engine::new(sched, cfg, clients).map_err(|e| e.to_string())?;
    e.sample_lag(&(0..weights.len()).collect::<Vec<_>>(), None);
    let r = e.run(&mut |_| {}).map_err(|e| e.to_string())?;
    let worst = r
        .clients
        .iter()
        .flat_map(|c| c.lag_series.iter().filter(|&&(t, _)| t >= dip.up).map(|&(_, lag)| lag))
        .fold(f64::MIN, f64::max);
    Ok(worst / Q as f64)
}

/// The widening of the module doc, in quanta, on the weights after the raise.
fn slack(name: &str, cpus: usize, weights: &[u64]) -> f64 {
    let (max, min) = (*weights.iter().max().unwrap(), *weights.iter().min().unwrap());
    if name == "rr" {
        return f64::INFINITY;
    }
    let mut b = 4.0 * (weights.len() + cpus) as f64 * max.div_ceil(min) as f64;
    if name.starts_with("lottery") {
        b += 4.0 * ((cpus as f64) * 2000.0).sqrt();
    }
    if name.starts_with("vtrr") {
        b *= 2.0;
    }
    if name.starts_with("wrr") {
        b += 2.0 * max as f64;
    }
    if name.starts_with("dwrr") {
        b += 2.0 * (3 * max).div_ceil(1000) as f64;
    }
    b
}

/// `2P + 1` to `2P + 3` clients: weights in 1000..=2000 are then feasible
/// (no client asks for more than one CPU), before, during and after the dip.
fn dip(cpus: usize) -> impl Strategy<Value = (Vec<u64>, Dip)> {
    let n = 2 * cpus + 1..=2 * cpus + 3;
    (
        proptest::collection::vec(1000u64..=2000, n),
        any::<prop::sample::Index>(),
        1u64..=3,
        100u64..=900,
        100u64..=900,
        1000u64..=2000,
    )
        .prop_map(|(weights, which, low, down, len, raised)| {
            let client = which.index(weights.len());
            let dip = Dip { client, low, down: down * MS, up: (down + len) * MS, raised };
            (weights, dip)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// After a weight is dropped and raised again, every registered
    /// scheduler keeps every client's lag within its bound (module doc).
    #[test]
    fn weight_changes_keep_lag_bounded((cpus, (weights, dip)) in (1usize..=3).prop_flat_map(|p| (Just(p), dip(p)))) {
        let mut after = weights.clone();
        after[dip.client] = dip.raised;
        for name in propshare::registry::names() {
            let spec = spec_for(name);
            let cpus = if name.starts_with("cfs") || name.starts_with("eevdf") { 1 } else { cpus };
            let lag = max_lag_after_raise(&spec, cpus, &weights, &dip, true).map_err(TestCaseError::fail)?;
            let reference = max_lag_after_raise(&spec, cpus, &after, &dip, false).map_err(TestCaseError::fail)?;
            let b = reference + slack(name, cpus, &after);
            prop_assert!(
                lag <= b,
                "{spec} on {cpus} CPUs, weights {weights:?}, {dip:?}: lag {lag:.1} quanta > {reference:.1} without the dip + {:.1}",
                b - reference
            );
        }
    }
}

/// Gaps SRR-2 and SRR-4 together: 2 CPUs, four clients of weight 1024 and
/// one of 1536; client 0 drops to 3 at 785 ms and is raised to 1434 at
/// 1087 ms. Back in the matrix it is last in the top column (1024), and its
/// turns in the one-member columns that follow come while it still runs on
/// the other CPU: faithful SRR skips them every pass, and it falls some 220
/// quanta behind, where the run without the dip stays within 2. With
/// `repay` a skipped turn is owed and given back, and the dip costs nothing.
#[test]
fn srr_raised_client_is_repaid() {
    let weights = [1024, 1024, 1536, 1024, 1024];
    let dip = Dip { client: 0, low: 3, down: 785 * MS, up: 1087 * MS, raised: 1434 };
    let mut after = weights;
    after[0] = 1434;
    for (spec, readjusted) in [("srr", "srr(repay=true)"), ("srr+readjust", "srr(readjust=true,repay=true)")] {
        let faithful = max_lag_after_raise(spec, 2, &weights, &dip, true).unwrap();
        let repaid = max_lag_after_raise(readjusted, 2, &weights, &dip, true).unwrap();
        let undipped = max_lag_after_raise(readjusted, 2, &after, &dip, false).unwrap();
        assert!(faithful > 150.0, "{spec}: {faithful:.1} quanta behind after the raise");
        assert!(repaid <= undipped + 4.0, "{readjusted}: {repaid:.1} quanta behind, {undipped:.1} without the dip");
    }
}

/// The case: A, B, X of weight 1000 on 2 CPUs, X at weight 1 from 1 s
/// to 2 s. From 2 s to 6 s X's fluid share is 2/3 of a CPU; every scheduler
/// that kept its tags (or charged the running quantum at the new weight)
/// gave it nothing for 8 to 20 s. Received CPU time in [2 s, 6 s] is the
/// difference of two runs that agree up to 2 s.
#[test]
fn raised_weight_is_not_starved() {
    let q = 10 * MS;
    let x_received = |spec: &str, horizon: u64| {
        let mut clients: Vec<ClientSpec> =
            ["A", "B", "X"].iter().map(|n| ClientSpec::cpu_bound(*n, Weight::new(1000).unwrap())).collect();
        clients[2].weight_changes = vec![(1000 * MS, Weight::new(1).unwrap()), (2000 * MS, Weight::new(1000).unwrap())];
        let r = propshare_sim::engine::simulate(spec, SimConfig::new(2, q, horizon), clients).unwrap();
        r.clients[2].service.received
    };
    let share = |spec: &str| (x_received(spec, 6000 * MS) - x_received(spec, 2000 * MS)) as f64 / (4000 * MS) as f64;
    for spec in ["sfs", "sfs+heuristic", "sfs+affinity", "sfq", "sfq+readjust", "wf2q", "wf2q+readjust", "vtrr", "dfs"]
    {
        let s = share(spec);
        assert!(s > 0.6, "{spec}: X got {s:.3} CPU in [2 s, 6 s], fluid 0.667");
    }
    // Per-CPU runqueues: X shares a CPU with one of A, B (half a CPU).
    for spec in ["eevdf", "cfs(keeplag=true)", "cfs(keeplag=true,readjust=true)"] {
        let s = share(spec);
        assert!(s > 0.45, "{spec}: X got {s:.3} CPU in [2 s, 6 s], its runqueue's share 0.5");
    }
    // The kernel's CFS rule keeps v (Gap CFS-6): X starves.
    let s = share("cfs");
    assert!(s < 0.1, "cfs keeps v across the change and starves X: got {s:.3}");
}
