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

impl<S: Scheduler + ?Sized> Scheduler for Box<S> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn work_conserving(&self) -> bool {
        (**self).work_conserving()
    }
    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        (**self).join(now, c, w)
    }
    fn leave(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        (**self).leave(now, c)
    }
    fn block(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        (**self).block(now, c)
    }
    fn wake(&mut self, now: Time, c: ClientId) -> Result<Kick, SchedError> {
        (**self).wake(now, c)
    }
    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        (**self).set_weight(now, c, w)
    }
    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        (**self).pick(now, cpu)
    }
    fn stopped(&mut self, now: Time, cpu: CpuId, c: ClientId, ran: Time, reason: StopReason) -> Result<(), SchedError> {
        (**self).stopped(now, cpu, c, ran, reason)
    }
    fn check_invariants(&self) -> Result<(), String> {
        (**self).check_invariants()
    }
    fn hierarchical(&mut self) -> Option<&mut dyn crate::groups::Hierarchical> {
        (**self).hierarchical()
    }
}
