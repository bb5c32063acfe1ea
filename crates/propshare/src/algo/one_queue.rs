//! The policy shared by the one-queue fair-queueing schedulers (WFQ, WF2Q+,
//! SFQ, stride): a helper, not an algorithm.
//!
//! Each of them keeps one global queue of waiting clients ordered by a tag,
//! and any CPU that needs work takes a client from it. They differ only in
//! their tag rules ([`TagRules`]): how a client's tags are set when it
//! becomes runnable, charged when it stops, re-keyed when its weight φ
//! changes, and which queued client a free CPU takes. What every host event
//! does around those rules is the same for all four and lives here once:
//!
//! 1. (the [`Shell`]) validate and record the event in the [`Roster`];
//! 2. advance the algorithm's virtual clock to `now`;
//! 3. apply the rule (a weight change the host asks for goes to
//!    [`TagRules::set_weight`], a φ changed by readjustment to
//!    [`TagRules::reweight`]);
//! 4. (the shell) keep the readjusted weights current ([`Reweigh`]; a no-op
//!    for the plain variants); each client whose φ changed is handed to the
//!    rules, and the fluid rate to [`TagRules::set_rate`].
//!
//! Invariants: OQ-1, the rules' queue holds exactly the runnable clients that
//! are not running (checked through [`TagRules::queued`]); OQ-2, every
//! client present has tags, and no other.
//!
//! Cost: that of the rules (O(log N) for all four) plus O(P log N) per
//! runnable-set change with readjustment.

use std::fmt::Debug;

use super::reweigh::{same_phi, Reweigh};
use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{check_queue_holds_waiting, Policy, Shell};

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
        self.requeue_retagged(c, t, phi, status, |_, _| {});
    }
    /// Unqueue `c` if it waits, let `retag` move its tags (it still sees the
    /// old φ in `t.phi`), set φ to `phi`, and queue it again.
    fn requeue_retagged(
        &mut self,
        c: ClientId,
        t: &mut Tagged<Self::Tags>,
        phi: Phi,
        status: Status,
        retag: impl FnOnce(&Self, &mut Tagged<Self::Tags>),
    ) where
        Self: Sized,
    {
        let queued = status == Status::Runnable;
        if queued {
            self.depart(c, t);
        }
        retag(self, t);
        t.phi = phi;
        if queued {
            self.requeue(c, t);
        }
    }
    /// The host changed `c`'s weight to `phi` (readjustment's φ changes come
    /// through [`TagRules::reweight`]). Default: the same as a readjusted φ.
    fn set_weight(&mut self, c: ClientId, t: &mut Tagged<Self::Tags>, phi: Phi, status: Status) {
        self.reweight(c, t, phi, status);
    }
    /// Take the queued client a free CPU should run, if any.
    fn take(&mut self, clients: &mut ClientTable<Tagged<Self::Tags>>) -> Option<ClientId>;
    /// The queued clients, in any order (for the invariant check).
    fn queued(&self) -> Vec<ClientId>;
}

/// The policy of a one-queue tag scheduler: per-client tags and the rules `R`.
#[derive(Clone, Debug)]
pub struct OneQueue<R: TagRules> {
    quantum: Time,
    clients: ClientTable<Tagged<R::Tags>>,
    rules: R,
}

impl<R: TagRules> Shell<OneQueue<R>> {
    /// The plain variant.
    pub fn new(cfg: SchedConfig) -> Self {
        Shell::build(R::NAME, &cfg, OneQueue::policy(&cfg))
    }

    /// The variant over readjusted weights (SFS paper section 2.9: "replace
    /// w by φ wherever the base scheduler uses the weight").
    pub fn with_readjustment(cfg: SchedConfig) -> Self {
        let roster = Roster::with_readjustment(cfg.cpus, Reweigh::new(true));
        Shell::with_roster(R::READJUSTED_NAME, roster, OneQueue::policy(&cfg))
    }
}

impl<R: TagRules> OneQueue<R> {
    fn policy(cfg: &SchedConfig) -> Self {
        OneQueue { quantum: cfg.quantum, clients: ClientTable::new(), rules: R::new(cfg) }
    }

    pub(crate) fn rules(&self) -> &R {
        &self.rules
    }

    fn reweight(&mut self, r: &Roster, c: ClientId, phi: Phi) {
        let (Ok(status), Some(t)) = (r.status(c), self.clients.get_mut(c)) else { return };
        if !same_phi(t.phi, phi) {
            self.rules.reweight(c, t, phi, status);
        }
    }

    fn set_weight(&mut self, status: Status, c: ClientId, phi: Phi) {
        let Some(t) = self.clients.get_mut(c) else { return };
        if !same_phi(t.phi, phi) {
            self.rules.set_weight(c, t, phi, status);
        }
    }

    /// `c` (weight `w`) became runnable with its plain weight.
    fn arrive(&mut self, c: ClientId, w: Weight) {
        let t = &mut self.clients[c];
        t.phi = Phi::whole(w.get());
        self.rules.arrive(c, t);
    }
}

impl<R: TagRules> Policy for OneQueue<R> {
    #[inline]
    fn join(&mut self, _r: &Roster, now: Time, c: ClientId, w: Weight) -> Kick {
        self.rules.advance(now);
        let phi = Phi::whole(w.get());
        self.clients.insert(c, Tagged { phi, tags: self.rules.join_tags(phi) });
        self.arrive(c, w);
        None
    }

    #[inline]
    fn leave(&mut self, _r: &Roster, now: Time, c: ClientId, _w: Weight, was: Status) {
        self.rules.advance(now);
        if was == Status::Runnable {
            self.rules.depart(c, &mut self.clients[c]);
        }
        self.clients.remove(c);
    }

    #[inline]
    fn block(&mut self, _r: &Roster, now: Time, c: ClientId, _w: Weight) {
        self.rules.advance(now);
        self.rules.depart(c, &mut self.clients[c]);
    }

    #[inline]
    fn wake(&mut self, _r: &Roster, now: Time, c: ClientId, w: Weight) -> Kick {
        self.rules.advance(now);
        self.arrive(c, w);
        None
    }

    #[inline]
    fn set_weight(&mut self, _r: &Roster, now: Time, c: ClientId, _old: Weight, new: Weight, status: Status) {
        self.rules.advance(now);
        self.set_weight(status, c, Phi::whole(new.get()));
    }

    #[inline]
    fn pick(&mut self, _r: &Roster, now: Time, _cpu: CpuId) -> Option<(ClientId, Time)> {
        self.rules.advance(now);
        self.rules.take(&mut self.clients).map(|c| (c, self.quantum))
    }

    #[inline]
    fn stopped(&mut self, _r: &Roster, now: Time, _cpu: CpuId, c: ClientId, _w: Weight, ran: Time, why: StopReason) {
        self.rules.advance(now);
        let t = &mut self.clients[c];
        self.rules.charge(c, t, ran);
        match why {
            StopReason::Expired | StopReason::Preempted => self.rules.requeue(c, t),
            StopReason::Blocked => self.rules.park(c, t),
            StopReason::Left => {
                self.clients.remove(c);
            }
        }
    }

    #[inline]
    fn readjusted(&mut self, r: &Roster, rate: &Readjustment, changes: &[(ClientId, Phi)]) {
        self.rules.set_rate(rate);
        for &(c, phi) in changes {
            self.reweight(r, c, phi);
        }
    }

    #[inline]
    fn check_invariants(&self, r: &Roster) -> Result<(), String> {
        check_queue_holds_waiting("OQ-1", r, self.rules.queued().into_iter())?;
        let tagged = self.clients.iter().count();
        if tagged != r.len() || self.clients.iter().any(|(c, _)| r.status(c).is_err()) {
            return Err(format!("OQ-2: {tagged} clients tagged, {} present", r.len()));
        }
        Ok(())
    }
}
