//! The one trait every algorithm implements, and the contract between a
//! scheduler and the host that drives it.
//!
//! # The protocol
//!
//! A scheduler is a state machine. The host owns time and CPUs and tells the
//! scheduler what happened; the scheduler only answers "what should CPU k run
//! now". Every call carries `now`, the host's clock in nanoseconds, which
//! never goes backwards.
//!
//! ```text
//!   join(c, w) ──► runnable ──pick(k)──► running on k ──stopped(k, c, d, Expired|Preempted)──► runnable
//!                   │  ▲                      │
//!              block│  │wake                  ├─stopped(k, c, d, Blocked)──► blocked ──wake──► runnable
//!                   ▼  │                      └─stopped(k, c, d, Left)─────► gone
//!                 blocked ──leave──► gone      runnable ──leave──► gone
//! ```
//!
//! # What the host guarantees
//!
//! * `now` is monotone across all calls.
//! * It calls [`Scheduler::pick`] for CPU k only when k runs nothing, and if
//!   the answer is [`Decision::Run`] it runs that client on k until it reports
//!   [`Scheduler::stopped`] for exactly that (CPU, client) pair. So a client
//!   runs on at most one CPU at a time, because the scheduler never hands out a
//!   client that is running (below).
//! * The `ran` it reports is the real CPU time the client consumed since the
//!   pick. It may exceed the slice (timer granularity) or fall short of it
//!   (blocking, preemption, leaving).
//! * A running client that blocks or leaves is reported through `stopped`
//!   with [`StopReason::Blocked`] or [`StopReason::Left`]; `block` and `leave`
//!   are for clients that are not running.
//! * Weight changes may arrive for any client, running or not.
//! * After any call that can make work appear (join, wake, stopped, set
//!   weight) the host calls `pick` on its idle CPUs again. A kick returned by
//!   `join`/`wake` asks the host to preempt that CPU; hosts may ignore it.
//!
//! # What every scheduler guarantees
//!
//! * `pick` never returns a client that is blocked, departed, or running on
//!   any CPU (a client picked for k counts as running on k until `stopped`).
//! * Invalid events (unknown or duplicate id, wrong state, CPU out of range)
//!   return a [`SchedError`] and leave the state unchanged; nothing panics.
//! * Decisions are deterministic functions of the event sequence: no
//!   randomness except an explicitly seeded generator (lottery).
//! * If [`Scheduler::work_conserving`] is true: after the host has polled
//!   every idle CPU, no CPU is idle while a runnable client is not running.
//!   Algorithms that idle on purpose (DFS without its auxiliary scheduler,
//!   per-CPU queues between load balances) say false.
//!
//! Distributed algorithms keep their state split into one part per CPU and a
//! small global part, with every cross-CPU step a named operation between two
//! per-CPU parts; driving them through `&mut self` is the simulator's
//! convenience, not a design constraint.

use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};

/// What a CPU should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run `client` for at most `slice` ns, then report `stopped`.
    Run {
        /// The chosen client.
        client: ClientId,
        /// Its time slice, in ns (at least 1).
        slice: Time,
    },
    /// Run nothing; ask again after the next event.
    Idle,
}

/// Host settings every scheduler is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedConfig {
    /// P, the number of CPUs (at least 1).
    pub cpus: usize,
    /// The base quantum or time slice, in ns (at least 1).
    pub quantum: Time,
    /// Seed for schedulers that draw random numbers (lottery).
    pub seed: u64,
}

impl SchedConfig {
    /// P CPUs and a quantum in ns, seed 0.
    pub fn new(cpus: usize, quantum: Time) -> SchedConfig {
        SchedConfig { cpus, quantum, seed: 0 }
    }

    /// Check it once, before any scheduler is built: at least one CPU, a
    /// quantum of at least 1 ns. Algorithms rely on this and never clamp;
    /// [`crate::registry::build`] calls it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cpus == 0 {
            return Err(ConfigError::NoCpus);
        }
        if self.quantum == 0 {
            return Err(ConfigError::ZeroQuantum);
        }
        Ok(())
    }
}

/// Why a [`SchedConfig`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// P = 0.
    #[error("the number of CPUs must be at least 1")]
    NoCpus,
    /// Quantum 0.
    #[error("the quantum must be at least 1 ns")]
    ZeroQuantum,
}

/// A CPU the scheduler would like preempted, returned by `join` and `wake`.
pub type Kick = Option<CpuId>;

/// A proportional-share CPU scheduler driven by host events.
pub trait Scheduler {
    /// The registry name of this scheduler (for example `"wfq"`).
    fn name(&self) -> &str;

    /// Whether it promises never to leave a CPU idle while a runnable client waits.
    fn work_conserving(&self) -> bool {
        true
    }

    /// A new client with weight `weight` becomes runnable.
    fn join(&mut self, now: Time, client: ClientId, weight: Weight) -> Result<Kick, SchedError>;

    /// A client that is not running departs.
    fn leave(&mut self, now: Time, client: ClientId) -> Result<(), SchedError>;

    /// A runnable client that is not running blocks.
    fn block(&mut self, now: Time, client: ClientId) -> Result<(), SchedError>;

    /// A blocked client becomes runnable again.
    fn wake(&mut self, now: Time, client: ClientId) -> Result<Kick, SchedError>;

    /// A client's weight changes (it may be running, runnable or blocked).
    fn set_weight(&mut self, now: Time, client: ClientId, weight: Weight) -> Result<(), SchedError>;

    /// CPU `cpu` runs nothing: what should it run now?
    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError>;

    /// `client`, started on `cpu` by `pick`, stopped after running `ran` ns, for `reason`.
    fn stopped(
        &mut self,
        now: Time,
        cpu: CpuId,
        client: ClientId,
        ran: Time,
        reason: StopReason,
    ) -> Result<(), SchedError>;

    /// Check the scheduler's invariants (the roster's and the algorithm's
    /// numbered ones); the first one broken, as text. Hosts and tests may
    /// call it after any event; it costs O(N + P).
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }

    /// A natively hierarchical scheduler's group operations; `None` (the
    /// default) for the flat ones, which hosts give effective weights
    /// ([`crate::groups::Flattener`]).
    fn hierarchical(&mut self) -> Option<&mut dyn crate::groups::Hierarchical> {
        None
    }
}

/// Write [`Scheduler`] methods that pass the call on to another scheduler,
/// inside an `impl Scheduler for ...` block that writes the others itself:
/// one forwarding piece for every decorator (a box, a renamed scheduler, a
/// test mutant). `|s| target` names the scheduler called, with `s` the
/// receiver; the list names the methods forwarded.
///
/// ```ignore
/// impl Scheduler for Named {
///     fn name(&self) -> &str { &self.name }
///     propshare::forward_scheduler!(|s| s.inner; work_conserving, join, leave, block, wake,
///                                   set_weight, pick, stopped, check_invariants);
/// }
/// ```
#[macro_export]
macro_rules! forward_scheduler {
    (|$s:ident| $target:expr; $($method:ident),+ $(,)?) => {
        $($crate::forward_scheduler!(@$method, $s, $target);)+
    };
    (@name, $s:ident, $t:expr) => {
        fn name(&self) -> &str { let $s = self; $t.name() }
    };
    (@work_conserving, $s:ident, $t:expr) => {
        fn work_conserving(&self) -> bool { let $s = self; $t.work_conserving() }
    };
    (@join, $s:ident, $t:expr) => {
        fn join(&mut self, now: $crate::Time, c: $crate::ClientId, w: $crate::Weight)
            -> ::std::result::Result<$crate::Kick, $crate::SchedError> { let $s = self; $t.join(now, c, w) }
    };
    (@leave, $s:ident, $t:expr) => {
        fn leave(&mut self, now: $crate::Time, c: $crate::ClientId)
            -> ::std::result::Result<(), $crate::SchedError> { let $s = self; $t.leave(now, c) }
    };
    (@block, $s:ident, $t:expr) => {
        fn block(&mut self, now: $crate::Time, c: $crate::ClientId)
            -> ::std::result::Result<(), $crate::SchedError> { let $s = self; $t.block(now, c) }
    };
    (@wake, $s:ident, $t:expr) => {
        fn wake(&mut self, now: $crate::Time, c: $crate::ClientId)
            -> ::std::result::Result<$crate::Kick, $crate::SchedError> { let $s = self; $t.wake(now, c) }
    };
    (@set_weight, $s:ident, $t:expr) => {
        fn set_weight(&mut self, now: $crate::Time, c: $crate::ClientId, w: $crate::Weight)
            -> ::std::result::Result<(), $crate::SchedError> { let $s = self; $t.set_weight(now, c, w) }
    };
    (@pick, $s:ident, $t:expr) => {
        fn pick(&mut self, now: $crate::Time, cpu: $crate::CpuId)
            -> ::std::result::Result<$crate::Decision, $crate::SchedError> { let $s = self; $t.pick(now, cpu) }
    };
    (@stopped, $s:ident, $t:expr) => {
        fn stopped(&mut self, now: $crate::Time, cpu: $crate::CpuId, c: $crate::ClientId, ran: $crate::Time,
            why: $crate::StopReason) -> ::std::result::Result<(), $crate::SchedError> {
            let $s = self;
            $t.stopped(now, cpu, c, ran, why)
        }
    };
    (@check_invariants, $s:ident, $t:expr) => {
        fn check_invariants(&self) -> ::std::result::Result<(), String> { let $s = self; $t.check_invariants() }
    };
    (@hierarchical, $s:ident, $t:expr) => {
        fn hierarchical(&mut self) -> ::std::option::Option<&mut dyn $crate::groups::Hierarchical> {
            let $s = self;
            $t.hierarchical()
        }
    };
}

impl<S: Scheduler + ?Sized> Scheduler for Box<S> {
    forward_scheduler!(|s| (**s); name, work_conserving, join, leave, block, wake, set_weight, pick, stopped,
                       check_invariants, hierarchical);
}
