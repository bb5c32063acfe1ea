//! The SFS paper's section 4.3 experiment (Fig. 5): frequent arrivals and
//! departures, run through the simulator from the scenario file
//! `scenarios/papers/sfs/frequent-arrivals-4.3-paper.toml`. On 2 CPUs, T1
//! (weight 20) and 20 clients of weight 1 run throughout; a chain of short
//! weight-5 tasks runs one at a time, each for 300 ms, the next starting
//! when the previous ends. The weights are feasible, so readjustment changes
//! nothing, and the fluid shares of T1, the weight-1 group and the chain are
//! 20 : 20 : 5 = 4 : 4 : 1. The paper reports SFQ ≈ 1 : 1 : 1 and
//! SFS ≈ 4 : 4 : 1 at a 200 ms quantum.
//!
//! The paper leaves open what moves the result (notes 004 §4.4): whether a
//! short task "runs 300 ms" of CPU time or lives 300 ms of wall-clock time,
//! the quantum, how ties are broken, and whether an arrival preempts. The
//! ignored test below sweeps them and prints the table:
//! `cargo test -p propshare-sim --test sfs_e2 section_4_3_sweep -- --ignored --nocapture`.
//! The other tests pin the verdict the scenario files state.
//!
//! Gap: "each short task ran for 300ms" is read as 300 ms of CPU time in
//! the main scenario (the chain's `work`); the wall-clock reading is the
//! `-wall` scenario (`lifetime`). The paper gives no horizon; ours is 120 s.

use std::path::PathBuf;

use propshare::algo::sfs::{Sfs, SfsOptions, Tie};
use propshare::{registry, SchedConfig, Scheduler, Time, MS};
use propshare_sim::engine::{Engine, MemberLeaves, SimConfig};
use propshare_sim::run::{run_scenario, RunOptions};
use propshare_sim::scenario::{names_client, Scenario};

const CPUS: usize = 2;

fn scenario(file: &str) -> Scenario {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "../../scenarios/papers/sfs", file].iter().collect();
    Scenario::load(&path).unwrap()
}

#[derive(Clone, Copy, PartialEq)]
enum Reading {
    /// Each short task needs 300 ms of CPU time and leaves when it got it.
    CpuTime,
    /// Each short task lives 300 ms of wall-clock time, whatever it got.
    WallClock,
}

/// Run the section 4.3 workload of `scn` with quantum `q` and the given
/// reading of "ran 300 ms" on `sched`; returns T1 : weight-1 group : chain
/// scaled so the chain is 1, as (T1, group) (fluid: 4 : 4 : 1).
fn ratios(scn: &Scenario, sched: Box<dyn Scheduler>, q: Time, reading: Reading) -> (f64, f64) {
    let cfg = SimConfig { quantum: q, ..scn.config(0) };
    let mut chains = scn.chains().to_vec();
    let (MemberLeaves::AfterWork(t) | MemberLeaves::AfterLifetime(t)) = chains[0].leaves;
    chains[0].leaves = match reading {
        Reading::CpuTime => MemberLeaves::AfterWork(t),
        Reading::WallClock => MemberLeaves::AfterLifetime(t),
    };
    let mut engine = Engine::new(sched, cfg, scn.clients(0)).unwrap();
    engine.chains(&chains).unwrap();
    let r = engine.run(&mut |_| {}).unwrap();
    let group =
        |p: &str| r.clients.iter().filter(|c| names_client(p, &c.name)).map(|c| c.service.received as f64).sum::<f64>();
    let short = group("short*").max(1.0);
    (group("T1") / short, group("one*") / short)
}

fn sfs(q: Time, tie: Tie, preempt: bool) -> Box<dyn Scheduler> {
    Box::new(Sfs::with_options(SchedConfig::new(CPUS, q), SfsOptions { tie, preempt, ..SfsOptions::EXACT }))
}

fn named(name: &str, q: Time) -> Box<dyn Scheduler> {
    registry::build(name, SchedConfig::new(CPUS, q)).unwrap()
}

/// The verdict. At the paper's 200 ms quantum, with 300 ms of CPU per
/// short task: SFQ with readjustment gives the paper's "roughly equal"
/// shares, but SFS gets only about 2 : 2 : 1, half the fluid ratio, and no
/// choice the paper leaves open (tie-breaking, preemption on arrival,
/// wall-clock tasks) gets it to 4 : 4 : 1. With 10 ms quanta SFS is within 5% of 4 : 4 : 1 — and SFQ
/// with readjustment is then near it too.
#[test]
fn section_4_3_verdict() {
    let scn = scenario("frequent-arrivals-4.3-paper.toml");
    let near = |(a, b): (f64, f64), lo: f64, hi: f64| (lo..=hi).contains(&a) && (lo..=hi).contains(&b);
    let q = 200 * MS;
    let sfq = ratios(&scn, named("sfq+readjust", q), q, Reading::CpuTime);
    assert!(near(sfq, 0.8, 1.3), "sfq+readjust at 200 ms: {sfq:.2?}");
    for tie in [Tie::StartTag, Tie::ClientId] {
        for preempt in [false, true] {
            for reading in [Reading::CpuTime, Reading::WallClock] {
                let got = ratios(&scn, sfs(q, tie, preempt), q, reading);
                assert!(near(got, 0.9, 2.5), "sfs {tie:?} preempt {preempt} at 200 ms: {got:.2?}");
            }
        }
    }
    let got = ratios(&scn, named("sfs", q), q, Reading::CpuTime);
    assert!(near(got, 1.7, 2.3) && got.0 > sfq.0 + 0.5, "sfs at 200 ms: {got:.2?} against sfq {sfq:.2?}");
    let q = 10 * MS;
    let got = ratios(&scn, named("sfs", q), q, Reading::CpuTime);
    assert!(near(got, 3.8, 4.2), "sfs at 10 ms: {got:.2?}");
    let sfq = ratios(&scn, named("sfq+readjust", q), q, Reading::CpuTime);
    assert!(near(sfq, 3.4, 4.0), "sfq+readjust at 10 ms: {sfq:.2?}");
}

/// The scenario files state the verdict as claims; these are the ones that
/// must differ from the paper (SFS ≈ 4 : 4 : 1 at 200 ms; SFQ ≈ 1 : 1 : 1
/// at 10 ms). Every other claim must match.
#[test]
fn the_scenario_claims_hold_or_differ_as_stated() {
    for (file, differ) in [
        ("frequent-arrivals-4.3-paper.toml", &["sfs T1/short*", "sfs one*/short*", "sfs+heuristic T1/short*"][..]),
        ("frequent-arrivals-4.3-q10ms.toml", &["sfq+readjust T1/short*", "sfq+readjust one*/short*"][..]),
        ("frequent-arrivals-4.3-wall.toml", &["sfs T1/short*", "sfs one*/short*"][..]),
    ] {
        let scn = scenario(file);
        let result = run_scenario(&scn, None, &RunOptions::default(), &mut |_| true).unwrap();
        let got: Vec<String> = result
            .verdicts
            .iter()
            .filter(|v| !v.matches)
            .map(|v| format!("{} {}", v.claim.scheduler, v.claim.clients.join("/")))
            .collect();
        assert_eq!(got, differ, "{file}: {:#?}", result.verdicts);
    }
}

/// The sweep table (120 s simulated per cell).
#[test]
#[ignore]
fn section_4_3_sweep() {
    let scn = scenario("frequent-arrivals-4.3-paper.toml");
    eprintln!("section 4.3 on 2 CPUs, 120 s: T1 : weight-1 group : short chain (fluid 4 : 4 : 1)");
    eprintln!("{:<28} {:>9} {:>16} {:>16}", "scheduler", "quantum", "300 ms of CPU", "300 ms of wall");
    let row = |label: &str, q: Time, make: &dyn Fn() -> Box<dyn Scheduler>| {
        let cell = |reading| {
            let (a, b) = ratios(&scn, make(), q, reading);
            format!("{a:>5.2} : {b:>5.2} : 1")
        };
        eprintln!("{label:<28} {:>7}ms {:>16} {:>16}", q / MS, cell(Reading::CpuTime), cell(Reading::WallClock));
    };
    for q in [200 * MS, 100 * MS, 50 * MS, 20 * MS, 10 * MS] {
        for (tie, tname) in [(Tie::StartTag, "ties by S, id"), (Tie::ClientId, "ties by id")] {
            for preempt in [false, true] {
                let label = format!("sfs {tname}{}", if preempt { ", preempt" } else { "" });
                row(&label, q, &|| sfs(q, tie, preempt));
            }
        }
        for name in ["sfs+heuristic", "wfq+readjust", "sfq", "sfq+readjust"] {
            row(name, q, &|| named(name, q));
        }
    }
}
