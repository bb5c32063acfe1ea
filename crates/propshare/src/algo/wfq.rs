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
//! Gap: on P > 1 CPUs there is no single "WFQ"; we use the GMS virtual time
//! with the plain (not readjusted) weights, which is what the GR3 and SFS
//! papers compare against as WFQ on an SMP.
//!
//! Cost: pick, stop, join, leave, block, wake O(log N) (a B-tree); with
//! readjustment each runnable-set change adds O(P log N) for re-keying the at
//! most P capped clients.

use std::collections::BTreeSet;

use super::reweigh::{same_phi, Reweigh};
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::readjust::Phi;
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};
use crate::vtime::{tag_delta, VTime, VirtualClock};

#[derive(Clone, Copy, Debug)]
struct Tags {
    /// Start tag of the next quantum (= finish tag of the service received so far).
    start: VTime,
    /// The key it is queued under while waiting.
    finish: VTime,
    /// Its current (readjusted) weight.
    phi: Phi,
}

/// Weighted fair queueing on one global queue.
#[derive(Clone, Debug)]
pub struct Wfq {
    roster: Roster,
    quantum: Time,
    clock: VirtualClock,
    tags: ClientTable<Tags>,
    queue: BTreeSet<(VTime, ClientId)>,
    reweigh: Reweigh,
}

impl Wfq {
    /// Plain WFQ, as in the papers' comparisons.
    pub fn new(cfg: SchedConfig) -> Wfq {
        Wfq {
            roster: Roster::new(cfg.cpus),
            quantum: cfg.quantum,
            clock: VirtualClock::default(),
            tags: ClientTable::new(),
            queue: BTreeSet::new(),
            reweigh: Reweigh::new(false),
        }
    }

    /// WFQ over readjusted weights (`wfq+readjust`).
    pub fn with_readjustment(cfg: SchedConfig) -> Wfq {
        Wfq { reweigh: Reweigh::new(true), ..Wfq::new(cfg) }
    }

    fn enqueue(&mut self, c: ClientId) {
        let t = &mut self.tags[c];
        t.finish = t.start + tag_delta(self.quantum, t.phi);
        self.queue.insert((t.finish, c));
    }

    fn dequeue(&mut self, c: ClientId) {
        if let Some(t) = self.tags.get(c) {
            self.queue.remove(&(t.finish, c));
        }
    }

    /// After the runnable set or a weight changed at `now` (clock already
    /// advanced): new fluid rate, and new φ for clients whose cap changed.
    fn refresh(&mut self) {
        let (r, changes) = self.reweigh.refresh(&self.roster);
        self.clock.set_rate(&r);
        for (c, phi) in changes {
            self.set_phi(c, phi);
        }
    }

    fn set_phi(&mut self, c: ClientId, phi: Phi) {
        let Some(t) = self.tags.get(c) else { return };
        if same_phi(t.phi, phi) {
            return;
        }
        let queued = self.roster.status(c) == Ok(Status::Runnable);
        if queued {
            self.dequeue(c);
        }
        self.tags[c].phi = phi;
        if queued {
            self.enqueue(c);
        }
    }

    fn make_runnable(&mut self, c: ClientId, w: Weight) {
        let v = self.clock.value();
        let t = &mut self.tags[c];
        t.start = t.start.max(v);
        self.reweigh.insert(c, w);
    }
}

impl Scheduler for Wfq {
    fn name(&self) -> &str {
        if self.reweigh.enabled() {
            "wfq+readjust"
        } else {
            "wfq"
        }
    }

    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        self.clock.advance(now);
        self.tags.insert(c, Tags { start: 0, finish: 0, phi: Phi::whole(w.get()) });
        self.make_runnable(c, w);
        self.enqueue(c);
        self.refresh();
        Ok(None)
    }

    fn leave(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        let w = self.roster.weight(c)?;
        let was = self.roster.leave(c)?;
        self.clock.advance(now);
        if was == Status::Runnable {
            self.dequeue(c);
            self.reweigh.remove(c, w);
        }
        self.tags.remove(c);
        self.refresh();
        Ok(())
    }

    fn block(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        self.clock.advance(now);
        self.dequeue(c);
        self.reweigh.remove(c, self.roster.weight(c)?);
        self.refresh();
        Ok(())
    }

    fn wake(&mut self, now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        self.clock.advance(now);
        let w = self.roster.weight(c)?;
        self.tags[c].phi = Phi::whole(w.get());
        self.make_runnable(c, w);
        self.enqueue(c);
        self.refresh();
        Ok(None)
    }

    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        let status = self.roster.status(c)?;
        let old = self.roster.set_weight(c, w)?;
        self.clock.advance(now);
        self.reweigh.change_weight(c, old, w, status.is_runnable());
        self.set_phi(c, Phi::whole(w.get()));
        self.refresh();
        Ok(())
    }

    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        self.clock.advance(now);
        Ok(super::run_first(&mut self.roster, &mut self.queue, cpu, self.quantum))
    }

    fn stopped(&mut self, now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        let w = self.roster.stop(cpu, c, why)?;
        self.clock.advance(now);
        let t = &mut self.tags[c];
        t.start += tag_delta(ran, t.phi);
        match why {
            StopReason::Expired | StopReason::Preempted => self.enqueue(c),
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
