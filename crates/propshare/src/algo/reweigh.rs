//! Readjusted weights kept current for every baseline with a `+readjust`
//! variant (WFQ, WF2Q+, SFQ, stride, lottery, WRR, SRR, VTRR, CFS, EEVDF):
//! a helper, not an algorithm.
//!
//! Every algorithm with a `+readjust` variant does the same thing
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
//! The option `+dedicate` ([`Reweigh::dedicating`], for the global-queue
//! algorithms whose P-CPU rules make a client wait or lose turns: lottery,
//! WRR, SRR, VTRR) adds one rule: a waiting capped client runs on the next
//! idle CPU ([`Reweigh::waiting_capped`]), since its readjusted share is
//! exactly one CPU.
//!
//! Cost: insert and remove O(log N) (only with readjustment); refresh
//! O(P log N) with readjustment, O(1) without.

use crate::model::{ClientId, Weight};
use crate::readjust::{FeasibleSet, Phi, Readjustment};
use crate::roster::{Roster, Status};

/// Readjustment bookkeeping for one scheduler.
#[derive(Clone, Debug, Default)]
pub struct Reweigh {
    enabled: bool,
    dedicate: bool,
    feasible: FeasibleSet,
    capped: Vec<ClientId>,
}

impl Reweigh {
    /// Tracks readjusted weights if `enabled`, else nothing.
    pub fn new(enabled: bool) -> Reweigh {
        Reweigh { enabled, ..Reweigh::default() }
    }

    /// Readjusted weights plus the dedicated-CPU rule ([`Reweigh::waiting_capped`]).
    pub fn dedicating() -> Reweigh {
        Reweigh { enabled: true, dedicate: true, ..Reweigh::default() }
    }

    /// Whether weights are readjusted.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The name of the variant in this mode, from the names of the plain,
    /// `+readjust` and `+readjust+dedicate` variants.
    pub fn variant<'a>(&self, [plain, readjusted, dedicated]: [&'a str; 3]) -> &'a str {
        match (self.enabled, self.dedicate) {
            (false, _) => plain,
            (true, false) => readjusted,
            (true, true) => dedicated,
        }
    }

    /// The dedicated-CPU rule (`+dedicate`): a capped client's readjusted
    /// share is exactly one CPU, and in the fluid model it never waits, so
    /// an idle CPU runs a waiting capped client before asking the
    /// algorithm. Returns the heaviest waiting (runnable, not running)
    /// capped client, if the rule is on. O(P).
    pub fn waiting_capped(&self, roster: &Roster) -> Option<ClientId> {
        if !self.dedicate {
            return None;
        }
        self.capped.iter().copied().find(|&c| roster.status(c) == Ok(Status::Runnable))
    }

    /// The clients capped by the last [`Reweigh::refresh`] (at most P − 1,
    /// heaviest first); empty without readjustment.
    pub fn capped(&self) -> &[ClientId] {
        &self.capped
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
        self.refresh_over(roster.cpus(), roster.runnable(), roster.runnable_weight(), |c| roster.weight(c).ok())
    }

    /// [`Reweigh::refresh`] over the parts of a roster it reads: P, the
    /// number and weight of runnable clients, and each client's weight.
    pub(crate) fn refresh_over(
        &mut self,
        cpus: usize,
        runnable: usize,
        runnable_weight: u64,
        weight_of: impl Fn(ClientId) -> Option<Weight>,
    ) -> (Readjustment, Vec<(ClientId, Phi)>) {
        if !self.enabled {
            let r = Readjustment { cpus: cpus.min(runnable) as u64, capped: 0, feasible_weight: runnable_weight };
            return (r, Vec::new());
        }
        let r = self.feasible.readjust(cpus);
        let now_capped: Vec<ClientId> = self.feasible.heaviest(r.capped).map(|(c, _)| c).collect();
        let mut changes = Vec::new();
        for &c in self.capped.iter().filter(|c| !now_capped.contains(c)) {
            if let Some(w) = weight_of(c) {
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

/// A rational weight φ = num/den paid out as whole units per round, exactly
/// over rounds: round k pays `⌊(carry + num·unit) / den⌋` units and carries
/// the remainder, so any k consecutive rounds at a fixed φ pay `k·φ·unit`
/// units within one (Bresenham's rule, the deficit counter of DRR). The
/// round-robin baselines use it for their per-round allowance (WRR: ns per
/// turn, unit Q; SRR and VTRR: quanta per round, unit 1). An integer φ pays
/// exactly `φ·unit` every round and never carries.
#[derive(Clone, Copy, Debug)]
pub struct RoundShare {
    phi: Phi,
    /// Remainder owed from earlier rounds, `< den`.
    carry: u64,
}

impl RoundShare {
    /// A share of `phi` with nothing carried.
    pub fn new(phi: Phi) -> RoundShare {
        RoundShare { phi, carry: 0 }
    }

    /// The current φ.
    pub fn phi(&self) -> Phi {
        self.phi
    }

    /// Change φ; a different φ drops the carried remainder (less than one
    /// unit is lost or gained per change).
    pub fn set(&mut self, phi: Phi) {
        if !same_phi(self.phi, phi) {
            *self = RoundShare::new(phi);
        }
    }

    /// `⌊φ·unit⌋`, without touching the carry (a cap for the current round).
    pub fn floor(&self, unit: u64) -> u64 {
        let v = self.phi.num as u128 * unit as u128 / self.phi.den.max(1) as u128;
        v.min(u64::MAX as u128) as u64
    }

    /// The units paid for the next round (at least 1 if φ ≥ 1/unit, else it
    /// may be 0 while the carry builds up). Saturates at `u64::MAX`.
    pub fn next_round(&mut self, unit: u64) -> u64 {
        let den = self.phi.den.max(1) as u128;
        let total = self.phi.num as u128 * unit as u128 + self.carry as u128;
        self.carry = (total % den) as u64;
        (total / den).min(u64::MAX as u128) as u64
    }
}
