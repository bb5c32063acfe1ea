//! GDQ's state split, proved with threads: the global part ([`GdqShared`]:
//! the group table, the readjustment) behind one lock, every group's part
//! ([`GdqGroup`]: its queue list) behind its own, every run queue of the
//! arena ([`RunQueue`], with the entries of its clients) behind its own
//! lock ([`Locked`]), every CPU's part ([`GdqCpu`]: its MFQ state) behind
//! its own, and the owner map (atomic) shared, driven by one thread per
//! CPU through the same step functions the single-threaded policy calls.
//! A CPU thread first tries the local step (`gdq::try_pick`,
//! `gdq::try_stopped`: its CPU part and its own queue's lock), then for a
//! pick the group step (`gdq::try_pick_in_group`: its group's lock, then
//! queue locks: the end of a round), and runs the step with the global
//! part (`gdq::pick`, `gdq::stopped`) only when GDQ's rules need it (an
//! MFQ decision, a pull, a steal that empties a stalled queue, a block, a
//! regroup). The client events (`gdq::client_event`: join, leave, block,
//! wake, set_weight) take the global lock. A step with the global part takes
//! every group's lock after it. Lock order: a CPU part, then the global
//! lock, then group locks (in order k), then queue locks (two in queue id
//! order for MOVE-PROCESS), so no two steps wait for each other in a
//! cycle.
//!
//! Concurrency really happens: the hosts count the picks and stops that
//! ran without the global lock and require them to be most of the steps
//! ([`threads_keep_theorem_3_6_bound`]) or many
//! ([`threads_drive_cpus_under_churn`]), and
//! [`local_steps_run_while_the_global_lock_is_held`] holds the global lock
//! while every CPU thread runs quanta on its own.
//!
//! Under churn ([`threads_drive_cpus_under_churn`]): every CPU thread runs
//! a virtual clock in ticks of the quantum Q, picking, "running" the client
//! for its quantum and stopping it (now and then as blocked) until the tick
//! ends; a churn thread meanwhile joins, leaves, blocks, wakes and reweighs
//! random clients. Every `EPOCH` ticks all threads meet at a barrier (no
//! client runs) and one checks `gdq::check_invariants` over the global part
//! and every queue under all the locks (every CPU part's, the global, every
//! queue's, in that order). Checked: no client is ever on two
//! CPUs at once (a per-client atomic flag, set after `pick` and cleared
//! before `stopped`), every refused event is one the churn thread's own
//! record says must be refused, and the invariants at every quiescent point.
//!
//! The bound ([`threads_keep_theorem_3_6_bound`]): a static mix of feasible
//! weights, N ≥ P, from time 0; the CPU threads pick concurrently at the
//! start of every quantum and stop concurrently at its end (the paper's
//! synchronous quanta, in whatever order the threads reach the locks).
//! After every quantum every client's error e_C = w_C − W_T·φ_C/Φ_T (in
//! quanta) is within Theorem 3.6's −2(2δ+2) − T ≤ e_C ≤ 2(2δ+2) + g·T.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};

use propshare::algo::gdq::ClientEvent::{self, Block, Join, Leave, SetWeight, Wake};
use propshare::algo::gdq::{self, GdqCpu, GdqGroup, GdqParams, GdqShared, Locked, NeedsGlobal, RunQueue};
use propshare::percpu::{OwnerMap, Parts};
use propshare::{ClientId, SchedConfig, StopReason, Time, Weight, MS};
use proptest::prelude::*;
use proptest::test_runner::TestRng;

mod threads;
use threads::{below, lock_step, or_abort, rng, Epochs};

/// Ticks between quiescent checks under churn.
const EPOCH: u64 = 20;
const Q: Time = MS;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

/// What every thread shares.
struct World {
    global: Mutex<GdqShared>,
    groups: Vec<Mutex<GdqGroup>>,
    owners: Arc<OwnerMap>,
    cpus: Vec<Mutex<GdqCpu>>,
    queues: Vec<Mutex<RunQueue>>,
    /// Per client: on a CPU now.
    on_cpu: Vec<AtomicBool>,
    /// Per client: quanta received.
    work: Vec<AtomicU64>,
    /// Picks and stops that ran without the global lock, and with it.
    steps: Steps,
    /// Yield the thread before every queue lock a step takes (more
    /// interleavings between two steps' holds).
    yielding: bool,
}

/// The queue arena as the steps reach it: each queue behind its own lock,
/// yielding the thread first if the world says so.
struct Arena<'a> {
    locked: Locked<'a, RunQueue>,
    yielding: bool,
}

impl Parts for Arena<'_> {
    type Part = RunQueue;
    fn count(&self) -> usize {
        self.locked.count()
    }
    fn with<R>(&mut self, k: usize, f: impl FnOnce(&mut RunQueue) -> R) -> R {
        if self.yielding {
            std::thread::yield_now();
        }
        self.locked.with(k, f)
    }
    fn with_two<R>(&mut self, a: usize, b: usize, f: impl FnOnce(&mut RunQueue, &mut RunQueue) -> R) -> R {
        if self.yielding {
            std::thread::yield_now();
        }
        self.locked.with_two(a, b, f)
    }
}

/// How many CPU steps ran without the global lock and with it (a group
/// step counts as one without).
#[derive(Default)]
struct Steps {
    local_picks: AtomicU64,
    global_picks: AtomicU64,
    /// Picks that ran as group steps (among the local ones).
    group_picks: AtomicU64,
    local_stops: AtomicU64,
    global_stops: AtomicU64,
}

impl Steps {
    /// (local picks, all picks, local stops, all stops).
    fn counts(&self) -> (u64, u64, u64, u64) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (lp, ls) = (get(&self.local_picks), get(&self.local_stops));
        (lp, lp + get(&self.global_picks), ls, ls + get(&self.global_stops))
    }

    /// At least 80 % of the picks that no MFQ decision forces (one CPU
    /// decides once per T quanta, so 1 − 1/T of the picks at most) ran
    /// without the global lock: the local and group steps (the end of a
    /// round included) take it only for a pull or a steal that empties a
    /// stalled queue. Measured 89-96 % of all picks at T = 20 (T = 4:
    /// 73 %).
    fn assert_most_picks_local(&self, params: GdqParams) {
        let (local, picks, local_stops, stops) = self.counts();
        let group = self.group_picks.load(Ordering::Relaxed);
        eprintln!(
            "picks without the global lock: {local} of {picks} ({group} group steps); stops {local_stops} of {stops}"
        );
        let t = params.interval.max(1);
        assert!(
            local * 5 * t >= picks * 4 * (t - 1),
            "{local} of {picks} picks ran without the global lock ({group} as group steps), T = {t}"
        );
    }
}

impl World {
    fn new(cpus: usize, params: GdqParams, n: usize) -> World {
        let sh = GdqShared::new(SchedConfig::new(cpus, Q), params, n);
        let queues = sh.queue_parts().into_iter().map(Mutex::new).collect();
        let cpus = sh.cpu_parts().into_iter().map(Mutex::new).collect();
        let groups = sh.group_parts().into_iter().map(Mutex::new).collect();
        let owners = sh.owner_map();
        World {
            global: Mutex::new(sh),
            groups,
            owners,
            cpus,
            queues,
            on_cpu: (0..n).map(|_| AtomicBool::new(false)).collect(),
            work: (0..n).map(|_| AtomicU64::new(0)).collect(),
            steps: Steps::default(),
            yielding: false,
        }
    }

    /// The queue arena, for one step.
    fn arena(&self) -> Arena<'_> {
        Arena { locked: Locked(&self.queues), yielding: self.yielding }
    }

    /// Run one step with the global part: the global lock, then every
    /// group's lock in order, then the queues' as the step needs them.
    fn step<R>(&self, f: impl FnOnce(&mut GdqShared, &mut Held<'_>, &mut Arena<'_>) -> R) -> R {
        let mut sh = self.global.lock().expect("a step panicked");
        let mut groups: Vec<MutexGuard<'_, GdqGroup>> =
            self.groups.iter().map(|m| m.lock().expect("a step panicked")).collect();
        f(&mut sh, &mut groups, &mut self.arena())
    }

    /// Client event `ev` of `c`, a step with the global part.
    fn event(&self, now: Time, c: ClientId, ev: ClientEvent) -> bool {
        self.step(|sh, g, q| gdq::client_event(sh, g, q, now, c, ev))
    }

    /// Run CPU `k`'s step: `local` on its CPU part and the queues (no
    /// global lock), else `group` (for a pick) under its group's lock,
    /// else `global` with the global part too.
    fn cpu_step<R>(
        &self,
        k: usize,
        (local_count, global_count): (&AtomicU64, &AtomicU64),
        local: impl FnOnce(&mut GdqCpu, &mut Arena<'_>) -> Result<R, NeedsGlobal>,
        group: Option<GroupStep<'_, R>>,
        global: impl FnOnce(&mut GdqCpu, &mut GdqShared, &mut Held<'_>, &mut Arena<'_>) -> R,
    ) -> R {
        let mut cpu = self.cpus[k].lock().expect("a step panicked");
        if let Ok(r) = local(&mut cpu, &mut self.arena()) {
            local_count.fetch_add(1, Ordering::Relaxed);
            return r;
        }
        if let (Some(step), Some(g)) = (group, cpu.group()) {
            let held = self.groups[g as usize].lock().expect("a step panicked");
            if let Ok(r) = step(&mut cpu, &self.owners, &held, &mut self.arena()) {
                local_count.fetch_add(1, Ordering::Relaxed);
                self.steps.group_picks.fetch_add(1, Ordering::Relaxed);
                return r;
            }
        }
        global_count.fetch_add(1, Ordering::Relaxed);
        self.step(|sh, g, q| global(&mut cpu, sh, g, q))
    }

    /// CPU `k` picks at `now`; marks the client on a CPU.
    fn pick(&self, k: usize, now: Time) -> Option<(ClientId, Time)> {
        let got = self.cpu_step(
            k,
            (&self.steps.local_picks, &self.steps.global_picks),
            |cpu, q| gdq::try_pick(cpu, q, now).map(Some),
            Some(Box::new(move |cpu, owners, group, q| gdq::try_pick_in_group(cpu, owners, group, q, now).map(Some))),
            |cpu, sh, g, q| gdq::pick(cpu, sh, g, q, now),
        );
        let next = self.cpus[k].lock().unwrap().next_decision();
        assert!(next.is_some_and(|t| t > now), "cpu {k} picked at {now} past its MFQ decision time {next:?}");
        if let Some((c, _)) = got {
            self.mark_running(c);
        }
        got
    }

    fn mark_running(&self, c: ClientId) {
        assert!(!self.on_cpu[c.index()].swap(true, Ordering::AcqRel), "{c} is on two CPUs at once");
    }

    /// CPU `k` stops `c` at `now` after `ran` ns.
    fn stop(&self, k: usize, c: ClientId, now: Time, ran: Time, why: StopReason) {
        self.work[c.index()].fetch_add(1, Ordering::Relaxed);
        self.on_cpu[c.index()].store(false, Ordering::Release);
        let was = self.cpu_step(
            k,
            (&self.steps.local_stops, &self.steps.global_stops),
            |cpu, q| gdq::try_stopped(cpu, q, ran, why),
            None,
            |cpu, sh, g, q| gdq::stopped(cpu, sh, g, q, now, ran, why),
        );
        assert_eq!(was, Some(c), "cpu {k} stopped the wrong client");
    }

    /// GDQ's invariants under every lock: every CPU part's (in CPU order),
    /// then the global lock, then every group's, then every queue's. A CPU
    /// step holds its CPU part's lock throughout and any other step the
    /// global lock throughout, so this is a consistent snapshot between
    /// steps even while the CPU threads run.
    fn check_snapshot(&self) {
        let cpus: Vec<MutexGuard<'_, GdqCpu>> = self.cpus.iter().map(|m| m.lock().unwrap()).collect();
        let sh = self.global.lock().unwrap();
        let groups: Vec<MutexGuard<'_, GdqGroup>> = self.groups.iter().map(|m| m.lock().unwrap()).collect();
        let guards: Vec<MutexGuard<'_, RunQueue>> = self.queues.iter().map(|m| m.lock().unwrap()).collect();
        let (cpus, groups, queues) =
            (cpus.iter().map(|g| &**g), groups.iter().map(|g| &**g), guards.iter().map(|g| &**g));
        if let Err(e) = gdq::check_invariants(&sh, cpus, groups, queues) {
            panic!("invariant broken: {e}");
        }
    }

    /// The invariants at a quiescent point: no client runs either.
    fn check(&self) {
        self.check_snapshot();
        assert!(self.on_cpu.iter().all(|f| !f.load(Ordering::Acquire)), "a client is on a CPU at a barrier");
    }
}

/// What a step with the global part holds: every group's part.
type Held<'a> = [MutexGuard<'a, GdqGroup>];

/// A CPU's group step: its CPU part, the owner map, its group's part (held).
type GroupStep<'a, R> =
    Box<dyn FnOnce(&mut GdqCpu, &OwnerMap, &GdqGroup, &mut Arena<'_>) -> Result<R, NeedsGlobal> + 'a>;

/// A client as the churn thread knows it. Only it joins, leaves and wakes;
/// a CPU thread may block a runnable client (a stop as blocked), so
/// `Runnable` means runnable, running, or blocked by a CPU since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    Gone,
    Runnable,
    Blocked,
}

/// CPU `k`'s thread for `ticks`: picks and stops at each tick, stopping a
/// client as blocked about once in 40 dispatches.
fn run_cpu(world: &World, k: usize, ticks: std::ops::Range<u64>, r: &mut TestRng) {
    for tick in ticks {
        let Some((c, slice)) = world.pick(k, tick * Q) else { continue };
        assert_eq!(slice, Q);
        if below(r, 4) == 0 {
            std::thread::yield_now(); // let the churn thread meet it running
        }
        let why = if below(r, 40) == 0 { StopReason::Blocked } else { StopReason::Expired };
        world.stop(k, c, (tick + 1) * Q, Q, why);
    }
}

/// The churn thread: `ops` random events on random clients, each outcome
/// checked against its own record (`known`) where that record is certain.
fn churn(world: &World, known: &mut [Known], ops: usize, r: &mut TestRng) {
    let n = known.len() as u64;
    for _ in 0..ops {
        let c = ClientId(below(r, n) as u32);
        let i = c.index();
        let now = 0;
        match (known[i], below(r, 6)) {
            (Known::Gone, _) => {
                assert!(world.event(now, c, Join(w(1 + below(r, 64)))), "{c} refused to join");
                known[i] = Known::Runnable;
            }
            (was, 0) => {
                // Refused only while it runs.
                if world.event(now, c, Leave) {
                    known[i] = Known::Gone;
                } else {
                    assert_eq!(was, Known::Runnable, "{c} refused to leave while blocked");
                }
            }
            (Known::Runnable, 1 | 2) => {
                // Refused while it runs or after a CPU blocked it.
                if world.event(now, c, Block) {
                    known[i] = Known::Blocked;
                }
            }
            (Known::Blocked, 1 | 2) => {
                assert!(!world.event(now, c, Block), "{c} blocked twice")
            }
            (Known::Blocked, 3 | 4) => {
                assert!(world.event(now, c, Wake), "{c} refused to wake");
                known[i] = Known::Runnable;
            }
            // Woken only if a CPU blocked it.
            (Known::Runnable, 3 | 4) => {
                world.event(now, c, Wake);
            }
            _ => assert!(world.event(now, c, SetWeight(w(1 + below(r, 64))))),
        }
        match below(r, 8) {
            0 => std::thread::yield_now(),
            1 => world.check_snapshot(),
            _ => {}
        }
    }
}

/// `cpus` CPU threads and the churn thread for `epochs` epochs; checks at
/// every barrier.
fn run_churn(cpus: usize, n: usize, params: GdqParams, seed: u64, epochs: u64) {
    let world = World::new(cpus, params, n);
    let mut known = vec![Known::Gone; n];
    lock_step(
        Epochs { cpus, seed, churn: epochs, steady: 0, ticks: EPOCH, block_one_in: 0 },
        |k, ticks, _, r| run_cpu(&world, k, ticks, r),
        |_, _, r| churn(&world, &mut known, 30, r),
        |_| world.check(),
    );
    // Concurrency really happened: picks and stops ran without the global
    // lock (an MFQ decision, a pull, a block or a regroup need it).
    let (_, _, local_stops, stops) = world.steps.counts();
    world.steps.assert_most_picks_local(params);
    assert!(local_stops * 2 >= stops, "{local_stops} of {stops} stops ran without the global lock");
}

/// Theorem 3.6's bounds in quanta: (−2(2δ+2) − T, 2(2δ+2) + g·T).
fn bounds(params: GdqParams, groups: usize) -> (i128, i128) {
    let intra = 2 * (2 * params.delta as i128 + 2);
    (-intra - params.interval as i128, intra + groups as i128 * params.interval as i128)
}

/// A static mix of `weights` (feasible, N ≥ P) on `cpus` CPU threads for
/// `quanta` synchronous quanta; returns the smallest and largest error
/// e_C·Φ_T of any client after any quantum.
fn run_static(cpus: usize, weights: &[u64], params: GdqParams, quanta: u64) -> (i128, i128) {
    let n = weights.len();
    let world = World::new(cpus, params, n);
    for (i, &x) in weights.iter().enumerate() {
        assert!(world.event(0, ClientId(i as u32), Join(w(x))));
    }
    let total: i128 = weights.iter().map(|&x| x as i128).sum();
    let extremes = Mutex::new((0i128, 0i128));
    let barrier = Barrier::new(cpus);
    std::thread::scope(|scope| {
        for k in 0..cpus {
            let (world, barrier, extremes) = (&world, &barrier, &extremes);
            scope.spawn(move || {
                or_abort(|| {
                    for t in 0..quanta {
                        let got = world.pick(k, t * Q);
                        assert!(got.is_some(), "cpu {k} idles at quantum {t} with N ≥ P");
                        barrier.wait();
                        if let Some((c, _)) = got {
                            world.stop(k, c, (t + 1) * Q, Q, StopReason::Expired);
                        }
                        if barrier.wait().is_leader() {
                            let work: Vec<i128> =
                                world.work.iter().map(|x| x.load(Ordering::Relaxed) as i128).collect();
                            let wt: i128 = work.iter().sum();
                            let mut ex = extremes.lock().unwrap();
                            for (&wc, &phi) in work.iter().zip(weights) {
                                let e = wc * total - wt * phi as i128;
                                *ex = (ex.0.min(e), ex.1.max(e));
                            }
                        }
                        barrier.wait();
                    }
                })
            });
        }
    });
    world.check();
    // Concurrency really happened: every stop (nothing blocks or changes
    // weight) and most picks ran without the global lock.
    let (_, _, local_stops, stops) = world.steps.counts();
    assert_eq!(local_stops, stops, "a static mix's stops all run without the global lock");
    world.steps.assert_most_picks_local(params);
    let ex = *extremes.lock().unwrap();
    ex
}

/// Weights whose orders ⌊log2 w⌋ span 0..=5, feasible on `cpus` CPUs
/// (the heaviest has at most one CPU's share).
fn feasible_mix(cpus: usize, r: &mut TestRng) -> Vec<u64> {
    loop {
        let n = 2 * cpus + below(r, 6 * cpus as u64) as usize;
        let v: Vec<u64> = (0..n).map(|_| 1 << below(r, 6) | below(r, 2)).collect();
        let (sum, max) = (v.iter().sum::<u64>(), *v.iter().max().unwrap());
        if max * cpus as u64 <= sum {
            return v;
        }
    }
}

fn groups(weights: &[u64]) -> usize {
    let mut orders: Vec<u32> = weights.iter().map(|&x| x.ilog2()).collect();
    orders.sort_unstable();
    orders.dedup();
    orders.len()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn threads_drive_cpus_under_churn(cpus in 2usize..=4, seed in any::<u64>()) {
        run_churn(cpus, 6 * cpus, GdqParams::default(), seed, 25);
    }

    #[test]
    fn threads_keep_theorem_3_6_bound(cpus in 2usize..=5, seed in any::<u64>(), delta in 1u64..=4, interval in 5u64..=30) {
        let weights = feasible_mix(cpus, &mut rng(seed, 0));
        let params = GdqParams { delta, interval };
        let (lo, hi) = bounds(params, groups(&weights));
        let total: i128 = weights.iter().map(|&x| x as i128).sum();
        let (min, max) = run_static(cpus, &weights, params, 600);
        prop_assert!(
            lo * total <= min && max <= hi * total,
            "errors {:.3} .. {:.3} quanta outside [{lo}, {hi}] (weights {weights:?})",
            min as f64 / total as f64,
            max as f64 / total as f64
        );
    }
}

/// The bound check can fail: the errors of such a run are not trivially
/// zero, and break a band a tenth as wide.
#[test]
fn bound_check_can_fail() {
    let weights = feasible_mix(4, &mut rng(7, 0));
    let params = GdqParams::default();
    let (lo, hi) = bounds(params, groups(&weights));
    let total: i128 = weights.iter().map(|&x| x as i128).sum();
    let (min, max) = run_static(4, &weights, params, 600);
    assert!(min < -total / 2 && max > total / 2, "errors are not trivially zero: [{min}, {max}] / {total}");
    assert!(min < lo * total / 10 || max > hi * total / 10, "a band a tenth as wide held: [{min}, {max}] / {total}");
}

/// A longer churn run (4 CPUs, 200 epochs, a small δ and T: more steals
/// and MFQ decisions per epoch).
#[test]
fn stress_long_churn() {
    for seed in 0..2 {
        run_churn(4, 24, GdqParams { delta: 1, interval: 4 }, seed, 200);
    }
}

/// While another thread holds the global lock (as a long MFQ decision or a
/// client event would), the CPU threads still run quanta: their picks and
/// stops take only their CPU part's lock and their own queue's. 16 equal
/// clients on 4 CPUs run 200 quanta on one thread (the queues level out
/// to 4 clients each); then the test thread takes the global lock, and
/// every CPU thread runs quanta from tick 201 (no MFQ decision is due
/// before 205) through `World::pick` and `World::stop`, which take the
/// global lock only when a step needs it. The test thread counts the
/// quanta each CPU reports while it holds the lock, then lets go.
#[test]
fn local_steps_run_while_the_global_lock_is_held() {
    let (cpus, n, warm) = (4, 16, 201);
    let world = World::new(cpus, GdqParams::default(), n);
    for i in 0..n {
        assert!(world.event(0, ClientId(i as u32), Join(w(1))));
    }
    for t in 0..warm {
        let run: Vec<_> = (0..cpus).map(|k| world.pick(k, t * Q).expect("N > P: no CPU idles")).collect();
        for (k, (c, _)) in run.into_iter().enumerate() {
            world.stop(k, c, (t + 1) * Q, Q, StopReason::Expired);
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let while_held = std::thread::scope(|scope| {
        let held = world.global.lock().unwrap();
        for k in 0..cpus {
            let (world, tx) = (&world, tx.clone());
            scope.spawn(move || {
                for t in warm..warm + 20 {
                    let (c, _) = world.pick(k, t * Q).expect("N > P: no CPU idles");
                    world.stop(k, c, (t + 1) * Q, Q, StopReason::Expired);
                    tx.send(k).unwrap();
                }
            });
        }
        // Every CPU runs a few quanta before it needs the global part;
        // wait for them (a CPU thread blocked on the global lock sends no more).
        // Patient (10 s) while some CPU has reported nothing, on a busy machine.
        let mut quanta = vec![0u32; cpus];
        loop {
            let wait = if quanta.contains(&0) { 10_000 } else { 300 };
            match rx.recv_timeout(std::time::Duration::from_millis(wait)) {
                Ok(k) => quanta[k] += 1,
                Err(_) => break,
            }
        }
        drop(held);
        quanta
    });
    world.check();
    eprintln!("quanta run while the global lock was held: {while_held:?}");
    assert!(while_held.iter().all(|&q| q >= 1), "a CPU ran no quantum while the global lock was held: {while_held:?}");
}

/// Group steps race in one group: 5 equal clients on 4 CPUs (one group,
/// every CPU dedicated), δ = 0, so queues of one and two clients end a
/// round at almost every pick and steal from each other; the CPU threads
/// run free (no barrier) for 3000 quanta each. Two thieves that scanned
/// the group at once would both take from the same two-client queue, the
/// second its running client: caught by the on-CPU flags and the
/// invariants. Most picks run as group steps.
#[test]
fn group_steps_race_in_one_group() {
    let (cpus, n, quanta) = (4, 5, 20_000);
    let params = GdqParams { delta: 0, interval: 20 };
    let world = World { yielding: true, ..World::new(cpus, params, n) };
    for i in 0..n {
        assert!(world.event(0, ClientId(i as u32), Join(w(1))));
    }
    std::thread::scope(|scope| {
        for k in 0..cpus {
            let world = &world;
            scope.spawn(move || {
                or_abort(|| {
                    for t in 0..quanta {
                        let (c, _) = world.pick(k, t * Q).expect("N > P: no CPU idles");
                        world.stop(k, c, (t + 1) * Q, Q, StopReason::Expired);
                    }
                })
            });
        }
    });
    world.check();
    let group = world.steps.group_picks.load(Ordering::Relaxed);
    assert!(group * 4 >= cpus as u64 * quanta, "{group} group steps in {} picks", cpus as u64 * quanta);
    world.steps.assert_most_picks_local(params);
}
