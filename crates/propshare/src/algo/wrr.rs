//! WRR, weighted round robin, as the GR3 paper (Caprita et al., USENIX ATC
//! 2005, sections 1 and 6) describes the baseline it measures: clients are
//! served round robin from one global FIFO, and each turn of a client lasts
//! `w` quanta (its weight) instead of one, given as `w` consecutive quanta.
//!
//! # Rules
//!
//! * A client's turn is an allowance of `w·Q` ns. While it has allowance
//!   left it is at the head of the queue: a CPU that asks runs it for
//!   `min(Q, allowance)`, and when it stops it is charged the time it ran
//!   and put back at the *front* (its turn continues).
//! * When its allowance is spent it goes to the back of the queue with a
//!   fresh allowance of `w·Q` for its next turn.
//! * A client that joins or wakes goes to the back with a fresh allowance.
//!
//! Known behaviour: on one CPU with static weights a round lasts `W = Σw`
//! quanta and every client gets exactly `w_i` of them, so the lag is 0 at
//! every round boundary; within a round a client's service is a step, so its
//! error reaches `w_i(W - w_i)/W` quanta (ahead, for the first client of the
//! round; behind, for the last): the error grows with the weight, and is
//! O(w_max) in the worst case (GR3 paper: -12067 to +23593 quanta for its
//! skewed weights). Our tests check `|lag_i| ≤ Q·w_i(W - w_i)/W` and that
//! the first client reaches it exactly.
//!
//! Cost: O(1) for every operation (intrusive list).
//!
//! Gap WRR-1: the GR3 paper's WRR varies the quantum length (one slice of `w·Q`);
//! we give the same service as `w` consecutive slices of Q, so that the host's
//! quantum timer and the contract's "slice ≤ Q" reading hold and a weight
//! change or block takes effect within one quantum. On one CPU the service
//! curve is identical. (untested)
//! Gap WRR-2: an overrun (a run longer than the allowance) is forgiven, not
//! carried into the next turn (DRR would carry it). (untested)
//! Gap WRR-3: a client that blocks in the middle of its turn forfeits the rest;
//! a weight change clamps the rest of the current turn to the new `w·Q`. (untested)
//! Gap WRR-4: on P CPUs a client continuing its turn is put at the front, so the
//! next idle CPU runs it; other CPUs serve the clients behind it meanwhile. (untested)
//!
//! # `wrr+readjust`
//!
//! [`WeightedRoundRobin::with_readjustment`] gives each turn `φ·Q` ns, φ the
//! readjusted weight (SFS paper section 2.9: "replace w by φ"). A capped
//! client's φ = R/D is rational; its turns are paid by
//! [`RoundShare`]: each turn is `⌊(carry + R·Q)/D⌋` ns and the remainder is
//! carried, so any k consecutive turns give exactly `k·φ·Q` ns within 1 ns.
//! A readjustment that changes a client's φ clamps the rest of its current
//! turn to `⌊φ·Q⌋`, as a weight change does. Feasible weights are never
//! changed, so on feasible sets `wrr+readjust` makes exactly `wrr`'s
//! decisions (tested). Readjustment adds O(P log N) per join, leave, block,
//! wake and weight change ([`Reweigh`](crate::algo::reweigh::Reweigh)); pick and stop stay O(1).
//!
//! What it does on P CPUs (tested, `tests/readjust_variants.rs`): the SFS
//! paper's section 4.2 pattern comes out 1:2:1 when both CPUs stop before
//! either picks, but T2 gets 240 of 300 quanta when each CPU picks right
//! after its own stop (its turn ends behind a queued client). WRR's error on P CPUs
//! is its one FIFO, not the weights: a client whose turn ends waits at the
//! back while the others are served, so a capped client's shorter turn
//! (φ* instead of w quanta) means more waits. Weights 10, 1, 1, 1 on 2 CPUs:
//! the heavy client gets 0.75 of a CPU under `wrr+readjust` and 0.91 under
//! `wrr` (readjusted ideal 1).
//!
//! Option `wrr+readjust+dedicate` ([`WeightedRoundRobin::with_dedicated_cpus`]):
//! a waiting capped client runs on the next idle CPU wherever it stands in
//! the queue ([`Reweigh::waiting_capped`](crate::algo::reweigh::Reweigh::waiting_capped)); its turns are charged as usual.
//! Section 4.2 pattern: 1:2:1 under either host ordering (tested).
//!
//! Gap WRR-5: the carried remainder (under 1 ns) is dropped when φ changes. (untested)
//!
//! Invariants: WRR-1, the queue holds exactly the runnable clients that are
//! not running; WRR-2, every client present has a turn, and no other.

use crate::algo::reweigh::RoundShare;
use crate::list::ClientList;
use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{check_queue_holds_waiting, Policy, Shell, Variants};

/// Weighted round robin over one global queue.
pub type WeightedRoundRobin = Shell<Wrr>;

/// The rules of weighted round robin.
#[derive(Clone, Debug)]
pub struct Wrr {
    quantum: Time,
    queue: ClientList,
    turns: ClientTable<Turn>,
}

#[derive(Clone, Copy, Debug)]
struct Turn {
    /// ns left in the client's current turn.
    allowance: Time,
    /// Its (readjusted) weight, paid `φ·Q` ns per turn.
    share: RoundShare,
}

impl Variants for Wrr {
    const NAMES: [&'static str; 3] = ["wrr", "wrr+readjust", "wrr+readjust+dedicate"];

    fn fresh(cfg: &SchedConfig) -> Self {
        Wrr { quantum: cfg.quantum, queue: ClientList::new(), turns: ClientTable::new() }
    }
}

impl Wrr {
    /// A fresh turn of `φ·Q` ns, at the back of the queue.
    fn start_turn(&mut self, c: ClientId) {
        let t = &mut self.turns[c];
        t.allowance = t.share.next_round(self.quantum);
        self.queue.push_back(c);
    }

    /// `c`'s weight is now `phi`: the rest of its turn is clamped to `⌊φ·Q⌋`.
    fn set_phi(&mut self, c: ClientId, phi: Phi) {
        if let Some(t) = self.turns.get_mut(c) {
            t.share.set(phi);
            t.allowance = t.allowance.min(t.share.floor(self.quantum));
        }
    }
}

impl Policy for Wrr {
    #[inline]
    fn join(&mut self, _r: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        self.turns.insert(c, Turn { allowance: 0, share: RoundShare::new(Phi::whole(w.get())) });
        self.start_turn(c);
        None
    }

    #[inline]
    fn leave(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight, _was: Status) {
        self.queue.remove(c);
        self.turns.remove(c);
    }

    #[inline]
    fn block(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) {
        self.queue.remove(c);
    }

    #[inline]
    fn wake(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        self.start_turn(c);
        None
    }

    #[inline]
    fn set_weight(&mut self, _r: &Roster, _now: Time, c: ClientId, _old: Weight, new: Weight, _s: Status) {
        self.set_phi(c, Phi::whole(new.get()));
    }

    #[inline]
    fn pick(&mut self, r: &Roster, _now: Time, _cpu: CpuId) -> Option<(ClientId, Time)> {
        let first = match r.waiting_capped() {
            Some(c) => {
                self.queue.remove(c);
                Some(c)
            }
            None => self.queue.pop_front(),
        };
        first.map(|c| (c, self.quantum.min(self.turns[c].allowance).max(1)))
    }

    #[inline]
    fn stopped(&mut self, _r: &Roster, _now: Time, _cpu: CpuId, c: ClientId, _w: Weight, ran: Time, why: StopReason) {
        if why == StopReason::Left {
            self.turns.remove(c);
            return;
        }
        let t = &mut self.turns[c];
        t.allowance = t.allowance.saturating_sub(ran);
        if why.still_runnable() {
            if t.allowance > 0 {
                self.queue.push_front(c);
            } else {
                self.start_turn(c);
            }
        }
    }

    #[inline]
    fn readjusted(&mut self, _r: &Roster, _rate: &Readjustment, changes: &[(ClientId, Phi)]) {
        for &(c, phi) in changes {
            self.set_phi(c, phi);
        }
    }

    #[inline]
    fn check_invariants(&self, r: &Roster) -> Result<(), String> {
        check_queue_holds_waiting("WRR-1", r, self.queue.iter())?;
        if self.turns.iter().count() != r.len() || self.turns.iter().any(|(c, _)| r.status(c).is_err()) {
            return Err(format!("WRR-2: {} turns for {} clients", self.turns.iter().count(), r.len()));
        }
        Ok(())
    }
}
