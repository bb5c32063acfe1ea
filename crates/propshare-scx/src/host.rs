// SPDX-License-Identifier: GPL-2.0-only
//! The host model: turns what the stock scx_rustland_core BPF side reports
//! (enqueues only) into the core's events, and keeps exactly one decided task
//! per CPU.
//!
//! This file knows nothing about BPF: the loop in `main.rs` feeds it messages
//! ([`Msg`]) and the results of `/proc` probes ([`Probe`]), and asks it which
//! task each free CPU should run ([`Host::fill`]). All inference lives here,
//! in the host, never in the core scheduler.
//!
//! # How each core event is derived
//!
//! * `join`: the first message for an unknown pid.
//! * `stopped(k, c, ran, Expired|Preempted)`: a message *without*
//!   `SCX_ENQ_WAKEUP` for the task decided for CPU k; `ran` is the growth of
//!   the kernel's `exec_runtime` since the dispatch (every run segment,
//!   including ones cut by higher classes).
//! * `stopped(k, c, ran, Blocked)`: either a `/proc/PID/stat` probe that finds
//!   the decided task of CPU k sleeping (`ran` from `/proc/PID/schedstat`
//!   deltas), or, if the task woke before the probe, its wake-up message
//!   (`ran` = `stop_ts - start_ts` of its last run). A probe is due once the
//!   task has held CPU k for its slice plus 1 ms, and at once whenever the
//!   BPF side wakes us with nothing to say (a CPU ran dry), so a blocked task
//!   holds a CPU in the model for at most about one quantum.
//! * `wake`: a message for a task the model has as blocked.
//! * `stopped(.., Left)` / `leave`: a probe that finds the pid gone, the
//!   reaping of a job, or the periodic sweep of blocked tasks.
//! * `set_weight`: in kernel-weight mode, a message whose `weight`
//!   (`p->scx.weight`) differs from the last one.

use crate::clients::{weight, Core, State, Weights};
use propshare::model::{ClientId, CpuId, SchedError, StopReason, Time};
use propshare::scheduler::Scheduler;
use std::collections::HashMap;

/// `SCX_ENQ_WAKEUP`.
pub const ENQ_WAKEUP: u64 = 1;

/// One enqueue message from the BPF side (the fields of `QueuedTask` we use).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Msg {
    /// The task.
    pub pid: i32,
    /// Enqueue flags.
    pub flags: u64,
    /// When it last started running (BPF clock).
    pub start_ts: u64,
    /// When it last stopped running (BPF clock).
    pub stop_ts: u64,
    /// Run time since it last became runnable.
    pub exec_runtime: u64,
    /// `p->scx.weight` (1..10000, nice 0 = 100).
    pub weight: u64,
}

/// What a `/proc` probe of a decided task found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Runnable (running, or waiting in its CPU's queue).
    Runnable,
    /// Sleeping; it ran `ran` ns since its dispatch.
    Sleeping { ran: Time },
    /// The pid no longer exists; it ran `ran` ns since its dispatch (estimate).
    Gone { ran: Time },
}

#[derive(Clone, Debug)]
struct Task {
    client: ClientId,
    state: State,
    weight: u64,
    /// `exec_runtime` of the message it was last dispatched from.
    exec_base: u64,
    /// It has blocked before: read its `/proc` run time at dispatch, so a
    /// probed block is charged exactly.
    blocks: bool,
}

/// The decided task of one CPU.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// The task.
    pub pid: i32,
    /// When it was dispatched (host clock).
    pub since: Time,
    /// Its slice.
    pub slice: Time,
    /// When to probe it next.
    pub next_probe: Time,
    /// `/proc/PID/schedstat` run time at dispatch, if it was read.
    pub sum_at_dispatch: Option<u64>,
}

/// Counters for the report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Messages handled.
    pub msgs: u64,
    /// Decisions sent to the BPF side.
    pub dispatches: u64,
    /// Tasks that joined.
    pub joins: u64,
    /// Tasks that left.
    pub leaves: u64,
    /// Slice ends (stopped, still runnable).
    pub slice_ends: u64,
    /// Blocks found by a `/proc` probe while the task held its CPU in the model.
    pub blocks_probed: u64,
    /// Blocks seen only at the next wake-up message.
    pub blocks_late: u64,
    /// Wake-ups.
    pub wakes: u64,
    /// Weight changes applied.
    pub weight_changes: u64,
    /// `/proc` probes made.
    pub probes: u64,
    /// Tasks presumed blocked that came back runnable without a wake-up.
    pub misinferred: u64,
    /// Longest time a blocked task held a CPU in the model before the host knew (ns).
    pub max_block_detect_ns: u64,
    /// Dispatches the user ring buffer refused.
    pub dispatch_failed: u64,
}

/// The host model around one core scheduler.
pub struct Host {
    core: Core,
    weights: Weights,
    tasks: HashMap<i32, Task>,
    cpus: Vec<Option<Slot>>,
    probe_margin: Time,
    /// Counters.
    pub stats: Stats,
}

impl Host {
    /// A host for `cpus` CPUs around `sched`.
    pub fn new(sched: Box<dyn Scheduler>, cpus: usize, weights: Weights) -> Host {
        Host {
            core: Core::new(sched),
            weights,
            tasks: HashMap::new(),
            cpus: vec![None; cpus],
            probe_margin: 1_000_000,
            stats: Stats::default(),
        }
    }

    /// Whether `pid` is a known task.
    #[cfg(test)]
    pub fn knows(&self, pid: i32) -> bool {
        self.tasks.contains_key(&pid)
    }

    /// Number of runnable tasks that no CPU runs in the model.
    pub fn pending(&self) -> u64 {
        self.tasks.values().filter(|t| t.state == State::Runnable).count() as u64
    }

    /// The decided task of each CPU.
    pub fn slots(&self) -> &[Option<Slot>] {
        &self.cpus
    }

    /// Pids of tasks the model has as blocked.
    pub fn blocked(&self) -> Vec<i32> {
        self.tasks.iter().filter(|(_, t)| t.state == State::Blocked).map(|(p, _)| *p).collect()
    }

    fn free_id(&mut self, c: ClientId) {
        self.core.clients.free(c);
    }

    /// Handle one message. `fixed_weight` is the weight in [`Weights::Fixed`]
    /// mode (asked only for new pids).
    pub fn on_msg(&mut self, now: Time, m: &Msg, fixed_weight: impl FnOnce(i32) -> u64) -> Result<(), SchedError> {
        self.stats.msgs += 1;
        let wakeup = m.flags & ENQ_WAKEUP != 0;
        let Some(task) = self.tasks.get(&m.pid).cloned() else {
            let w = match self.weights {
                Weights::Kernel => m.weight,
                Weights::Fixed => fixed_weight(m.pid),
            };
            let c = self.core.clients.alloc(m.pid);
            if let Err(e) = self.core.sched.join(now, c, weight(w)) {
                self.free_id(c);
                return Err(e);
            }
            self.stats.joins += 1;
            self.tasks.insert(
                m.pid,
                Task { client: c, state: State::Runnable, weight: w, exec_base: m.exec_runtime, blocks: false },
            );
            return Ok(());
        };
        let c = task.client;
        let mut state = task.state;
        if let State::Decided(k) = state {
            let slot = self.cpus[k];
            let (reason, ran) = if wakeup {
                // It blocked and woke before a probe saw it asleep.
                self.stats.blocks_late += 1;
                if let Some(s) = slot {
                    self.stats.max_block_detect_ns = self.stats.max_block_detect_ns.max(now.saturating_sub(s.since));
                }
                (StopReason::Blocked, m.stop_ts.saturating_sub(m.start_ts))
            } else {
                let ran = if m.exec_runtime >= task.exec_base {
                    m.exec_runtime - task.exec_base
                } else {
                    m.stop_ts.saturating_sub(m.start_ts)
                };
                let slice = slot.map(|s| s.slice).unwrap_or(0);
                self.stats.slice_ends += 1;
                (if ran >= slice { StopReason::Expired } else { StopReason::Preempted }, ran)
            };
            self.core.sched.stopped(now, CpuId(k as u32), c, ran, reason)?;
            self.cpus[k] = None;
            state = if reason == StopReason::Blocked { State::Blocked } else { State::Runnable };
        }
        if matches!(self.weights, Weights::Kernel) && m.weight != task.weight {
            self.core.sched.set_weight(now, c, weight(m.weight))?;
            self.stats.weight_changes += 1;
        }
        if state == State::Blocked {
            if !wakeup {
                self.stats.misinferred += 1;
            }
            self.core.sched.wake(now, c)?;
            self.stats.wakes += 1;
            state = State::Runnable;
        }
        let t = self.tasks.get_mut(&m.pid).expect("present");
        t.state = state;
        t.exec_base = m.exec_runtime;
        t.blocks |= wakeup;
        if matches!(self.weights, Weights::Kernel) {
            t.weight = m.weight;
        }
        Ok(())
    }

    /// CPUs whose decided task should be probed now: those past their slice
    /// plus a margin, and, if `eager` (the BPF side woke us with no message,
    /// so some CPU ran dry), every decided task dispatched at least 1 ms ago.
    pub fn due_probes(&self, now: Time, eager: bool) -> Vec<(usize, i32)> {
        let mut out = Vec::new();
        for (k, s) in self.cpus.iter().enumerate() {
            if let Some(s) = s {
                let due = now >= s.next_probe || (eager && now >= s.since + self.probe_margin);
                if due {
                    out.push((k, s.pid));
                }
            }
        }
        out
    }

    /// Apply the result of probing the decided task `pid` of CPU `k`.
    pub fn on_probe(&mut self, now: Time, k: usize, pid: i32, p: Probe) -> Result<(), SchedError> {
        self.stats.probes += 1;
        let Some(slot) = self.cpus.get(k).copied().flatten() else { return Ok(()) };
        if slot.pid != pid {
            return Ok(());
        }
        let Some(task) = self.tasks.get(&pid).cloned() else { return Ok(()) };
        match p {
            Probe::Runnable => {
                if let Some(s) = self.cpus[k].as_mut() {
                    s.next_probe = now + (s.slice / 2).max(self.probe_margin);
                }
            }
            Probe::Sleeping { ran } => {
                self.core.sched.stopped(now, CpuId(k as u32), task.client, ran, StopReason::Blocked)?;
                self.cpus[k] = None;
                self.stats.blocks_probed += 1;
                self.stats.max_block_detect_ns = self.stats.max_block_detect_ns.max(now.saturating_sub(slot.since));
                if let Some(t) = self.tasks.get_mut(&pid) {
                    t.state = State::Blocked;
                    t.blocks = true;
                }
            }
            Probe::Gone { ran } => {
                self.core.sched.stopped(now, CpuId(k as u32), task.client, ran, StopReason::Left)?;
                self.cpus[k] = None;
                self.tasks.remove(&pid);
                self.free_id(task.client);
                self.stats.leaves += 1;
            }
        }
        Ok(())
    }

    /// `pid` exited (a reaped job, or the sweep found it gone). `ran` is its
    /// run time since dispatch if it held a CPU.
    pub fn on_exit(&mut self, now: Time, pid: i32, ran: Time) -> Result<(), SchedError> {
        let Some(task) = self.tasks.get(&pid).cloned() else { return Ok(()) };
        match task.state {
            State::Decided(k) => {
                self.core.sched.stopped(now, CpuId(k as u32), task.client, ran, StopReason::Left)?;
                self.cpus[k] = None;
            }
            State::Runnable | State::Blocked => self.core.sched.leave(now, task.client)?,
        }
        self.tasks.remove(&pid);
        self.free_id(task.client);
        self.stats.leaves += 1;
        Ok(())
    }

    /// Ask the core what each free CPU should run. Returns `(cpu, pid, slice)`
    /// to dispatch. `sum_now` reads a task's `/proc` run time for the slot; it
    /// is called only for tasks that have blocked before.
    pub fn fill(
        &mut self,
        now: Time,
        mut sum_now: impl FnMut(i32) -> Option<u64>,
    ) -> Result<Vec<(usize, i32, Time)>, SchedError> {
        let mut out = Vec::new();
        for k in 0..self.cpus.len() {
            if self.cpus[k].is_some() {
                continue;
            }
            if let Some((_, pid, slice)) = self.core.pick(now, k)? {
                let blocks = self.tasks.get(&pid).map(|t| t.blocks).unwrap_or(false);
                let sum_at_dispatch = if blocks { sum_now(pid) } else { None };
                self.cpus[k] =
                    Some(Slot { pid, since: now, slice, next_probe: now + slice + self.probe_margin, sum_at_dispatch });
                if let Some(t) = self.tasks.get_mut(&pid) {
                    t.state = State::Decided(k);
                }
                self.stats.dispatches += 1;
                out.push((k, pid, slice));
            }
        }
        Ok(out)
    }

    /// The dispatch of `pid` to CPU `k` failed (ring full): give the CPU back
    /// to the core so it decides again next time.
    pub fn undo_dispatch(&mut self, now: Time, k: usize, pid: i32) -> Result<(), SchedError> {
        self.stats.dispatch_failed += 1;
        let Some(task) = self.tasks.get(&pid).cloned() else { return Ok(()) };
        self.core.sched.stopped(now, CpuId(k as u32), task.client, 0, StopReason::Preempted)?;
        self.cpus[k] = None;
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.state = State::Runnable;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(cpus: usize) -> Host {
        crate::plain_panics();
        let s = propshare::registry::build("gr3mp", propshare::scheduler::SchedConfig::new(cpus, 4_000_000)).unwrap();
        Host::new(s, cpus, Weights::Kernel)
    }

    fn msg(pid: i32, flags: u64, exec: u64) -> Msg {
        Msg { pid, flags, start_ts: 0, stop_ts: exec, exec_runtime: exec, weight: 100 }
    }

    #[test]
    fn one_decided_task_per_cpu_and_slice_end_frees_it() {
        let mut h = host(1);
        h.on_msg(0, &msg(10, ENQ_WAKEUP, 0), |_| 1).unwrap();
        h.on_msg(0, &msg(11, ENQ_WAKEUP, 0), |_| 1).unwrap();
        let d = h.fill(1, |_| None).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(h.pending(), 1);
        assert!(h.fill(2, |_| None).unwrap().is_empty());
        let pid = d[0].1;
        h.on_msg(5_000_000, &msg(pid, 0, 5_000_000), |_| 1).unwrap();
        let d2 = h.fill(5_000_001, |_| None).unwrap();
        assert_eq!(d2.len(), 1);
        assert_ne!(d2[0].1, pid, "the other task gets the CPU after a full slice");
    }

    #[test]
    fn probed_block_frees_the_cpu_and_wake_rejoins() {
        let mut h = host(1);
        h.on_msg(0, &msg(10, ENQ_WAKEUP, 0), |_| 1).unwrap();
        h.fill(0, |_| None).unwrap();
        assert!(h.due_probes(500_000, true).is_empty());
        assert_eq!(h.due_probes(1_000_000, true), vec![(0, 10)]);
        h.on_probe(1_000_000, 0, 10, Probe::Sleeping { ran: 900_000 }).unwrap();
        assert!(h.slots()[0].is_none());
        assert_eq!(h.blocked(), vec![10]);
        h.on_msg(2_000_000, &msg(10, ENQ_WAKEUP, 0), |_| 1).unwrap();
        assert_eq!(h.pending(), 1);
        assert_eq!(h.stats.blocks_probed, 1);
    }

    #[test]
    fn late_block_and_exit_are_events() {
        let mut h = host(2);
        h.on_msg(0, &msg(10, ENQ_WAKEUP, 0), |_| 1).unwrap();
        h.fill(0, |_| None).unwrap();
        h.on_msg(3_000_000, &msg(10, ENQ_WAKEUP, 0), |_| 1).unwrap();
        assert_eq!(h.stats.blocks_late, 1);
        h.fill(3_000_000, |_| None).unwrap();
        h.on_exit(4_000_000, 10, 1_000_000).unwrap();
        assert!(!h.knows(10));
        assert!(h.slots().iter().all(|s| s.is_none()));
    }

    #[test]
    fn kernel_weight_change_is_applied() {
        let mut h = host(1);
        h.on_msg(0, &msg(10, ENQ_WAKEUP, 0), |_| 1).unwrap();
        let mut m = msg(10, 0, 0);
        m.weight = 300;
        h.on_msg(1, &m, |_| 1).unwrap();
        assert_eq!(h.stats.weight_changes, 1);
    }
}
