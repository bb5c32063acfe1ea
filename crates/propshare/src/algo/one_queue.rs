//! The shell shared by the one-queue fair-queueing schedulers (WFQ, WF2Q+,
//! SFQ, stride): a helper, not an algorithm.
//!
//! Each of them keeps one global queue of waiting clients ordered by a tag,
//! and any CPU that needs work takes a client from it. They differ only in
//! their tag rules ([`TagRules`]): how a client's tags are set when it
//! becomes runnable, charged when it stops, re-keyed when its weight φ
//! changes, and which queued client a free CPU takes. What every host event
//! does around those rules is the same for all four and lives here once:
//!
//! 1. validate and record the event in the [`Roster`] (nothing changes on
//!    error);
//! 2. advance the algorithm's virtual clock to `now`;
//! 3. apply the rule;
//! 4. keep the readjusted weights current ([`Reweigh`]; a no-op for the plain
//!    variants) and hand each client whose φ changed to the rules.
//!
//! Cost: that of the rules (O(log N) for all four) plus O(P log N) per
//! runnable-set change with readjustment.

use std::fmt::Debug;

use super::reweigh::{same_phi, Reweigh};
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};

/// One client's state: its current (readjusted) weight and the rules' tags.
#[derive(Clone, Copy, Debug)]
pub struct Tagged<T> {
    /// Current (readjusted) weight.
    pub phi: Phi,
    /// The rules' tags.
    pub tags: T,
}

/// The rules of one tag-based algorithm. The shell calls them with the
/// roster already updated and the clock already advanced. Implement it to
/// add another one-queue algorithm.
pub trait TagRules: Clone + Debug {
    /// Per-client tags.
    type Tags: Copy + Debug;
    /// The registry name of the plain variant.
    const NAME: &'static str;
    /// The registry name of the variant over readjusted weights.
    const READJUSTED_NAME: &'static str;

    /// Empty state for the machine `cfg`.
    fn new(cfg: &SchedConfig) -> Self;
    /// The tags of a client joining with weight `phi`.
    fn join_tags(&self, phi: Phi) -> Self::Tags;
    /// Advance the virtual clock to `now` (default: the algorithm has none).
    fn advance(&mut self, _now: Time) {}
    /// The fluid rate changed (default: the algorithm does not use it).
    fn set_rate(&mut self, _rate: &Readjustment) {}
    /// `c` became runnable (joined or woke): tag it and queue it.
    fn arrive(&mut self, c: ClientId, t: &mut Tagged<Self::Tags>);
    /// `c` stopped being runnable while queued (blocked or left): unqueue it.
    fn depart(&mut self, c: ClientId, t: &mut Tagged<Self::Tags>);
    /// `c` stopped running after `ran` ns: charge it (not queued yet).
    fn charge(&mut self, c: ClientId, t: &mut Tagged<Self::Tags>, ran: Time);
    /// After [`TagRules::charge`], `c` is still runnable: queue it again.
    fn requeue(&mut self, c: ClientId, t: &mut Tagged<Self::Tags>);
    /// After [`TagRules::charge`], `c` blocked (default: nothing to save).
    fn park(&mut self, _c: ClientId, _t: &mut Tagged<Self::Tags>) {}
    /// `c`'s weight becomes `phi` (different from `t.phi`); `status` says
    /// whether it is queued, running or blocked. Default: a queued client is
    /// unqueued and queued again under tags computed with the new φ.
    fn reweight(&mut self, c: ClientId, t: &mut Tagged<Self::Tags>, phi: Phi, status: Status) {
        let queued = status == Status::Runnable;
        if queued {
            self.depart(c, t);
        }
        t.phi = phi;
        if queued {
            self.requeue(c, t);
        }
    }
    /// Take the queued client a free CPU should run, if any.
    fn take(&mut self, clients: &mut ClientTable<Tagged<Self::Tags>>) -> Option<ClientId>;
}

/// A one-queue tag scheduler: the shell around the rules `R`.
#[derive(Clone, Debug)]
pub struct OneQueue<R: TagRules> {
    roster: Roster,
    quantum: Time,
    clients: ClientTable<Tagged<R::Tags>>,
    rules: R,
    reweigh: Reweigh,
}

impl<R: TagRules> OneQueue<R> {
    /// The plain variant.
    pub fn new(cfg: SchedConfig) -> Self {
        OneQueue {
            roster: Roster::new(cfg.cpus),
            quantum: cfg.quantum,
            clients: ClientTable::new(),
            rules: R::new(&cfg),
            reweigh: Reweigh::new(false),
        }
    }

    /// The variant over readjusted weights (SFS paper section 2.9: "replace
    /// w by φ wherever the base scheduler uses the weight").
    pub fn with_readjustment(cfg: SchedConfig) -> Self {
        OneQueue { reweigh: Reweigh::new(true), ..Self::new(cfg) }
    }

    pub(crate) fn rules(&self) -> &R {
        &self.rules
    }

    /// After the runnable set or a weight changed: the new fluid rate, and
    /// the new φ of every client whose cap changed.
    fn refresh(&mut self) {
        let (rate, changes) = self.reweigh.refresh(&self.roster);
        self.rules.set_rate(&rate);
        for (c, phi) in changes {
            self.reweight(c, phi);
        }
    }

    fn reweight(&mut self, c: ClientId, phi: Phi) {
        let (Ok(status), Some(t)) = (self.roster.status(c), self.clients.get_mut(c)) else { return };
        if !same_phi(t.phi, phi) {
            self.rules.reweight(c, t, phi, status);
        }
    }

    /// `c` (weight `w`) became runnable with its plain weight.
    fn arrive(&mut self, c: ClientId, w: Weight) {
        let t = &mut self.clients[c];
        t.phi = Phi::whole(w.get());
        self.rules.arrive(c, t);
        self.reweigh.insert(c, w);
        self.refresh();
    }
}

impl<R: TagRules> Scheduler for OneQueue<R> {
    fn name(&self) -> &str {
        if self.reweigh.enabled() {
            R::READJUSTED_NAME
        } else {
            R::NAME
        }
    }

    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        self.rules.advance(now);
        let phi = Phi::whole(w.get());
        self.clients.insert(c, Tagged { phi, tags: self.rules.join_tags(phi) });
        self.arrive(c, w);
        Ok(None)
    }

    fn leave(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        let w = self.roster.weight(c)?;
        let was = self.roster.leave(c)?;
        self.rules.advance(now);
        if was == Status::Runnable {
            self.rules.depart(c, &mut self.clients[c]);
            self.reweigh.remove(c, w);
        }
        self.clients.remove(c);
        self.refresh();
        Ok(())
    }

    fn block(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        self.rules.advance(now);
        self.rules.depart(c, &mut self.clients[c]);
        self.reweigh.remove(c, self.roster.weight(c)?);
        self.refresh();
        Ok(())
    }

    fn wake(&mut self, now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        self.rules.advance(now);
        self.arrive(c, self.roster.weight(c)?);
        Ok(None)
    }

    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        let status = self.roster.status(c)?;
        let old = self.roster.set_weight(c, w)?;
        self.rules.advance(now);
        self.reweigh.change_weight(c, old, w, status.is_runnable());
        self.reweight(c, Phi::whole(w.get()));
        self.refresh();
        Ok(())
    }

    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        self.rules.advance(now);
        Ok(self.roster.dispatch(cpu, self.rules.take(&mut self.clients), self.quantum))
    }

    fn stopped(&mut self, now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        let w = self.roster.stop(cpu, c, why)?;
        self.rules.advance(now);
        let t = &mut self.clients[c];
        self.rules.charge(c, t, ran);
        match why {
            StopReason::Expired | StopReason::Preempted => self.rules.requeue(c, t),
            StopReason::Blocked => {
                self.rules.park(c, t);
                self.reweigh.remove(c, w);
                self.refresh();
            }
            StopReason::Left => {
                self.reweigh.remove(c, w);
                self.clients.remove(c);
                self.refresh();
            }
        }
        Ok(())
    }
}
