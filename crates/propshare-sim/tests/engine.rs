//! The engine end to end: reference schedulers against the fluid model.

use propshare::{Weight, MS};
use propshare_sim::engine::{simulate, Behavior, ClientSpec, Dist, SimConfig};
use proptest::prelude::*;

fn clients(weights: &[u64]) -> Vec<ClientSpec> {
    weights.iter().enumerate().map(|(i, &w)| ClientSpec::cpu_bound(format!("c{i}"), Weight::new(w).unwrap())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Parekh-Gallager on one CPU: WFQ never falls more than one quantum
    /// behind the fluid reference, for any static weights.
    #[test]
    fn wfq_is_never_more_than_one_quantum_behind_on_one_cpu(weights in proptest::collection::vec(1u64..=100, 1..12)) {
        let q = 10 * MS;
        let r = simulate("wfq", SimConfig::new(1, q, 2000 * q), clients(&weights)).unwrap();
        for c in &r.clients {
            prop_assert!(c.max_lag <= q as f64 + 1e-3, "{} (w={}) fell {} ns behind", c.name, c.weight, c.max_lag);
        }
        prop_assert_eq!(r.idle_while_waiting, 0);
        prop_assert_eq!(r.busy, 2000 * q);
    }
}

/// Round robin ignores weights, so with skewed weights the heavy client falls
/// far more than one quantum behind: the bound WFQ keeps is not free.
#[test]
fn round_robin_breaks_the_bound_with_skewed_weights() {
    let q = 10 * MS;
    let r = simulate("rr", SimConfig::new(1, q, 1000 * q), clients(&[1, 9])).unwrap();
    let heavy = &r.clients[1];
    assert!(heavy.max_lag > 100.0 * q as f64, "max lag {}", heavy.max_lag);
    let wfq = simulate("wfq", SimConfig::new(1, q, 1000 * q), clients(&[1, 9])).unwrap();
    assert!(wfq.clients[1].max_lag <= q as f64);
    assert_eq!(wfq.clients[1].received, 900 * q);
}

/// Service is conserved: received time adds up to busy CPU time, and with
/// phased clients, wake-up latencies are recorded.
#[test]
fn phased_clients_block_and_wake() {
    let q = 10 * MS;
    let mut cs = clients(&[1, 2]);
    cs.push(ClientSpec {
        behavior: Behavior::Phases { run: Dist::Constant(3 * MS), sleep: Dist::Exponential(20 * MS) },
        ..ClientSpec::cpu_bound("io", Weight::new(4).unwrap())
    });
    let r = simulate("wfq", SimConfig { seed: 3, ..SimConfig::new(2, q, 500 * q) }, cs).unwrap();
    let total: u64 = r.clients.iter().map(|c| c.received).sum();
    assert_eq!(total, r.busy);
    assert!(!r.clients[2].wake_latencies.is_empty());
    assert_eq!(r.idle_while_waiting, 0);
    // The phased client never needs more than its phase: it gets far less than its weight share.
    assert!(r.clients[2].received < r.clients[1].received);
}

/// Same inputs, same outputs.
#[test]
fn deterministic() {
    let q = 10 * MS;
    let mut cs = clients(&[1, 2, 3]);
    cs[0].behavior = Behavior::Phases { run: Dist::Uniform(MS, 9 * MS), sleep: Dist::Exponential(5 * MS) };
    let a = simulate("wfq", SimConfig { seed: 9, ..SimConfig::new(2, q, 300 * q) }, cs.clone()).unwrap();
    let b = simulate("wfq", SimConfig { seed: 9, ..SimConfig::new(2, q, 300 * q) }, cs).unwrap();
    assert_eq!(a, b);
}

/// The band metric: WFQ keeps every client within one quantum all the time;
/// round robin with weights 1:9 does not for the heavy client.
#[test]
fn within_one_quantum_fraction() {
    use propshare_sim::engine::Engine;
    let q = 10 * MS;
    let run = |name: &str| {
        let sched = propshare::registry::build(name, propshare::SchedConfig::new(1, q)).unwrap();
        let mut e = Engine::new(sched, SimConfig::new(1, q, 1000 * q), clients(&[1, 9])).unwrap();
        e.lag_band(q / 2, q);
        e.run(&mut |_| {}).unwrap()
    };
    let wfq = run("wfq");
    assert!(
        wfq.clients.iter().all(|c| c.within_band == Some(1.0)),
        "{:?}",
        wfq.clients.iter().map(|c| c.within_band).collect::<Vec<_>>()
    );
    let rr = run("rr");
    let heavy = rr.clients[1].within_band.unwrap();
    assert!(heavy < 0.05, "heavy client within a quantum {heavy} of the time");
}
