//! SFQ, start-time fair queueing (Goyal, Vin and Cheng, "Start-time fair
//! queueing: a scheduling algorithm for integrated services packet switching
//! networks", SIGCOMM 1996, section 2; as a CPU scheduler in Goyal, Guo and
//! Vin, OSDI 1996), on P CPUs with one global queue as the SFS paper
//! (Chandra et al., OSDI 2000, sections 1.5 and 2.9 of our notes
//! `papers/notes/004-sfs.md`) runs it: any CPU that needs work takes the
//! waiting client with the smallest start tag.
//!
//! # Rules
//!
//! * Start tag on arrival (SFQ Eq. 1): `S = max(v, F_last)` for a client
//!   that becomes runnable (a new client has `F_last = 0`, so gets `S = v`);
//!   a client that stays runnable after a quantum keeps `S = F_last`.
//! * Finish tag (SFQ Eq. 2) computed at the end of the quantum, with the
//!   time actually used and the weight at that moment: `F = S + d/φ`.
//! * Virtual time: on one server SFQ sets `v(t)` to the start tag of the
//!   packet in service, and at the end of a busy period to the largest finish
//!   tag served. On P CPUs we use the SFS paper's definition: `v` is the
//!   minimum start tag over all runnable clients, *running ones included*;
//!   when nothing is runnable, the largest finish tag served so far.
//! * Selection: smallest S among the waiting clients (ties: lower id).
//!
//! Bounds we test on one CPU with static weights and full quanta (SFQ paper,
//! Theorem 1, with every `l^max = Q`): for any interval [t1, t2] in which
//! clients i and j are both runnable, with `W_i` the service i received in it,
//!
//! ```text
//!     | W_i(t1,t2)/w_i - W_j(t1,t2)/w_j |  ≤  Q/w_i + Q/w_j ,
//! ```
//!
//! and, from the selection rule, no client is ever more than one quantum
//! ahead of the fluid reference: `received_i(t) - ideal_i(t) ≤ Q`. It may fall
//! far behind (the GR3 paper measures -819 quanta, "a mirror image of WFQ").
//!
//! With [`Sfq::with_readjustment`] (`sfq+readjust`, the SFS paper's "SFQ with
//! readjustment", its section 4.2) φ is the readjusted weight.
//!
//! Cost: pick, stop, join, leave, block, wake O(log N) (two B-trees: the
//! waiting clients by S, and all runnable clients by S for v); a φ change is
//! O(1) here (tags do not depend on φ until the next charge), readjustment
//! adds O(P log N) per event.
//!
//! Gap SFQ-1: the choice of v on P CPUs. SFQ's "start tag of the client in
//! service" is ambiguous with P clients in service; we take the SFS paper's
//! minimum start tag over runnable clients including running ones, which on
//! one CPU is exactly SFQ's rule (the client in service has the smallest
//! start tag of all runnable clients while it runs). (untested)
//! Gap SFQ-2: when the system is idle, v is the largest finish tag charged so far
//! (SFQ's end-of-busy-period rule), kept until a client is runnable again. (untested)
//! Gap SFQ-3: a weight change the host asks for (SFQ's papers fix each flow's
//! rate), if it raises the weight, keeps the client's lag in service, `φ(S −
//! v)`: `S' = v + (S − v) φ/φ'`; a drop keeps S ([`keep_lag`], stride
//! scheduling's `client_modify` in SFQ's tags).
//! Keeping S, as we did, turned the lead of one quantum a client earned at
//! weight 1 into a lead of a thousand quanta at weight 1000: raised back, it
//! did not run for 8 s while its fluid share was 2/3 of a CPU
//! (`scenarios/examples/reweight-starvation.toml`). A φ changed by
//! readjustment (`sfq+readjust`) keeps S, as the SFS paper's readjustment
//! does. (test: `raised_weight_is_not_starved`)

use std::collections::BTreeSet;

use super::one_queue::{OneQueue, TagRules, Tagged};
use crate::model::{ClientId, Time};
use crate::readjust::Phi;
use crate::roster::{ClientTable, Status};
use crate::scheduler::SchedConfig;
use crate::shell::Shell;
use crate::vtime::{keep_lag, tag_delta, VTime};

/// Start-time fair queueing on one global queue.
pub type Sfq = Shell<OneQueue<SfqRules>>;

/// A client's SFQ tag: S of the next quantum (= F of the service received so far).
#[derive(Clone, Copy, Debug)]
pub struct SfqTag {
    start: VTime,
}

/// SFQ's rules: the waiting and runnable sets by start tag, and v.
#[derive(Clone, Debug)]
pub struct SfqRules {
    /// Waiting (runnable, not running) clients by start tag.
    waiting: BTreeSet<(VTime, ClientId)>,
    /// All runnable clients, running ones included, by start tag: v is the first.
    runnable: BTreeSet<(VTime, ClientId)>,
    /// The largest finish tag charged: v while nothing is runnable.
    max_finish: VTime,
}

impl SfqRules {
    /// The system virtual time v.
    pub fn virtual_time(&self) -> VTime {
        self.runnable.first().map_or(self.max_finish, |&(s, _)| s)
    }
}

impl Sfq {
    /// The system virtual time v.
    pub fn virtual_time(&self) -> VTime {
        self.policy().rules().virtual_time()
    }
}

impl TagRules for SfqRules {
    type Tags = SfqTag;
    const NAME: &'static str = "sfq";
    const READJUSTED_NAME: &'static str = "sfq+readjust";

    fn new(_cfg: &SchedConfig) -> Self {
        SfqRules { waiting: BTreeSet::new(), runnable: BTreeSet::new(), max_finish: 0 }
    }

    fn join_tags(&self, _phi: Phi) -> SfqTag {
        SfqTag { start: 0 }
    }

    /// `c` becomes runnable: `S = max(v, F_last)`.
    fn arrive(&mut self, c: ClientId, t: &mut Tagged<SfqTag>) {
        let s = t.tags.start.max(self.virtual_time());
        t.tags.start = s;
        self.waiting.insert((s, c));
        self.runnable.insert((s, c));
    }

    fn depart(&mut self, c: ClientId, t: &mut Tagged<SfqTag>) {
        self.waiting.remove(&(t.tags.start, c));
        self.runnable.remove(&(t.tags.start, c));
    }

    /// `F = S + d/φ` with the weight at the end of the quantum; F is the next S.
    fn charge(&mut self, c: ClientId, t: &mut Tagged<SfqTag>, ran: Time) {
        self.runnable.remove(&(t.tags.start, c));
        t.tags.start += tag_delta(ran, t.phi);
        self.max_finish = self.max_finish.max(t.tags.start);
    }

    fn requeue(&mut self, c: ClientId, t: &mut Tagged<SfqTag>) {
        self.waiting.insert((t.tags.start, c));
        self.runnable.insert((t.tags.start, c));
    }

    /// Tags do not depend on φ until the next charge: nothing to re-key.
    fn reweight(&mut self, _c: ClientId, t: &mut Tagged<SfqTag>, phi: Phi, _status: Status) {
        t.phi = phi;
    }

    /// A host weight change keeps the lag in service (Gap SFQ-3):
    /// `S' = v + (S − v) φ/φ'` ([`keep_lag`]); v is unchanged (S ≥ v for every
    /// runnable client, and the client at v stays at v).
    fn set_weight(&mut self, c: ClientId, t: &mut Tagged<SfqTag>, phi: Phi, status: Status) {
        let v = self.virtual_time();
        self.depart(c, t);
        t.tags.start = keep_lag(t.tags.start, v, t.phi, phi);
        t.phi = phi;
        match status {
            Status::Runnable => self.requeue(c, t),
            Status::Running(_) => {
                self.runnable.insert((t.tags.start, c));
            }
            Status::Blocked => {}
        }
    }

    /// The smallest start tag among the waiting clients (ties: lower id).
    fn queued(&self) -> Vec<ClientId> {
        self.waiting.iter().map(|&(_, c)| c).collect()
    }

    fn take(&mut self, _clients: &mut ClientTable<Tagged<SfqTag>>) -> Option<ClientId> {
        self.waiting.pop_first().map(|(_, c)| c)
    }
}
