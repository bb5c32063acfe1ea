//! The runtime: builder, groups, workers, shutdown.
//!
//! # A group's life (the wake-up protocol)
//!
//! A group is one scheduler client. Its state word is `IDLE` (not known to
//! the scheduler yet, or blocked there), `ACTIVE` (runnable or running) or
//! `GONE` (left; its id may be reused). Two sides race:
//!
//! * **Spawner** (or a future's waker): push the runnable to the group's
//!   queue, then read the state (both `SeqCst`). If `IDLE`: take the group's
//!   transition lock, and if still `IDLE` set `ACTIVE` and call the
//!   scheduler's `join` (first time) or `wake`, then wake a worker.
//! * **Worker**, at the end of a slice whose group's queue looks empty:
//!   take the transition lock, store `IDLE`, then look at the queue again.
//!   Non-empty: back to `ACTIVE`, the slice ends `Expired`. Empty: the
//!   slice ends `Blocked` (or `Left` if the group is closed and has no task
//!   left), reported to the scheduler *while the transition lock is held*,
//!   so a spawner's `wake` always comes after the scheduler saw the block.
//!
//! Store-then-load on both sides means at least one sees the other: either
//! the worker sees the new task, or the spawner sees `IDLE` and wakes the
//! group. No wake-up is lost, and the scheduler never sees a `wake` of a
//! running client.
//!
//! Locks, always in this order: a group's transition lock, then the
//! scheduler's locks (see [`crate::host`]), then the lag book. Task code
//! runs under none of them.
//!
//! # Parking
//!
//! A worker the scheduler gives nothing marks itself parked, asks once
//! more, and parks ([`crossbeam_utils::sync::Parker`]). A wake-up unparks
//! the worker the scheduler's `Kick` names, the worker a distributed
//! scheduler placed the group on, or any parked worker. With a
//! work-conserving scheduler a parked worker sleeps until unparked; with
//! one that may idle on purpose (DWRR, DFS) it also looks again after one
//! slice while groups are runnable. The contract's "poll idle CPUs after
//! an event that can make work appear" is one rule, [`Shared::poll_idle`]:
//! while more groups are runnable than workers busy, unpark the next
//! parked worker after this one. It runs at each slice end, and, with a
//! work-conserving scheduler, when a worker's pick finds nothing, so the
//! poll goes round until the CPU holding the work is reached (a per-CPU
//! scheduler may have queued it on an idle CPU's runqueue, which only that
//! CPU takes; without the second use, `chaos_loses_no_task` hung under
//! load with eevdf on 4 workers).
//!
//! # Atomics and their orderings
//!
//! `SeqCst` where two sides each store then load (the store-load pairs,
//! where weaker orders let both loads miss both stores):
//!
//! * group `state` against the queue (the wake-up protocol above; the
//!   queue side is SegQueue's `SeqCst` tail CAS in `push` and tail load in
//!   `is_empty`);
//! * `stopping` against the queue: `schedule` pushes then loads
//!   `stopping` (and sweeps); `stop` stores it, then sweeps every queue;
//! * `closed` against the task counts: a spawn counts `submitted`, then
//!   loads `closed` (and `accepting`); a task's end counts itself, then
//!   loads `closed`; `close` stores `closed`, then reads the counts
//!   ([`GroupInner::live`]);
//! * a worker's `parked` against the scheduler's state: the worker stores
//!   `parked`, then picks; a wake-up changes the scheduler, then loads
//!   `parked` (a distributed scheduler's wake and pick may take different
//!   locks, so no lock orders the two);
//! * `busy`, `busy_workers` and `runnable_groups`, which the poll rule
//!   reads against `parked`.
//!
//! `accepting` (its store in `stop`, its second load in a spawn) stays
//! `SeqCst` too, though no pair depends on it: a spawn that races a
//! shutdown is refused, or queued and run, or queued after the drain and
//! swept `Cancelled` (it sees `stopping`, or the final sweep sees it).
//!
//! `Relaxed` everywhere else, each for a stated reason: statistics
//! counters (read only by snapshots, each a monotone count; none decides
//! anything); `kicked`, a hint (seen one task late, a preemption comes one
//! task late); the `stopping` load between tasks and the first `accepting`
//! load in a spawn (early exits; the `SeqCst` loads above decide);
//! `weight`, `joined`, `runnable_since` and `on_worker`, whose writer and
//! reader are ordered by a lock both take (the transition lock, the lag
//! book, or the scheduler lock between one worker's slice end and the
//! next worker's pick of that group).
//!
//! # Per-task cost
//!
//! A task costs its async-task allocation, one `Arc` clone of its group
//! (dropped on the worker in batches: [`crate::task`]'s `Meta`), a
//! SegQueue push and pop, the `submitted` count (the spawner's cache line)
//! and the end count (the worker's), async-task's own state changes, and a
//! clock read per batch of tasks, not per task ([`SliceClock`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use crossbeam_utils::sync::{Parker, Unparker};
use crossbeam_utils::CachePadded;
use propshare::{ClientId, StopReason, Time, Weight};

use crate::error::{BuildError, GroupError, SpawnError};
use crate::host::{Host, SchedEvent, Stop, Target};
use crate::lag::{LagBook, LagRange};
use crate::stats::{GroupStats, Snapshot, Totals, WorkerStats};
use crate::task::{self, Deferred, JoinHandle, Runnable};

/// The most workers a runtime may have.
pub const MAX_WORKERS: usize = 1024;

const IDLE: u8 = 0;
const ACTIVE: u8 = 1;
const GONE: u8 = 2;

/// Settings for a [`Runtime`].
#[derive(Clone, Debug)]
pub struct Builder {
    workers: usize,
    scheduler: String,
    slice: Duration,
    max_groups: usize,
    central: bool,
    record: bool,
    track_lag: bool,
    drop_timeout: Duration,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scheduler: "gr3mp".into(),
            slice: Duration::from_millis(1),
            max_groups: 1024,
            central: false,
            record: false,
            track_lag: true,
            drop_timeout: Duration::from_secs(5),
        }
    }
}

impl Builder {
    /// The defaults: one worker per available CPU, `gr3mp`, 1 ms slices,
    /// 1024 group ids, lag tracked, 5 s drop timeout.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Worker threads: the scheduler's CPUs.
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = n;
        self
    }

    /// The scheduler, a registry spec: a name (`"gr3mp"`, `"dwrr"`) or
    /// `name(param=value,...)` (`"gdq(delta=8)"`); `propshare list --params`
    /// lists them.
    pub fn scheduler(mut self, spec: &str) -> Builder {
        self.scheduler = spec.to_string();
        self
    }

    /// The scheduler's quantum: how long a worker serves one group before
    /// it asks again (1 µs to 10 s).
    pub fn slice(mut self, slice: Duration) -> Builder {
        self.slice = slice;
        self
    }

    /// How many groups may exist at once (ids of closed, drained groups are
    /// reused). Distributed schedulers size their owner map by it.
    pub fn max_groups(mut self, n: usize) -> Builder {
        self.max_groups = n;
        self
    }

    /// Run even DWRR and GDQ behind the one central lock (for comparison).
    pub fn central(mut self, yes: bool) -> Builder {
        self.central = yes;
        self
    }

    /// Record every scheduler call, in order, with its arguments and
    /// decisions ([`Runtime::recorded`]), to replay them through the core.
    /// The scheduler runs central (one lock) while recording, so the
    /// recording is one total order. The log grows by a few events per
    /// slice, without bound: for diagnosis, not production.
    pub fn record(mut self, yes: bool) -> Builder {
        self.record = yes;
        self
    }

    /// Keep the fluid reference and per-group lag (one more small lock per
    /// slice; on by default).
    pub fn track_lag(mut self, yes: bool) -> Builder {
        self.track_lag = yes;
        self
    }

    /// How long dropping a runtime that was not shut down waits for workers
    /// to finish the task they are in before it detaches them.
    pub fn drop_timeout(mut self, d: Duration) -> Builder {
        self.drop_timeout = d;
        self
    }

    /// Start the workers.
    pub fn build(self) -> Result<Runtime, BuildError> {
        if self.workers == 0 {
            return Err(BuildError::NoWorkers);
        }
        if self.workers > MAX_WORKERS {
            return Err(BuildError::TooManyWorkers(self.workers));
        }
        if self.slice < Duration::from_micros(1) || self.slice > Duration::from_secs(10) {
            return Err(BuildError::BadSlice(self.slice));
        }
        if self.max_groups == 0 || self.max_groups > propshare::MAX_CLIENT_ID as usize + 1 {
            return Err(BuildError::BadMaxGroups(self.max_groups));
        }
        let slice = self.slice.as_nanos() as Time;
        let host = Host::build(&self.scheduler, self.workers, slice, self.max_groups, self.central, self.record)?;
        let parkers: Vec<Parker> = (0..self.workers).map(|_| Parker::new()).collect();
        let shared = Arc::new(Shared {
            work_conserving: host.work_conserving(),
            host,
            spec: self.scheduler.clone(),
            start: Instant::now(),
            slice,
            workers: parkers
                .iter()
                .map(|p| {
                    CachePadded::new(WorkerSlot {
                        unparker: p.unparker().clone(),
                        parked: AtomicBool::new(false),
                        busy: AtomicBool::new(false),
                        kicked: Arc::new(AtomicBool::new(false)),
                        picks: AtomicU64::new(0),
                        pick_ns: AtomicU64::new(0),
                        tasks: AtomicU64::new(0),
                        cpu_ns: AtomicU64::new(0),
                    })
                })
                .collect(),
            slots: (0..self.max_groups).map(|_| Mutex::new(None)).collect(),
            free: Mutex::new((0..self.max_groups as u32).rev().collect()),
            retired: Mutex::new(Vec::new()),
            lag: self.track_lag.then(|| Mutex::new(LagBook::new(self.workers, self.max_groups))),
            runnable_groups: AtomicUsize::new(0),
            busy_workers: AtomicUsize::new(0),
            accepting: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            failure: Mutex::new(None),
            exited: (Mutex::new(0), Condvar::new()),
        });
        let mut threads = Vec::with_capacity(self.workers);
        for (k, parker) in parkers.into_iter().enumerate() {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("propshare-rt-{k}"))
                .spawn(move || worker_main(sh, k, parker))
                .map_err(|source| BuildError::Thread { index: k, source });
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let mut rt = Runtime { shared, threads, drop_timeout: self.drop_timeout };
                    rt.stop(false, None);
                    return Err(e);
                }
            }
        }
        Ok(Runtime { shared, threads, drop_timeout: self.drop_timeout })
    }
}

/// One worker's public face: how to wake it, what it is doing, its counters.
struct WorkerSlot {
    unparker: Unparker,
    parked: AtomicBool,
    busy: AtomicBool,
    kicked: Arc<AtomicBool>,
    picks: AtomicU64,
    pick_ns: AtomicU64,
    tasks: AtomicU64,
    cpu_ns: AtomicU64,
}

/// What the runtime, its groups and its workers share.
pub(crate) struct Shared {
    host: Host,
    work_conserving: bool,
    spec: String,
    start: Instant,
    slice: Time,
    workers: Box<[CachePadded<WorkerSlot>]>,
    /// Live groups by client id.
    slots: Box<[Mutex<Option<Arc<GroupInner>>>]>,
    free: Mutex<Vec<u32>>,
    /// Groups that left, kept for their statistics.
    retired: Mutex<Vec<Arc<GroupInner>>>,
    lag: Option<Mutex<LagBook>>,
    runnable_groups: AtomicUsize,
    busy_workers: AtomicUsize,
    accepting: AtomicBool,
    stopping: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Workers that have returned, and a signal for each.
    exited: (Mutex<usize>, Condvar),
}

impl Shared {
    fn now(&self) -> Time {
        self.start.elapsed().as_nanos() as Time
    }

    fn lag(&self) -> Option<MutexGuard<'_, LagBook>> {
        self.lag.as_ref().map(|m| lock(m))
    }

    fn group(&self, c: ClientId) -> Option<Arc<GroupInner>> {
        lock(&self.slots[c.index()]).clone()
    }

    /// Fail-stop: a scheduler error or panic is a bug in the core or here;
    /// stop accepting, stop the workers, keep the first reason.
    fn fail(&self, why: String) {
        lock(&self.failure).get_or_insert(why);
        self.accepting.store(false, SeqCst);
        self.stopping.store(true, SeqCst);
        self.unpark_all();
    }

    fn unpark_all(&self) {
        for w in self.workers.iter() {
            w.unparker.unpark();
        }
    }

    fn unpark(&self, k: usize) -> bool {
        let w = &self.workers[k];
        if w.parked.load(SeqCst) && w.parked.swap(false, SeqCst) {
            w.unparker.unpark();
            true
        } else {
            false
        }
    }

    fn unpark_any(&self) {
        for k in 0..self.workers.len() {
            if self.unpark(k) {
                return;
            }
        }
    }

    /// The contract's "poll idle CPUs after an event that can make work
    /// appear", for worker `from`: while more groups are runnable than
    /// workers are busy, some runnable group is on no worker, so unpark the
    /// first parked worker after `from`, cyclically. Called at each slice
    /// end (the group this worker stopped, or one its pick moved, may be
    /// runnable and not running), and by a worker whose pick found nothing
    /// (see [`worker_loop`]): the woken worker either takes the work or,
    /// finding nothing itself, polls the next, so the poll goes round the
    /// parked workers until it reaches the one whose CPU holds the work,
    /// and stops there (runnable ≤ busy again).
    fn poll_idle(&self, from: usize) {
        if self.runnable_groups.load(SeqCst) > self.busy_workers.load(SeqCst) {
            let n = self.workers.len();
            for j in (1..n).map(|i| (from + i) % n) {
                if self.unpark(j) {
                    return;
                }
            }
        }
    }

    /// Reach the worker a wake-up is for.
    fn notify(&self, t: Target) {
        match t {
            Target::Kick(k) => {
                if !self.unpark(k) {
                    self.workers[k].kicked.store(true, Relaxed);
                    self.unpark_any();
                }
            }
            Target::Placed(k) => {
                self.unpark(k);
            }
            Target::Any => self.unpark_any(),
        }
    }

    /// Every worker idle and every queue empty (for `shutdown_drain`).
    fn quiescent(&self) -> bool {
        self.workers.iter().all(|w| !w.busy.load(SeqCst))
            && self.slots.iter().all(|s| lock(s).as_ref().is_none_or(|g| g.queue.is_empty()))
    }

    fn all_groups(&self) -> Vec<Arc<GroupInner>> {
        let mut out: Vec<Arc<GroupInner>> = lock(&self.retired).clone();
        out.extend(self.slots.iter().filter_map(|s| lock(s).clone()));
        out
    }

    fn retire(&self, g: &Arc<GroupInner>) {
        *lock(&self.slots[g.id.index()]) = None;
        lock(&self.retired).push(g.clone());
        lock(&self.free).push(g.id.0);
    }
}

/// A group's scheduler bookkeeping, under its transition lock.
struct Transition {
    joined: bool,
}

/// Per-group counters written by the worker serving the group (per slice,
/// and per task for `completed` and `panicked`), kept on cache lines of
/// their own ([`GroupInner::m`]) so a spawner's writes (`submitted`) and
/// reads (`state`, `closed`) do not bounce them.
#[derive(Default)]
struct Counters {
    completed: AtomicU64,
    panicked: AtomicU64,
    cancelled: AtomicU64,
    cpu_ns: AtomicU64,
    run_ns: AtomicU64,
    wait_ns: AtomicU64,
    slices: AtomicU64,
    overlaps: AtomicU64,
    runnable_since: AtomicU64,
    on_worker: AtomicBool,
}

/// A group: one scheduler client with its queue of ready tasks.
pub(crate) struct GroupInner {
    id: ClientId,
    name: String,
    shared: Arc<Shared>,
    queue: SegQueue<Runnable>,
    state: AtomicU8,
    transition: Mutex<Transition>,
    closed: AtomicBool,
    weight: AtomicU64,
    /// Tasks accepted, on a line of its own: spawners write it, and
    /// nothing else does per task. A task's end is counted only on the
    /// worker's side (`m`), so no counter is written by both sides per
    /// task; tasks live = submitted - ended ([`GroupInner::live`]).
    submitted: CachePadded<AtomicU64>,
    /// `Transition::joined`, readable without the lock (statistics read it
    /// while holding the lag book, which comes after the transition lock).
    joined: AtomicBool,
    m: CachePadded<Counters>,
}

impl GroupInner {
    /// A new or woken task is ready (async-task's schedule hook,
    /// [`task`]'s `schedule`).
    pub(crate) fn schedule(self: &Arc<Self>, r: Runnable) {
        self.queue.push(r);
        if self.shared.stopping.load(SeqCst) {
            self.sweep();
        } else if self.state.load(SeqCst) == IDLE {
            self.activate();
        }
    }

    /// IDLE → ACTIVE: join or wake in the scheduler, wake a worker.
    fn activate(self: &Arc<Self>) {
        let sh = &self.shared;
        let mut t = lock(&self.transition);
        match self.state.load(SeqCst) {
            IDLE => {}
            GONE => {
                drop(t);
                self.sweep();
                return;
            }
            _ => return,
        }
        self.state.store(ACTIVE, SeqCst);
        sh.runnable_groups.fetch_add(1, SeqCst);
        let now = || sh.now();
        self.m.runnable_since.store(now(), Relaxed);
        let w = Weight::new(self.weight.load(Relaxed)).expect("weights are checked when set");
        let target = if t.joined {
            let r = sh.host.wake(now, self.id);
            if let Some(mut l) = sh.lag() {
                l.wake(self.id);
            }
            r
        } else {
            t.joined = true;
            self.joined.store(true, Relaxed);
            let r = sh.host.join(now, self.id, w);
            if let Some(mut l) = sh.lag() {
                l.join(self.id, w);
            }
            r
        };
        drop(t);
        match target {
            Ok(t) => sh.notify(t),
            Err(e) => sh.fail(format!("group {:?}: the scheduler refused its wake-up: {e}", self.name)),
        }
    }

    /// Drop every queued runnable: each such task resolves `Cancelled`.
    fn sweep(&self) {
        while let Some(r) = self.queue.pop() {
            drop(r);
        }
    }

    pub(crate) fn count_finished(&self, ok: bool) {
        if ok { &self.m.completed } else { &self.m.panicked }.fetch_add(1, SeqCst);
    }

    pub(crate) fn count_cancelled(&self) {
        self.m.cancelled.fetch_add(1, SeqCst);
    }

    /// A task ended (any way, counted just before): the last one of a
    /// closed group retires it.
    pub(crate) fn task_gone(self: &Arc<Self>) {
        if self.closed.load(SeqCst) && self.live() == 0 {
            self.try_retire();
        }
    }

    /// Tasks accepted and not ended yet (queued, running, or pending
    /// futures): `submitted` less the ends. Exact when it reads 0: the
    /// ends are read first, then `submitted`, each counter only grows
    /// (but `submitted`, undone by a refused spawn that never ends), and a
    /// task's end is counted after its `submitted`, so ends read ≤ ends at
    /// the `submitted` read ≤ `submitted` then; equal means none was live
    /// at that instant. A closed group with none live stays so (spawns are
    /// refused once `closed` is seen, and a refused one undoes its count).
    /// The zero is seen by someone (`SeqCst` on both sides): the last task
    /// to end counts its end, then loads `closed`; `close` stores `closed`,
    /// then reads the counts.
    fn live(&self) -> u64 {
        let m = &self.m;
        let ended = m.completed.load(SeqCst) + m.panicked.load(SeqCst) + m.cancelled.load(SeqCst);
        self.submitted.load(SeqCst).saturating_sub(ended)
    }

    /// A closed group with no task left, blocked in the scheduler (or
    /// never joined), leaves it. One that is active leaves at its
    /// worker's next slice end instead.
    fn try_retire(self: &Arc<Self>) {
        let sh = &self.shared;
        let t = lock(&self.transition);
        if self.state.load(SeqCst) != IDLE || !self.closed.load(SeqCst) || self.live() != 0 {
            return;
        }
        self.state.store(GONE, SeqCst);
        if t.joined && !sh.stopping.load(SeqCst) {
            if let Err(e) = sh.host.leave(|| sh.now(), self.id) {
                drop(t);
                sh.fail(format!("group {:?}: the scheduler refused its departure: {e}", self.name));
                return;
            }
            if let Some(mut l) = sh.lag() {
                l.leave(self.id, false);
            }
        }
        drop(t);
        sh.retire(self);
    }

    fn stats(&self, lag: Option<&mut LagBook>) -> GroupStats {
        let m = &self.m;
        let state = self.state.load(Relaxed);
        let (lag_ns, range, rate) = match lag {
            Some(l) if state != GONE && self.joined.load(Relaxed) => {
                (l.lag(self.id), l.range(self.id), l.rate(self.id))
            }
            _ => (0, LagRange::default(), (0, 1)),
        };
        GroupStats {
            id: self.id.0,
            name: self.name.clone(),
            weight: self.weight.load(Relaxed),
            closed: self.closed.load(Relaxed),
            retired: state == GONE,
            submitted: self.submitted.load(Relaxed),
            completed: m.completed.load(Relaxed),
            panicked: m.panicked.load(Relaxed),
            cancelled: m.cancelled.load(Relaxed),
            live: self.live(),
            queue_len: self.queue.len(),
            cpu_ns: m.cpu_ns.load(Relaxed),
            run_ns: m.run_ns.load(Relaxed),
            wait_ns: m.wait_ns.load(Relaxed),
            slices: m.slices.load(Relaxed),
            overlaps: m.overlaps.load(Relaxed),
            lag_ns,
            max_lag_ns: range.max,
            min_lag_ns: range.min,
            ideal_rate: rate,
        }
    }
}

/// A handle to one group (tenant): spawn work into it, change its weight,
/// close it. Cheap to clone; all clones name the same group.
#[derive(Clone)]
pub struct Group {
    inner: Arc<GroupInner>,
}

impl Group {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its client id in the scheduler.
    pub fn id(&self) -> u32 {
        self.inner.id.0
    }

    /// Run closure `f` once, in this group. A panic in `f` is caught and
    /// reported at the handle.
    pub fn spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_future(async move { f() })
    }

    /// Run future `fut` to completion in this group: it is polled on this
    /// group's slices and yields at its await points.
    pub fn spawn_future<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let g = &self.inner;
        let sh = &g.shared;
        if !sh.accepting.load(Relaxed) {
            return Err(SpawnError::ShuttingDown);
        }
        // Counted before `closed` is checked (see `GroupInner::live`), and
        // undone if refused.
        g.submitted.fetch_add(1, SeqCst);
        let refused = if g.closed.load(SeqCst) {
            Some(SpawnError::Closed(g.name.clone()))
        } else if !sh.accepting.load(SeqCst) {
            Some(SpawnError::ShuttingDown)
        } else {
            None
        };
        if let Some(e) = refused {
            g.submitted.fetch_sub(1, SeqCst);
            g.task_gone();
            return Err(e);
        }
        let (runnable, handle) = task::spawn(g.clone(), fut);
        // Straight to the queue: `g` is alive here, so no waker need keep
        // the task alive meanwhile (as async-task's `schedule` path does).
        g.schedule(runnable);
        Ok(handle)
    }

    /// Change its weight (takes effect at the scheduler at once; the fluid
    /// reference is readjusted at the same instant).
    pub fn set_weight(&self, weight: u64) -> Result<(), GroupError> {
        let g = &self.inner;
        let sh = &g.shared;
        let w = Weight::new(weight).map_err(|source| GroupError::Weight { group: g.name.clone(), source })?;
        let t = lock(&g.transition);
        if g.state.load(SeqCst) == GONE {
            return Err(GroupError::Closed(g.name.clone()));
        }
        g.weight.store(w.get(), Relaxed);
        if t.joined && !sh.stopping.load(SeqCst) {
            if let Err(e) = sh.host.set_weight(|| sh.now(), g.id, w) {
                drop(t);
                sh.fail(format!("group {:?}: the scheduler refused a weight change: {e}", g.name));
                return Err(GroupError::ShuttingDown);
            }
            if let Some(mut l) = sh.lag() {
                l.set_weight(g.id, w);
            }
        }
        Ok(())
    }

    /// Stop accepting spawns (they return [`SpawnError::Closed`]); tasks
    /// already spawned still run. The group leaves the scheduler when its
    /// last task ends, and its id is reused.
    pub fn close(&self) {
        self.inner.closed.store(true, SeqCst);
        self.inner.try_retire();
    }

    /// Close, and cancel every task still queued (their handles resolve
    /// [`crate::JoinError::Cancelled`]). Tasks running now finish; futures
    /// waiting for an event run when woken.
    pub fn close_cancel(&self) {
        self.close();
        self.inner.sweep();
    }

    /// This group's statistics now.
    pub fn stats(&self) -> GroupStats {
        let sh = &self.inner.shared;
        let mut l = sh.lag();
        self.inner.stats(l.as_deref_mut())
    }
}

/// A weighted-fair task runtime: `workers` threads serve groups in the
/// proportions of their weights, as the chosen scheduler decides.
///
/// Dropping a runtime that was not shut down is `shutdown_cancel`, except
/// that it waits at most [`Builder::drop_timeout`] for workers to finish
/// the task they are in, then leaves any still running detached (it never
/// waits for ever on a task that does not return).
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
    drop_timeout: Duration,
}

impl Runtime {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A new group `name` with weight `weight` (1 ..= 2^32-1).
    pub fn group(&self, name: &str, weight: u64) -> Result<Group, GroupError> {
        let sh = &self.shared;
        let w = Weight::new(weight).map_err(|source| GroupError::Weight { group: name.into(), source })?;
        if !sh.accepting.load(SeqCst) {
            return Err(GroupError::ShuttingDown);
        }
        let Some(id) = lock(&sh.free).pop() else {
            return Err(GroupError::TooManyGroups { group: name.into(), max: sh.slots.len() });
        };
        let inner = Arc::new(GroupInner {
            id: ClientId(id),
            name: name.to_string(),
            shared: sh.clone(),
            queue: SegQueue::new(),
            state: AtomicU8::new(IDLE),
            transition: Mutex::new(Transition { joined: false }),
            closed: AtomicBool::new(false),
            weight: AtomicU64::new(w.get()),
            submitted: CachePadded::new(AtomicU64::new(0)),
            joined: AtomicBool::new(false),
            m: CachePadded::new(Counters::default()),
        });
        *lock(&sh.slots[id as usize]) = Some(inner.clone());
        Ok(Group { inner })
    }

    /// The scheduler spec it runs.
    pub fn scheduler(&self) -> &str {
        &self.shared.spec
    }

    /// "central" (one scheduler lock) or "distributed" (one per worker).
    pub fn locking(&self) -> &'static str {
        self.shared.host.locking()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The scheduler calls recorded so far, in order (empty unless
    /// [`Builder::record`]).
    pub fn recorded(&self) -> Vec<SchedEvent> {
        self.shared.host.recorded()
    }

    /// Every group's statistics (retired ones too) and the totals, now.
    pub fn snapshot(&self) -> Snapshot {
        snapshot(&self.shared)
    }

    /// Per-worker counters: scheduler calls and the time spent in them.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        self.shared
            .workers
            .iter()
            .map(|w| WorkerStats {
                picks: w.picks.load(Relaxed),
                pick_ns: w.pick_ns.load(Relaxed),
                tasks: w.tasks.load(Relaxed),
                cpu_ns: w.cpu_ns.load(Relaxed),
            })
            .collect()
    }

    /// Stop accepting spawns, run every queued task (and every task they
    /// make ready meanwhile) until the queues are empty and the workers
    /// idle, then stop the workers. A future still waiting for an outside
    /// event then is cancelled if that event ever wakes it.
    pub fn shutdown_drain(mut self) -> Snapshot {
        self.stop(true, None)
    }

    /// Stop accepting spawns, let each worker finish the task it is in,
    /// stop the workers, and cancel every queued task (its handle resolves
    /// `Cancelled`).
    pub fn shutdown_cancel(mut self) -> Snapshot {
        self.stop(false, None)
    }

    fn stop(&mut self, drain: bool, timeout: Option<Duration>) -> Snapshot {
        let sh = self.shared.clone();
        sh.accepting.store(false, SeqCst);
        if drain {
            while !sh.stopping.load(SeqCst) && !sh.quiescent() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        sh.stopping.store(true, SeqCst);
        sh.unpark_all();
        let n = self.threads.len();
        let (m, cv) = &sh.exited;
        let mut done = lock(m);
        let deadline = timeout.map(|t| Instant::now() + t);
        while *done < n {
            match deadline {
                None => done = cv.wait(done).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    done = cv.wait_timeout(done, left).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
        let all_exited = *done == n;
        drop(done);
        for t in self.threads.drain(..) {
            if all_exited {
                let _ = t.join();
            }
        }
        // Cancel what is queued; anything scheduled from now on is swept by
        // its own `schedule` (it sees `stopping`).
        let groups = sh.all_groups();
        for g in &groups {
            g.sweep();
        }
        let snap = snapshot(&sh);
        // Break the cycle group → runtime → slots → group.
        for s in sh.slots.iter() {
            lock(s).take();
        }
        lock(&sh.retired).clear();
        snap
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop(false, Some(self.drop_timeout));
        }
    }
}

fn snapshot(sh: &Shared) -> Snapshot {
    let groups = sh.all_groups();
    let mut lag = sh.lag();
    let mut stats: Vec<GroupStats> = groups.iter().map(|g| g.stats(lag.as_deref_mut())).collect();
    stats.sort_by_key(|g| (g.retired, g.id));
    let mut totals = Totals::default();
    for g in &stats {
        totals.submitted += g.submitted;
        totals.completed += g.completed;
        totals.panicked += g.panicked;
        totals.cancelled += g.cancelled;
        totals.live += g.live;
        totals.cpu_ns += g.cpu_ns;
    }
    Snapshot {
        elapsed: sh.start.elapsed(),
        scheduler: sh.spec.clone(),
        locking: sh.host.locking(),
        workers: sh.workers.len(),
        slice_ns: sh.slice,
        fluid_clock_ns: lag.as_ref().map_or(0, |l| l.clock()),
        groups: stats,
        totals,
        failure: lock(&sh.failure).clone(),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calling thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> Time {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // every Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as Time * 1_000_000_000 + ts.tv_nsec as Time
}

fn worker_main(sh: Arc<Shared>, k: usize, parker: Parker) {
    task::set_kick_flag(sh.workers[k].kicked.clone());
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker_loop(&sh, k, &parker)));
    if let Err(p) = run {
        let why = p.downcast_ref::<String>().map(String::as_str).or(p.downcast_ref::<&str>().copied());
        sh.fail(format!("worker {k} panicked (a runtime or scheduler bug): {}", why.unwrap_or("?")));
    }
    if sh.workers[k].busy.swap(false, SeqCst) {
        sh.busy_workers.fetch_sub(1, SeqCst);
    }
    let (m, cv) = &sh.exited;
    *lock(m) += 1;
    cv.notify_all();
}

/// Ask the scheduler, timing the call.
fn stop_and_pick(sh: &Shared, k: usize, prev: Option<Stop>) -> Option<(ClientId, Time)> {
    let w = &sh.workers[k];
    let t0 = Instant::now();
    let r = sh.host.stop_and_pick(|| sh.now(), k, prev);
    w.pick_ns.fetch_add(t0.elapsed().as_nanos() as u64, Relaxed);
    w.picks.fetch_add(1, Relaxed);
    match r {
        Ok(p) => p,
        Err(e) => {
            sh.fail(format!("worker {k}: the scheduler refused a stop or pick: {e}"));
            None
        }
    }
}

fn set_busy(sh: &Shared, k: usize, busy: bool) {
    if sh.workers[k].busy.swap(busy, SeqCst) != busy {
        if busy {
            sh.busy_workers.fetch_add(1, SeqCst);
        } else {
            sh.busy_workers.fetch_sub(1, SeqCst);
        }
    }
}

fn worker_loop(sh: &Shared, k: usize, parker: &Parker) {
    let slot = &sh.workers[k];
    let mut next = stop_and_pick(sh, k, None);
    while !sh.stopping.load(SeqCst) {
        match next {
            Some((c, slice)) => {
                set_busy(sh, k, true);
                let Some(g) = sh.group(c) else {
                    sh.fail(format!("worker {k}: the scheduler picked client {} that is no group", c.0));
                    return;
                };
                next = serve(sh, k, &g, slice);
                sh.poll_idle(k);
            }
            None => {
                set_busy(sh, k, false);
                slot.parked.store(true, SeqCst);
                next = stop_and_pick(sh, k, None);
                if next.is_some() || sh.stopping.load(SeqCst) {
                    slot.parked.store(false, SeqCst);
                    continue;
                }
                // Work this worker cannot take may sit on another idle CPU's
                // queue (a per-CPU scheduler such as cfs or eevdf placed it
                // there, or balanced it there): pass the poll on. Not for a
                // scheduler that may idle a CPU on purpose (DWRR, DFS): the
                // poll would go round for ever while it holds work back;
                // its parked workers look again after one slice instead.
                if sh.work_conserving {
                    sh.poll_idle(k);
                }
                if sh.work_conserving || sh.runnable_groups.load(SeqCst) == 0 {
                    parker.park();
                } else {
                    parker.park_timeout(Duration::from_nanos(sh.slice));
                }
                slot.parked.store(false, SeqCst);
                slot.kicked.store(false, Relaxed);
                next = stop_and_pick(sh, k, None);
            }
        }
    }
}

/// When a slice's deadline is looked at: after every task at first, and
/// after twice as many tasks each time the tasks since the last look took
/// less than 1/[`SliceClock::FINE`] of the slice, up to every
/// [`SliceClock::MAX_STRIDE`] tasks; back to every task once a batch took
/// longer. Tiny tasks so pay one clock read per up to 64 tasks instead of
/// one each, and the slice overruns its deadline by at most the batch
/// being run when it passed: under 1/32 of the slice if tasks take as long
/// as those of the batch before (the stride only doubled because that one
/// took under 1/64), and otherwise at most 63 tasks more than a clock read
/// after every task would allow. (Tasks that call `need_yield()` read the
/// clock themselves.)
struct SliceClock {
    last: Instant,
    fine: Duration,
    stride: u32,
    left: u32,
}

impl SliceClock {
    const FINE: u32 = 64;
    const MAX_STRIDE: u32 = 64;

    fn new(start: Instant, slice: Time) -> SliceClock {
        SliceClock { last: start, fine: Duration::from_nanos(slice / Self::FINE as u64), stride: 1, left: 1 }
    }

    /// One task ran: is the deadline past (looked at only when a batch ends)?
    fn expired(&mut self, deadline: Instant) -> bool {
        self.left -= 1;
        if self.left > 0 {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        self.stride = if now - self.last < self.fine { (self.stride * 2).min(Self::MAX_STRIDE) } else { 1 };
        self.left = self.stride;
        self.last = now;
        false
    }
}

/// Run one slice of group `g` on worker `k`, report it, pick the next.
fn serve(sh: &Shared, k: usize, g: &Arc<GroupInner>, slice: Time) -> Option<(ClientId, Time)> {
    let slot = &sh.workers[k];
    if g.m.on_worker.swap(true, Relaxed) {
        g.m.overlaps.fetch_add(1, Relaxed);
    }
    let t0 = Instant::now();
    let cpu0 = thread_cpu_ns();
    let started = (t0 - sh.start).as_nanos() as Time;
    g.m.wait_ns.fetch_add(started.saturating_sub(g.m.runnable_since.load(Relaxed)), Relaxed);
    let deadline = t0 + Duration::from_nanos(slice);
    task::set_deadline(Some(deadline));
    let mut tasks = 0;
    let mut clock = SliceClock::new(t0, slice);
    Deferred::start();
    while let Some(r) = g.queue.pop() {
        // User panics are caught inside the task; this catches only a
        // panic in dropping its output or the like, so the worker goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.run()));
        tasks += 1;
        if slot.kicked.load(Relaxed) || sh.stopping.load(Relaxed) || clock.expired(deadline) {
            break;
        }
    }
    task::set_deadline(None);
    Deferred::flush(true);
    let ran = thread_cpu_ns().saturating_sub(cpu0);
    let wall = t0.elapsed().as_nanos() as Time;
    let kicked = slot.kicked.swap(false, Relaxed);
    g.m.on_worker.store(false, Relaxed);
    slot.tasks.fetch_add(tasks, Relaxed);
    slot.cpu_ns.fetch_add(ran, Relaxed);
    g.m.cpu_ns.fetch_add(ran, Relaxed);
    g.m.run_ns.fetch_add(wall, Relaxed);
    g.m.slices.fetch_add(1, Relaxed);

    // The idle handshake (module doc): decide Expired / Blocked / Left.
    let mut guard = None;
    let why = if !g.queue.is_empty() {
        if kicked {
            StopReason::Preempted
        } else {
            StopReason::Expired
        }
    } else {
        let t = lock(&g.transition);
        g.state.store(IDLE, SeqCst);
        if !g.queue.is_empty() {
            g.state.store(ACTIVE, SeqCst);
            StopReason::Expired
        } else {
            let left = g.closed.load(SeqCst) && g.live() == 0;
            if left {
                g.state.store(GONE, SeqCst);
            }
            guard = Some(t);
            if left {
                StopReason::Left
            } else {
                StopReason::Blocked
            }
        }
    };
    if let Some(mut l) = sh.lag() {
        l.charge(g.id, ran);
        match why {
            StopReason::Blocked => l.block(g.id),
            StopReason::Left => l.leave(g.id, true),
            _ => {}
        }
    }
    if why.still_runnable() {
        g.m.runnable_since.store(sh.now(), Relaxed);
    } else {
        sh.runnable_groups.fetch_sub(1, SeqCst);
    }
    let next = stop_and_pick(sh, k, Some(Stop { client: g.id, ran, why }));
    drop(guard);
    if why == StopReason::Left {
        sh.retire(g);
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stride doubles while batches are short, up to its cap, goes back
    /// to 1 after a long batch, and a past deadline is seen at the next
    /// batch end.
    #[test]
    fn slice_clock_stride_adapts() {
        // A 10 s slice: "short" is under 156 ms, which a few calls are.
        let slice = 10_000_000_000;
        let start = Instant::now();
        let far = start + Duration::from_secs(3600);
        let mut c = SliceClock::new(start, slice);
        let mut strides = Vec::new();
        for _ in 0..1000 {
            assert!(!c.expired(far));
            strides.push(c.stride);
        }
        strides.dedup();
        assert_eq!(strides, [2, 4, 8, 16, 32, 64], "doubling up to the cap");
        // Finish the current batch after a long pause: back to 1.
        std::thread::sleep(Duration::from_millis(200));
        while c.left > 1 {
            assert!(!c.expired(far));
        }
        assert!(!c.expired(far));
        assert_eq!(c.stride, 1, "a batch longer than slice/64 resets the stride");
        // A deadline already past: seen when the batch (of 1) ends.
        assert!(c.expired(start));
    }

    /// The group references the finished tasks held are dropped by the
    /// end of their slice (deferred, not leaked): once every task ended
    /// and the worker is idle, only the handle and the runtime's slot hold
    /// the group.
    #[test]
    fn deferred_group_references_are_released_at_the_slice_end() {
        let rt = Runtime::builder().workers(2).track_lag(false).build().unwrap();
        let g = rt.group("g", 1).unwrap();
        let hs: Vec<_> = (0..10_000u64).map(|i| g.spawn(move || i).unwrap()).collect();
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i as u64);
        }
        let t = Instant::now();
        while Arc::strong_count(&g.inner) != 2 || !rt.shared.quiescent() {
            assert!(t.elapsed() < Duration::from_secs(20), "{} references left", Arc::strong_count(&g.inner));
            std::thread::sleep(Duration::from_millis(1));
        }
        // Detached tasks: freed on the worker, inside the slice.
        for i in 0..10_000u64 {
            drop(g.spawn(move || i).unwrap());
        }
        let t = Instant::now();
        while Arc::strong_count(&g.inner) != 2 || !rt.shared.quiescent() {
            assert!(t.elapsed() < Duration::from_secs(20), "{} references left", Arc::strong_count(&g.inner));
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(rt.shutdown_drain().totals.completed, 20_000);
    }
}
