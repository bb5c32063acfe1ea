//! Linux CFS and EEVDF (`cfs`, `eevdf`): their per-CPU behaviour and the
//! cross-CPU unfairness they are known for, driven by a small synchronous
//! host (CPU-bound clients, every slice runs to its end, service counted per
//! client).

use propshare::algo::cfs::{Cfs, VRUNTIME_START};
use propshare::algo::eevdf::Eevdf;
use propshare::algo::linux::{
    calc_delta_fair, inv_weight, nice_to_weight, nices_for_weights, real_for_virtual, weight_to_nice, FairRq,
    LinuxSched, Tunables, NICE_0_LOAD, SCHED_PRIO_TO_WEIGHT, SCHED_PRIO_TO_WMULT,
};
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight, MS};
use proptest::prelude::*;

const SECOND: Time = 1000 * MS;

/// A host whose clients never block: it polls idle CPUs, runs each slice
/// to its end, and counts service.
struct Driver<S: Scheduler> {
    s: S,
    now: Time,
    running: Vec<Option<(ClientId, Time, Time)>>,
    served: Vec<Time>,
}

impl<S: Scheduler> Driver<S> {
    fn new(s: S, cpus: usize) -> Self {
        Driver { s, now: 0, running: vec![None; cpus], served: Vec::new() }
    }

    fn join(&mut self, weight: u64) -> ClientId {
        let c = ClientId(self.served.len() as u32);
        self.s.join(self.now, c, Weight::new(weight).unwrap()).unwrap();
        self.served.push(0);
        c
    }

    fn poll(&mut self) {
        for k in 0..self.running.len() {
            if self.running[k].is_none() {
                if let Decision::Run { client, slice } = self.s.pick(self.now, CpuId(k as u32)).unwrap() {
                    self.running[k] = Some((client, self.now, self.now + slice));
                }
            }
        }
    }

    /// Stop the earliest-ending slice; `after` is called with each stop's (time, client).
    fn step(&mut self, mut after: impl FnMut(&Self, ClientId)) {
        self.poll();
        let k =
            (0..self.running.len()).filter(|&k| self.running[k].is_some()).min_by_key(|&k| self.running[k].unwrap().2);
        let Some(k) = k else {
            self.now += MS;
            return;
        };
        let (c, start, end) = self.running[k].take().unwrap();
        self.now = end;
        self.s.stopped(end, CpuId(k as u32), c, end - start, StopReason::Expired).unwrap();
        self.served[c.index()] += end - start;
        after(self, c);
    }

    fn run_until(&mut self, until: Time) {
        while self.now < until {
            self.step(|_, _| {});
        }
    }

    /// Service per client over `windows` consecutive windows of `len` ns.
    fn windows(&mut self, windows: usize, len: Time) -> Vec<Vec<Time>> {
        (0..windows)
            .map(|_| {
                let before = self.served.clone();
                self.run_until(self.now + len);
                self.served.iter().zip(&before).map(|(a, b)| a - b).collect()
            })
            .collect()
    }
}

fn driver(name: &str, cpus: usize, quantum: Time) -> Driver<Box<dyn Scheduler>> {
    Driver::new(registry::build(name, SchedConfig::new(cpus, quantum)).unwrap(), cpus)
}

/// Per-mille of one CPU that each client received in a one-second window.
fn permille(window: &[Time]) -> Vec<u64> {
    window.iter().map(|&s| s * 1000 / SECOND).collect()
}

/// N equal CPU-bound clients on P CPUs: over ten one-second windows the same
/// clients keep a CPU to themselves while the others share, window after
/// window.
fn lasting_skew(name: &str, n: usize, cpus: usize, alone: usize, shared: usize) {
    let mut d = driver(name, cpus, MS);
    for _ in 0..n {
        d.join(1024);
    }
    d.run_until(SECOND);
    let windows = d.windows(10, SECOND);
    let mut loners: Option<Vec<usize>> = None;
    for w in &windows {
        let share = permille(w);
        let full: Vec<usize> = (0..n).filter(|&i| share[i] >= 990).collect();
        let half: Vec<usize> = (0..n).filter(|&i| (480..=520).contains(&share[i])).collect();
        assert_eq!((full.len(), half.len()), (alone, shared), "{name}: shares {share:?}");
        if let Some(prev) = &loners {
            assert_eq!(prev, &full, "{name}: the clients owning a CPU never change");
        }
        loners = Some(full);
    }
}

#[test]
fn three_equal_clients_on_two_cpus_get_one_and_two_halves_for_ever() {
    for name in ["cfs", "eevdf"] {
        lasting_skew(name, 3, 2, 1, 2);
    }
}

#[test]
fn ten_equal_clients_on_eight_cpus_stay_skewed() {
    for name in ["cfs", "eevdf"] {
        lasting_skew(name, 10, 8, 6, 4);
    }
}

/// With the kernel's failed-balance relaxation (`+lbfail`) a task too heavy
/// for the imbalance moves after a failed pass or two: the strict balancer
/// never migrates once settled, the relaxed one keeps migrating the waiting
/// clients back and forth (the running one is never a candidate, so a client
/// can still keep its CPU; figures in docs/ALGORITHMS.md).
fn migrations_after_settling<R: FairRq>(s: LinuxSched<R>, n: usize, p: usize) -> (u64, Vec<Time>) {
    let mut d = Driver::new(s, p);
    for _ in 0..n {
        d.join(1024);
    }
    d.run_until(SECOND);
    let before = d.s.policy().migrations();
    let w = d.windows(1, 10 * SECOND).pop().unwrap();
    (d.s.policy().migrations() - before, w)
}

#[test]
fn failed_balance_relaxation_keeps_migrating() {
    for (n, p) in [(3usize, 2usize), (10, 8)] {
        let cfg = SchedConfig::new(p, MS);
        let runs = [
            (false, migrations_after_settling(Cfs::new(cfg), n, p)),
            (false, migrations_after_settling(Eevdf::new(cfg), n, p)),
            (true, migrations_after_settling(Cfs::with_balance_failed_relax(cfg), n, p)),
            (true, migrations_after_settling(Eevdf::with_balance_failed_relax(cfg), n, p)),
        ];
        for (relax, (moved, w)) in runs {
            // Work-conserving either way: the P CPUs were busy all the time.
            assert_eq!(w.iter().sum::<Time>(), p as u64 * 10 * SECOND);
            if relax {
                assert!(moved >= 200, "{n} on {p}: only {moved} migrations in 10 s");
            } else {
                assert_eq!(moved, 0, "{n} on {p}: the strict balancer settled");
            }
        }
    }
}

/// Gap LINUX-7: a task that fits the imbalance only thanks to the relaxation
/// is swapped between CPUs; the model has no tick to let it run where it
/// lands, so the relaxation must not move it again before it has run. The
/// contract test found this history (weight 24 among 43, 56, 45 and 40 on 4
/// CPUs): before the rule, client 5 was moved every 4 ms in a ring of three
/// CPUs and never ran.
#[test]
fn relaxed_balancer_does_not_starve_a_swapped_task() {
    use propshare::contract::{check, Op::*};
    let ops = [
        Join(43),
        Join(56),
        Join(45),
        Stop(3217396874389682102, 4 * MS, 0),
        Leave(0),
        Join(1),
        Stop(2666807702225239999, 2189081, 3),
        Tick,
        Tick,
        Tick,
        Stop(16606256065899754444, 3453623, 2),
        Join(40),
        Wake(17063511345348870361),
        Tick,
        Tick,
        Tick,
        Join(24),
        Tick,
        Join(1046980864),
        Block(1850408775234022921),
        Tick,
        Tick,
        Stop(16588248571699272683, 9462514, 1),
    ];
    for name in ["cfs+lbfail", "eevdf+lbfail", "cfs", "eevdf"] {
        let mut s = registry::build(name, SchedConfig::new(4, 10 * MS)).unwrap();
        check(&mut *s, 4, 10 * MS, &ops).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// The fair reference for contrast: WFQ over one global queue gives each of
/// three equal clients 2/3 of a CPU.
#[test]
fn a_global_queue_does_not_show_the_skew() {
    let mut d = driver("wfq", 2, MS);
    for _ in 0..3 {
        d.join(1024);
    }
    let w = d.windows(1, 3 * SECOND).pop().unwrap();
    for s in w {
        assert!(s.abs_diff(2 * SECOND) <= 2 * MS, "{s}");
    }
}

/// Weight 10 with two weight-1 clients on two CPUs: the balancer isolates the
/// heavy client (its load can never be matched) and the light ones share the
/// other CPU, which happens to be the readjusted ideal (1, 1/2, 1/2).
#[test]
fn infeasible_heavy_client_on_two_cpus_is_isolated() {
    for name in ["cfs", "eevdf"] {
        for order in [[10u64, 1, 1], [1, 1, 10]] {
            let mut d = driver(name, 2, MS);
            for w in order {
                d.join(w);
            }
            d.run_until(SECOND);
            let w = d.windows(1, 10 * SECOND).pop().unwrap();
            let share: Vec<u64> = w.iter().map(|&s| s * 1000 / (10 * SECOND)).collect();
            let heavy = order.iter().position(|&x| x == 10).unwrap();
            for (i, &s) in share.iter().enumerate() {
                let want = if i == heavy { 1000 } else { 500 };
                assert!(s.abs_diff(want) <= 10, "{name} {order:?}: {share:?}");
            }
        }
    }
}

/// Weight 10 with three weight-1 clients on three CPUs: the readjusted ideal
/// caps the heavy client at one CPU and gives each light client 2/3; Linux
/// leaves two light clients sharing a CPU (1/2 each, a quarter short) while
/// the third owns one, because the busiest CPU by load is the heavy client's,
/// whose only task is running, and the pair's CPU is below the average load.
#[test]
fn infeasible_weights_leave_light_clients_short() {
    for name in ["cfs", "eevdf"] {
        let mut d = driver(name, 3, MS);
        for w in [10, 1, 1, 1] {
            d.join(w);
        }
        d.run_until(SECOND);
        for w in d.windows(5, SECOND) {
            let mut lights = permille(&w[1..]);
            lights.sort();
            assert!(permille(&w)[0] >= 990, "{name}: heavy {:?}", permille(&w));
            assert!(lights[0].abs_diff(500) <= 20 && lights[1].abs_diff(500) <= 20, "{name}: {lights:?}");
            assert!(lights[2] >= 990, "{name}: {lights:?}");
        }
    }
}

fn balancer_moves_whole_tasks<R: FairRq>(mut s: LinuxSched<R>) {
    let p = 0;
    for i in 0..4 {
        s.join(p, ClientId(i), Weight::new(1024).unwrap()).unwrap();
    }
    // Joins spread 2 + 2; move one to make 3 + 1.
    let on1: Vec<u32> = (0..4).filter(|&i| s.policy().entity(ClientId(i)).unwrap().cpu == 1).collect();
    assert_eq!(on1.len(), 2);
    s.policy_mut().migrate(1, 0, ClientId(on1[0]));
    // 3w against w: average 2w, imbalance w, one task fits.
    assert_eq!(s.policy_mut().load_balance(1), 1);
    assert_eq!((s.policy().rq(0).nr_running(), s.policy().rq(1).nr_running()), (2, 2));
    // 2w against 2w: nothing to do.
    assert_eq!(s.policy_mut().load_balance(1), 0);
    assert_eq!(s.policy_mut().load_balance(0), 0);
    // Make the lone client heavy (3w) and move one more light client next
    // to it: cpu0 holds w, cpu1 holds 3w + w + w.
    s.set_weight(p, ClientId(on1[1]), Weight::new(3072).unwrap()).unwrap();
    s.policy_mut().migrate(0, 1, ClientId(on1[0]));
    assert_eq!((s.policy().rq(0).nr_running(), s.policy().rq(1).nr_running()), (1, 3));
    // Average 3w, imbalance min(5w − 3w, 3w − w) = 2w: both light clients
    // fit one after the other, the heavy one never does.
    assert_eq!(s.policy_mut().load_balance(0), 2);
    assert_eq!(s.policy().rq(0).load(), 3 * 1024);
    assert_eq!(s.policy().rq(1).load(), 3 * 1024);
}

#[test]
fn the_balancer_moves_only_whole_tasks_that_fit_the_imbalance() {
    balancer_moves_whole_tasks(Cfs::new(SchedConfig::new(2, MS)));
    balancer_moves_whole_tasks(Eevdf::new(SchedConfig::new(2, MS)));
}

/// A CPU whose only client blocks pulls a waiting one from the busiest CPU.
fn newidle_pulls<R: FairRq>(s: LinuxSched<R>) {
    let mut d = Driver::new(s, 2);
    for _ in 0..3 {
        d.join(1024);
    }
    d.run_until(100 * MS);
    d.poll();
    let lone = (0..2).find(|&k| d.s.policy().rq(k).nr_running() == 1).expect("one CPU has a client to itself");
    let (c, start, end) = d.running[lone].take().unwrap();
    d.now = d.now.max(end);
    let moved = d.s.policy().migrations();
    d.s.stopped(d.now, CpuId(lone as u32), c, end - start, StopReason::Blocked).unwrap();
    d.poll();
    assert!(d.running.iter().all(Option::is_some), "{}: cpu {lone} idles after {c} blocked", d.s.name());
    assert_eq!(d.s.policy().migrations(), moved + 1);
}

#[test]
fn newidle_balance_keeps_cpus_busy() {
    newidle_pulls(Cfs::new(SchedConfig::new(2, MS)));
    newidle_pulls(Eevdf::new(SchedConfig::new(2, MS)));
}

fn one_cpu_lag(name: &str, weights: &[u64], quantum: Time, rounds: usize) -> (i128, i128) {
    let mut d = driver(name, 1, quantum);
    for &w in weights {
        d.join(w);
    }
    let total: i128 = weights.iter().map(|&w| w as i128).sum();
    let (mut lo, mut hi) = (0i128, 0i128);
    for _ in 0..rounds {
        d.step(|d, _| {
            for (i, &w) in weights.iter().enumerate() {
                // lag · W = t · w − s · W
                let lag_w = d.now as i128 * w as i128 - d.served[i] as i128 * total;
                lo = lo.min(lag_w / total);
                hi = hi.max(lag_w / total);
            }
        });
    }
    (lo, hi)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// EEVDF on one CPU: every client stays within one request r of the
    /// fluid ideal t·w/W (Stoica and Abdel-Wahab: −r < lag < max(r, q), and
    /// here q = r), up to a microsecond of integer rounding.
    #[test]
    fn eevdf_one_cpu_lag_is_bounded(weights in proptest::collection::vec(1u64..=100_000, 1..12)) {
        let q = MS;
        let (lo, hi) = one_cpu_lag("eevdf", &weights, q, 600);
        let bound = q as i128 + 1000;
        prop_assert!(lo > -bound && hi < bound, "lag in [{lo}, {hi}]");
    }

    /// CFS on one CPU: lag stays within one scheduling period (latency or
    /// nr · min_granularity) plus the start debit.
    #[test]
    fn cfs_one_cpu_lag_is_bounded(weights in proptest::collection::vec(1u64..=8192, 1..8)) {
        let q = MS;
        let period = (8 * q).max(weights.len() as u64 * q) as i128;
        let (lo, hi) = one_cpu_lag("cfs", &weights, q, 400);
        prop_assert!(lo >= -2 * period && hi <= 2 * period, "lag in [{lo}, {hi}], period {period}");
    }

    /// EEVDF picks exactly the eligible client with the earliest deadline,
    /// eligibility being `V ≥ v` decided exactly (rationals, not the division-free form).
    #[test]
    fn eevdf_pick_is_eligible_earliest_deadline(
        weights in proptest::collection::vec(1u64..=100_000, 2..10),
        runs in proptest::collection::vec((0u64..3 * MS, any::<bool>()), 1..60),
    ) {
        let mut s = Eevdf::new(SchedConfig::new(1, MS));
        for (i, &w) in weights.iter().enumerate() {
            s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
        }
        let mut now = 0;
        for (ran, sleep_wake) in runs {
            let rq = s.policy().rq(0);
            let queued = rq.queued();
            // V exactly: Σ w v / Σ w over the queued clients (none running here).
            let sum_w: i128 = queued.iter().map(|it| s.policy().entity(it.client).unwrap().weight as i128).sum();
            let sum_wv: i128 = queued.iter().map(|it| s.policy().entity(it.client).unwrap().weight as i128 * it.vruntime as i128).sum();
            let want = queued.iter().filter(|it| it.vruntime as i128 * sum_w <= sum_wv).map(|it| it.client).next();
            prop_assert_eq!(rq.peek(), want);
            let Decision::Run { client, .. } = s.pick(now, CpuId(0)).unwrap() else { panic!("idle") };
            prop_assert_eq!(Some(client), want);
            now += ran;
            s.stopped(now, CpuId(0), client, ran, StopReason::Expired).unwrap();
            if sleep_wake {
                let c = ClientId((ran % weights.len() as u64) as u32);
                s.block(now, c).unwrap();
                s.wake(now, c).unwrap();
            }
        }
    }
}

/// Figures for docs/ALGORITHMS.md:
/// `cargo test -p propshare --test linux -- --ignored --nocapture report_figures`
#[test]
#[ignore]
fn report_figures() {
    let sets: [&[u64]; 4] = [&[1024, 1024, 1024], &[1, 2, 3, 4, 5], &[1, 8192], &[15, 1024, 88761, 335, 3121, 1024, 7]];
    for name in ["cfs", "eevdf", "cfs+lbfail", "eevdf+lbfail"] {
        for set in sets {
            let (lo, hi) = one_cpu_lag(name, set, MS, 4000);
            println!(
                "{name} one CPU, q = 1 ms, weights {set:?}: lag in [{:.3}, {:.3}] ms",
                lo as f64 / 1e6,
                hi as f64 / 1e6
            );
        }
        for (n, p, ws) in [
            (3usize, 2usize, vec![1024u64; 3]),
            (10, 8, vec![1024; 10]),
            (3, 2, vec![10, 1, 1]),
            (4, 3, vec![10, 1, 1, 1]),
        ] {
            let mut d = driver(name, p, MS);
            for &w in &ws {
                d.join(w);
            }
            d.run_until(SECOND);
            let w = d.windows(1, 10 * SECOND).pop().unwrap();
            let shares: Vec<f64> = w.iter().map(|&s| s as f64 / (10 * SECOND) as f64).collect();
            println!("{name} {n} clients {ws:?} on {p} CPUs, CPUs per client over 10 s after 1 s: {shares:.3?}");
        }
    }
}

/// Decision cost (pick + the stop that follows it), printed, not asserted:
/// `cargo test -p propshare --test linux -- --ignored --nocapture decision_cost` (the test profile is optimised)
#[test]
#[ignore]
fn decision_cost() {
    for name in ["cfs", "eevdf"] {
        for (n, p) in [(1000usize, 8usize), (1_000_000, 8)] {
            let mut d = driver(name, p, MS);
            for i in 0..n {
                d.join(1 + (i as u64 * 7919) % 4096);
            }
            d.run_until(100 * MS);
            let decisions = 200_000;
            let start = std::time::Instant::now();
            for _ in 0..decisions {
                d.step(|_, _| {});
            }
            let ns = start.elapsed().as_nanos() / decisions as u128;
            println!("{name}: N = {n}, P = {p}: {ns} ns per decision (pick + stop, driver included)");
        }
    }
}

/// Weights off the nice table (2048, 3000, 10240) used to livelock EEVDF:
/// the real slice for the rest of a request was the exact quotient, which
/// `calc_delta_fair` (through the 32-bit inverse weight) maps just short of
/// the deadline, so the same task got 2 ns slices for ever. Now every
/// request is consumed by its slice and time advances normally.
#[test]
fn eevdf_off_table_weights_do_not_livelock() {
    for ws in [[2048u64, 1024], [3000, 1000], [10240, 1024]] {
        let mut s = propshare::registry::build("eevdf", SchedConfig::new(1, MS)).unwrap();
        for (i, &w) in ws.iter().enumerate() {
            s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
        }
        let mut now = 0;
        for _ in 0..10_000 {
            let Decision::Run { client, slice } = s.pick(now, CpuId(0)).unwrap() else { panic!("idle") };
            assert!(slice >= MS / 4, "{ws:?}: a {slice} ns slice");
            now += slice;
            s.stopped(now, CpuId(0), client, slice, StopReason::Expired).unwrap();
        }
    }
}

// The kernel arithmetic: nice weights, `__calc_delta`, the tunables.

#[test]
fn weight_table_matches_the_kernel() {
    assert_eq!(nice_to_weight(0), 1024);
    assert_eq!(nice_to_weight(-20), 88761);
    assert_eq!(nice_to_weight(19), 15);
    assert_eq!(nice_to_weight(-100), 88761);
    for i in 0..40 {
        // wmult is 2^32 / weight, rounded.
        let exact = (1u64 << 32) as f64 / SCHED_PRIO_TO_WEIGHT[i] as f64;
        assert!((SCHED_PRIO_TO_WMULT[i] as f64 - exact).abs() <= 1.0, "level {i}");
        if i > 0 {
            // Each nice step is about 1.25x (between 1.2 and 1.3).
            let r = SCHED_PRIO_TO_WEIGHT[i - 1] * 100 / SCHED_PRIO_TO_WEIGHT[i];
            assert!((119..=131).contains(&r), "step {i}: {r}");
        }
    }
}

#[test]
fn nice_round_trips_and_nearest_level() {
    for nice in -20..=19 {
        assert_eq!(weight_to_nice(nice_to_weight(nice)), nice);
    }
    assert_eq!(weight_to_nice(1), 19);
    assert_eq!(weight_to_nice(1 << 31), -20);
    // 1100 is nearer (in ratio) to 1024 than to 1277; 1200 nearer to 1277.
    assert_eq!(weight_to_nice(1100), 0);
    assert_eq!(weight_to_nice(1200), -1);
}

#[test]
fn nices_for_weights_keep_ratios() {
    assert_eq!(nices_for_weights(&[1, 1, 1]), vec![0, 0, 0]);
    // 2:1 is about three nice steps (1.25^3 = 1.95).
    assert_eq!(nices_for_weights(&[2, 1]), vec![0, 3]);
    // 10:1 is about ten steps.
    assert_eq!(nices_for_weights(&[10, 1, 1]), vec![0, 10, 10]);
    // A ratio beyond 1024/15 anchors the lightest at nice 19.
    assert_eq!(nices_for_weights(&[1000, 1]), vec![-12, 19]);
    assert!(nices_for_weights(&[]).is_empty());
}

#[test]
fn nices_for_weights_keep_every_ratio_within_one_step() {
    // Each weight is rounded by at most half a step (about ×1.12), so any
    // ratio of two mapped weights is within one step (×1.25) of the
    // original, as long as the set fits the table's 5917:1 range.
    let mut x = 12345u64;
    for _ in 0..2000 {
        let n = 2 + (x % 6) as usize;
        let ws: Vec<u64> = (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                1 + (x >> 33) % 3000
            })
            .collect();
        let nices = nices_for_weights(&ws);
        for i in 0..n {
            for j in 0..n {
                let (a, b) =
                    (ws[i] as f64 / ws[j] as f64, nice_to_weight(nices[i]) as f64 / nice_to_weight(nices[j]) as f64);
                assert!(a / b <= 1.26 && b / a <= 1.26, "{ws:?} -> {nices:?}");
            }
        }
    }
}

#[test]
fn calc_delta_matches_exact_division() {
    for &w in &[1u64, 2, 3, 15, 100, 1024, 1277, 88761, 1 << 20, (1 << 32) - 1] {
        for &d in &[0u64, 1, 999, 1_000_000, 10_000_000_000] {
            let exact = d as u128 * 1024 / w as u128;
            let got = calc_delta_fair(d, w) as u128;
            // Off by at most the 32-bit inverse's rounding, 1/inv relative.
            assert!(got.abs_diff(exact) <= exact / inv_weight(w) as u128 + 2, "w {w} d {d}: {got} vs {exact}");
        }
    }
    assert_eq!(calc_delta_fair(5, NICE_0_LOAD), 5);
    // Weight 1's inverse is 2^32 − 1, so 1 ns gives 1023 of the 1024 units.
    assert_eq!(calc_delta_fair(1, 1), 1023);
    assert_eq!(real_for_virtual(1024, 1), 2);
    // The exact quotient 2 falls short through the inverse weight: 3.
    assert_eq!(calc_delta_fair(2, 2048), 0);
    assert_eq!(real_for_virtual(1, 2048), 3);
    // Always the least run that reaches the virtual amount.
    for &w in &[1u64, 15, 1000, 1024, 2048, 3000, 10240, 88761, (1 << 32) - 1] {
        for &v in &[1u64, 7, 1000, 4_999_986, 1 << 40] {
            let t = real_for_virtual(v, w);
            assert!(calc_delta_fair(t, w) >= v, "w {w} v {v}");
            assert!(t == 1 || calc_delta_fair(t - 1, w) < v, "w {w} v {v}: {t} not the least");
        }
    }
}

#[test]
fn kernel_defaults_scale_with_log_cpus() {
    assert_eq!(Tunables::kernel_defaults(1).latency, 6 * MS);
    assert_eq!(Tunables::kernel_defaults(8).latency, 24 * MS);
    assert_eq!(Tunables::kernel_defaults(64).base_slice, 3 * MS);
}

// CFS on one runqueue: slices, sleeper credit, fork placement, wake-up preemption.

fn run_one(s: &mut Cfs, now: &mut Time) -> (ClientId, Time) {
    let Decision::Run { client, slice } = s.pick(*now, CpuId(0)).unwrap() else { panic!("idle") };
    *now += slice;
    s.stopped(*now, CpuId(0), client, slice, StopReason::Expired).unwrap();
    (client, slice)
}

#[test]
fn slices_follow_latency_and_weights() {
    let mut s = Cfs::new(SchedConfig::new(1, MS));
    s.join(0, ClientId(0), Weight::new(1024).unwrap()).unwrap();
    s.join(0, ClientId(1), Weight::new(3072).unwrap()).unwrap();
    // latency 8 ms split 1:3, and service 1:3.
    let mut now = 0;
    let mut served = [0; 2];
    for _ in 0..400 {
        let (c, slice) = run_one(&mut s, &mut now);
        assert_eq!(slice, [2 * MS, 6 * MS][c.index()]);
        served[c.index()] += slice;
    }
    // Off by at most the start-debit offset (6 ms virtual = 18 ms of client 1) and one round.
    assert!(served[1].abs_diff(3 * served[0]) <= 30 * MS, "{served:?}");
}

#[test]
fn sleeper_credit_is_half_a_latency() {
    let mut s = Cfs::new(SchedConfig::new(1, MS));
    for i in 0..2 {
        s.join(0, ClientId(i), Weight::new(1024).unwrap()).unwrap();
    }
    s.block(0, ClientId(1)).unwrap();
    let mut now = 0;
    for _ in 0..20 {
        run_one(&mut s, &mut now);
    }
    s.wake(now, ClientId(1)).unwrap();
    let min = s.policy().rq(0).min_vruntime();
    assert_eq!(s.policy().entity(ClientId(1)).unwrap().vruntime, min - 4 * MS);
}

#[test]
fn new_clients_start_one_vslice_after_min_vruntime() {
    let mut s = Cfs::new(SchedConfig::new(1, MS));
    s.join(0, ClientId(0), Weight::new(1024).unwrap()).unwrap();
    // Alone: slice = latency 8 ms, vslice the same at nice 0.
    assert_eq!(s.policy().entity(ClientId(0)).unwrap().vruntime, VRUNTIME_START + 8 * MS);
    s.join(0, ClientId(1), Weight::new(1024).unwrap()).unwrap();
    // Two: 4 ms each.
    assert_eq!(s.policy().entity(ClientId(1)).unwrap().vruntime, s.policy().rq(0).min_vruntime() + 4 * MS);
}

#[test]
fn wakeup_preemption_needs_the_granularity() {
    let mut s = Cfs::new(SchedConfig::new(1, MS));
    s.join(0, ClientId(0), Weight::new(1024).unwrap()).unwrap();
    s.join(0, ClientId(1), Weight::new(1024).unwrap()).unwrap();
    s.block(0, ClientId(1)).unwrap();
    let mut now = 0;
    for _ in 0..3 {
        run_one(&mut s, &mut now);
    }
    // Client 0 runs; client 1 wakes with credit: v = min − 4 ms, 4 ms > 4/3 ms behind.
    let Decision::Run { client, .. } = s.pick(now, CpuId(0)).unwrap() else { panic!() };
    assert_eq!(client, ClientId(0));
    assert_eq!(s.wake(now, ClientId(1)).unwrap(), Some(CpuId(0)));
}

// EEVDF on one runqueue: placement at V, the saved and clamped lag.

fn quarter_runs(s: &mut Eevdf, now: &mut Time, n: usize) {
    for _ in 0..n {
        let Decision::Run { client, slice } = s.pick(*now, CpuId(0)).unwrap() else { panic!("idle") };
        let ran = slice / 4 + 1;
        *now += ran;
        s.stopped(*now, CpuId(0), client, ran, StopReason::Preempted).unwrap();
    }
}

#[test]
fn new_task_is_placed_at_v_with_half_a_slice() {
    let mut s = Eevdf::new(SchedConfig::new(1, MS));
    s.join(0, ClientId(0), Weight::new(1024).unwrap()).unwrap();
    let mut now = 0;
    quarter_runs(&mut s, &mut now, 3);
    let v_avg = s.policy().rq(0).avg_vruntime();
    s.join(now, ClientId(1), Weight::new(2048).unwrap()).unwrap();
    let se = s.policy().entity(ClientId(1)).unwrap();
    assert_eq!(se.vruntime, v_avg);
    assert_eq!(se.deadline, v_avg + calc_delta_fair(MS, 2048) / 2);
    assert_eq!(calc_delta_fair(MS, 2048), MS / 2 - 1, "the kernel's fixed point rounds down");
    assert_eq!(se.vlag, 0);
}

#[test]
fn lag_is_saved_on_sleep_and_restored_on_wake() {
    let mut s = Eevdf::new(SchedConfig::new(1, MS));
    for (i, w) in [1024u64, 2048, 1024, 3000].into_iter().enumerate() {
        s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
    }
    let mut now = 0;
    quarter_runs(&mut s, &mut now, 7);
    let mut checked = 0;
    for c in (0..4).map(ClientId) {
        if s.policy().rq(0).curr() == Some(c) {
            continue;
        }
        let lag_before = s.policy().rq(0).avg_vruntime() as i128 - s.policy().entity(c).unwrap().vruntime as i128;
        s.block(now, c).unwrap();
        let saved = s.policy().entity(c).unwrap().vlag as i128;
        assert_eq!(saved, lag_before, "{c}: lag within the clamp is saved exactly");
        s.wake(now, c).unwrap();
        let lag_after = s.policy().rq(0).avg_vruntime() as i128 - s.policy().entity(c).unwrap().vruntime as i128;
        assert!((lag_after - saved).abs() <= 2, "{c}: saved {saved}, restored {lag_after}");
        if saved != 0 {
            checked += 1;
        }
    }
    assert!(checked >= 2, "the history must create nonzero lags");
}

#[test]
fn lag_is_clamped_to_two_slices() {
    let mut s = Eevdf::new(SchedConfig::new(1, MS));
    s.join(0, ClientId(0), Weight::new(1024).unwrap()).unwrap();
    s.join(0, ClientId(1), Weight::new(1024).unwrap()).unwrap();
    // Client 0 runs far beyond its request (a host that overruns).
    let Decision::Run { client, .. } = s.pick(0, CpuId(0)).unwrap() else { panic!() };
    s.stopped(100 * MS, CpuId(0), client, 100 * MS, StopReason::Blocked).unwrap();
    // limit = max(2 r, TICK) = 4 ms at nice 0.
    assert_eq!(s.policy().entity(client).unwrap().vlag, -4 * MS as i64);
}
