//! EEVDF, Linux's fair scheduler since 6.6 (`kernel/sched/fair.c`, Peter
//! Zijlstra 2023, after Stoica and Abdel-Wahab's Earliest Eligible Virtual
//! Deadline First, 1995; the 6.8 form with the tree sorted by deadline), on
//! per-CPU runqueues with the load balancer of [`super::linux`].
//!
//! # Rules (one runqueue)
//!
//! * Virtual runtime as in CFS: running `d` ns at weight `w` adds
//!   `d · NICE_0_LOAD / w` ([`calc_delta_fair`]).
//! * The runqueue's virtual time is the weighted average
//!   `V = Σ w_i v_i / W` over its runnable tasks (the running one included),
//!   kept in relative form (`avg_vruntime`): with `v0` the runqueue's
//!   monotone `min_vruntime`, `sum = Σ w_i (v_i − v0)` and `W = Σ w_i` are
//!   updated on every enqueue and dequeue, and `V = v0 + ⌊sum / W⌋`.
//! * Lag `lag_i = w_i (V − v_i)`; a task is *eligible* iff `V ≥ v_i`, decided
//!   without division as `sum ≥ (v_i − v0) · W` (`vruntime_eligible`).
//! * Every task asks for requests of `r = base_slice` ns; its virtual
//!   deadline is `vd_i = v_i + r · NICE_0_LOAD / w_i`. When a task's `v`
//!   reaches its deadline it gets a new one (`update_deadline`).
//! * Pick (`pick_eevdf`): the eligible task with the earliest virtual
//!   deadline. The tree is sorted by deadline and augmented with each
//!   subtree's minimum `v`, so a search that goes left whenever the left
//!   subtree holds an eligible task finds it in O(log n).
//! * Slice: the task runs until its `v` reaches its deadline (a fresh request
//!   is `r` ns of real time).
//! * Dequeue (sleep, leave, migration) saves `vlag = V − v`, clamped to
//!   `±calc_delta_fair(max(2r, TICK))` (`update_entity_lag`).
//! * Enqueue (`place_entity`): `v = V − vlag · (W + w_i) / W` — the lag is
//!   inflated so that the lag *after* the task joins the average equals the
//!   saved one (`PLACE_LAG`; none when the runqueue is empty); deadline
//!   `v + r·NICE_0_LOAD/w`, half of that for a new task
//!   (`PLACE_DEADLINE_INITIAL`, with `vlag = 0`). Migration is a dequeue on
//!   one runqueue and an enqueue on the other, so lag travels with the task.
//! * Wake-up preemption (`check_preempt_wakeup_fair`): the wakee preempts the
//!   running task if `pick_eevdf` with the running task counted would choose
//!   the wakee; with `RUN_TO_PARITY` an eligible running task keeps the CPU
//!   until its slice ends.
//! * Weight change (`reweight_entity`, 6.13 form): a running task is first
//!   charged what it ran at the old weight (`update_curr`), then its lag
//!   `V − v` (clamped, `update_entity_lag`) and relative deadline are scaled
//!   by `w_old / w_new` and the task is placed again. We charged a running
//!   task's whole run at its new weight until issue 16: dropped from 1000 to
//!   1 mid-slice, it was charged the slice a thousand times over.
//!
//! # Cost
//!
//! pick, stop, join, leave, block, wake, reweight: O(log n) expected on one
//! runqueue (a treap keyed by `(deadline, id)` with deterministic
//! priorities, augmented with subtree `min v`), plus [`super::linux`]'s
//! per-event costs.
//!
//! Gap EEVDF-1: ticks are not modelled: a picked task is given the whole rest of its
//! request as its slice (the kernel reschedules at the first tick after the
//! deadline). (untested)
//!
//! Gap EEVDF-2: `DELAY_DEQUEUE` (6.12: sleepers with negative lag stay queued until
//! eligible), `PLACE_REL_DEADLINE`, `PREEMPT_SHORT` and custom slices
//! (`sched_setattr`) are not modelled; every task's request is `base_slice`. (untested)
//!
//! Gap EEVDF-3: the host's quantum is the base slice r ([`Tunables::for_quantum`]);
//! [`Tunables::kernel_defaults`] gives the kernel's 0.75 ms × (1 + ilog2 P). (untested)
//!
//! Gap EEVDF-4: sums are i128 (the kernel switched to a 128-bit product in
//! `vruntime_eligible` after overflow reports); `min_vruntime` starts at
//! 2^62 and virtual times saturate instead of wrapping. (untested)

use super::cfs::VRUNTIME_START;
use super::linux::{calc_delta_fair, real_for_virtual, Dequeue, Enqueue, Entity, FairRq, LinuxSched, Tunables};
use crate::model::{ClientId, Time};

/// Linux EEVDF on per-CPU runqueues (`eevdf`).
pub type Eevdf = LinuxSched<EevdfRq>;

/// A deadline-ordered treap augmented with subtree minimum virtual runtime.
mod tree {
    use crate::model::ClientId;

    const NIL: u32 = u32::MAX;

    /// One queued task as the tree holds it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Item {
        /// Virtual deadline (the key, then the id).
        pub deadline: u64,
        /// The task.
        pub client: ClientId,
        /// Its virtual runtime.
        pub vruntime: u64,
    }

    #[derive(Clone, Copy, Debug)]
    struct Node {
        item: Item,
        min_v: u64,
        prio: u64,
        left: u32,
        right: u32,
    }

    #[derive(Clone, Debug)]
    pub struct DeadlineTree {
        nodes: Vec<Node>,
        free: Vec<u32>,
        root: u32,
        len: usize,
        seq: u64,
    }

    fn splitmix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    impl DeadlineTree {
        pub fn new() -> Self {
            DeadlineTree { nodes: Vec::new(), free: Vec::new(), root: NIL, len: 0, seq: 0 }
        }

        pub fn len(&self) -> usize {
            self.len
        }

        fn key(&self, i: u32) -> (u64, ClientId) {
            let it = &self.nodes[i as usize].item;
            (it.deadline, it.client)
        }

        fn pull(&mut self, i: u32) {
            let n = self.nodes[i as usize];
            let mut m = n.item.vruntime;
            for child in [n.left, n.right] {
                if child != NIL {
                    m = m.min(self.nodes[child as usize].min_v);
                }
            }
            self.nodes[i as usize].min_v = m;
        }

        /// Split `t` into keys `< key` and keys `≥ key`.
        fn split(&mut self, t: u32, key: (u64, ClientId)) -> (u32, u32) {
            if t == NIL {
                return (NIL, NIL);
            }
            if self.key(t) < key {
                let (l, r) = self.split(self.nodes[t as usize].right, key);
                self.nodes[t as usize].right = l;
                self.pull(t);
                (t, r)
            } else {
                let (l, r) = self.split(self.nodes[t as usize].left, key);
                self.nodes[t as usize].left = r;
                self.pull(t);
                (l, t)
            }
        }

        /// Join two treaps, every key of `a` below every key of `b`.
        fn merge(&mut self, a: u32, b: u32) -> u32 {
            if a == NIL {
                return b;
            }
            if b == NIL {
                return a;
            }
            if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
                let r = self.merge(self.nodes[a as usize].right, b);
                self.nodes[a as usize].right = r;
                self.pull(a);
                a
            } else {
                let l = self.merge(a, self.nodes[b as usize].left);
                self.nodes[b as usize].left = l;
                self.pull(b);
                b
            }
        }

        pub fn insert(&mut self, item: Item) {
            self.seq += 1;
            let node = Node { item, min_v: item.vruntime, prio: splitmix(self.seq), left: NIL, right: NIL };
            let i = match self.free.pop() {
                Some(i) => {
                    self.nodes[i as usize] = node;
                    i
                }
                None => {
                    self.nodes.push(node);
                    (self.nodes.len() - 1) as u32
                }
            };
            let (l, r) = self.split(self.root, (item.deadline, item.client));
            let l = self.merge(l, i);
            self.root = self.merge(l, r);
            self.len += 1;
        }

        /// Remove the task queued under `(deadline, client)`; whether it was there.
        pub fn remove(&mut self, deadline: u64, client: ClientId) -> bool {
            let (l, r) = self.split(self.root, (deadline, client));
            let (m, r) = self.split(r, (deadline, ClientId(client.0 + 1)));
            let found = m != NIL;
            if found {
                debug_assert!(self.nodes[m as usize].left == NIL && self.nodes[m as usize].right == NIL);
                self.free.push(m);
                self.len -= 1;
            }
            self.root = self.merge(l, r);
            found
        }

        /// The earliest deadline.
        pub fn first(&self) -> Option<Item> {
            let mut i = self.root;
            if i == NIL {
                return None;
            }
            while self.nodes[i as usize].left != NIL {
                i = self.nodes[i as usize].left;
            }
            Some(self.nodes[i as usize].item)
        }

        /// The smallest virtual runtime queued.
        pub fn min_vruntime(&self) -> Option<u64> {
            (self.root != NIL).then(|| self.nodes[self.root as usize].min_v)
        }

        /// `__pick_eevdf`: the eligible item with the earliest deadline.
        pub fn pick(&self, eligible: impl Fn(u64) -> bool) -> Option<Item> {
            let first = self.first()?;
            if eligible(first.vruntime) {
                return Some(first);
            }
            let mut i = self.root;
            while i != NIL {
                let n = &self.nodes[i as usize];
                if n.left != NIL && eligible(self.nodes[n.left as usize].min_v) {
                    i = n.left;
                    continue;
                }
                if eligible(n.item.vruntime) {
                    return Some(n.item);
                }
                i = n.right;
            }
            None
        }

        /// Every item in deadline order.
        pub fn items(&self) -> Vec<Item> {
            let mut out = Vec::with_capacity(self.len);
            let mut stack = Vec::new();
            let mut i = self.root;
            while i != NIL || !stack.is_empty() {
                while i != NIL {
                    stack.push(i);
                    i = self.nodes[i as usize].left;
                }
                let top = stack.pop().expect("non-empty");
                out.push(self.nodes[top as usize].item);
                i = self.nodes[top as usize].right;
            }
            out
        }
    }
}

use tree::DeadlineTree;
pub use tree::Item;

#[derive(Clone, Copy, Debug)]
struct Curr {
    client: ClientId,
    weight: u64,
    vruntime: u64,
    deadline: u64,
}

/// One CPU's EEVDF runqueue.
#[derive(Clone, Debug)]
pub struct EevdfRq {
    /// Waiting tasks; the running one is not in it but counts in the averages.
    tree: DeadlineTree,
    /// v0 of the relative sums: the monotone `min_vruntime`.
    min_vruntime: u64,
    /// `Σ w_i (v_i − v0)` over the tree.
    sum_wkey: i128,
    /// `Σ w_i` over the tree.
    sum_w: u64,
    load: u64,
    nr_running: usize,
    curr: Option<Curr>,
}

fn clamp_u64(x: i128) -> u64 {
    x.clamp(0, u64::MAX as i128) as u64
}

fn clamp_i64(x: i128) -> i64 {
    x.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl EevdfRq {
    fn key(&self, v: u64) -> i128 {
        v as i128 - self.min_vruntime as i128
    }

    /// `(Σ w_i (v_i − v0), Σ w_i)` with the running task counted.
    fn totals(&self) -> (i128, i128) {
        let (mut avg, mut load) = (self.sum_wkey, self.sum_w as i128);
        if let Some(cu) = self.curr {
            avg += self.key(cu.vruntime) * cu.weight as i128;
            load += cu.weight as i128;
        }
        (avg, load)
    }

    /// `avg_vruntime`: V, rounded down.
    pub fn avg_vruntime(&self) -> u64 {
        let (mut avg, load) = self.totals();
        if load > 0 {
            if avg < 0 {
                avg -= load - 1;
            }
            avg /= load;
        }
        clamp_u64(self.min_vruntime as i128 + avg)
    }

    /// `vruntime_eligible`: whether `V ≥ v`, without dividing.
    pub fn vruntime_eligible(&self, v: u64) -> bool {
        let (avg, load) = self.totals();
        avg >= self.key(v) * load
    }

    /// The runqueue's `min_vruntime` (v0).
    pub fn min_vruntime(&self) -> u64 {
        self.min_vruntime
    }

    /// The waiting tasks in deadline order.
    pub fn queued(&self) -> Vec<Item> {
        self.tree.items()
    }

    /// What `pick` would choose now (curr not counted as a candidate).
    pub fn peek(&self) -> Option<ClientId> {
        let (avg, load) = self.totals();
        self.tree.pick(|v| avg >= self.key(v) * load).map(|it| it.client)
    }

    fn update_min_vruntime(&mut self) {
        let cands = self.curr.map(|c| c.vruntime).into_iter().chain(self.tree.min_vruntime());
        if let Some(v) = cands.min() {
            if v > self.min_vruntime {
                self.sum_wkey -= self.sum_w as i128 * (v - self.min_vruntime) as i128;
                self.min_vruntime = v;
            }
        }
    }

    fn add_tree(&mut self, c: ClientId, se: &Entity) {
        self.tree.insert(Item { deadline: se.deadline, client: c, vruntime: se.vruntime });
        self.sum_wkey += self.key(se.vruntime) * se.weight as i128;
        self.sum_w += se.weight;
    }

    fn remove_tree(&mut self, c: ClientId, se: &Entity) {
        let found = self.tree.remove(se.deadline, c);
        debug_assert!(found, "{c} queued");
        self.sum_wkey -= self.key(se.vruntime) * se.weight as i128;
        self.sum_w -= se.weight;
    }

    /// `update_entity_lag`: save `V − v`, clamped to the lag limit.
    fn update_entity_lag(&self, t: &Tunables, se: &mut Entity) {
        let lag = self.avg_vruntime() as i128 - se.vruntime as i128;
        let limit = calc_delta_fair(se.slice.saturating_mul(2).max(t.tick), se.weight) as i128;
        se.vlag = clamp_i64(lag.clamp(-limit, limit));
    }

    /// `place_entity`: put `se` (not yet counted) at `V − inflated lag`, with
    /// a fresh deadline, or `rel_deadline` after its new `v` if given.
    fn place(&self, t: &Tunables, se: &mut Entity, initial: bool, rel_deadline: Option<i128>) {
        let v_avg = self.avg_vruntime() as i128;
        let mut lag = 0i128;
        if t.place_lag && self.nr_running > 0 && se.vlag != 0 {
            let (_, load) = self.totals();
            lag = se.vlag as i128 * (load + se.weight as i128) / load.max(1);
        }
        se.vruntime = clamp_u64(v_avg - lag);
        se.deadline = match rel_deadline {
            Some(rel) => clamp_u64(se.vruntime as i128 + rel),
            None => {
                let mut vslice = calc_delta_fair(se.slice, se.weight);
                if initial && t.place_deadline_initial {
                    vslice /= 2;
                }
                se.vruntime.saturating_add(vslice)
            }
        };
    }
}

impl FairRq for EevdfRq {
    const NAME: &'static str = "eevdf";

    fn new(_t: &Tunables) -> Self {
        EevdfRq {
            tree: DeadlineTree::new(),
            min_vruntime: VRUNTIME_START,
            sum_wkey: 0,
            sum_w: 0,
            load: 0,
            nr_running: 0,
            curr: None,
        }
    }

    fn nr_running(&self) -> usize {
        self.nr_running
    }

    fn load(&self) -> u64 {
        self.load
    }

    fn curr(&self) -> Option<ClientId> {
        self.curr.map(|c| c.client)
    }

    fn enqueue(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, how: Enqueue) {
        if how == Enqueue::New {
            se.vlag = 0;
            se.slice = t.base_slice;
        }
        self.place(t, se, how == Enqueue::New, None);
        self.add_tree(c, se);
        self.load += se.weight;
        self.nr_running += 1;
    }

    fn dequeue(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, _how: Dequeue) {
        self.update_entity_lag(t, se);
        self.remove_tree(c, se);
        self.load -= se.weight;
        self.nr_running -= 1;
        self.update_min_vruntime();
    }

    fn pick(&mut self, _t: &Tunables, entity: impl Fn(ClientId) -> Entity) -> Option<(ClientId, Time)> {
        let (avg, load) = self.totals();
        let item = if self.tree.len() == 1 { self.tree.first() } else { self.tree.pick(|v| avg >= self.key(v) * load) }
            .or_else(|| self.tree.first())?;
        let se = entity(item.client);
        self.remove_tree(item.client, &se);
        self.curr = Some(Curr { client: item.client, weight: se.weight, vruntime: se.vruntime, deadline: se.deadline });
        let slice = real_for_virtual(se.deadline.saturating_sub(se.vruntime).max(1), se.weight);
        Some((item.client, slice))
    }

    fn update_curr(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, ran: Time) {
        se.vruntime = se.vruntime.saturating_add(calc_delta_fair(ran, se.weight));
        se.sum_exec = se.sum_exec.saturating_add(ran);
        // update_deadline: a consumed request gets a new one.
        if se.vruntime >= se.deadline {
            se.slice = t.base_slice;
            se.deadline = se.vruntime.saturating_add(calc_delta_fair(se.slice, se.weight));
        }
        self.curr = Some(Curr { client: c, weight: se.weight, vruntime: se.vruntime, deadline: se.deadline });
        self.update_min_vruntime();
    }

    fn put_prev(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, ran: Time, still_runnable: bool) {
        self.update_curr(t, c, se, ran);
        if still_runnable {
            self.curr = None;
            self.add_tree(c, se);
        } else {
            self.update_entity_lag(t, se);
            self.curr = None;
            self.load -= se.weight;
            self.nr_running -= 1;
            self.update_min_vruntime();
        }
    }

    fn wakeup_preempt(&self, t: &Tunables, wakee: ClientId, _se: &Entity) -> bool {
        let Some(cu) = self.curr else { return false };
        let (avg, load) = self.totals();
        let eligible = |v: u64| avg >= self.key(v) * load;
        let curr_ok = eligible(cu.vruntime);
        if t.run_to_parity && curr_ok {
            return false;
        }
        let best = self.tree.pick(eligible);
        let choice = match best {
            Some(b) if !(curr_ok && cu.deadline < b.deadline) => Some(b.client),
            _ => curr_ok.then_some(cu.client),
        };
        choice == Some(wakee)
    }

    fn reweight(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, weight: u64) {
        let running = self.curr.map(|cu| cu.client) == Some(c);
        self.update_entity_lag(t, se);
        let rel = se.deadline as i128 - se.vruntime as i128;
        if running {
            self.curr = None;
        } else {
            self.remove_tree(c, se);
        }
        self.load -= se.weight;
        self.nr_running -= 1;
        let old = se.weight as i128;
        se.vlag = clamp_i64(se.vlag as i128 * old / weight as i128);
        se.weight = weight;
        self.place(t, se, false, Some(rel * old / weight as i128));
        self.load += weight;
        self.nr_running += 1;
        if running {
            self.curr = Some(Curr { client: c, weight, vruntime: se.vruntime, deadline: se.deadline });
        } else {
            self.add_tree(c, se);
        }
    }

    fn reweight_sleeping(&self, _t: &Tunables, se: &mut Entity, weight: u64) {
        se.vlag = clamp_i64(se.vlag as i128 * se.weight as i128 / weight as i128);
        se.weight = weight;
    }

    fn migrate_sleeper(_src: &Self, _dst: &Self, _se: &mut Entity) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roster::ClientTable;
    use crate::MS;

    #[test]
    fn treap_keeps_order_and_subtree_minimum() {
        let mut t = DeadlineTree::new();
        let mut model = Vec::new();
        for i in 0..200u32 {
            let it =
                Item { deadline: (i as u64 * 7919) % 101, client: ClientId(i), vruntime: (i as u64 * 104729) % 997 };
            t.insert(it);
            model.push(it);
        }
        for i in (0..200u32).step_by(3) {
            let it = model.iter().position(|m| m.client == ClientId(i)).unwrap();
            let it = model.remove(it);
            assert!(t.remove(it.deadline, it.client));
        }
        assert!(!t.remove(0, ClientId(0)));
        model.sort_by_key(|m| (m.deadline, m.client));
        assert_eq!(t.items(), model);
        assert_eq!(t.len(), model.len());
        assert_eq!(t.min_vruntime(), model.iter().map(|m| m.vruntime).min());
        for bound in [0u64, 10, 300, 996] {
            let want = model.iter().filter(|m| m.vruntime <= bound).min_by_key(|m| (m.deadline, m.client)).copied();
            assert_eq!(t.pick(|v| v <= bound), want, "bound {bound}");
        }
    }

    #[test]
    fn run_to_parity_suppresses_wakeup_preemption() {
        for parity in [true, false] {
            let mut t = Tunables::for_quantum(MS);
            t.run_to_parity = parity;
            let mut rq = EevdfRq::new(&t);
            let mut ents = ClientTable::new();
            for c in [ClientId(0), ClientId(1)] {
                ents.insert(c, Entity { weight: 1024, slice: MS, ..Entity::default() });
            }
            let mut a = ents[ClientId(0)];
            rq.enqueue(&t, ClientId(0), &mut a, Enqueue::New);
            ents.insert(ClientId(0), a);
            assert_eq!(rq.pick(&t, |c| ents[c]).map(|p| p.0), Some(ClientId(0)));
            // The running task has just renewed its request: its deadline is a whole slice away.
            rq.curr.as_mut().unwrap().deadline += 10 * MS;
            let mut w = ents[ClientId(1)];
            rq.enqueue(&t, ClientId(1), &mut w, Enqueue::New);
            ents.insert(ClientId(1), w);
            // Both are eligible (v = V); the wakee's deadline is earlier.
            assert!(rq.vruntime_eligible(w.vruntime) && rq.vruntime_eligible(a.vruntime));
            assert_eq!(rq.wakeup_preempt(&t, ClientId(1), &ents[ClientId(1)]), !parity, "parity {parity}");
        }
    }
}
