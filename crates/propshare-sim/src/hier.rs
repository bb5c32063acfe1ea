//! The hierarchical fluid reference: [`crate::fluid`]'s GMS model on a tree
//! of groups ([`propshare::groups`]), with readjustment at every level.
//!
//! # The model
//!
//! The root is entitled to `E = min(P, n)` CPUs for n runnable clients. A
//! group g entitled to `E_g` CPUs divides them among its active children
//! (runnable clients, and child groups with a runnable client) by weight,
//! where no child may take more than its *cap*: one CPU for a client, its
//! runnable-client count for a group. Water-filling, as SFS's readjustment
//! ([`propshare::readjust`]) but with caps: walk the children in
//! non-increasing `w / cap` order; child x is capped while
//!
//! ```text
//!     w_x · (E_g − C) > cap_x · R        (C: caps taken so far, R: weight left)
//! ```
//!
//! and then gets exactly `cap_x` CPUs; every other child gets
//! `w_x · (E_g − C) / R`. A capped group's children then share exactly its
//! cap, so each of its runnable clients gets one CPU. The test is exact
//! (big rationals); entitlements are rational below the root.
//!
//! On a one-level tree (every client at the root) this is exactly the flat
//! readjustment (the same clients are capped: the test is the same and ties
//! are all capped or none, since capping one tie keeps the test true for the
//! next), and the service computed below is the same number.
//!
//! # Service in fixed point
//!
//! As in [`crate::fluid`], service is in `2^-64` ns. Between events, group g
//! keeps a normalised service `V_g` for its uncapped children: over an
//! advance of `dt` ns, with `S_g` the service of g in it,
//!
//! ```text
//!     S_root = E · dt,   S_g = cap_g · dt (capped),   S_g = w_g · ΔV_parent (uncapped)
//!     ΔV_g   = floor((S_g − C_g · dt) / R_g)
//! ```
//!
//! and an uncapped client's service grows by `w · ΔV_g`, a capped one's by
//! `dt`. At the root this is `floor((E − m) · dt / R)`, the flat reference's
//! step, so a one-level tree gives the same numbers (test
//! `hier::tests::one_level_equals_flat`). Each level rounds down by less
//! than one unit per advance.
//!
//! # Cost
//!
//! An advance is O(G) for G groups. An event (join, leave, block, wake,
//! weight change, move) settles every client and recomputes the laws from
//! the root: O(N + G log G) with big-rational tests at each group. Scenarios
//! without groups keep [`crate::fluid::Fluid`] (O(P + log N) per event).

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Zero};
use propshare::groups::{GroupError, GroupId, GroupTree, ROOT};
use propshare::{ClientId, ClientTable, Time, Weight};

use crate::fluid::{service_of_ns, Service, FRAC};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Law {
    /// Not active: no service.
    Off,
    /// Exactly its cap (CPUs) all the time.
    Capped,
    /// `w · ΔV_parent`.
    Share,
}

#[derive(Clone, Copy, Debug)]
struct Leaf {
    law: Law,
    base: Service,
    v_mark: u128,
    t_mark: Time,
}

#[derive(Clone, Debug)]
struct Node {
    law: Law,
    /// Σ caps of the capped children (CPUs).
    capped_cpus: u64,
    /// Σ weights of the uncapped active children.
    free_weight: u64,
    /// Entitlement (CPUs), exact.
    entitled: BigRational,
    v: u128,
    /// This step's ΔV (scratch for the children).
    dv: u128,
    /// Service of the group so far.
    served: Service,
}

/// The hierarchical fluid reference for one run.
#[derive(Clone, Debug)]
pub struct HierFluid {
    cpus: usize,
    tree: GroupTree,
    nodes: Vec<Node>,
    leaves: ClientTable<Leaf>,
    /// Groups, parents before children.
    order: Vec<GroupId>,
    last: Time,
}

impl HierFluid {
    /// A reference on `cpus` CPUs for the groups of `tree` (no clients yet).
    pub fn new(cpus: usize, tree: GroupTree) -> HierFluid {
        let node = Node {
            law: Law::Off,
            capped_cpus: 0,
            free_weight: 0,
            entitled: BigRational::zero(),
            v: 0,
            dv: 0,
            served: 0,
        };
        let mut f = HierFluid {
            cpus,
            nodes: vec![node; tree.len()],
            tree,
            leaves: ClientTable::new(),
            order: Vec::new(),
            last: 0,
        };
        f.relaw();
        f
    }

    /// The tree as the reference sees it.
    pub fn tree(&self) -> &GroupTree {
        &self.tree
    }

    fn advance(&mut self, now: Time) {
        debug_assert!(now >= self.last, "fluid time went backwards");
        if now > self.last {
            let dt = ((now - self.last) as u128) << FRAC;
            for k in 0..self.order.len() {
                let g = self.order[k];
                let s = match self.nodes[g.0 as usize].law {
                    Law::Off => 0,
                    _ if g == ROOT => dt * self.tree.runnable(ROOT).min(self.cpus as u64) as u128,
                    Law::Capped => dt * self.tree.runnable(g) as u128,
                    Law::Share => self.tree.weight(g).get() as u128 * self.nodes[self.tree.parent(g).0 as usize].dv,
                };
                let n = &mut self.nodes[g.0 as usize];
                n.served += s;
                n.dv = match n.free_weight {
                    0 => 0,
                    r => s.saturating_sub(dt * n.capped_cpus as u128) / r as u128,
                };
                n.v += n.dv;
            }
        }
        self.last = self.last.max(now);
    }

    fn value(&self, c: ClientId, now: Time) -> Service {
        let Some(l) = self.leaves.get(c) else { return 0 };
        match l.law {
            Law::Off => l.base,
            Law::Capped => l.base + service_of_ns(now - l.t_mark),
            Law::Share => {
                let (g, w, _) = self.tree.client(c).expect("a leaf of the reference is in the tree");
                l.base + w.get() as u128 * (self.nodes[g.0 as usize].v - l.v_mark)
            }
        }
    }

    /// Settle every client at the last advance, before the tree changes.
    fn settle_all(&mut self) {
        let now = self.last;
        let ids: Vec<ClientId> = self.leaves.iter().map(|(c, _)| c).collect();
        for c in ids {
            let base = self.value(c, now);
            self.leaves.get_mut(c).expect("listed").base = base;
        }
    }

    /// After the tree changed: every client's rate law starts afresh now,
    /// from the V of its (possibly new) group.
    fn remark(&mut self) {
        let now = self.last;
        let ids: Vec<ClientId> = self.leaves.iter().map(|(c, _)| c).collect();
        for c in ids {
            let v = self.tree.client(c).map_or(0, |(g, _, _)| self.nodes[g.0 as usize].v);
            let l = self.leaves.get_mut(c).expect("listed");
            (l.v_mark, l.t_mark) = (v, now);
        }
    }

    /// Recompute every law from the root (module docs), after the tree changed.
    fn relaw(&mut self) {
        for n in &mut self.nodes {
            n.law = Law::Off;
        }
        let ids: Vec<ClientId> = self.leaves.iter().map(|(c, _)| c).collect();
        for c in ids {
            self.leaves.get_mut(c).expect("listed").law = Law::Off;
        }
        self.order.clear();
        let root_cpus = self.tree.runnable(ROOT).min(self.cpus as u64);
        self.nodes[0].entitled = BigRational::from_integer(BigInt::from(root_cpus));
        self.nodes[0].law = if root_cpus > 0 { Law::Share } else { Law::Off };
        let mut stack = vec![ROOT];
        while let Some(g) = stack.pop() {
            self.order.push(g);
            self.split(g);
            for &h in self.tree.children(g).iter().rev() {
                stack.push(h);
            }
        }
    }

    /// Water-fill g's entitlement over its active children (module docs).
    fn split(&mut self, g: GroupId) {
        #[derive(Clone, Copy)]
        enum Child {
            Client(ClientId),
            Group(GroupId),
        }
        let mut kids: Vec<(u64, u64, Child)> = Vec::new();
        if self.nodes[g.0 as usize].law != Law::Off {
            for &c in self.tree.members(g) {
                if let Some((_, w, true)) = self.tree.client(c) {
                    kids.push((w.get(), 1, Child::Client(c)));
                }
            }
            for &h in self.tree.children(g) {
                if self.tree.runnable(h) > 0 {
                    kids.push((self.tree.weight(h).get(), self.tree.runnable(h), Child::Group(h)));
                }
            }
        }
        // Non-increasing w / cap (stable: members, then groups, in tree order).
        kids.sort_by(|a, b| (b.0 as u128 * a.1 as u128).cmp(&(a.0 as u128 * b.1 as u128)));
        let entitled = self.nodes[g.0 as usize].entitled.clone();
        let mut capped_cpus = 0u64;
        let mut free: u64 = kids.iter().map(|k| k.0).sum();
        let mut first_free = kids.len();
        for (k, &(w, cap, _)) in kids.iter().enumerate() {
            let left = &entitled - BigRational::from_integer(BigInt::from(capped_cpus));
            if left * BigInt::from(w) > BigRational::from_integer(BigInt::from(cap) * BigInt::from(free)) {
                capped_cpus += cap;
                free -= w;
            } else {
                first_free = k;
                break;
            }
        }
        let share = if free > 0 {
            (&entitled - BigRational::from_integer(BigInt::from(capped_cpus))) / BigInt::from(free)
        } else {
            BigRational::zero()
        };
        let n = &mut self.nodes[g.0 as usize];
        (n.capped_cpus, n.free_weight) = (capped_cpus, free);
        for (k, &(w, cap, child)) in kids.iter().enumerate() {
            let law = if k < first_free { Law::Capped } else { Law::Share };
            match child {
                Child::Client(c) => self.leaves.get_mut(c).expect("a runnable member has a leaf").law = law,
                Child::Group(h) => {
                    let n = &mut self.nodes[h.0 as usize];
                    n.law = law;
                    n.entitled = match law {
                        Law::Capped => BigRational::from_integer(BigInt::from(cap)),
                        _ => &share * BigInt::from(w),
                    };
                }
            }
        }
    }

    /// Apply a change to the tree at `now`: advance, settle, change, relaw.
    fn change(
        &mut self,
        now: Time,
        f: impl FnOnce(&mut GroupTree) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        self.advance(now);
        self.settle_all();
        let changed = f(&mut self.tree);
        self.remark();
        self.relaw();
        changed
    }

    /// Client `c` joins group `g`, runnable, with weight `w`, at `now`.
    pub fn join(&mut self, now: Time, c: ClientId, g: GroupId, w: Weight) -> Result<(), GroupError> {
        self.leaves.insert(c, Leaf { law: Law::Off, base: 0, v_mark: 0, t_mark: now });
        self.change(now, |t| t.join(c, g, w))
    }

    /// Client `c` leaves at `now`; returns its final ideal service.
    pub fn leave(&mut self, now: Time, c: ClientId) -> Service {
        let ideal = self.ideal(now, c);
        let _ = self.change(now, |t| t.leave(c));
        self.leaves.remove(c);
        ideal
    }

    /// Client `c` blocks at `now`.
    pub fn block(&mut self, now: Time, c: ClientId) {
        let _ = self.change(now, |t| t.set_runnable(c, false));
    }

    /// Client `c` wakes at `now`.
    pub fn wake(&mut self, now: Time, c: ClientId) {
        let _ = self.change(now, |t| t.set_runnable(c, true));
    }

    /// Client `c`'s weight becomes `w` at `now`.
    pub fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) {
        let _ = self.change(now, |t| t.set_weight(c, w));
    }

    /// Group `g`'s weight becomes `w` at `now`.
    pub fn set_group_weight(&mut self, now: Time, g: GroupId, w: Weight) -> Result<(), GroupError> {
        self.change(now, |t| t.set_group_weight(g, w))
    }

    /// Client `c` moves to group `g` at `now`.
    pub fn move_client(&mut self, now: Time, c: ClientId, g: GroupId) -> Result<(), GroupError> {
        self.change(now, |t| t.move_client(c, g))
    }

    /// Group `g` moves, with its subtree, under `parent` at `now` (refused,
    /// the tree unchanged: the root, a cycle, too deep a tree).
    pub fn move_group(&mut self, now: Time, g: GroupId, parent: GroupId) -> Result<(), GroupError> {
        self.change(now, |t| t.move_group(g, parent))
    }

    /// Client `c`'s ideal service from its join to `now` (`now` ≥ the last event).
    pub fn ideal(&mut self, now: Time, c: ClientId) -> Service {
        self.advance(now);
        self.value(c, now)
    }

    /// Group `g`'s ideal service from the start to `now`.
    pub fn group_ideal(&mut self, now: Time, g: GroupId) -> Service {
        self.advance(now);
        self.nodes[g.0 as usize].served
    }

    /// Client `c`'s current ideal rate in CPUs, exact.
    pub fn rate(&self, c: ClientId) -> BigRational {
        let (Some(l), Some((g, w, _))) = (self.leaves.get(c), self.tree.client(c)) else { return BigRational::zero() };
        match l.law {
            Law::Off => BigRational::zero(),
            Law::Capped => BigRational::one(),
            Law::Share => {
                let n = &self.nodes[g.0 as usize];
                (&n.entitled - BigRational::from_integer(BigInt::from(n.capped_cpus))) * BigInt::from(w.get())
                    / BigInt::from(n.free_weight)
            }
        }
    }

    /// Group `g`'s current ideal rate in CPUs, exact.
    pub fn group_rate(&self, g: GroupId) -> BigRational {
        match self.nodes[g.0 as usize].law {
            Law::Off => BigRational::zero(),
            _ => self.nodes[g.0 as usize].entitled.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::Fluid;
    use proptest::prelude::*;

    fn w(x: u64) -> Weight {
        Weight::new(x).unwrap()
    }

    #[derive(Clone, Debug)]
    enum Op {
        Join(u64),
        Toggle(usize),
        Leave(usize),
        Reweigh(usize, u64),
        GroupWeight(usize, u64),
        /// Client i moves to group k.
        MoveClient(usize, usize),
        /// Group i moves under group k (refused for a cycle or depth).
        MoveGroup(usize, usize),
        /// Group i leaves with its clients: every client below it leaves.
        GroupLeave(usize),
    }

    fn op() -> impl Strategy<Value = (Time, Op)> {
        let o = prop_oneof![
            (1u64..50).prop_map(Op::Join),
            (0usize..64).prop_map(Op::Toggle),
            (0usize..64).prop_map(Op::Leave),
            (0usize..64, 1u64..50).prop_map(|(i, x)| Op::Reweigh(i, x)),
            (0usize..8, 1u64..20).prop_map(|(i, x)| Op::GroupWeight(i, x)),
            (0usize..64, 0usize..8).prop_map(|(i, k)| Op::MoveClient(i, k)),
            (0usize..8, 0usize..8).prop_map(|(i, k)| Op::MoveGroup(i, k)),
            (0usize..8).prop_map(Op::GroupLeave),
        ];
        (0u64..5_000_000, o)
    }

    /// A random tree of `n` groups (each under an earlier one or the root).
    fn tree_of(parents: &[(usize, u64)]) -> GroupTree {
        let mut t = GroupTree::new();
        for &(p, x) in parents {
            let parent = GroupId((p % t.len()) as u32);
            let depth = t.path(parent).count();
            let parent = if depth + 1 > propshare::groups::MAX_DEPTH as usize { ROOT } else { parent };
            t.add_group(parent, w(x)).unwrap();
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Shares sum to min(P, runnable), none above one CPU, every group's
        /// rate is the sum of its children's, at every step of a random run.
        #[test]
        fn shares_are_feasible_and_complete(
            cpus in 1usize..6,
            parents in proptest::collection::vec((0usize..8, 1u64..20), 0..7),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let tree = tree_of(&parents);
            let groups = tree.len();
            let mut f = HierFluid::new(cpus, tree);
            let (mut now, mut next) = (0, 0u32);
            let mut present: Vec<ClientId> = Vec::new();
            for (dt, o) in ops {
                now += dt;
                match o {
                    Op::Join(x) => {
                        let g = GroupId(next % groups as u32);
                        f.join(now, ClientId(next), g, w(x)).unwrap();
                        present.push(ClientId(next));
                        next += 1;
                    }
                    Op::Toggle(i) if !present.is_empty() => {
                        let c = present[i % present.len()];
                        if f.tree().client(c).unwrap().2 { f.block(now, c) } else { f.wake(now, c) }
                    }
                    Op::Leave(i) if !present.is_empty() => {
                        let c = present.remove(i % present.len());
                        f.leave(now, c);
                    }
                    Op::Reweigh(i, x) if !present.is_empty() => f.set_weight(now, present[i % present.len()], w(x)),
                    Op::GroupWeight(i, x) if groups > 1 => {
                        f.set_group_weight(now, GroupId(1 + (i % (groups - 1)) as u32), w(x)).unwrap()
                    }
                    Op::MoveClient(i, k) if !present.is_empty() => {
                        let c = present[i % present.len()];
                        f.move_client(now, c, GroupId((k % groups) as u32)).unwrap();
                    }
                    Op::MoveGroup(i, k) if groups > 1 => {
                        let (g, p) = (GroupId(1 + (i % (groups - 1)) as u32), GroupId((k % groups) as u32));
                        let before = f.tree().clone();
                        if let Err(e) = f.move_group(now, g, p) {
                            // Refused only for a cycle or depth, and then nothing changed.
                            prop_assert!(matches!(e, GroupError::Cycle(..) | GroupError::TooDeep(_)), "{}", e);
                            prop_assert_eq!(format!("{:?}", f.tree()), format!("{:?}", before));
                        }
                        f.tree().check_invariants().map_err(TestCaseError::fail)?;
                    }
                    Op::GroupLeave(i) if groups > 1 => {
                        let g = GroupId(1 + (i % (groups - 1)) as u32);
                        let below = |t: &GroupTree, c: ClientId| t.client(c).is_some_and(|(h, _, _)| h == g || t.path(h).any(|x| x == g));
                        let leaving: Vec<ClientId> = present.iter().copied().filter(|&c| below(f.tree(), c)).collect();
                        for c in leaving {
                            f.leave(now, c);
                            present.retain(|&x| x != c);
                        }
                        prop_assert_eq!(f.group_rate(g), BigRational::zero());
                    }
                    _ => {}
                }
                let runnable = f.tree().runnable(ROOT);
                let total: BigRational = present.iter().map(|&c| f.rate(c)).sum();
                prop_assert_eq!(total, BigRational::from_integer(BigInt::from(runnable.min(cpus as u64))));
                for &c in &present {
                    prop_assert!(f.rate(c) <= BigRational::one(), "client above one CPU");
                }
                for k in 1..groups {
                    let g = GroupId(k as u32);
                    let kids: BigRational = f.tree().members(g).iter().map(|&c| f.rate(c)).sum::<BigRational>()
                        + f.tree().children(g).iter().map(|&h| f.group_rate(h)).sum::<BigRational>();
                    prop_assert_eq!(f.group_rate(g), kids, "group {}", k);
                }
            }
        }

        /// A one-level tree gives exactly the flat reference's numbers.
        #[test]
        fn one_level_equals_flat(
            cpus in 1usize..6,
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut h = HierFluid::new(cpus, GroupTree::new());
            let mut f = Fluid::new(cpus);
            let (mut now, mut next) = (0, 0u32);
            let mut present: Vec<ClientId> = Vec::new();
            let mut runnable: Vec<bool> = Vec::new();
            for (dt, o) in ops {
                now += dt;
                match o {
                    Op::Join(x) => {
                        h.join(now, ClientId(next), ROOT, w(x)).unwrap();
                        f.join(now, ClientId(next), w(x));
                        present.push(ClientId(next));
                        runnable.push(true);
                        next += 1;
                    }
                    Op::Toggle(i) if !present.is_empty() => {
                        let c = present[i % present.len()];
                        let r = &mut runnable[c.index()];
                        if *r { h.block(now, c); f.block(now, c) } else { h.wake(now, c); f.wake(now, c) }
                        *r = !*r;
                    }
                    Op::Leave(i) if !present.is_empty() => {
                        let c = present.remove(i % present.len());
                        prop_assert_eq!(h.leave(now, c), f.leave(now, c));
                    }
                    Op::Reweigh(i, x) if !present.is_empty() => {
                        let c = present[i % present.len()];
                        h.set_weight(now, c, w(x));
                        f.set_weight(now, c, w(x));
                    }
                    _ => {}
                }
                // A sample in between, as the engine takes at quantum ends.
                for &c in &present {
                    prop_assert_eq!(h.ideal(now + 7, c), f.ideal(now + 7, c), "client {}", c);
                    let (num, den) = f.rate(c);
                    prop_assert_eq!(h.rate(c), BigRational::new(BigInt::from(num), BigInt::from(den)));
                }
                now += 7;
            }
        }
    }

    /// `cpus` CPUs and two groups A and B under the root, of weights `wa` and `wb`.
    fn two_groups(cpus: usize, wa: u64, wb: u64) -> (HierFluid, GroupId, GroupId) {
        let mut t = GroupTree::new();
        let a = t.add_group(ROOT, w(wa)).unwrap();
        let b = t.add_group(ROOT, w(wb)).unwrap();
        (HierFluid::new(cpus, t), a, b)
    }

    #[test]
    fn a_capped_subtree_passes_its_excess_to_its_sibling() {
        // 4 CPUs; A(3) has one client, B(1) has three: A is capped at 1 CPU,
        // B gets the other 3 (one each), though its weight is a quarter.
        let (mut f, a, b) = two_groups(4, 3, 1);
        f.join(0, ClientId(0), a, w(1)).unwrap();
        for k in 1..4 {
            f.join(0, ClientId(k), b, w(1)).unwrap();
        }
        assert_eq!(f.group_rate(a), BigRational::one());
        assert_eq!(f.group_rate(b), BigRational::from_integer(BigInt::from(3)));
        assert_eq!(f.ideal(1000, ClientId(2)), service_of_ns(1000));
        assert_eq!(f.group_ideal(1000, b), service_of_ns(3000));
    }

    #[test]
    fn inner_levels_readjust() {
        // 3 CPUs; A(1) {a0 w100, a1 w1}, B(1) {b0, b1}: A and B get 1.5 CPUs
        // each; inside A, a0 is capped at 1 and a1 gets the other half.
        let (mut f, a, b) = two_groups(3, 1, 1);
        f.join(0, ClientId(0), a, w(100)).unwrap();
        f.join(0, ClientId(1), a, w(1)).unwrap();
        f.join(0, ClientId(2), b, w(1)).unwrap();
        f.join(0, ClientId(3), b, w(1)).unwrap();
        let r = |n: i64, d: i64| BigRational::new(BigInt::from(n), BigInt::from(d));
        assert_eq!(f.rate(ClientId(0)), r(1, 1));
        assert_eq!(f.rate(ClientId(1)), r(1, 2));
        assert_eq!(f.rate(ClientId(2)), r(3, 4));
        assert_eq!(f.ideal(4000, ClientId(1)), service_of_ns(2000));
        assert_eq!(f.group_ideal(4000, b), service_of_ns(6000));
    }
}
