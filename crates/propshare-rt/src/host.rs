//! The scheduler behind its locks: which lock each event takes.
//!
//! * **Central** (every registry scheduler, DWRR too with
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
//! GDQ has a per-CPU split in progress elsewhere; here it runs central.
//! No user code runs while any of these locks is held (the worker runs
//! tasks between `stop_and_pick` calls).

use std::sync::Mutex;

use crossbeam_utils::CachePadded;
use propshare::algo::dwrr::{
    self, CpuPart, DwrrOptions, DwrrShared, LocalQueue, Locked, RoundRobinQueue, VruntimeQueue,
};
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

/// The scheduler, central or distributed.
pub(crate) enum Host {
    Central(CachePadded<Mutex<Box<dyn Scheduler + Send>>>),
    DwrrRr(Distributed<RoundRobinQueue>),
    DwrrCfs(Distributed<VruntimeQueue>),
}

fn kick(k: propshare::Kick) -> Target {
    k.map_or(Target::Any, |cpu| Target::Kick(cpu.index()))
}

impl Host {
    /// Build `spec` for `workers` CPUs and quantum `slice`; DWRR specs run
    /// distributed unless `central`.
    pub fn build(
        spec: &str,
        workers: usize,
        slice: Time,
        capacity: usize,
        central: bool,
    ) -> Result<Host, registry::BuildError> {
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
            _ => {
                let sched = registry::build_send(spec, cfg)?;
                Host::Central(CachePadded::new(Mutex::new(sched)))
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
            Host::Central(s) => lock(s).work_conserving(),
            _ => false,
        }
    }

    pub fn join(&self, now: impl Fn() -> Time, c: ClientId, w: Weight) -> Result<Target, SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                s.join(now(), c, w).map(kick)
            }
            Host::DwrrRr(d) => Ok(d.join(c, w)),
            Host::DwrrCfs(d) => Ok(d.join(c, w)),
        }
    }

    pub fn wake(&self, now: impl Fn() -> Time, c: ClientId) -> Result<Target, SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                s.wake(now(), c).map(kick)
            }
            Host::DwrrRr(d) => d.wake(c),
            Host::DwrrCfs(d) => d.wake(c),
        }
    }

    pub fn leave(&self, now: impl Fn() -> Time, c: ClientId) -> Result<(), SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                s.leave(now(), c)
            }
            Host::DwrrRr(d) => d.leave(c),
            Host::DwrrCfs(d) => d.leave(c),
        }
    }

    pub fn set_weight(&self, now: impl Fn() -> Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        match self {
            Host::Central(s) => {
                let mut s = lock(s);
                s.set_weight(now(), c, w)
            }
            Host::DwrrRr(d) => d.set_weight(c, w),
            Host::DwrrCfs(d) => d.set_weight(c, w),
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
                    s.stopped(t, cpu, p.client, p.ran, p.why)?;
                }
                Ok(match s.pick(t, cpu)? {
                    Decision::Run { client, slice } => Some((client, slice)),
                    Decision::Idle => None,
                })
            }
            Host::DwrrRr(d) => d.stop_and_pick(k, prev),
            Host::DwrrCfs(d) => d.stop_and_pick(k, prev),
        }
    }
}

/// The central lock. A scheduler call that panicked (a core bug) poisons
/// it; the runtime has already failed by then (the worker's catch), so
/// the state is only read to shut down.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
