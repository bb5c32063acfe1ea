//! The scheduler behind its locks: which lock each event takes.
//!
//! * **Central** (every registry scheduler, DWRR and GDQ too with
//!   [`crate::Builder::central`]): one `Mutex<Box<dyn Scheduler + Send>>`. A worker
//!   takes it once per slice for a combined stop + pick; a group's wake-up
//!   (empty → non-empty edge), first join, weight change and departure take
//!   it once each. `now` is read under the lock, so it is monotone across
//!   calls as the [`Scheduler`] contract requires.
//! * **Distributed** (`dwrr`, `dwrr-cfs` and their `+carry` variants): the
//!   core's per-CPU split ([`propshare::algo::dwrr`]): the global part
//!   [`DwrrShared`] (atomics: `highest`, the owner map) and one
//!   `Mutex<CpuPart>` per worker, reached through [`Locked`]. A worker's
//!   stop and local dispatch lock only its own part; round balancing locks
//!   a victim's part and its own, in CPU id order, only when its round-active
//!   queue is empty; a wake-up locks the home and target parts. DWRR reads
//!   no clock, so `now` is not passed.
//!
//! A central host can also record every call it makes, in lock order, with
//! its arguments and result ([`SchedEvent`], [`crate::Builder::record`]):
//! fed to the same scheduler built afresh, the recording must give the same
//! decisions (`tests/replay.rs`), so the runtime's behaviour can be studied
//! in the core alone.
//!
//! * **GDQ distributed** (`gdq`): the core's split ([`propshare::algo::gdq`]):
//!   the global part [`GdqShared`] (the group table, readjustment) behind
//!   one lock, each group's part ([`GdqGroup`]: its queue list) behind its
//!   own, each run queue behind its own, reached through [`Locked`], each
//!   worker's CPU part ([`GdqCpu`]: its MFQ state) behind its own, and the
//!   owner map (atomic) shared. A worker's stop and pick first try the
//!   local steps (`gdq::try_stopped`, `gdq::try_pick`: its CPU part and its
//!   queue's lock only); a pick at the end of a round then tries the group
//!   step (`gdq::try_pick_in_group`: its group's lock, then queue locks);
//!   when GDQ's rules need the global part (an MFQ decision, a pull, a
//!   block or departure) the step runs again under the global lock and
//!   every group's lock (in order), taken after the CPU part's and before
//!   any queue's. A cross-queue step (steal) takes two queue locks in queue
//!   id order. `now` is read under the CPU part's lock for a local or group
//!   step and under the global lock for a global one (GDQ compares it only
//!   with the CPU's own decision times and the schedule's epoch). With
//!   [`crate::Builder::central`] GDQ runs behind the one central lock
//!   instead, as the registry builds it.
//!
//! No user code runs while any of these locks is held (the worker runs
//! tasks between `stop_and_pick` calls).

use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_utils::CachePadded;
use propshare::algo::dwrr::{
    self, CpuPart, DwrrOptions, DwrrShared, LocalQueue, Locked, RoundRobinQueue, VruntimeQueue,
};
use propshare::algo::gdq::{self, ClientEvent, GdqCpu, GdqGroup, GdqParams, GdqShared, NeedsGlobal, RunQueue};
use propshare::percpu::OwnerMap;
use propshare::registry::{self, SchedSpec};
use propshare::{ClientId, CpuId, Decision, SchedConfig, SchedError, Scheduler, StopReason, Time, Weight};

/// Which worker a wake-up should reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// The scheduler asked for this CPU to be preempted (central `Kick`).
    Kick(usize),
    /// The client was placed on this CPU's queue (distributed).
    Placed(usize),
    /// Any idle worker may take it.
    Any,
}

/// A slice that ended: what the worker reports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stop {
    pub client: ClientId,
    pub ran: Time,
    pub why: StopReason,
}

/// DWRR's per-CPU parts, one lock each.
pub(crate) struct Distributed<L: LocalQueue> {
    sh: DwrrShared,
    parts: Vec<Mutex<CpuPart<L>>>,
}

impl<L: LocalQueue> Distributed<L> {
    fn new(workers: usize, slice: Time, opts: DwrrOptions, capacity: usize) -> Self {
        Distributed {
            sh: DwrrShared::new(slice, opts, capacity),
            parts: (0..workers).map(|k| Mutex::new(CpuPart::new(k))).collect(),
        }
    }

    fn home(&self, c: ClientId) -> Target {
        self.sh.entry_of(c).map_or(Target::Any, |(k, _)| Target::Placed(k))
    }

    fn join(&self, c: ClientId, w: Weight) -> Target {
        dwrr::join(&self.sh, &mut Locked(&self.parts), c, w);
        self.home(c)
    }

    fn wake(&self, c: ClientId) -> Result<Target, SchedError> {
        if dwrr::wake(&self.sh, &mut Locked(&self.parts), c) {
            Ok(self.home(c))
        } else {
            Err(SchedError::WrongState { client: c, event: "wake", state: "not blocked" })
        }
    }

    fn leave(&self, c: ClientId) -> Result<(), SchedError> {
        if dwrr::leave(&self.sh, &mut Locked(&self.parts), c) {
            Ok(())
        } else {
            Err(SchedError::UnknownClient(c))
        }
    }

    fn set_weight(&self, c: ClientId, w: Weight) -> Result<(), SchedError> {
        if dwrr::set_weight(&self.sh, &mut Locked(&self.parts), c, w) {
            Ok(())
        } else {
            Err(SchedError::UnknownClient(c))
        }
    }

    fn stop_and_pick(&self, k: usize, prev: Option<Stop>) -> Result<Option<(ClientId, Time)>, SchedError> {
        let mut parts = Locked(&self.parts);
        if let Some(s) = prev {
            if dwrr::stopped(&self.sh, &mut parts, k, s.ran, s.why) != Some(s.client) {
                return Err(SchedError::NotRunningThere { client: s.client, cpu: CpuId(k as u32) });
            }
        }
        Ok(dwrr::pick(&self.sh, &mut parts, k))
    }
}

/// GDQ's global part under one lock, each group part, run queue and CPU
/// part under its own; the owner map shared.
pub(crate) struct GdqHost {
    sh: Mutex<GdqShared>,
    groups: Vec<Mutex<GdqGroup>>,
    owners: Arc<OwnerMap>,
    queues: Vec<Mutex<RunQueue>>,
    cpus: Vec<Mutex<GdqCpu>>,
}

/// What a global step holds: the global part and every group part.
type Held<'a> = [MutexGuard<'a, GdqGroup>];

impl GdqHost {
    fn new(cfg: SchedConfig, params: GdqParams, capacity: usize) -> Self {
        let sh = GdqShared::new(cfg, params, capacity);
        let queues = sh.queue_parts().into_iter().map(Mutex::new).collect();
        let cpus = sh.cpu_parts().into_iter().map(Mutex::new).collect();
        let groups = sh.group_parts().into_iter().map(Mutex::new).collect();
        let owners = sh.owner_map();
        GdqHost { sh: Mutex::new(sh), groups, owners, queues, cpus }
    }

    /// One step: the global lock for its whole length (taken first), then
    /// every group's lock in order, the queue locks as the step needs them,
    /// and `now` read under the global lock.
    fn step<R>(
        &self,
        now: impl Fn() -> Time,
        f: impl FnOnce(&mut GdqShared, &mut Held<'_>, &mut Locked<'_, RunQueue>, Time) -> R,
    ) -> R {
        let mut sh = lock(&self.sh);
        let mut groups: Vec<MutexGuard<'_, GdqGroup>> = self.groups.iter().map(lock).collect();
        let t = now();
        f(&mut sh, &mut groups, &mut Locked(&self.queues), t)
    }

    fn join(&self, now: impl Fn() -> Time, c: ClientId, w: Weight) -> Result<Target, SchedError> {
        if self.step(now, |sh, g, q, t| gdq::client_event(sh, g, q, t, c, ClientEvent::Join(w))) {
            Ok(Target::Any)
        } else {
            Err(SchedError::AlreadyJoined(c))
        }
    }

    fn wake(&self, now: impl Fn() -> Time, c: ClientId) -> Result<Target, SchedError> {
        if self.step(now, |sh, g, q, t| gdq::client_event(sh, g, q, t, c, ClientEvent::Wake)) {
            Ok(Target::Any)
        } else {
            Err(SchedError::WrongState { client: c, event: "wake", state: "not blocked" })
        }
    }

    fn leave(&self, now: impl Fn() -> Time, c: ClientId) -> Result<(), SchedError> {
        if self.step(now, |sh, g, q, t| gdq::client_event(sh, g, q, t, c, ClientEvent::Leave)) {
            Ok(())
        } else {
            Err(SchedError::UnknownClient(c))
        }
    }

    fn set_weight(&self, now: impl Fn() -> Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        if self.step(now, |sh, g, q, t| gdq::client_event(sh, g, q, t, c, ClientEvent::SetWeight(w))) {
            Ok(())
        } else {
            Err(SchedError::UnknownClient(c))
        }
    }

    fn stop_and_pick(
        &self,
        now: impl Fn() -> Time,
        k: usize,
        prev: Option<Stop>,
    ) -> Result<Option<(ClientId, Time)>, SchedError> {
        let mut cpu = lock(&self.cpus[k]);
        let cpu = &mut *cpu;
        let mut queues = Locked(&self.queues);
        if let Some(s) = prev {
            let was = match gdq::try_stopped(cpu, &mut queues, s.ran, s.why) {
                Ok(was) => was,
                Err(NeedsGlobal) => self.step(&now, |sh, g, q, t| gdq::stopped(cpu, sh, g, q, t, s.ran, s.why)),
            };
            if was != Some(s.client) {
                return Err(SchedError::NotRunningThere { client: s.client, cpu: CpuId(k as u32) });
            }
        }
        if let Ok(got) = gdq::try_pick(cpu, &mut queues, now()) {
            return Ok(Some(got));
        }
        if let Some(k) = cpu.group() {
            let group = lock(&self.groups[k as usize]);
            if let Ok(got) = gdq::try_pick_in_group(cpu, &self.owners, &group, &mut queues, now()) {
                return Ok(Some(got));
            }
        }
        Ok(self.step(&now, |sh, g, q, t| gdq::pick(cpu, sh, g, q, t)))
    }
}

/// One call a central host made to its scheduler, as made (`at` is the
/// `now` it passed), with the decision a pick returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedEvent {
    /// `join(at, group, weight)`.
    Join {
        /// `now`, ns since the runtime started.
        at: Time,
        /// The group's client id.
        group: ClientId,
        /// Its weight.
        weight: Weight,
    },
    /// `wake(at, group)`.
    Wake {
        /// `now`.
        at: Time,
        /// The group.
        group: ClientId,
    },
    /// `set_weight(at, group, weight)`.
    SetWeight {
        /// `now`.
        at: Time,
        /// The group.
        group: ClientId,
        /// The new weight.
        weight: Weight,
    },
    /// `leave(at, group)` of a blocked group (one that leaves from a worker is a `Stop` with `Left`).
    Leave {
        /// `now`.
        at: Time,
        /// The group.
        group: ClientId,
    },
    /// `stopped(at, worker, group, ran, why)`: a slice ended.
    Stop {
        /// `now`.
        at: Time,
        /// The worker (CPU).
        worker: CpuId,
        /// The group it served.
        group: ClientId,
        /// Thread CPU time charged, ns.
        ran: Time,
        /// Why it ended.
        why: StopReason,
    },
    /// `pick(at, worker)` and what it decided.
    Pick {
        /// `now`.
        at: Time,
        /// The worker.
        worker: CpuId,
        /// The decision.
        decision: Decision,
    },
}

/// The central scheduler and, if asked for, its recording.
pub(crate) struct Central {
    sched: Box<dyn Scheduler + Send>,
    log: Option<Vec<SchedEvent>>,
}

impl Central {
    fn note(&mut self, e: SchedEvent) {
        if let Some(log) = &mut self.log {
            log.push(e);
        }
    }
}

/// The scheduler, central or distributed.
pub(crate) enum Host {
    Central(CachePadded<Mutex<Central>>),
    DwrrRr(Distributed<RoundRobinQueue>),
    DwrrCfs(Distributed<VruntimeQueue>),
    Gdq(Box<GdqHost>),
}

fn kick(k: propshare::Kick) -> Target {
    k.map_or(Target::Any, |cpu| Target::Kick(cpu.index()))
}

impl Host {
    /// Build `spec` for `workers` CPUs and quantum `slice`; DWRR specs run
    /// distributed unless `central` (or `record`: only a central host records).
    pub fn build(
        spec: &str,
        workers: usize,
        slice: Time,
        capacity: usize,
        central: bool,
        record: bool,
    ) -> Result<Host, registry::BuildError> {
        let central = central || record;
        let cfg = SchedConfig::new(workers, slice);
        let parsed: SchedSpec = registry::parse_spec(spec)?;
        let entry = registry::find(&parsed.name)?;
        let params = registry::resolve(entry, &parsed.given)?;
        cfg.validate()?;
        let carry = entry.name.ends_with("+carry");
        Ok(match entry.name {
            "dwrr" | "dwrr+carry" if !central => {
                Host::DwrrRr(Distributed::new(workers, slice, registry::dwrr_options(cfg, &params, carry), capacity))
            }
            "dwrr-cfs" | "dwrr-cfs+carry" if !central => {
                Host::DwrrCfs(Distributed::new(workers, slice, registry::dwrr_options(cfg, &params, carry), capacity))
            }
            "gdq" if !central => Host::Gdq(Box::new(GdqHost::new(
                cfg,
                GdqParams { delta: params.int("delta"), interval: params.int("t") },
                capacity,
            ))),
            _ => {
                let sched = registry::build_send(spec, cfg)?;
                Host::Central(CachePadded::new(Mutex::new(Central { sched, log: record.then(Vec::new) })))
            }
        })
    }

    /// "central" or "distributed".
    pub fn locking(&self) -> &'static str {
        match self {
            Host::Central(_) => "central",
            _ => "distributed",
        }
    }

    /// Whether a worker that found nothing to run may park until the next
    /// wake-up. DWRR (Gap DWRR-16) and DFS may leave a CPU idle while a
    /// client waits; their idle workers park for one slice at a time.
    pub fn work_conserving(&self) -> bool {
        match self {
            Host::Central(s) => lock(s).sched.work_conserving(),
            // GDQ is work-conserving once the host polls its idle CPUs
            // after each event that can make work appear (the runtime does).
            Host::Gdq(_) => true,
            _ => false,
        }
    }

    pub fn join(&self, now: impl Fn() -> Time, c: ClientId, w: Weight) -> Result<Target, SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                let at = now();
                s.note(SchedEvent::Join { at, group: c, weight: w });
                s.sched.join(at, c, w).map(kick)
            }
            Host::DwrrRr(d) => Ok(d.join(c, w)),
            Host::DwrrCfs(d) => Ok(d.join(c, w)),
            Host::Gdq(g) => g.join(now, c, w),
        }
    }

    pub fn wake(&self, now: impl Fn() -> Time, c: ClientId) -> Result<Target, SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                let at = now();
                s.note(SchedEvent::Wake { at, group: c });
                s.sched.wake(at, c).map(kick)
            }
            Host::DwrrRr(d) => d.wake(c),
            Host::DwrrCfs(d) => d.wake(c),
            Host::Gdq(g) => g.wake(now, c),
        }
    }

    pub fn leave(&self, now: impl Fn() -> Time, c: ClientId) -> Result<(), SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                let at = now();
                s.note(SchedEvent::Leave { at, group: c });
                s.sched.leave(at, c)
            }
            Host::DwrrRr(d) => d.leave(c),
            Host::DwrrCfs(d) => d.leave(c),
            Host::Gdq(g) => g.leave(now, c),
        }
    }

    pub fn set_weight(&self, now: impl Fn() -> Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                let at = now();
                s.note(SchedEvent::SetWeight { at, group: c, weight: w });
                s.sched.set_weight(at, c, w)
            }
            Host::DwrrRr(d) => d.set_weight(c, w),
            Host::DwrrCfs(d) => d.set_weight(c, w),
            Host::Gdq(g) => g.set_weight(now, c, w),
        }
    }

    /// Report worker `k`'s last slice (if any) and pick its next client,
    /// under one lock acquisition (central) or its own part's lock
    /// (distributed): `None` when it should idle.
    pub fn stop_and_pick(
        &self,
        now: impl Fn() -> Time,
        k: usize,
        prev: Option<Stop>,
    ) -> Result<Option<(ClientId, Time)>, SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                let t = now();
                let cpu = CpuId(k as u32);
                if let Some(p) = prev {
                    s.note(SchedEvent::Stop { at: t, worker: cpu, group: p.client, ran: p.ran, why: p.why });
                    s.sched.stopped(t, cpu, p.client, p.ran, p.why)?;
                }
                let decision = s.sched.pick(t, cpu)?;
                s.note(SchedEvent::Pick { at: t, worker: cpu, decision });
                Ok(match decision {
                    Decision::Run { client, slice } => Some((client, slice)),
                    Decision::Idle => None,
                })
            }
            Host::DwrrRr(d) => d.stop_and_pick(k, prev),
            Host::DwrrCfs(d) => d.stop_and_pick(k, prev),
            Host::Gdq(g) => g.stop_and_pick(now, k, prev),
        }
    }
}

impl Host {
    /// The calls recorded so far (empty unless recording).
    pub fn recorded(&self) -> Vec<SchedEvent> {
        match self {
            Host::Central(s) => lock(s).log.clone().unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

/// The central lock. A scheduler call that panicked (a core bug) poisons
/// it; the runtime has already failed by then (the worker's catch), so
/// the state is only read to shut down.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
