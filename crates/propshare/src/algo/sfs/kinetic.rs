//! The exact surplus queue `Qα` as a kinetic tournament over weight classes.
//!
//! # The maths
//!
//! Waiting clients are grouped by φ (by value). Within a class the surplus
//! order is the start-tag order at every virtual time, so each class is a
//! queue ordered by (S, id) that is never re-sorted, and only the class
//! heads compete. The surplus of a head is a line in the query time x:
//!
//! ```text
//!     α_c(x) = φ_c·(S_c − x) = φ_c·S_c − φ_c·x
//! ```
//!
//! so the least surplus at x is the lower envelope of G lines (G classes),
//! and the structure is only ever queried at a time x that does not
//! decrease (v, or for the heuristic the v of its last re-sort).
//!
//! A *tournament* is a complete binary tree with one leaf per class slot;
//! each internal node holds the winner (least (α(x), tie, id)) of its two
//! children at the current time `at`, so the root holds the least surplus.
//! It is *kinetic*: each node also holds a certificate, the first time
//! x' > `at` at which its loser would beat its winner. For winner w and
//! loser l, with `A = num_l·den_w` and `B = num_w·den_l` (the
//! cross-multiplied φ of l and w) and lags measured at `at`, l is ahead at
//! `at + δ` when `A·(lag_l − δ) < B·(lag_w − δ)`, i.e.
//!
//! ```text
//!     δ > gap / (A − B),     gap = A·lag_l − B·lag_w ≥ 0     (only if A > B)
//! ```
//!
//! and at `δ = gap / (A − B)` exactly when that divides and l wins the tie.
//! If A ≤ B the loser's surplus never falls faster and the certificate
//! never fails. Every product is exact in 256 bits and the quotient is an
//! exact 256-by-128-bit division, so the failure time is exact, not an
//! estimate. Each node also keeps the least failure time in its subtree;
//! moving time forward to x recomputes exactly the nodes whose subtree
//! holds a certificate due by x, bottom up.
//!
//! Lines are used beyond `S` (where the real α would clamp at 0) only in
//! certificates; queries never reach that region, since every waiting
//! client has `S ≥ v ≥ x`.
//!
//! # Cost (G classes, t waiting clients)
//!
//! | operation | cost |
//! |---|---|
//! | insert, remove | O(log t) in the class; if the head changed, O(log G) stale marks (fewer when the path is already stale) |
//! | advance time | O(1); the next query settles the due certificates |
//! | settle (at a query) | one duel, O(1) with one 256-by-128-bit division, per stale node and per node whose certificate fell due: O(log G) each |
//! | least 1 | the root, after settling |
//! | least n | O(n·(log G·log n + log t)): best-first descent from the root, keeping the n best offers sorted |
//! | least n ≤ `keep`, cached | O(n) copy; the cache costs O(log keep + keep) per insertion or removal that reaches it |
//! | growth (G doubles) | O(G) rebuild, amortized O(1) |

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

use super::{Queued, Tie};
use crate::model::ClientId;
use crate::readjust::Phi;
use crate::vtime::VTime;
use crate::wide::U256;

/// A certificate that never fails.
const NEVER: VTime = VTime::MAX;
/// The `due` of a node to recompute: no certificate falls due at time 0
/// (each fails after the time it was made at), so 0 marks the node stale.
/// Every ancestor of a stale node is stale.
const STALE: VTime = 0;

#[derive(Clone, Debug)]
struct Class {
    phi: Phi,
    members: BTreeSet<(VTime, ClientId)>,
    /// The first member, cached: the tournament reads it at every duel.
    head: Queued,
}

/// Waiting clients by weight class, with a kinetic tournament over the
/// class heads; answers "the n least (α, tie, id) at time `at`".
#[derive(Clone, Debug)]
pub(super) struct KineticClasses {
    /// Class slot → class (None: free slot).
    slots: Vec<Option<Class>>,
    slot_of: BTreeMap<Phi, usize>,
    free: Vec<usize>,
    /// Leaves: `cap` (a power of two) ≥ slots; node 1 is the root, node
    /// `cap + s` the leaf of slot s, node i has children 2i and 2i + 1.
    cap: usize,
    /// The winning slot of each node's subtree at `at`.
    win: Vec<Option<usize>>,
    /// An internal node's certificate: when its loser would overtake its winner.
    fail: Vec<VTime>,
    /// The least certificate in each node's subtree.
    due: Vec<VTime>,
    at: VTime,
    tie: Tie,
    len: usize,
    /// With `keep` > 0 (the heuristic, queried many times at one time):
    /// the `cache.len()` least entries at `at`, least first, kept up to
    /// date by insertions and removals; `None` until the next query after
    /// time moves.
    keep: usize,
    cache: Option<Vec<Queued>>,
}

impl KineticClasses {
    /// An empty queue; `keep` > 0 caches the `keep` least entries between
    /// changes of time (for repeated queries of up to `keep` at one time).
    pub(super) fn new(tie: Tie, keep: usize) -> KineticClasses {
        KineticClasses {
            slots: vec![None],
            slot_of: BTreeMap::new(),
            free: vec![0],
            cap: 1,
            win: vec![None; 2],
            fail: vec![NEVER; 2],
            due: vec![NEVER; 2],
            at: 0,
            tie,
            len: 0,
            keep,
            cache: None,
        }
    }

    /// Waiting clients held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The time the order is kept for.
    pub(super) fn at(&self) -> VTime {
        self.at
    }

    pub(super) fn insert(&mut self, q: Queued) {
        let slot = match self.slot_of.get(&q.phi) {
            Some(&s) => s,
            None => self.new_class(q),
        };
        let class = self.slots[slot].as_mut().expect("slot in use");
        if !class.members.insert((q.start, q.client)) {
            return;
        }
        let new_head = class.members.len() == 1 || (q.start, q.client) < (class.head.start, class.head.client);
        if new_head {
            class.head = q;
        }
        self.len += 1;
        self.cache_insert(q);
        if new_head {
            self.update_leaf(slot);
        }
    }

    pub(super) fn remove(&mut self, q: Queued) -> bool {
        let Some(&slot) = self.slot_of.get(&q.phi) else { return false };
        let class = self.slots[slot].as_mut().expect("slot in use");
        if !class.members.remove(&(q.start, q.client)) {
            return false;
        }
        self.len -= 1;
        self.cache_remove(q);
        let class = self.slots[slot].as_mut().expect("slot in use");
        if let Some(&(start, client)) = class.members.first() {
            if class.head.client == q.client {
                class.head = Queued { client, phi: class.phi, start };
                self.update_leaf(slot);
            }
        } else {
            self.slot_of.remove(&q.phi);
            self.slots[slot] = None;
            self.free.push(slot);
            self.update_leaf(slot);
        }
        true
    }

    pub(super) fn contains(&self, q: Queued) -> bool {
        self.slot_of.get(&q.phi).is_some_and(|&s| self.class(s).members.contains(&(q.start, q.client)))
    }

    /// Move time forward to x (x below `at` rebuilds, which v never needs).
    pub(super) fn advance(&mut self, x: VTime) {
        if x != self.at {
            self.cache = None;
        }
        if x < self.at {
            self.at = x;
            self.rebuild();
            return;
        }
        // Lazily: the next query settles the certificates due by then.
        self.at = x;
    }

    /// The n least (α, tie, id) at `at`, least first (from the cache when
    /// one is kept and long enough).
    pub(super) fn least(&mut self, n: usize) -> Vec<Queued> {
        if n > self.keep {
            self.settle(1);
            return self.search(n);
        }
        let (keep, len) = (self.keep, self.len);
        let cache = match self.cache.take() {
            Some(c) if c.len() >= n || c.len() == len => c,
            _ => {
                self.settle(1);
                self.search(keep)
            }
        };
        let out = cache[..n.min(cache.len())].to_vec();
        self.cache = Some(cache);
        out
    }

    /// A new entry joins the cache if it is among the cached least.
    fn cache_insert(&mut self, q: Queued) {
        let (at, tie, len) = (self.at, self.tie, self.len);
        let Some(cache) = self.cache.as_mut() else { return };
        let held_all = cache.len() + 1 == len;
        let i = cache.partition_point(|x| x.order(&q, at, tie) == Ordering::Less);
        if i < cache.len() || held_all {
            cache.insert(i, q);
            cache.truncate(self.keep);
        }
    }

    fn cache_remove(&mut self, q: Queued) {
        let (at, tie) = (self.at, self.tie);
        let Some(cache) = self.cache.as_mut() else { return };
        let i = cache.partition_point(|x| x.order(&q, at, tie) == Ordering::Less);
        if cache.get(i).is_some_and(|x| x.client == q.client) {
            cache.remove(i);
        }
    }

    /// The n least at `at` by best-first search of the settled tournament.
    fn search(&self, n: usize) -> Vec<Queued> {
        let Some(root) = self.win[1].filter(|_| n > 0) else { return Vec::new() };
        if n == 1 {
            return vec![self.head(root)];
        }
        // Best-first: a popped subtree emits its winner, then offers the
        // winners of the subtrees hanging off the path down to the winner's
        // leaf, and the next member of the winner's class. Every offer is
        // worse than what offered it, so with m results still wanted only
        // the m best offers can be emitted: the frontier keeps those, sorted
        // worst first.
        let mut out = Vec::with_capacity(n);
        let mut frontier: Vec<(Queued, Source)> = Vec::with_capacity(n);
        frontier.push((self.head(root), Source::Subtree(1)));
        while let Some((q, from)) = frontier.pop() {
            out.push(q);
            let wanted = n - out.len();
            if wanted == 0 {
                break;
            }
            frontier.drain(..frontier.len().saturating_sub(wanted));
            let slot = match from {
                Source::Member(slot) => slot,
                Source::Subtree(mut node) => {
                    while node < self.cap {
                        let (left, right) = (2 * node, 2 * node + 1);
                        let (down, side) = if self.win[left] == self.win[node] { (left, right) } else { (right, left) };
                        if let Some(s) = self.win[side] {
                            self.offer(&mut frontier, wanted, self.head(s), Source::Subtree(side));
                        }
                        node = down;
                    }
                    node - self.cap
                }
            };
            let class = self.class(slot);
            if let Some(&(start, client)) = class.members.range((Excluded((q.start, q.client)), Unbounded)).next() {
                let next = Queued { client, phi: class.phi, start };
                self.offer(&mut frontier, wanted, next, Source::Member(slot));
            }
        }
        out
    }

    /// Add `q` to a frontier sorted worst first that keeps the `wanted` best.
    fn offer(&self, frontier: &mut Vec<(Queued, Source)>, wanted: usize, q: Queued, from: Source) {
        let better = |x: &(Queued, Source)| q.order(&x.0, self.at, self.tie) == Ordering::Less;
        if frontier.len() == wanted && !frontier.first().is_some_and(better) {
            return;
        }
        let at = frontier.partition_point(better);
        frontier.insert(at, (q, from));
        if frontier.len() > wanted {
            frontier.remove(0);
        }
    }

    /// Check every node against its children at `at`; O(G), for tests.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut settled = self.clone();
        settled.settle(1);
        settled.check_settled()
    }

    fn check_settled(&self) -> Result<(), String> {
        let heads = self.slots.iter().filter(|c| c.is_some()).count();
        if heads != self.slot_of.len()
            || self.slots.iter().flatten().map(|c| c.members.len()).sum::<usize>() != self.len
        {
            return Err("weight classes miscounted".into());
        }
        if let Some(cache) = &self.cache {
            if *cache != self.search(cache.len()) {
                return Err("the cached least entries are stale".into());
            }
        }
        for class in self.slots.iter().flatten() {
            let first = class.members.first().map(|&(start, client)| Queued { client, phi: class.phi, start });
            if first != Some(class.head) {
                return Err("a weight class's cached head is not its first member".into());
            }
        }
        for s in 0..self.cap {
            let want = self.slots.get(s).and_then(|c| c.as_ref()).map(|_| s);
            if self.win[self.cap + s] != want {
                return Err(format!("leaf of class slot {s} is stale"));
            }
        }
        for node in (1..self.cap).rev() {
            let (winner, _) = self.duel(node);
            if self.win[node] != winner {
                return Err(format!("tournament node {node} has a stale winner at the current time"));
            }
            if self.due[node] <= self.at {
                return Err(format!("tournament node {node} has an unprocessed certificate"));
            }
        }
        Ok(())
    }

    fn class(&self, slot: usize) -> &Class {
        self.slots[slot].as_ref().expect("slot in use")
    }

    fn head(&self, slot: usize) -> Queued {
        self.class(slot).head
    }

    /// A new, still empty class for `first`'s φ (its head is set on insertion).
    fn new_class(&mut self, first: Queued) -> usize {
        if self.free.is_empty() {
            self.grow();
        }
        let slot = self.free.pop().expect("grown");
        self.slots[slot] = Some(Class { phi: first.phi, members: BTreeSet::new(), head: first });
        self.slot_of.insert(first.phi, slot);
        slot
    }

    /// Double the leaves and rebuild the tree at `at`.
    fn grow(&mut self) {
        let cap = self.cap * 2;
        self.slots.resize(cap, None);
        self.free.extend((self.cap..cap).rev());
        self.cap = cap;
        self.win = vec![None; 2 * cap];
        self.fail = vec![NEVER; 2 * cap];
        self.due = vec![NEVER; 2 * cap];
        self.rebuild();
    }

    fn rebuild(&mut self) {
        for s in 0..self.cap {
            self.win[self.cap + s] = self.slots[s].as_ref().map(|_| s);
        }
        for node in (1..self.cap).rev() {
            self.recompute(node);
        }
    }

    /// A class head changed: refresh its leaf and the path to the root.
    /// (Lazily: the path is marked stale, and the next query recomputes it
    /// once however many heads changed below it.)
    fn update_leaf(&mut self, slot: usize) {
        let leaf = self.cap + slot;
        self.win[leaf] = self.slots[slot].as_ref().map(|_| slot);
        let mut node = leaf / 2;
        while node >= 1 && self.due[node] != STALE {
            self.due[node] = STALE;
            node /= 2;
        }
    }

    /// Recompute every node under `node` whose subtree has a certificate due by `at`.
    fn settle(&mut self, node: usize) {
        if node >= self.cap || self.due[node] > self.at {
            return;
        }
        self.settle(2 * node);
        self.settle(2 * node + 1);
        self.recompute(node);
    }

    fn recompute(&mut self, node: usize) {
        let (winner, fail) = self.duel(node);
        self.win[node] = winner;
        self.fail[node] = fail;
        self.due[node] = fail.min(self.due[2 * node]).min(self.due[2 * node + 1]);
    }

    /// The winner of a node's two children at `at`, and when it would lose.
    fn duel(&self, node: usize) -> (Option<usize>, VTime) {
        match (self.win[2 * node], self.win[2 * node + 1]) {
            (Some(a), Some(b)) => {
                let (qa, qb) = (self.head(a), self.head(b));
                if qa.order(&qb, self.at, self.tie) == Ordering::Less {
                    (Some(a), self.overtake(&qa, &qb))
                } else {
                    (Some(b), self.overtake(&qb, &qa))
                }
            }
            (one, None) | (None, one) => (one, NEVER),
        }
    }

    /// The first time after `at` at which `loser` orders before `winner`.
    fn overtake(&self, winner: &Queued, loser: &Queued) -> VTime {
        let a = loser.phi.num as u128 * winner.phi.den as u128;
        let b = winner.phi.num as u128 * loser.phi.den as u128;
        if a <= b {
            return NEVER;
        }
        let lag = |q: &Queued| q.start.saturating_sub(self.at);
        // gap ≥ 0: the winner orders first now, so A·lag_l ≥ B·lag_w.
        let gap = U256::mul(a, lag(loser)).wrapping_sub(U256::mul(b, lag(winner)));
        let Some((quotient, rest)) = gap.div_rem_u128(a - b) else { return NEVER };
        let wins_tie = (loser.tie_key(self.tie), loser.client) < (winner.tie_key(self.tie), winner.client);
        let delta = if rest == 0 && wins_tie { Some(quotient) } else { quotient.checked_add(1) };
        delta.and_then(|d| self.at.checked_add(d)).unwrap_or(NEVER)
    }
}

#[derive(Clone, Copy, Debug)]
enum Source {
    /// The winner of this tournament node's subtree.
    Subtree(usize),
    /// A non-head member of this class slot.
    Member(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(client: u32, phi: u64, start: VTime) -> Queued {
        Queued { client: ClientId(client), phi: Phi::whole(phi), start }
    }

    /// Lines cross: the heavier class overtakes exactly when its surplus
    /// drops below (or, tie rule, to) the lighter one's.
    #[test]
    fn heavier_class_overtakes_at_the_exact_crossing() {
        let mut k = KineticClasses::new(Tie::StartTag, 0);
        // α_0(x) = 1·(100 − x), α_1(x) = 3·(60 − x): equal at x = 40.
        k.insert(q(0, 1, 100));
        k.insert(q(1, 3, 60));
        k.insert(q(2, 2, 1000));
        assert_eq!(k.least(1)[0].client, ClientId(0)); // 100 vs 180 at 0
        k.advance(39);
        assert_eq!(k.least(1)[0].client, ClientId(0)); // 61 vs 63
        k.check().unwrap();
        k.advance(40);
        // 60 vs 60: the tie goes to the smaller start tag, client 1.
        assert_eq!(k.least(1)[0].client, ClientId(1));
        k.check().unwrap();
        // By id alone the tie stays with client 0 until x = 41.
        let mut by_id = KineticClasses::new(Tie::ClientId, 0);
        for e in [q(0, 1, 100), q(1, 3, 60), q(2, 2, 1000)] {
            by_id.insert(e);
        }
        by_id.advance(40);
        assert_eq!(by_id.least(1)[0].client, ClientId(0));
        by_id.advance(41);
        assert_eq!(by_id.least(1)[0].client, ClientId(1)); // 59 vs 57
        let order: Vec<u32> = k.least(3).iter().map(|x| x.client.0).collect();
        assert_eq!(order, vec![1, 0, 2]);
    }

    #[test]
    fn least_n_matches_a_sort_at_every_time() {
        let mut next = crate::contract::xorshift(0x2545_f491_4f6c_dd1du64);
        for (tie, keep) in [(Tie::StartTag, 0), (Tie::ClientId, 0), (Tie::StartTag, 9)] {
            let mut k = KineticClasses::new(tie, keep);
            let mut all: Vec<Queued> = Vec::new();
            let mut x: VTime = 0;
            for step in 0..3000u32 {
                match next() % 4 {
                    0 | 1 => {
                        let phi = Phi { num: 1 + next() % 12, den: 1 + next() % 3 };
                        let e = Queued { client: ClientId(step), phi, start: x + (next() % 500) as VTime };
                        k.insert(e);
                        all.push(e);
                    }
                    2 if !all.is_empty() => {
                        let e = all.swap_remove((next() % all.len() as u64) as usize);
                        assert!(k.remove(e));
                    }
                    _ => {
                        let least_start = all.iter().map(|e| e.start).min().unwrap_or(x);
                        x = x.max(least_start.min(x + (next() % 40) as VTime));
                        k.advance(x);
                    }
                }
                k.check().unwrap();
                let mut want = all.clone();
                want.sort_by(|a, b| a.order(b, x, tie));
                want.truncate(7);
                assert_eq!(k.least(7), want, "step {step}");
                assert_eq!(k.len(), all.len());
            }
        }
    }
}
