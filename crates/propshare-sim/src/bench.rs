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

use std::collections::VecDeque;
use std::time::Instant;

use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight, MS};

/// A scheduler held in steady state.
pub struct BenchDriver {
    sched: Box<dyn Scheduler>,
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
        let quantum = 10 * MS;
        let mut sched = registry::build(name, SchedConfig { cpus, quantum, seed: 1 }).map_err(|e| e.to_string())?;
        for i in 0..n as u32 {
            sched.join(0, ClientId(i), bench_weight(i)).map_err(|e| e.to_string())?;
        }
        let mut d =
            BenchDriver { sched, cpus, quantum, now: 0, running: vec![None; cpus], blocked: VecDeque::new(), step: 0 };
        for k in 0..cpus {
            d.fill(k);
        }
        Ok(d)
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
pub fn measure_driver(
    d: &mut BenchDriver,
    name: &str,
    n: usize,
    cpus: usize,
    batches: usize,
    batch: usize,
) -> BenchResult {
    let warm = (2 * n).clamp(1000, 200_000);
    let t_warm = Instant::now();
    for i in 0..warm {
        d.step();
        if i % 256 == 255 && t_warm.elapsed().as_millis() >= 500 {
            break;
        }
    }
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
