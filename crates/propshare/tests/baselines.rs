//! The known bound or characteristic behaviour of each global-queue
//! baseline, on one CPU with a static set of continuously runnable clients
//! (all join at t = 0 and run full quanta), against the fluid reference
//! `ideal_i(t) = t·w_i/W`.
//!
//! Lag is `ideal - received` in ns; every comparison is made exactly in
//! integers on `W·lag = t·w_i - W·received_i`. For the tag-based schedulers
//! the quantum is `Q = lcm(w)·W` ns so that every tag and the fluid virtual
//! time are exact (no floor), which the bounds' proofs assume; the schedule
//! itself does not depend on the scale of Q.

use propshare::algo::srr::SmoothedRoundRobin;
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, StopReason, Weight, MS};
use proptest::prelude::*;

/// Quantum boundaries of a one-CPU run: after each quantum, the time and the
/// service received so far per client (ns), and who ran.
struct Trace {
    quantum: u64,
    weights: Vec<u64>,
    /// (t, received, who ran in the quantum that just ended)
    points: Vec<(u64, Vec<u64>, u32)>,
}

impl Trace {
    fn total(&self) -> i128 {
        self.weights.iter().sum::<u64>() as i128
    }

    /// `W·lag_i(t)` exactly.
    fn lag_w(&self, t: u64, recv: &[u64], i: usize) -> i128 {
        t as i128 * self.weights[i] as i128 - self.total() * recv[i] as i128
    }

    /// Largest lag (behind) and largest lead (ahead) of client i, in units of ns·W.
    fn extremes(&self, i: usize) -> (i128, i128) {
        let mut behind = 0;
        let mut ahead = 0;
        for (t, recv, _) in &self.points {
            let l = self.lag_w(*t, recv, i);
            behind = behind.max(l);
            ahead = ahead.max(-l);
        }
        (behind, ahead)
    }

    /// Largest |lag| over all clients and times, in quanta (rounded down).
    fn max_abs_lag_quanta(&self) -> i128 {
        (0..self.weights.len())
            .map(|i| {
                let (b, a) = self.extremes(i);
                b.max(a)
            })
            .max()
            .unwrap_or(0)
            / (self.total() * self.quantum as i128)
    }

    fn sequence(&self) -> Vec<u32> {
        self.points.iter().map(|p| p.2).collect()
    }
}

fn run(name: &str, weights: &[u64], quantum: u64, quanta: usize, seed: u64) -> Trace {
    let mut s = registry::build(name, SchedConfig { cpus: 1, quantum, seed }).expect("registered");
    for (i, &w) in weights.iter().enumerate() {
        s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
    }
    let mut t = 0u64;
    let mut recv = vec![0u64; weights.len()];
    let mut points = Vec::with_capacity(quanta);
    for _ in 0..quanta {
        let Decision::Run { client, slice } = s.pick(t, CpuId(0)).unwrap() else { panic!("{name} idled") };
        assert_eq!(slice, quantum, "{name} gave a short slice");
        t += slice;
        s.stopped(t, CpuId(0), client, slice, StopReason::Expired).unwrap();
        recv[client.index()] += slice;
        points.push((t, recv.clone(), client.0));
    }
    Trace { quantum, weights: weights.to_vec(), points }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `lcm(w)·W`: every tag `k·Q/w_i` and the virtual time `t/W` at quantum boundaries are integers.
fn exact_quantum(weights: &[u64]) -> u64 {
    let lcm = weights.iter().fold(1, |l, &w| l / gcd(l, w) * w);
    lcm * weights.iter().sum::<u64>()
}

fn run_exact(name: &str, weights: &[u64], quanta: usize) -> Trace {
    run(name, weights, exact_quantum(weights), quanta, 0)
}

/// Small weights plus, often, one heavy client (skew, as in the GR3 paper's sets).
fn weight_set() -> impl Strategy<Value = Vec<u64>> {
    (proptest::collection::vec(1u64..=16, 1..=9), proptest::option::of(17u64..=400)).prop_map(|(mut w, heavy)| {
        if let Some(h) = heavy {
            w.insert(0, h);
        }
        if w.len() < 2 {
            w.push(1);
        }
        w
    })
}

fn quanta_for(weights: &[u64]) -> usize {
    (2 * weights.iter().sum::<u64>() as usize + 50).min(1500)
}

/// One heavy client of weight n and n clients of weight 1 (the WF2Q paper's example for n = 10).
fn skewed(n: u64) -> Vec<u64> {
    std::iter::once(n).chain(std::iter::repeat_n(1, n as usize)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// WF2Q (Bennett and Zhang, INFOCOM 1996, Theorems 1-2), kept by WF2Q+:
    /// never more than one quantum behind, and never more than `Q(1 - w/W)` ahead.
    #[test]
    fn wf2q_within_one_quantum_both_ways(weights in weight_set()) {
        for name in ["wf2q", "wf2q+readjust"] {
            let tr = run_exact(name, &weights, quanta_for(&weights));
            let (q, total) = (tr.quantum as i128, tr.total());
            for i in 0..weights.len() {
                let (behind, ahead) = tr.extremes(i);
                prop_assert!(behind <= q * total, "{name}: client {i} of {weights:?} fell {behind}/W ns behind");
                prop_assert!(ahead <= q * (total - weights[i] as i128), "{name}: client {i} of {weights:?} ran {ahead}/W ns ahead");
            }
        }
    }

    /// Parekh-Gallager for WFQ (and stride, which makes the same decisions on
    /// a static set): never more than one quantum behind.
    #[test]
    fn wfq_and_stride_never_more_than_one_quantum_behind(weights in weight_set()) {
        for name in ["wfq", "stride"] {
            let tr = run_exact(name, &weights, quanta_for(&weights));
            for i in 0..weights.len() {
                let (behind, _) = tr.extremes(i);
                prop_assert!(behind <= tr.quantum as i128 * tr.total(), "{name}: client {i} of {weights:?} fell {behind}/W ns behind");
            }
        }
    }

    /// SFQ (Goyal, Vin, Cheng 1996, Theorem 1): over any interval in which
    /// both are runnable, `|W_i/w_i - W_j/w_j| ≤ Q/w_i + Q/w_j`; and, from
    /// smallest-start-tag selection, never more than `Q(1 - w/W)` ahead.
    #[test]
    fn sfq_fairness_bound_and_never_more_than_one_quantum_ahead(weights in weight_set()) {
        for name in ["sfq", "sfq+readjust"] {
            let tr = run_exact(name, &weights, quanta_for(&weights));
            let (q, total) = (tr.quantum as i128, tr.total());
            for i in 0..weights.len() {
                let (_, ahead) = tr.extremes(i);
                prop_assert!(ahead <= q * (total - weights[i] as i128), "{name}: client {i} of {weights:?} ran {ahead}/W ns ahead");
                for j in i + 1..weights.len() {
                    let (wi, wj) = (weights[i] as i128, weights[j] as i128);
                    // d(t) = (recv_i/w_i - recv_j/w_j)·w_i·w_j; over [t1, t2] the
                    // difference of normalised services is d(t2) - d(t1).
                    let d = |recv: &[u64]| recv[i] as i128 * wj - recv[j] as i128 * wi;
                    let ds = std::iter::once(0).chain(tr.points.iter().map(|p| d(&p.1)));
                    let (lo, hi) = ds.fold((i128::MAX, i128::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
                    prop_assert!(hi - lo <= q * (wi + wj), "{name}: pair ({i}, {j}) of {weights:?} spread {}", hi - lo);
                }
            }
        }
    }

    /// Stride (Waldspurger and Weihl 1995, section 4): the relative error of
    /// any pair is below one quantum: `-w_j ≤ a_i·w_j - a_j·w_i ≤ w_i` quanta.
    #[test]
    fn stride_pairwise_error_below_one_quantum(weights in weight_set()) {
        for name in ["stride", "stride+readjust"] {
            let tr = run_exact(name, &weights, quanta_for(&weights));
            let q = tr.quantum as i128;
            for (_, recv, _) in &tr.points {
                for i in 0..weights.len() {
                    for j in 0..weights.len() {
                        let (wi, wj) = (weights[i] as i128, weights[j] as i128);
                        let e = recv[i] as i128 * wj - recv[j] as i128 * wi;
                        prop_assert!(-wj * q <= e && e <= wi * q, "{name}: pair ({i}, {j}) of {weights:?}: {e}");
                    }
                }
            }
        }
    }

    /// On a static set stride's pass is WFQ's finish tag: identical decisions.
    #[test]
    fn stride_decides_as_wfq_on_static_sets(weights in weight_set()) {
        let n = quanta_for(&weights);
        prop_assert_eq!(run_exact("stride", &weights, n).sequence(), run_exact("wfq", &weights, n).sequence());
    }

    /// WRR: every round of W quanta gives each client exactly w_i (lag 0 at
    /// round ends); within a round the error is at most `w_i(W - w_i)/W`
    /// quanta, and the first client of the round reaches it (ahead).
    #[test]
    fn wrr_error_is_a_step_of_its_weight(weights in weight_set(), q in 1..=20 * MS) {
        let total = weights.iter().sum::<u64>() as usize;
        let tr = run("wrr", &weights, q, 2 * total, 0);
        let qi = q as i128;
        for (t, recv, _) in &tr.points {
            for i in 0..weights.len() {
                let l = tr.lag_w(*t, recv, i);
                let w = weights[i] as i128;
                prop_assert!(l.abs() <= qi * w * (tr.total() - w), "client {i} of {weights:?}: {l}");
                if *t % (total as u64 * q) == 0 {
                    prop_assert_eq!(l, 0);
                }
            }
        }
        let w0 = weights[0] as i128;
        prop_assert_eq!(tr.extremes(0).1, qi * w0 * (tr.total() - w0));
    }

    /// VTRR and SRR: every cycle (VTRR) or pass of the weight spread sequence
    /// (SRR) lasts W quanta and gives each client exactly w_i: lag 0 there.
    #[test]
    fn vtrr_and_srr_exact_at_cycle_ends(weights in weight_set(), q in 1..=20 * MS) {
        let total = weights.iter().sum::<u64>();
        for name in ["vtrr", "srr"] {
            let tr = run(name, &weights, q, 3 * total as usize, 0);
            for (t, recv, _) in tr.points.iter().filter(|p| p.0 % (total * q) == 0) {
                for i in 0..weights.len() {
                    prop_assert_eq!(tr.lag_w(*t, recv, i), 0, "{} client {} of {:?} at {}", name, i, weights, t);
                }
            }
        }
    }
}

/// The WF2Q paper's example (Bennett and Zhang, INFOCOM 1996, section 3):
/// one session with half the link and ten with 1/20 each. WFQ sends the big
/// session's quanta back to back; WF2Q+ interleaves them.
#[test]
fn wf2q_paper_example_interleaves_where_wfq_bursts() {
    let weights = skewed(10);
    let wfq = run_exact("wfq", &weights, 20).sequence();
    assert_eq!(wfq, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let wf2q = run_exact("wf2q", &weights, 20).sequence();
    assert_eq!(wf2q, [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 10]);
}

/// The characteristic errors, to contrast in reports: with one client of
/// weight n and n of weight 1, WFQ runs the heavy client about n/2 quanta
/// ahead and SFQ lets it fall about n/2 behind (the mirror image), while
/// WF2Q+ stays within one quantum.
#[test]
fn wfq_ahead_and_sfq_behind_grow_with_n_but_not_wf2q() {
    for n in [4u64, 16, 64] {
        let weights = skewed(n);
        let quanta = 4 * n as usize;
        let unit = |tr: &Trace| tr.total() * tr.quantum as i128;
        let wfq = run_exact("wfq", &weights, quanta);
        let sfq = run_exact("sfq", &weights, quanta);
        let wf2q = run_exact("wf2q", &weights, quanta);
        let half = n as i128 / 2 - 1;
        assert!(wfq.extremes(0).1 >= half * unit(&wfq), "wfq heavy client ahead only {}", wfq.extremes(0).1);
        assert!(sfq.extremes(0).0 >= half * unit(&sfq), "sfq heavy client behind only {}", sfq.extremes(0).0);
        assert!(wf2q.max_abs_lag_quanta() < 1);
    }
}

/// Parekh-Gallager holds for WFQ on this set, and round robin (weights
/// ignored) breaks it: the heavy client falls ever further behind.
#[test]
fn wfq_pg_bound_and_rr_violates_it() {
    let weights = [10, 1, 1];
    let wfq = run_exact("wfq", &weights, 120);
    let rr = run_exact("rr", &weights, 120);
    let unit = wfq.total() * wfq.quantum as i128;
    assert!(wfq.extremes(0).0 <= unit);
    assert!(rr.extremes(0).0 > 10 * unit, "rr lag {}", rr.extremes(0).0 / unit);
}

/// WRR's error grows with the weight (`w(W - w)/W` = n/2 quanta for the
/// heavy client of `skewed(n)`); WF2Q+'s does not.
#[test]
fn wrr_error_grows_with_weight() {
    let errors: Vec<i128> = [2u64, 8, 32, 128]
        .iter()
        .map(|&n| run("wrr", &skewed(n), MS, 6 * n as usize, 0).max_abs_lag_quanta())
        .collect();
    assert_eq!(errors, [1, 4, 16, 64]);
    assert!(run_exact("wf2q", &skewed(128), 600).max_abs_lag_quanta() < 1);
}

/// SRR's and VTRR's errors on skewed sets exceed a quantum and grow with N
/// (GR3 paper: SRR O(kN); both far above WF2Q+).
#[test]
fn srr_and_vtrr_error_grows_with_n() {
    for name in ["srr", "vtrr"] {
        let errors: Vec<i128> = [4u64, 16, 64, 256]
            .iter()
            .map(|&n| {
                // One heavy client of weight n and n - 1 light ones of weight 1 and 2 alternately.
                let mut w = vec![n];
                w.extend((1..n).map(|i| 1 + i % 2));
                let total = w.iter().sum::<u64>() as usize;
                run(name, &w, MS, 2 * total, 0).max_abs_lag_quanta()
            })
            .collect();
        eprintln!("{name}: max |lag| in quanta for N = 4, 16, 64, 256: {errors:?}");
        assert!(errors.windows(2).all(|e| e[0] <= e[1]) && errors[3] > errors[0], "{name}: {errors:?}");
        assert!(errors[3] >= 2, "{name}: {errors:?}");
    }
}

/// The WSS of order 4 (Guo, section III): 1 2 1 3 1 2 1 4 1 2 1 3 1 2 1,
/// term j standing for column k - j.
#[test]
fn srr_weight_spread_sequence() {
    let k = 4;
    let terms: Vec<usize> = (1..16u64).map(|n| k - SmoothedRoundRobin::column_of_term(k as u32, n)).collect();
    assert_eq!(terms, [1, 2, 1, 3, 1, 2, 1, 4, 1, 2, 1, 3, 1, 2, 1]);
}

/// SRR serves client of weight 5 (binary 101) in columns 2 and 0: with a
/// weight-2 client (column 1), one pass of the WSS of order 3 is
/// col2 col1 col2 col0 col2 col1 col2.
#[test]
fn srr_worked_example() {
    let seq = run("srr", &[5, 2], MS, 7, 0).sequence();
    assert_eq!(seq, [0, 1, 0, 0, 0, 1, 0]);
}

/// Lottery: a client's wins after n draws are binomial(n, w/W); every
/// client's count is within 5 standard deviations of its mean, for many
/// seeds, at n = 20000 (seeded, so deterministic).
#[test]
fn lottery_share_converges() {
    for (k, weights) in [vec![1u64, 2, 3], vec![10, 1, 1, 1, 1], vec![7, 3], vec![1; 6]].iter().enumerate() {
        for seed in 0..8u64 {
            let n = 20_000u64;
            let tr = run("lottery", weights, MS, n as usize, seed * 31 + k as u64);
            let total = tr.total();
            let recv = &tr.points.last().unwrap().1;
            for (i, &w) in weights.iter().enumerate() {
                let wins = (recv[i] / MS) as i128;
                // (wins·W - n·w)² ≤ 25 · n·w·(W - w)   (5σ, in integers)
                let dev = wins * total - n as i128 * w as i128;
                let var = n as i128 * w as i128 * (total - w as i128);
                assert!(dev * dev <= 25 * var, "seed {seed}, {weights:?}: client {i} won {wins} of {n}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Lottery over random weight sets and seeds: after 10,000 draws every
    /// client's wins are within 6 standard deviations of `n·w/W` (a spurious
    /// failure has probability about 2·10^-9 per client).
    #[test]
    fn lottery_share_converges_on_random_sets(weights in proptest::collection::vec(1u64..=64, 2..=8), seed in any::<u64>()) {
        let n = 10_000u64;
        let tr = run("lottery", &weights, MS, n as usize, seed);
        let total = tr.total();
        let recv = &tr.points.last().unwrap().1;
        for (i, &w) in weights.iter().enumerate() {
            let dev = (recv[i] / MS) as i128 * total - n as i128 * w as i128;
            let var = n as i128 * w as i128 * (total - w as i128);
            prop_assert!(dev * dev <= 36 * var, "seed {seed}, {weights:?}: client {i} got {} of {n}", recv[i] / MS);
        }
    }
}

/// Lottery is a deterministic function of its seed, and its error is not
/// bounded by a quantum the way WF2Q+'s is.
#[test]
fn lottery_is_seeded_and_its_error_is_large() {
    let w = [1, 2, 3, 4];
    let a = run("lottery", &w, MS, 2000, 42).sequence();
    assert_eq!(a, run("lottery", &w, MS, 2000, 42).sequence());
    assert_ne!(a, run("lottery", &w, MS, 2000, 43).sequence());
    assert!(run("lottery", &w, MS, 2000, 42).max_abs_lag_quanta() >= 3);
}

/// Compensation tickets: a client that uses a fifth of each quantum still
/// gets its share of CPU time (within a few percent), not a fifth of it.
#[test]
fn lottery_compensation_restores_short_runners_share() {
    let q = 10 * MS;
    let mut s = registry::build("lottery", SchedConfig { cpus: 1, quantum: q, seed: 5 }).unwrap();
    s.join(0, ClientId(0), Weight::new(1).unwrap()).unwrap();
    s.join(0, ClientId(1), Weight::new(1).unwrap()).unwrap();
    let (mut t, mut time) = (0u64, [0u64; 2]);
    for _ in 0..20_000 {
        let Decision::Run { client, slice } = s.pick(t, CpuId(0)).unwrap() else { panic!() };
        let ran = if client == ClientId(0) { slice / 5 } else { slice };
        t += ran;
        s.stopped(t, CpuId(0), client, ran, StopReason::Preempted).unwrap();
        time[client.index()] += ran;
    }
    // Equal weights: equal CPU time, within 5%.
    let (a, b) = (time[0] as i128, time[1] as i128);
    assert!((a - b).abs() * 20 <= a + b, "{time:?}");
}

/// Lockstep driver for P CPUs: every CPU picks at t, runs a full quantum,
/// and all stop at t + Q. Returns the quanta each client received.
fn run_lockstep(s: &mut dyn propshare::Scheduler, cpus: usize, q: u64, from: u64, quanta: u64, recv: &mut [u64]) {
    for step in 0..quanta {
        let t = from + step * q;
        let mut ran = Vec::new();
        for k in 0..cpus {
            if let Decision::Run { client, .. } = s.pick(t, CpuId(k as u32)).unwrap() {
                ran.push((k, client));
            }
        }
        for (k, c) in ran {
            s.stopped(t + q, CpuId(k as u32), c, q, StopReason::Expired).unwrap();
            recv[c.index()] += 1;
        }
    }
}

/// The SFS paper's Example 1 (section 1.3, its experiment E1): on 2 CPUs,
/// T1 (weight 1) and T2 (weight 10) run alone, each on its own CPU, then T3
/// (weight 1) arrives. Tag-based schedulers with the plain, infeasible
/// weights let T1's tag run far ahead while it had a CPU to itself, so after
/// T3 arrives T1 starves; over readjusted weights (`+readjust`) T1 and T3
/// share the second CPU (fluid shares 1:2:1). WF2Q+ escapes here: its
/// virtual time is pulled up to the smallest queued start tag.
#[test]
fn infeasible_weights_starve_plain_tags_and_readjustment_fixes_it() {
    let q = 10 * MS;
    for base in ["wfq", "wf2q", "sfq", "stride"] {
        let mut got = Vec::new();
        for name in [base.to_string(), format!("{base}+readjust")] {
            let mut s = registry::build(&name, SchedConfig::new(2, q)).unwrap();
            s.join(0, ClientId(0), Weight::new(1).unwrap()).unwrap();
            s.join(0, ClientId(1), Weight::new(10).unwrap()).unwrap();
            let mut recv = [0u64; 3];
            run_lockstep(&mut *s, 2, q, 0, 100, &mut recv);
            assert_eq!(recv, [100, 100, 0], "{name}: each alone on its CPU");
            s.join(100 * q, ClientId(2), Weight::new(1).unwrap()).unwrap();
            let mut after = [0u64; 3];
            run_lockstep(&mut *s, 2, q, 100 * q, 80, &mut after);
            got.push((name, after));
        }
        let (plain, fixed) = (&got[0].1, &got[1].1);
        if base == "wf2q" {
            // WF2Q+'s V is pulled up to T1's start tag whenever T1 is the only
            // queued client (second CPU's pick), so T3 starts level with T1.
            assert_eq!(*plain, [40, 80, 40], "wf2q");
        } else {
            assert!(plain[0] <= 4, "{}: T1 got {plain:?} of 80 quanta after T3 arrived", got[0].0);
        }
        assert!(fixed[0] >= 36 && fixed[2] >= 36 && fixed[1] == 80, "{}: {fixed:?}", got[1].0);
    }
}

/// Why the VTRR rules (module doc of `algo/vtrr.rs`) chose a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VtrrWhy {
    /// Back to the head of the queue (the next client failed, had no counter, or there was none).
    Head,
    /// The next client's counter exceeded the current one's (time-counter invariant).
    Counter,
    /// The next client passed the VFT inequality `VFT − QVT(t+Q) < Q/S`.
    Vft,
    /// No counter left anywhere: counters reset to the shares, the head runs.
    NewCycle,
}

/// An independent model of the VTRR rules on one CPU with a static set in
/// queue order (shares non-increasing), in exact integers: virtual times are
/// scaled by `D = lcm(S)·S_T`, so `Q/S_T = D/S_T` and `Q/S_i = D/S_i`.
/// Returns, per quantum, who ran, why, and the counters after it.
fn vtrr_model(shares: &[u64], quanta: usize) -> Vec<(usize, VtrrWhy, Vec<u64>)> {
    assert!(shares.windows(2).all(|p| p[0] >= p[1]), "queue order");
    let d = exact_quantum(shares);
    let total = shares.iter().sum::<u64>();
    let mut counters = shares.to_vec();
    let mut runs = vec![0u64; shares.len()];
    let mut current: Option<usize> = None;
    let mut out = Vec::with_capacity(quanta);
    for t in 0..quanta as u64 {
        let next = current.map(|c| c + 1).filter(|&n| n < shares.len() && counters[n] > 0);
        let choice = next.and_then(|n| {
            let c = current.expect("next implies current");
            // VFT_n = (runs + 1)·Q/S_n; QVT(t + Q) = (t + 1)·Q/S_T.
            let vft = (runs[n] + 1) * (d / shares[n]);
            let qvt_next = (t + 1) * (d / total);
            if counters[n] > counters[c] {
                Some((n, VtrrWhy::Counter))
            } else if vft < qvt_next + d / shares[n] {
                Some((n, VtrrWhy::Vft))
            } else {
                None
            }
        });
        let (who, why) = choice.unwrap_or_else(|| {
            if counters[0] > 0 {
                (0, VtrrWhy::Head)
            } else {
                counters.copy_from_slice(shares);
                (0, VtrrWhy::NewCycle)
            }
        });
        counters[who] -= 1;
        runs[who] += 1;
        current = Some(who);
        out.push((who, why, counters.clone()));
    }
    out
}

/// VTRR worked by hand from the rules in `algo/vtrr.rs` (our example: the
/// VTRR paper's own figures could not be read, see its module doc). Shares
/// A = 3, B = 2, C = 1; virtual times in units of Q/36, so QVT steps 6 per
/// quantum and VFT steps A 12, B 18, C 36:
///
/// | # | runs | why | counters after | check |
/// |---|---|---|---|---|
/// | 1 | A | head | 2 2 1 | start of the cycle |
/// | 2 | B | VFT | 2 1 1 | counter 2 ≯ 2; VFT 18 − QVT 12 = 6 < 18 |
/// | 3 | C | VFT | 2 1 0 | counter 1 ≯ 1; 36 − 18 = 18 < 36 |
/// | 4 | A | head | 1 1 0 | end of the queue |
/// | 5 | B | VFT | 1 0 0 | 1 ≯ 1; 36 − 30 = 6 < 18 |
/// | 6 | A | head | 0 0 0 | C has no counter left |
/// | 7 | A | new cycle | 2 2 1 | no counter left anywhere |
///
/// and shares 2, 2, 1 show the counter rule: after A runs (counters 1 2 1)
/// B's counter is larger, so B runs without the VFT test.
#[test]
fn vtrr_worked_examples_step_by_step() {
    use VtrrWhy::*;
    let steps = vtrr_model(&[3, 2, 1], 7);
    let expected = [
        (0, Head, [2, 2, 1]),
        (1, Vft, [2, 1, 1]),
        (2, Vft, [2, 1, 0]),
        (0, Head, [1, 1, 0]),
        (1, Vft, [1, 0, 0]),
        (0, Head, [0, 0, 0]),
        (0, NewCycle, [2, 2, 1]),
    ];
    for (k, (step, want)) in steps.iter().zip(expected).enumerate() {
        assert_eq!((step.0, step.1, step.2.as_slice()), (want.0, want.1, want.2.as_slice()), "step {}", k + 1);
    }
    let seq = run_exact("vtrr", &[3, 2, 1], 12).sequence();
    assert_eq!(seq, [0, 1, 2, 0, 1, 0, 0, 1, 2, 0, 1, 0]);

    let steps = vtrr_model(&[2, 2, 1], 6);
    let whys: Vec<_> = steps.iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(whys, [(0, Head), (1, Counter), (2, Vft), (0, Head), (1, Counter), (0, NewCycle)]);
    assert_eq!(run_exact("vtrr", &[2, 2, 1], 6).sequence(), [0, 1, 2, 0, 1, 0]);
}

/// The counter rule deciding against the VFT test (the one test in this file
/// with blocking: on static sets the rule never decides alone; blocking and
/// waking make counters and VFTs disagree). Shares c0 = 3,
/// c1 = 2, c2 = 4, c3 = 4 (S_T = 13), queue c2 c3 c0 c1:
/// 1. c2 (head); 2. c3 (counter 4 > 3); 3. c0 (VFT test), blocks and wakes at
///    once (counter min(3, c3's 3), the walk restarts at the head);
/// 4. c2 (head), blocks and wakes at once: back after c3 (equal share, later
///    arrival), counter min(4, c3's 3) = 3, VFT stays 3Q/4 (> QVT + Q/4 = 4Q/13 + Q/4);
/// 5. c3 (head, counter 3 → 2);
/// 6. next is c2: VFT 3Q/4 − QVT(t+Q) 6Q/13 ≥ Q/4 fails, but its counter
///    3 > 2, so c2 runs (without the counter rule c3 would run again).
#[test]
fn vtrr_counter_rule_decides_after_wakes() {
    let mut s = registry::build("vtrr", SchedConfig { cpus: 1, quantum: MS, seed: 0 }).expect("registered");
    for (i, w) in [3, 2, 4, 4].into_iter().enumerate() {
        s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
    }
    let mut t = 0;
    let mut seq = Vec::new();
    for step in 1..=6 {
        let Decision::Run { client, slice } = s.pick(t, CpuId(0)).unwrap() else { panic!("idle") };
        t += slice;
        let block_and_wake = step == 3 || step == 4;
        let why = if block_and_wake { StopReason::Blocked } else { StopReason::Expired };
        s.stopped(t, CpuId(0), client, slice, why).unwrap();
        if block_and_wake {
            s.wake(t, client).unwrap();
        }
        seq.push(client.0);
    }
    assert_eq!(seq, [2, 3, 0, 2, 3, 2]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `vtrr` makes exactly the model's decisions on random static sets
    /// (queue order, exact tags), over two cycles.
    #[test]
    fn vtrr_follows_the_rules(mut shares in proptest::collection::vec(1u64..=8, 2..=6)) {
        shares.sort_unstable_by(|a, b| b.cmp(a));
        let quanta = 2 * shares.iter().sum::<u64>() as usize;
        let model: Vec<u32> = vtrr_model(&shares, quanta).iter().map(|s| s.0 as u32).collect();
        prop_assert_eq!(run_exact("vtrr", &shares, quanta).sequence(), model, "shares {:?}", shares);
    }
}
