//! H-WF2Q+ (`hwf2q`), the natively hierarchical scheduler, against the
//! hierarchical fluid reference (`propshare_sim::hier`) on random trees and
//! workloads, beside the flat WF2Q+ under the exact adapter.

use propshare::{registry, SchedConfig, Weight, MS};
use propshare_sim::engine::{Behavior, ClientSpec, Dist, Engine, GroupSpec, GroupsSpec, SimConfig, SimReport};
use proptest::prelude::*;

const Q: u64 = 10 * MS;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn run(name: &str, cpus: usize, horizon: u64, clients: &[ClientSpec], groups: &GroupsSpec) -> SimReport {
    let cfg = SimConfig::new(cpus, Q, horizon);
    let sched = registry::build(name, SchedConfig { cpus, quantum: Q, seed: 1 }).unwrap();
    let mut e = Engine::new(sched, cfg, clients.to_vec()).unwrap();
    e.groups(groups, propshare::groups::Flattening::Exact).unwrap();
    e.run(&mut |_| {}).unwrap()
}

/// The largest |lag| of any client and of any group, in quanta.
fn worst(r: &SimReport) -> (f64, f64) {
    let c = r.clients.iter().map(|c| c.service.max_lag.max(-c.service.min_lag)).fold(0.0, f64::max) / Q as f64;
    let g = r.groups.iter().map(|g| g.service.max_lag.max(-g.service.min_lag)).fold(0.0, f64::max) / Q as f64;
    (c, g)
}

/// A weight change: (time in quanta, new weight).
type Change = Option<(u64, u64)>;
/// A group: parent, weight, weight change.
type RandomGroup = (Option<usize>, u64, Change);
/// A client: group, weight, arrival and departure (quanta), sleeps, weight change.
type RandomClient = (Option<usize>, u64, u64, Option<u64>, bool, Change);

#[derive(Clone, Debug)]
struct Case {
    cpus: usize,
    groups: Vec<RandomGroup>,
    clients: Vec<RandomClient>,
    moves: Vec<(u64, usize, usize)>,
}

fn case() -> impl Strategy<Value = Case> {
    let groups = proptest::collection::vec(
        (any::<prop::sample::Index>(), 1u64..=8, prop::option::weighted(0.3, (1u64..200, 1u64..=8))),
        1..7,
    );
    let clients = proptest::collection::vec(
        (
            any::<prop::sample::Index>(),
            1u64..=8,
            prop_oneof![2 => Just(0u64), 1 => 1u64..150],
            prop::option::weighted(0.2, 1u64..200),
            prop::bool::weighted(0.4),
            prop::option::weighted(0.3, (1u64..200, 1u64..=8)),
        ),
        1..14,
    );
    let moves =
        proptest::collection::vec((1u64..200, any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..3);
    (1usize..=4, groups, clients, moves).prop_map(|(cpus, gs, cs, ms)| {
        // Group k's parent: the root or an earlier group (index k picks among k + 1 choices).
        let groups: Vec<_> = gs
            .iter()
            .enumerate()
            .map(|(k, (ix, wt, ch))| {
                let p = ix.index(k + 1);
                ((p < k).then_some(p), *wt, *ch)
            })
            .collect();
        let n = groups.len();
        let clients = cs
            .iter()
            .map(|(ix, wt, at, dep, sleeps, ch)| {
                let g = ix.index(n + 1);
                ((g < n).then_some(g), *wt, *at, dep.map(|d| at + d), *sleeps, *ch)
            })
            .collect::<Vec<_>>();
        let m = clients.len();
        let moves = ms.iter().map(|(t, i, g)| (*t, i.index(m), g.index(n))).collect();
        Case { cpus, groups, clients, moves }
    })
}

fn build(case: &Case) -> (Vec<ClientSpec>, GroupsSpec) {
    let groups = GroupsSpec {
        groups: case
            .groups
            .iter()
            .enumerate()
            .map(|(k, &(parent, wt, change))| GroupSpec {
                name: format!("g{k}"),
                weight: w(wt),
                parent,
                weight_changes: change.map(|(t, x)| vec![(t * Q, w(x))]).unwrap_or_default(),
                moves: vec![],
                depart: None,
            })
            .collect(),
        member_of: case.clients.iter().map(|c| c.0).collect(),
        moves: case.moves.iter().map(|&(t, i, g)| (t * Q, i, g)).collect(),
    };
    let clients = case
        .clients
        .iter()
        .enumerate()
        .map(|(i, &(_, wt, at, dep, sleeps, change))| ClientSpec {
            arrive: at * Q,
            depart: dep.map(|d| d * Q),
            behavior: if sleeps {
                Behavior::Phases { run: Dist::Exponential(2 * Q), sleep: Dist::Exponential(3 * Q) }
            } else {
                Behavior::CpuBound
            },
            weight_changes: change.map(|(t, x)| vec![((at + t) * Q, w(x))]).unwrap_or_default(),
            ..ClientSpec::cpu_bound(format!("c{i}"), w(wt))
        })
        .collect();
    (clients, groups)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Random trees (up to six groups, any depth) with random joins,
    /// departures, sleepers, client and group weight changes and moves: the
    /// shell checks hwf2q's invariants after every event (debug builds), and
    /// on one CPU every client's and group's lag against the hierarchical
    /// reference stays within 12 quanta (measured: at most 8.7 over 166 one-CPU cases).
    /// On P > 1 CPUs no bound is claimed (Gap HWF2Q-3).
    #[test]
    fn hwf2q_lag_is_bounded_against_the_hierarchical_reference(case in case()) {
        let (clients, groups) = build(&case);
        let r = run("hwf2q", case.cpus, 250 * Q, &clients, &groups);
        let (c, g) = worst(&r);
        eprintln!("STAT {} {c:.2} {g:.2}", case.cpus);
        if case.cpus == 1 {
            prop_assert!(c <= 12.0 && g <= 12.0, "client lag {c} Q, group lag {g} Q");
        }
    }
}

/// A heavy client capped inside its group on P CPUs: g0 (6) holds g1 (3)
/// with one client and g2 (6) with clients of weights 1 and 7 on 2 CPUs.
/// The reference gives g2 4/3 CPU: 1 to the weight-7 client (capped) and
/// 1/3 to the weight-1 one, 100 and 300 quanta of 300. Per-node WF2Q+
/// normalises g2's virtual time by both weights, so the light client is
/// rarely eligible and g1 takes what g2 cannot place (Gap HWF2Q-3): the
/// light client falls 60 quanta behind, the capped one 20. `no_capped_credit`
/// (Gap HWF2Q-2) decides the same here. Flat WF2Q+ under the exact adapter
/// serves the capped client fully and lets the light one fall 40 behind
/// (Gap GROUPS-1). Each figure fails for the other scheduler.
#[test]
fn capped_client_inside_a_group_on_p_cpus() {
    let runs = tree(2, &[(None, 6), (Some(0), 3), (Some(0), 6)], &[(Some(1), 1), (Some(2), 1), (Some(2), 7)], 300 * Q);
    let lag = |k: usize, c: usize| runs[k].1.clients[c].service.max_lag / Q as f64;
    let received = |k: usize| runs[k].1.clients.iter().map(|c| c.service.received / Q).collect::<Vec<_>>();
    assert_eq!(received(0), [280, 40, 280]);
    assert!((55.0..65.0).contains(&lag(0, 1)) && (15.0..25.0).contains(&lag(0, 2)), "{} {}", lag(0, 1), lag(0, 2));
    assert_eq!(received(1), received(0));
    assert_eq!(received(2), [240, 60, 300]);
    assert!((35.0..45.0).contains(&lag(2, 1)) && lag(2, 2) < 1.0, "{} {}", lag(2, 1), lag(2, 2));
}

fn tree(
    cpus: usize,
    groups: &[(Option<usize>, u64)],
    clients: &[(Option<usize>, u64)],
    horizon: u64,
) -> Vec<(String, SimReport)> {
    let c: Vec<ClientSpec> =
        clients.iter().enumerate().map(|(i, &(_, x))| ClientSpec::cpu_bound(format!("c{i}"), w(x))).collect();
    let g = GroupsSpec {
        groups: groups
            .iter()
            .enumerate()
            .map(|(k, &(p, x))| GroupSpec {
                name: format!("g{k}"),
                weight: w(x),
                parent: p,
                weight_changes: vec![],
                moves: vec![],
                depart: None,
            })
            .collect(),
        member_of: clients.iter().map(|c| c.0).collect(),
        moves: vec![],
    };
    ["hwf2q", "hwf2q(no_capped_credit=true)", "wf2q"]
        .iter()
        .map(|n| (n.to_string(), run(n, cpus, horizon, &c, &g)))
        .collect()
}

/// `scenarios/groups/many-tenants.toml`: 10 tenants of about 100 clients each.
/// The exact adapter refuses the tree (its exact integer weights exceed
/// 2^32 - 1), so no flat scheduler can run it exactly; hwf2q keeps every
/// tenant within its pinned group-lag claim.
#[test]
fn many_tenants_run_natively_where_the_adapter_refuses() {
    let path: std::path::PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "../../scenarios/groups/many-tenants.toml"].iter().collect();
    let scn = propshare_sim::scenario::Scenario::load(&path).unwrap();
    let opts = propshare_sim::run::RunOptions::default();
    let groups = scn.groups().unwrap();
    // The file's clients: tenant t has 30 + t of weight 1, 33 of 2, 33 of 3.
    let mut clients = Vec::new();
    let mut member_of = Vec::new();
    for t in 0..10u64 {
        for (x, n) in [(1, 31 + t), (2, 33), (3, 33)] {
            for _ in 0..n {
                clients.push(ClientSpec::cpu_bound(format!("c{}", clients.len()), w(x)));
                member_of.push(Some(t as usize));
            }
        }
    }
    let groups = GroupsSpec { member_of, ..groups };
    let sched = registry::build("wf2q", SchedConfig { cpus: 8, quantum: Q, seed: 1 }).unwrap();
    let mut e = Engine::new(sched, SimConfig::new(8, Q, 200 * Q), clients).unwrap();
    let err = e.groups(&groups, propshare::groups::Flattening::Exact).expect_err("the adapter refuses");
    assert!(format!("{err}").contains("2^32 - 1"), "{err}");
    let r = propshare_sim::run::run_scenario(&scn, None, &opts, &mut |_| true).unwrap();
    let v = &r.verdicts[0];
    eprintln!("hwf2q group lag {:?}", v.ours);
    assert!(v.as_pinned(), "{:?}", v.ours);
}
