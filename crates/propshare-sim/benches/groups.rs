//! Criterion benchmark: the cost of one group event (a client blocks, it
//! wakes, a tenant's weight changes), ten tenants of weights 1..=10 with N
//! unit-weight clients between them, for flat WF2Q+ behind the exact
//! adapter (`Flattener::changes`, then every changed weight re-issued:
//! O(G + N) per event) and for H-WF2Q+ scheduling the tree itself
//! (O(depth · log fan-out)).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use propshare::groups::{Flattener, GroupId, GroupTree, Hierarchical, ROOT};
use propshare::{registry, ClientId, SchedConfig, Scheduler, Weight, MS};

const TENANTS: u64 = 10;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn tenants(h: &mut dyn FnMut(GroupId, Weight) -> GroupId) -> Vec<GroupId> {
    (1..=TENANTS).map(|t| h(ROOT, w(t))).collect()
}

/// WF2Q+ behind the adapter: the tree's event, then the changed weights.
struct Flat {
    sched: Box<dyn Scheduler>,
    adapter: Flattener,
}

impl Flat {
    fn new(n: usize) -> Flat {
        let mut tree = GroupTree::new();
        let gs = tenants(&mut |p, x| tree.add_group(p, x).unwrap());
        let mut adapter = Flattener::new(tree);
        let mut sched = registry::build("wf2q", SchedConfig::new(8, 10 * MS)).unwrap();
        for i in 0..n as u32 {
            adapter.tree_mut().join(ClientId(i), gs[i as usize % gs.len()], w(1)).unwrap();
        }
        for (c, x) in adapter.changes(None).unwrap() {
            sched.join(0, c, x).unwrap();
        }
        Flat { sched, adapter }
    }

    fn reissue(&mut self) {
        for (c, x) in self.adapter.changes(None).unwrap() {
            self.sched.set_weight(0, c, x).unwrap();
        }
    }

    fn round(&mut self, i: u32, tenant_weight: u64) {
        let c = ClientId(i);
        self.adapter.tree_mut().set_runnable(c, false).unwrap();
        self.sched.block(0, c).unwrap();
        self.reissue();
        self.adapter.tree_mut().set_runnable(c, true).unwrap();
        self.reissue();
        self.sched.wake(0, c).unwrap();
        self.adapter.tree_mut().set_group_weight(GroupId(1), w(tenant_weight)).unwrap();
        self.reissue();
    }
}

/// H-WF2Q+: the same events, told to the scheduler directly.
fn native(n: usize) -> Box<dyn Scheduler> {
    let mut sched = registry::build("hwf2q", SchedConfig::new(8, 10 * MS)).unwrap();
    let gs = {
        let h: &mut dyn Hierarchical = sched.hierarchical().unwrap();
        tenants(&mut |p, x| h.add_group(p, x).unwrap())
    };
    for i in 0..n as u32 {
        sched.hierarchical().unwrap().place(0, ClientId(i), gs[i as usize % gs.len()]).unwrap();
        sched.join(0, ClientId(i), w(1)).unwrap();
    }
    sched
}

fn native_round(s: &mut Box<dyn Scheduler>, i: u32, tenant_weight: u64) {
    s.block(0, ClientId(i)).unwrap();
    s.wake(0, ClientId(i)).unwrap();
    s.hierarchical().unwrap().set_group_weight(0, GroupId(1), w(tenant_weight)).unwrap();
}

fn group_events(c: &mut Criterion) {
    let mut group = c.benchmark_group("group_round");
    group.sample_size(20);
    for n in [100usize, 1_000, 10_000] {
        let mut flat = Flat::new(n);
        let mut k = 0u32;
        group.bench_with_input(BenchmarkId::new("wf2q+adapter", n), &n, |b, _| {
            b.iter(|| {
                k = k.wrapping_add(7919);
                flat.round(k % n as u32, 1 + (k as u64 % 2));
            })
        });
        let mut s = native(n);
        group.bench_with_input(BenchmarkId::new("hwf2q", n), &n, |b, _| {
            b.iter(|| {
                k = k.wrapping_add(7919);
                native_round(&mut s, k % n as u32, 1 + (k as u64 % 2));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, group_events);
criterion_main!(benches);
