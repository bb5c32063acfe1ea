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
//! Gap: the choice of v on P CPUs. SFQ's "start tag of the client in
//! service" is ambiguous with P clients in service; we take the SFS paper's
//! minimum start tag over runnable clients including running ones, which on
//! one CPU is exactly SFQ's rule (the client in service has the smallest
//! start tag of all runnable clients while it runs).
//! Gap: when the system is idle, v is the largest finish tag charged so far
//! (SFQ's end-of-busy-period rule), kept until a client is runnable again.

use std::collections::BTreeSet;

use crate::algo::reweigh::Reweigh;
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::readjust::Phi;
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};
use crate::vtime::{tag_delta, VTime};

#[derive(Clone, Copy, Debug)]
struct Tags {
    /// S of the next quantum (= F of the service received so far).
    start: VTime,
    /// Current (readjusted) weight.
    phi: Phi,
}

/// Start-time fair queueing on one global queue.
#[derive(Clone, Debug)]
pub struct Sfq {
    roster: Roster,
    quantum: Time,
    tags: ClientTable<Tags>,
    /// Waiting (runnable, not running) clients by start tag.
    waiting: BTreeSet<(VTime, ClientId)>,
    /// All runnable clients, running ones included, by start tag: v is the first.
    runnable: BTreeSet<(VTime, ClientId)>,
    /// The largest finish tag charged: v while nothing is runnable.
    max_finish: VTime,
    reweigh: Reweigh,
}

impl Sfq {
    /// Plain SFQ.
    pub fn new(cfg: SchedConfig) -> Sfq {
        Sfq {
            roster: Roster::new(cfg.cpus),
            quantum: cfg.quantum,
            tags: ClientTable::new(),
            waiting: BTreeSet::new(),
            runnable: BTreeSet::new(),
            max_finish: 0,
            reweigh: Reweigh::new(false),
        }
    }

    /// SFQ over readjusted weights (`sfq+readjust`).
    pub fn with_readjustment(cfg: SchedConfig) -> Sfq {
        Sfq { reweigh: Reweigh::new(true), ..Sfq::new(cfg) }
    }

    /// The system virtual time v.
    pub fn virtual_time(&self) -> VTime {
        self.runnable.first().map_or(self.max_finish, |&(s, _)| s)
    }

    fn refresh(&mut self) {
        let (_, changes) = self.reweigh.refresh(&self.roster);
        for (c, phi) in changes {
            if let Some(t) = self.tags.get_mut(c) {
                t.phi = phi;
            }
        }
    }

    /// `c` becomes runnable: `S = max(v, F_last)`.
    fn arrive(&mut self, c: ClientId, w: Weight) {
        let v = self.virtual_time();
        let t = &mut self.tags[c];
        t.start = t.start.max(v);
        t.phi = Phi::whole(w.get());
        self.waiting.insert((t.start, c));
        self.runnable.insert((t.start, c));
        self.reweigh.insert(c, w);
        self.refresh();
    }

    /// `c` stops being runnable (it is not running).
    fn depart(&mut self, c: ClientId, w: Weight) {
        let s = self.tags[c].start;
        self.waiting.remove(&(s, c));
        self.runnable.remove(&(s, c));
        self.reweigh.remove(c, w);
    }
}

impl Scheduler for Sfq {
    fn name(&self) -> &str {
        if self.reweigh.enabled() {
            "sfq+readjust"
        } else {
            "sfq"
        }
    }

    fn join(&mut self, _now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        self.tags.insert(c, Tags { start: 0, phi: Phi::whole(w.get()) });
        self.arrive(c, w);
        Ok(None)
    }

    fn leave(&mut self, _now: Time, c: ClientId) -> Result<(), SchedError> {
        let w = self.roster.weight(c)?;
        let was = self.roster.leave(c)?;
        if was == Status::Runnable {
            self.depart(c, w);
        }
        self.tags.remove(c);
        self.refresh();
        Ok(())
    }

    fn block(&mut self, _now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        self.depart(c, self.roster.weight(c)?);
        self.refresh();
        Ok(())
    }

    fn wake(&mut self, _now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        let w = self.roster.weight(c)?;
        self.arrive(c, w);
        Ok(None)
    }

    fn set_weight(&mut self, _now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        let status = self.roster.status(c)?;
        let old = self.roster.set_weight(c, w)?;
        self.reweigh.change_weight(c, old, w, status.is_runnable());
        self.tags[c].phi = Phi::whole(w.get());
        self.refresh();
        Ok(())
    }

    fn pick(&mut self, _now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        Ok(match self.waiting.pop_first() {
            Some((_, client)) => {
                self.roster.start(cpu, client);
                Decision::Run { client, slice: self.quantum }
            }
            None => Decision::Idle,
        })
    }

    fn stopped(&mut self, _now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        let w = self.roster.stop(cpu, c, why)?;
        let t = &mut self.tags[c];
        self.runnable.remove(&(t.start, c));
        t.start += tag_delta(ran, t.phi);
        let finish = t.start;
        self.max_finish = self.max_finish.max(finish);
        match why {
            StopReason::Expired | StopReason::Preempted => {
                self.waiting.insert((finish, c));
                self.runnable.insert((finish, c));
            }
            StopReason::Blocked => {
                self.reweigh.remove(c, w);
                self.refresh();
            }
            StopReason::Left => {
                self.reweigh.remove(c, w);
                self.tags.remove(c);
                self.refresh();
            }
        }
        Ok(())
    }
}
