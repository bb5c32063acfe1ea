//! Weight classes: the runnable clients bucketed by the order ⌊log2 w⌋ of
//! their *original* weight, with O(1) insertion and removal, and the infeasible
//! set found through the classes (GR3 paper, Caprita et al., USENIX ATC 2005,
//! §3.3, WEIGHT-READJUSTMENT). Shared by GR3 ([`super::gr3`]) and GDQ
//! ([`super::gdq`]).
//!
//! # Rule (§3.3)
//!
//! Walk the classes by decreasing order with I = ∅, Q = min(P, N): a whole
//! class G is infeasible while `|G| < Q - |I|` and
//! `2^σ·(Q - |I| - |G|) > Φ_T - Φ_I - Φ_G`; the boundary class, if
//! `|G| < 2(Q - |I|)`, is sorted (heaviest first, ties by id) and scanned
//! client by client (`w·(Q - |I|) > Φ_T - Φ_I`). This is exactly the set of
//! [`crate::readjust::Readjustment::compute`] (checked on random sets in
//! `tests/gr3.rs` and in the tests below).
//!
//! # Cost
//!
//! * insert, remove: O(1);
//! * infeasible set: O(g) classes + O(P log P) for the boundary class
//!   (< 2P clients sorted), g ≤ 32.

use std::cmp::Reverse;

use crate::list::{Link, List};
use crate::model::ClientId;
use crate::roster::ClientTable;

/// Weight orders: weights are below 2^32, so σ ∈ 0..32.
pub(crate) const ORDERS: usize = 32;

/// The clients of one order of original weight.
#[derive(Clone, Copy, Debug, Default)]
struct Class {
    /// Its clients, read as a ring from `head`.
    list: List,
    head: Option<ClientId>,
    weight: u128,
}

/// The runnable clients by order of original weight (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct WeightClasses {
    classes: [Class; ORDERS],
    links: ClientTable<Link>,
    len: usize,
    /// Σ original weights.
    total: u128,
    /// The boundary class being sorted (reused: no allocation once warm).
    boundary: Vec<(u64, ClientId)>,
}

impl WeightClasses {
    /// Number of clients.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Add `c` of original weight `w` (1 ≤ w < 2^32). O(1).
    pub(crate) fn insert(&mut self, c: ClientId, w: u64) {
        let cl = &mut self.classes[w.max(1).ilog2() as usize];
        match cl.head {
            None => {
                cl.list.push_back(&mut self.links, c);
                cl.head = Some(c);
            }
            Some(h) => cl.list.insert_before_cyclic(&mut self.links, h, c),
        }
        cl.weight += w as u128;
        self.len += 1;
        self.total += w as u128;
    }

    /// Remove `c`, inserted with weight `w`. O(1).
    pub(crate) fn remove(&mut self, c: ClientId, w: u64) {
        let cl = &mut self.classes[w.max(1).ilog2() as usize];
        let link = cl.list.remove(&mut self.links, c);
        if cl.head == Some(c) {
            // The head steps back to c's predecessor, read as a ring.
            cl.head = link.prev().or(cl.list.back());
        }
        cl.weight -= w as u128;
        self.len -= 1;
        self.total -= w as u128;
    }

    /// WEIGHT-READJUSTMENT on `cpus` CPUs: the infeasible set I into `capped`
    /// (cleared first; whole classes in ring order, then the boundary class's
    /// heaviest), R = Φ_T - Φ_I and den = min(P, N) - |I| (1 if I is empty).
    /// `weight` gives a client's original weight.
    pub(crate) fn infeasible(
        &mut self,
        cpus: usize,
        capped: &mut Vec<ClientId>,
        mut weight: impl FnMut(ClientId) -> u64,
    ) -> (u128, u64) {
        let q = cpus.min(self.len) as u64;
        capped.clear();
        if q <= 1 {
            return (self.total, 1);
        }
        let total = self.total;
        let (mut count, mut taken) = (0u64, 0u128);
        for o in (0..ORDERS).rev() {
            let cl = self.classes[o];
            let Some(head) = cl.head else { continue };
            let left = q - count;
            let len = cl.list.len() as u64;
            // Line 4: |G| < P - |I| and 2^σ > (Φ_T - Φ_I - Φ_G)/(P - |I| - |G|).
            if len < left && (1u128 << o) * (left - len) as u128 > total - taken - cl.weight {
                capped.extend(cl.list.walk_cyclic(&self.links, head, cl.list.len()));
                count += len;
                taken += cl.weight;
                continue;
            }
            // Line 7: the boundary class may hold some infeasible clients.
            if len < 2 * left {
                let mut members = std::mem::take(&mut self.boundary);
                members.clear();
                members.extend(cl.list.walk_cyclic(&self.links, head, cl.list.len()).map(|c| (weight(c), c)));
                members.sort_unstable_by_key(|&(w, c)| (Reverse(w), c));
                for &(w, c) in &members {
                    // INFEASIBLE: φ_C > (Φ - Φ_I)/(Q - |I|).
                    if w as u128 * (q - count) as u128 > total - taken {
                        capped.push(c);
                        count += 1;
                        taken += w as u128;
                    } else {
                        break;
                    }
                }
                self.boundary = members;
            }
            break;
        }
        let den = if capped.is_empty() { 1 } else { q - count };
        (total - taken, den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readjust::FeasibleSet;
    use crate::Weight;

    /// The infeasible set through the classes is the shared module's
    /// readjustment, heaviest first, on many random sets, including after
    /// removals (a small LCG keeps it deterministic).
    #[test]
    fn classes_agree_with_feasible_set() {
        let mut seed = 12345u64;
        let mut rnd = move |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut capped = Vec::new();
        let mut checked_capped = 0;
        for _ in 0..400 {
            let cpus = 1 + rnd(9) as usize;
            let n = rnd(24) as u32;
            let mut classes = WeightClasses::default();
            let mut set = FeasibleSet::new();
            let mut weights = vec![0u64; n as usize];
            for c in 0..n {
                // Mostly small weights, a few heavy ones (so some are capped), some ties.
                let w = if rnd(4) == 0 { 1 + rnd(1 << 20) } else { 1 + rnd(8) };
                weights[c as usize] = w;
                classes.insert(ClientId(c), w);
                set.insert(ClientId(c), Weight::new(w).unwrap());
            }
            for step in 0..=n {
                let r = set.readjust(cpus);
                let (rest, den) = classes.infeasible(cpus, &mut capped, |c| weights[c.index()]);
                capped.sort_unstable_by_key(|&c| (Reverse(weights[c.index()]), c));
                let want: Vec<ClientId> = set.heaviest(r.capped).map(|(c, _)| c).collect();
                assert_eq!(capped, want, "cpus {cpus} weights {weights:?}");
                assert_eq!(rest, r.feasible_weight as u128);
                if r.capped > 0 {
                    assert_eq!(den, r.feasible_cpus());
                    checked_capped += 1;
                }
                if step < n {
                    let c = ClientId(step);
                    classes.remove(c, weights[c.index()]);
                    set.remove(c, Weight::new(weights[c.index()]).unwrap());
                }
            }
        }
        assert!(checked_capped > 100, "the random sets must exercise capping: {checked_capped}");
    }
}
