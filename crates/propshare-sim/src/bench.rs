//! Decision-cost measurement: the steady-state driver shared by
//! `propshare bench`, the criterion benches and the callgrind test.
//!
//! A *decision* is what a CPU does at the end of a slice: report the client
//! that ran (`stopped`) and ask for the next one (`pick`). The driver keeps
//! all P CPUs busy with N joined clients, visits the CPUs round robin, and
//! every 16th stop is a block; each block is paired with the wake of the
//! client that blocked longest ago, so the runnable set keeps its size and
//! the workload mixes blocking and waking as the issue asks.
//!
//! Weights are spread over 1..=1024 by a fixed hash, so grouped schedulers
//! (GR3, GDQ) see many groups. Time advances by one quantum per P decisions.
//!
//! [`measure_balancing`] times DWRR's round-balancing steps apart from its
//! other decisions (one clock read pair per decision).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use propshare::algo::dwrr::{Dwrr, DwrrOptions, LocalQueue, RoundRobinQueue, VruntimeQueue};
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight, MS};

use crate::engine::CostHistogram;

/// The quantum of the bench workload.
pub const BENCH_QUANTUM: Time = 10 * MS;

/// A scheduler held in steady state (any registered one by name, or a
/// concrete type, whose own counters the caller can then read).
pub struct BenchDriver<S: Scheduler + ?Sized = dyn Scheduler> {
    sched: Box<S>,
    cpus: usize,
    quantum: Time,
    now: Time,
    running: Vec<Option<ClientId>>,
    blocked: VecDeque<ClientId>,
    step: u64,
}

/// The weight of bench client `i`.
pub fn bench_weight(i: u32) -> Weight {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54; // 0..1023
    Weight::new(1 + h).expect("positive")
}

impl BenchDriver {
    /// `n` clients of scheduler `name` on `cpus` CPUs, every CPU busy.
    pub fn new(name: &str, n: usize, cpus: usize) -> Result<BenchDriver, String> {
        let cfg = SchedConfig { cpus, quantum: BENCH_QUANTUM, seed: 1 };
        BenchDriver::with(registry::build(name, cfg).map_err(|e| e.to_string())?, n, cpus)
    }
}

impl<S: Scheduler + ?Sized> BenchDriver<S> {
    /// `n` clients of `sched` (built for `cpus` CPUs and [`BENCH_QUANTUM`]), every CPU busy.
    pub fn with(mut sched: Box<S>, n: usize, cpus: usize) -> Result<BenchDriver<S>, String> {
        for i in 0..n as u32 {
            sched.join(0, ClientId(i), bench_weight(i)).map_err(|e| e.to_string())?;
        }
        let quantum = BENCH_QUANTUM;
        let mut d =
            BenchDriver { sched, cpus, quantum, now: 0, running: vec![None; cpus], blocked: VecDeque::new(), step: 0 };
        for k in 0..cpus {
            d.fill(k);
        }
        Ok(d)
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &S {
        &self.sched
    }

    fn fill(&mut self, k: usize) {
        if let Ok(Decision::Run { client, .. }) = self.sched.pick(self.now, CpuId(k as u32)) {
            self.running[k] = Some(client);
        }
    }

    /// One decision: stop the client on the next CPU and pick again there.
    #[inline]
    pub fn step(&mut self) {
        let k = (self.step % self.cpus as u64) as usize;
        if k == 0 {
            self.now += self.quantum;
        }
        self.step += 1;
        if let Some(c) = self.running[k].take() {
            let block = self.step.is_multiple_of(16);
            let reason = if block { StopReason::Blocked } else { StopReason::Expired };
            let _ = self.sched.stopped(self.now, CpuId(k as u32), c, self.quantum, reason);
            if block {
                self.blocked.push_back(c);
                if self.blocked.len() > 1 {
                    if let Some(w) = self.blocked.pop_front() {
                        let _ = self.sched.wake(self.now, w);
                    }
                }
            }
        }
        self.fill(k);
    }

    /// Decisions so far.
    pub fn steps(&self) -> u64 {
        self.step
    }
}

/// Run `2n` decisions (at least 1000, at most 200,000, at most 0.5 s).
fn warm_up<S: Scheduler + ?Sized>(d: &mut BenchDriver<S>, n: usize) {
    let warm = (2 * n).clamp(1000, 200_000);
    let t_warm = Instant::now();
    for i in 0..warm {
        d.step();
        if i % 256 == 255 && t_warm.elapsed().as_millis() >= 500 {
            break;
        }
    }
}

/// Cost of one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchResult {
    /// Scheduler.
    pub scheduler: String,
    /// N.
    pub clients: usize,
    /// P.
    pub cpus: usize,
    /// Median over batches of the mean ns per decision.
    pub median_ns: f64,
    /// 99th percentile over batches.
    pub p99_ns: f64,
    /// Decisions timed.
    pub decisions: u64,
}

/// Time decisions of `name` with `n` clients on `cpus` CPUs: warm up, then
/// `batches` batches of `batch` decisions; the median and p99 are over the
/// batches' mean cost (one clock read per batch, not per decision). Slow
/// schedulers are cut short by a time budget (warm-up at most 0.5 s,
/// measurement at most 1 s, but never fewer than 10 batches).
pub fn measure(name: &str, n: usize, cpus: usize, batches: usize, batch: usize) -> Result<BenchResult, String> {
    let mut d = BenchDriver::new(name, n, cpus)?;
    Ok(measure_driver(&mut d, name, n, cpus, batches, batch))
}

/// [`measure`] on a driver already set up (so the caller can weigh its memory).
pub fn measure_driver<S: Scheduler + ?Sized>(
    d: &mut BenchDriver<S>,
    name: &str,
    n: usize,
    cpus: usize,
    batches: usize,
    batch: usize,
) -> BenchResult {
    warm_up(d, n);
    let mut samples = Vec::with_capacity(batches);
    let t_measure = Instant::now();
    for k in 0..batches {
        if k >= 10 && t_measure.elapsed().as_millis() >= 1000 {
            break;
        }
        let t0 = Instant::now();
        for _ in 0..batch {
            d.step();
        }
        samples.push(t0.elapsed().as_nanos() as f64 / batch as f64);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    BenchResult {
        scheduler: name.to_string(),
        clients: n,
        cpus,
        median_ns: at(0.5),
        p99_ns: at(0.99),
        decisions: (samples.len() * batch) as u64,
    }
}

/// DWRR's decisions with and without a round-balancing step, in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct BalancingResult {
    /// Scheduler.
    pub scheduler: String,
    /// N.
    pub clients: usize,
    /// P.
    pub cpus: usize,
    /// Median ns of a decision with no balancing step (clock cost subtracted).
    pub ordinary_median_ns: f64,
    /// Median ns of a decision whose pick ran a balancing step (clock cost subtracted).
    pub balancing_median_ns: f64,
    /// Its 99th percentile.
    pub balancing_p99_ns: f64,
    /// Balancing steps per 1000 decisions.
    pub balancing_per_1000: f64,
    /// Clients moved per balancing step.
    pub moved_per_step: f64,
    /// Balancing steps timed.
    pub steps: u64,
    /// Decisions timed.
    pub decisions: u64,
    /// Median ns of one clock read pair (subtracted above).
    pub clock_ns: f64,
}

/// Time DWRR's round-balancing steps apart from its other decisions.
///
/// `name` is `dwrr` or `dwrr-cfs` (`None` for any other scheduler). The
/// workload is [`BenchDriver`]'s, with the slice unit of the paper's CFS port:
/// U = 1024 (notes 002 A9), so the bench weights 1..=1024 read as Linux load
/// weights and round slices are `3Q·w/1024`, between 29 µs and 30 ms. A
/// CPU's round-active then empties about every `1.5·N/P` of its decisions
/// (with U = 1 it would take about 1500·N/P, and N = 65,536 would never
/// balance in a measurement). Every decision is timed on its own (one clock
/// read pair, whose median cost is measured and subtracted) and filed by
/// whether its pick ran [`Dwrr::round_balance`] ([`Dwrr::balancing_steps`]).
/// Budget: at most 0.5 s warm-up, then `budget` or 5,000 balancing steps.
pub fn measure_balancing(
    name: &str,
    n: usize,
    cpus: usize,
    budget: Duration,
) -> Result<Option<BalancingResult>, String> {
    match name {
        "dwrr" => balancing_of::<RoundRobinQueue>(name, n, cpus, budget).map(Some),
        "dwrr-cfs" => balancing_of::<VruntimeQueue>(name, n, cpus, budget).map(Some),
        _ => Ok(None),
    }
}

fn balancing_of<L: LocalQueue>(name: &str, n: usize, cpus: usize, budget: Duration) -> Result<BalancingResult, String> {
    let cfg = SchedConfig { cpus, quantum: BENCH_QUANTUM, seed: 1 };
    let opts = DwrrOptions { weight_unit: 1024, ..DwrrOptions::for_config(cfg) };
    let mut d = BenchDriver::with(Box::new(Dwrr::<L>::new(cfg, opts)), n, cpus)?;
    warm_up(&mut d, n);
    let mut clock = CostHistogram::default();
    for _ in 0..10_000 {
        let t0 = Instant::now();
        clock.record(t0.elapsed().as_nanos() as u64);
    }
    let (mut ordinary, mut balancing) = (CostHistogram::default(), CostHistogram::default());
    let (steps0, moved0) = (d.scheduler().balancing_steps(), d.scheduler().migrations());
    let started = Instant::now();
    let mut decisions = 0u64;
    while balancing.count() < 5_000 && (!decisions.is_multiple_of(1024) || started.elapsed() < budget) {
        let before = d.scheduler().balancing_steps();
        let t0 = Instant::now();
        d.step();
        let ns = t0.elapsed().as_nanos() as u64;
        if d.scheduler().balancing_steps() > before {
            balancing.record(ns);
        } else {
            ordinary.record(ns);
        }
        decisions += 1;
    }
    let steps = d.scheduler().balancing_steps() - steps0;
    let moved = d.scheduler().migrations() - moved0;
    let c = clock.quantile(0.5) as f64;
    let net = |h: &CostHistogram, q: f64| if h.count() == 0 { f64::NAN } else { (h.quantile(q) as f64 - c).max(0.0) };
    Ok(BalancingResult {
        scheduler: name.to_string(),
        clients: n,
        cpus,
        ordinary_median_ns: net(&ordinary, 0.5),
        balancing_median_ns: net(&balancing, 0.5),
        balancing_p99_ns: net(&balancing, 0.99),
        balancing_per_1000: 1000.0 * steps as f64 / decisions.max(1) as f64,
        moved_per_step: moved as f64 / steps.max(1) as f64,
        steps,
        decisions,
        clock_ns: c,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The balancing bench files decisions by the scheduler's own count of
    /// balancing steps: some of each kind, and clients do move; other
    /// schedulers are not measured.
    #[test]
    fn balancing_steps_are_timed_apart() {
        for name in ["dwrr", "dwrr-cfs"] {
            let r = measure_balancing(name, 64, 4, Duration::from_millis(20)).unwrap().unwrap();
            assert!(r.steps > 0 && r.decisions > r.steps, "{name}: {r:?}");
            assert!(r.balancing_per_1000 > 0.0 && r.moved_per_step > 0.0, "{name}: {r:?}");
            assert!(r.ordinary_median_ns.is_finite() && r.balancing_median_ns.is_finite(), "{name}: {r:?}");
        }
        assert_eq!(measure_balancing("wfq", 64, 4, Duration::from_millis(20)), Ok(None));
    }
}
