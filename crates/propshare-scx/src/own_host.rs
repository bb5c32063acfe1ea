// SPDX-License-Identifier: GPL-2.0-only
//! The host model for our own BPF side (`src/pscx/main.bpf.c`): turns its
//! explicit messages into the core's events and keeps exactly one decided
//! task per CPU, as the simulator does. No inference and no `/proc` reads:
//! every event is one the kernel reported.
//!
//! # Messages to core events
//!
//! A task is `Runnable` (known to the core, waiting in the BPF side's wait
//! DSQ, no CPU), `Decided(k)` (the core gave it CPU k: it is in CPU k's slot,
//! its local DSQ, or running there) or `Blocked`.
//!
//! * `RUNNABLE` / `ENQUEUE` of an unknown pid: `join`. Of a `Blocked` task:
//!   `wake`.
//! * `ENQUEUE` of `Decided(k)`: the kernel took CPU k from it and wants a new
//!   decision: `stopped(k, ran, Expired)` if it ran its whole slice, else
//!   `Preempted` (a preempting kick, or a property change such as a renice
//!   that dequeued it). `ran` is the BPF side's sum of its run intervals
//!   since the decision (`ops.running` to `ops.stopping`).
//! * `STOPPING` with runnable = false of `Decided(k)`: `stopped(k, ran,
//!   Blocked)`; of a `Runnable` task (it ran without a decision, by the BPF
//!   side's fallback): `block`. `STOPPING` with runnable = true ends nothing:
//!   the task either comes back through `ENQUEUE` or stays at the head of
//!   CPU k's local DSQ while a higher class runs.
//! * `EXIT`: `stopped(k, ran, Left)` or `leave`.
//! * `WEIGHT` (kernel-weight mode): `set_weight`.
//! * `MISS` (the decided task was not waiting when CPU k dispatched, or may
//!   not run there): `stopped(k, 0, Blocked)`; its next `RUNNABLE` or
//!   `ENQUEUE` wakes it. This never loops: a missed task is not decided again
//!   until the kernel reports it waiting.
//! * `RUNNING`, `QUIESCENT`, `FALLBACK`: counted only.

use crate::pscx_intf::{self as intf, pscx_event};
use propshare::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use propshare::scheduler::{Decision, Scheduler};
use std::collections::HashMap;

/// Where weights come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// `p->scx.weight` as the kernel reports it (nice or cgroup).
    Kernel,
    /// Fixed weights resolved once per pid by the caller (job mode).
    Fixed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Runnable,
    Decided(usize),
    Blocked,
}

#[derive(Clone, Debug)]
struct Task {
    client: ClientId,
    state: State,
    weight: u64,
}

/// The decided task of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The task.
    pub pid: i32,
    /// When it was decided (host clock).
    pub since: Time,
    /// Its slice.
    pub slice: Time,
}

/// Counters for the report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Messages handled.
    pub msgs: u64,
    /// Decisions sent to the BPF side.
    pub decisions: u64,
    /// Tasks that joined.
    pub joins: u64,
    /// Tasks that left.
    pub leaves: u64,
    /// Decisions that ended with the slice used up.
    pub expired: u64,
    /// Decisions that ended early with the task still runnable.
    pub preempted: u64,
    /// Decisions that ended because the task blocked.
    pub blocks: u64,
    /// Wake-ups.
    pub wakes: u64,
    /// Weight changes applied.
    pub weight_changes: u64,
    /// Decisions the BPF side dropped (task not waiting, or not allowed there).
    pub misses: u64,
    /// Tasks the BPF side ran by its safety net.
    pub fallbacks: u64,
    /// Tasks that blocked while running without a decision.
    pub undecided_blocks: u64,
    /// Preempting kicks sent for the core's `Kick`s.
    pub kicks: u64,
    /// Longest time from a task's stop on its CPU (it blocked) to the host
    /// reading that message (ns, both CLOCK_MONOTONIC). The core is told at
    /// the kernel's time of the stop, so in the model the task held the CPU
    /// until it stopped; this is only how late the host learnt it.
    pub max_block_detect_ns: u64,
    /// Decisions whose CPU was measured from free to running (BPF clock).
    pub gaps: u64,
    /// Sum over those of the time CPU k was free in the model, with a task
    /// waiting for a decision, until its next decided task started running
    /// there: the round trip through the host (ns).
    pub gap_sum_ns: u64,
    /// The longest such gap (ns).
    pub gap_max_ns: u64,
}

/// What the loop must do after a message: CPUs to kick with preemption.
pub type Kicks = Vec<usize>;

/// The host model around one core scheduler.
pub struct OwnHost {
    sched: Box<dyn Scheduler>,
    weights: Weights,
    tasks: HashMap<i32, Task>,
    pids: Vec<Option<i32>>,
    free_ids: Vec<u32>,
    cpus: Vec<Option<Slot>>,
    /// BPF time since which each CPU has been free in the model with a task
    /// waiting, until its next decided task runs.
    free_at: Vec<Option<Time>>,
    /// Counters.
    pub stats: Stats,
}

fn weight(w: u64) -> Weight {
    // The kernel's weights are 1..10000 and job weights are validated by the
    // parser, so this clamp never changes a value in practice.
    Weight::new(w.clamp(1, Weight::MAX)).unwrap_or(Weight::ONE)
}

impl OwnHost {
    /// A host for `cpus` CPUs around `sched`.
    pub fn new(sched: Box<dyn Scheduler>, cpus: usize, weights: Weights) -> OwnHost {
        OwnHost {
            sched,
            weights,
            tasks: HashMap::new(),
            pids: Vec::new(),
            free_ids: Vec::new(),
            cpus: vec![None; cpus],
            free_at: vec![None; cpus],
            stats: Stats::default(),
        }
    }

    /// The decided task of each CPU.
    pub fn slots(&self) -> &[Option<Slot>] {
        &self.cpus
    }

    /// Whether `pid` is a known task.
    #[cfg(test)]
    pub fn knows(&self, pid: i32) -> bool {
        self.tasks.contains_key(&pid)
    }

    fn alloc_id(&mut self, pid: i32) -> ClientId {
        if let Some(id) = self.free_ids.pop() {
            self.pids[id as usize] = Some(pid);
            ClientId(id)
        } else {
            self.pids.push(Some(pid));
            ClientId((self.pids.len() - 1) as u32)
        }
    }

    fn forget(&mut self, pid: i32) {
        if let Some(t) = self.tasks.remove(&pid) {
            self.pids[t.client.index()] = None;
            self.free_ids.push(t.client.0);
            self.stats.leaves += 1;
        }
    }

    fn set_state(&mut self, pid: i32, s: State) {
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.state = s;
        }
    }

    fn join(&mut self, now: Time, pid: i32, w: u64, kicks: &mut Kicks) -> Result<(), SchedError> {
        let c = self.alloc_id(pid);
        match self.sched.join(now, c, weight(w)) {
            Ok(k) => kicks.extend(k.map(|k| k.0 as usize)),
            Err(e) => {
                self.pids[c.index()] = None;
                self.free_ids.push(c.0);
                return Err(e);
            }
        }
        self.stats.joins += 1;
        self.tasks.insert(pid, Task { client: c, state: State::Runnable, weight: w });
        Ok(())
    }

    fn wake(&mut self, now: Time, pid: i32, kicks: &mut Kicks) -> Result<(), SchedError> {
        let Some(t) = self.tasks.get(&pid) else { return Ok(()) };
        if t.state != State::Blocked {
            return Ok(());
        }
        kicks.extend(self.sched.wake(now, t.client)?.map(|k| k.0 as usize));
        self.stats.wakes += 1;
        self.set_state(pid, State::Runnable);
        Ok(())
    }

    /// End the decision of `pid` on CPU `k`.
    fn end(&mut self, now: Time, k: usize, pid: i32, ran: Time, reason: StopReason) -> Result<(), SchedError> {
        let Some(t) = self.tasks.get(&pid) else { return Ok(()) };
        self.sched.stopped(now, CpuId(k as u32), t.client, ran, reason)?;
        self.cpus[k] = None;
        match reason {
            StopReason::Expired => self.stats.expired += 1,
            StopReason::Preempted => self.stats.preempted += 1,
            StopReason::Blocked => self.stats.blocks += 1,
            StopReason::Left => {}
        }
        let next = if reason.still_runnable() { State::Runnable } else { State::Blocked };
        self.set_state(pid, next);
        Ok(())
    }

    /// Handle one message. `now` is the host clock; `fixed_weight` gives the
    /// weight of a new pid in [`Weights::Fixed`] mode. Returns the CPUs the
    /// core asked to preempt (from `join` and `wake`).
    pub fn on_event(
        &mut self,
        now: Time,
        e: &pscx_event,
        fixed_weight: impl FnOnce(i32) -> u64,
    ) -> Result<Kicks, SchedError> {
        self.stats.msgs += 1;
        let kicks = self.handle(now, e, fixed_weight)?;
        // A CPU counts as waiting for the host from the moment it is free in
        // the model while some task waits for a decision.
        let waiting = self.tasks.values().any(|t| t.state == State::Runnable);
        for k in 0..self.cpus.len() {
            if self.cpus[k].is_some() {
                continue;
            }
            if !waiting {
                self.free_at[k] = None;
            } else if self.free_at[k].is_none() {
                self.free_at[k] = Some(e.ts);
            }
        }
        Ok(kicks)
    }

    fn handle(
        &mut self,
        now: Time,
        e: &pscx_event,
        fixed_weight: impl FnOnce(i32) -> u64,
    ) -> Result<Kicks, SchedError> {
        let mut kicks = Kicks::new();
        let pid = e.pid;
        let known = self.tasks.get(&pid).map(|t| (t.state, t.weight));
        match e.kind {
            intf::pscx_kind_PSCX_RUNNABLE | intf::pscx_kind_PSCX_ENQUEUE => {
                let w = match self.weights {
                    Weights::Kernel => e.weight as u64,
                    Weights::Fixed => known.map(|k| k.1).unwrap_or_else(|| fixed_weight(pid)),
                };
                match known {
                    None => self.join(now, pid, w, &mut kicks)?,
                    Some((State::Blocked, _)) => self.wake(now, pid, &mut kicks)?,
                    Some((State::Decided(k), _)) if e.kind == intf::pscx_kind_PSCX_ENQUEUE => {
                        let slice = self.cpus[k].map(|s| s.slice).unwrap_or(0);
                        let reason = if e.ran >= slice { StopReason::Expired } else { StopReason::Preempted };
                        self.end(now, k, pid, e.ran, reason)?;
                    }
                    Some(_) => {}
                }
                if let (Weights::Kernel, Some((_, old))) = (self.weights, known) {
                    if old != w {
                        self.reweigh(now, pid, w)?;
                    }
                }
            }
            intf::pscx_kind_PSCX_STOPPING if e.flags & 1 == 0 => match known {
                Some((State::Decided(k), _)) => {
                    self.end(now, k, pid, e.ran, StopReason::Blocked)?;
                    self.stats.max_block_detect_ns =
                        self.stats.max_block_detect_ns.max(crate::mono_ns().saturating_sub(e.ts));
                }
                Some((State::Runnable, _)) => {
                    let c = self.tasks[&pid].client;
                    self.sched.block(now, c)?;
                    self.stats.undecided_blocks += 1;
                    self.set_state(pid, State::Blocked);
                }
                _ => {}
            },
            intf::pscx_kind_PSCX_EXIT => self.exit(now, pid, 0)?,
            intf::pscx_kind_PSCX_WEIGHT
                if self.weights == Weights::Kernel && known.is_some_and(|k| k.1 != e.weight as u64) =>
            {
                self.reweigh(now, pid, e.weight as u64)?;
            }
            intf::pscx_kind_PSCX_MISS => {
                self.stats.misses += 1;
                let k = e.cpu as usize;
                if known.map(|k| k.0) == Some(State::Decided(k)) {
                    self.end(now, k, pid, 0, StopReason::Blocked)?;
                }
            }
            intf::pscx_kind_PSCX_FALLBACK => self.stats.fallbacks += 1,
            intf::pscx_kind_PSCX_RUNNING => {
                let k = e.cpu as usize;
                if known.map(|k| k.0) == Some(State::Decided(k)) {
                    if let Some(t) = self.free_at.get_mut(k).and_then(Option::take) {
                        let gap = e.ts.saturating_sub(t);
                        self.stats.gaps += 1;
                        self.stats.gap_sum_ns += gap;
                        self.stats.gap_max_ns = self.stats.gap_max_ns.max(gap);
                    }
                }
            }
            _ => {}
        }
        Ok(kicks)
    }

    fn reweigh(&mut self, now: Time, pid: i32, w: u64) -> Result<(), SchedError> {
        let c = self.tasks[&pid].client;
        self.sched.set_weight(now, c, weight(w))?;
        self.stats.weight_changes += 1;
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.weight = w;
        }
        Ok(())
    }

    /// `pid` left (its `EXIT` message, or the reaping of a job). `ran` is
    /// its run time since its decision if it held a CPU.
    pub fn exit(&mut self, now: Time, pid: i32, ran: Time) -> Result<(), SchedError> {
        let Some(t) = self.tasks.get(&pid).cloned() else { return Ok(()) };
        match t.state {
            State::Decided(k) => self.end(now, k, pid, ran, StopReason::Left)?,
            State::Runnable | State::Blocked => self.sched.leave(now, t.client)?,
        }
        self.forget(pid);
        Ok(())
    }

    /// Ask the core what each free CPU should run: `(cpu, pid, slice)` to
    /// send to the BPF side.
    pub fn fill(&mut self, now: Time) -> Result<Vec<(usize, i32, Time)>, SchedError> {
        let mut out = Vec::new();
        for k in 0..self.cpus.len() {
            if self.cpus[k].is_some() {
                continue;
            }
            if let Decision::Run { client, slice } = self.sched.pick(now, CpuId(k as u32))? {
                let Some(pid) = self.pids.get(client.index()).copied().flatten() else {
                    // The core picked an id we never gave it (a core bug): hand
                    // the CPU back so the protocol stays consistent.
                    self.sched.stopped(now, CpuId(k as u32), client, 0, StopReason::Preempted)?;
                    continue;
                };
                self.cpus[k] = Some(Slot { pid, since: now, slice });
                self.set_state(pid, State::Decided(k));
                self.stats.decisions += 1;
                out.push((k, pid, slice));
            }
        }
        Ok(out)
    }

    /// The BPF side refused the decision of `pid` for CPU `k` (the syscall
    /// failed): the task is still waiting, so the CPU goes back to the core.
    pub fn undo(&mut self, now: Time, k: usize, pid: i32) -> Result<(), SchedError> {
        if self.cpus[k].map(|s| s.pid) == Some(pid) {
            self.end(now, k, pid, 0, StopReason::Preempted)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: u64 = 4_000_000;

    fn host(cpus: usize) -> OwnHost {
        let s = propshare::registry::build("gr3mp", propshare::scheduler::SchedConfig::new(cpus, Q)).unwrap();
        OwnHost::new(s, cpus, Weights::Kernel)
    }

    fn ev(kind: u32, pid: i32, flags: u64, ran: u64) -> pscx_event {
        pscx_event { kind, pid, cpu: 0, weight: 100, flags, ran, ts: 0 }
    }

    const RUNNABLE: u32 = intf::pscx_kind_PSCX_RUNNABLE;
    const ENQUEUE: u32 = intf::pscx_kind_PSCX_ENQUEUE;
    const STOPPING: u32 = intf::pscx_kind_PSCX_STOPPING;

    fn arrive(h: &mut OwnHost, pid: i32) {
        h.on_event(0, &ev(RUNNABLE, pid, 1, 0), |_| 1).unwrap();
        h.on_event(0, &ev(ENQUEUE, pid, 1, 0), |_| 1).unwrap();
    }

    #[test]
    fn one_decided_task_per_cpu_and_expiry_frees_it() {
        let mut h = host(1);
        arrive(&mut h, 10);
        arrive(&mut h, 11);
        let d = h.fill(1).unwrap();
        assert_eq!(d.len(), 1);
        assert!(h.fill(2).unwrap().is_empty(), "CPU 0 is taken until its task stops");
        let pid = d[0].1;
        // A preemption by a higher class: still runnable, no enqueue: nothing ends.
        h.on_event(3, &ev(STOPPING, pid, 1, 1_000_000), |_| 1).unwrap();
        assert!(h.fill(4).unwrap().is_empty());
        h.on_event(5, &ev(STOPPING, pid, 1, Q + 1), |_| 1).unwrap();
        h.on_event(5, &ev(ENQUEUE, pid, 0, Q + 1), |_| 1).unwrap();
        assert_eq!(h.stats.expired, 1);
        let d2 = h.fill(6).unwrap();
        assert_eq!(d2.len(), 1);
        assert_ne!(d2[0].1, pid, "the other task gets the CPU after a full slice");
    }

    #[test]
    fn block_is_reported_at_once_and_wake_rejoins() {
        let mut h = host(1);
        arrive(&mut h, 10);
        h.fill(0).unwrap();
        h.on_event(1, &ev(STOPPING, 10, 0, 500_000), |_| 1).unwrap();
        assert!(h.slots()[0].is_none(), "a blocked task holds no CPU in the model");
        assert_eq!(h.stats.blocks, 1);
        arrive(&mut h, 10);
        assert_eq!(h.stats.wakes, 1);
        assert_eq!(h.fill(2).unwrap(), vec![(0, 10, Q)]);
    }

    #[test]
    fn miss_frees_the_cpu_without_looping() {
        let mut h = host(1);
        arrive(&mut h, 10);
        h.fill(0).unwrap();
        let mut m = ev(intf::pscx_kind_PSCX_MISS, 10, 0, 0);
        m.cpu = 0;
        h.on_event(1, &m, |_| 1).unwrap();
        assert!(h.slots()[0].is_none());
        assert!(h.fill(2).unwrap().is_empty(), "a missed task waits for the kernel to report it");
        h.on_event(3, &ev(ENQUEUE, 10, 0, 0), |_| 1).unwrap();
        assert_eq!(h.fill(4).unwrap().len(), 1);
    }

    #[test]
    fn exit_and_weight_change_are_events() {
        let mut h = host(2);
        arrive(&mut h, 10);
        arrive(&mut h, 11);
        h.fill(0).unwrap();
        let mut w = ev(intf::pscx_kind_PSCX_WEIGHT, 11, 0, 0);
        w.weight = 305;
        h.on_event(1, &w, |_| 1).unwrap();
        assert_eq!(h.stats.weight_changes, 1);
        h.on_event(2, &ev(intf::pscx_kind_PSCX_EXIT, 10, 0, 0), |_| 1).unwrap();
        assert!(!h.knows(10));
        assert!(h.slots().iter().all(|s| s.map(|s| s.pid) != Some(10)));
    }

    #[test]
    fn a_task_run_by_the_fallback_that_blocks_is_blocked() {
        let mut h = host(1);
        arrive(&mut h, 10);
        h.on_event(1, &ev(STOPPING, 10, 0, 100), |_| 1).unwrap();
        assert_eq!(h.stats.undecided_blocks, 1);
        assert!(h.fill(2).unwrap().is_empty());
    }
}
