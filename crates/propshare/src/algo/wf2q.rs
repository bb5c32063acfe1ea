//! WF2Q+, worst-case fair weighted fair queueing (Bennett and Zhang,
//! "Hierarchical packet fair queueing algorithms", SIGCOMM 1996 and ToN
//! 1997, section 4: WF2Q+), as a CPU scheduler on P CPUs with one global
//! queue: any CPU that needs work takes the *eligible* client with the
//! smallest virtual finish time.
//!
//! # Rules (paper's packet terms -> ours)
//!
//! A session is a client, a packet is a quantum Q, the link rate r_i of a
//! session is its (readjusted) weight φ_i, tags are in ns per unit weight
//! ([`crate::vtime`]).
//!
//! * Tags (WF2Q+ Eq. for S and F): a client that becomes backlogged (joins
//!   or wakes) gets `S = max(F_last, V)`; a client that stays backlogged
//!   after a quantum gets `S = F_last` (no max with V); its queued quantum has
//!   `F = S + Q/φ`. When it stops after running `d` ns it is charged what it
//!   used: `F_last := S + d/φ` (φ at the end of the run).
//! * System virtual time (the WF2Q+ function):
//!   `V(t + τ) = max(V(t) + τ·P'/Σφ, min_{i ∈ B(t+τ)} S_i)`: it advances
//!   at the fluid rate between events and is pulled up to the smallest start
//!   tag of the backlogged clients B when it falls below it.
//! * Selection: among the clients with `S ≤ V` (eligible), the smallest F;
//!   ties by lower id.
//!
//! On one CPU with continuously backlogged clients this is WF2Q, so (Bennett
//! and Zhang, WF2Q, INFOCOM 1996, Theorems 1 and 2; kept by WF2Q+) every
//! client stays within one quantum of the fluid (GPS) reference both ways:
//! `-Q(1 - w_i/W) ≤ ideal_i(t) - received_i(t) ≤ Q`. Our property tests
//! check exactly that, and that WFQ breaks the upper side.
//!
//! With [`Wf2q::with_readjustment`] (`wf2q+readjust`) every weight above is
//! the readjusted weight φ of [`crate::readjust`] and V advances at
//! `(P' - m) / R`.
//!
//! Cost: pick O(log N) amortised (each client moves from the start-ordered
//! to the finish-ordered set at most once per quantum), join, leave, block,
//! wake, stop O(log N); with readjustment each change adds O(P log N).
//!
//! Gap WF2Q-1: the papers have one server; we take `r_i = φ_i` and the fluid rate
//! `P'/Σφ` (`(P'-m)/R` with readjustment) as the "elapsed work" term, so V
//! is the GPS/GMS virtual time whenever it is not pulled up. (untested)
//! Gap WF2Q-2: V is pulled up to `min S` at selections only, over the *queued*
//! clients. On one CPU a selection happens only when nothing runs, so B is
//! exactly the queued set there and this is the paper's rule; at other
//! events (a stop, an arrival while a client runs) the client in service is
//! not queued, and pulling V up to the others' start tags would wrongly skip
//! it (a test caught exactly that: weights 17:1 ran the heavy client 0.94 Q
//! ahead). On P CPUs it guarantees that some queued client is eligible at
//! every pick, so the scheduler is work-conserving. (untested)
//! Gap WF2Q-3: a quantum that ends early is charged its real length (the paper's
//! packets have known lengths); the next quantum is tagged as a full Q. (untested)
//! Gap WF2Q-4: a weight change the host asks for (the papers fix each
//! session's rate), if it raises the weight, keeps the client's lag in
//! service, `φ(S − V)`: `S' = V + (S − V) φ/φ'` (ahead or behind); a drop
//! keeps S ([`keep_lag`]); the queued quantum is tagged again, `F = S' + Q/φ'`. Keeping S, as we did, starved a client raised
//! from weight 1 back to 1000 for 8 s (`scenarios/examples/reweight-starvation.toml`).
//! A φ changed by readjustment (`wf2q+readjust`) keeps S, as the SFS paper's
//! readjustment does. (test: `raised_weight_is_not_starved`)

use std::collections::BTreeSet;

use super::one_queue::{OneQueue, TagRules, Tagged};
use crate::model::{ClientId, Time};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Status};
use crate::scheduler::SchedConfig;
use crate::shell::Shell;
use crate::vtime::{keep_lag, tag_delta, VTime, VirtualClock};

/// WF2Q+ on one global queue.
pub type Wf2q = Shell<OneQueue<Wf2qRules>>;

/// A client's WF2Q+ tags.
#[derive(Clone, Copy, Debug)]
pub struct Wf2qTags {
    /// S: start tag of the next quantum (= F_last while it waits).
    start: VTime,
    /// F = S + Q/φ of the queued quantum.
    finish: VTime,
    /// Queued in the eligible set (keyed by F) rather than the pending set (keyed by S).
    eligible: bool,
}

/// WF2Q+'s rules: V, and the queued clients split by eligibility.
#[derive(Clone, Debug)]
pub struct Wf2qRules {
    quantum: Time,
    /// The fluid part of V.
    clock: VirtualClock,
    /// How far V has been pulled above the fluid part, in total.
    pulled: VTime,
    /// Queued clients with S > V, by S.
    pending: BTreeSet<(VTime, ClientId)>,
    /// Queued clients with S ≤ V, by F.
    eligible: BTreeSet<(VTime, ClientId)>,
}

impl Wf2qRules {
    /// V at the last advance.
    fn v(&self) -> VTime {
        self.clock.value() + self.pulled
    }

    /// At a selection: `V := max(V, min S over the queued clients)`.
    fn pull_up(&mut self) {
        if self.eligible.is_empty() {
            if let Some(&(s, _)) = self.pending.first() {
                let v = self.v();
                if s > v {
                    self.pulled += s - v;
                }
            }
        }
    }

    /// Move every pending client whose start tag has been reached to the eligible set.
    fn promote(&mut self, clients: &mut ClientTable<Tagged<Wf2qTags>>) {
        let v = self.v();
        while let Some(&(s, c)) = self.pending.first() {
            if s > v {
                break;
            }
            self.pending.pop_first();
            let t = &mut clients[c].tags;
            t.eligible = true;
            self.eligible.insert((t.finish, c));
        }
    }

    /// Queue the next quantum: `F = S + Q/φ`, eligible if `S ≤ V`.
    fn enqueue(&mut self, c: ClientId, t: &mut Tagged<Wf2qTags>) {
        let v = self.v();
        let tags = &mut t.tags;
        tags.finish = tags.start + tag_delta(self.quantum, t.phi);
        tags.eligible = tags.start <= v;
        if tags.eligible {
            self.eligible.insert((tags.finish, c));
        } else {
            self.pending.insert((tags.start, c));
        }
    }
}

impl TagRules for Wf2qRules {
    type Tags = Wf2qTags;
    const NAME: &'static str = "wf2q";
    const READJUSTED_NAME: &'static str = "wf2q+readjust";

    fn new(cfg: &SchedConfig) -> Self {
        Wf2qRules {
            quantum: cfg.quantum,
            clock: VirtualClock::default(),
            pulled: 0,
            pending: BTreeSet::new(),
            eligible: BTreeSet::new(),
        }
    }

    fn join_tags(&self, _phi: Phi) -> Wf2qTags {
        Wf2qTags { start: 0, finish: 0, eligible: false }
    }

    /// Advance the fluid part of V.
    fn advance(&mut self, now: Time) {
        self.clock.advance(now);
    }

    fn set_rate(&mut self, rate: &Readjustment) {
        self.clock.set_rate(rate);
    }

    /// A client becomes backlogged: `S = max(F_last, V)`.
    fn arrive(&mut self, c: ClientId, t: &mut Tagged<Wf2qTags>) {
        t.tags.start = t.tags.start.max(self.v());
        self.enqueue(c, t);
    }

    fn depart(&mut self, c: ClientId, t: &mut Tagged<Wf2qTags>) {
        if t.tags.eligible {
            self.eligible.remove(&(t.tags.finish, c));
        } else {
            self.pending.remove(&(t.tags.start, c));
        }
    }

    /// Charged what it used: `F_last := S + d/φ`, the next S.
    fn charge(&mut self, _c: ClientId, t: &mut Tagged<Wf2qTags>, ran: Time) {
        t.tags.start += tag_delta(ran, t.phi);
    }

    /// Still backlogged: `S = F_last` (no max with V).
    fn requeue(&mut self, c: ClientId, t: &mut Tagged<Wf2qTags>) {
        self.enqueue(c, t);
    }

    /// A host weight change keeps the lag in service (Gap WF2Q-4).
    fn set_weight(&mut self, c: ClientId, t: &mut Tagged<Wf2qTags>, phi: Phi, status: Status) {
        self.requeue_retagged(c, t, phi, status, |r, t| t.tags.start = keep_lag(t.tags.start, r.v(), t.phi, phi));
    }

    /// Among the eligible clients, the smallest F (ties: lower id).
    fn queued(&self) -> Vec<ClientId> {
        self.pending.iter().chain(&self.eligible).map(|&(_, c)| c).collect()
    }

    fn take(&mut self, clients: &mut ClientTable<Tagged<Wf2qTags>>) -> Option<ClientId> {
        self.pull_up();
        self.promote(clients);
        self.eligible.pop_first().map(|(_, c)| c)
    }
}
