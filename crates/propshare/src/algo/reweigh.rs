//! Readjusted weights kept current for the tag-based baselines (WF2Q+, SFQ,
//! stride): a helper, not an algorithm.
//!
//! Every tag-based algorithm with a `+readjust` variant does the same thing
//! on each change of the runnable set or of a weight (SFS paper section 2.9:
//! "run readjust on every change and replace w by φ wherever the base
//! scheduler uses the weight"): readjust the runnable set (O(P), see
//! [`crate::readjust`]), then give the at most P clients whose cap changed
//! their new φ. [`Reweigh`] does the bookkeeping and returns those changes;
//! the algorithm re-keys the clients in its own queues.
//!
//! Without readjustment (the plain variants) it tracks nothing and returns
//! the plain fluid rate `P' / Σw` with `P' = min(P, N)`.
//!
//! Cost: insert and remove O(log N) (only with readjustment); refresh
//! O(P log N) with readjustment, O(1) without.

use crate::model::{ClientId, Weight};
use crate::readjust::{FeasibleSet, Phi, Readjustment};
use crate::roster::Roster;

/// Readjustment bookkeeping for one scheduler.
#[derive(Clone, Debug, Default)]
pub struct Reweigh {
    enabled: bool,
    feasible: FeasibleSet,
    capped: Vec<ClientId>,
}

impl Reweigh {
    /// Tracks readjusted weights if `enabled`, else nothing.
    pub fn new(enabled: bool) -> Reweigh {
        Reweigh { enabled, ..Reweigh::default() }
    }

    /// Whether weights are readjusted.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `c` (weight `w`) became runnable.
    pub fn insert(&mut self, c: ClientId, w: Weight) {
        if self.enabled {
            self.feasible.insert(c, w);
        }
    }

    /// `c` (weight `w`) stopped being runnable.
    pub fn remove(&mut self, c: ClientId, w: Weight) {
        if self.enabled {
            self.feasible.remove(c, w);
        }
    }

    /// `c`'s weight changed from `old` to `new`; `runnable` says whether it is
    /// in the runnable set (running included).
    pub fn change_weight(&mut self, c: ClientId, old: Weight, new: Weight, runnable: bool) {
        if runnable {
            self.remove(c, old);
            self.insert(c, new);
        }
    }

    /// After the runnable set or a weight changed: the new readjustment (the
    /// fluid rate is `feasible_cpus() / feasible_weight`) and every client
    /// whose φ changed, with its new φ. Clients that leave the capped set get
    /// `φ = w` back (blocked ones included, so that they wake uncapped).
    pub fn refresh(&mut self, roster: &Roster) -> (Readjustment, Vec<(ClientId, Phi)>) {
        if !self.enabled {
            let r = Readjustment {
                cpus: roster.cpus().min(roster.runnable()) as u64,
                capped: 0,
                feasible_weight: roster.runnable_weight(),
            };
            return (r, Vec::new());
        }
        let r = self.feasible.readjust(roster.cpus());
        let now_capped: Vec<ClientId> = self.feasible.heaviest(r.capped).map(|(c, _)| c).collect();
        let mut changes = Vec::new();
        for &c in self.capped.iter().filter(|c| !now_capped.contains(c)) {
            if let Ok(w) = roster.weight(c) {
                changes.push((c, Phi::whole(w.get())));
            }
        }
        changes.extend(now_capped.iter().map(|&c| (c, r.capped_phi())));
        self.capped = now_capped;
        (r, changes)
    }
}

/// Whether two rationals are the same representation (cheap "unchanged" test).
#[inline]
pub fn same_phi(a: Phi, b: Phi) -> bool {
    a.num == b.num && a.den == b.den
}
