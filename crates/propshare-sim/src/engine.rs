//! The discrete-event engine.
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
//! (`propshare bench-sim` reports it at a million clients).
//!
//! # Metrics
//!
//! Per client: service received, ideal service ([`crate::fluid`]), and lag =
//! ideal − received, whose maximum and minimum are exact: while a client
//! waits its lag only grows and while it runs its lag only shrinks (its ideal
//! rate is at most one CPU), so the extremes are reached when it starts or
//! stops running, which is where we sample. The papers' service error
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

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use propshare::{ClientId, CpuId, Decision, SchedError, Scheduler, StopReason, Time, Weight};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64Mcg;

use crate::fluid::{ns_of_service, Fluid, Service, FRAC};

/// A length drawn per phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Always this many ns.
    Constant(Time),
    /// Uniform in `[lo, hi]` ns.
    Uniform(Time, Time),
    /// Exponential with this mean, in ns (at least 1).
    Exponential(Time),
}

impl Dist {
    /// Draw one length.
    pub fn sample(&self, rng: &mut Pcg64Mcg) -> Time {
        match *self {
            Dist::Constant(t) => t,
            Dist::Uniform(lo, hi) => rng.random_range(lo..=hi.max(lo)),
            Dist::Exponential(mean) => {
                let exp = Exp::new(1.0 / mean.max(1) as f64).expect("positive rate");
                (exp.sample(rng).round() as Time).max(1)
            }
        }
    }
}

/// How a client uses the CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Behavior {
    /// Always runnable.
    CpuBound,
    /// Alternates a run phase (CPU time needed) and a sleep phase (blocked).
    Phases {
        /// CPU time per run phase.
        run: Dist,
        /// Blocked time per sleep phase.
        sleep: Dist,
    },
}

/// One client of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientSpec {
    /// Its name in reports and traces.
    pub name: String,
    /// Its weight at arrival.
    pub weight: Weight,
    /// Arrival time.
    pub arrive: Time,
    /// Departure time, if it leaves.
    pub depart: Option<Time>,
    /// How it uses the CPU.
    pub behavior: Behavior,
    /// Weight changes, at increasing times.
    pub weight_changes: Vec<(Time, Weight)>,
    /// CPU time it needs: it leaves the moment it has received this much
    /// (`None`: it never finishes). At least 1 ns.
    pub work: Option<Time>,
}

impl ClientSpec {
    /// A CPU-bound client present from time 0.
    pub fn cpu_bound(name: impl Into<String>, weight: Weight) -> ClientSpec {
        ClientSpec {
            name: name.into(),
            weight,
            arrive: 0,
            depart: None,
            behavior: Behavior::CpuBound,
            weight_changes: Vec::new(),
            work: None,
        }
    }
}

/// When a member of a chain leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberLeaves {
    /// Once it has received this much CPU time (ns, ≥ 1): "it ran 300 ms"
    /// read as CPU time.
    AfterWork(Time),
    /// This long after it joined (ns, ≥ 1), whatever it received: "it ran
    /// 300 ms" read as wall-clock time.
    AfterLifetime(Time),
}

/// A chain of CPU-bound clients present one at a time (the SFS paper's
/// short tasks, section 4.3): the first member joins at `start`; each
/// member leaves as `leaves` says and the next joins at that very instant,
/// until `count` members have joined or the time reaches `until`. Members
/// are named `prefix0`, `prefix1`, ... and get the client ids after every
/// [`ClientSpec`], in the order they join.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainSpec {
    /// Name prefix of the members.
    pub prefix: String,
    /// Weight of every member.
    pub weight: Weight,
    /// When the first member joins, ns.
    pub start: Time,
    /// When a member leaves.
    pub leaves: MemberLeaves,
    /// At most this many members (`None`: no limit).
    pub count: Option<u64>,
    /// No member joins at or after this time, ns (`None`: no limit).
    pub until: Option<Time>,
}

/// Machine settings of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// P.
    pub cpus: usize,
    /// Quantum, ns.
    pub quantum: Time,
    /// Simulated time to run, ns.
    pub horizon: Time,
    /// Per-CPU start offsets (asynchronous quanta); missing entries are 0.
    pub cpu_offsets: Vec<Time>,
    /// CPU time lost when a CPU switches to a different client, ns.
    pub switch_cost: Time,
    /// Extra CPU time lost when the client last ran on another CPU, ns.
    pub migration_cost: Time,
    /// Seed for workload randomness (and the scheduler's, if it draws any).
    pub seed: u64,
}

impl SimConfig {
    /// P CPUs, quantum Q, horizon H, everything else zero.
    pub fn new(cpus: usize, quantum: Time, horizon: Time) -> SimConfig {
        SimConfig { cpus, quantum, horizon, cpu_offsets: Vec::new(), switch_cost: 0, migration_cost: 0, seed: 0 }
    }
}

/// What the engine reports as it runs (for traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent<'a> {
    /// A client joined.
    Join {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
        /// Weight.
        weight: u64,
    },
    /// A client left.
    Leave {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
    },
    /// A client blocked.
    Block {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
    },
    /// A client woke.
    Wake {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
    },
    /// A client's weight changed.
    Weight {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
        /// New weight.
        weight: u64,
    },
    /// A client ran on a CPU over `[start, end)`.
    Run {
        /// CPU.
        cpu: usize,
        /// Client name.
        client: &'a str,
        /// Start, ns.
        start: Time,
        /// End, ns.
        end: Time,
    },
}

impl TraceEvent<'_> {
    /// Whether the event falls in the time window `[start, end)` (a run: overlaps it).
    pub fn within(&self, (start, end): (Time, Time)) -> bool {
        match *self {
            TraceEvent::Run { start: s, end: e, .. } => s < end && e > start,
            TraceEvent::Join { t, .. }
            | TraceEvent::Leave { t, .. }
            | TraceEvent::Block { t, .. }
            | TraceEvent::Wake { t, .. }
            | TraceEvent::Weight { t, .. } => (start..end).contains(&t),
        }
    }
}

/// Per-client results.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientStats {
    /// Name.
    pub name: String,
    /// Weight at arrival.
    pub weight: u64,
    /// CPU time received, ns.
    pub received: Time,
    /// Ideal (fluid) service at the end of the run or at departure, ns.
    pub ideal: f64,
    /// Largest lag (ideal − received) seen, ns.
    pub max_lag: f64,
    /// Smallest lag seen, ns.
    pub min_lag: f64,
    /// Mean of |lag| over the samples, ns.
    pub mean_abs_lag: f64,
    /// Service error range (min, max) in ns, for runs with no dynamic events.
    pub service_error: Option<(f64, f64)>,
    /// Wake-up latencies (wake to next run), ns.
    pub wake_latencies: Vec<Time>,
    /// Times it was started on a CPU.
    pub runs: u64,
    /// Starts on a different CPU than its previous run.
    pub migrations: u64,
    /// Lag over time, ns: (time, lag), on the sampling grid and at the client's own events
    /// (only for clients selected with [`Engine::sample_lag`]).
    pub lag_series: Vec<(Time, f64)>,
    /// CPU time received inside each measurement window ([`Engine::windows`]), ns.
    pub window_received: Vec<Time>,
    /// Fraction of the band grid's instants at which |lag| was within the
    /// band ([`Engine::lag_band`]), over the instants the client was present.
    pub within_band: Option<f64>,
    /// Lag over fixed windows, one entry per window length ([`Engine::lag_windows`]).
    pub window_lags: Vec<WindowLag>,
}

/// One client's lag over the windows `[k·t, (k+1)·t)` of one length t
/// ([`Engine::lag_windows`]); only windows the client was present for from
/// start to end count.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowLag {
    /// The window length t, ns.
    pub length: Time,
    /// Windows measured.
    pub windows: u64,
    /// Smallest window lag (ideal − received in the window), ns (0 if none).
    pub min_lag: f64,
    /// Largest window lag, ns (0 if none).
    pub max_lag: f64,
    /// Largest |lag| / ideal over the windows with some ideal service.
    pub max_rel_error: Option<f64>,
    /// Sum of the window lags, ns: the lag at the last window's end minus the
    /// lag at the first window's start.
    pub total_lag: f64,
}

/// Results of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimReport {
    /// Scheduler name.
    pub scheduler: String,
    /// Settings.
    pub config: SimConfig,
    /// Per client, in spec order.
    pub clients: Vec<ClientStats>,
    /// Decisions (`pick` calls that returned a client).
    pub decisions: u64,
    /// Starts of a different client than the CPU's previous one.
    pub context_switches: u64,
    /// CPU-ns spent idle while a runnable client waited.
    pub idle_while_waiting: Time,
    /// CPU-ns spent running clients.
    pub busy: Time,
    /// CPU-ns lost to switch and migration costs.
    pub overhead: Time,
    /// Wall-clock cost of the scheduler's code per decision (pick plus the
    /// `stopped` that ends the run), when measured ([`Engine::measure_cost`]).
    /// Not deterministic: reports keep it apart from the metrics files.
    pub decision_cost: Option<CostHistogram>,
}

/// A histogram of nanosecond costs with about 6% resolution: 16 linear
/// sub-buckets per power of two.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostHistogram {
    buckets: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for CostHistogram {
    fn default() -> Self {
        CostHistogram { buckets: vec![0; 64 * 16], count: 0, max: 0 }
    }
}

impl CostHistogram {
    fn bucket(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize; // ≥ 4
        let sub = ((v >> (e - 4)) & 15) as usize;
        (e - 3) * 16 + sub
    }

    fn lower(b: usize) -> u64 {
        if b < 16 {
            return b as u64;
        }
        let e = b / 16 + 3;
        ((16 + (b % 16)) as u64) << (e - 4)
    }

    /// Add another histogram's values.
    pub fn merge(&mut self, other: &CostHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// Record one value.
    pub fn record(&mut self, v: u64) {
        self.buckets[Self::bucket(v)] += 1;
        self.count += 1;
        self.max = self.max.max(v);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Largest value.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The q-quantile (0..=1), as the lower edge of its bucket.
    pub fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count.max(1));
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::lower(b);
            }
        }
        0
    }
}

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
}

/// A client or machine event (CPU stops live in [`StopQueue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Arrive(u32),
    Depart(u32),
    SetWeight(u32, Weight),
    Wake(u32),
    /// The first member of chain k joins.
    ChainStart(u32),
    CpuStart(u32),
    SampleGrid,
    BandGrid,
    /// An edge of the windows of length `lag_windows[j]`.
    WindowEdge(u32),
}

/// Order of events at one instant: client events, then CPU stops, then CPU
/// starts, then grid samples; within a class, the order they were scheduled.
const CLASS_CLIENT: u64 = 0;
/// CPU stops ([`StopQueue`]) come between client events and CPU starts.
const CLASS_CPU_START: u64 = 2;
const CLASS_SAMPLE: u64 = 3;
const SEQ_BITS: u32 = 56;

impl Event {
    fn class(&self) -> u64 {
        match self {
            Event::CpuStart(_) => CLASS_CPU_START,
            Event::SampleGrid | Event::BandGrid | Event::WindowEdge(_) => CLASS_SAMPLE,
            _ => CLASS_CLIENT,
        }
    }
}

/// A scheduled event, ordered by (time, class, sequence number).
#[derive(Clone, Copy, Debug)]
struct Entry {
    t: Time,
    /// class << SEQ_BITS | sequence number: unique, so the order is total.
    order: u64,
    ev: Event,
}

impl Entry {
    #[inline]
    fn key(&self) -> (Time, u64) {
        (self.t, self.order)
    }

    #[inline]
    fn class(&self) -> u64 {
        self.order >> SEQ_BITS
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// Client and machine events: those known at construction (arrivals,
/// departures, weight changes, CPU starts) in one sorted array read by a
/// cursor, the others (wake-ups, grid samples) in a heap; the next event is
/// the smaller of the two heads. A million arrivals cost one sort, not a
/// million heap operations.
#[derive(Default)]
struct EventQueue {
    fixed: Vec<Entry>,
    next_fixed: usize,
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl EventQueue {
    fn entry(&mut self, t: Time, ev: Event) -> Entry {
        self.seq += 1;
        Entry { t, order: ev.class() << SEQ_BITS | self.seq, ev }
    }

    /// Schedule an event known at construction (call [`EventQueue::seal`] after the last).
    fn push_fixed(&mut self, t: Time, ev: Event) {
        let e = self.entry(t, ev);
        self.fixed.push(e);
    }

    /// Sort the construction-time events. Keys are unique, so an unstable sort is exact.
    fn seal(&mut self) {
        self.fixed.sort_unstable_by_key(Entry::key);
    }

    fn push(&mut self, t: Time, ev: Event) {
        let e = self.entry(t, ev);
        self.heap.push(Reverse(e));
    }

    #[inline]
    fn peek(&self) -> Option<&Entry> {
        let f = self.fixed.get(self.next_fixed);
        match (f, self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => Some(if a.key() <= b.key() { a } else { b }),
            (Some(a), None) => Some(a),
            (None, Some(Reverse(b))) => Some(b),
            (None, None) => None,
        }
    }

    /// Pop the next event if it is at `t` and its class is at most `max_class`.
    #[inline]
    fn pop_at(&mut self, t: Time, max_class: u64) -> Option<Event> {
        let e = *self.peek()?;
        if e.t != t || e.class() > max_class {
            return None;
        }
        if self.fixed.get(self.next_fixed).is_some_and(|f| f.key() == e.key()) {
            self.next_fixed += 1;
        } else {
            self.heap.pop();
        }
        Some(e.ev)
    }
}

/// The end of a run on a CPU, ordered by (time, generation): the order in
/// which the old single queue handled them (generations increase with every
/// pick, as sequence numbers did). Stale entries (the run was preempted or
/// its client left) stay queued and are skipped when popped; they still mark
/// an instant at which idle CPUs are polled, as before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Stop {
    t: Time,
    generation: u64,
    cpu: u32,
}

/// CPU stops. Runs of equal length started in time order end in time order,
/// so most stops arrive in order: those go to a FIFO (O(1)); the rest go to
/// a heap (O(log P)). The next stop is the smaller of the two heads.
#[derive(Default)]
struct StopQueue {
    fifo: std::collections::VecDeque<Stop>,
    heap: BinaryHeap<Reverse<Stop>>,
}

impl StopQueue {
    #[inline]
    fn push(&mut self, s: Stop) {
        // Generations increase, so (t, generation) ≥ the back's iff t ≥ its t.
        if self.fifo.back().is_none_or(|b| b.t <= s.t) {
            self.fifo.push_back(s);
        } else {
            self.heap.push(Reverse(s));
        }
    }

    #[inline]
    fn peek_time(&self) -> Option<Time> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => Some(a.t.min(b.t)),
            (Some(a), None) => Some(a.t),
            (None, Some(Reverse(b))) => Some(b.t),
            (None, None) => None,
        }
    }

    /// Pop the next stop if it is at `t`.
    #[inline]
    fn pop_at(&mut self, t: Time) -> Option<Stop> {
        let from_heap = match (self.fifo.front(), self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => b < a,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => return None,
        };
        if from_heap {
            if self.heap.peek().is_some_and(|Reverse(b)| b.t == t) {
                return self.heap.pop().map(|Reverse(b)| b);
            }
            None
        } else if self.fifo.front().is_some_and(|a| a.t == t) {
            self.fifo.pop_front()
        } else {
            None
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Absent,
    Waiting,
    Running(u32),
    Blocked,
    Gone,
}

/// "None" for the u32 fields of [`SimClient`] and `last_on_cpu`.
const NONE: u32 = u32::MAX;
/// "None" for `woke_at` (times stay below 2^50 ns).
const NEVER: Time = Time::MAX;

/// One client's state during a run, kept small: memory per client is a
/// target (at most 1 KB with the scheduler and the fluid reference at a
/// million clients). [`ClientStats`] are built from it at the end.
struct SimClient {
    /// Lag extremes and service-error range, fixed point (ns · 2^FRAC).
    max_lag: i128,
    min_lag: i128,
    err_min: i128,
    err_max: i128,
    /// φ_C/Φ_T in fixed point, for the service error of static sets (once `has_share`).
    static_share: u128,
    abs_lag_ns_sum: f64,
    lag_samples: u64,
    received: Time,
    /// CPU time left in the current run phase (phased clients).
    phase_left: Time,
    /// CPU time left before it leaves (NEVER: it never finishes).
    work_left: Time,
    /// When it woke, until its next run (NEVER: not waiting for one).
    woke_at: Time,
    runs: u64,
    migrations: u64,
    /// Ideal service at departure (or at the horizon), ns.
    ideal: f64,
    weight: Weight,
    /// Weight at arrival.
    weight0: Weight,
    state: State,
    /// CPU of its last run (NONE: never ran).
    last_cpu: u32,
    /// Its slot in `series` if its lag is recorded over time (NONE: not).
    series: u32,
    /// The chain it belongs to, by index (NONE: none).
    chain: u32,
    has_share: bool,
    has_err: bool,
    name: String,
    /// Run and sleep phase lengths (phased clients only).
    phases: Option<Box<(Dist, Dist)>>,
    wake_latencies: Vec<Time>,
}

impl SimClient {
    fn new(spec: ClientSpec) -> SimClient {
        SimClient {
            max_lag: 0,
            min_lag: 0,
            err_min: 0,
            err_max: 0,
            static_share: 0,
            abs_lag_ns_sum: 0.0,
            lag_samples: 0,
            received: 0,
            phase_left: 0,
            work_left: spec.work.unwrap_or(NEVER),
            woke_at: NEVER,
            runs: 0,
            migrations: 0,
            ideal: 0.0,
            weight: spec.weight,
            weight0: spec.weight,
            state: State::Absent,
            last_cpu: NONE,
            series: NONE,
            chain: NONE,
            has_share: false,
            has_err: false,
            phases: match spec.behavior {
                Behavior::CpuBound => None,
                Behavior::Phases { run, sleep } => Some(Box::new((run, sleep))),
            },
            name: spec.name,
            wake_latencies: Vec::new(),
        }
    }
}

fn ns_of_fixed(v: i128) -> f64 {
    v as f64 / (1u128 << FRAC) as f64
}

/// One client's windowed lag for one window length, during the run.
#[derive(Clone, Copy, Debug, Default)]
struct WindowState {
    /// Ideal and received service at the last edge, if the client was present then.
    edge: Option<(Service, Time)>,
    windows: u64,
    /// Extremes and sum of the window lags, fixed point.
    min: i128,
    max: i128,
    total: i128,
    max_rel: Option<f64>,
}

impl WindowState {
    /// The client is at an edge with `ideal` and `received` service
    /// (`None`: absent): close the window that ends here, open the next.
    fn edge(&mut self, now: Option<(Service, Time)>) {
        if let (Some((i0, r0)), Some((i1, r1))) = (self.edge, now) {
            let ideal = i1 - i0;
            let lag = ideal as i128 - (((r1 - r0) as i128) << FRAC);
            if self.windows == 0 {
                (self.min, self.max) = (lag, lag);
            } else {
                (self.min, self.max) = (self.min.min(lag), self.max.max(lag));
            }
            self.windows += 1;
            self.total += lag;
            if ideal > 0 {
                let rel = (lag as f64 / ideal as f64).abs();
                self.max_rel = Some(self.max_rel.map_or(rel, |m| m.max(rel)));
            }
        }
        self.edge = now;
    }

    fn stats(&self, length: Time) -> WindowLag {
        WindowLag {
            length,
            windows: self.windows,
            min_lag: ns_of_fixed(self.min),
            max_lag: ns_of_fixed(self.max),
            max_rel_error: self.max_rel,
            total_lag: ns_of_fixed(self.total),
        }
    }
}

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
    fluid: Fluid,
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
}

impl<S: Scheduler> Engine<S> {
    /// Record the lag of these clients (indices into the client list) over
    /// time: every `every` ns if given, and at each of their own events.
    pub fn sample_lag(&mut self, clients: &[usize], every: Option<Time>) {
        for &i in clients {
            if let Some(c) = self.clients.get_mut(i) {
                if c.series == NONE {
                    c.series = self.series.len() as u32;
                    self.series.push(Vec::new());
                    self.series_clients.push(i);
                }
            }
        }
        self.series_every = every;
        if let Some(e) = every {
            self.push(e, Event::SampleGrid);
        }
    }

    /// Every `every` ns, check every present client's |lag| against `band` ns
    /// (for "within one quantum of its due share x% of the time").
    pub fn lag_band(&mut self, every: Time, band: Time) {
        self.band = Some((every.max(1), band));
        self.band_counts = vec![(0, 0); self.clients.len()];
        self.push(every.max(1), Event::BandGrid);
    }

    /// Measure every client's lag over the windows `[k·t, (k+1)·t)` for each
    /// window length t in `lengths` (each at least 1 ns), up to the horizon:
    /// O(N) work at every window edge.
    pub fn lag_windows(&mut self, lengths: &[Time]) {
        self.lag_windows = lengths.iter().map(|&t| t.max(1)).collect();
        self.window_lag = vec![WindowState::default(); lengths.len() * self.clients.len()];
        for j in 0..lengths.len() {
            self.push(0, Event::WindowEdge(j as u32));
        }
    }

    /// Also measure each client's CPU time inside these time windows `[start, end)`.
    pub fn windows(&mut self, windows: &[(Time, Time)]) {
        self.windows = windows.to_vec();
        self.window_received = vec![0; windows.len() * self.clients.len()];
    }

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
            fluid,
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
        match (self.queue.peek().map(|e| e.t), self.stops.peek_time()) {
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

    /// Run to the horizon, reporting trace events to `trace`.
    pub fn run(mut self, trace: &mut dyn FnMut(TraceEvent)) -> Result<SimReport, SimError> {
        let horizon = self.cfg.horizon;
        while let Some(t) = self.next_instant() {
            if t > horizon {
                break;
            }
            self.account_idle(t);
            self.now = t;
            // Handling an event at t schedules nothing at t, so the three
            // classes can be drained in turn.
            while let Some(ev) = self.queue.pop_at(t, CLASS_CLIENT) {
                self.handle(ev, trace)?;
            }
            while let Some(s) = self.stops.pop_at(t) {
                self.cpu_stop(s.cpu as usize, s.generation, trace)?;
            }
            while let Some(ev) = self.queue.pop_at(t, CLASS_SAMPLE) {
                self.handle(ev, trace)?;
            }
            self.poll_idle(trace)?;
        }
        self.account_idle(horizon);
        self.now = horizon;
        // Close the books: stop every running client at the horizon (without telling the scheduler).
        for i in 0..self.clients.len() {
            self.sample(i);
        }
        for cpu in 0..self.cpus.len() {
            if let Some(r) = self.cpus[cpu] {
                self.cpus[cpu] = None;
                self.credit(cpu, r, horizon, trace);
                self.set_state(r.client, State::Waiting);
            }
        }
        for i in 0..self.clients.len() {
            if !matches!(self.clients[i].state, State::Absent | State::Gone) {
                self.clients[i].ideal = ns_of_service(self.fluid.ideal(horizon, Self::id(i)));
            }
        }
        // Free the scheduler, the fluid and the queues before the results are built.
        let Engine {
            clients,
            mut report,
            cost,
            windows,
            window_received,
            mut series,
            band_counts,
            lag_windows,
            window_lag,
            ..
        } = self;
        let w = windows.len();
        let lw = lag_windows.len();
        report.decision_cost = cost;
        report.clients = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| ClientStats {
                weight: c.weight0.get(),
                received: c.received,
                ideal: c.ideal,
                max_lag: ns_of_fixed(c.max_lag),
                min_lag: ns_of_fixed(c.min_lag),
                mean_abs_lag: if c.lag_samples > 0 { c.abs_lag_ns_sum / c.lag_samples as f64 } else { 0.0 },
                service_error: c.has_err.then(|| (ns_of_fixed(c.err_min), ns_of_fixed(c.err_max))),
                wake_latencies: c.wake_latencies,
                runs: c.runs,
                migrations: c.migrations,
                lag_series: if c.series == NONE { Vec::new() } else { std::mem::take(&mut series[c.series as usize]) },
                window_received: window_received.get(i * w..(i + 1) * w).map(<[Time]>::to_vec).unwrap_or_default(),
                within_band: band_counts.get(i).filter(|b| b.0 > 0).map(|b| b.1 as f64 / b.0 as f64),
                window_lags: lag_windows.iter().enumerate().map(|(j, &t)| window_lag[i * lw + j].stats(t)).collect(),
                name: c.name,
            })
            .collect();
        Ok(report)
    }

    /// Change client i's state, keeping the O(1) counters in step.
    #[inline]
    fn set_state(&mut self, i: usize, new: State) {
        let old = std::mem::replace(&mut self.clients[i].state, new);
        if old == State::Waiting {
            self.waiting -= 1;
        }
        if new == State::Waiting {
            self.waiting += 1;
        }
        if let State::Running(cpu) = old {
            let start = self.running_start[cpu as usize];
            self.busy_cpus -= 1;
            self.start_sum -= start as u128;
        }
        if let State::Running(cpu) = new {
            self.busy_cpus += 1;
            self.start_sum += self.running_start[cpu as usize] as u128;
        }
    }

    #[inline]
    fn account_idle(&mut self, until: Time) {
        if until <= self.now {
            return;
        }
        let idle = (self.ready_cpus - self.busy_cpus) as Time;
        self.report.idle_while_waiting += idle.min(self.waiting as Time) * (until - self.now);
    }

    fn handle(&mut self, ev: Event, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let now = self.now;
        match ev {
            Event::Arrive(i) => {
                let i = i as usize;
                let w = self.clients[i].weight;
                let kick = self.sched.join(now, Self::id(i), w).map_err(|e| self.refused(e))?;
                self.fluid.join(now, Self::id(i), w);
                self.set_state(i, State::Waiting);
                self.start_phase(i);
                trace(TraceEvent::Join { t: now, client: &self.clients[i].name, weight: w.get() });
                self.kick(kick, trace)?;
            }
            Event::Depart(i) => {
                let i = i as usize;
                match self.clients[i].state {
                    State::Running(cpu) => {
                        self.stop(cpu as usize, StopReason::Left, trace)?;
                    }
                    State::Waiting | State::Blocked => {
                        self.sample(i);
                        self.sched.leave(now, Self::id(i)).map_err(|e| self.refused(e))?;
                        self.depart(i, trace)?;
                    }
                    State::Absent | State::Gone => {}
                }
            }
            Event::SetWeight(i, w) => {
                let i = i as usize;
                if matches!(self.clients[i].state, State::Absent | State::Gone) {
                    return Ok(());
                }
                self.sched.set_weight(now, Self::id(i), w).map_err(|e| self.refused(e))?;
                self.fluid.set_weight(now, Self::id(i), w);
                self.clients[i].weight = w;
                self.static_set = false;
                trace(TraceEvent::Weight { t: now, client: &self.clients[i].name, weight: w.get() });
            }
            Event::Wake(i) => {
                let i = i as usize;
                if self.clients[i].state != State::Blocked {
                    return Ok(());
                }
                let kick = self.sched.wake(now, Self::id(i)).map_err(|e| self.refused(e))?;
                self.fluid.wake(now, Self::id(i));
                self.sample(i);
                self.set_state(i, State::Waiting);
                self.clients[i].woke_at = now;
                self.start_phase(i);
                trace(TraceEvent::Wake { t: now, client: &self.clients[i].name });
                self.kick(kick, trace)?;
            }
            Event::BandGrid => {
                let (every, band) = self.band.expect("band grid scheduled with a band");
                let band = (band as i128) << FRAC;
                for i in 0..self.clients.len() {
                    if let Some(lag) = self.lag_now(i) {
                        let b = &mut self.band_counts[i];
                        b.0 += 1;
                        b.1 += u64::from(lag.abs() <= band);
                    }
                }
                self.push(now + every, Event::BandGrid);
            }
            Event::WindowEdge(j) => {
                let j = j as usize;
                let lengths = self.lag_windows.len();
                for i in 0..self.clients.len() {
                    let now_service = self.service_now(i).map(|r| (self.fluid.ideal(now, Self::id(i)), r));
                    self.window_lag[i * lengths + j].edge(now_service);
                }
                let next = now.saturating_add(self.lag_windows[j]);
                if next <= self.cfg.horizon {
                    self.push(next, Event::WindowEdge(j as u32));
                }
            }
            Event::SampleGrid => {
                for k in 0..self.series_clients.len() {
                    self.sample(self.series_clients[k]);
                }
                if let Some(every) = self.series_every {
                    self.push(now + every, Event::SampleGrid);
                }
            }
            Event::ChainStart(k) => self.chain_join(k as usize, trace)?,
            Event::CpuStart(cpu) => {
                let cpu = cpu as usize;
                self.ready_cpus += 1;
                if self.cpus[cpu].is_none() {
                    self.set_idle_ready(cpu, true);
                }
            }
        }
        Ok(())
    }

    /// A run on `cpu` reaches its end: stop it and pick again, unless the
    /// stop is stale (that run was preempted or its client left).
    #[inline]
    fn cpu_stop(&mut self, cpu: usize, generation: u64, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let Some(r) = self.cpus[cpu] else { return Ok(()) };
        if r.generation != generation {
            return Ok(());
        }
        let c = &self.clients[r.client];
        let ran = self.now.saturating_sub(r.start);
        let reason = if c.work_left <= ran {
            StopReason::Left
        } else if c.phases.is_some() && c.phase_left <= ran {
            StopReason::Blocked
        } else {
            StopReason::Expired
        };
        self.stop(cpu, reason, trace)?;
        self.pick(cpu, trace)
    }

    fn kick(&mut self, kick: Option<CpuId>, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        if let Some(cpu) = kick {
            let k = cpu.index();
            if k < self.cpus.len() && self.cpus[k].is_some() {
                self.stop(k, StopReason::Preempted, trace)?;
            }
        }
        Ok(())
    }

    fn start_phase(&mut self, i: usize) {
        if let Some(p) = &self.clients[i].phases {
            let run = p.0;
            self.clients[i].phase_left = run.sample(&mut self.rng).max(1);
        }
    }

    /// Client i has left the scheduler: close its books and, if it belongs
    /// to a chain, let the next member join at once.
    fn depart(&mut self, i: usize, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let ideal = self.fluid.leave(self.now, Self::id(i));
        self.set_state(i, State::Gone);
        let c = &mut self.clients[i];
        c.ideal = ns_of_service(ideal);
        trace(TraceEvent::Leave { t: self.now, client: &c.name });
        match c.chain {
            NONE => Ok(()),
            k => self.chain_join(k as usize, trace),
        }
    }

    /// The next member of chain k joins now, unless the chain is over. It
    /// is created here, as client `clients.len()`; a lifetime member's
    /// departure is scheduled at once.
    fn chain_join(&mut self, k: usize, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let now = self.now;
        let (spec, joined) = &mut self.chains[k];
        if spec.count.is_some_and(|n| *joined >= n) || spec.until.is_some_and(|u| now >= u) {
            return Ok(());
        }
        let i = self.clients.len();
        if i > propshare::MAX_CLIENT_ID as usize {
            return Err(SimError::Config(format!("chain {:?}: too many clients ({})", spec.prefix, i + 1)));
        }
        let (work, depart) = match spec.leaves {
            MemberLeaves::AfterWork(w) => (Some(w), None),
            MemberLeaves::AfterLifetime(l) => (None, Some(now.saturating_add(l))),
        };
        let member = ClientSpec {
            name: format!("{}{}", spec.prefix, joined),
            arrive: now,
            depart,
            work,
            ..ClientSpec::cpu_bound(String::new(), spec.weight)
        };
        *joined += 1;
        let mut client = SimClient::new(member);
        client.chain = k as u32;
        self.clients.push(client);
        // Per-client measurement slots, laid out client-major, grow at the end.
        self.window_received.extend(std::iter::repeat_n(0, self.windows.len()));
        self.window_lag.extend(std::iter::repeat_n(WindowState::default(), self.lag_windows.len()));
        if self.band.is_some() {
            self.band_counts.push((0, 0));
        }
        if let Some(d) = depart {
            self.push(d, Event::Depart(i as u32));
        }
        self.handle(Event::Arrive(i as u32), trace)
    }

    /// Client i's received service up to now, ns, if it is present.
    #[inline]
    fn service_now(&self, i: usize) -> Option<Time> {
        let c = &self.clients[i];
        match c.state {
            State::Absent | State::Gone => None,
            State::Running(cpu) => Some(c.received + self.now.saturating_sub(self.running_start[cpu as usize])),
            State::Waiting | State::Blocked => Some(c.received),
        }
    }

    /// Client i's lag now (fixed point), if it is present.
    fn lag_now(&mut self, i: usize) -> Option<i128> {
        let received = self.service_now(i)?;
        Some(self.fluid.ideal(self.now, Self::id(i)) as i128 - ((received as i128) << FRAC))
    }

    /// Lag and service-error sample for client i at `now`. Integer
    /// arithmetic only (fixed point, [`FRAC`] bits): this runs twice per quantum.
    #[inline]
    fn sample(&mut self, i: usize) {
        let now = self.now;
        let Some(received) = self.service_now(i) else { return };
        let ideal: Service = self.fluid.ideal(now, Self::id(i));
        let lag = ideal as i128 - ((received as i128) << FRAC);
        let error = if self.static_set {
            if !self.clients[i].has_share {
                // φ_C/Φ_T = rate / P', fixed for a static set.
                let (num, den) = self.fluid.rate(Self::id(i));
                let p = self.cfg.cpus.min(self.clients.len()) as u128;
                let c = &mut self.clients[i];
                c.static_share = ((num as u128) << FRAC) / (den as u128 * p).max(1);
                c.has_share = true;
            }
            // e = w_C − W_T φ_C/Φ_T.
            Some(((received as i128) << FRAC) - (self.work_now() as u128 * self.clients[i].static_share) as i128)
        } else {
            None
        };
        let c = &mut self.clients[i];
        if c.lag_samples == 0 {
            c.max_lag = lag;
            c.min_lag = lag;
        } else {
            c.max_lag = c.max_lag.max(lag);
            c.min_lag = c.min_lag.min(lag);
        }
        c.lag_samples += 1;
        c.abs_lag_ns_sum += ((lag >> FRAC) as i64).unsigned_abs() as f64;
        if c.series != NONE {
            self.series[c.series as usize].push((now, lag as f64 / (1u128 << FRAC) as f64));
        }
        if let Some(e) = error {
            if c.has_err {
                c.err_min = c.err_min.min(e);
                c.err_max = c.err_max.max(e);
            } else {
                (c.err_min, c.err_max, c.has_err) = (e, e, true);
            }
        }
    }

    #[inline]
    fn work_now(&self) -> Time {
        let running = (self.busy_cpus as u128 * self.now as u128).saturating_sub(self.start_sum);
        self.work_done + running as Time
    }

    /// Ask every started idle CPU, in CPU order, for a client. A pick changes
    /// only its own CPU, so the idle set can be read a word at a time.
    fn poll_idle(&mut self, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        for word in 0..self.idle_ready.len() {
            let mut bits = self.idle_ready[word];
            while bits != 0 {
                let cpu = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.pick(cpu, trace)?;
            }
        }
        Ok(())
    }

    #[inline]
    fn pick(&mut self, cpu: usize, _trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let now = self.now;
        let clock = self.cost.is_some().then(std::time::Instant::now);
        let d = self.sched.pick(now, CpuId(cpu as u32));
        if let Some(t0) = clock {
            self.pick_cost[cpu] = t0.elapsed().as_nanos() as u64;
        }
        let d = d.map_err(|e| self.refused(e))?;
        let Decision::Run { client, slice } = d else { return Ok(()) };
        let i = client.index();
        if i >= self.clients.len() || self.clients[i].state != State::Waiting {
            let state = self.clients.get(i).map(|c| c.state);
            return Err(self.broke(format!("picked {client} for cpu {cpu} in state {state:?}")));
        }
        if slice == 0 {
            return Err(self.broke(format!("zero slice for {client}")));
        }
        self.sample(i);
        let mut cost = 0;
        if self.last_on_cpu[cpu] != i as u32 {
            cost += self.cfg.switch_cost;
            self.report.context_switches += 1;
        }
        let c = &mut self.clients[i];
        if c.last_cpu != NONE && c.last_cpu != cpu as u32 {
            cost += self.cfg.migration_cost;
            c.migrations += 1;
        }
        c.runs += 1;
        c.last_cpu = cpu as u32;
        if c.woke_at != NEVER {
            c.wake_latencies.push(now - c.woke_at);
            c.woke_at = NEVER;
        }
        let run_for = if c.phases.is_some() { slice.min(c.phase_left) } else { slice }.min(c.work_left);
        self.report.decisions += 1;
        self.report.overhead += cost;
        self.last_on_cpu[cpu] = i as u32;
        self.generation += 1;
        let r = Running { client: i, start: now + cost, generation: self.generation };
        self.cpus[cpu] = Some(r);
        self.set_idle_ready(cpu, false);
        self.running_start[cpu] = r.start;
        self.set_state(i, State::Running(cpu as u32));
        self.stops.push(Stop { t: now + cost + run_for, generation: r.generation, cpu: cpu as u32 });
        Ok(())
    }

    /// Credit the run on `cpu` up to `end` and emit its trace interval.
    #[inline]
    fn credit(&mut self, cpu: usize, r: Running, end: Time, trace: &mut dyn FnMut(TraceEvent)) -> Time {
        let ran = end.saturating_sub(r.start);
        let c = &mut self.clients[r.client];
        c.received += ran;
        let w = self.windows.len();
        for (k, &(w0, w1)) in self.windows.iter().enumerate() {
            let (a, b) = (r.start.max(w0), end.min(w1));
            if b > a {
                self.window_received[r.client * w + k] += b - a;
            }
        }
        self.work_done += ran;
        self.report.busy += ran;
        if end > r.start {
            trace(TraceEvent::Run { cpu, client: &c.name, start: r.start, end });
        }
        ran
    }

    #[inline]
    fn stop(&mut self, cpu: usize, reason: StopReason, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let now = self.now;
        let r = self.cpus[cpu].expect("running");
        let i = r.client;
        // Sample before crediting: received_now already counts the partial run.
        self.sample(i);
        self.cpus[cpu] = None;
        self.set_idle_ready(cpu, true);
        let ran = self.credit(cpu, r, now, trace);
        let clock = self.cost.is_some().then(std::time::Instant::now);
        let result = self.sched.stopped(now, CpuId(cpu as u32), Self::id(i), ran, reason);
        if let (Some(t0), Some(h)) = (clock, self.cost.as_mut()) {
            h.record(self.pick_cost[cpu] + t0.elapsed().as_nanos() as u64);
        }
        result.map_err(|e| self.refused(e))?;
        let c = &mut self.clients[i];
        c.phase_left = c.phase_left.saturating_sub(ran);
        if c.work_left != NEVER {
            c.work_left = c.work_left.saturating_sub(ran);
        }
        match reason {
            StopReason::Expired | StopReason::Preempted => self.set_state(i, State::Waiting),
            StopReason::Blocked => {
                self.set_state(i, State::Blocked);
                let Some(p) = &self.clients[i].phases else { unreachable!("only phased clients block") };
                let sleep = p.1;
                let wake = now + sleep.sample(&mut self.rng).max(1);
                self.fluid.block(now, Self::id(i));
                trace(TraceEvent::Block { t: now, client: &self.clients[i].name });
                self.push(wake, Event::Wake(i as u32));
            }
            StopReason::Left => self.depart(i, trace)?,
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The split queues hand out events in exactly the order of one heap
    /// keyed by (time, class, sequence), with CPU stops as class 1 ordered
    /// by generation: the order the engine had before the split.
    #[test]
    fn split_queues_keep_the_single_queue_order() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut queue = EventQueue::default();
        let mut stops = StopQueue::default();
        // Reference: (t, class, seq) with one sequence counter over everything.
        let mut reference: BinaryHeap<Reverse<(Time, u64, u64, u32)>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut tag = 0u32;
        for _ in 0..200 {
            let t = rng.random_range(0..50u64);
            seq += 1;
            tag += 1;
            queue.push_fixed(t, Event::Arrive(tag));
            reference.push(Reverse((t, 0, seq, tag)));
        }
        queue.seal();
        let mut generation = 0;
        let mut got = Vec::new();
        let mut want = Vec::new();
        while let Some(Reverse((t, _, _, _))) = reference.peek().copied() {
            let now = t;
            while let Some(&Reverse((t2, _, _, tag))) = reference.peek() {
                if t2 != t {
                    break;
                }
                reference.pop();
                want.push(tag);
            }
            let mut pushed = Vec::new();
            let tag_of = |ev: Event| {
                let (Event::Arrive(k) | Event::Wake(k) | Event::CpuStart(k)) = ev else { panic!("{ev:?}") };
                k
            };
            while let Some(ev) = queue.pop_at(now, CLASS_CLIENT) {
                got.push(tag_of(ev));
            }
            while let Some(s) = stops.pop_at(now) {
                got.push(s.cpu);
            }
            while let Some(ev) = queue.pop_at(now, CLASS_SAMPLE) {
                got.push(tag_of(ev));
            }
            // Schedule a few later events of every class, in a random order.
            for _ in 0..rng.random_range(0..4) {
                let t = now + rng.random_range(1..30u64);
                seq += 1;
                tag += 1;
                match rng.random_range(0..3) {
                    0 => {
                        queue.push(t, Event::Wake(tag));
                        pushed.push(Reverse((t, 0, seq, tag)));
                    }
                    1 => {
                        generation += 1;
                        stops.push(Stop { t, generation, cpu: tag });
                        pushed.push(Reverse((t, 1, seq, tag)));
                    }
                    _ => {
                        queue.push(t, Event::CpuStart(tag));
                        pushed.push(Reverse((t, CLASS_CPU_START, seq, tag)));
                    }
                }
            }
            reference.extend(pushed);
            if queue.peek().is_none() && stops.peek_time().is_none() {
                break;
            }
        }
        assert!(want.len() > 300, "too few events to test: {}", want.len());
        assert_eq!(got, want);
    }
}
