//! H-WF2Q+ ([`propshare::algo::hwf2q`]): flat WF2Q+ decisions on one
//! level, the charge at the pick spreading simultaneous picks over groups,
//! and the books kept through client and group moves.

use propshare::groups::{GroupError, GroupId, MAX_DEPTH, ROOT};
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight, MS};

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn build(cpus: usize, q: Time, name: &str) -> Box<dyn Scheduler> {
    registry::build(name, SchedConfig::new(cpus, q)).unwrap()
}

/// H-WF2Q+ on `cpus` CPUs (quantum 10 ms) with groups added in order,
/// each `(parent, weight)`, `parent` an index into the groups made so far
/// (0: the root); the scheduler and the groups, the root first.
fn with_groups(cpus: usize, groups: &[(usize, u64)]) -> (Box<dyn Scheduler>, Vec<GroupId>) {
    let mut s = build(cpus, 10 * MS, "hwf2q");
    let mut ids = vec![ROOT];
    for &(parent, x) in groups {
        ids.push(s.hierarchical().unwrap().add_group(ids[parent], w(x)).unwrap());
    }
    (s, ids)
}

/// Client `c` joins at time 0 with weight `x`, placed in group `g` first.
fn join_in(s: &mut dyn Scheduler, c: u32, g: GroupId, x: Weight) {
    s.hierarchical().unwrap().place(0, ClientId(c), g).unwrap();
    s.join(0, ClientId(c), x).unwrap();
}

/// One level, one CPU, a fixed runnable set: the same decisions as
/// flat WF2Q+, whatever each quantum's length (work-based and fluid V
/// advance alike). Fails if the tags or V rule of either changes.
#[test]
fn one_level_one_cpu_decides_as_wf2q() {
    let q = 10 * MS;
    for seed in 1..=20u64 {
        let mut rng = seed;
        let mut next = move |m: u64| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) % m
        };
        let mut flat = build(1, q, "wf2q");
        let mut tree = build(1, q, "hwf2q");
        for c in 0..(2 + next(10)) as u32 {
            let x = w(1 + next(50));
            flat.join(0, ClientId(c), x).unwrap();
            tree.join(0, ClientId(c), x).unwrap();
        }
        let mut now = 0;
        for step in 0..2000 {
            let a = flat.pick(now, CpuId(0)).unwrap();
            let b = tree.pick(now, CpuId(0)).unwrap();
            assert_eq!(a, b, "seed {seed} step {step}");
            let Decision::Run { client, .. } = a else { panic!("idle") };
            let ran = 1 + next(q);
            now += ran;
            flat.stopped(now, CpuId(0), client, ran, StopReason::Expired).unwrap();
            tree.stopped(now, CpuId(0), client, ran, StopReason::Expired).unwrap();
        }
    }
}

/// Four idle CPUs, two groups of equal weight with four clients each:
/// the four simultaneous picks go two to each group, because each
/// group is charged its slice at the pick (Gap HWF2Q-1). Charged only at
/// the stops, all four would go to the first group.
#[test]
fn simultaneous_picks_spread_over_groups() {
    let (mut s, g) = with_groups(4, &[(0, 1), (0, 1)]);
    let (a, b) = (g[1], g[2]);
    for c in 0..8u32 {
        join_in(s.as_mut(), c, if c < 4 { a } else { b }, w(1));
    }
    let mut per_group = [0; 2];
    for k in 0..4 {
        let Decision::Run { client, .. } = s.pick(0, CpuId(k)).unwrap() else { panic!("idle") };
        per_group[(client.0 >= 4) as usize] += 1;
    }
    assert_eq!(per_group, [2, 2]);
    s.check_invariants().unwrap();
}

/// Moves of waiting, running and blocked clients keep every count
/// (Gap HWF2Q-4), a running one is charged on both paths, and the
/// group events refuse unknown groups and the root.
#[test]
fn moves_keep_the_books() {
    let q = 10 * MS;
    let (mut s, g) = with_groups(2, &[(0, 2), (1, 3)]);
    let (a, b) = (g[1], g[2]);
    let h = s.hierarchical().unwrap();
    assert_eq!(h.add_group(GroupId(9), w(1)), Err(GroupError::UnknownGroup(GroupId(9))));
    assert_eq!(h.set_group_weight(0, ROOT, w(1)), Err(GroupError::Root));
    for c in 0..4u32 {
        join_in(s.as_mut(), c, if c % 2 == 0 { a } else { b }, w(1 + c as u64));
    }
    let Decision::Run { client: r, .. } = s.pick(0, CpuId(0)).unwrap() else { panic!("idle") };
    let waiting = (0..4).map(ClientId).find(|&c| c != r).unwrap();
    s.block(1, waiting).unwrap();
    for (t, c, g) in [(2, r, b), (3, r, a), (4, waiting, b), (5, ClientId(3), ROOT)] {
        s.hierarchical().unwrap().place(t, c, g).unwrap();
        s.check_invariants().unwrap();
    }
    s.hierarchical().unwrap().set_group_weight(6, b, w(7)).unwrap();
    s.check_invariants().unwrap();
    s.stopped(q, CpuId(0), r, q, StopReason::Expired).unwrap();
    s.wake(q, waiting).unwrap();
    s.check_invariants().unwrap();
    for k in 0..2 {
        assert!(matches!(s.pick(q, CpuId(k)).unwrap(), Decision::Run { .. }));
    }
    s.check_invariants().unwrap();
}

/// Moves of groups with running, waiting and blocked clients below them
/// keep every count (Gap HWF2Q-6), the moved subtree goes on being
/// served, and a move under its own descendant, of the root, or too deep
/// is refused with the tree unchanged.
#[test]
fn group_moves_keep_the_books() {
    let q = 10 * MS;
    let (mut s, g) = with_groups(2, &[(0, 2), (0, 1), (1, 3)]);
    let (a, b, a1) = (g[1], g[2], g[3]);
    for c in 0..6u32 {
        join_in(s.as_mut(), c, [a, a1, b][c as usize % 3], w(1 + c as u64));
    }
    let mut running = Vec::new();
    for k in 0..2 {
        let Decision::Run { client, .. } = s.pick(0, CpuId(k)).unwrap() else { panic!("idle") };
        running.push((k, client));
    }
    s.block(1, ClientId(4)).unwrap();
    let h = s.hierarchical().unwrap();
    assert_eq!(h.move_group(2, a, a1), Err(GroupError::Cycle(a, a1)));
    assert_eq!(h.move_group(2, ROOT, a), Err(GroupError::Root));
    assert_eq!(h.move_group(2, GroupId(7), a), Err(GroupError::UnknownGroup(GroupId(7))));
    for (t, g, p) in [(2, a1, b), (3, a, b), (4, a, ROOT), (5, a1, ROOT), (6, b, a1)] {
        s.hierarchical().unwrap().move_group(t, g, p).unwrap();
        s.check_invariants().unwrap();
    }
    let mut deep = ROOT;
    for _ in 0..MAX_DEPTH - 1 {
        deep = s.hierarchical().unwrap().add_group(deep, w(1)).unwrap();
    }
    // a1 now holds b: under `deep` (depth 7) b would sit at depth 9.
    assert_eq!(s.hierarchical().unwrap().move_group(7, a1, deep), Err(GroupError::TooDeep(MAX_DEPTH + 1)));
    s.check_invariants().unwrap();
    for &(k, c) in &running {
        s.stopped(q, CpuId(k), c, q, StopReason::Expired).unwrap();
    }
    s.wake(q, ClientId(4)).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut now = q;
    for _ in 0..60 {
        let Decision::Run { client, .. } = s.pick(now, CpuId(0)).unwrap() else { panic!("idle") };
        seen.insert(client.0);
        now += q;
        s.stopped(now, CpuId(0), client, q, StopReason::Expired).unwrap();
        s.check_invariants().unwrap();
    }
    assert_eq!(seen.len(), 6, "every client is served after the moves: {seen:?}");
}
