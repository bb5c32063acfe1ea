//! Every claim in `scenarios/papers/` can fail: run in place of the
//! scheduler it is about, at least one deliberately broken scheduler (a
//! mutant) turns its verdict. A claim no mutant can turn checks nothing.
//!
//! The mutants, tried in order until each claim has turned:
//! * `unweighted`: the claim's own scheduler told that every client has
//!   weight 1 (weights and weight changes ignored);
//! * `rr`: round robin in its place (weights and the algorithm gone);
//! * `fair`: WF2Q+ over readjusted weights in its place, a scheduler close
//!   to the fluid ideal (a baseline the paper shows unfair "became fair":
//!   what the claims' `reach` and lower bounds catch);
//! * `nwc`: DFS in its place, P-fair and not work-conserving (idle-time and
//!   work-conservation claims);
//! * `skewed`: the claim's own scheduler told that the first client
//!   (id 0) has twice its weight (claims on equal weights, which ignoring
//!   weights cannot break);
//! * `noreadjust`: for a `+readjust` scheduler, the same algorithm without
//!   readjustment (the SFS paper's section 4.2 point);
//! * `idler`: the claim's own scheduler with CPU 0 left idle on every
//!   other pick (work-conservation claims).
//!
//! A claim pinned `expect = "differ"` turns when a mutant makes it match,
//! or, failing that, when a mutant moves our figure by more than 1%: the
//! claim still measures the scheduler, though the paper's number is out of
//! reach.
//!
//! Each mutant runs under the claim's scheduler name, so the claims judge
//! it as they judge the real one. The test prints, per claim, the mutant
//! that turned it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use propshare::registry::{self, BuildError};
use propshare::{ClientId, CpuId, Decision, Kick, SchedConfig, SchedError, Scheduler, Time, Weight};
use propshare_sim::run::{run_scenario_with, RunOptions};
use propshare_sim::scenario::{judge, scenario_files, Expect, Scenario};

/// How a mutant gets weights wrong.
#[derive(Clone, Copy, PartialEq)]
enum Weights {
    Right,
    AllOne,
    FirstDoubled,
}

/// A scheduler under another's name, optionally wrong about weights or idle on CPU 0.
struct Mutant {
    name: String,
    inner: Box<dyn Scheduler>,
    weights: Weights,
    idle_cpu0: Option<bool>,
}

impl Mutant {
    fn weight(&self, c: ClientId, w: Weight) -> Weight {
        match self.weights {
            Weights::Right => w,
            Weights::AllOne => Weight::ONE,
            Weights::FirstDoubled if c.0 == 0 => Weight::new(w.get().saturating_mul(2).min(Weight::MAX)).unwrap(),
            Weights::FirstDoubled => w,
        }
    }
}

impl Scheduler for Mutant {
    fn name(&self) -> &str {
        &self.name
    }
    fn work_conserving(&self) -> bool {
        self.idle_cpu0.is_none() && self.inner.work_conserving()
    }
    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        let w = self.weight(c, w);
        self.inner.join(now, c, w)
    }
    propshare::forward_scheduler!(|s| s.inner; leave, block, wake, stopped);
    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        if self.weights == Weights::AllOne {
            return Ok(());
        }
        let w = self.weight(c, w);
        self.inner.set_weight(now, c, w)
    }
    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        if let (Some(idle), 0) = (self.idle_cpu0.as_mut(), cpu.0) {
            *idle = !*idle;
            if *idle {
                return Ok(Decision::Idle);
            }
        }
        self.inner.pick(now, cpu)
    }
}

const MUTANTS: [&str; 7] = ["unweighted", "rr", "fair", "nwc", "skewed", "noreadjust", "idler"];

fn build_mutant(scn: &Scenario, mutant: &str, name: &str, cfg: SchedConfig) -> Result<Box<dyn Scheduler>, BuildError> {
    let own = || scn.build_scheduler(name, cfg);
    let (inner, weights, idle_cpu0) = match mutant {
        "unweighted" => (own()?, Weights::AllOne, None),
        "rr" => (registry::build("rr", cfg)?, Weights::Right, None),
        "fair" => (registry::build("wf2q+readjust", cfg)?, Weights::Right, None),
        "nwc" => (registry::build("dfs", cfg)?, Weights::Right, None),
        "skewed" => (own()?, Weights::FirstDoubled, None),
        "noreadjust" => match name.split_once("+readjust") {
            Some((base, _)) => (registry::build(base, cfg)?, Weights::Right, None),
            None => (own()?, Weights::Right, None),
        },
        "idler" => (own()?, Weights::Right, Some(false)),
        _ => unreachable!("unknown mutant {mutant}"),
    };
    Ok(Box::new(Mutant { name: name.to_string(), inner, weights, idle_cpu0 }))
}

fn paper_scenarios() -> Vec<Scenario> {
    let root: PathBuf = [env!("CARGO_MANIFEST_DIR"), "../../scenarios/papers"].iter().collect();
    let files = scenario_files(&root).unwrap();
    assert!(files.len() >= 30, "scenarios/papers/ has {} files", files.len());
    files.iter().map(|f| Scenario::load(f).unwrap_or_else(|e| panic!("{e}"))).collect()
}

#[test]
fn every_claim_turns_on_a_broken_scheduler() {
    let opts = RunOptions::default();
    let mut unturned: Vec<String> = Vec::new();
    let mut turned_by: BTreeMap<&str, usize> = BTreeMap::new();
    for scn in paper_scenarios() {
        let windows = scn.windows();
        let mut by_scheduler: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (k, c) in scn.claims.iter().enumerate() {
            by_scheduler.entry(c.scheduler.as_str()).or_default().push(k);
        }
        for (sched, mut left) in by_scheduler {
            let only = [sched.to_string()];
            let real =
                run_scenario_with(&scn, Some(&only), &opts, &|n, cfg| scn.build_scheduler(n, cfg), &mut |_| true)
                    .unwrap_or_else(|e| panic!("{} on {sched}: {e}", scn.name));
            for mutant in MUTANTS {
                if left.is_empty() {
                    break;
                }
                // A mutant the engine refuses (a broken contract) turns nothing.
                let broken = match run_scenario_with(
                    &scn,
                    Some(&only),
                    &opts,
                    &|n, cfg| build_mutant(&scn, mutant, n, cfg),
                    &mut |_| true,
                ) {
                    Ok(b) => b,
                    Err(e) => {
                        println!("{} {sched} {mutant}: refused: {e}", scn.name);
                        continue;
                    }
                };
                left.retain(|&k| {
                    let c = &scn.claims[k];
                    let (was, now) = (judge(c, &windows, &real.runs), judge(c, &windows, &broken.runs));
                    let moved = match (was.ours, now.ours) {
                        (Some(a), Some(b)) => {
                            let scale = a.0.abs().max(a.1.abs()).max(1e-9);
                            (a.0 - b.0).abs().max((a.1 - b.1).abs()) > 0.01 * scale
                        }
                        (a, b) => a != b,
                    };
                    let turned = was.matches != now.matches || (c.expect != Expect::Match && moved);
                    if turned {
                        *turned_by.entry(mutant).or_default() += 1;
                        println!(
                            "{}: {sched} {} turned by {mutant}: {:?} -> {:?}",
                            c.at,
                            c.metric.name(),
                            was.ours,
                            now.ours
                        );
                    }
                    !turned
                });
            }
            for k in left {
                let c = &scn.claims[k];
                unturned.push(format!(
                    "{}: {sched} {} ({}), claim {}",
                    c.at,
                    c.metric.name(),
                    c.source,
                    c.bounds_text()
                ));
            }
        }
    }
    println!("claims turned, by mutant: {turned_by:?}");
    assert!(unturned.is_empty(), "claims no broken scheduler turns ({}):\n{}", unturned.len(), unturned.join("\n"));
}

/// Every claim says which figure or sentence of the paper it encodes, and
/// every expected difference why (the loader refuses `differ` without a
/// reason; this checks the note).
#[test]
fn every_claim_says_what_it_encodes() {
    let mut bare = Vec::new();
    for scn in paper_scenarios() {
        for c in &scn.claims {
            if c.note.as_deref().is_none_or(|n| n.trim().len() < 20) {
                bare.push(format!("{}: {} {} ({})", c.at, c.scheduler, c.metric.name(), c.source));
            }
        }
    }
    assert!(bare.is_empty(), "claims with no note saying what they encode:\n{}", bare.join("\n"));
}
