//! Groups end to end: the shared adapter gives every registered scheduler
//! the clients' exact effective weights, lag is measured against the
//! hierarchical reference, and scenario files with bad groups are refused
//! with located errors.

use propshare::{registry, SchedConfig, Weight, MS};
use propshare_sim::engine::{ClientSpec, Engine, GroupSpec, GroupsSpec, SimConfig, SimReport};
use propshare_sim::scenario::{scenario_files, Scenario};

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn run(name: &str, cfg: &SimConfig, clients: Vec<ClientSpec>, groups: Option<&GroupsSpec>) -> SimReport {
    let sched = registry::build(name, SchedConfig { cpus: cfg.cpus, quantum: cfg.quantum, seed: cfg.seed }).unwrap();
    let mut e = Engine::new(sched, cfg.clone(), clients).unwrap();
    if let Some(g) = groups {
        e.groups(g, propshare::groups::Flattening::Exact).unwrap();
    }
    e.run(&mut |_| {}).unwrap()
}

/// A(1) {a0 w1}, B(3) {b0..b3 w1, b4 w2}: static shares 1/4, 1/8 ×4, 1/4,
/// so the effective weights are 2, 1, 1, 1, 1, 2.
fn two_tenants() -> (Vec<ClientSpec>, GroupsSpec, Vec<u64>) {
    let own = [1, 1, 1, 1, 1, 2];
    let clients = own.iter().enumerate().map(|(i, &x)| ClientSpec::cpu_bound(format!("c{i}"), w(x))).collect();
    let groups = GroupsSpec {
        groups: vec![
            GroupSpec {
                name: "A".into(),
                weight: w(1),
                parent: None,
                weight_changes: vec![],
                moves: vec![],
                depart: None,
            },
            GroupSpec {
                name: "B".into(),
                weight: w(3),
                parent: None,
                weight_changes: vec![],
                moves: vec![],
                depart: None,
            },
        ],
        member_of: vec![Some(0), Some(1), Some(1), Some(1), Some(1), Some(1)],
        moves: vec![],
    };
    (clients, groups, vec![2, 1, 1, 1, 1, 2])
}

/// The target of issue 21: under the adapter, a scheduler's lag is its
/// flat lag on the effective weights. For a static tree whose readjustment
/// happens at the top only, the scheduler sees exactly the flat run's
/// inputs and the hierarchical reference equals the flat one on the
/// effective weights, so every client's service is the same to the ns and
/// its lag the same up to fixed-point rounding; a group's lag is the sum of
/// its members', so it stays within their flat bounds.
#[test]
fn every_scheduler_under_the_adapter_runs_as_on_the_effective_weights() {
    let (clients, groups, effective) = two_tenants();
    let flat: Vec<ClientSpec> =
        clients.iter().zip(&effective).map(|(c, &x)| ClientSpec { weight: w(x), ..c.clone() }).collect();
    for cpus in [1, 2, 3] {
        let cfg = SimConfig::new(cpus, 10 * MS, 300 * 10 * MS);
        for name in registry::names() {
            let mut probe = registry::build(name, SchedConfig::new(cpus, cfg.quantum)).unwrap();
            if probe.hierarchical().is_some() {
                continue; // schedules the tree itself: tests/hwf2q.rs
            }
            let g = run(name, &cfg, clients.clone(), Some(&groups));
            let f = run(name, &cfg, flat.clone(), None);
            for (a, b) in g.clients.iter().zip(&f.clients) {
                assert_eq!(a.service.received, b.service.received, "{name} on {cpus} CPUs: {}", a.name);
                let (x, y) = (&a.service, &b.service);
                for (what, p, q) in [("max_lag", x.max_lag, y.max_lag), ("min_lag", x.min_lag, y.min_lag)] {
                    assert!((p - q).abs() < 1e-3, "{name} {cpus} {} {what}: {p} {q}", a.name);
                }
            }
            assert_eq!(g.groups.len(), 2);
            for (k, grp) in g.groups.iter().enumerate() {
                let members: Vec<_> =
                    groups.member_of.iter().enumerate().filter(|(_, m)| **m == Some(k)).map(|(i, _)| i).collect();
                let received: u64 = members.iter().map(|&i| g.clients[i].service.received).sum();
                assert_eq!(grp.service.received, received, "{name}: group {}", grp.name);
                let hi: f64 = members.iter().map(|&i| f.clients[i].service.max_lag.max(0.0)).sum();
                let lo: f64 = members.iter().map(|&i| f.clients[i].service.min_lag.min(0.0)).sum();
                assert!(
                    grp.service.max_lag <= hi + 1e-3 && grp.service.min_lag >= lo - 1e-3,
                    "{name} on {cpus} CPUs: group {} lag {}..{} outside its members' flat lags {lo}..{hi}",
                    grp.name,
                    grp.service.min_lag,
                    grp.service.max_lag
                );
            }
        }
    }
}

/// A group's ideal share follows its weight: 1:3 on 2 CPUs, then 1:1 after
/// the weight change at half time (A's one client is then capped at one CPU).
#[test]
fn group_weight_changes_move_the_ideal() {
    let (clients, mut groups, _) = two_tenants();
    groups.groups[1].weight_changes = vec![(1000 * MS, w(1))];
    let cfg = SimConfig::new(2, 10 * MS, 2000 * MS);
    let r = run("wf2q", &cfg, clients, Some(&groups));
    let a = &r.groups[0];
    // 0.5 CPU for 1 s, then 1 CPU for 1 s.
    assert!((a.service.ideal - 1500.0 * MS as f64).abs() < 1.0, "{}", a.service.ideal);
    assert!(a.service.max_lag.abs() < 2.0 * (10 * MS) as f64 && a.service.min_lag.abs() < 2.0 * (10 * MS) as f64);
}

fn parse_err(text: &str) -> String {
    let base = "[machine]\ncpus = 2\nquantum = \"10ms\"\nhorizon = \"1s\"\n";
    match Scenario::parse("t.toml", &format!("{base}{text}"), "t") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_groups_are_refused_with_their_place() {
    let client = "[[client]]\nname = \"c\"\nweight = 1\n";
    let cases = [
        ("[[group]]\nname = \"a\"\nweight = 1\nparent = \"x\"\n", "t.toml:8:10: group[0].parent: no group named \"x\""),
        (
            "[[group]]\nname = \"a\"\nweight = 1\n[[group]]\nname = \"a\"\nweight = 1\n",
            "t.toml:9:8: group[1].name: duplicate group name \"a\"",
        ),
        ("[[group]]\nname = \"a\"\nweight = 0\n", "t.toml:7:10: group[0].weight: weight must be a positive integer, got 0"),
        (
            "[[group]]\nname = \"a\"\nweight = 1\nparent = \"b\"\n[[group]]\nname = \"b\"\nweight = 1\nparent = \"a\"\n",
            "group[0].parent: group \"a\" is its own ancestor (a cycle)",
        ),
        ("[[group]]\nname = \"a\"\nweight = 1\nparent = \"a\"\n", "group[0].parent: group \"a\" is its own ancestor"),
        ("[[client]]\nname = \"c\"\nweight = 1\ngroup = \"nope\"\n", "t.toml:8:9: client[0].group: no group named \"nope\""),
    ];
    for (text, want) in cases {
        let got = parse_err(&format!("{text}{client}"));
        assert!(got.contains(want), "got {got:?}, want {want:?}");
    }
    // Nine levels: one too deep.
    let mut deep = String::new();
    for k in 0..9 {
        deep += &format!("[[group]]\nname = \"g{k}\"\nweight = 1\n");
        if k > 0 {
            deep += &format!("parent = \"g{}\"\n", k - 1);
        }
    }
    let got = parse_err(&format!("{deep}{client}"));
    assert!(got.contains("group[8]: deeper than 8 levels"), "{got}");
    // A group_lag claim names a group.
    let claim = "[[claim]]\npaper = \"p\"\nsource = \"s\"\nscheduler = \"wf2q\"\nmetric = \"group_lag\"\nclient = \"zz\"\nmax = 1.0\n";
    let got = parse_err(&format!("[[group]]\nname = \"a\"\nweight = 1\n{client}{claim}"));
    assert!(got.contains("claim[0].client: no group is named \"zz\""), "{got}");
}

/// Groups declared children first are ordered parents first; clients and
/// classes land in their groups.
#[test]
fn groups_in_any_order_parse() {
    let text = "[machine]\ncpus = 2\nquantum = \"10ms\"\nhorizon = \"1s\"\n\
                [[group]]\nname = \"leaf\"\nweight = 2\nparent = \"top\"\n\
                [[group]]\nname = \"top\"\nweight = 1\n\
                [[client]]\nname = \"c\"\nweight = 1\ngroup = \"leaf\"\n\
                [[class]]\nprefix = \"k\"\ncount = 2\nweight = 1\ngroup = \"top\"\n";
    let s = Scenario::parse("t.toml", text, "t").unwrap();
    let g = s.groups().unwrap();
    assert_eq!(g.groups[0].name, "top");
    assert_eq!(g.groups[1].parent, Some(0));
    assert_eq!(g.member_of, vec![Some(1), Some(0), Some(0)]);
    assert!(Scenario::parse(
        "t.toml",
        "[machine]\ncpus = 1\nquantum = \"1ms\"\nhorizon = \"1s\"\n[[client]]\nname = \"c\"\nweight = 1\n",
        "t"
    )
    .unwrap()
    .groups()
    .is_none());
}

/// The scenarios under `scenarios/groups/` give the verdicts they pin: the
/// exact adapter within a few quanta of group lag, lazy flattening (the
/// scx_flatcg model) a hundred quanta ahead for the herd's group. Each lazy
/// claim fails under the exact adapter and the reverse, so they pin which is exact.
#[test]
fn groups_scenarios_give_their_pinned_verdicts() {
    let dir: std::path::PathBuf = [env!("CARGO_MANIFEST_DIR"), "../../scenarios/groups"].iter().collect();
    let files = scenario_files(&dir).unwrap();
    let mut claims = 0;
    for f in files {
        let scn = Scenario::load(&f).unwrap();
        let opts = propshare_sim::run::RunOptions::default();
        let r = propshare_sim::run::run_scenario(&scn, None, &opts, &mut |_| true).unwrap();
        for v in &r.verdicts {
            assert!(v.as_pinned(), "{}: {} {:?}: ours {:?}", f.display(), v.claim.scheduler, v.claim.metric, v.ours);
            claims += 1;
        }
        // Swap each claim onto its counterpart (exact <-> lazy): it must turn.
        for v in &r.verdicts {
            let other = match v.claim.scheduler.strip_prefix("lazy:") {
                Some(inner) => inner.to_string(),
                None => format!("lazy:{}", v.claim.scheduler),
            };
            if r.runs.iter().any(|m| m.scheduler == other) {
                let swapped = propshare_sim::scenario::Claim { scheduler: other.clone(), ..v.claim.clone() };
                let turned = propshare_sim::scenario::judge(&swapped, &scn.windows(), &r.runs);
                assert!(!turned.matches, "{}: the claim on {} also holds for {other}", f.display(), v.claim.scheduler);
            }
        }
    }
    assert!(claims >= 4, "{claims} claims");
}

/// A client that moves takes its weight to its new group: before the move
/// a0 shares A with m (a quarter of the CPU each), after it a0 has A's half.
#[test]
fn a_move_changes_both_groups() {
    let clients = ["a0", "m", "b0"].iter().map(|n| ClientSpec::cpu_bound(*n, w(1))).collect();
    let groups = GroupsSpec {
        groups: vec![
            GroupSpec {
                name: "A".into(),
                weight: w(1),
                parent: None,
                weight_changes: vec![],
                moves: vec![],
                depart: None,
            },
            GroupSpec {
                name: "B".into(),
                weight: w(1),
                parent: None,
                weight_changes: vec![],
                moves: vec![],
                depart: None,
            },
        ],
        member_of: vec![Some(0), Some(0), Some(1)],
        moves: vec![(1000 * MS, 1, 1)],
    };
    let cfg = SimConfig::new(1, 10 * MS, 2000 * MS);
    let r = run("wf2q", &cfg, clients, Some(&groups));
    let ms = |x: f64| x / MS as f64;
    assert!((ms(r.clients[0].service.ideal) - 750.0).abs() < 1e-6, "a0 {}", r.clients[0].service.ideal);
    assert!((ms(r.clients[1].service.ideal) - 500.0).abs() < 1e-6, "m {}", r.clients[1].service.ideal);
    assert!(
        (ms(r.groups[0].service.ideal) - 1000.0).abs() < 1e-6 && (ms(r.groups[1].service.ideal) - 1000.0).abs() < 1e-6
    );
    assert!((r.clients[0].service.received as f64 - r.clients[0].service.ideal).abs() <= (10 * MS) as f64);
    assert_eq!(r.groups[0].service.received + r.groups[1].service.received, 2000 * MS);
    // A bad move is refused where it is written.
    let got = parse_err("[[group]]\nname = \"a\"\nweight = 1\n[[client]]\nname = \"c\"\nweight = 1\nmoves = [{ at = \"1s\", group = \"zz\" }]\n");
    assert!(got.contains("client[0].moves[0].group: no group named \"zz\""), "{got}");
}

/// A(1) {a0, C(1) {c0}}, B(1) {b0} on one CPU; C moves under B at 1005 ms
/// (in the middle of a quantum), B leaves at 1.5 s with b0 and, by then,
/// C and c0. The ideal: a0 1/4, c0 1/4, b0 1/2 until the move; a0 1/2, c0
/// and b0 1/4 each until B leaves; a0 alone after. A group is credited what
/// its members received while in it, to the ns, also across the move of a
/// running client's group.
#[test]
fn a_group_moves_with_its_subtree_and_leaves_with_its_clients() {
    let clients: Vec<ClientSpec> = ["a0", "c0", "b0"].iter().map(|n| ClientSpec::cpu_bound(*n, w(1))).collect();
    let group = |name: &str, parent| GroupSpec {
        name: name.into(),
        weight: w(1),
        parent,
        weight_changes: vec![],
        moves: vec![],
        depart: None,
    };
    let mut groups = GroupsSpec {
        groups: vec![group("A", None), group("B", None), group("C", Some(0))],
        member_of: vec![Some(0), Some(2), Some(1)],
        moves: vec![],
    };
    let at_move = 1005 * MS;
    groups.groups[2].moves = vec![(at_move, Some(1))];
    groups.groups[1].depart = Some(1500 * MS);
    let cfg = SimConfig::new(1, 10 * MS, 2000 * MS);
    for name in ["wf2q", "stride", "hwf2q"] {
        let sched = registry::build(name, SchedConfig::new(1, cfg.quantum)).unwrap();
        let mut e = Engine::new(sched, cfg.clone(), clients.clone()).unwrap();
        e.groups(&groups, propshare::groups::Flattening::Exact).unwrap();
        // c0's service before the move, from the trace.
        let mut c0_before = 0;
        let r = e
            .run(&mut |ev| {
                if let propshare_sim::engine::TraceEvent::Run { client: "c0", start, end, .. } = ev {
                    c0_before += end.min(at_move).saturating_sub(start);
                }
            })
            .unwrap();
        let ms = |x: f64| x / MS as f64;
        let ideal: Vec<f64> = r.clients.iter().map(|c| ms(c.service.ideal)).collect();
        let expect = [250.0 + 1.25 + 247.5 + 500.0, 251.25 + 123.75, 502.5 + 123.75];
        for (k, (&got, want)) in ideal.iter().zip(expect).enumerate() {
            assert!((got - want).abs() < 1e-6, "{name}: client {k} ideal {got} ms, want {want}");
        }
        let g: Vec<f64> = r.groups.iter().map(|g| ms(g.service.ideal)).collect();
        assert!((g[0] - (expect[0] + 251.25)).abs() < 1e-6, "{name}: A {g:?}");
        assert!((g[1] - (expect[2] + 123.75)).abs() < 1e-6, "{name}: B {g:?}");
        assert!((g[2] - expect[1]).abs() < 1e-6, "{name}: C {g:?}");
        // b0 and c0 left with B: nothing after 1.5 s; the CPU never idles.
        assert_eq!(r.clients.iter().map(|c| c.service.received).sum::<u64>(), 2000 * MS, "{name}");
        assert_eq!(r.groups[0].service.received, r.clients[0].service.received + c0_before, "{name}: A");
        assert_eq!(
            r.groups[1].service.received,
            r.clients[2].service.received + r.clients[1].service.received - c0_before,
            "{name}: B"
        );
        assert_eq!(r.groups[2].service.received, r.clients[1].service.received, "{name}: C");
        for grp in &r.groups {
            let q = (10 * MS) as f64;
            assert!(
                grp.service.max_lag < 2.0 * q && grp.service.min_lag > -2.0 * q,
                "{name}: {} {} {}",
                grp.name,
                grp.service.min_lag,
                grp.service.max_lag
            );
        }
    }
}

/// Group arrivals, departures and moves that cannot happen are refused
/// where they are written; a client of a group that arrives later arrives
/// with it.
#[test]
fn bad_group_events_are_refused_with_their_place() {
    let g = |name: &str, extra: &str| format!("[[group]]\nname = \"{name}\"\nweight = 1\n{extra}");
    let client = |extra: &str| format!("[[client]]\nname = \"c\"\nweight = 1\n{extra}");
    let cases = [
        (
            g("a", "moves = [{ at = \"1s\", parent = \"b\" }]\n") + &g("b", "parent = \"a\"\n") + &client(""),
            "group[0].moves[0].parent: \"b\" is in \"a\" at 1000000000 ns: the move would make a cycle",
        ),
        (
            g("a", "moves = [{ at = \"1s\", parent = \"zz\" }]\n") + &client(""),
            "t.toml:8:32: group[0].moves[0].parent: no group named \"zz\"",
        ),
        (
            g("a", "depart = \"500ms\"\n") + &g("b", "parent = \"a\"\nmoves = [{ at = \"600ms\" }]\n") + &client(""),
            "group[1].moves[0]: \"b\" has left at 500000000 ns, before this move",
        ),
        (
            g("a", "arrive = \"500ms\"\n") + &g("b", "moves = [{ at = \"200ms\", parent = \"a\" }]\n") + &client(""),
            "group[1].moves[0].parent: \"a\" arrives at 500000000 ns, after this move (200000000 ns)",
        ),
        (
            g("a", "depart = \"500ms\"\n") + &client("group = \"a\"\narrive = \"600ms\"\n"),
            "client[0].arrive: 600000000 ns is not before its group \"a\" leaves (500000000 ns)",
        ),
        (
            g("a", "arrive = \"500ms\"\n") + &client("group = \"a\"\narrive = \"200ms\"\n"),
            "client[0].arrive: 200000000 ns is before its group \"a\" arrives (500000000 ns)",
        ),
        (
            g("a", "arrive = \"500ms\"\ndepart = \"500ms\"\n") + &client(""),
            "group[0].depart: departure (500000000 ns) must come after arrival (500000000 ns)",
        ),
        (
            g("a", "arrive = \"500ms\"\n") + &g("b", "parent = \"a\"\narrive = \"100ms\"\n") + &client(""),
            "group[1].arrive: 100000000 ns is before its parent \"a\" arrives (500000000 ns)",
        ),
        (
            g("a", "depart = \"500ms\"\n") + &client("moves = [{ at = \"600ms\", group = \"a\" }]\n"),
            "client[0].moves[0].group: \"a\" is not there at 600000000 ns (it arrives at 0 ns and leaves at 500000000 ns)",
        ),
        (
            g("a", "depart = \"500ms\"\nmoves = [{ at = \"500ms\" }]\n") + &client(""),
            "group[0].moves[0].at: 500000000 ns is not before its departure (500000000 ns)",
        ),
        (
            g("a", "moves = [{ at = \"300ms\" }, { at = \"200ms\" }]\n") + &client(""),
            "group[0].moves[1].at: times out of order: 200000000 ns comes before 300000000 ns",
        ),
    ];
    for (text, want) in cases {
        let got = parse_err(&text);
        assert!(got.contains(want), "got {got:?}, want {want:?}");
    }
    // Eight levels, then the top moves under the bottom of another chain.
    let mut deep = String::new();
    for k in 0..8 {
        deep += &g(&format!("g{k}"), &if k > 0 { format!("parent = \"g{}\"\n", k - 1) } else { String::new() });
    }
    let got = parse_err(&format!(
        "{deep}{}{}",
        g("x", "moves = [{ at = \"1s\", parent = \"g0\" }]\n"),
        g("y", "parent = \"x\"\n")
    ));
    let want = "group[8].moves[0].parent: at 1000000000 ns the tree would be 3 levels deep";
    assert!(!got.contains(want), "a shallow move is fine: {got}");
    let got = parse_err(&format!(
        "{deep}{}{}",
        g("x", "moves = [{ at = \"1s\", parent = \"g7\" }]\n"),
        g("y", "parent = \"x\"\n")
    ));
    assert!(
        got.contains("group[8].moves[0].parent: at 1000000000 ns the tree would be 10 levels deep, more than 8"),
        "{got}"
    );
    // A client of a late group arrives with it; a class too.
    let text = "[machine]\ncpus = 2\nquantum = \"10ms\"\nhorizon = \"1s\"\n".to_string()
        + &g("a", "arrive = \"300ms\"\n")
        + &client("group = \"a\"\n")
        + "[[class]]\nprefix = \"k\"\ncount = 2\nweight = 1\ngroup = \"a\"\n";
    let s = Scenario::parse("t.toml", &text, "t").unwrap();
    assert!(s.clients(0).iter().all(|c| c.arrive == 300 * MS));
}
