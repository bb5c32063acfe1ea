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
//! * `EXIT` (`ops.disable`: it exited or switched to another class):
//!   `stopped(k, ran, Left)` or `leave`.
//! * `KEPT`: a property of the running task changed (policy, nice, cgroup)
//!   and it stays in sched_ext and on its CPU: nothing ends (the BPF side
//!   reports no stop, block or wake-up for it; its new weight or cgroup
//!   comes as its own message).
//! * `WEIGHT` (kernel-weight mode): `set_weight`.
//! * `MISS` (the decided task was not waiting when CPU k dispatched, or may
//!   not run there): `stopped(k, 0, Blocked)`; its next `RUNNABLE` or
//!   `ENQUEUE` wakes it. This never loops: a missed task is not decided again
//!   until the kernel reports it waiting.
//! * `RUNNING`, `QUIESCENT`, `FALLBACK`: counted only.
//!
//! # Affinity
//!
//! Every task message carries the CPUs the task may run on (`p->cpus_ptr`,
//! CPUs 0..63; `CPUMASK` from `ops.set_cpumask` updates it). The core's CPUs
//! are its own: a decision of the core for its CPU k is carried out on a
//! free physical CPU the task may use: k itself when it is free and allowed,
//! else the lowest free allowed one (the free core CPUs and the free physical
//! CPUs are always equally many, as every decision holds one of each). If no
//! free CPU is allowed, the pick is handed back (`stopped(k, 0, Preempted)`)
//! and core CPU k stays free until the next message. So no decision is ever
//! sent for a CPU its task may not use; the BPF side's check (`MISS` with
//! `PSCX_MISS_NOT_ALLOWED`) remains for a mask that changed in flight.
//!
//! # Cgroups ([`OwnHost::with_cgroups`])
//!
//! The BPF side reports every cgroup (`CGROUP_INIT` with its parent and
//! `cpu.weight`, `CGROUP_WEIGHT`, `CGROUP_EXIT`) and every task's cgroup
//! (each task message, and `CGROUP_MOVE`). The host mirrors the cgroup tree
//! in a [`GroupTree`] (the root cgroup is its root; a task's own weight is
//! `p->scx.weight`) and gives the core each runnable task's exact effective
//! weight from the shared [`Flattener`], as the simulator does: a joining
//! task's as its `join` weight, a waking task's by `set_weight` before its
//! `wake`, and every other changed weight right after the event.

use crate::clients::{weight, Core, State, Weights};
use crate::pscx_intf::{self as intf, pscx_event};
use propshare::groups::{Flattener, GroupError, GroupId, GroupTree, ROOT};
use propshare::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use propshare::scheduler::Scheduler;
use std::collections::{BTreeMap, HashMap};

/// Why the host stopped: the core or the group adapter refused an event.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The core scheduler refused an event.
    #[error("scheduler refused an event: {0}")]
    Sched(#[from] SchedError),
    /// The cgroup tree could not be flattened.
    #[error("cgroup weights: {0}")]
    Groups(#[from] GroupError),
}

#[derive(Clone, Debug)]
struct Task {
    client: ClientId,
    state: State,
    weight: u64,
    /// The CPUs 0..63 it may run on (bit k: CPU k).
    cpus: u64,
}

/// What one task received, for the report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TaskStats {
    /// Its weight when it was last decided (in cgroup mode: effective).
    pub weight: u64,
    /// Decisions that ended.
    pub decisions: u64,
    /// Its run time over those decisions (ns).
    pub ran_ns: u64,
    /// Those that ended because it blocked.
    pub blocks: u64,
}

/// The cgroup tree, mirrored from the BPF side's messages.
struct Cgroups {
    flat: Flattener,
    /// kernfs id of a cgroup -> its group (the root cgroup is [`ROOT`]).
    ids: HashMap<u64, GroupId>,
}

impl Cgroups {
    fn group(&self, id: u64) -> GroupId {
        self.ids.get(&id).copied().unwrap_or(ROOT)
    }
}

/// The decided task of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The task.
    pub pid: i32,
    /// The physical CPU it was sent to.
    pub phys: usize,
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
    /// Of those: by what the BPF side found (`PSCX_MISS_*`): not allowed on
    /// that CPU, gone, running, queued on another DSQ, runnable.
    pub miss_not_allowed: u64,
    /// See `miss_not_allowed`.
    pub miss_gone: u64,
    /// See `miss_not_allowed`.
    pub miss_running: u64,
    /// See `miss_not_allowed`.
    pub miss_queued: u64,
    /// See `miss_not_allowed`.
    pub miss_runnable: u64,
    /// Decisions carried out on another physical CPU than the core's (affinity).
    pub remapped: u64,
    /// Picks handed back because no free CPU was allowed for the task.
    pub affinity_deferred: u64,
    /// Allowed-CPU changes (`ops.set_cpumask`).
    pub cpumask_changes: u64,
    /// Cgroups reported, cgroup weight changes and task moves between cgroups.
    pub cgroups: u64,
    /// See `cgroups`.
    pub cgroup_weight_changes: u64,
    /// See `cgroups`.
    pub cgroup_moves: u64,
    /// Effective weights issued to the core for cgroups (`set_weight` calls).
    pub cgroup_reweighs: u64,
    /// Per task (by pid): decisions and run time.
    pub tasks: BTreeMap<i32, TaskStats>,
    /// Per physical CPU: decisions ended there and their run time (ns).
    pub cpu_decisions: Vec<u64>,
    /// See `cpu_decisions`.
    pub cpu_ran_ns: Vec<u64>,
    /// Tasks the BPF side ran by its safety net.
    pub fallbacks: u64,
    /// Tasks that blocked while running without a decision.
    pub undecided_blocks: u64,
    /// Property changes (policy, nice, cgroup) of a running task that kept
    /// its CPU and decision (`KEPT`).
    pub kept: u64,
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
    core: Core,
    weights: Weights,
    tasks: HashMap<i32, Task>,
    cpus: Vec<Option<Slot>>,
    /// Which physical CPUs hold a decision.
    phys_busy: Vec<bool>,
    /// The cgroup tree (cgroup mode only).
    cgroups: Option<Cgroups>,
    /// BPF time since which each CPU has been free in the model with a task
    /// waiting, until its next decided task runs.
    free_at: Vec<Option<Time>>,
    /// Counters.
    pub stats: Stats,
}

impl OwnHost {
    /// A host for `cpus` CPUs around `sched`.
    pub fn new(sched: Box<dyn Scheduler>, cpus: usize, weights: Weights) -> OwnHost {
        OwnHost {
            core: Core::new(sched),
            weights,
            tasks: HashMap::new(),
            cpus: vec![None; cpus],
            phys_busy: vec![false; cpus],
            cgroups: None,
            free_at: vec![None; cpus],
            stats: Stats { cpu_decisions: vec![0; cpus], cpu_ran_ns: vec![0; cpus], ..Stats::default() },
        }
    }

    /// Weight tasks by the cgroup tree (kernel-weight mode): each task's own
    /// weight is `p->scx.weight`, each cgroup's its `cpu.weight`.
    pub fn with_cgroups(mut self) -> OwnHost {
        self.cgroups = Some(Cgroups { flat: Flattener::new(GroupTree::new()), ids: HashMap::new() });
        self
    }

    /// The physical CPU that carries out core CPU `k`'s decision, if any.
    pub fn phys_of(&self, k: usize) -> Option<usize> {
        self.cpus.get(k).copied().flatten().map(|s| s.phys)
    }

    /// The decided task of each core CPU.
    #[cfg(test)]
    pub fn slots(&self) -> &[Option<Slot>] {
        &self.cpus
    }

    /// Whether `pid` is a known task.
    #[cfg(test)]
    pub fn knows(&self, pid: i32) -> bool {
        self.tasks.contains_key(&pid)
    }

    fn forget(&mut self, pid: i32) {
        if let Some(t) = self.tasks.remove(&pid) {
            self.core.clients.free(t.client);
            self.stats.leaves += 1;
        }
    }

    fn set_state(&mut self, pid: i32, s: State) {
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.state = s;
        }
    }

    fn join(&mut self, now: Time, e: &pscx_event, w: u64, kicks: &mut Kicks) -> Result<(), HostError> {
        let pid = e.pid;
        let c = self.core.clients.alloc(pid);
        // In cgroup mode the core gets the task's effective weight.
        let mut effective = weight(w);
        let mut others = Vec::new();
        if let Some(cg) = self.cgroups.as_mut() {
            let g = cg.group(e.cgroup);
            let changed = cg.flat.tree_mut().join(c, g, weight(w)).and_then(|_| cg.flat.changes(Some(c)));
            match changed {
                Ok(ch) => {
                    for (x, wx) in ch {
                        if x == c {
                            effective = wx;
                        } else {
                            others.push((x, wx));
                        }
                    }
                }
                Err(err) => {
                    let _ = cg.flat.tree_mut().leave(c);
                    cg.flat.forget(c);
                    self.core.clients.free(c);
                    return Err(err.into());
                }
            }
        }
        match self.core.sched.join(now, c, effective) {
            Ok(k) => kicks.extend(k.map(|k| k.0 as usize)),
            Err(err) => {
                self.core.clients.free(c);
                return Err(err.into());
            }
        }
        self.stats.joins += 1;
        let cpus = if e.cpus == 0 { u64::MAX } else { e.cpus };
        self.tasks.insert(pid, Task { client: c, state: State::Runnable, weight: w, cpus });
        self.apply(now, others)
    }

    /// Give the core the effective weights that changed (cgroup mode).
    fn apply(&mut self, now: Time, changes: Vec<(ClientId, Weight)>) -> Result<(), HostError> {
        for (c, w) in changes {
            self.core.sched.set_weight(now, c, w)?;
            self.stats.cgroup_reweighs += 1;
        }
        Ok(())
    }

    /// After a change of the cgroup tree that is not one task's own wake or
    /// join: reissue every effective weight that changed.
    fn regroup(&mut self, now: Time) -> Result<(), HostError> {
        let Some(cg) = self.cgroups.as_mut() else { return Ok(()) };
        let ch = cg.flat.changes(None)?;
        self.apply(now, ch)
    }

    /// Record a block (`false`) or wake (`true`) of `c` in the cgroup tree;
    /// the changed weights, `c`'s own first.
    fn regroup_runnable(&mut self, c: ClientId, runnable: bool) -> Result<Vec<(ClientId, Weight)>, HostError> {
        let Some(cg) = self.cgroups.as_mut() else { return Ok(Vec::new()) };
        cg.flat.tree_mut().set_runnable(c, runnable)?;
        let mut ch = cg.flat.changes(Some(c))?;
        ch.sort_by_key(|&(x, _)| x != c);
        Ok(ch)
    }

    fn wake(&mut self, now: Time, pid: i32, kicks: &mut Kicks) -> Result<(), HostError> {
        let Some(t) = self.tasks.get(&pid) else { return Ok(()) };
        if t.state != State::Blocked {
            return Ok(());
        }
        let c = t.client;
        let mut ch = self.regroup_runnable(c, true)?;
        // The waking task's own new weight before its wake (the core places it
        // at that weight), the others' after.
        let own: Vec<_> = ch.iter().position(|&(x, _)| x == c).map(|i| ch.remove(i)).into_iter().collect();
        self.apply(now, own)?;
        kicks.extend(self.core.sched.wake(now, c)?.map(|k| k.0 as usize));
        self.stats.wakes += 1;
        self.set_state(pid, State::Runnable);
        self.apply(now, ch)
    }

    /// End the decision of `pid` on CPU `k`.
    fn end(&mut self, now: Time, k: usize, pid: i32, ran: Time, reason: StopReason) -> Result<(), HostError> {
        let Some(t) = self.tasks.get(&pid) else { return Ok(()) };
        let c = t.client;
        self.core.sched.stopped(now, CpuId(k as u32), c, ran, reason)?;
        if let Some(slot) = self.cpus[k].take() {
            self.phys_busy[slot.phys] = false;
            self.stats.cpu_decisions[slot.phys] += 1;
            self.stats.cpu_ran_ns[slot.phys] += ran;
        }
        let ts = self.stats.tasks.entry(pid).or_default();
        ts.decisions += 1;
        ts.ran_ns += ran;
        ts.blocks += (reason == StopReason::Blocked) as u64;
        if reason == StopReason::Blocked {
            let ch = self.regroup_runnable(c, false)?;
            self.apply(now, ch)?;
        }
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
    ) -> Result<Kicks, HostError> {
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

    fn handle(&mut self, now: Time, e: &pscx_event, fixed_weight: impl FnOnce(i32) -> u64) -> Result<Kicks, HostError> {
        let mut kicks = Kicks::new();
        let pid = e.pid;
        let known = self.tasks.get(&pid).map(|t| (t.state, t.weight));
        if e.cpus != 0 && e.kind != intf::pscx_kind_PSCX_MISS {
            if let Some(t) = self.tasks.get_mut(&pid) {
                t.cpus = e.cpus;
            }
        }
        match e.kind {
            intf::pscx_kind_PSCX_RUNNABLE | intf::pscx_kind_PSCX_ENQUEUE => {
                let w = match self.weights {
                    Weights::Kernel => e.weight as u64,
                    Weights::Fixed => known.map(|k| k.1).unwrap_or_else(|| fixed_weight(pid)),
                };
                match known {
                    None => self.join(now, e, w, &mut kicks)?,
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
                    self.core.sched.block(now, c)?;
                    self.stats.undecided_blocks += 1;
                    self.set_state(pid, State::Blocked);
                    let ch = self.regroup_runnable(c, false)?;
                    self.apply(now, ch)?;
                }
                _ => {}
            },
            intf::pscx_kind_PSCX_EXIT => self.exit(now, pid, e.ran)?,
            intf::pscx_kind_PSCX_KEPT => self.stats.kept += 1,
            intf::pscx_kind_PSCX_WEIGHT
                if self.weights == Weights::Kernel && known.is_some_and(|k| k.1 != e.weight as u64) =>
            {
                self.reweigh(now, pid, e.weight as u64)?;
            }
            intf::pscx_kind_PSCX_MISS => {
                self.stats.misses += 1;
                let why = |bit: u32| e.flags & bit as u64 != 0;
                self.stats.miss_not_allowed += why(intf::pscx_miss_PSCX_MISS_NOT_ALLOWED) as u64;
                self.stats.miss_gone += why(intf::pscx_miss_PSCX_MISS_GONE) as u64;
                self.stats.miss_running += why(intf::pscx_miss_PSCX_MISS_RUNNING) as u64;
                self.stats.miss_queued += why(intf::pscx_miss_PSCX_MISS_QUEUED) as u64;
                self.stats.miss_runnable += why(intf::pscx_miss_PSCX_MISS_RUNNABLE) as u64;
                if let Some((State::Decided(k), _)) = known {
                    if self.cpus[k].is_some_and(|s| s.phys == e.cpu as usize) {
                        self.end(now, k, pid, 0, StopReason::Blocked)?;
                    }
                }
            }
            intf::pscx_kind_PSCX_CPUMASK => self.stats.cpumask_changes += 1,
            intf::pscx_kind_PSCX_CGROUP_INIT => {
                if let Some(cg) = self.cgroups.as_mut() {
                    self.stats.cgroups += 1;
                    if !cg.ids.contains_key(&e.cgroup) {
                        let g = if e.ran == 0 {
                            ROOT
                        } else {
                            let parent = cg.group(e.ran);
                            cg.flat.tree_mut().add_group(parent, weight(e.weight as u64))?
                        };
                        cg.ids.insert(e.cgroup, g);
                    }
                }
            }
            intf::pscx_kind_PSCX_CGROUP_EXIT => {
                // The tree keeps the (empty) group: it has no runnable task,
                // so it weighs nothing.
                if let Some(cg) = self.cgroups.as_mut() {
                    cg.ids.remove(&e.cgroup);
                }
            }
            intf::pscx_kind_PSCX_CGROUP_WEIGHT => {
                if let Some(cg) = self.cgroups.as_mut() {
                    let g = cg.group(e.cgroup);
                    if g != ROOT {
                        cg.flat.tree_mut().set_group_weight(g, weight(e.weight as u64))?;
                        self.stats.cgroup_weight_changes += 1;
                        self.regroup(now)?;
                    }
                }
            }
            intf::pscx_kind_PSCX_CGROUP_MOVE => {
                if let (Some(cg), Some(t)) = (self.cgroups.as_mut(), self.tasks.get(&pid)) {
                    let g = cg.group(e.cgroup);
                    cg.flat.tree_mut().move_client(t.client, g)?;
                    self.stats.cgroup_moves += 1;
                    self.regroup(now)?;
                }
            }
            intf::pscx_kind_PSCX_FALLBACK => self.stats.fallbacks += 1,
            intf::pscx_kind_PSCX_RUNNING => {
                if let Some((State::Decided(k), _)) = known {
                    if self.cpus[k].is_none_or(|s| s.phys != e.cpu as usize) {
                        return Ok(kicks);
                    }
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

    fn reweigh(&mut self, now: Time, pid: i32, w: u64) -> Result<(), HostError> {
        let c = self.tasks[&pid].client;
        if let Some(cg) = self.cgroups.as_mut() {
            // Its own weight within its cgroup: every share under its
            // parents may change.
            cg.flat.tree_mut().set_weight(c, weight(w))?;
            self.regroup(now)?;
        } else {
            self.core.sched.set_weight(now, c, weight(w))?;
        }
        self.stats.weight_changes += 1;
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.weight = w;
        }
        Ok(())
    }

    /// `pid` left (its `EXIT` message, or the reaping of a job). `ran` is
    /// its run time since its decision if it held a CPU.
    pub fn exit(&mut self, now: Time, pid: i32, ran: Time) -> Result<(), HostError> {
        let Some(t) = self.tasks.get(&pid).cloned() else { return Ok(()) };
        match t.state {
            State::Decided(k) => self.end(now, k, pid, ran, StopReason::Left)?,
            State::Runnable | State::Blocked => self.core.sched.leave(now, t.client)?,
        }
        self.forget(pid);
        if let Some(cg) = self.cgroups.as_mut() {
            cg.flat.tree_mut().leave(t.client)?;
            cg.flat.forget(t.client);
            self.regroup(now)?;
        }
        Ok(())
    }

    /// The free physical CPU that carries out core CPU `k`'s decision for a
    /// task allowed on `cpus`: `k` itself if free and allowed, else the lowest
    /// free allowed one.
    fn place(&self, k: usize, cpus: u64) -> Option<usize> {
        let allowed = |j: usize| j >= 64 || cpus & (1 << j) != 0;
        if !self.phys_busy[k] && allowed(k) {
            return Some(k);
        }
        (0..self.phys_busy.len()).find(|&j| !self.phys_busy[j] && allowed(j))
    }

    /// Ask the core what each free CPU should run: `(core cpu, physical
    /// cpu, pid, slice)`; the last three go to the BPF side.
    pub fn fill(&mut self, now: Time) -> Result<Vec<(usize, usize, i32, Time)>, HostError> {
        let mut out = Vec::new();
        for k in 0..self.cpus.len() {
            if self.cpus[k].is_some() {
                continue;
            }
            if let Some((client, pid, slice)) = self.core.pick(now, k)? {
                let cpus = self.tasks.get(&pid).map_or(u64::MAX, |t| t.cpus);
                let Some(phys) = self.place(k, cpus) else {
                    // No free CPU it may use: it waits for the next message.
                    self.core.sched.stopped(now, CpuId(k as u32), client, 0, StopReason::Preempted)?;
                    self.stats.affinity_deferred += 1;
                    continue;
                };
                if phys != k {
                    self.stats.remapped += 1;
                }
                self.phys_busy[phys] = true;
                self.cpus[k] = Some(Slot { pid, phys, since: now, slice });
                self.set_state(pid, State::Decided(k));
                self.stats.decisions += 1;
                let w = self.cgroups.as_ref().and_then(|cg| cg.flat.issued(client)).map(Weight::get);
                let ts = self.stats.tasks.entry(pid).or_default();
                ts.weight = w.unwrap_or_else(|| self.tasks.get(&pid).map_or(0, |t| t.weight));
                out.push((k, phys, pid, slice));
            }
        }
        Ok(out)
    }

    /// The BPF side refused the decision of `pid` for core CPU `k` (the
    /// syscall failed): the task is still waiting, so the CPU goes back to
    /// the core.
    pub fn undo(&mut self, now: Time, k: usize, pid: i32) -> Result<(), HostError> {
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
        crate::plain_panics();
        let s = propshare::registry::build("gr3mp", propshare::scheduler::SchedConfig::new(cpus, Q)).unwrap();
        OwnHost::new(s, cpus, Weights::Kernel)
    }

    fn ev(kind: u32, pid: i32, flags: u64, ran: u64) -> pscx_event {
        pscx_event { kind, pid, cpu: 0, weight: 100, flags, ran, ts: 0, cpus: u64::MAX, cgroup: 0 }
    }

    const RUNNABLE: u32 = intf::pscx_kind_PSCX_RUNNABLE;
    const ENQUEUE: u32 = intf::pscx_kind_PSCX_ENQUEUE;
    const STOPPING: u32 = intf::pscx_kind_PSCX_STOPPING;

    fn arrive(h: &mut OwnHost, pid: i32) {
        h.on_event(0, &ev(RUNNABLE, pid, 1, 0), |_| 1).unwrap();
        h.on_event(0, &ev(ENQUEUE, pid, 1, 0), |_| 1).unwrap();
    }

    /// One CPU and tasks 10 and 11 waiting: the host after the core decided
    /// at `now`, and the pid it decided for CPU 0.
    fn one_of_two(now: Time) -> (OwnHost, i32) {
        let mut h = host(1);
        arrive(&mut h, 10);
        arrive(&mut h, 11);
        let d = h.fill(now).unwrap();
        assert_eq!(d.len(), 1);
        (h, d[0].2)
    }

    #[test]
    fn one_decided_task_per_cpu_and_expiry_frees_it() {
        let (mut h, pid) = one_of_two(1);
        assert!(h.fill(2).unwrap().is_empty(), "CPU 0 is taken until its task stops");
        // A preemption by a higher class: still runnable, no enqueue: nothing ends.
        h.on_event(3, &ev(STOPPING, pid, 1, 1_000_000), |_| 1).unwrap();
        assert!(h.fill(4).unwrap().is_empty());
        h.on_event(5, &ev(STOPPING, pid, 1, Q + 1), |_| 1).unwrap();
        h.on_event(5, &ev(ENQUEUE, pid, 0, Q + 1), |_| 1).unwrap();
        assert_eq!(h.stats.expired, 1);
        let d2 = h.fill(6).unwrap();
        assert_eq!(d2.len(), 1);
        assert_ne!(d2[0].2, pid, "the other task gets the CPU after a full slice");
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
        assert_eq!(h.fill(2).unwrap(), vec![(0, 0, 10, Q)]);
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
    fn a_property_change_of_the_running_task_keeps_its_decision() {
        // The BPF side reports a renice/cgroup move/policy change of a running
        // task that stays in sched_ext as KEPT (plus its new weight): no stop,
        // no block, no wake-up, and the core still has it on its CPU.
        let (mut h, pid) = one_of_two(0);
        h.on_event(1, &ev(intf::pscx_kind_PSCX_KEPT, pid, 2, 1_000_000), |_| 1).unwrap();
        let mut w = ev(intf::pscx_kind_PSCX_WEIGHT, pid, 0, 0);
        w.weight = 305;
        h.on_event(1, &w, |_| 1).unwrap();
        h.on_event(2, &ev(intf::pscx_kind_PSCX_RUNNING, pid, 0, 1_000_000), |_| 1).unwrap();
        assert_eq!(h.slots()[0].map(|s| s.pid), Some(pid), "it keeps CPU 0");
        assert_eq!((h.stats.kept, h.stats.blocks, h.stats.wakes, h.stats.preempted), (1, 0, 0, 0));
        assert!(h.fill(3).unwrap().is_empty());
    }

    #[test]
    fn leaving_sched_ext_while_running_charges_its_run_and_frees_the_cpu() {
        // EXIT comes from ops.disable: the task exited or switched class; if
        // it left while running, `ran` is its run time since the decision.
        let (mut h, pid) = one_of_two(0);
        h.on_event(5, &ev(intf::pscx_kind_PSCX_EXIT, pid, 0, 3_000_000), |_| 1).unwrap();
        assert!(!h.knows(pid));
        assert_eq!(h.stats.tasks[&pid].ran_ns, 3_000_000);
        let d = h.fill(6).unwrap();
        assert_eq!(d.len(), 1);
        assert_ne!(d[0].2, pid);
        // It comes back (switched to SCHED_EXT again): a new client.
        arrive(&mut h, pid);
        assert_eq!(h.stats.joins, 3);
    }

    #[test]
    fn a_task_run_by_the_fallback_that_blocks_is_blocked() {
        let mut h = host(1);
        arrive(&mut h, 10);
        h.on_event(1, &ev(STOPPING, 10, 0, 100), |_| 1).unwrap();
        assert_eq!(h.stats.undecided_blocks, 1);
        assert!(h.fill(2).unwrap().is_empty());
    }

    #[test]
    fn a_decision_is_never_made_for_a_disallowed_cpu() {
        // Two CPUs, three tasks; task 10 may run only on CPU 1. Whatever the
        // core picks for its CPUs, task 10 is only ever sent to CPU 1.
        let mut h = host(2);
        for pid in [10, 11, 12] {
            let mut e = ev(RUNNABLE, pid, 1, 0);
            if pid == 10 {
                e.cpus = 0b10;
            }
            h.on_event(0, &e, |_| 1).unwrap();
        }
        let mut now = 1;
        for _ in 0..200 {
            for (_, phys, pid, _) in h.fill(now).unwrap() {
                assert!(pid != 10 || phys == 1, "task 10 sent to CPU {phys}");
            }
            // Both decided tasks run out their slices.
            let busy: Vec<i32> = h.slots().iter().flatten().map(|s| s.pid).collect();
            now += Q;
            for pid in busy {
                // Every message carries the task's allowed CPUs.
                let mut e = ev(ENQUEUE, pid, 0, Q);
                if pid == 10 {
                    e.cpus = 0b10;
                }
                h.on_event(now, &e, |_| 1).unwrap();
            }
        }
        let d = |pid: i32| h.stats.tasks.get(&pid).map_or(0, |t| t.decisions);
        assert!(d(10) > 0 && d(11) > 0 && d(12) > 0, "every task ran: {:?}", h.stats.tasks);
        assert_eq!(h.stats.cpu_decisions.iter().sum::<u64>(), d(10) + d(11) + d(12));
    }

    fn cgroup_event(kind: u32, id: u64, parent: u64, weight: u32) -> pscx_event {
        pscx_event { kind, pid: 0, cpu: -1, weight, flags: 0, ran: parent, ts: 0, cpus: 0, cgroup: id }
    }

    #[test]
    fn cgroup_weights_are_exact_shares_of_the_tree() {
        // Root cgroup 1; a (cpu.weight 100) with one task, b (300) with eight:
        // effective weights in the ratio 8 : 3 each (1/4 and 3/32 of the machine).
        let mut h = host(2).with_cgroups();
        h.on_event(0, &cgroup_event(intf::pscx_kind_PSCX_CGROUP_INIT, 1, 0, 100), |_| 1).unwrap();
        h.on_event(0, &cgroup_event(intf::pscx_kind_PSCX_CGROUP_INIT, 20, 1, 100), |_| 1).unwrap();
        h.on_event(0, &cgroup_event(intf::pscx_kind_PSCX_CGROUP_INIT, 30, 1, 300), |_| 1).unwrap();
        let arrive_in = |h: &mut OwnHost, pid: i32, cg: u64| {
            let mut e = ev(RUNNABLE, pid, 1, 0);
            e.cgroup = cg;
            h.on_event(0, &e, |_| 1).unwrap();
        };
        arrive_in(&mut h, 100, 20);
        for pid in 101..109 {
            arrive_in(&mut h, pid, 30);
        }
        let eff = |h: &OwnHost, pid: i32| {
            let c = h.tasks[&pid].client;
            h.cgroups.as_ref().unwrap().flat.issued(c).unwrap().get()
        };
        let a = eff(&h, 100);
        assert!((101..109).all(|p| eff(&h, p) * 8 == a * 3), "{a} vs {}", eff(&h, 101));
        // b's weight drops to 100: 1/2 and 1/16 each.
        h.on_event(1, &cgroup_event(intf::pscx_kind_PSCX_CGROUP_WEIGHT, 30, 0, 100), |_| 1).unwrap();
        assert_eq!(eff(&h, 100) / eff(&h, 101), 8);
        // The task of a blocks: b's tasks share the machine equally.
        let d = h.fill(2).unwrap();
        let first = d[0].2;
        h.on_event(3, &ev(STOPPING, first, 0, 1000), |_| 1).unwrap();
        let runnable: Vec<i32> = (100..109).filter(|&p| p != first).collect();
        let ws: Vec<u64> = runnable.iter().map(|&p| eff(&h, p)).collect();
        assert!(ws.iter().filter(|&&w| w == ws[ws.len() - 1]).count() >= 7, "{ws:?}");
        // A task moves from b to a.
        let mut m = ev(intf::pscx_kind_PSCX_CGROUP_MOVE, 108, 0, 0);
        m.cgroup = 20;
        h.on_event(4, &m, |_| 1).unwrap();
        assert_eq!(h.stats.cgroup_moves, 1);
        assert!(h.stats.cgroup_reweighs > 9);
    }
}
