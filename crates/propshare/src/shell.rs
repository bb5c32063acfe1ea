//! The validated shell every algorithm runs in, and the small trusted
//! [`Policy`] trait an algorithm implements.
//!
//! Hosts call [`Scheduler`]; every registered scheduler is a
//! [`Shell`] around one policy. The shell does what all algorithms share, once:
//!
//! 1. **Validation.** Each event is checked against the [`Roster`] (unknown
//!    or duplicate id, wrong state, CPU out of range or busy) and refused
//!    with a [`SchedError`] before the policy sees it, so nothing changes on
//!    error and a policy never re-validates.
//! 2. **Client states.** The roster records the event (joined, runnable,
//!    running on k, blocked, gone) and the weights; the policy reads them
//!    through the `&Roster` it is handed and never writes them.
//! 3. **Readjustment**, for the baselines that run over readjusted weights
//!    (`+readjust`, SFS paper section 2.9): after every change of the
//!    runnable set or of a weight, the roster's readjustment bookkeeping
//!    ([`crate::algo::reweigh::Reweigh`]) is refreshed and the policy is
//!    handed the new fluid rate and every client whose φ changed
//!    ([`Policy::readjusted`]). Algorithms whose paper makes readjustment
//!    part of the algorithm (GDQ, SFS, DFS, GR3MP) keep their own, and so do
//!    CFS and EEVDF (the kernel sets a load weight before it enqueues).
//! 4. **The name** the registry gave it.
//! 5. **Invariants.** In debug builds the shell calls
//!    [`Policy::check_invariants`] after every event while P + N ≤ 16, and
//!    after every ⌈(P + N)/4⌉-th event up to P + N = 128, so the O(N + P)
//!    check costs O(1) per event amortised; and whenever a host or the
//!    contract tests call [`Scheduler::check_invariants`] (the contract
//!    tests do after every event).
//!
//! # The order of calls
//!
//! For every event the shell (a) validates and records it in the roster,
//! (b) calls the policy's rule for it, (c) updates the readjustment
//! bookkeeping and refreshes it where the runnable set or a weight changed
//! (join, leave, block, wake, weight change, a stop that blocks or leaves),
//! (d) checks invariants. A picked client is recorded as running after
//! [`Policy::pick`] returns it.
//!
//! Adding an algorithm means writing its rules only: implement [`Policy`]
//! and register `Shell::build(name, cfg, policy)`.

use std::borrow::Cow;
use std::fmt::Debug;

use crate::algo::reweigh::Reweigh;
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{Roster, Status};
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};

/// An algorithm's rules, called by [`Shell`] with every event already
/// validated and recorded in the roster `r`. Every method is infallible:
/// the shell has checked the event.
pub trait Policy: Debug {
    /// Whether it promises never to leave a CPU idle while a runnable client
    /// waits (see [`Scheduler::work_conserving`]).
    fn work_conserving(&self) -> bool {
        true
    }

    /// `c` joined with weight `w` and is runnable.
    fn join(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight) -> Kick;

    /// `c` (weight `w`), not running, left from state `was` (runnable or
    /// blocked); it is no longer in `r`.
    fn leave(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight, was: Status);

    /// `c` (weight `w`), runnable and not running, blocked.
    fn block(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight);

    /// `c` (weight `w`) woke.
    fn wake(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight) -> Kick;

    /// `c`'s weight changed from `old` to `new` (already recorded in `r`);
    /// `status` is its state (runnable, running or blocked).
    fn set_weight(&mut self, r: &Roster, now: Time, c: ClientId, old: Weight, new: Weight, status: Status);

    /// `cpu` runs nothing: the client it should run and its slice (ns, at
    /// least 1), or `None` to idle. The shell records the choice as running.
    fn pick(&mut self, r: &Roster, now: Time, cpu: CpuId) -> Option<(ClientId, Time)>;

    /// `c` (weight `w`), picked for `cpu`, stopped after running `ran` ns for
    /// `why`; `r` already records it as runnable, blocked or gone.
    #[allow(clippy::too_many_arguments)]
    fn stopped(&mut self, r: &Roster, now: Time, cpu: CpuId, c: ClientId, w: Weight, ran: Time, why: StopReason);

    /// After a change of the runnable set or of a weight: the fluid rate
    /// (`rate.cpus / rate.feasible_weight`, readjusted if readjustment is on)
    /// and every client whose readjusted weight φ changed, with its new φ.
    /// Default: the algorithm uses neither.
    fn readjusted(&mut self, _r: &Roster, _rate: &Readjustment, _changes: &[(ClientId, Phi)]) {}

    /// Check the algorithm's numbered invariants against the roster; the
    /// first one broken, as text.
    fn check_invariants(&self, _r: &Roster) -> Result<(), String> {
        Ok(())
    }

    /// A natively hierarchical policy's group operations
    /// ([`Scheduler::hierarchical`]); `None` for the flat ones.
    fn hierarchical(&mut self) -> Option<&mut dyn crate::groups::Hierarchical> {
        None
    }
}

/// A scheduler: the shared validation, client states, readjustment, name
/// and invariant checks around the rules of one algorithm.
#[derive(Clone, Debug)]
pub struct Shell<P> {
    name: Cow<'static, str>,
    roster: Roster,
    policy: P,
    /// Events since the last debug-build invariant check.
    unchecked: usize,
}

/// Debug builds check the invariants after every event while
/// `P + runnable clients` is at most this ...
const DEBUG_CHECK_ALWAYS: usize = 16;
/// ... and after every `⌈(P + N) / DEBUG_CHECK_SPAN⌉`-th event beyond, so
/// the O(N + P) check costs O(1) per event amortised ...
const DEBUG_CHECK_SPAN: usize = 4;
/// ... up to this size. Larger machines are left to explicit
/// [`Scheduler::check_invariants`] calls, so that a debug build's decisions
/// at large N still cost what the algorithm costs (`tests/callgrind.rs`
/// counts them).
const DEBUG_CHECK_LIMIT: usize = 128;

impl<P: Policy> Shell<P> {
    /// `policy` for the machine `cfg`, called `name`; `roster` is a roster
    /// for `cfg.cpus` CPUs, with readjustment bookkeeping if the variant
    /// readjusts.
    pub fn with_roster(name: impl Into<Cow<'static, str>>, roster: Roster, policy: P) -> Shell<P> {
        Shell { name: name.into(), roster, policy, unchecked: 0 }
    }

    /// `policy` for `cfg.cpus` CPUs, without shell readjustment. `cfg` must
    /// be valid ([`SchedConfig::validate`]; the registry checks it): no
    /// algorithm clamps P or Q.
    pub fn build(name: impl Into<Cow<'static, str>>, cfg: &SchedConfig, policy: P) -> Shell<P> {
        debug_assert_eq!(cfg.validate(), Ok(()), "an invalid SchedConfig reached an algorithm");
        Shell::with_roster(name, Roster::new(cfg.cpus), policy)
    }

    /// The algorithm's own state (for tests and statistics).
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The algorithm's own state, mutably: for tests that drive a named
    /// cross-CPU step (a balance, a migration) directly. Nothing is validated.
    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// The client states.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// After a change of the runnable set or a weight: refresh readjustment
    /// and tell the policy. Kept out of line: the hot pick/stop path of a
    /// client that stays runnable never calls it.
    #[inline(never)]
    fn refresh(&mut self) {
        let (rate, changes) = self.roster.refresh_readjustment();
        self.policy.readjusted(&self.roster, &rate, &changes);
    }

    /// `c` (weight `w`) blocked or left while running.
    #[inline(never)]
    fn left_runnable_set(&mut self, c: ClientId, w: Weight) {
        self.roster.readjust_remove(c, w);
        self.refresh();
    }

    #[inline]
    fn debug_check(&mut self, event: &str) {
        if !cfg!(debug_assertions) {
            return;
        }
        self.unchecked += 1;
        let size = self.roster.cpus() + self.roster.runnable();
        if size <= DEBUG_CHECK_ALWAYS || (size <= DEBUG_CHECK_LIMIT && self.unchecked * DEBUG_CHECK_SPAN >= size) {
            let since = std::mem::take(&mut self.unchecked);
            if let Err(e) = self.check_invariants() {
                let before =
                    if since > 1 { format!(" or one of the {} events before it", since - 1) } else { String::new() };
                panic!("{}: invariant broken by {event}{before}: {e}", self.name);
            }
        }
    }
}

/// A baseline in the three registry variants: plain, over readjusted
/// weights (`+readjust`: the shell readjusts) and with the dedicated-CPU rule
/// (`+readjust+dedicate`: a waiting capped client runs first). Implementing
/// it gives the scheduler the constructors `new`, `with_readjustment` and
/// `with_dedicated_cpus`.
pub trait Variants: Policy + Sized {
    /// The registry names of the plain, readjusted and dedicated variants.
    const NAMES: [&'static str; 3];
    /// The policy's empty state for the machine `cfg`.
    fn fresh(cfg: &SchedConfig) -> Self;
}

impl<P: Variants> Shell<P> {
    /// The plain variant.
    pub fn new(cfg: SchedConfig) -> Self {
        Self::variant(cfg, Reweigh::new(false))
    }

    /// Over readjusted weights (SFS paper section 2.9: "replace w by φ").
    pub fn with_readjustment(cfg: SchedConfig) -> Self {
        Self::variant(cfg, Reweigh::new(true))
    }

    /// Readjusted, and a waiting capped client runs first (its share is
    /// exactly one CPU).
    pub fn with_dedicated_cpus(cfg: SchedConfig) -> Self {
        Self::variant(cfg, Reweigh::dedicating())
    }

    fn variant(cfg: SchedConfig, reweigh: Reweigh) -> Self {
        debug_assert_eq!(cfg.validate(), Ok(()), "an invalid SchedConfig reached an algorithm");
        let name = reweigh.variant(P::NAMES);
        Shell::with_roster(name, Roster::with_readjustment(cfg.cpus, reweigh), P::fresh(&cfg))
    }
}

/// Read access to the algorithm's own state and statistics (its queues,
/// counters, options) through the scheduler, for tests and reports.
impl<P> std::ops::Deref for Shell<P> {
    type Target = P;
    fn deref(&self) -> &P {
        &self.policy
    }
}

impl<P: Policy> Scheduler for Shell<P> {
    fn name(&self) -> &str {
        &self.name
    }

    fn work_conserving(&self) -> bool {
        self.policy.work_conserving()
    }

    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        let kick = self.policy.join(&self.roster, now, c, w);
        self.roster.readjust_insert(c, w);
        self.refresh();
        self.debug_check("join");
        Ok(kick)
    }

    fn leave(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        let w = self.roster.weight(c)?;
        let was = self.roster.leave(c)?;
        self.policy.leave(&self.roster, now, c, w, was);
        if was.is_runnable() {
            self.roster.readjust_remove(c, w);
        }
        self.refresh();
        self.debug_check("leave");
        Ok(())
    }

    fn block(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        let w = self.roster.weight(c)?;
        self.policy.block(&self.roster, now, c, w);
        self.roster.readjust_remove(c, w);
        self.refresh();
        self.debug_check("block");
        Ok(())
    }

    fn wake(&mut self, now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        let w = self.roster.weight(c)?;
        let kick = self.policy.wake(&self.roster, now, c, w);
        self.roster.readjust_insert(c, w);
        self.refresh();
        self.debug_check("wake");
        Ok(kick)
    }

    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        let status = self.roster.status(c)?;
        let old = self.roster.set_weight(c, w)?;
        self.policy.set_weight(&self.roster, now, c, old, w, status);
        self.roster.readjust_change_weight(c, old, w, status.is_runnable());
        self.refresh();
        self.debug_check("set_weight");
        Ok(())
    }

    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        let decision = match self.policy.pick(&self.roster, now, cpu) {
            Some((client, slice)) => {
                self.roster.start(cpu, client);
                Decision::Run { client, slice }
            }
            None => Decision::Idle,
        };
        self.debug_check("pick");
        Ok(decision)
    }

    fn stopped(&mut self, now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        let w = self.roster.stop(cpu, c, why)?;
        self.policy.stopped(&self.roster, now, cpu, c, w, ran, why);
        if !why.still_runnable() {
            self.left_runnable_set(c, w);
        }
        self.debug_check("stopped");
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.roster.check_invariants()?;
        self.policy.check_invariants(&self.roster)
    }

    fn hierarchical(&mut self) -> Option<&mut dyn crate::groups::Hierarchical> {
        self.policy.hierarchical()
    }
}

/// A common invariant of the queue-based policies: `queue` holds exactly
/// the clients that are runnable and not running, each once. O(N).
pub fn check_queue_holds_waiting(id: &str, r: &Roster, queue: impl Iterator<Item = ClientId>) -> Result<(), String> {
    let mut n = 0usize;
    for c in queue {
        if r.status(c) != Ok(Status::Runnable) {
            return Err(format!("{id}: {c} is queued but {:?}", r.status(c)));
        }
        n += 1;
    }
    let waiting = r.runnable() - r.running();
    if n != waiting {
        return Err(format!("{id}: {n} clients queued, {waiting} waiting"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MS;

    /// A FIFO whose `block` forgets to unqueue: the bug the checks must catch.
    #[derive(Debug, Default)]
    struct LeakyFifo {
        queue: Vec<ClientId>,
    }

    impl Policy for LeakyFifo {
        fn join(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
            self.queue.push(c);
            None
        }
        fn leave(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight, _was: Status) {
            self.queue.retain(|&x| x != c);
        }
        fn block(&mut self, _r: &Roster, _now: Time, _c: ClientId, _w: Weight) {}
        fn wake(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
            self.queue.push(c);
            None
        }
        fn set_weight(&mut self, _r: &Roster, _now: Time, _c: ClientId, _o: Weight, _n: Weight, _s: Status) {}
        fn pick(&mut self, _r: &Roster, _now: Time, _cpu: CpuId) -> Option<(ClientId, Time)> {
            (!self.queue.is_empty()).then(|| (self.queue.remove(0), MS))
        }
        fn stopped(
            &mut self,
            _r: &Roster,
            _now: Time,
            _cpu: CpuId,
            c: ClientId,
            _w: Weight,
            _ran: Time,
            why: StopReason,
        ) {
            if why.still_runnable() {
                self.queue.push(c);
            }
        }
        fn check_invariants(&self, r: &Roster) -> Result<(), String> {
            check_queue_holds_waiting("FIFO-1", r, self.queue.iter().copied())
        }
    }

    fn w(n: u64) -> Weight {
        Weight::new(n).unwrap()
    }

    #[test]
    fn the_shell_refuses_bad_events_before_the_policy_sees_them() {
        let mut s = Shell::build("leaky", &SchedConfig::new(1, MS), LeakyFifo::default());
        s.join(0, ClientId(0), w(1)).unwrap();
        assert_eq!(s.join(0, ClientId(0), w(1)), Err(SchedError::AlreadyJoined(ClientId(0))));
        assert!(s.wake(0, ClientId(0)).is_err());
        assert!(s.pick(0, CpuId(1)).is_err());
        assert_eq!(s.policy().queue, [ClientId(0)], "refused events reached the policy");
        assert_eq!(s.name(), "leaky");
        assert!(s.check_invariants().is_ok());
    }

    #[test]
    fn a_broken_policy_is_caught_by_its_invariant_check() {
        let mut s = Shell::build("leaky", &SchedConfig::new(1, MS), LeakyFifo::default());
        s.join(0, ClientId(0), w(1)).unwrap();
        s.join(0, ClientId(1), w(1)).unwrap();
        // Blocking leaves client 1 queued: FIFO-1 is broken, and the debug
        // check after the event panics.
        let blocked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.block(0, ClientId(1))));
        if cfg!(debug_assertions) {
            let msg = blocked.expect_err("the debug check must panic");
            let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.contains("FIFO-1") && msg.contains("block"), "{msg}");
        }
        let err = s.check_invariants().expect_err("FIFO-1 is broken");
        assert!(err.contains("FIFO-1"), "{err}");
    }

    /// Past 16 the debug check is amortised, not dropped: on a machine with
    /// 100 runnable clients the break is caught within ⌈101/4⌉ events.
    #[test]
    fn a_large_machine_is_still_checked_in_debug_builds() {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut s = Shell::build("leaky", &SchedConfig::new(1, MS), LeakyFifo::default());
        for c in 0..100 {
            s.join(0, ClientId(c), w(1)).unwrap();
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.block(0, ClientId(0)).unwrap();
            for _ in 0..101usize.div_ceil(DEBUG_CHECK_SPAN) {
                s.set_weight(0, ClientId(1), w(2)).unwrap();
            }
        }));
        let msg = caught.expect_err("the amortised check must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("FIFO-1"), "{msg}");
    }
}
