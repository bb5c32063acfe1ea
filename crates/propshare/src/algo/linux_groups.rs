//! Linux group scheduling's per-CPU group shares (`CONFIG_FAIR_GROUP_SCHED`,
//! cgroup v2 `cpu.weight`) over the CFS and EEVDF models of [`super::linux`]:
//! the approximation Linux makes, modelled so that its error can be measured
//! beside the exact adapter ([`crate::groups::Flattener`]) and lazy
//! flattening ([`crate::groups::Flattening::Lazy`]). Registry names
//! `cfs+tg` and `eevdf+tg` (a task group is the kernel's `struct task_group`).
//!
//! # The rule (kernel/sched/fair.c)
//!
//! A task group g has `tg->shares`, here its weight times `NICE_0_LOAD`
//! (cgroup v2's `cpu.weight` 100 is 1024 shares), and one group entity per
//! CPU i, queued in its parent's runqueue on i while g has a runnable task
//! on i. `update_cfs_group` sets that entity's weight with
//! `calc_group_shares`:
//!
//! ```text
//!     se(g, i) = clamp(shares_g · L(g, i) / Σ_j L(g, j),  MIN_SHARES, shares_g)
//! ```
//!
//! with `MIN_SHARES` = 2, where, as the kernel computes them,
//!
//! * `L(g, i) = max(load.weight, load_avg)` of g's runqueue on CPU i:
//!   `load.weight` is the weight of the entities queued there now (its
//!   runnable tasks on i, `NICE_0_LOAD` per unit of weight, and its child
//!   groups' entities on i); `load_avg` is the sum of their PELT load
//!   averages, which include *blocked* load: a task that sleeps keeps its
//!   average on the CPU it last ran on, decaying by half every 32 ms;
//! * `Σ_j L(g, j)` is `tg->load_avg - contrib_i + L(g, i)`: the other CPUs'
//!   averages and this CPU's `L`.
//!
//! PELT (kernel/sched/pelt.c) is modelled per task at its period of 1024
//! µs (2^20 ns here): a task's average moves toward its weight while it is
//! runnable and toward 0 while it sleeps, by `decay_load`'s factor `y^n`
//! (`y^32 = 1/2`, the kernel's `runnable_avg_yN_inv` table) over the n
//! periods between events; it starts at its weight
//! (`init_entity_runnable_average`) and moves with the task when it
//! migrates (`attach/detach_entity_load_avg`). A group entity's average is
//! taken as its current weight (the kernel averages it too: one lag less).
//! The kernel also rate-limits `tg->load_avg` updates (a change under 1/64
//! is not propagated); the model propagates every change.
//!
//! Each CPU then runs its own hierarchy. The model flattens it per CPU: a
//! task's weight on its CPU is its fraction of that CPU's root load,
//!
//! ```text
//!     e(c) = w_c · NICE_0_LOAD · Π over the groups g on its path of  se(g, i) / L(g, i)
//! ```
//!
//! rounded down level by level (at least 1, at most [`Weight::MAX`]), and
//! the flat per-CPU scheduler (`cfs` or `eevdf`, with its wake-up placement
//! and load balancing, which compare these root loads as the kernel's does)
//! is given `e(c)` by `set_weight` whenever it changes. Linux picks
//! hierarchically (a group entity, then inside it); between events, on one
//! CPU, that gives each task the same fraction as the flat pick on `e(c)`.
//!
//! # Its error
//!
//! On instantaneous loads the rule would be exact up to rounding:
//! `se(g, i) / L(g, i) = shares_g / Σ_j L(g, j)` is the same on every CPU, so
//! `e(c)` is the static hierarchical share the exact adapter gives, and the
//! two decide alike while no task sleeps (test:
//! `cpu_bound_tenants_get_the_exact_shares`). The error is the averages': a
//! group whose tasks sleep keeps their blocked load on the CPUs they left,
//! which inflates `Σ_j L(g, j)`, so its entity on the CPU where one of them
//! runs weighs less than the group's share; the group falls behind its
//! entitlement while its tasks wake and sleep
//! (`scenarios/groups/percpu-shares.toml`). No global bound exists.
//!
//! # Cost
//!
//! O(G · P + N · depth) per event: every event recomputes every runnable
//! client's weight (a model for measurement, not a fast path).

use crate::algo::linux::{FairRq, LinuxSched, NICE_0_LOAD};
use crate::groups::{GroupError, GroupId, GroupTree, Hierarchical, ROOT};
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::roster::ClientTable;
use crate::scheduler::{Decision, Kick, Scheduler};

/// `MIN_SHARES` of kernel/sched/fair.c (`2UL`, unscaled).
pub const MIN_SHARES: u128 = 2;

/// PELT's period, 1024 µs in the kernel: here 2^20 ns.
pub const PELT_PERIOD_SHIFT: u32 = 20;

/// `y^n · 2^32` for n < 32, `y^32 = 1/2` (kernel/sched/sched-pelt.h).
const RUNNABLE_AVG_YN_INV: [u64; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796, 0xd744fcc9,
    0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46, 0xb504f333, 0xb123f581,
    0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9, 0x9837f050, 0x94f4efa8, 0x91c3d373,
    0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// `decay_load(val, n)` of kernel/sched/pelt.c: `val · y^n`.
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > 63 * 32 {
        return 0;
    }
    let val = val >> (n / 32);
    ((val as u128 * RUNNABLE_AVG_YN_INV[(n % 32) as usize] as u128) >> 32) as u64
}

/// A task's load average moved `n` periods toward `target`.
fn toward(avg: u64, target: u64, n: u64) -> u64 {
    if avg >= target {
        target + decay_load(avg - target, n)
    } else {
        target - decay_load(target - avg, n)
    }
}

/// A Linux-like scheduler of policy `R` with per-CPU group shares.
#[derive(Clone, Debug)]
pub struct LinuxGroups<R: FairRq> {
    name: String,
    inner: LinuxSched<R>,
    tree: GroupTree,
    /// Where a client not joined yet will join.
    placed: ClientTable<GroupId>,
    /// The weight last given to the inner scheduler.
    issued: ClientTable<Weight>,
    /// Each joined task's PELT load average (`NICE_0_LOAD` per unit weight).
    load_avg: ClientTable<u64>,
    /// The PELT period the averages were last brought to.
    period: u64,
}

impl<R: FairRq> LinuxGroups<R> {
    /// Per-CPU group shares over `inner`, named `inner`'s name + `+tg`.
    pub fn new(inner: LinuxSched<R>) -> Self {
        LinuxGroups {
            name: format!("{}+tg", inner.name()),
            inner,
            tree: GroupTree::new(),
            placed: ClientTable::new(),
            issued: ClientTable::new(),
            load_avg: ClientTable::new(),
            period: 0,
        }
    }

    /// Bring every task's average to `now`, each over the periods since
    /// the last event in the state it had since then. O(N).
    fn advance(&mut self, now: Time) {
        let period = now >> PELT_PERIOD_SHIFT;
        let n = period.saturating_sub(self.period);
        self.period = self.period.max(period);
        if n == 0 {
            return;
        }
        let tasks: Vec<(ClientId, u64)> = self.load_avg.iter().map(|(c, &a)| (c, a)).collect();
        for (c, avg) in tasks {
            let (_, w, runnable) = self.tree.client(c).expect("an averaged task is in the tree");
            let target = if runnable { w.get() * NICE_0_LOAD } else { 0 };
            self.load_avg.insert(c, toward(avg, target, n));
        }
    }

    /// Every runnable client's weight on its CPU (module docs), in client order.
    pub fn weights(&self) -> Vec<(ClientId, Weight)> {
        let cpus = self.inner.roster().cpus();
        let groups = self.tree.len();
        // Groups children first: a walk from the root, reversed.
        let mut order = vec![ROOT];
        let mut k = 0;
        while k < order.len() {
            order.extend_from_slice(self.tree.children(order[k]));
            k += 1;
        }
        let on_cpu = |c: ClientId| self.inner.policy().cpu_of(c).filter(|&i| i < cpus);
        // Per (group, CPU): load.weight (queued now), load_avg, and the group entity's weight.
        let mut load = vec![0u128; groups * cpus];
        let mut avg = vec![0u128; groups * cpus];
        let mut se = vec![0u128; groups * cpus];
        for &g in order.iter().rev() {
            let row = g.0 as usize * cpus;
            for &c in self.tree.members(g) {
                let (Some((_, w, runnable)), Some(i)) = (self.tree.client(c), on_cpu(c)) else { continue };
                if runnable {
                    load[row + i] += w.get() as u128 * NICE_0_LOAD as u128;
                }
                avg[row + i] += self.load_avg.get(c).copied().unwrap_or(0) as u128;
            }
            for &h in self.tree.children(g) {
                let hrow = h.0 as usize * cpus;
                let tg_load_avg: u128 = avg[hrow..hrow + cpus].iter().sum();
                let shares = self.tree.weight(h).get() as u128 * NICE_0_LOAD as u128;
                for i in 0..cpus {
                    // calc_group_shares: load = max(load.weight, load_avg);
                    // tg_weight = tg->load_avg - contrib + load.
                    let l = load[hrow + i].max(avg[hrow + i]);
                    if l == 0 {
                        continue;
                    }
                    let tg_weight = tg_load_avg - avg[hrow + i] + l;
                    se[hrow + i] = (shares * l / tg_weight).clamp(MIN_SHARES, shares);
                    avg[row + i] += se[hrow + i];
                    if load[hrow + i] > 0 {
                        load[row + i] += se[hrow + i];
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (c, _) in self.issued.iter() {
            let (Some((g, w, true)), Some(i)) = (self.tree.client(c), on_cpu(c)) else { continue };
            let mut e = w.get() as u128 * NICE_0_LOAD as u128;
            for h in self.tree.path(g) {
                let k = h.0 as usize * cpus + i;
                e = e * se[k] / load[k];
            }
            let e = e.clamp(1, Weight::MAX as u128) as u64;
            out.push((c, Weight::new(e).expect("clamped to a weight")));
        }
        out
    }

    /// Give the inner scheduler every weight that changed.
    fn update(&mut self, now: Time) -> Result<(), SchedError> {
        for (c, w) in self.weights() {
            if self.issued.get(c) != Some(&w) {
                self.inner.set_weight(now, c, w)?;
                self.issued.insert(c, w);
            }
        }
        Ok(())
    }

    fn tree_event(
        &mut self,
        now: Time,
        f: impl FnOnce(&mut GroupTree) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        self.advance(now);
        f(&mut self.tree)?;
        self.update(now).map_err(|e| GroupError::Refused(e.to_string()))
    }
}

impl<R: FairRq> Hierarchical for LinuxGroups<R> {
    fn add_group(&mut self, parent: GroupId, weight: Weight) -> Result<GroupId, GroupError> {
        self.tree.add_group(parent, weight)
    }

    fn set_group_weight(&mut self, now: Time, g: GroupId, weight: Weight) -> Result<(), GroupError> {
        self.tree_event(now, |t| t.set_group_weight(g, weight))
    }

    fn place(&mut self, now: Time, c: ClientId, g: GroupId) -> Result<(), GroupError> {
        if self.tree.client(c).is_none() {
            self.tree.check_group(g)?;
            self.placed.insert(c, g);
            return Ok(());
        }
        self.tree_event(now, |t| t.move_client(c, g))
    }

    fn move_group(&mut self, now: Time, g: GroupId, parent: GroupId) -> Result<(), GroupError> {
        self.tree_event(now, |t| t.move_group(g, parent))
    }
}

impl<R: FairRq + Send + 'static> Scheduler for LinuxGroups<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn work_conserving(&self) -> bool {
        self.inner.work_conserving()
    }

    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.advance(now);
        // It joins at its own weight in load units (as a root task would),
        // then gets its share on the CPU it was placed on.
        let own = (w.get() * NICE_0_LOAD).min(Weight::MAX);
        let kick = self.inner.join(now, c, Weight::new(own).expect("clamped to a weight"))?;
        let g = self.placed.remove(c).unwrap_or(ROOT);
        self.tree.join(c, g, w).expect("the shell admitted a new client into a known group");
        self.issued.insert(c, Weight::new(own).expect("clamped to a weight"));
        self.load_avg.insert(c, own);
        self.update(now)?;
        Ok(kick)
    }

    fn leave(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        self.inner.leave(now, c)?;
        self.advance(now);
        self.gone(c);
        self.update(now)
    }

    fn block(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        self.inner.block(now, c)?;
        self.set_runnable(now, c, false)
    }

    fn wake(&mut self, now: Time, c: ClientId) -> Result<Kick, SchedError> {
        let kick = self.inner.wake(now, c)?;
        self.set_runnable(now, c, true)?;
        Ok(kick)
    }

    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        // Checked by the inner shell first (an unknown client is refused there).
        let issued = self.issued.get(c).copied().unwrap_or(w);
        self.inner.set_weight(now, c, issued)?;
        self.advance(now);
        self.tree.set_weight(c, w).expect("a joined client");
        self.update(now)
    }

    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        // A pick may balance (move tasks between CPUs): shares follow.
        let d = self.inner.pick(now, cpu)?;
        self.advance(now);
        self.update(now)?;
        Ok(d)
    }

    fn stopped(&mut self, now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        self.inner.stopped(now, cpu, c, ran, why)?;
        self.advance(now);
        match why {
            StopReason::Left => self.gone(c),
            StopReason::Blocked => self.tree.set_runnable(c, false).expect("a joined client"),
            StopReason::Expired | StopReason::Preempted => {}
        }
        self.update(now)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()?;
        self.tree.check_invariants()
    }

    fn hierarchical(&mut self) -> Option<&mut dyn Hierarchical> {
        Some(self)
    }
}

impl<R: FairRq> LinuxGroups<R> {
    /// `c` blocked or woke (the inner scheduler has been told): its group
    /// entities' loads follow.
    fn set_runnable(&mut self, now: Time, c: ClientId, runnable: bool) -> Result<(), SchedError> {
        self.advance(now);
        self.tree.set_runnable(c, runnable).expect("a joined client");
        self.update(now)
    }

    fn gone(&mut self, c: ClientId) {
        self.tree.leave(c).expect("a joined client");
        self.issued.remove(c);
        self.load_avg.remove(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::cfs::Cfs;
    use crate::groups::{Flattener, GroupTree};
    use crate::model::MS;
    use crate::scheduler::SchedConfig;

    fn w(x: u64) -> Weight {
        Weight::new(x).unwrap()
    }

    /// Groups `weights` at the top, client i joining group `of[i]` (1-based).
    fn build(cpus: usize, weights: &[u64], of: &[u32]) -> LinuxGroups<crate::algo::cfs::CfsRq> {
        let mut s = LinuxGroups::new(Cfs::new(SchedConfig::new(cpus, 10 * MS)));
        for &x in weights {
            s.add_group(ROOT, w(x)).unwrap();
        }
        for (i, &g) in of.iter().enumerate() {
            s.place(0, ClientId(i as u32), GroupId(g)).unwrap();
            s.join(0, ClientId(i as u32), w(1)).unwrap();
        }
        s
    }

    /// The issue's tree (1:3, one and eight CPU-bound clients, 2 CPUs):
    /// with every load average at its weight, each client's weight on its
    /// CPU is proportional to the exact adapter's static share, through the
    /// picks and balancing of a run. Fails if a group entity's weight is
    /// split by anything but its own load.
    #[test]
    fn cpu_bound_tenants_get_the_exact_shares() {
        let of = [1, 2, 2, 2, 2, 2, 2, 2, 2];
        let mut s = build(2, &[1, 3], &of);
        let mut tree = GroupTree::new();
        tree.add_group(ROOT, w(1)).unwrap();
        tree.add_group(ROOT, w(3)).unwrap();
        for (i, &g) in of.iter().enumerate() {
            tree.join(ClientId(i as u32), GroupId(g), w(1)).unwrap();
        }
        let exact: Vec<u64> = {
            let mut e = Flattener::new(tree).effective().unwrap();
            e.sort();
            e.into_iter().map(|(_, x)| x.get()).collect()
        };
        let mut now = 0;
        for _ in 0..50 {
            for k in 0..2 {
                if let Decision::Run { client, slice } = s.pick(now, CpuId(k)).unwrap() {
                    s.stopped(now + slice, CpuId(k), client, slice, StopReason::Expired).unwrap();
                }
            }
            now += 10 * MS;
            let got: Vec<u64> = s.weights().into_iter().map(|(_, x)| x.get()).collect();
            assert_eq!(got.len(), exact.len());
            for i in 0..got.len() {
                assert_eq!(got[i] * exact[0], got[0] * exact[i], "at {now}: {got:?} against {exact:?}");
            }
        }
        s.check_invariants().unwrap();
    }

    /// A(1) {a0, a1}, B(1) {b0, b1} on 2 CPUs, a0 and a1 on different CPUs:
    /// when a1 sleeps, its load average stays on its CPU and counts in A's
    /// total, so a0's weight (A's entity on a0's CPU) is half A's shares at
    /// once, two thirds after one half-life (32 periods), and A's whole
    /// shares only as the blocked load decays away; the exact adapter gives
    /// a0 all of A's share at once.
    #[test]
    fn blocked_load_lowers_a_groups_entity() {
        let mut s = build(2, &[1, 1], &[1, 1, 2, 2]);
        let cpu = |s: &LinuxGroups<_>, c: u32| s.inner.policy().cpu_of(ClientId(c)).unwrap();
        assert_ne!(cpu(&s, 0), cpu(&s, 1), "a0 and a1 start on different CPUs");
        let weight_of =
            |s: &LinuxGroups<_>, c: u32| s.weights().into_iter().find(|x| x.0 == ClientId(c)).unwrap().1.get();
        assert_eq!(weight_of(&s, 0), 512, "each of A's two entities has half its shares");
        s.block(0, ClientId(1)).unwrap();
        assert_eq!(weight_of(&s, 0), 512, "a1's blocked load is still all there");
        let period = 1 << PELT_PERIOD_SHIFT;
        s.set_weight(32 * period, ClientId(3), w(1)).unwrap();
        // a1's average halved: se = 1024 · 1024 / (512 + 1024).
        assert_eq!(weight_of(&s, 0), 1024 * 1024 / (decay_load(1024, 32) + 1024));
        s.set_weight(2000 * period, ClientId(3), w(1)).unwrap();
        assert_eq!(weight_of(&s, 0), 1024, "the blocked load has decayed away");
        s.check_invariants().unwrap();
    }

    /// `decay_load` halves every 32 periods and follows the kernel's table.
    #[test]
    fn decay_load_halves_every_32_periods() {
        assert_eq!(decay_load(1 << 20, 32), (1 << 19) - 1);
        assert_eq!(decay_load(1024, 0), 1023);
        assert!(decay_load(1024, 16) > 723 && decay_load(1024, 16) < 725);
        assert_eq!(decay_load(u64::MAX, 64 * 32), 0);
    }
}
