//! WFQ, weighted fair queueing (Demers, Keshav, Shenker, SIGCOMM 1989;
//! Parekh and Gallager, ToN 1993) as a CPU scheduler on P CPUs: one global
//! queue ordered by virtual finish time; any CPU that needs work takes the
//! client with the smallest finish tag.
//!
//! # Rules
//!
//! * System virtual time V is the fluid (GPS/GMS) virtual time: it advances
//!   at `P' / Σ w` over the runnable clients ([`VirtualClock`]).
//! * A joining or waking client gets `S = max(F_last, V)` (a new client has
//!   `F_last = 0`); a client queued for its next quantum has `F = S + Q / w`.
//! * The CPU runs the queued client with the smallest F (ties: lower id).
//! * When it stops after running `d` ns (`d` may be short of Q), it is charged
//!   what it used: its next start is `S := S + d / w`, with w its weight at
//!   the end of the run.
//!
//! On one CPU with continuously runnable clients this is packet-by-packet
//! GPS, so no client falls more than one quantum behind the fluid reference
//! (Parekh-Gallager); it may run far ahead of it (the GR3 paper measures
//! errors up to +819 quanta for a 10%-weight client).
//!
//! With [`Wfq::with_readjustment`] (`wfq+readjust`) every weight above is the
//! readjusted weight φ of [`crate::readjust`], and V advances at
//! `(P' - m) / R`.
//!
//! Gap WFQ-1: on P > 1 CPUs there is no single "WFQ"; we use the GMS virtual time
//! with the plain (not readjusted) weights, which is what the GR3 and SFS
//! papers compare against as WFQ on an SMP. (untested)
//!
//! Gap WFQ-2: a weight change the host asks for (the papers fix each
//! session's rate), if it raises the weight, keeps the client's lag in
//! service, `φ(S − V)`: `S' = V + (S − V) φ/φ'`; a drop keeps S
//! ([`keep_lag`]); its queued quantum is tagged again.
//! Keeping S, as we did, starved a client dropped from weight 1000 to 1 and
//! raised again for hundreds of quanta (the contract test of
//! `propshare-sim/tests/reweight.rs` found it). A φ changed by
//! readjustment (`wfq+readjust`) keeps S. (test: `weight_changes_keep_lag_bounded`)
//!
//! Cost: pick, stop, join, leave, block, wake O(log N) (a B-tree); with
//! readjustment each runnable-set change adds O(P log N) for re-keying the at
//! most P capped clients.

use std::collections::BTreeSet;

use super::one_queue::{OneQueue, TagRules, Tagged};
use crate::model::{ClientId, Time};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Status};
use crate::scheduler::SchedConfig;
use crate::shell::Shell;
use crate::vtime::{keep_lag, tag_delta, VTime, VirtualClock};

/// Weighted fair queueing on one global queue.
pub type Wfq = Shell<OneQueue<WfqRules>>;

/// A client's WFQ tags.
#[derive(Clone, Copy, Debug)]
pub struct WfqTags {
    /// Start tag of the next quantum (= finish tag of the service received so far).
    start: VTime,
    /// The key it is queued under while waiting.
    finish: VTime,
}

/// WFQ's rules: the fluid virtual clock and the queue by finish tag.
#[derive(Clone, Debug)]
pub struct WfqRules {
    quantum: Time,
    clock: VirtualClock,
    queue: BTreeSet<(VTime, ClientId)>,
}

impl WfqRules {
    /// Queue the next quantum under `F = S + Q/φ`.
    fn enqueue(&mut self, c: ClientId, t: &mut Tagged<WfqTags>) {
        t.tags.finish = t.tags.start + tag_delta(self.quantum, t.phi);
        self.queue.insert((t.tags.finish, c));
    }
}

impl TagRules for WfqRules {
    type Tags = WfqTags;
    const NAME: &'static str = "wfq";
    const READJUSTED_NAME: &'static str = "wfq+readjust";

    fn new(cfg: &SchedConfig) -> Self {
        WfqRules { quantum: cfg.quantum, clock: VirtualClock::default(), queue: BTreeSet::new() }
    }

    fn join_tags(&self, _phi: Phi) -> WfqTags {
        WfqTags { start: 0, finish: 0 }
    }

    fn advance(&mut self, now: Time) {
        self.clock.advance(now);
    }

    fn set_rate(&mut self, rate: &Readjustment) {
        self.clock.set_rate(rate);
    }

    /// `S = max(F_last, V)`.
    fn arrive(&mut self, c: ClientId, t: &mut Tagged<WfqTags>) {
        t.tags.start = t.tags.start.max(self.clock.value());
        self.enqueue(c, t);
    }

    fn depart(&mut self, c: ClientId, t: &mut Tagged<WfqTags>) {
        self.queue.remove(&(t.tags.finish, c));
    }

    /// Charged what it used: `S := S + d/φ`.
    fn charge(&mut self, _c: ClientId, t: &mut Tagged<WfqTags>, ran: Time) {
        t.tags.start += tag_delta(ran, t.phi);
    }

    fn requeue(&mut self, c: ClientId, t: &mut Tagged<WfqTags>) {
        self.enqueue(c, t);
    }

    /// A host weight change keeps the lag in service (Gap WFQ-2).
    fn set_weight(&mut self, c: ClientId, t: &mut Tagged<WfqTags>, phi: Phi, status: Status) {
        self.requeue_retagged(c, t, phi, status, |r, t| {
            t.tags.start = keep_lag(t.tags.start, r.clock.value(), t.phi, phi)
        });
    }

    /// The smallest finish tag (ties: lower id).
    fn queued(&self) -> Vec<ClientId> {
        self.queue.iter().map(|&(_, c)| c).collect()
    }

    fn take(&mut self, _clients: &mut ClientTable<Tagged<WfqTags>>) -> Option<ClientId> {
        self.queue.pop_first().map(|(_, c)| c)
    }
}
