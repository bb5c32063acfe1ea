//! SFS (Chandra et al., OSDI 2000): the paper's rules and examples, checked
//! step by step, and its invariants checked after every event of random
//! workloads. Reading notes: shared/papers/notes/004-sfs.md (test ids R*, S*,
//! H* refer to its section 7).

use std::collections::BTreeMap;

use propshare::algo::sfs::{Heuristic, Sfs, SfsOptions, Surplus, SurplusOrder, Tie};
use propshare::contract::xorshift;
use propshare::readjust::Phi;
use propshare::vtime::{VTime, VT_SCALE};
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight, MS};
use proptest::prelude::*;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn phi_ratio(p: Phi) -> (u64, u64) {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a.max(1)
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(p.num, p.den);
    (p.num / g, p.den / g)
}

/// Tag units for `ns` of service at weight 1.
fn tag(ns: Time) -> VTime {
    ns as u128 * VT_SCALE
}

// ---------------------------------------------------------------------------
// A host that drives an `Sfs` with random events and checks it after each.

#[derive(Clone, Copy, Debug)]
enum Op {
    Join(u64),
    Leave(usize),
    Block(usize),
    Wake(usize),
    SetWeight(usize, u64),
    /// Stop the `which`-th busy CPU after `dt` ns: 0 expired, 1 preempted, 2 blocked, 3 left.
    Stop(usize, Time, u8),
    /// Stop the CPU whose slice ends first, at its slice end.
    Tick,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum St {
    Waiting,
    Running,
    Blocked,
}

struct Host {
    s: Sfs,
    cpus: usize,
    now: Time,
    /// Per CPU: (client, start, slice end).
    running: Vec<Option<(ClientId, Time, Time)>>,
    clients: BTreeMap<ClientId, St>,
    next: u32,
    last_v: VTime,
    /// Picks whose client was not the exact least (α, S, id).
    inexact: u64,
    picks: u64,
    /// Picks of the client that last ran on the same CPU.
    same_cpu: u64,
    last_cpu: BTreeMap<ClientId, usize>,
    trace: Vec<(usize, ClientId)>,
    /// Quanta (of any length) each client has completed.
    served: BTreeMap<ClientId, u64>,
    /// Check that one-CPU picks are SFQ's (least start tag, then id).
    sfq_check: bool,
}

impl Host {
    fn new(cpus: usize, quantum: Time, opts: SfsOptions) -> Host {
        Host {
            s: Sfs::with_options(SchedConfig::new(cpus, quantum), opts),
            cpus,
            now: 0,
            running: vec![None; cpus],
            clients: BTreeMap::new(),
            next: 0,
            last_v: 0,
            inexact: 0,
            picks: 0,
            same_cpu: 0,
            last_cpu: BTreeMap::new(),
            trace: Vec::new(),
            served: BTreeMap::new(),
            sfq_check: true,
        }
    }

    fn nth(&self, i: usize, st: &[St]) -> Option<ClientId> {
        let c: Vec<ClientId> = self.clients.iter().filter(|(_, s)| st.contains(s)).map(|(&c, _)| c).collect();
        (!c.is_empty()).then(|| c[i % c.len()])
    }

    fn check(&mut self) -> Result<(), String> {
        self.s.check_invariants()?;
        let v = self.s.virtual_time();
        if v < self.last_v {
            return Err("virtual time went backwards".into());
        }
        self.last_v = v;
        // S4: α ≥ 0 for every runnable client, and α = 0 for some runnable client.
        let mut zero = false;
        for (&c, &st) in &self.clients {
            if st == St::Blocked {
                continue;
            }
            let a = self.s.surplus(c).ok_or_else(|| format!("no surplus for runnable {c}"))?;
            if self.s.start_tag(c).unwrap() < v {
                return Err(format!("{c} has negative surplus"));
            }
            zero |= a.is_zero();
        }
        let any_runnable = self.clients.values().any(|&s| s != St::Blocked);
        if any_runnable && !zero {
            return Err("no runnable client has zero surplus".into());
        }
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        let now = self.now;
        match op {
            Op::Join(x) => {
                let c = ClientId(self.next);
                self.next += 1;
                self.s.join(now, c, w(x)).map_err(|e| e.to_string())?;
                self.clients.insert(c, St::Waiting);
            }
            Op::Leave(i) => {
                if let Some(c) = self.nth(i, &[St::Waiting, St::Blocked]) {
                    self.s.leave(now, c).map_err(|e| e.to_string())?;
                    self.clients.remove(&c);
                }
            }
            Op::Block(i) => {
                if let Some(c) = self.nth(i, &[St::Waiting]) {
                    self.s.block(now, c).map_err(|e| e.to_string())?;
                    self.clients.insert(c, St::Blocked);
                }
            }
            Op::Wake(i) => {
                if let Some(c) = self.nth(i, &[St::Blocked]) {
                    self.s.wake(now, c).map_err(|e| e.to_string())?;
                    self.clients.insert(c, St::Waiting);
                }
            }
            Op::SetWeight(i, x) => {
                if let Some(c) = self.nth(i, &[St::Waiting, St::Blocked, St::Running]) {
                    self.s.set_weight(now, c, w(x)).map_err(|e| e.to_string())?;
                }
            }
            Op::Stop(i, dt, r) => {
                let busy: Vec<usize> = (0..self.cpus).filter(|&k| self.running[k].is_some()).collect();
                if !busy.is_empty() {
                    self.now += dt;
                    let why = [StopReason::Expired, StopReason::Preempted, StopReason::Blocked, StopReason::Left]
                        [r as usize % 4];
                    self.stop(busy[i % busy.len()], why)?;
                }
            }
            Op::Tick => {
                if let Some(k) =
                    (0..self.cpus).filter(|&k| self.running[k].is_some()).min_by_key(|&k| self.running[k].unwrap().2)
                {
                    self.now = self.now.max(self.running[k].unwrap().2);
                    self.stop(k, StopReason::Expired)?;
                }
            }
        }
        self.check()
    }

    fn stop(&mut self, k: usize, why: StopReason) -> Result<(), String> {
        let (c, start, _) = self.running[k].take().unwrap();
        self.s.stopped(self.now, CpuId(k as u32), c, self.now - start, why).map_err(|e| e.to_string())?;
        self.last_cpu.insert(c, k);
        *self.served.entry(c).or_default() += 1;
        match why {
            StopReason::Expired | StopReason::Preempted => self.clients.insert(c, St::Waiting),
            StopReason::Blocked => self.clients.insert(c, St::Blocked),
            StopReason::Left => self.clients.remove(&c),
        };
        Ok(())
    }

    /// Poll every idle CPU; check each pick against the exact O(t) scan.
    fn poll(&mut self) -> Result<(), String> {
        for k in 0..self.cpus {
            if self.running[k].is_some() {
                continue;
            }
            let exact = self.s.min_surplus_scan();
            let least_start = self
                .clients
                .iter()
                .filter(|(_, &s)| s == St::Waiting)
                .map(|(&c, _)| (self.s.start_tag(c).unwrap(), c))
                .min();
            match self.s.pick(self.now, CpuId(k as u32)).map_err(|e| e.to_string())? {
                Decision::Idle => {
                    if exact.is_some() {
                        return Err(format!("cpu {k} idle while a client waits"));
                    }
                }
                Decision::Run { client, slice } => {
                    let (best, least) = exact.ok_or("picked with nobody waiting")?;
                    if self.clients.get(&client) != Some(&St::Waiting) {
                        return Err(format!("picked {client} which is not waiting"));
                    }
                    self.picks += 1;
                    if client != best {
                        self.inexact += 1;
                        // Same surplus (a tie broken differently) is still an exact pick.
                        if self.s.surplus(client).unwrap() == least {
                            self.inexact -= 1;
                        }
                    }
                    // On one CPU SFS is SFQ: the least start tag (ties: least id).
                    if self.sfq_check
                        && self.cpus == 1
                        && Some((self.s.start_tag(client).unwrap(), client)) != least_start
                    {
                        return Err(format!("one CPU: picked {client}, least start tag is {least_start:?}"));
                    }
                    if self.last_cpu.get(&client) == Some(&k) {
                        self.same_cpu += 1;
                    }
                    self.clients.insert(client, St::Running);
                    self.running[k] = Some((client, self.now, self.now + slice));
                    self.trace.push((k, client));
                }
            }
            self.check()?;
        }
        Ok(())
    }

    fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        for (i, &op) in ops.iter().enumerate() {
            self.apply(op).map_err(|e| format!("step {i} {op:?}: {e}"))?;
            self.poll().map_err(|e| format!("after step {i} {op:?}: {e}"))?;
        }
        Ok(())
    }
}

fn op() -> impl Strategy<Value = Op> {
    let weight = prop_oneof![6 => 1u64..=16, 2 => 1u64..=1000, 1 => 1u64..=Weight::MAX];
    prop_oneof![
        4 => weight.clone().prop_map(Op::Join),
        1 => any::<usize>().prop_map(Op::Leave),
        2 => any::<usize>().prop_map(Op::Block),
        2 => any::<usize>().prop_map(Op::Wake),
        2 => (any::<usize>(), weight).prop_map(|(i, x)| Op::SetWeight(i, x)),
        10 => Just(Op::Tick),
        4 => (any::<usize>(), 0..12 * MS, 0u8..4).prop_map(|(i, dt, r)| Op::Stop(i, dt, r)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// S4 and the structures: after every event of a random churn (joins,
    /// leaves, blocks, wakes, weight changes, early and late stops) every
    /// runnable client has α ≥ 0, one has α = 0, v never decreases, the
    /// three queues match the runnable set, Qα is sorted, φ equals the
    /// readjustment of the runnable weights; and every exact pick is the
    /// least (α, S, id) found by an O(t) scan. On one CPU every pick is the
    /// least start tag (SFQ's choice).
    #[test]
    fn exact_sfs_invariants_under_churn(cpus in 1usize..=6, ops in proptest::collection::vec(op(), 1..400)) {
        let mut h = Host::new(cpus, 10 * MS, SfsOptions::EXACT);
        h.run(&ops).map_err(TestCaseError::fail)?;
        prop_assert_eq!(h.inexact, 0);
    }

    /// The same structural invariants hold for the heuristic (stale Qα between
    /// re-sorts), the affinity variant and SFS without readjustment.
    #[test]
    fn variant_invariants_under_churn(cpus in 1usize..=6, which in 0u8..6, ops in proptest::collection::vec(op(), 1..300)) {
        let opts = match which {
            0 => SfsOptions { heuristic: Some(Heuristic { per_queue: 2, resort_every: 7 }), ..SfsOptions::EXACT },
            1 => SfsOptions { affinity_bias: 3, affinity_slack: Some(10 * MS), ..SfsOptions::EXACT },
            2 => SfsOptions { readjust: false, ..SfsOptions::EXACT },
            3 => SfsOptions { tie: Tie::ClientId, preempt: true, ..SfsOptions::EXACT },
            4 => SfsOptions { surplus_order: SurplusOrder::ResortOnVirtualTime, ..SfsOptions::EXACT },
            _ => SfsOptions { heuristic: Some(Heuristic::default()), affinity_bias: 4, affinity_slack: None, ..SfsOptions::EXACT },
        };
        let mut h = Host::new(cpus, 10 * MS, opts);
        // Affinity may prefer a client other than the least start tag on one
        // CPU; the heuristic may not (its start-tag queue holds the α = 0 client).
        h.sfq_check = opts.affinity_bias == 1;
        h.run(&ops).map_err(TestCaseError::fail)?;
        // The paper's re-sorted surplus queue is exact too.
        if which == 4 {
            prop_assert_eq!(h.inexact, 0);
        }
    }

    /// The kinetic weight-class queue and the paper's re-sorted surplus
    /// queue decide identically: exactly (with and without affinity), and
    /// for the heuristic, which reads the first k of Qα in its order at the
    /// last re-sort from either structure.
    #[test]
    fn kinetic_classes_decide_as_the_resorted_queue(cpus in 1usize..=6, which in 0u8..4, ops in proptest::collection::vec(op(), 1..300)) {
        let opts = match which {
            0 => SfsOptions { heuristic: Some(Heuristic { per_queue: 2, resort_every: 7 }), ..SfsOptions::EXACT },
            1 => SfsOptions { heuristic: Some(Heuristic::default()), affinity_bias: 4, affinity_slack: Some(10 * MS), ..SfsOptions::EXACT },
            2 => SfsOptions { affinity_bias: 3, affinity_slack: None, tie: Tie::ClientId, ..SfsOptions::EXACT },
            _ => SfsOptions { heuristic: Some(Heuristic { per_queue: 3, resort_every: 1 }), ..SfsOptions::EXACT },
        };
        let mut kinetic = Host::new(cpus, 10 * MS, opts);
        let mut resorted = Host::new(cpus, 10 * MS, SfsOptions { surplus_order: SurplusOrder::ResortOnVirtualTime, ..opts });
        kinetic.sfq_check = false;
        resorted.sfq_check = false;
        kinetic.run(&ops).map_err(TestCaseError::fail)?;
        resorted.run(&ops).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&kinetic.trace, &resorted.trace);
        prop_assert_eq!(kinetic.inexact, resorted.inexact);
    }
}

/// Without the heuristic and with B = 1 the scan and the queue agree even
/// when readjustment changes φ so that the surplus order flips: weights
/// 10, 1, 1 on 2 CPUs, where the heavy client's φ goes 1 → 2 → 1 as clients
/// come and go.
#[test]
fn readjustment_reorders_the_surplus_queue() {
    let mut h = Host::new(2, 10 * MS, SfsOptions::EXACT);
    let mut ops = vec![Op::Join(10), Op::Join(1)];
    for round in 0..40 {
        ops.push(Op::Tick);
        ops.push(Op::Tick);
        match round % 10 {
            3 => ops.push(Op::Join(1)),
            6 => ops.push(Op::Block(0)),
            8 => ops.push(Op::Wake(0)),
            9 => ops.push(Op::SetWeight(1, 5)),
            _ => {}
        }
    }
    h.run(&ops).unwrap();
    assert_eq!(h.inexact, 0);
    assert!(h.picks > 70);
}

// ---------------------------------------------------------------------------
// SFS and SFQ on one CPU.

/// S1 against the registered SFQ, if the build has it: identical decisions
/// on one CPU for random event sequences that never leave the CPU without a
/// runnable client. (When nothing is runnable the two papers freeze v
/// differently; see `one_cpu_idle_virtual_time_differs_from_sfq`.)
#[test]
fn one_cpu_sfs_decides_as_sfq() {
    if registry::find("sfq").is_err() {
        eprintln!("SKIPPED: scheduler \"sfq\" is not registered in this build; the direct check is one_cpu_picks_least_start_tag");
        return;
    }
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    let mut picks = 0;
    for _ in 0..50 {
        let cfg = SchedConfig::new(1, 10 * MS);
        let mut a = registry::build("sfs", cfg).unwrap();
        let mut b = registry::build("sfq", cfg).unwrap();
        let mut now = 0;
        let mut ids = 0u32;
        let mut blocked: Vec<ClientId> = Vec::new();
        let mut waiting: Vec<ClientId> = Vec::new();
        for _ in 0..400 {
            match next() % 10 {
                0 | 1 => {
                    let c = ClientId(ids);
                    ids += 1;
                    let x = w(1 + next() % 20);
                    assert_eq!(a.join(now, c, x).unwrap(), b.join(now, c, x).unwrap());
                    waiting.push(c);
                }
                2 if waiting.len() > 1 => {
                    let c = waiting.remove((next() % waiting.len() as u64) as usize);
                    a.block(now, c).unwrap();
                    b.block(now, c).unwrap();
                    blocked.push(c);
                }
                3 if !blocked.is_empty() => {
                    let c = blocked.remove((next() % blocked.len() as u64) as usize);
                    a.wake(now, c).unwrap();
                    b.wake(now, c).unwrap();
                    waiting.push(c);
                }
                4 if !waiting.is_empty() => {
                    let c = waiting[(next() % waiting.len() as u64) as usize];
                    let x = w(1 + next() % 20);
                    a.set_weight(now, c, x).unwrap();
                    b.set_weight(now, c, x).unwrap();
                }
                _ => {
                    let da = a.pick(now, CpuId(0)).unwrap();
                    assert_eq!(da, b.pick(now, CpuId(0)).unwrap(), "SFS and SFQ differ on one CPU");
                    if let Decision::Run { client, slice } = da {
                        picks += 1;
                        let ran = 1 + next() % slice;
                        now += ran;
                        let block = waiting.len() > 1 && next().is_multiple_of(5);
                        let why = if block { StopReason::Blocked } else { StopReason::Expired };
                        a.stopped(now, CpuId(0), client, ran, why).unwrap();
                        b.stopped(now, CpuId(0), client, ran, why).unwrap();
                        waiting.retain(|&x| x != client);
                        if block {
                            blocked.push(client);
                        } else {
                            waiting.push(client);
                        }
                    }
                }
            }
        }
    }
    assert!(picks > 5000, "{picks}");
}

/// Where SFS and SFQ part on one CPU: when nothing is runnable, SFS (section
/// 2.3) freezes v at the finish tag of the client that ran last; SFQ (its
/// end-of-busy-period rule) at the largest finish tag served. Here B (w 1)
/// ran once (F = 10 ms), then waits and blocks; A (w 20) runs and blocks
/// with F = 1 ms; C joins: SFS starts it at 1 ms and runs it before B
/// (woken at F = 10 ms); SFQ starts C at 10 ms and runs B first (lower id).
#[test]
fn one_cpu_idle_virtual_time_differs_from_sfq() {
    let Ok(entry) = registry::find("sfq") else {
        eprintln!("SKIPPED: scheduler \"sfq\" is not registered in this build");
        return;
    };
    let q = 10 * MS;
    let mut picked = Vec::new();
    for mut s in [
        registry::build("sfs", SchedConfig::new(1, q)).unwrap(),
        (entry.build)(SchedConfig::new(1, q), &registry::resolve(entry, &[]).unwrap()),
    ] {
        s.join(0, ClientId(0), w(20)).unwrap();
        s.join(0, ClientId(1), w(1)).unwrap();
        assert!(matches!(s.pick(0, CpuId(0)).unwrap(), Decision::Run { client: ClientId(0), .. }));
        s.stopped(q, CpuId(0), ClientId(0), q, StopReason::Expired).unwrap(); // S_A = 0.5 ms
        assert!(matches!(s.pick(q, CpuId(0)).unwrap(), Decision::Run { client: ClientId(1), .. }));
        s.stopped(2 * q, CpuId(0), ClientId(1), q, StopReason::Expired).unwrap(); // S_B = 10 ms
        s.block(2 * q, ClientId(1)).unwrap();
        assert!(matches!(s.pick(2 * q, CpuId(0)).unwrap(), Decision::Run { client: ClientId(0), .. }));
        s.stopped(3 * q, CpuId(0), ClientId(0), q, StopReason::Blocked).unwrap(); // F_A = 1 ms; idle
        s.join(3 * q, ClientId(2), w(1)).unwrap();
        s.wake(3 * q, ClientId(1)).unwrap();
        let Decision::Run { client, .. } = s.pick(3 * q, CpuId(0)).unwrap() else { panic!() };
        picked.push(client);
    }
    assert_eq!(picked, vec![ClientId(2), ClientId(1)], "SFS, then SFQ");
}

/// S1 directly (section 2.3): on one CPU every pick is the waiting client with
/// the least start tag, ties to the least id, which is SFQ's rule. (The
/// random-churn property above checks the same on every pick; this is a
/// fixed trace that also shows the alternation.)
#[test]
fn one_cpu_picks_least_start_tag() {
    let mut h = Host::new(1, 10 * MS, SfsOptions::EXACT);
    h.run(&[Op::Join(3), Op::Join(1), Op::Join(2)]).unwrap();
    for _ in 0..60 {
        h.run(&[Op::Tick]).unwrap();
    }
    // Over 60 full quanta shares are 3:1:2 exactly: 30, 10, 20 (+ the one running).
    let mut count = [0u32; 3];
    for &(_, c) in &h.trace {
        count[c.index()] += 1;
    }
    assert_eq!(count.iter().sum::<u32>(), 61);
    assert!(
        (30..=31).contains(&count[0]) && (10..=11).contains(&count[1]) && (20..=21).contains(&count[2]),
        "{count:?}"
    );
    // The first picks: all at S = 0, so by id; then by start tag.
    let first: Vec<u32> = h.trace.iter().take(6).map(|&(_, c)| c.0).collect();
    assert_eq!(first, vec![0, 1, 2, 0, 2, 0]);
}

// ---------------------------------------------------------------------------
// Readjustment through SFS (notes R1–R7).

fn sfs_phis(cpus: usize, weights: &[u64]) -> (Sfs, Vec<(u64, u64)>) {
    let mut s = Sfs::new(SchedConfig::new(cpus, 10 * MS));
    for (i, &x) in weights.iter().enumerate() {
        s.join(0, ClientId(i as u32), w(x)).unwrap();
    }
    let phis = (0..weights.len()).map(|i| phi_ratio(s.phi(ClientId(i as u32)).unwrap())).collect();
    (s, phis)
}

#[test]
fn readjustment_cases() {
    // R1: 10, 1 on 2 CPUs → 1, 1.
    assert_eq!(sfs_phis(2, &[10, 1]).1, vec![(1, 1), (1, 1)]);
    // R2: 10, 1, 1 → 2, 1, 1.
    assert_eq!(sfs_phis(2, &[10, 1, 1]).1, vec![(2, 1), (1, 1), (1, 1)]);
    // R4: 100, 50, 1, 1, 1, 1 on 4 → 2, 2, 1, 1, 1, 1.
    assert_eq!(sfs_phis(4, &[100, 50, 1, 1, 1, 1]).1, vec![(2, 1), (2, 1), (1, 1), (1, 1), (1, 1), (1, 1)]);
    // R6: fewer clients than CPUs: no zero weight, both run at once.
    let (mut s, phis) = sfs_phis(4, &[5, 1]);
    assert!(phis.iter().all(|&(n, _)| n > 0), "{phis:?}");
    let a = s.pick(0, CpuId(0)).unwrap();
    let b = s.pick(0, CpuId(1)).unwrap();
    assert!(matches!((a, b), (Decision::Run { .. }, Decision::Run { .. })));
    s.check_invariants().unwrap();
    // R3 / R7: 2, 1, 1 is feasible; when a weight-1 client blocks, 2, 1
    // becomes 1, 1; when it wakes, 2, 1, 1 again. With a running client too.
    let (mut s, phis) = sfs_phis(2, &[2, 1, 1]);
    assert_eq!(phis, vec![(2, 1), (1, 1), (1, 1)]);
    let Decision::Run { client: running, .. } = s.pick(0, CpuId(0)).unwrap() else { panic!() };
    assert_eq!(running, ClientId(0));
    s.block(0, ClientId(2)).unwrap();
    assert_eq!(phi_ratio(s.phi(ClientId(0)).unwrap()), (1, 1));
    s.check_invariants().unwrap();
    s.wake(0, ClientId(2)).unwrap();
    assert_eq!(phi_ratio(s.phi(ClientId(0)).unwrap()), (2, 1));
    s.check_invariants().unwrap();
    // The capped running client is charged at its φ at the end of the
    // quantum: block client 2 again, then stop client 0 after 10 ms: F − S = 10 ms / 1.
    s.block(0, ClientId(2)).unwrap();
    let s0 = s.start_tag(ClientId(0)).unwrap();
    s.stopped(10 * MS, CpuId(0), ClientId(0), 10 * MS, StopReason::Expired).unwrap();
    assert_eq!(s.finish_tag(ClientId(0)).unwrap() - s0, tag(10 * MS));
    // A weight change re-runs readjustment: client 1 to weight 3 makes 2, 3 on
    // 2 CPUs → φ = 2, 2 (client 1 capped to the rest).
    s.set_weight(10 * MS, ClientId(1), w(3)).unwrap();
    assert_eq!(phi_ratio(s.phi(ClientId(1)).unwrap()), (2, 1));
    assert_eq!(phi_ratio(s.phi(ClientId(0)).unwrap()), (2, 1));
    s.check_invariants().unwrap();
}

// ---------------------------------------------------------------------------
// Tag rules (notes S6, S7, S9, S10).

/// S7: a client of φ = 2 that blocks after 30 ms gets F − S = 15 ms of tag;
/// on waking, S = max(F, v).
#[test]
fn finish_tag_from_actual_run_and_wake_rule() {
    let mut s = Sfs::new(SchedConfig::new(1, 200 * MS));
    s.join(0, ClientId(0), w(2)).unwrap();
    s.join(0, ClientId(1), w(1)).unwrap();
    let Decision::Run { client, .. } = s.pick(0, CpuId(0)).unwrap() else { panic!() };
    assert_eq!(client, ClientId(0));
    s.stopped(30 * MS, CpuId(0), client, 30 * MS, StopReason::Blocked).unwrap();
    assert_eq!(s.finish_tag(client).unwrap(), tag(15 * MS));
    // v is client 1's start tag, 0: waking now gives S = max(F, v) = F.
    s.wake(30 * MS, client).unwrap();
    assert_eq!(s.start_tag(client).unwrap(), tag(15 * MS));
    s.check_invariants().unwrap();
}

/// S6: no credit for sleeping. Two CPU-bound clients run while a third
/// sleeps 10 s; on waking it starts at v (not at its old, low finish tag) and
/// then gets a third of the CPU, with no catch-up burst.
#[test]
fn sleeper_gets_no_credit() {
    let q = 10 * MS;
    let mut h = Host::new(1, q, SfsOptions::EXACT);
    h.run(&[Op::Join(1), Op::Join(1), Op::Join(1)]).unwrap();
    // Client 2 sleeps before it first runs.
    h.run(&[Op::Tick, Op::Tick, Op::Block(2)]).unwrap();
    while h.now < 10_000 * MS {
        h.run(&[Op::Tick]).unwrap();
    }
    let v = h.s.virtual_time();
    h.run(&[Op::Wake(0)]).unwrap(); // the only blocked client is 2
    assert_eq!(h.s.start_tag(ClientId(2)).unwrap(), v.max(h.s.finish_tag(ClientId(2)).unwrap()));
    assert!(v > tag(4_000 * MS));
    let from = h.trace.len();
    for _ in 0..300 {
        h.run(&[Op::Tick]).unwrap();
    }
    let runs = h.trace[from..].iter().filter(|&&(_, c)| c == ClientId(2)).count();
    assert!((99..=101).contains(&runs), "{runs} of 300");
    // No burst: never more than 2 consecutive quanta.
    let longest = h.trace[from..].chunk_by(|a, b| a.1 == b.1).map(|r| r.len()).max().unwrap();
    assert!(longest <= 2, "{longest}");
}

/// S10: when every client blocks, v stays at the finish tag of the last to
/// run, and a new arrival starts there.
#[test]
fn idle_virtual_time_is_last_finish() {
    let mut s = Sfs::new(SchedConfig::new(2, 10 * MS));
    s.join(0, ClientId(0), w(1)).unwrap();
    s.join(0, ClientId(1), w(4)).unwrap();
    let _ = s.pick(0, CpuId(0)).unwrap();
    let _ = s.pick(0, CpuId(1)).unwrap();
    // Readjusted: 4, 1 on 2 CPUs → 1, 1. Client 1 stops first after 4 ms, client 0 after 6 ms.
    s.stopped(4 * MS, CpuId(1), ClientId(1), 4 * MS, StopReason::Blocked).unwrap();
    s.stopped(6 * MS, CpuId(0), ClientId(0), 6 * MS, StopReason::Blocked).unwrap();
    assert_eq!(s.virtual_time(), tag(6 * MS));
    s.join(7 * MS, ClientId(2), w(3)).unwrap();
    assert_eq!(s.start_tag(ClientId(2)).unwrap(), tag(6 * MS));
    // Client 1 (F = 4 ms at φ = 1) wakes at max(F, v) = v.
    s.wake(7 * MS, ClientId(1)).unwrap();
    assert_eq!(s.start_tag(ClientId(1)).unwrap(), tag(6 * MS));
    s.check_invariants().unwrap();
    // If the last to stop blocked long before the others left, v does not go back.
    let mut s = Sfs::new(SchedConfig::new(1, 10 * MS));
    s.join(0, ClientId(0), w(1)).unwrap();
    s.join(0, ClientId(1), w(1)).unwrap();
    let _ = s.pick(0, CpuId(0)).unwrap();
    s.stopped(10 * MS, CpuId(0), ClientId(0), 10 * MS, StopReason::Expired).unwrap();
    let _ = s.pick(10 * MS, CpuId(0)).unwrap(); // client 1
    s.stopped(30 * MS, CpuId(0), ClientId(1), 20 * MS, StopReason::Blocked).unwrap();
    // v = S of client 0 = 10 ms; client 1 blocked with F = 20 ms... now client 0 blocks unrun.
    assert_eq!(s.virtual_time(), tag(10 * MS));
    s.block(30 * MS, ClientId(0)).unwrap();
    assert_eq!(s.virtual_time(), tag(20 * MS));
    s.check_invariants().unwrap();
}

/// S9: a weight change of a running client re-runs readjustment at once
/// (the other clients' φ change now), and the client's own new φ is used in
/// its finish tag at the end of the quantum.
#[test]
fn weight_change_of_running_client() {
    let mut s = Sfs::new(SchedConfig::new(2, 10 * MS));
    for i in 0..3 {
        s.join(0, ClientId(i), w(1)).unwrap();
    }
    let Decision::Run { client, .. } = s.pick(0, CpuId(0)).unwrap() else { panic!() };
    assert_eq!(client, ClientId(0));
    // 9, 1, 1 on 2 CPUs: client 0 capped at 2.
    s.set_weight(1, client, w(9)).unwrap();
    assert_eq!(phi_ratio(s.phi(client).unwrap()), (2, 1));
    s.set_weight(2, ClientId(1), w(3)).unwrap();
    // 9, 3, 1: capped at 4; the waiting client 1 keeps 3.
    assert_eq!(phi_ratio(s.phi(client).unwrap()), (4, 1));
    assert_eq!(phi_ratio(s.phi(ClientId(1)).unwrap()), (3, 1));
    s.check_invariants().unwrap();
    s.stopped(8 * MS, CpuId(0), client, 8 * MS, StopReason::Expired).unwrap();
    assert_eq!(s.finish_tag(client).unwrap(), tag(2 * MS));
}

// ---------------------------------------------------------------------------
// The section 4.2 experiment (notes S2): p = 2, Q = 200 ms, T1 (w 1) and
// T2 (w 10) from 0 s, T3 (w 1) from 15 s, T2 leaves at 30 s, run to 40 s.

/// Quanta of each of T1, T2, T3 in [0,15), [15,30), [30,40), and each
/// client's longest wait (in quanta) while runnable after 15 s.
struct E1 {
    quanta: [[u32; 3]; 3],
    longest_wait_t1: u32,
    trace: Vec<[Option<u32>; 2]>,
}

/// Both CPUs' quanta are in step. At each 200 ms boundary the scenario's
/// arrivals come first, then each CPU in turn stops its client (T2 leaves
/// at its 30 s quantum end) and picks at once, as each Linux CPU runs the
/// scheduler on its own.
fn run_e1(s: &mut dyn Scheduler) -> E1 {
    let q = 200 * MS;
    let mut e = E1 { quanta: [[0; 3]; 3], longest_wait_t1: 0, trace: Vec::new() };
    let mut on: [Option<ClientId>; 2] = [None, None];
    s.join(0, ClientId(0), w(1)).unwrap();
    s.join(0, ClientId(1), w(10)).unwrap();
    let mut wait_t1 = 0;
    for step in 0..200u64 {
        let now = step * q;
        if now == 15_000 * MS {
            s.join(now, ClientId(2), w(1)).unwrap();
        }
        for (k, slot) in on.iter_mut().enumerate() {
            let cpu = CpuId(k as u32);
            if let Some(c) = slot.take() {
                let why = if c == ClientId(1) && now == 30_000 * MS { StopReason::Left } else { StopReason::Expired };
                s.stopped(now, cpu, c, q, why).unwrap();
            }
            if now < 40_000 * MS {
                if let Decision::Run { client, .. } = s.pick(now, cpu).unwrap() {
                    *slot = Some(client);
                }
            }
        }
        if now >= 40_000 * MS {
            break;
        }
        e.trace.push([on[0].map(|c| c.0), on[1].map(|c| c.0)]);
        let interval = if now < 15_000 * MS {
            0
        } else if now < 30_000 * MS {
            1
        } else {
            2
        };
        for c in on.iter().flatten() {
            e.quanta[interval][c.index()] += 1;
        }
        if now >= 15_000 * MS {
            if on.contains(&Some(ClientId(0))) {
                wait_t1 = 0;
            } else {
                wait_t1 += 1;
                e.longest_wait_t1 = e.longest_wait_t1.max(wait_t1);
            }
        }
    }
    e
}

/// SFS step by step: 1:1, then 1:2:1, then 1:1.
#[test]
fn section_4_2_sfs_step_by_step() {
    let mut s = Sfs::new(SchedConfig::new(2, 200 * MS));
    let e = run_e1(&mut s);
    // 0–15 s: φ = 1, 1 (readjusted from 1, 10): each owns a CPU.
    assert!(e.trace[..75].iter().all(|t| *t == [Some(0), Some(1)]));
    assert_eq!(e.quanta[0], [75, 75, 0]);
    // 15–30 s: 1, 10, 1 readjusts to φ = 1, 2, 1. Hand-computed in tag
    // units of one quantum at weight 1 (S1 = S2 = 75 at 15 s, T3 joins at
    // v = 75): CPU 0 stops T1 (S1 = 76), picks T3 (α 0 vs 1); CPU 1 stops
    // T2, charged at its φ = 2 at the end of the quantum (S2 = 75.5), α1 =
    // α2 = 1, the tie goes to the smaller start tag, T2. From then on T2
    // keeps CPU 1 and T3, T1 alternate on CPU 0.
    let expect: Vec<[Option<u32>; 2]> = (0..75).map(|i| [Some(if i % 2 == 0 { 2 } else { 0 }), Some(1)]).collect();
    assert_eq!(e.trace[75..150], expect[..]);
    assert_eq!(e.quanta[1], [37, 75, 38]);
    // 30–40 s: T2 gone; 1, 1.
    assert_eq!(e.quanta[2], [50, 0, 50]);
    assert!(e.longest_wait_t1 <= 1);
}

/// Readjustment is what fixes the scenario: SFS with readjustment switched
/// off starves T1 after T3 arrives, as SFQ does (T3 enters at v = S2 = 7.5
/// quanta while S1 = 75, so T1 waits until T3 catches up: about 67 quanta
/// = 13.5 s).
#[test]
fn section_4_2_without_readjustment_starves() {
    let mut s = Sfs::with_options(SchedConfig::new(2, 200 * MS), SfsOptions { readjust: false, ..SfsOptions::EXACT });
    let e = run_e1(&mut s);
    eprintln!("no readjustment: T1 waited {} quanta; quanta per interval {:?}", e.longest_wait_t1, e.quanta);
    assert!((66..=69).contains(&e.longest_wait_t1), "T1 waited {} quanta", e.longest_wait_t1);
    assert!(e.quanta[1][0] <= 10, "T1 ran {:?}", e.quanta[1]);
}

/// The same scenario for the registered SFQ and SFQ with readjustment, when
/// the build has them: plain SFQ starves T1 for about 13.5 s; with
/// readjustment the shares are 1:1, 1:2:1, 1:1.
#[test]
fn section_4_2_sfq_if_registered() {
    for name in ["sfq", "sfq+readjust"] {
        let Ok(entry) = registry::find(name) else {
            eprintln!("SKIPPED: scheduler {name:?} is not registered in this build");
            continue;
        };
        let mut s = (entry.build)(SchedConfig::new(2, 200 * MS), &registry::resolve(entry, &[]).unwrap());
        let e = run_e1(&mut s);
        if name == "sfq" {
            assert!((60..=70).contains(&e.longest_wait_t1), "{name}: T1 waited {} quanta", e.longest_wait_t1);
        } else {
            assert_eq!(e.quanta[0], [75, 75, 0], "{name}");
            let [a, b, c] = e.quanta[1];
            assert!(
                (36..=39).contains(&a) && (74..=76).contains(&b) && (36..=39).contains(&c),
                "{name}: {:?}",
                e.quanta
            );
            assert_eq!(e.quanta[2], [50, 0, 50], "{name}");
        }
    }
}

/// Notes S3 (the section 4.4 setting in simulation): on 2 CPUs, 20
/// CPU-bound weight-1 clients plus two clients of weights 1 and k (k = 1,
/// 2, 4, 7): every client's service stays within a few quanta of its fluid
/// share `2 · t · w / (21 + k)` (so the pair's ratio tends to k). SFS has no
/// proven bound; the largest gaps measured are 0, 1, 2, 3 quanta (printed), and
/// the test asserts 4.
#[test]
fn static_proportional_shares() {
    for k in [1u64, 2, 4, 7] {
        let mut h = Host::new(2, 10 * MS, SfsOptions::EXACT);
        let mut ops: Vec<Op> = (0..20).map(|_| Op::Join(1)).collect();
        ops.push(Op::Join(1));
        ops.push(Op::Join(k));
        h.run(&ops).unwrap();
        // Service in completed quanta against the fluid share of all the
        // quanta completed so far, `done · w / W`; the largest gap over the run.
        let w_of = |i: usize| if i == 21 { k as i64 } else { 1 };
        let mut done = [0i64; 22];
        let mut worst = 0i64;
        let total_w = 21 + k as i64;
        for tick in 1..=2 * 200 * total_w {
            // Each tick completes one quantum.
            h.run(&[Op::Tick]).unwrap();
            for (c, &n) in &h.served {
                done[c.index()] = n as i64;
            }
            if tick % total_w == 0 {
                // Whole quanta elapsed: `tick` completed; fluid share = tick · w / W.
                for (i, &d) in done.iter().enumerate() {
                    worst = worst.max((d * total_w - tick * w_of(i)).abs());
                }
            }
        }
        // In quanta: |received − fluid| ≤ worst / W.
        let worst_quanta = worst as f64 / total_w as f64;
        eprintln!("k = {k}: largest |service − fluid share| at whole periods = {worst_quanta:.2} quanta");
        assert!(worst <= 4 * total_w, "k = {k}: a client strayed {worst_quanta} quanta from its share");
        for (i, &d) in done.iter().enumerate() {
            let want = 2 * 200 * w_of(i);
            assert!((d - want).abs() <= 4, "k = {k}: client {i} ran {d} quanta, fluid share {want}");
        }
    }
}

// ---------------------------------------------------------------------------
// Heuristic (section 3.2, notes H1) and affinity (section 2.4, notes H2).

/// A deterministic workload for `cpus` CPUs and `n` clients of weights
/// uniform in 1..=100: quanta of random length (a fifth cut short), 1% of
/// stops block, a blocked client wakes with probability 1/2 at each stop.
/// Returns (picks, inexact picks) after a warm-up of 2n picks.
fn heuristic_exactness(cpus: usize, n: u32, opts: SfsOptions, picks: u64) -> (u64, u64) {
    let (h, warm) = heuristic_workload(cpus, n, opts, picks);
    (h.picks - warm, h.inexact)
}

/// The workload of [`heuristic_exactness`]; returns the host (its `trace`
/// holds every pick) and the warm-up length.
fn heuristic_workload(cpus: usize, n: u32, opts: SfsOptions, picks: u64) -> (Host, u64) {
    let q = 10 * MS;
    let mut h = Host::new(cpus, q, opts);
    let mut next = xorshift(0x2545_f491_4f6c_dd1du64 ^ n as u64);
    for i in 0..n {
        h.s.join(0, ClientId(i), w(1 + next() % 100)).unwrap();
        h.clients.insert(ClientId(i), St::Waiting);
    }
    let mut blocked: Vec<ClientId> = Vec::new();
    let fill = |h: &mut Host| {
        for k in 0..h.cpus {
            if h.running[k].is_none() {
                let best = h.s.min_surplus_scan();
                if let Decision::Run { client, slice } = h.s.pick(h.now, CpuId(k as u32)).unwrap() {
                    let (_, least) = best.unwrap();
                    h.picks += 1;
                    if h.s.surplus(client).unwrap() != least {
                        h.inexact += 1;
                    }
                    h.running[k] = Some((client, h.now, h.now + slice));
                    h.trace.push((k, client));
                }
            }
        }
    };
    fill(&mut h);
    let warm = 2 * n as u64;
    while h.picks < warm + picks {
        if h.picks == warm {
            h.inexact = 0;
        }
        let k = (0..cpus).filter(|&k| h.running[k].is_some()).min_by_key(|&k| h.running[k].unwrap().2).unwrap();
        let (c, start, end) = h.running[k].take().unwrap();
        let ran = if next().is_multiple_of(5) { 1 + next() % q } else { end - start };
        h.now = h.now.max(start + ran);
        let why = if next().is_multiple_of(100) { StopReason::Blocked } else { StopReason::Expired };
        h.s.stopped(h.now, CpuId(k as u32), c, ran, why).unwrap();
        if why == StopReason::Blocked {
            blocked.push(c);
        }
        if !blocked.is_empty() && next().is_multiple_of(2) {
            let c = blocked.swap_remove((next() % blocked.len() as u64) as usize);
            h.s.wake(h.now, c).unwrap();
        }
        fill(&mut h);
    }
    (h, warm)
}

/// The heuristic on the kinetic weight classes (read at the v of the last
/// re-sort, the 2k least cached) makes exactly the picks of the paper's
/// re-sorted surplus queue on the H1 workload (and as many inexact ones).
#[test]
fn heuristic_on_weight_classes_decides_as_on_the_resorted_queue() {
    let heur = SfsOptions { heuristic: Some(Heuristic::default()), ..SfsOptions::EXACT };
    for (cpus, n) in [(4, 1000), (8, 3000)] {
        let (kinetic, _) = heuristic_workload(cpus, n, heur, 20_000);
        let resorted_opts = SfsOptions { surplus_order: SurplusOrder::ResortOnVirtualTime, ..heur };
        let (resorted, _) = heuristic_workload(cpus, n, resorted_opts, 20_000);
        assert!(kinetic.trace.len() > 20_000);
        assert_eq!(kinetic.inexact, resorted.inexact);
        assert!(kinetic.trace == resorted.trace, "P = {cpus}, N = {n}: the picks differ");
    }
}

/// H1: on 4 CPUs, k = 20 per queue picks the exact least surplus in more than
/// 99% of decisions for 100, 1000 and 5000 runnable clients (the paper's
/// Fig. 3 claim). k = 1 is measurably worse, so the measurement can fail.
/// Rates are printed (run with --nocapture).
#[test]
fn heuristic_exactness_rate() {
    let heur = |k| SfsOptions { heuristic: Some(Heuristic { per_queue: k, resort_every: 50 }), ..SfsOptions::EXACT };
    for n in [100, 1000, 5000] {
        let (picks, bad) = heuristic_exactness(4, n, heur(20), 20_000);
        let rate = 100.0 * (picks - bad) as f64 / picks as f64;
        eprintln!("heuristic k=20, P=4, N={n}: {rate:.2}% exact over {picks} picks");
        assert!(bad * 100 < picks, "k=20, N={n}: {bad} of {picks} picks inexact");
    }
    let (picks, bad) = heuristic_exactness(4, 1000, heur(1), 20_000);
    eprintln!("heuristic k=1, P=4, N=1000: {:.2}% exact", 100.0 * (picks - bad) as f64 / picks as f64);
    assert!(bad * 100 >= picks, "k=1 should miss more than 1% ({bad} of {picks})");
    // The exact mode is exact on the same workload.
    assert_eq!(heuristic_exactness(4, 1000, SfsOptions::EXACT, 5_000).1, 0);
}

/// The measurement behind H1 as a table (k × N on 4 CPUs, re-sort every 50
/// picks). Slow-ish; run with
/// `cargo test -p propshare --test sfs heuristic_exactness_table -- --ignored --nocapture`.
#[test]
#[ignore]
fn heuristic_exactness_table() {
    eprintln!("exact picks (%) of sfs+heuristic, P = 4, weights uniform 1..=100, 20000 picks after 2N warm-up");
    eprintln!("{:>6} {:>8} {:>8} {:>8}", "k", "N=100", "N=1000", "N=5000");
    for k in [1, 2, 5, 10, 20] {
        let opts = SfsOptions { heuristic: Some(Heuristic { per_queue: k, resort_every: 50 }), ..SfsOptions::EXACT };
        let rates: Vec<String> = [100, 1000, 5000]
            .iter()
            .map(|&n| {
                let (picks, bad) = heuristic_exactness(4, n, opts, 20_000);
                format!("{:>8.2}", 100.0 * (picks - bad) as f64 / picks as f64)
            })
            .collect();
        eprintln!("{k:>6} {}", rates.join(" "));
    }
}

/// H2: B = 1 is pure SFS (identical trace); with B = 4 the bounded rule
/// (`sfs+affinity`) picks a client that ran on this CPU more often, and each
/// pick stays within one quantum of surplus of the least.
#[test]
fn affinity_bias() {
    let ops: Vec<Op> = {
        let mut v: Vec<Op> = (1..=6).map(Op::Join).collect();
        for i in 0..600usize {
            v.push(if i % 7 == 3 { Op::Stop(i, (i as u64 % 9 + 1) * MS, 1) } else { Op::Tick });
        }
        v
    };
    let run = |opts: SfsOptions| {
        let mut h = Host::new(2, 10 * MS, opts);
        h.run(&ops).unwrap();
        h
    };
    let pure = run(SfsOptions::EXACT);
    let b1 = run(SfsOptions { affinity_bias: 1, affinity_slack: None, ..SfsOptions::EXACT });
    assert_eq!(pure.trace, b1.trace);
    let aff = Sfs::with_affinity(SchedConfig::new(2, 10 * MS)).options();
    assert_eq!((aff.affinity_bias, aff.affinity_slack), (4, Some(10 * MS)));
    let mut h = Host::new(2, 10 * MS, aff);
    // Check every pick: within one quantum of surplus of the least.
    for &op in &ops {
        h.apply(op).unwrap();
        for k in 0..2 {
            if h.running[k].is_some() {
                continue;
            }
            let Some((_, least)) = h.s.min_surplus_scan() else { continue };
            let before = h.trace.len();
            h.poll().unwrap();
            if let Some(&(_, c)) = h.trace.get(before) {
                assert!(h.s.surplus(c).unwrap().within(&least, 10 * MS));
            }
        }
    }
    eprintln!(
        "same-CPU picks: pure SFS {} of {}, sfs+affinity {} of {}",
        pure.same_cpu, pure.picks, h.same_cpu, h.picks
    );
    assert!(h.same_cpu > pure.same_cpu + pure.picks / 10, "{} vs {}", h.same_cpu, pure.same_cpu);
}

/// The paper's literal affinity rule ("among the B least surpluses pick one
/// that last ran here", no bound) starves: on one CPU with two clients both
/// are always among the B = 4 least, and the one that ran last is always
/// preferred. This is why `sfs+affinity` bounds the preference.
#[test]
fn literal_affinity_rule_starves() {
    // Two clients of weight 1 on one CPU, 100 quanta: how often each ran.
    let runs = |mut s: Sfs| {
        s.join(0, ClientId(0), w(1)).unwrap();
        s.join(0, ClientId(1), w(1)).unwrap();
        let (mut now, mut runs) = (0, [0u32; 2]);
        for _ in 0..100 {
            let Decision::Run { client, slice } = s.pick(now, CpuId(0)).unwrap() else { panic!() };
            now += slice;
            s.stopped(now, CpuId(0), client, slice, StopReason::Expired).unwrap();
            runs[client.index()] += 1;
        }
        runs
    };
    let literal = SfsOptions { affinity_bias: 4, affinity_slack: None, ..SfsOptions::EXACT };
    assert_eq!(runs(Sfs::with_options(SchedConfig::new(1, 10 * MS), literal)), [100, 0]);
    // The bounded rule alternates within one quantum of surplus.
    let bounded = runs(Sfs::with_affinity(SchedConfig::new(1, 10 * MS)));
    assert!(bounded[0].abs_diff(bounded[1]) <= 2, "{bounded:?}");
}

/// Surplus arithmetic sanity through the public type.
#[test]
fn surplus_type() {
    let a = Surplus { phi: Phi { num: 3, den: 2 }, lag: tag(10 * MS) };
    assert_eq!(a.ns_floor(), 15 * MS as u128);
    let b = Surplus { phi: Phi::whole(1), lag: tag(5 * MS) };
    assert!(b < a && a.within(&b, 10 * MS) && !a.within(&b, 10 * MS - 1));
}

/// The sweep-only preemption option: an arrival kicks the CPU whose running
/// client has the greatest surplus, and only if the newcomer's is smaller;
/// exact SFS never kicks.
#[test]
fn preempt_option_kicks_the_largest_surplus() {
    for preempt in [false, true] {
        let mut s = Sfs::with_options(SchedConfig::new(2, 10 * MS), SfsOptions { preempt, ..SfsOptions::EXACT });
        for i in 0..3 {
            s.join(0, ClientId(i), w(1)).unwrap();
        }
        // Run 0 and 1, then 2 for a while so that v moves: stop 0 and 1 after
        // 10 ms and 4 ms, run 0 again on CPU 0 and 2 on CPU 1.
        let _ = s.pick(0, CpuId(0)).unwrap();
        let _ = s.pick(0, CpuId(1)).unwrap();
        s.stopped(4 * MS, CpuId(1), ClientId(1), 4 * MS, StopReason::Expired).unwrap();
        let _ = s.pick(4 * MS, CpuId(1)).unwrap(); // client 2 (S = 0)
        s.stopped(10 * MS, CpuId(0), ClientId(0), 10 * MS, StopReason::Expired).unwrap();
        let _ = s.pick(10 * MS, CpuId(0)).unwrap(); // client 1 (S = 4 ms)
                                                    // Running: CPU 0 client 1 (S = 4 ms), CPU 1 client 2 (S = 0 = v).
                                                    // A newcomer enters at v with α = 0 < α(client 1) = 4 ms: kick CPU 0.
        let kick = s.join(10 * MS, ClientId(3), w(1)).unwrap();
        assert_eq!(kick, if preempt { Some(CpuId(0)) } else { None });
        s.check_invariants().unwrap();
    }
    // Nobody to preempt for if every running client is at v.
    let mut s = Sfs::with_options(SchedConfig::new(1, 10 * MS), SfsOptions { preempt: true, ..SfsOptions::EXACT });
    s.join(0, ClientId(0), w(1)).unwrap();
    let _ = s.pick(0, CpuId(0)).unwrap();
    assert_eq!(s.join(1, ClientId(1), w(1)).unwrap(), None);
}

/// Cost of a decision (the `stopped` that ends a quantum plus the `pick`
/// that follows), in ns, against N and P, exact and heuristic; CPU-bound
/// clients of weights uniform in 1..=100, quanta cut short at random so that
/// CPUs drift apart. A measurement, not a check (no timed assertions); run
/// `cargo test -p propshare --test sfs decision_cost_table -- --ignored --nocapture`
/// (on a shared, loaded machine the figures are only indicative).
#[test]
#[ignore]
fn decision_cost_table() {
    use std::time::Instant;
    const DECISIONS: u64 = 20_000;
    eprintln!("ns per decision (stopped + pick), mean over {DECISIONS} decisions after N warm-up");
    eprintln!("{:<15} {:>4} {:>8} {:>8} {:>8} {:>8}", "scheduler", "P", "N=10", "N=100", "N=1000", "N=10000");
    for name in ["sfs", "sfs+heuristic", "sfs+affinity"] {
        for p in [2usize, 4, 16] {
            let mut row = format!("{name:<15} {p:>4}");
            for n in [10u32, 100, 1000, 10_000] {
                let q = 10 * MS;
                let mut s = registry::build(name, SchedConfig::new(p, q)).unwrap();
                let mut next = xorshift(0x853c_49e6_748f_ea9bu64 ^ n as u64);
                for i in 0..n {
                    s.join(0, ClientId(i), w(1 + next() % 100)).unwrap();
                }
                let mut running: Vec<(ClientId, Time)> = Vec::new();
                for k in 0..p {
                    if let Decision::Run { client, .. } = s.pick(0, CpuId(k as u32)).unwrap() {
                        running.push((client, 0));
                    }
                }
                let total = n as u64 + DECISIONS;
                let mut now = 0;
                let mut elapsed = std::time::Duration::ZERO;
                for d in 0..total {
                    let k = (d % running.len() as u64) as usize;
                    let ran = q / 2 + next() % (q / 2);
                    now += ran / p as u64;
                    let t = Instant::now();
                    s.stopped(now, CpuId(k as u32), running[k].0, ran, StopReason::Expired).unwrap();
                    let Decision::Run { client, .. } = s.pick(now, CpuId(k as u32)).unwrap() else { panic!() };
                    if d >= n as u64 {
                        elapsed += t.elapsed();
                    }
                    running[k] = (client, now);
                }
                row += &format!(" {:>8}", elapsed.as_nanos() / DECISIONS as u128);
            }
            eprintln!("{row}");
        }
    }
}
