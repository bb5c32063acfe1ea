//! The fluid reference against closed forms and against exact big-rational
//! arithmetic on random event sequences.

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{ToPrimitive, Zero};
use propshare::contract::Op;
use propshare::readjust::readjust_weights;
use propshare::{ClientId, Weight, MS};
use propshare_sim::fluid::{ns_of_service, Fluid, FRAC};
use proptest::prelude::*;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn ideal_ms(f: &mut Fluid, now: u64, c: u32) -> f64 {
    ns_of_service(f.ideal(now, ClientId(c))) / MS as f64
}

/// A reference for `cpus` CPUs with clients 0, 1, ... of these weights, all
/// joined at time 0.
fn joined(cpus: usize, weights: &[u64]) -> Fluid {
    let mut f = Fluid::new(cpus);
    for (c, &x) in weights.iter().enumerate() {
        f.join(0, ClientId(c as u32), w(x));
    }
    f
}

#[test]
fn equal_weights_share_equally() {
    let mut f = joined(2, &[5; 4]);
    for c in 0..4 {
        assert_eq!(ideal_ms(&mut f, 100 * MS, c), 50.0);
    }
}

#[test]
fn fewer_clients_than_cpus_get_one_cpu_each() {
    let mut f = joined(8, &[1, 1000]);
    assert_eq!(ideal_ms(&mut f, 10 * MS, 0), 10.0);
    assert_eq!(ideal_ms(&mut f, 10 * MS, 1), 10.0);
}

#[test]
fn infeasible_weight_is_capped_at_one_cpu() {
    // SFS §4.2: weights 1 and 10 on 2 CPUs → one CPU each; a third weight-1
    // client arrives → 10 keeps one CPU, the two light ones share the other.
    let mut f = joined(2, &[1, 10]);
    assert_eq!(ideal_ms(&mut f, 100 * MS, 0), 100.0);
    assert_eq!(ideal_ms(&mut f, 100 * MS, 1), 100.0);
    f.join(100 * MS, ClientId(2), w(1));
    assert_eq!(ideal_ms(&mut f, 300 * MS, 0), 200.0);
    assert_eq!(ideal_ms(&mut f, 300 * MS, 1), 300.0);
    assert_eq!(ideal_ms(&mut f, 300 * MS, 2), 100.0);
    assert_eq!(f.rate(ClientId(1)), (1, 1));
}

#[test]
fn late_arrival_and_block_wake() {
    // One CPU: A (w=1) alone for 10 ms, then B (w=3) joins; B blocks at 30 ms
    // for 10 ms, wakes at 40 ms.
    let mut f = joined(1, &[1]);
    f.join(10 * MS, ClientId(1), w(3));
    f.block(30 * MS, ClientId(1));
    assert_eq!(ideal_ms(&mut f, 30 * MS, 0), 15.0);
    assert_eq!(ideal_ms(&mut f, 30 * MS, 1), 15.0);
    f.wake(40 * MS, ClientId(1));
    assert_eq!(ideal_ms(&mut f, 40 * MS, 1), 15.0);
    assert_eq!(ideal_ms(&mut f, 40 * MS, 0), 25.0);
    assert_eq!(ideal_ms(&mut f, 80 * MS, 0), 35.0);
    assert_eq!(ideal_ms(&mut f, 80 * MS, 1), 45.0);
    // A leaves; B alone gets the CPU.
    assert_eq!(ns_of_service(f.leave(80 * MS, ClientId(0))) / MS as f64, 35.0);
    assert_eq!(ideal_ms(&mut f, 90 * MS, 1), 55.0);
}

#[test]
fn weight_change_applies_from_its_time() {
    let mut f = joined(1, &[1, 1]);
    f.set_weight(10 * MS, ClientId(1), w(3));
    assert_eq!(ideal_ms(&mut f, 30 * MS, 0), 10.0);
    assert_eq!(ideal_ms(&mut f, 30 * MS, 1), 20.0);
}

/// A gap in ns, then one of the host's five client events (the contract's
/// vocabulary; ticks, stops and invalid events do not apply to the fluid).
fn ev() -> impl Strategy<Value = (u64, Op)> {
    let weight = prop_oneof![4 => 1u64..=20, 1 => 1u64..=(1 << 32) - 1];
    (
        0u64..5_000_000,
        prop_oneof![
            3 => weight.clone().prop_map(Op::Join),
            1 => any::<usize>().prop_map(Op::Leave),
            1 => any::<usize>().prop_map(Op::Block),
            1 => any::<usize>().prop_map(Op::Wake),
            1 => (any::<usize>(), weight).prop_map(|(i, w)| Op::SetWeight(i, w)),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The O(P + log N) fixed-point reference equals the exact rational
    /// integral of the readjusted shares, recomputed from scratch (O(N)) on
    /// every interval, to within 1e-6 ns.
    #[test]
    fn matches_exact_rational_integral(cpus in 1usize..=5, events in proptest::collection::vec(ev(), 1..60)) {
        let mut f = Fluid::new(cpus);
        // (id, weight, runnable, present, exact ideal)
        let mut model: Vec<(u32, u64, bool, bool, BigRational)> = Vec::new();
        let mut now = 0u64;
        for (dt, e) in events {
            // Accrue the interval exactly.
            let live: Vec<usize> = (0..model.len()).filter(|&i| model[i].2 && model[i].3).collect();
            let weights: Vec<u64> = live.iter().map(|&i| model[i].1).collect();
            let phis = readjust_weights(&weights, cpus);
            let p = cpus.min(live.len()) as i64;
            let total: BigRational = phis.iter().fold(BigRational::zero(), |a, f| a + BigRational::new(BigInt::from(f.num), BigInt::from(f.den)));
            for (k, &i) in live.iter().enumerate() {
                let phi = BigRational::new(BigInt::from(phis[k].num), BigInt::from(phis[k].den));
                model[i].4 += phi * BigInt::from(p) * BigInt::from(dt) / total.clone();
            }
            now += dt;
            let present: Vec<usize> = (0..model.len()).filter(|&i| model[i].3).collect();
            let pick = |which: usize, pred: &dyn Fn(usize) -> bool| -> Option<usize> {
                let c: Vec<usize> = present.iter().copied().filter(|&i| pred(i)).collect();
                (!c.is_empty()).then(|| c[which % c.len()])
            };
            match e {
                Op::Join(wt) => {
                    let id = model.len() as u32;
                    f.join(now, ClientId(id), w(wt));
                    model.push((id, wt, true, true, BigRational::zero()));
                }
                Op::Leave(x) => if let Some(i) = pick(x, &|_| true) { f.leave(now, ClientId(model[i].0)); model[i].3 = false; },
                Op::Block(x) => if let Some(i) = pick(x, &|i| model[i].2) { f.block(now, ClientId(model[i].0)); model[i].2 = false; },
                Op::Wake(x) => if let Some(i) = pick(x, &|i| !model[i].2) { f.wake(now, ClientId(model[i].0)); model[i].2 = true; },
                Op::SetWeight(x, wt) => if let Some(i) = pick(x, &|_| true) { f.set_weight(now, ClientId(model[i].0), w(wt)); model[i].1 = wt; },
                Op::Tick | Op::Stop(..) | Op::Invalid(_) => unreachable!("ev() draws client events only"),
            }
            for m in model.iter().filter(|m| m.3) {
                let got = BigRational::new(BigInt::from(f.ideal(now, ClientId(m.0))), BigInt::from(1u128 << FRAC));
                let diff = (got - m.4.clone()).to_f64().unwrap().abs();
                prop_assert!(diff < 1e-6, "client {} off by {} ns at t={}", m.0, diff, now);
            }
        }
    }
}
