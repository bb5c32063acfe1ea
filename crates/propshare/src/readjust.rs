//! Weight readjustment for infeasible weights (SFS paper, Chandra et al.,
//! OSDI 2000, section 2.2 and its Fig. 2; GR3MP, Caprita et al., ATC 2005,
//! section 3.3).
//!
//! # The maths
//!
//! A client can use at most one CPU, so on P CPUs a weight is *feasible* only if
//!
//! ```text
//!     w_i / Σ_j w_j  ≤  1 / P                    (SFS Eq. 1; sum over runnable clients)
//! ```
//!
//! Readjustment walks the runnable clients in non-increasing weight order. If
//! the heaviest violates Eq. 1 on the P' CPUs left, it is given exactly one CPU
//! and the test recurses on the rest with P' - 1 CPUs; the first client that
//! passes ends the walk (all lighter ones pass too). At most P - 1 clients can
//! fail, so the walk is O(P). Every capped client ends with the same
//! instantaneous weight
//!
//! ```text
//!     φ* = R / (P' - m),   R = Σ of the uncapped weights,  m = number capped,
//! ```
//!
//! which gives it a share φ*/Φ of P' CPUs equal to exactly one CPU; uncapped
//! clients keep φ_i = w_i and get `w_i (P' - m) / R` CPUs. The test for the
//! next client x, `w_x / R_x > 1 / (P' - m)`, is evaluated as the integer
//! comparison `w_x · (P' - m) > R_x` (no division, no floats).
//!
//! Gap READJUST-1: neither paper says what happens when fewer clients than CPUs are
//! runnable. We use P' = min(P, N): with N ≤ P every client gets one CPU,
//! which is what the fluid model gives and what the recursion yields when
//! it stops at one CPU left. (test: `fewer_clients_than_cpus_each_get_one_cpu`)
//!
//! Gap READJUST-2: the SFS paper's recursion reads "w_i / Σ_{j≥i} w_j > 1/p"; with equal
//! heavy weights (e.g. 10, 10, 1 on 3 CPUs) the strict test caps the first
//! client and then the second, exactly as the iterative form below does. (untested)
//!
//! φ* is rational; [`Phi`] keeps it exact as a numerator and denominator.

use crate::model::{ClientId, Weight};
use std::cmp::{Ordering, Reverse};
use std::collections::BTreeSet;

/// An exact non-negative rational weight `num / den` (den ≥ 1).
#[derive(Clone, Copy, Debug, Eq)]
pub struct Phi {
    /// Numerator.
    pub num: u64,
    /// Denominator, at least 1.
    pub den: u64,
}

impl Phi {
    /// An integer weight.
    pub fn whole(w: u64) -> Phi {
        Phi { num: w, den: 1 }
    }
}

impl PartialEq for Phi {
    fn eq(&self, other: &Phi) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl PartialOrd for Phi {
    fn partial_cmp(&self, other: &Phi) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Phi {
    fn cmp(&self, other: &Phi) -> Ordering {
        (self.num as u128 * other.den as u128).cmp(&(other.num as u128 * self.den as u128))
    }
}

/// The result of readjusting one runnable set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readjustment {
    /// P' = min(P, N): the CPUs the runnable clients can use.
    pub cpus: u64,
    /// m: how many of the heaviest clients are capped at one CPU.
    pub capped: usize,
    /// R: the sum of the weights of the uncapped clients.
    pub feasible_weight: u64,
}

impl Readjustment {
    /// Nothing runnable.
    pub const EMPTY: Readjustment = Readjustment { cpus: 0, capped: 0, feasible_weight: 0 };

    /// Readjust `n` runnable clients whose weights, in non-increasing order, are
    /// `weights_desc` and sum to `total`, on `cpus` CPUs. Reads at most P weights.
    pub fn compute(weights_desc: impl IntoIterator<Item = u64>, total: u64, n: usize, cpus: usize) -> Readjustment {
        let p = cpus.min(n) as u64;
        let mut rest = total;
        let mut m = 0usize;
        for w in weights_desc {
            if p - (m as u64) <= 1 {
                break;
            }
            // w / rest > 1 / (p - m), in integers.
            if (w as u128) * ((p - m as u64) as u128) > rest as u128 {
                rest -= w;
                m += 1;
            } else {
                break;
            }
        }
        Readjustment { cpus: p, capped: m, feasible_weight: rest }
    }

    /// The CPUs left to the uncapped clients, P' - m.
    #[inline]
    pub fn feasible_cpus(&self) -> u64 {
        self.cpus - self.capped as u64
    }

    /// φ* = R / (P' - m), the readjusted weight of every capped client.
    pub fn capped_phi(&self) -> Phi {
        Phi { num: self.feasible_weight, den: self.feasible_cpus().max(1) }
    }

    /// Whether a client of weight `w` at position `rank` (0-based, in the
    /// non-increasing weight order) is capped.
    #[inline]
    pub fn is_capped(&self, rank: usize) -> bool {
        rank < self.capped
    }

    /// The readjusted weight of the client at `rank` with original weight `w`.
    pub fn phi(&self, rank: usize, w: u64) -> Phi {
        if self.is_capped(rank) {
            self.capped_phi()
        } else {
            Phi::whole(w)
        }
    }

    /// Σ φ over all runnable clients: R · P' / (P' - m).
    pub fn total_phi(&self) -> Phi {
        Phi { num: self.feasible_weight * self.cpus, den: self.feasible_cpus().max(1) }
    }
}

/// The runnable clients kept in non-increasing weight order (ties by id), with
/// their weight sum, so that readjustment costs O(P + log N) per event.
#[derive(Clone, Debug, Default)]
pub struct FeasibleSet {
    by_weight: BTreeSet<(Reverse<Weight>, ClientId)>,
    total: u64,
}

impl FeasibleSet {
    /// An empty set.
    pub fn new() -> FeasibleSet {
        FeasibleSet::default()
    }

    /// Add a runnable client. O(log N).
    pub fn insert(&mut self, c: ClientId, w: Weight) {
        if self.by_weight.insert((Reverse(w), c)) {
            self.total += w.get();
        }
    }

    /// Remove a client. O(log N).
    pub fn remove(&mut self, c: ClientId, w: Weight) {
        if self.by_weight.remove(&(Reverse(w), c)) {
            self.total -= w.get();
        }
    }

    /// Number of clients.
    pub fn len(&self) -> usize {
        self.by_weight.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.by_weight.is_empty()
    }

    /// Sum of weights.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Readjust on `cpus` CPUs. O(P).
    pub fn readjust(&self, cpus: usize) -> Readjustment {
        Readjustment::compute(self.by_weight.iter().map(|(Reverse(w), _)| w.get()), self.total, self.len(), cpus)
    }

    /// Every client with its weight, heaviest first (ties by id); `.rev()`
    /// reads it from the lightest end.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (ClientId, Weight)> + '_ {
        self.by_weight.iter().map(|&(Reverse(w), c)| (c, w))
    }

    /// The `m` heaviest clients (the capped ones of a readjustment with `capped = m`).
    pub fn heaviest(&self, m: usize) -> impl Iterator<Item = (ClientId, Weight)> + '_ {
        self.by_weight.iter().take(m).map(|&(Reverse(w), c)| (c, w))
    }
}

/// Readjusted weights of an arbitrary list of weights on `cpus` CPUs, in the
/// input order: a convenience for tests and reports. O(N log N).
pub fn readjust_weights(weights: &[u64], cpus: usize) -> Vec<Phi> {
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| (Reverse(weights[i]), i));
    let total = weights.iter().sum();
    let r = Readjustment::compute(order.iter().map(|&i| weights[i]), total, weights.len(), cpus);
    let mut out = vec![Phi::whole(0); weights.len()];
    for (rank, &i) in order.iter().enumerate() {
        out[i] = r.phi(rank, weights[i]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phis(w: &[u64], p: usize) -> Vec<(u64, u64)> {
        readjust_weights(w, p)
            .into_iter()
            .map(|f| {
                let g = gcd(f.num, f.den);
                (f.num / g, f.den / g)
            })
            .collect()
    }

    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a.max(1)
        } else {
            gcd(b, a % b)
        }
    }

    /// The SFS paper's section 2.2 / 4.2 example and the notes' worked table (004 §1.3).
    #[test]
    fn papers_examples() {
        assert_eq!(phis(&[1, 10], 2), vec![(1, 1), (1, 1)]);
        assert_eq!(phis(&[1, 10, 1], 2), vec![(1, 1), (2, 1), (1, 1)]);
        assert_eq!(phis(&[2, 1, 1], 2), vec![(2, 1), (1, 1), (1, 1)]);
        assert_eq!(phis(&[2, 1], 2), vec![(1, 1), (1, 1)]);
        assert_eq!(phis(&[100, 50, 1, 1, 1, 1], 4), vec![(2, 1), (2, 1), (1, 1), (1, 1), (1, 1), (1, 1)]);
        // GR3MP notes §2.4: {10,1,1,1} on 2 → 3; on 3 → 3/2 (non-integer, kept exact).
        assert_eq!(phis(&[10, 1, 1, 1], 2), vec![(3, 1), (1, 1), (1, 1), (1, 1)]);
        assert_eq!(phis(&[10, 1, 1, 1], 3), vec![(3, 2), (1, 1), (1, 1), (1, 1)]);
        // 20, 1×20, 5 on 2 CPUs (SFS §4.3) is feasible: unchanged.
        let mut w = vec![20];
        w.extend(std::iter::repeat_n(1, 20));
        w.push(5);
        assert!(phis(&w, 2).iter().zip(&w).all(|(&(n, d), &x)| d == 1 && n == x));
    }

    #[test]
    fn fewer_clients_than_cpus_each_get_one_cpu() {
        let r = Readjustment::compute([5, 1, 1], 7, 3, 4);
        assert_eq!(r.cpus, 3);
        // φ = 1, 1, 1: each exactly one CPU.
        assert_eq!(phis(&[5, 1, 1], 4), vec![(1, 1), (1, 1), (1, 1)]);
        assert_eq!(phis(&[7], 8), vec![(7, 1)]);
        assert_eq!(Readjustment::compute([], 0, 0, 4), Readjustment::EMPTY);
    }

    #[test]
    fn huge_weights_do_not_overflow() {
        let max = Weight::MAX;
        // Two maximal weights and a light one on 2 CPUs: feasible, unchanged.
        let r = Readjustment::compute([max, max, 1], 2 * max + 1, 3, 2);
        assert_eq!((r.capped, r.feasible_weight), (0, 2 * max + 1));
        assert_eq!(phis(&[max, 1, 1], 2), vec![(2, 1), (1, 1), (1, 1)]);
        // A million maximal weights and one more on 1024 CPUs: sums stay in u64.
        let n = 1 << 20;
        let r = Readjustment::compute(std::iter::repeat_n(max, n), max * n as u64, n, 1024);
        assert_eq!(r.capped, 0);
    }
}
