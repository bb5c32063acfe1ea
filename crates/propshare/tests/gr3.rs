//! GR3 and GR3MP (Caprita et al., USENIX ATC 2005) against the paper: its
//! worked schedules (Figures 1-3), its error bounds (Theorems 1 and 2) on
//! random static weight sets, the multiprocessor corner cases, weight
//! readjustment through the groups against the shared module, and the
//! join/leave rescale rule (notes pitfall P1) against the `+fairjoin` fix.
//!
//! Every error below is exact: e_C = w_C - W_T·φ_C/Φ_T is compared after
//! multiplying through by Φ_T (and P), in i128.

use propshare::algo::gr3::{Charge, Gr3Queue, RescaleRule};
use propshare::algo::gr3mp::Gr3Mp;
use propshare::readjust::readjust_weights;
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Weight, MS};
use proptest::prelude::*;

const Q: u64 = 10 * MS;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn gr3(p: usize, rule: RescaleRule) -> Gr3Mp {
    let name = if rule == RescaleRule::Paper { "gr3mp" } else { "gr3mp+fairjoin" };
    Gr3Mp::new(SchedConfig::new(p, Q), name, rule, Charge::Quantum)
}

/// A host that runs whole quanta on P CPUs: at each quantum boundary CPU 0
/// stops and picks, then CPU 1, and so on (the order of the paper's
/// Figure 3), so every client's service is a whole number of quanta.
struct Host {
    s: Gr3Mp,
    now: u64,
    on: Vec<Option<ClientId>>,
    served: Vec<u64>,
    total: u64,
}

impl Host {
    fn new(s: Gr3Mp, p: usize) -> Host {
        Host { s, now: 0, on: vec![None; p], served: Vec::new(), total: 0 }
    }

    fn join(&mut self, c: u32, weight: u64) {
        self.s.join(self.now, ClientId(c), w(weight)).unwrap();
        if self.served.len() <= c as usize {
            self.served.resize(c as usize + 1, 0);
        }
    }

    /// Stop CPU k's client (if any) after a full quantum, then pick for k.
    fn turn(&mut self, k: usize) -> Option<ClientId> {
        if let Some(c) = self.on[k].take() {
            self.s.stopped(self.now, CpuId(k as u32), c, Q, StopReason::Expired).unwrap();
            self.served[c.index()] += 1;
            self.total += 1;
        }
        self.on[k] = match self.s.pick(self.now, CpuId(k as u32)).unwrap() {
            Decision::Run { client, slice } => {
                assert_eq!(slice, Q);
                Some(client)
            }
            Decision::Idle => None,
        };
        self.on[k]
    }

    /// One quantum boundary on every CPU; returns what each CPU now runs.
    fn slot(&mut self) -> Vec<Option<ClientId>> {
        self.now += Q;
        (0..self.on.len()).map(|k| self.turn(k)).collect()
    }

    /// The service error of every queued client, times Φ_T·den (the
    /// weights' numerators are over the queue's common denominator).
    /// Returns (e_C·Φ_T, φ_C, Φ_T), all as numerators.
    fn errors(&self) -> Vec<(ClientId, i128, i128, i128)> {
        let q = self.s.queue();
        let total = q.total_num() as i128;
        (0..self.served.len() as u32)
            .filter_map(|c| {
                let phi = q.weight_num(ClientId(c))? as i128;
                let e = self.served[c as usize] as i128 * total - self.total as i128 * phi;
                Some((ClientId(c), e, phi, total))
            })
            .collect()
    }
}

fn ids(v: &[Option<ClientId>]) -> Vec<u32> {
    v.iter().map(|c| c.map_or(0, |c| c.0)).collect()
}

// ----- the paper's worked schedules -----------------------------------------

/// Figure 1 through the Scheduler trait: weights 5, 2, 1 on one CPU.
#[test]
fn figure_1_schedule() {
    let mut h = Host::new(gr3(1, RescaleRule::Paper), 1);
    for (c, x) in [(1, 5), (2, 2), (3, 1)] {
        h.join(c, x);
    }
    let seq: Vec<u32> = (0..16).flat_map(|_| ids(&h.slot())).collect();
    assert_eq!(seq, [1, 1, 2, 1, 1, 1, 2, 3].repeat(2));
    // Each group gets exactly its weight per period of 8.
    h.slot();
    assert_eq!(&h.served[1..], &[10, 4, 2]);
}

/// Figure 2 through the Scheduler trait: weights 12, 3, 3, 2, 2, 2.
#[test]
fn figure_2_schedule() {
    let mut s = registry::build("gr3", SchedConfig::new(1, Q)).unwrap();
    for (c, x) in [12, 3, 3, 2, 2, 2].into_iter().enumerate() {
        s.join(0, ClientId(c as u32 + 1), w(x)).unwrap();
    }
    let mut seq = Vec::new();
    for t in 0..24 {
        let Decision::Run { client, .. } = s.pick(t * Q, CpuId(0)).unwrap() else { panic!("idle") };
        s.stopped((t + 1) * Q, CpuId(0), client, Q, StopReason::Expired).unwrap();
        seq.push(client.0);
    }
    #[rustfmt::skip]
    let expect = [2, 1, 3, 1, 4, 1, 5, 1, 6, 1, 2, 1, 2, 1, 3, 1, 3, 1, 4, 1, 5, 1, 6, 1];
    assert_eq!(seq, expect);
}

/// Figure 3: P = 2, C1 = 3, C2 = 2, C3 = 1, C2 before C1 in their group.
/// Slots (C2, C1), (C2, C1), (C3, C1 from its frontlog), repeating; in the
/// third slot F_C1 becomes 1 (CPU 0's pick meets C1 running on CPU 1) and
/// then 0 (CPU 1 serves it).
#[test]
fn figure_3_frontlog_schedule() {
    let mut h = Host::new(gr3(2, RescaleRule::Paper), 2);
    for (c, x) in [(2, 2), (1, 3), (3, 1)] {
        h.join(c, x);
    }
    assert_eq!(ids(&h.slot()), [2, 1]);
    assert_eq!(ids(&h.slot()), [2, 1]);
    h.now += Q;
    assert_eq!(h.turn(0), Some(ClientId(3)));
    assert_eq!(h.s.frontlog(ClientId(1)), (1, Some(CpuId(1))));
    assert_eq!(h.turn(1), Some(ClientId(1)));
    assert_eq!(h.s.frontlog(ClientId(1)), (0, None));
    for _ in 0..5 {
        assert_eq!(ids(&h.slot()), [2, 1]);
        assert_eq!(ids(&h.slot()), [2, 1]);
        assert_eq!(ids(&h.slot()), [3, 1]);
    }
    // 18 slots of (C2, C1), (C2, C1), (C3, C1); the last is still running.
    assert_eq!(&h.served[1..], &[17, 12, 5]);
    assert_eq!(h.s.stats().frontlog_runs, 6);
}

// ----- Theorem 1 (GR3) -------------------------------------------------------

fn groups_of(weights: &[u64]) -> i128 {
    let mut orders: Vec<u32> = weights.iter().map(|&x| x.ilog2()).collect();
    orders.sort_unstable();
    orders.dedup();
    orders.len() as i128
}

/// Run `quanta` quanta on one CPU and check Theorem 1 at every boundary:
/// -((g-1)(g-2)/2)·φ_C/Φ_T - 4 < e_C < g + 3. Returns the extreme errors
/// (as fractions e·Φ_T / Φ_T, for reporting).
fn theorem_1(weights: &[u64], quanta: usize, rule: RescaleRule) -> Result<(f64, f64), String> {
    let mut h = Host::new(gr3(1, rule), 1);
    for (c, &x) in weights.iter().enumerate() {
        h.join(c as u32, x);
    }
    let g = groups_of(weights);
    let (mut lo, mut hi) = (0f64, 0f64);
    h.slot();
    for t in 0..quanta {
        h.slot();
        for (c, e, phi, total) in h.errors() {
            let lower = -(g - 1) * (g - 2) / 2 * phi - 4 * total;
            let upper = (g + 3) * total;
            if !(lower < e && e < upper) {
                return Err(format!("t={t} {c} e·Φ_T={e} outside ({lower}, {upper}), Φ_T={total}, g={g}"));
            }
            lo = lo.min(e as f64 / total as f64);
            hi = hi.max(e as f64 / total as f64);
        }
    }
    Ok((lo, hi))
}

fn weight_set() -> impl Strategy<Value = Vec<u64>> {
    let one = prop_oneof![
        3 => 1u64..=16,
        3 => 1u64..=1000,
        2 => 1u64..=(1 << 20),
        1 => (1u64 << 31)..=Weight::MAX,
    ];
    proptest::collection::vec(one, 1..48)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Theorem 1 on random static weight sets, for both rescale rules (on a
    /// static set the rules differ only in the joins that build it).
    #[test]
    fn theorem_1_bound_on_random_static_sets(weights in weight_set(), fair in any::<bool>()) {
        let rule = if fair { RescaleRule::Predecessor } else { RescaleRule::Paper };
        theorem_1(&weights, 3000, rule).map_err(TestCaseError::fail)?;
    }
}

/// Theorem 1 on the paper's workload shape (one client holding 10% or 50%
/// of the total weight, the rest random), over 2Φ_T quanta.
#[test]
fn theorem_1_bound_on_skewed_sets() {
    let mut rng = SplitMix(0x6733);
    for &(n, total, big) in &[(32u64, 16384u64, 10u64), (64, 16384, 50), (256, 16384, 10), (128, 8192, 50)] {
        for _ in 0..3 {
            let weights = skewed(&mut rng, n, total, big);
            let sum: u64 = weights.iter().sum();
            let (lo, hi) = theorem_1(&weights, 2 * sum as usize, RescaleRule::Paper).unwrap();
            assert!(lo > -4.0 && hi < 6.0, "N={n} Φ={total} {big}%: [{lo:.2}, {hi:.2}]");
        }
    }
}

/// Weights up to 2^32 - 1 (orders 0 to 31, g up to 32): no overflow, and
/// Theorem 1 holds.
#[test]
fn huge_weights() {
    let max = Weight::MAX;
    let sets: [&[u64]; 4] = [
        &[max, max - 1, 1 << 31, 1],
        &[1 << 31, (1 << 31) + 1, 3, 1, 1, 1 << 20],
        &[max, 1],
        &[1, 2, 4, 8, 16, 1 << 10, 1 << 15, 1 << 20, 1 << 25, 1 << 30, 1 << 31],
    ];
    for weights in sets {
        theorem_1(weights, 5000, RescaleRule::Paper).unwrap();
    }
    // And on 3 CPUs with readjustment: two maximal weights, three light ones.
    let mut h = Host::new(gr3(3, RescaleRule::Paper), 3);
    for (c, x) in [max, max, 1, 1, 1].into_iter().enumerate() {
        h.join(c as u32, x);
    }
    for _ in 0..300 {
        h.slot();
    }
    // The two heavy clients are capped at one CPU each; the light three share one.
    assert_eq!(&h.served, &[299, 299, 100, 100, 99]);
}

// ----- Theorem 2 (GR3MP) -----------------------------------------------------

/// Run `slots` slots on `p` CPUs and check Theorem 2 at every slot boundary:
/// -((g-1)(g-2)/2)·φ_C/Φ_T - 4 < e_C < 2g + 10 + (g-1)/P, with φ the
/// readjusted weights and g the number of groups they form. Returns the
/// extreme errors and the most GR3 picks one decision needed.
fn theorem_2(weights: &[u64], p: usize, slots: usize) -> Result<(f64, f64, u64), String> {
    let mut h = Host::new(gr3(p, RescaleRule::Paper), p);
    for (c, &x) in weights.iter().enumerate() {
        h.join(c as u32, x);
    }
    let g = h.s.queue().groups() as i128;
    let pp = p as i128;
    let (mut lo, mut hi) = (0f64, 0f64);
    h.slot();
    for t in 0..slots {
        let on = h.slot();
        if weights.len() >= p && on.iter().any(Option::is_none) {
            return Err(format!("slot {t}: a CPU idles with {} clients", weights.len()));
        }
        for (c, e, phi, total) in h.errors() {
            let lower = -(g - 1) * (g - 2) / 2 * phi - 4 * total;
            // e·P·Φ < (2g + 10)·P·Φ + (g - 1)·Φ
            let upper = (2 * g + 10) * pp * total + (g - 1) * total;
            if !(lower < e && e * pp < upper) {
                return Err(format!("slot {t} {c}: e·Φ_T={e} Φ_T={total} φ={phi} g={g} P={p}"));
            }
            lo = lo.min(e as f64 / total as f64);
            hi = hi.max(e as f64 / total as f64);
        }
    }
    Ok((lo, hi, h.s.stats().max_picks))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// Theorem 2 on random static sets (readjusted where infeasible), and
    /// Theorem 3's O(g²P) bound on the GR3 picks of one decision.
    #[test]
    fn theorem_2_bound_on_random_static_sets(weights in weight_set(), p in 2usize..=8) {
        let (_, _, picks) = theorem_2(&weights, p, 1500).map_err(TestCaseError::fail)?;
        let g = 32u64;
        prop_assert!(picks <= g * g * p as u64, "{picks} picks");
    }
}

/// The paper's GR3MP workload shape (P = 8, one client at 10%): error range
/// and picks per decision (the paper: -2.5 to +2.8, at most 7 picks).
#[test]
fn gr3mp_on_skewed_sets() {
    let mut rng = SplitMix(0x6733_0008);
    let mut worst = (0f64, 0f64, 0u64);
    for &(n, total) in &[(32u64, 16384u64), (64, 16384), (256, 32768)] {
        for _ in 0..2 {
            let weights = skewed(&mut rng, n, total, 10);
            let (lo, hi, picks) = theorem_2(&weights, 8, 2 * total as usize / 8).unwrap();
            worst = (worst.0.min(lo), worst.1.max(hi), worst.2.max(picks));
        }
    }
    println!("GR3MP P=8 10%: error [{:.2}, {:.2}], max picks {}", worst.0, worst.1, worst.2);
    assert!(worst.0 > -4.0 && worst.1 < 6.0 && worst.2 <= 16, "{worst:?}");
}

/// Fewer clients than CPUs: each client gets a CPU every quantum, the
/// other CPUs idle, nothing loops; then more clients arrive and all run.
#[test]
fn fewer_clients_than_cpus() {
    let mut h = Host::new(gr3(4, RescaleRule::Paper), 4);
    for (c, x) in [(0, 5), (1, 1), (2, 1)] {
        h.join(c, x);
    }
    for _ in 0..50 {
        let on = h.slot();
        assert_eq!(on.iter().filter(|c| c.is_some()).count(), 3, "{on:?}");
    }
    assert_eq!(&h.served, &[49, 49, 49]);
    // With N ≤ P every readjusted weight is the same.
    let q = h.s.queue();
    assert_eq!(q.weight_num(ClientId(0)), q.weight_num(ClientId(1)));
    h.join(3, 2);
    h.join(4, 7);
    let before = h.served.clone();
    for _ in 0..100 {
        let on = h.slot();
        assert!(on.iter().all(Option::is_some), "{on:?}");
    }
    let got: Vec<u64> = h.served.iter().zip(before.iter().chain([&0, &0])).map(|(a, b)| a - b).collect();
    assert!(got.iter().all(|&x| x > 0), "{got:?}");
    // 3 quanta end in the first of the 100 slots, then 4 in each of the other 99.
    assert_eq!(got.iter().sum::<u64>(), 3 + 99 * 4);
}

/// Blocking and waking on P CPUs: a client that blocks loses its frontlog
/// and is never picked while blocked; when it wakes it runs again; a
/// client that blocks every quantum does not get more than its share.
#[test]
fn blocking_and_waking() {
    for (p, rule) in [1usize, 2, 3].into_iter().flat_map(|p| [(p, RescaleRule::Paper), (p, RescaleRule::Predecessor)]) {
        let mut s = gr3(p, rule);
        let weights = [4u64, 4, 2, 2, 1, 1, 1];
        for (c, &x) in weights.iter().enumerate() {
            s.join(0, ClientId(c as u32), w(x)).unwrap();
        }
        let mut on: Vec<Option<ClientId>> = vec![None; p];
        let mut served = [0u64; 7];
        let mut now = 0;
        let mut asleep: Option<(ClientId, u64)> = None;
        for t in 0..6000u64 {
            now += Q;
            for (k, slot) in on.iter_mut().enumerate() {
                let cpu = CpuId(k as u32);
                if let Some(c) = slot.take() {
                    served[c.index()] += 1;
                    // Client 0 blocks after every quantum it runs, for 3 quanta.
                    if c == ClientId(0) {
                        s.stopped(now, cpu, c, Q / 2, StopReason::Blocked).unwrap();
                        assert_eq!(s.frontlog(c), (0, None));
                        asleep = Some((c, t + 3));
                    } else {
                        s.stopped(now, cpu, c, Q, StopReason::Expired).unwrap();
                    }
                }
                if let Some((c, until)) = asleep {
                    if t >= until {
                        s.wake(now, c).unwrap();
                        asleep = None;
                    }
                }
                if let Decision::Run { client, .. } = s.pick(now, cpu).unwrap() {
                    assert!(!matches!(asleep, Some((c, _)) if c == client), "blocked {client} picked");
                    *slot = Some(client);
                }
            }
        }
        eprintln!("P={p} {rule:?}: {served:?}");
        // Client 0 could at best run one quantum in four.
        let total: u64 = served.iter().sum();
        assert!(served[0] <= 6000 / 4 + 1, "P={p}: {served:?}");
        // Its share is 4/15 of the total; blocking must not raise it.
        assert!(served[0] * 15 <= 4 * total + 15, "P={p}: {served:?}");
        // The clients outside client 0's group share what they got roughly by
        // weight, and client 1 (client 0's group mate, which loses some of
        // its share: the group is charged for client 0's short runs, and every
        // re-insertion moves and rescales the group) still gets more than a
        // client of half its weight.
        let rest: u64 = served[2..].iter().sum();
        for (i, &x) in weights.iter().enumerate().skip(2) {
            let ideal = rest as f64 * x as f64 / 7.0;
            assert!((served[i] as f64 - ideal).abs() < 0.15 * ideal, "P={p}: {served:?}");
        }
        assert!(served[1] >= served[2], "P={p}: {served:?}");
    }
}

// ----- readjustment through the groups --------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// The paper's O(P) readjustment through the groups gives exactly the
    /// weights of the shared `readjust` module, after every insertion and
    /// removal, and keeps the queue consistent.
    #[test]
    fn readjustment_agrees_with_shared_module(
        weights in proptest::collection::vec(prop_oneof![1u64..=8, 1u64..=1000, 1u64..=Weight::MAX], 1..40),
        p in 1usize..=16,
        removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut q = Gr3Queue::new(p, RescaleRule::Paper);
        let mut live: Vec<(u32, u64)> = Vec::new();
        let check = |q: &Gr3Queue, live: &[(u32, u64)]| -> Result<(), TestCaseError> {
            q.check_invariants().map_err(TestCaseError::fail)?;
            let ws: Vec<u64> = live.iter().map(|&(_, x)| x).collect();
            for (&(c, _), e) in live.iter().zip(readjust_weights(&ws, p)) {
                let num = q.weight_num(ClientId(c)).unwrap();
                prop_assert_eq!(num * e.den as u128, e.num as u128 * q.den() as u128, "{:?} on {}", ws, p);
            }
            Ok(())
        };
        for (c, &x) in weights.iter().enumerate() {
            q.insert(ClientId(c as u32), w(x));
            live.push((c as u32, x));
            check(&q, &live)?;
            q.pick();
        }
        for ix in removals {
            if live.is_empty() {
                break;
            }
            let (c, _) = live.remove(ix.index(live.len()));
            prop_assert!(q.remove(ClientId(c)));
            check(&q, &live)?;
            q.pick();
        }
    }
}

// ----- the join/leave rescale (notes P1) -------------------------------------

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The paper's generator, loosely specified: one client with `big`% of
/// `total`, the others uniform random, scaled to the rest, at least 1.
fn skewed(rng: &mut SplitMix, n: u64, total: u64, big: u64) -> Vec<u64> {
    let first = total * big / 100;
    let raw: Vec<u64> = (1..n).map(|_| 1 + rng.below(1000)).collect();
    let sum: u64 = raw.iter().sum();
    let mut v = vec![first];
    v.extend(raw.iter().map(|&r| ((r * (total - first)) / sum).max(1)));
    v
}

/// Random joins and leaves on `p` CPUs; after each change, the service
/// error of every client over the interval since the change, against the
/// new weights. Returns the extremes in quanta.
fn churn(rule: RescaleRule, p: usize, max_weight: u64, trials: u64, seed: u64) -> (f64, f64) {
    let mut rng = SplitMix(seed);
    let (mut lo, mut hi) = (0f64, 0f64);
    for _ in 0..trials {
        let mut h = Host::new(gr3(p, rule), p);
        let mut next_id = 0u32;
        let mut live: Vec<u32> = Vec::new();
        let n0 = 2 + rng.below(30);
        for _ in 0..n0 {
            h.join(next_id, 1 + rng.below(max_weight));
            live.push(next_id);
            next_id += 1;
        }
        for _ in 0..20 {
            // Measure from this change to the next.
            let start: Vec<u64> = h.served.clone();
            let t0 = h.total;
            let gap = rng.below(300);
            for _ in 0..gap {
                h.slot();
                let q = h.s.queue();
                let total = q.total_num() as f64;
                for &c in &live {
                    let c = ClientId(c);
                    let Some(phi) = q.weight_num(c) else { continue };
                    let got = (h.served[c.index()] - start.get(c.index()).copied().unwrap_or(0)) as f64;
                    let e = got - (h.total - t0) as f64 * phi as f64 / total;
                    lo = lo.min(e);
                    hi = hi.max(e);
                }
            }
            // The next change: a join or the leave of a client not running.
            if live.len() > p + 1 && rng.below(2) == 0 {
                let running: Vec<ClientId> = h.on.iter().flatten().copied().collect();
                let cands: Vec<usize> = (0..live.len()).filter(|&i| !running.contains(&ClientId(live[i]))).collect();
                let i = cands[rng.below(cands.len() as u64) as usize];
                let c = live.remove(i);
                h.s.leave(h.now, ClientId(c)).unwrap();
            } else {
                h.join(next_id, 1 + rng.below(max_weight));
                live.push(next_id);
                next_id += 1;
            }
        }
    }
    (lo, hi)
}

/// Notes pitfall P1: under random joins and leaves the paper's rescale can
/// leave a moved group tens to hundreds of quanta behind; tying the work to
/// the heavier neighbour (`+fairjoin`) keeps the error within a few quanta.
#[test]
fn fairjoin_fixes_starvation_after_churn() {
    for (p, max_weight) in [(1usize, 5000u64), (1, 40), (4, 5000)] {
        let paper = churn(RescaleRule::Paper, p, max_weight, 100, 0x5eed + p as u64);
        let fair = churn(RescaleRule::Predecessor, p, max_weight, 100, 0x5eed + p as u64);
        println!(
            "P={p} weights 1..{max_weight}: paper [{:.1}, {:.1}], fairjoin [{:.1}, {:.1}]",
            paper.0, paper.1, fair.0, fair.1
        );
        assert!(fair.0 > -6.0 && fair.1 < 6.0, "fairjoin {fair:?}");
        if max_weight > 1000 {
            assert!(paper.0 < -15.0, "paper rule {paper:?}");
        }
    }
}

/// Two heavy clients on two CPUs, the second arriving with a frontlog while
/// light clients run: each heavy client gets about one CPU, and no decision
/// needs many GR3 picks (a client waiting in another CPU's frontlog queue is
/// taken over, not counted as busy there).
#[test]
fn heavy_arrival_with_frontlog() {
    let mut h = Host::new(gr3(2, RescaleRule::Paper), 2);
    for c in 0..3 {
        h.join(c, 1);
    }
    h.join(3, 10_000_000);
    for _ in 0..50 {
        h.slot();
    }
    h.join(4, 10_000_000);
    let before = h.served.clone();
    for _ in 0..2000 {
        h.slot();
    }
    let got: Vec<u64> = h.served.iter().zip(before.iter().chain([&0])).map(|(a, b)| a - b).collect();
    println!("heavy arrival: {got:?}, stats {:?}", h.s.stats());
    assert!(got[3] >= 1990 && got[4] >= 1990, "{got:?}");
    assert!(h.s.stats().max_picks <= 64, "{:?}", h.s.stats());
}
