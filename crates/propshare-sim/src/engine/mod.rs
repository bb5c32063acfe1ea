//! The discrete-event engine.
//!
//! Along the data path: `workload` (what is simulated: [`ClientSpec`],
//! [`ChainSpec`], [`SimConfig`]), `events` (the event queues), `event_loop`
//! (the loop: events, picks, stops, the books), `client` (a client's state
//! during a run), `lag` (lag and service-error sampling, the band grid),
//! `windows` (measurement windows and windowed lag), `trace` ([`TraceEvent`])
//! and `stats` (what a run reports: [`SimReport`]).
//!
//! # Time and order
//!
//! Time is integer ns. Events at the same instant are handled in a fixed
//! order, which makes every run deterministic:
//!
//! 1. client events (arrival, departure, weight change, wake-up), in the
//!    order they were scheduled;
//! 2. CPU events (a slice or a run phase ends), in the order those runs
//!    were started (CPU order when quanta are synchronous); each CPU that
//!    stops asks the scheduler for its next client at once, while the other
//!    CPUs still hold their clients (so CPU 0 decides before CPU 1 has
//!    released its client, as a processor reaching its quantum end first
//!    would in the papers);
//! 3. CPU starts (offsets), then lag samples on the grid;
//! 4. every idle CPU is polled, in CPU order.
//!
//! A CPU with an initial offset (asynchronous quanta) starts polling at its
//! offset. A kick returned by `join`/`wake` preempts that CPU's client.
//!
//! # Finite work and chains
//!
//! A client with `work` leaves the moment it has received that much CPU
//! time: its runs are cut to the work left, and the run that completes it
//! stops with [`StopReason::Left`]. A chain ([`ChainSpec`], the SFS paper's
//! short tasks of section 4.3) runs members one at a time: when a member
//! leaves (its work done, or its lifetime over), the next member is created
//! and joins within the handling of that departure, at the same instant and
//! before anything else happens then (a CPU freed by the departure picks
//! afterwards). The fluid reference is told of every join and departure as
//! the scheduler is, so each member's ideal service is its own fluid share
//! over its own lifetime.
//!
//! # Cost
//!
//! Events known at the start (arrivals, departures, weight changes, CPU
//! starts) are sorted once and read in order; wake-ups and grid samples go
//! to a binary heap; run ends go to a FIFO when they come in time order (runs
//! of equal length: the common case, O(1)) and to a small heap of at most
//! P entries otherwise. Idle CPUs are a bitset. A quantum therefore costs
//! O(1) in the engine plus the scheduler's `stopped` and `pick` and two lag
//! samples (O(1) each, [`crate::fluid`]); client events cost O(P + log N)
//! in the fluid reference. Memory per client is a few hundred bytes
//! (`propshare bench-sim` reports it at a million clients). A one-CPU run
//! of a static set (the GR3 paper's S1/S2 sweep) leaves the queues after its
//! first instant for a fast path with the same numbers (`fast.rs`): about
//! 1.25x faster per quantum.
//!
//! # Metrics
//!
//! Per client: service received, ideal service ([`crate::fluid`]), and lag =
//! ideal − received, whose maximum and minimum are exact: while a client
//! waits its lag only grows and while it runs its lag only shrinks (its ideal
//! rate is at most one CPU), so the extremes are reached when it starts or
//! stops running, which is where we sample. It starts when its service
//! starts, after any switch and migration cost, not when it is picked (a
//! sample at the pick read the maximum low by the cost times its rate). The papers' service error
//! e_C = w_C − W_T φ_C/Φ_T (static sets) is sampled at the same points for the
//! same reason.
//!
//! Windowed lag ([`Engine::lag_windows`], the DWRR paper's Fig. 5): for a
//! window length t, the run is cut into windows `[k·t, (k+1)·t)` and each
//! client's lag over a window is the ideal service in it minus the service
//! received in it, i.e. `lag((k+1)·t) − lag(k·t)`. Both ends are read exactly
//! at the window edges (received service in whole ns, ideal in fixed point),
//! so the windows of one length tile the run: their lags sum to the lag at the
//! last edge. The relative error of a window is its lag over its ideal
//! service. Cost: O(N) per edge.

mod client;
mod event_loop;
mod events;
mod fast;
mod groups;
mod lag;
mod reference;
mod stats;
mod trace;
mod windows;
mod workload;

use propshare::{ClientId, SchedError, Scheduler, Time};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::fluid::Fluid;
use client::{SimClient, NONE};
use events::{Event, EventQueue, StopQueue};
use reference::Reference;
use windows::WindowState;

pub use event_loop::WATCH_EVERY;
pub use groups::{flattening_of, GroupSpec, GroupStats, GroupsSpec, LAZY_PREFIX};
pub use stats::{ClientStats, CostHistogram, ServiceStats, SimReport, WindowLag};
pub use trace::TraceEvent;
pub use workload::{Behavior, ChainSpec, ClientSpec, Dist, MemberLeaves, SimConfig};

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scheduler refused a valid event: a scheduler bug.
    #[error("scheduler {scheduler} refused a valid event at t={t} ns: {source}")]
    Refused {
        /// Scheduler.
        scheduler: String,
        /// Time.
        t: Time,
        /// Its error.
        source: SchedError,
    },
    /// The scheduler broke the contract.
    #[error("scheduler {scheduler} broke the contract at t={t} ns: {what}")]
    Contract {
        /// Scheduler.
        scheduler: String,
        /// Time.
        t: Time,
        /// What happened.
        what: String,
    },
    /// Invalid settings.
    #[error("invalid simulation: {0}")]
    Config(String),
    /// Stopped before the horizon by [`Engine::run_watched`]'s watch.
    #[error("run of {scheduler} interrupted at t={t} ns")]
    Interrupted {
        /// Scheduler.
        scheduler: String,
        /// Simulated time reached.
        t: Time,
    },
}

/// The run in progress on a CPU.
#[derive(Clone, Copy, Debug)]
struct Running {
    client: usize,
    /// When service began (after switch costs).
    start: Time,
    generation: u64,
}

/// A simulation in progress.
pub struct Engine<S: Scheduler> {
    sched: S,
    cfg: SimConfig,
    clients: Vec<SimClient>,
    cpus: Vec<Option<Running>>,
    /// Service start of the latest run on each CPU.
    running_start: Vec<Time>,
    /// Client of the latest run on each CPU (NONE: none yet).
    last_on_cpu: Vec<u32>,
    generation: u64,
    queue: EventQueue,
    stops: StopQueue,
    /// Bit k set: CPU k has started and runs nothing (polled at every instant).
    idle_ready: Vec<u64>,
    now: Time,
    fluid: Reference,
    /// Groups, when the run has any ([`Engine::groups`]).
    groups: Option<Box<groups::GroupState>>,
    rng: Pcg64Mcg,
    static_set: bool,
    work_done: Time,
    /// Clients in state Waiting.
    waiting: usize,
    /// CPUs that have started (past their offset) and CPUs running a client.
    ready_cpus: usize,
    busy_cpus: usize,
    /// Σ service start times of the running clients, for `work_now` in O(1).
    start_sum: u128,
    report: SimReport,
    windows: Vec<(Time, Time)>,
    /// CPU time per client and window: client i, window k at `i * windows.len() + k`.
    window_received: Vec<Time>,
    band: Option<(Time, Time)>,
    /// Per client: (grid instants present, instants within the band).
    band_counts: Vec<(u64, u64)>,
    /// Window lengths of the windowed lag, and its state: client i, length j at `i * lengths + j`.
    lag_windows: Vec<Time>,
    window_lag: Vec<WindowState>,
    series_every: Option<Time>,
    /// The clients whose lag is recorded over time, and their series (by slot).
    series_clients: Vec<usize>,
    series: Vec<Vec<(Time, f64)>>,
    cost: Option<CostHistogram>,
    /// Per CPU: ns spent in `pick` for the run in progress (cost measurement).
    pick_cost: Vec<u64>,
    /// The chains, each with the number of members that have joined.
    chains: Vec<(ChainSpec, u64)>,
    /// Whether a one-CPU static run may take the fast path (fast.rs).
    fast_path: bool,
}

impl<S: Scheduler> Engine<S> {
    /// Run these chains of clients as well ([`ChainSpec`]). Their members
    /// are created as they join, after the clients given to [`Engine::new`].
    pub fn chains(&mut self, chains: &[ChainSpec]) -> Result<(), SimError> {
        for ch in chains {
            let (MemberLeaves::AfterWork(t) | MemberLeaves::AfterLifetime(t)) = ch.leaves;
            if t == 0 {
                return Err(SimError::Config(format!("chain {:?}: a member must stay at least 1 ns", ch.prefix)));
            }
            let k = self.chains.len() as u32;
            self.chains.push((ch.clone(), 0));
            self.push(ch.start, Event::ChainStart(k));
            self.static_set = false;
        }
        Ok(())
    }

    /// Never take the one-CPU static fast path (fast.rs): the same run
    /// through the general loop, which the fast path is checked against.
    pub fn general_path_only(&mut self) {
        self.fast_path = false;
    }

    /// Measure the wall-clock cost of every decision (pick plus its `stopped`).
    pub fn measure_cost(&mut self) {
        self.cost = Some(CostHistogram::default());
    }

    /// A simulation of `clients` under `sched` with settings `cfg`.
    pub fn new(sched: S, cfg: SimConfig, clients: Vec<ClientSpec>) -> Result<Engine<S>, SimError> {
        if cfg.cpus == 0 {
            return Err(SimError::Config("the number of CPUs must be at least 1".into()));
        }
        if cfg.quantum == 0 {
            return Err(SimError::Config("the quantum must be at least 1 ns".into()));
        }
        if clients.len() > propshare::MAX_CLIENT_ID as usize {
            return Err(SimError::Config(format!("too many clients ({})", clients.len())));
        }
        if let Some(c) = clients.iter().find(|c| c.work == Some(0)) {
            return Err(SimError::Config(format!("client {:?}: work must be at least 1 ns", c.name)));
        }
        let static_set = clients.iter().all(|c| {
            c.arrive == 0
                && c.depart.is_none()
                && c.work.is_none()
                && c.behavior == Behavior::CpuBound
                && c.weight_changes.is_empty()
        });
        let report = SimReport {
            scheduler: sched.name().to_string(),
            config: cfg.clone(),
            clients: Vec::new(),
            decisions: 0,
            context_switches: 0,
            idle_while_waiting: 0,
            busy: 0,
            overhead: 0,
            decision_cost: None,
            groups: Vec::new(),
        };
        // Events known now, in the order the specs give them (sequence numbers order ties).
        let mut queue = EventQueue::default();
        for (i, spec) in clients.iter().enumerate() {
            let (i, arrive) = (i as u32, spec.arrive);
            queue.push_fixed(arrive, Event::Arrive(i));
            if let Some(d) = spec.depart {
                queue.push_fixed(d.max(arrive), Event::Depart(i));
            }
            for &(t, w) in &spec.weight_changes {
                queue.push_fixed(t.max(arrive), Event::SetWeight(i, w));
            }
        }
        for cpu in 0..cfg.cpus {
            let offset = cfg.cpu_offsets.get(cpu).copied().unwrap_or(0);
            queue.push_fixed(offset, Event::CpuStart(cpu as u32));
        }
        queue.seal();
        let mut fluid = Fluid::new(cfg.cpus);
        fluid.reserve(clients.len());
        Ok(Engine {
            fluid: Reference::Flat(fluid),
            groups: None,
            rng: Pcg64Mcg::seed_from_u64(cfg.seed),
            cpus: vec![None; cfg.cpus],
            running_start: vec![0; cfg.cpus],
            last_on_cpu: vec![NONE; cfg.cpus],
            generation: 0,
            queue,
            stops: StopQueue::default(),
            idle_ready: vec![0; cfg.cpus.div_ceil(64)],
            now: 0,
            static_set,
            work_done: 0,
            waiting: 0,
            ready_cpus: 0,
            busy_cpus: 0,
            start_sum: 0,
            report,
            windows: Vec::new(),
            window_received: Vec::new(),
            band: None,
            band_counts: Vec::new(),
            lag_windows: Vec::new(),
            window_lag: Vec::new(),
            series_every: None,
            series_clients: Vec::new(),
            series: Vec::new(),
            cost: None,
            pick_cost: vec![0; cfg.cpus],
            chains: Vec::new(),
            fast_path: true,
            clients: clients.into_iter().map(SimClient::new).collect(),
            sched,
            cfg,
        })
    }

    fn push(&mut self, t: Time, ev: Event) {
        self.queue.push(t, ev);
    }

    /// The next instant with an event (a stale CPU stop counts: idle CPUs are polled then).
    #[inline]
    fn next_instant(&self) -> Option<Time> {
        match (self.queue.peek_time(), self.stops.peek_time()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    #[inline]
    fn set_idle_ready(&mut self, cpu: usize, on: bool) {
        let bit = 1u64 << (cpu % 64);
        if on {
            self.idle_ready[cpu / 64] |= bit;
        } else {
            self.idle_ready[cpu / 64] &= !bit;
        }
    }

    #[inline]
    fn id(i: usize) -> ClientId {
        ClientId(i as u32)
    }

    #[cold]
    fn refused(&self, source: SchedError) -> SimError {
        SimError::Refused { scheduler: self.report.scheduler.clone(), t: self.now, source }
    }

    #[cold]
    fn broke(&self, what: String) -> SimError {
        SimError::Contract { scheduler: self.report.scheduler.clone(), t: self.now, what }
    }

    /// The client a `Run` decision for `cpu` names, checked against the
    /// contract: a client waiting for a CPU, with a slice above zero.
    #[inline]
    fn decided(&self, cpu: usize, client: ClientId, slice: Time) -> Result<usize, SimError> {
        let i = client.index();
        if i >= self.clients.len() || self.clients[i].state != client::State::Waiting {
            let state = self.clients.get(i).map(|c| c.state);
            return Err(self.broke(format!("picked {client} for cpu {cpu} in state {state:?}")));
        }
        if slice == 0 {
            return Err(self.broke(format!("zero slice for {client}")));
        }
        Ok(i)
    }
}

/// Run `clients` on the scheduler named `name` with settings `cfg`, without a trace.
pub fn simulate(name: &str, cfg: SimConfig, clients: Vec<ClientSpec>) -> Result<SimReport, SimError> {
    let sched = propshare::registry::build(
        name,
        propshare::SchedConfig { cpus: cfg.cpus, quantum: cfg.quantum, seed: cfg.seed },
    )
    .map_err(|e| SimError::Config(e.to_string()))?;
    Engine::new(sched, cfg, clients)?.run(&mut |_| {})
}
