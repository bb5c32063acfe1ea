//! DWRR, Distributed Weighted Round-Robin (Tong Li, Dan Baumberger, Scott
//! Hahn, *Efficient and Scalable Multiprocessor Fair Scheduling Using
//! Distributed Weighted Round-Robin*, PPoPP 2009), layered over a pluggable
//! local per-CPU scheduler ([`local`]) as the paper layers it over Linux.
//!
//! Registry: `dwrr` (round-robin local queues, the role of the paper's O(1)
//! scheduler port; O(1) per decision), `dwrr-cfs` (CFS-like local queues,
//! the Linux 2.6.24 port); `+carry` on either carries the slice overrun.
//!
//! # Rules (paper section 3.2)
//!
//! * **Round slice (3.1).** A client of weight w may run `w·B` per round;
//!   B is the round slice unit. Here the round slice is `w·B / U` with U the
//!   weight unit ([`DwrrOptions::weight_unit`], default 1: weight 1 gets B),
//!   kept exact: `used` counts ns·U and is compared with `w·B`.
//! * **Per-CPU state (3.2.1).** Each CPU p has `round(p)`, a *round-active*
//!   queue (the local scheduler's run queue: it holds the clients running in
//!   round `round(p)`, the one on the CPU included) and a *round-expired*
//!   queue of the same type (clients that finished round `round(p)` and wait
//!   for `round(p)+1`). The local policy alone orders round-active.
//! * **Round slicing (3.2.1).** A client whose cumulative runtime in the round
//!   reaches its round slice is preempted and moved to round-expired.
//! * **Round balancing (3.2.2)**, when p's round-active becomes empty
//!   ([`round_balance`]):
//!   - Step 1, if `round(p) = highest` or p's round-expired is empty: find
//!     clients that are not running and are in round `highest` (round-active
//!     of a CPU in round `highest`) or `highest-1` (round-active or
//!     round-expired of a CPU in round `highest-1`), never those that finished
//!     round `highest`; move some to p's round-active. The authors' policy:
//!     ⌈X/2⌉ of the X clients in the round-expired queue of the first CPU in
//!     round `highest-1` ([`steal_expired_half`]), and from the most
//!     loaded CPU in round `highest` or `highest-1` (round-active load only)
//!     as many as bring p up to the average load ([`steal_to_average`]).
//!   - Step 2, if p's round-active is still empty: swap round-active and
//!     round-expired ([`CpuPart::advance_round`]); if the new round-active is
//!     empty p is idle and `round(p) = 0`, else `round(p) += 1` and `highest`
//!     is raised to it.
//! * **Arrival and wake-up (3.2.3).** The client goes to the round-active of
//!   the least loaded CPU among those idle or in round `highest`; an idle
//!   target takes `round = highest`. Departure needs nothing; a weight change
//!   changes the round slice.
//! * **Infeasible weights (3.2.3).** No readjustment: a heavy client keeps
//!   its round-active slot while its peers expire and are stolen, and ends up
//!   alone on its CPU, whose round then falls behind (Invariant 2, 6.1).
//! * **`highest` (3.2.4)** is the only global state ([`Highest`]): an atomic
//!   maximum, raised by Step 2 only, never lowered.
//!
//! Lag bound (Theorem 1, 6.2): a client continuously runnable with a fixed
//! feasible weight has `-3·w_max·B < lag < 2·w_max·B` over any interval
//! (w_max in units of U), when slices are enforced exactly.
//!
//! # State split
//!
//! * The global part, [`DwrrShared`]: the options, [`Highest`] (an atomic
//!   maximum) and the owner map, client → (CPU, slot), one atomic word per
//!   client id, written only under the lock of the CPU that holds the entry.
//! * One [`CpuPart`] per CPU: its round, the two local queues and their
//!   loads, which one is active, the running client, the slab ([`Entries`])
//!   of its clients' entries (weight, `used`, place, round while blocked,
//!   the local key: virtual runtime, or round-robin links naming slots of
//!   the same slab, so a queue operation needs no lookup), and its counters
//!   (clients moved in, balancing steps; the policy sums them). An entry
//!   moves with its client (migration, wake-up onto another CPU); a blocked
//!   client's entry stays in the slab of the CPU it last was on. Memory is
//!   one entry per client plus one owner word per client id, O(N) in all,
//!   plus each slab's vacant slots (a slab keeps its high-water mark).
//! * The slab, the owner map, [`Parts`]' access to the parts and [`Locked`]
//!   are the shared core's ([`crate::percpu`]); DWRR keeps its rules.
//! * Steps are functions: one-CPU steps are [`CpuPart`] methods taking the
//!   global part; cross-CPU steps ([`migrate`], [`steal_expired_half`],
//!   [`steal_to_average`], [`steal_one`], a [`wake`] onto another CPU) take
//!   the global part and two CPU parts. The steps over all the CPUs
//!   ([`pick`] with [`round_balance`], [`join`], [`wake`], [`block`],
//!   [`leave`], [`set_weight`], [`stopped`]) reach the parts through
//!   [`Parts`]: directly in [`DwrrPolicy`] (one thread, what the [`Shell`]
//!   wraps), or one lock per CPU in [`Locked`] (whose doc says which locks
//!   each step takes). Round balancing's survey and arrival placement read
//!   each CPU's [`Summary`] (round, load, round-active load, whether
//!   clients wait in either queue) one CPU at a time.
//! * In one thread every step sees what the last left, and the decisions are
//!   those of the paper's rules. Under concurrency a survey or placement may
//!   be stale by the time it acts, so every step checks again under the
//!   locks it takes: a claimed target must still be idle or in round
//!   `highest` (else placement chooses again), a stealing source must still
//!   be in round `highest` or `highest`-1, a found client's entry must still
//!   be where the owner map said, a CPU whose round-active was filled
//!   meanwhile neither balances nor advances, and a survey that saw an
//!   eligible client that another CPU took first is done again
//!   (tests/dwrr_threaded.rs drives P CPU threads and a churn thread and
//!   checks Invariant 1 and the bookkeeping at quiescent points).
//!
//! # Cost
//!
//! * `pick` with a non-empty round-active: one local dispatch, O(1) (RR) or
//!   O(log n) (CFS-like), n the clients on that CPU.
//! * `pick` with an empty round-active: round balancing, one O(P) survey of
//!   the other CPUs plus O(log n) per client moved (O(n) to choose them by
//!   load), and an O(1) queue swap. About once per CPU per round;
//!   [`DwrrPolicy::balancing_steps`] counts them, and `propshare bench` times them
//!   apart from the other decisions (about 3 ns per CPU surveyed).
//! * `stopped`: O(1) / O(log n) (requeue or expiry).
//! * `join`, `wake`: O(P) placement scan plus one local insert.
//! * `block`, `leave`, `set_weight`: one local removal or insert.
//!
//! # Gaps (paper silent or ambiguous; notes 002-dwrr.md A1-A12)
//!
//! * Gap DWRR-1: (notes A2) the paper resets `used` at expiry. A host that overruns the
//!   slice (tick granularity) then gives every weight whose slice is not a
//!   whole number of ticks a biased share, and lag grows without bound. The
//!   faithful drop is the default (`dwrr`, `dwrr-cfs`); `+carry` carries the
//!   overrun into the next round (`used -= slice`), capped below one slice so
//!   that a client never skips a round. (test: `overrun_dropped_drifts_carried_stays_bounded`)
//! * Gap DWRR-2: (units) integer weights with slice `w·B/U`, U =
//!   [`DwrrOptions::weight_unit`] (default 1, so weight 1 gets B as in the
//!   paper's example "weight two, 30 ms, 60 ms"; a host using Linux load
//!   weights sets U = 1024, the CFS port's scale, notes A9). Exact: `used` is
//!   kept in ns·U, no rounding of the slice. (untested)
//! * Gap DWRR-3: (B) our hosts give one time setting, the quantum Q, used as the
//!   local scheduler's dispatch quantum. The registry takes B = 3·Q (30 ms at
//!   Q = 10 ms, the CFS port's value); [`DwrrOptions::round_unit`] sets B. (untested)
//! * Gap DWRR-4: "exceeds its round slice" is read as `used ≥ slice`; each dispatch
//!   runs `min(Q, slice - used)`, so an exact host expires clients exactly. (untested)
//! * Gap DWRR-5: (notes A1) a CPU that owns no client and steals takes `round = highest`
//!   (the paper stamps idle CPUs only on arrival). (untested)
//! * Gap DWRR-6: (notes A6) Step 1 moves at least one eligible client whenever one exists
//!   (the authors' ⌈X/2⌉ and Y can both be 0); the fallback takes the first
//!   eligible client scanning from p+1. (untested)
//! * Gap DWRR-7: (notes A4) a client stolen from a round-active keeps its `used`; one from
//!   a round-expired keeps what its expiry left (0, or the carry). (untested)
//! * Gap DWRR-8: (notes A3) a blocking client remembers the round its `used` counts
//!   toward (its CPU's round, or the next one if it had finished its slice).
//!   On wake onto a CPU in round T: same round, it keeps `used`; earlier, it
//!   starts fresh; later (it already finished round T) it joins the target's
//!   round-expired, so sleeping never buys a second slice in one round. (untested)
//! * Gap DWRR-9: (notes A11) a weight decrease that leaves a queued client's `used` at or
//!   over its new slice expires it at once (a running one at its stop); in
//!   round-expired the carry is clamped below the new slice. The CFS-like
//!   key is rescaled by `old/new` on every weight change (as Linux's
//!   `reweight_entity`), or a client that ran light and became heavy would
//!   wait behind heavy clients whose virtual runtime hardly moves. (untested)
//! * Gap DWRR-10: (notes A5, A12) `highest` is a 64-bit atomic maximum ([`Highest`]),
//!   never lowered; idle means the CPU owns no client, and its round is 0. (untested)
//! * Gap DWRR-11: a CPU whose last client blocks, leaves or is stolen becomes idle
//!   (round 0) at once rather than at its next pick, which would do the same. (untested)
//! * Gap DWRR-12: (loads) arrival placement compares the load of every client a CPU
//!   owns (round-active, round-expired, running); the most loaded source
//!   p_b counts round-active only (running client included, as Linux does),
//!   as the paper says. Y moves clients while `(load(p) + l)·P ≤ total load`. (untested)
//! * Gap DWRR-13: "the first CPU in round highest-1" and ties for the most loaded are
//!   taken scanning from p+1 round the ring; clients are moved in the
//!   source's local dispatch order; placement ties go to the lowest CPU id. (untested)
//! * Gap DWRR-14: (notes A7) there is no periodic local load balancer; only round
//!   balancing, arrival and wake-up move clients. (untested)
//! * Gap DWRR-15: join and wake return no kick (no wake-up preemption); the local
//!   policy sees the newcomer at its next dispatch. (test: `dwrr_joins_and_wakes_never_kick`)
//! * Gap DWRR-16: (notes A10) not strictly work-conserving: a CPU may idle while the only
//!   waiting clients sit in the round-expired queue of a CPU in round
//!   `highest` (until that CPU advances, at most `w_max·B`), so
//!   [`Scheduler::work_conserving`](crate::Scheduler::work_conserving) is false. (untested)
//! * Gap DWRR-17: (notes A8) no affinity masks, no real-time class, no hotplug. (untested)
//! * Gap DWRR-18: (Theorem 1 under churn) the proof assumes a fixed runnable set;
//!   with arrivals the bound does not hold, since every arrival gets a whole
//!   slice in the current round and a stream of them can hold a round open
//!   while a client that finished it waits (tests/dwrr.rs,
//!   `arrivals_can_hold_a_round_open_without_bound`). We keep the paper's
//!   rule; from any state, once the set is fixed, the bound holds.
//!   (test: `churn_keeps_rounds_together_and_lag_bounded_rr`, `arrivals_can_hold_a_round_open_without_bound`)

pub mod local;

use std::sync::atomic::{AtomicU64, Ordering};

pub use local::{LocalQueue, RoundRobinQueue, VruntimeQueue};

use crate::percpu::{with_client, Owned, OwnerMap, Slab};
pub use crate::percpu::{Locked, Slot};

use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::roster::{Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{Policy, Shell};

/// DWRR's tunables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DwrrOptions {
    /// B, the round slice unit, in ns (at least 1).
    pub round_unit: Time,
    /// U: a client of weight w gets `w·B/U` per round (at least 1).
    pub weight_unit: u64,
    /// Carry the slice overrun into the next round (`+carry`) instead of
    /// dropping it (the paper).
    pub carry_overrun: bool,
}

impl DwrrOptions {
    /// The registry's defaults for `cfg`: B = 3·Q, U = 1, overrun dropped.
    pub fn for_config(cfg: SchedConfig) -> DwrrOptions {
        DwrrOptions { round_unit: cfg.quantum.saturating_mul(3).max(1), weight_unit: 1, carry_overrun: false }
    }

    /// The round slice of a client of weight `w`, `w·B/U` ns (rounded up,
    /// saturating): how long a round can last, and so how long a client whose
    /// weight was raised may wait for the round that pays its new weight.
    pub fn round_slice(&self, w: u64) -> Time {
        let ns = (w as u128 * self.round_unit as u128).div_ceil(self.weight_unit.max(1) as u128);
        ns.min(Time::MAX as u128) as Time
    }

    /// The same options with the overrun carried.
    pub fn with_carry(self) -> DwrrOptions {
        DwrrOptions { carry_overrun: true, ..self }
    }
}

/// The highest round number of any CPU (paper 3.2.2).
///
/// In a concurrent host every CPU reads it without a lock and Step 2 raises
/// it with `fetch_max`; it never goes down (notes A12: a plain store could).
#[derive(Debug, Default)]
pub struct Highest(AtomicU64);

impl Highest {
    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Raise to `round` if that is higher; the only update there is.
    #[inline]
    pub fn raise_to(&self, round: u64) {
        let before = self.0.fetch_max(round, Ordering::AcqRel);
        debug_assert!(self.get() >= before, "highest went down");
    }
}

/// Which of its CPU's two queues (0 or 1) a waiting client is in. The
/// queues swap roles at every round advance (an O(1) swap: the clients do
/// not move), so an entry records the physical queue, and the CPU says
/// which one is active.
type Queue = usize;

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Waiting in queue `q` of its CPU.
    Queued(Queue),
    /// On its CPU (part of round-active).
    Running,
    /// Blocked: its entry stays in its home CPU's slab, in no queue.
    Blocked,
}

/// A client's entry. It lives in the slab of the CPU that owns the client
/// (a blocked client's home: the CPU it last ran or waited on) and moves
/// with it.
#[derive(Clone, Copy, Debug)]
pub struct Entry<K> {
    client: ClientId,
    weight: Weight,
    /// Service in the current round, in ns·U.
    used: u128,
    place: Place,
    /// While blocked: the round its `used` counts toward (Gap DWRR-8).
    round: u64,
    /// The local policy's state (virtual runtime, or round-robin links).
    key: K,
}

impl<K: Default> Entry<K> {
    fn new(client: ClientId, weight: Weight) -> Entry<K> {
        Entry { client, weight, used: 0, place: Place::Blocked, round: 0, key: K::default() }
    }
}

impl<K> Owned for Entry<K> {
    #[inline]
    fn client(&self) -> ClientId {
        self.client
    }
}

/// One CPU's slab of client entries (the runnable clients it owns and
/// those blocked here).
pub type Entries<K> = Slab<Entry<K>>;

impl<K> Entries<K> {
    /// The local-policy key of slot `s`.
    #[inline]
    pub fn key(&self, s: Slot) -> &K {
        &self.get(s).key
    }

    /// The local-policy key of slot `s`, mutably.
    #[inline]
    pub fn key_mut(&mut self, s: Slot) -> &mut K {
        &mut self.get_mut(s).key
    }
}

/// The global part: the options, `highest` (paper 3.2.4: the only global
/// state of the algorithm) and the owner map, client → (CPU, slot).
///
/// The owner map ([`OwnerMap`]) is written only under the lock of the CPU
/// whose slab holds the entry, and read by anyone as a hint.
#[derive(Debug)]
pub struct DwrrShared {
    quantum: Time,
    opts: DwrrOptions,
    highest: Highest,
    owners: OwnerMap,
}

impl DwrrShared {
    /// The global part for dispatch quantum `quantum` and `opts` (B and U
    /// raised to at least 1), with room in the owner map for client ids
    /// below `capacity` (a single-threaded host grows it on join).
    pub fn new(quantum: Time, opts: DwrrOptions, capacity: usize) -> DwrrShared {
        let opts = DwrrOptions { round_unit: opts.round_unit.max(1), weight_unit: opts.weight_unit.max(1), ..opts };
        DwrrShared { quantum, opts, highest: Highest::default(), owners: OwnerMap::new(capacity) }
    }

    /// The options in force.
    pub fn options(&self) -> DwrrOptions {
        self.opts
    }

    /// The global `highest`.
    pub fn highest(&self) -> u64 {
        self.highest.get()
    }

    /// Where client `c`'s entry is: its CPU and slot.
    #[inline]
    pub fn entry_of(&self, c: ClientId) -> Option<(usize, Slot)> {
        self.owners.get(c)
    }

    /// `w·B` in ns·U: the round slice, in the units of `used`.
    #[inline]
    fn slice_of(&self, w: Weight) -> u128 {
        w.get() as u128 * self.opts.round_unit as u128
    }

    /// `used` at the start of the next round for a client that finished
    /// this one with `used ≥ slice` (Gap DWRR-1).
    #[inline]
    fn next_round_used(&self, used: u128, slice: u128) -> u128 {
        if self.opts.carry_overrun {
            (used - slice).min(slice - 1)
        } else {
            0
        }
    }

    /// Dispatch length: `min(Q, slice - used)` in ns, rounded up, at least 1.
    fn dispatch_slice<K>(&self, e: &Entry<K>) -> Time {
        let left = self.slice_of(e.weight).saturating_sub(e.used);
        let ns = left.div_ceil(self.opts.weight_unit as u128).max(1);
        ns.min(self.quantum as u128) as Time
    }
}

/// What a CPU shows the others' round balancing and arrival placement.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// round(p).
    pub round: u64,
    /// The load of every client it owns.
    pub load: u64,
    /// Round-active's load, the running client included.
    pub active_load: u64,
    /// Owns no client.
    pub idle: bool,
    /// Some client waits in round-active.
    pub active_waiting: bool,
    /// Some client waits in round-expired.
    pub expired_waiting: bool,
}

impl Summary {
    /// Whether some client here may be stolen by a CPU when `highest` is `h`
    /// (paper Step 1 (i)): waiting in round-active of a round-h CPU, or in
    /// either queue of a round-(h-1) CPU.
    pub fn has_eligible(&self, h: u64) -> bool {
        if self.idle {
            false
        } else if self.round == h {
            self.active_waiting
        } else if self.round + 1 == h {
            self.active_waiting || self.expired_waiting
        } else {
            false
        }
    }
}

/// One CPU's part (paper Fig. 1): its round number, the two queues of the
/// local policy, round-active being `queues[active]`, the running client,
/// the local-policy load of each queue (the running client counts in
/// round-active's), the entries of the clients it owns, and its counters.
#[derive(Debug)]
pub struct CpuPart<L: LocalQueue> {
    id: usize,
    round: u64,
    queues: [L; 2],
    loads: [u64; 2],
    active: Queue,
    running: Option<Slot>,
    entries: Entries<L::Key>,
    migrations: u64,
    balancing_steps: u64,
}

impl<L: LocalQueue> CpuPart<L> {
    /// The empty part of CPU `id`.
    pub fn new(id: usize) -> CpuPart<L> {
        CpuPart {
            id,
            round: 0,
            queues: Default::default(),
            loads: [0; 2],
            active: 0,
            running: None,
            entries: Entries::default(),
            migrations: 0,
            balancing_steps: 0,
        }
    }

    /// numThreads(p): clients in round-active (running one included) and round-expired.
    pub fn threads(&self) -> usize {
        self.queues[0].len() + self.queues[1].len() + usize::from(self.running.is_some())
    }

    /// Owns no client.
    pub fn is_idle(&self) -> bool {
        self.threads() == 0
    }

    /// round(p).
    pub fn round(&self) -> u64 {
        self.round
    }

    /// The load of every client this CPU owns.
    pub fn load(&self) -> u64 {
        self.loads[0] + self.loads[1]
    }

    /// The client on the CPU, if any.
    pub fn running(&self) -> Option<ClientId> {
        self.running.map(|s| self.entries.client(s))
    }

    /// The entries in this CPU's slab (its runnable clients and those blocked here).
    pub fn entries(&self) -> &Entries<L::Key> {
        &self.entries
    }

    /// Clients moved here by round balancing.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    /// Round-balancing steps this CPU ran.
    pub fn balancing_steps(&self) -> u64 {
        self.balancing_steps
    }

    /// What this CPU shows the others.
    #[inline]
    pub fn summary(&self) -> Summary {
        Summary {
            round: self.round,
            load: self.load(),
            active_load: self.active_load(),
            idle: self.is_idle(),
            active_waiting: !self.active_q().is_empty(),
            expired_waiting: !self.expired_q().is_empty(),
        }
    }

    #[inline]
    fn expired_queue(&self) -> Queue {
        1 - self.active
    }

    /// Round-active's queue (the running client is not in it).
    #[inline]
    fn active_q(&self) -> &L {
        &self.queues[self.active]
    }

    /// Round-expired's queue.
    #[inline]
    fn expired_q(&self) -> &L {
        &self.queues[1 - self.active]
    }

    /// Local-policy load of round-active, the running client included.
    #[inline]
    fn active_load(&self) -> u64 {
        self.loads[self.active]
    }

    #[inline]
    fn enqueue(&mut self, q: Queue, s: Slot, load: u64) {
        self.queues[q].enter(&mut self.entries, s);
        self.loads[q] += load;
    }

    #[inline]
    fn dequeue(&mut self, q: Queue, s: Slot, load: u64) {
        self.queues[q].exit(&mut self.entries, s);
        self.loads[q] -= load;
    }

    /// Idle means owning no client, and an idle CPU is in round 0 (3.2.2 Step 2).
    #[inline]
    fn idle_if_empty(&mut self) {
        if self.is_idle() {
            self.round = 0;
        }
    }

    /// Chosen by arrival placement: an idle CPU takes round `highest`.
    /// False if it is neither idle nor in round `highest` (any more: in a
    /// concurrent host `highest` may have risen since the choice).
    #[inline]
    fn claim(&mut self, sh: &DwrrShared) -> bool {
        let h = sh.highest.get();
        if self.is_idle() {
            self.round = h;
        }
        self.round == h
    }

    /// The round a waiting client's `used` counts toward (Gap DWRR-8).
    fn round_of(&self, e: &Entry<L::Key>) -> u64 {
        match e.place {
            Place::Queued(q) if q == self.expired_queue() => self.round + 1,
            _ => self.round,
        }
    }

    /// Queue slot `s` (owned by no CPU until now): in round-active, or in
    /// round-expired if it already finished round(p) (Gap DWRR-8).
    fn attach(&mut self, s: Slot, into_expired: bool) {
        let q = if into_expired { self.expired_queue() } else { self.active };
        let e = self.entries.get_mut(s);
        e.place = Place::Queued(q);
        let load = L::load(e.weight);
        self.enqueue(q, s, load);
    }

    /// Take waiting slot `s` off the queues (it blocks or leaves).
    fn detach(&mut self, s: Slot) {
        let e = self.entries.get(s);
        let Place::Queued(q) = e.place else {
            debug_assert!(false, "detach of {} in {:?}", e.client, e.place);
            return;
        };
        self.dequeue(q, s, L::load(e.weight));
        self.entries.get_mut(s).place = Place::Blocked;
        self.idle_if_empty();
    }

    /// Move waiting slot `s` from round-active to round-expired (round
    /// slicing, 3.2.1).
    fn expire_waiting(&mut self, sh: &DwrrShared, s: Slot) {
        let e = self.entries.get(s);
        let slice = sh.slice_of(e.weight);
        let used = sh.next_round_used(e.used, slice);
        let load = L::load(e.weight);
        self.dequeue(self.active, s, load);
        let expired = self.expired_queue();
        let e = self.entries.get_mut(s);
        e.used = used;
        e.place = Place::Queued(expired);
        self.enqueue(expired, s, load);
    }

    /// Blocked slot `s` wakes here (Gap DWRR-8): same round, it keeps
    /// `used`; earlier, it starts fresh; later, it goes to round-expired.
    fn wake_here(&mut self, s: Slot) {
        let t = self.round;
        let e = self.entries.get_mut(s);
        if e.round < t {
            e.used = 0;
        }
        let into_expired = e.round > t;
        self.attach(s, into_expired);
    }

    /// Waiting slot `s` blocks; false if it is not waiting.
    fn block(&mut self, s: Slot) -> bool {
        let e = self.entries.get(s);
        if !matches!(e.place, Place::Queued(_)) {
            return false;
        }
        let round = self.round_of(e);
        self.detach(s);
        self.entries.get_mut(s).round = round;
        true
    }

    /// Waiting or blocked slot `s` leaves; false if it is running.
    fn leave(&mut self, sh: &DwrrShared, s: Slot) -> bool {
        match self.entries.get(s).place {
            Place::Running => return false,
            Place::Queued(_) => self.detach(s),
            Place::Blocked => {}
        }
        let e = self.entries.remove(s);
        sh.owners.clear(e.client);
        true
    }

    /// Slot `s`'s weight becomes `w` (Gap DWRR-9).
    fn set_weight(&mut self, sh: &DwrrShared, s: Slot, w: Weight) {
        let x = *self.entries.get(s);
        let (old, new) = (L::load(x.weight), L::load(w));
        match x.place {
            Place::Queued(q) => {
                self.loads[q] = self.loads[q] - old + new;
                self.queues[q].exit(&mut self.entries, s);
                L::rescale(self.entries.key_mut(s), x.weight, w);
                self.queues[q].enter(&mut self.entries, s);
            }
            Place::Running => {
                let a = self.active;
                self.loads[a] = self.loads[a] - old + new;
                let key = self.entries.key_mut(s);
                self.queues[a].release(key);
                L::rescale(key, x.weight, w);
                self.queues[a].adopt(key);
            }
            Place::Blocked => L::rescale(self.entries.key_mut(s), x.weight, w),
        }
        self.entries.get_mut(s).weight = w;
        let slice = sh.slice_of(w);
        if x.used >= slice {
            match x.place {
                Place::Queued(q) if q == self.expired_queue() => self.entries.get_mut(s).used = slice - 1,
                Place::Queued(_) => self.expire_waiting(sh, s), // Gap DWRR-9
                Place::Blocked => {
                    // It has finished the round it was in (Gap DWRR-9, DWRR-8).
                    let e = self.entries.get_mut(s);
                    e.used = sh.next_round_used(x.used, slice);
                    e.round += 1;
                }
                Place::Running => {} // expires when it stops
            }
        }
    }

    /// Local dispatch from round-active: the client and its dispatch length.
    fn take_next(&mut self, sh: &DwrrShared) -> Option<(ClientId, Time)> {
        let s = self.queues[self.active].take_next(&mut self.entries)?;
        self.running = Some(s);
        let e = self.entries.get_mut(s);
        e.place = Place::Running;
        Some((e.client, sh.dispatch_slice(e)))
    }

    /// The running client stops after `ran` ns; returns it.
    fn stopped(&mut self, sh: &DwrrShared, ran: Time, why: StopReason) -> Option<ClientId> {
        let s = self.running.take()?;
        let e = self.entries.get(s);
        let (c, w) = (e.client, e.weight);
        let slice = sh.slice_of(w);
        let used = e.used.saturating_add(ran as u128 * sh.opts.weight_unit as u128);
        let finished = used >= slice;
        let used_next = if finished { sh.next_round_used(used, slice) } else { used };
        let (active, expired, load) = (self.active, self.expired_queue(), L::load(w));
        L::charge(self.entries.key_mut(s), ran, w);
        match why {
            StopReason::Expired | StopReason::Preempted if finished => {
                // Round slicing: its round slice is used up; it waits for the next round.
                self.queues[active].release(self.entries.key_mut(s));
                self.loads[active] -= load;
                let e = self.entries.get_mut(s);
                e.used = used_next;
                e.place = Place::Queued(expired);
                self.enqueue(expired, s, load);
            }
            StopReason::Expired | StopReason::Preempted => {
                let e = self.entries.get_mut(s);
                e.used = used;
                e.place = Place::Queued(active);
                self.queues[active].put_back(&mut self.entries, s);
            }
            StopReason::Blocked => {
                self.queues[active].release(self.entries.key_mut(s));
                self.loads[active] -= load;
                let round = self.round + u64::from(finished);
                let e = self.entries.get_mut(s);
                e.used = used_next;
                e.place = Place::Blocked;
                e.round = round;
                self.idle_if_empty();
            }
            StopReason::Left => {
                self.loads[active] -= load;
                self.entries.remove(s);
                sh.owners.clear(c);
                self.idle_if_empty();
            }
        }
        Some(c)
    }

    /// Step 2: swap round-active and round-expired; idle, or the next round.
    pub fn advance_round(&mut self, sh: &DwrrShared) {
        self.active = self.expired_queue();
        if self.active_q().is_empty() {
            self.round = 0;
        } else {
            self.round += 1;
            sh.highest.raise_to(self.round);
        }
    }
}

// ----- cross-CPU steps: each a function of two per-CPU parts and the global part -----

/// Move slot `s`'s entry from `from`'s slab to `to`'s, and the owner map
/// with it; returns its slot in `to`.
fn move_entry<L: LocalQueue>(sh: &DwrrShared, from: &mut CpuPart<L>, to: &mut CpuPart<L>, s: Slot) -> Slot {
    sh.owners.move_entry(&mut from.entries, s, &mut to.entries, to.id)
}

/// Move waiting slot `s` from `from` (either queue) to `to`'s round-active.
/// It keeps `used` (Gap DWRR-7). A destination that owned no client takes
/// round `highest` (Gap DWRR-5); a source left with no client is idle at
/// once (it may be between a stop and its next pick).
pub fn migrate<L: LocalQueue>(sh: &DwrrShared, from: &mut CpuPart<L>, to: &mut CpuPart<L>, s: Slot) {
    let e = from.entries.get(s);
    let Place::Queued(q) = e.place else {
        debug_assert!(false, "migrate of {} in {:?}", e.client, e.place);
        return;
    };
    let load = L::load(e.weight);
    from.dequeue(q, s, load);
    if to.is_idle() {
        to.round = sh.highest.get(); // Gap DWRR-5
    }
    let t = move_entry(sh, from, to, s);
    to.entries.get_mut(t).place = Place::Queued(to.active);
    to.enqueue(to.active, t, load);
    to.migrations += 1;
    from.idle_if_empty();
}

/// The authors' policy, first part: ⌈X/2⌉ of the X clients in `from`'s
/// round-expired (a CPU in round `h`-1) to `to`'s round-active.
pub fn steal_expired_half<L: LocalQueue>(sh: &DwrrShared, from: &mut CpuPart<L>, to: &mut CpuPart<L>) -> usize {
    if from.is_idle() || from.round + 1 != sh.highest.get() {
        return 0; // no longer a source (a concurrent host surveyed it earlier)
    }
    let q = from.expired_q();
    let take: Vec<Slot> = q.in_order(&from.entries).take(q.len().div_ceil(2)).collect();
    for &s in &take {
        migrate(sh, from, to, s);
    }
    take.len()
}

/// The authors' policy, second part: waiting clients of `from`'s
/// round-active (a CPU in round `h` or `h`-1), in its dispatch order, each
/// while it keeps `to`'s load at most the average `total / cpus`.
pub fn steal_to_average<L: LocalQueue>(
    sh: &DwrrShared,
    from: &mut CpuPart<L>,
    to: &mut CpuPart<L>,
    total_load: u128,
    cpus: usize,
) -> usize {
    let h = sh.highest.get();
    if from.is_idle() || (from.round != h && from.round + 1 != h) {
        return 0;
    }
    let p = cpus as u128;
    let mut load = to.load() as u128;
    let mut take = Vec::new();
    for s in from.active_q().in_order(&from.entries) {
        if load * p >= total_load {
            break;
        }
        let l = L::load(from.entries.get(s).weight) as u128;
        if (load + l) * p <= total_load {
            load += l;
            take.push(s);
        }
    }
    for &s in &take {
        migrate(sh, from, to, s);
    }
    take.len()
}

/// Gap DWRR-6: one eligible client from `from` (in round `h` or `h`-1) to
/// `to`: from round-expired of a round-(h-1) CPU first, else from round-active.
pub fn steal_one<L: LocalQueue>(sh: &DwrrShared, from: &mut CpuPart<L>, to: &mut CpuPart<L>) -> usize {
    let h = sh.highest.get();
    if !from.summary().has_eligible(h) {
        return 0;
    }
    let behind = if from.round != h { from.expired_q().in_order(&from.entries).next() } else { None };
    let first = behind.or_else(|| from.active_q().in_order(&from.entries).next());
    match first {
        Some(s) => {
            migrate(sh, from, to, s);
            1
        }
        None => 0,
    }
}

// ----- steps over all the parts -----

/// How a step reaches the per-CPU parts ([`crate::percpu::Parts`] over
/// DWRR's [`CpuPart`]): directly (one thread: a slice of parts, as
/// [`DwrrPolicy`] holds them) or under one lock per CPU ([`Locked`]).
///
/// Locks under [`Locked`]: a one-CPU step (`pick`'s dispatch, `stopped`,
/// `block`, `leave`, `set_weight`, Step 2, and `join` or a `wake` that
/// stays home) holds its CPU's lock alone; a cross-CPU step ([`migrate`]
/// and the stealing policies, a `wake` onto another CPU) holds both CPUs'
/// locks, in CPU id order; the survey and arrival placement take each
/// CPU's lock in turn, alone, to read its [`Summary`]. No step holds a lock
/// while it waits for `highest` (an atomic) or for the owner map (atomics,
/// read as a hint and checked again under the lock).
pub trait Parts<L: LocalQueue>: crate::percpu::Parts<Part = CpuPart<L>> {}

impl<L: LocalQueue, P: crate::percpu::Parts<Part = CpuPart<L>> + ?Sized> Parts<L> for P {}

/// Arrival placement (3.2.3): the least loaded CPU that is idle or in
/// round `highest` (ties: lowest id). The caller claims it
/// ([`CpuPart::claim`]) under the lock it queues under, and chooses again
/// if the claim fails (only possible in a concurrent host).
fn place<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P) -> usize {
    let h = sh.highest.get();
    let mut best: Option<(u64, usize)> = None;
    for k in 0..parts.count() {
        let s = parts.with(k, |q| q.summary());
        if (s.idle || s.round == h) && best.is_none_or(|(load, _)| s.load < load) {
            best = Some((s.load, k));
        }
    }
    // Never empty in one thread: the CPU that last reached `highest` stays
    // there until it advances (raising `highest`) or goes idle.
    best.map_or(0, |(_, k)| k)
}

/// Client `c` (no entry yet; its id must fit the owner map) joins with weight `w`.
pub fn join<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, c: ClientId, w: Weight) {
    loop {
        let k = place(sh, parts);
        let joined = parts.with(k, |q| {
            q.claim(sh).then(|| {
                let s = q.entries.insert(Entry::new(c, w));
                sh.owners.set(c, k, s);
                q.attach(s, false);
            })
        });
        if joined.is_some() {
            return;
        }
    }
}

/// Blocked client `c` wakes onto the CPU arrival placement chooses; its
/// entry moves there from its home. False if `c` is not blocked.
pub fn wake<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, c: ClientId) -> bool {
    /// What one attempt found.
    enum Woke {
        Done,
        NotBlocked,
        Again,
    }
    loop {
        let Some((home, s)) = sh.entry_of(c) else { return false };
        let k = place(sh, parts);
        let found = |q: &CpuPart<L>| {
            if sh.entry_of(c) != Some((home, s)) {
                Err(Woke::Again) // it moved meanwhile
            } else if q.entries.get(s).place != Place::Blocked {
                Err(Woke::NotBlocked)
            } else {
                Ok(())
            }
        };
        let woke = if k == home {
            parts.with(k, |q| {
                found(q)?;
                if !q.claim(sh) {
                    return Err(Woke::Again);
                }
                q.wake_here(s);
                Ok(())
            })
        } else {
            parts.with_two(home, k, |from, to| {
                found(from)?;
                if !to.claim(sh) {
                    return Err(Woke::Again);
                }
                let t = move_entry(sh, from, to, s);
                to.wake_here(t);
                Ok(())
            })
        };
        match woke.err().unwrap_or(Woke::Done) {
            Woke::Done => return true,
            Woke::NotBlocked => return false,
            Woke::Again => {}
        }
    }
}

/// Waiting client `c` blocks; false if it is not waiting.
pub fn block<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, c: ClientId) -> bool {
    with_client(&sh.owners, parts, c, |q, s| q.block(s)) == Some(true)
}

/// Waiting or blocked client `c` leaves; false if it is running or unknown.
pub fn leave<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, c: ClientId) -> bool {
    with_client(&sh.owners, parts, c, |q, s| q.leave(sh, s)) == Some(true)
}

/// Client `c`'s weight becomes `w`; false if `c` is unknown.
pub fn set_weight<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, c: ClientId, w: Weight) -> bool {
    with_client(&sh.owners, parts, c, |q, s| q.set_weight(sh, s, w)).is_some()
}

/// CPU `k` (running nothing) picks: round balancing first if its
/// round-active is empty, then one local dispatch.
pub fn pick<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, k: usize) -> Option<(ClientId, Time)> {
    if parts.with(k, |q| q.active_q().is_empty()) {
        round_balance(sh, parts, k);
    }
    parts.with(k, |q| q.take_next(sh))
}

/// CPU `k`'s running client stops after `ran` ns; returns it.
pub fn stopped<L: LocalQueue, P: Parts<L> + ?Sized>(
    sh: &DwrrShared,
    parts: &mut P,
    k: usize,
    ran: Time,
    why: StopReason,
) -> Option<ClientId> {
    parts.with(k, |q| q.stopped(sh, ran, why))
}

/// One Step 1 survey of the other CPUs (paper 3.2.2, the authors' policy).
struct Survey {
    /// The first CPU in round highest-1 that owns clients.
    first_behind: Option<usize>,
    /// The CPU in round highest or highest-1 with the largest round-active
    /// load among those with a waiting client in round-active.
    most_loaded: Option<usize>,
    /// Some CPU with an eligible client (for the A6 fallback).
    any_eligible: Option<usize>,
    /// Load of every CPU together.
    total_load: u128,
}

/// Step 1 (i): look at every other CPU's summary once, from p+1 round the ring.
fn survey<L: LocalQueue, P: Parts<L> + ?Sized>(parts: &mut P, p: usize, h: u64) -> Survey {
    let n = parts.count();
    let mut s = Survey {
        first_behind: None,
        most_loaded: None,
        any_eligible: None,
        total_load: parts.with(p, |q| q.load()) as u128,
    };
    let mut best = 0;
    for k in (1..n).map(|i| (p + i) % n) {
        let q = parts.with(k, |q| q.summary());
        s.total_load += q.load as u128;
        if q.idle {
            continue;
        }
        let behind = q.round + 1 == h;
        if behind && s.first_behind.is_none() {
            s.first_behind = Some(k);
        }
        if (q.round == h || behind) && q.active_waiting && q.active_load > best {
            best = q.active_load;
            s.most_loaded = Some(k);
        }
        if s.any_eligible.is_none() && q.has_eligible(h) {
            s.any_eligible = Some(k);
        }
    }
    s
}

/// Round balancing on CPU `p`, whose round-active is empty (3.2.2).
pub fn round_balance<L: LocalQueue, P: Parts<L> + ?Sized>(sh: &DwrrShared, parts: &mut P, p: usize) {
    // One pass in one thread; in a concurrent host, again while the survey
    // saw an eligible client that another CPU took first.
    loop {
        let h = sh.highest.get();
        let state = parts.with(p, |q| {
            // In a concurrent host a join or wake may have filled it since.
            (q.active_q().is_empty() && q.running.is_none()).then(|| {
                q.balancing_steps += 1;
                q.round == h || q.expired_q().is_empty()
            })
        });
        let Some(step1) = state else { return };
        // Step 1.
        if step1 {
            let s = survey(parts, p, h);
            let mut moved = 0;
            if let Some(a) = s.first_behind {
                moved += parts.with_two(a, p, |src, dst| steal_expired_half(sh, src, dst));
            }
            if let Some(b) = s.most_loaded {
                let cpus = parts.count();
                moved += parts.with_two(b, p, |src, dst| steal_to_average(sh, src, dst, s.total_load, cpus));
            }
            if moved == 0 {
                if let Some(k) = s.any_eligible {
                    moved += parts.with_two(k, p, |src, dst| steal_one(sh, src, dst));
                    if moved == 0 {
                        continue;
                    }
                }
            }
            if moved > 0 {
                return;
            }
        }
        // Step 2 (unless, in a concurrent host, a client arrived meanwhile).
        parts.with(p, |q| {
            if q.active_q().is_empty() {
                q.advance_round(sh);
            }
        });
        return;
    }
}

/// Check the paper's Invariant 1 and our bookkeeping over the global part
/// and every CPU's part (in CPU order); `Err` names the first violation.
///
/// * numThreads(p) > 1 implies round(p) ∈ {highest, highest-1} (6.1, Invariant 1);
/// * an idle CPU is in round 0, and no CPU is beyond `highest`;
/// * loads and entry places agree with the queues and the running slot,
///   and every waiting client has some round slice left;
/// * every entry is where the owner map says, and the map names no other.
pub fn check_invariants<'a, L: LocalQueue + 'a>(
    sh: &DwrrShared,
    parts: impl IntoIterator<Item = &'a CpuPart<L>>,
) -> Result<(), String> {
    let h = sh.highest.get();
    let mut entries = 0;
    for (k, p) in parts.into_iter().enumerate() {
        if p.id != k {
            return Err(format!("part {k} says it is cpu {}", p.id));
        }
        let n = p.threads();
        if n > 1 && p.round != h && p.round + 1 != h {
            return Err(format!("cpu {k} holds {n} clients in round {} but highest is {h}", p.round));
        }
        if n == 0 && p.round != 0 {
            return Err(format!("idle cpu {k} is in round {}", p.round));
        }
        if p.round > h {
            return Err(format!("cpu {k} is in round {} beyond highest {h}", p.round));
        }
        let run = match p.running {
            Some(s) => {
                let e = p.entries.try_get(s).ok_or_else(|| format!("cpu {k} runs vacant slot {s}"))?;
                if e.place != Place::Running {
                    return Err(format!("cpu {k} runs {} recorded {:?}", e.client, e.place));
                }
                L::load(e.weight)
            }
            None => 0,
        };
        for q in 0..2 {
            let mut load = if q == p.active { run } else { 0 };
            for s in p.queues[q].in_order(&p.entries) {
                let x = p.entries.try_get(s).ok_or_else(|| format!("vacant slot {s} queued on cpu {k}"))?;
                if x.place != Place::Queued(q) {
                    return Err(format!("{} is in queue {q} of cpu {k} but recorded {:?}", x.client, x.place));
                }
                if x.used >= sh.slice_of(x.weight) {
                    return Err(format!("{} waits on cpu {k} with its round slice used up", x.client));
                }
                load += L::load(x.weight);
            }
            if load != p.loads[q] {
                return Err(format!("cpu {k}: queue {q} load is {} but its clients weigh {load}", p.loads[q]));
            }
        }
        entries += sh.owners.check_slab(k, &p.entries)?;
        let placed = p.entries.iter().filter(|(_, e)| e.place != Place::Blocked).count();
        if placed != n {
            return Err(format!("cpu {k} owns {n} clients but {placed} of its entries are runnable"));
        }
    }
    sh.owners.check_count(entries)
}

/// DWRR over the local policy `L`.
pub type Dwrr<L> = Shell<DwrrPolicy<L>>;

/// The rules of DWRR, one thread: the global part and one part per CPU,
/// calling the step functions above.
#[derive(Debug)]
pub struct DwrrPolicy<L: LocalQueue> {
    shared: DwrrShared,
    cpus: Vec<CpuPart<L>>,
}

/// DWRR over round robin, O(1) per decision (`dwrr`).
pub type DwrrRr = Shell<DwrrPolicy<RoundRobinQueue>>;
/// DWRR over a CFS-like local queue, the paper's Linux 2.6.24 port (`dwrr-cfs`).
pub type DwrrCfs = Shell<DwrrPolicy<VruntimeQueue>>;

impl<L: LocalQueue> Shell<DwrrPolicy<L>> {
    /// DWRR for `cfg.cpus` CPUs, dispatch quantum `cfg.quantum`, with `opts`.
    pub fn new(cfg: SchedConfig, opts: DwrrOptions) -> Dwrr<L> {
        let shared = DwrrShared::new(cfg.quantum, opts, 0);
        let name = match (L::SUFFIX, shared.opts.carry_overrun) {
            ("", false) => "dwrr",
            ("", true) => "dwrr+carry",
            ("-cfs", false) => "dwrr-cfs",
            ("-cfs", true) => "dwrr-cfs+carry",
            _ => "dwrr-custom",
        };
        let policy = DwrrPolicy { shared, cpus: (0..cfg.cpus).map(CpuPart::new).collect() };
        Shell::build(name, &cfg, policy)
    }

    /// The registry's `dwrr` family: default options, overrun dropped or carried.
    pub fn registered(cfg: SchedConfig, carry: bool) -> Dwrr<L> {
        let opts = DwrrOptions::for_config(cfg);
        Shell::<DwrrPolicy<L>>::new(cfg, if carry { opts.with_carry() } else { opts })
    }
}

impl<L: LocalQueue> DwrrPolicy<L> {
    /// The options in force.
    pub fn options(&self) -> DwrrOptions {
        self.shared.opts
    }

    /// The global `highest`.
    pub fn highest(&self) -> u64 {
        self.shared.highest()
    }

    /// CPU `k`'s part.
    pub fn cpu(&self, k: CpuId) -> Option<&CpuPart<L>> {
        self.cpus.get(k.index())
    }

    /// The CPU that owns runnable client `c` (None if blocked or unknown).
    pub fn owner(&self, c: ClientId) -> Option<CpuId> {
        let (k, s) = self.shared.entry_of(c)?;
        (self.cpus[k].entries.get(s).place != Place::Blocked).then_some(CpuId(k as u32))
    }

    /// The clients waiting in CPU `k`'s round-active, in local dispatch
    /// order (the running one excluded), and in its round-expired.
    pub fn queues(&self, k: CpuId) -> (Vec<ClientId>, Vec<ClientId>) {
        self.cpus.get(k.index()).map_or((Vec::new(), Vec::new()), |p| {
            let clients = |q: &L| q.in_order(&p.entries).map(|s| p.entries.client(s)).collect();
            (clients(p.active_q()), clients(p.expired_q()))
        })
    }

    /// Clients moved between CPUs by round balancing so far (the sum of
    /// every CPU's count).
    pub fn migrations(&self) -> u64 {
        self.cpus.iter().map(CpuPart::migrations).sum()
    }

    /// Round-balancing steps so far: picks that found round-active empty
    /// and ran [`round_balance`] (what the benchmark times apart).
    pub fn balancing_steps(&self) -> u64 {
        self.cpus.iter().map(CpuPart::balancing_steps).sum()
    }

    /// Round balancing on CPU `p`, whose round-active is empty (3.2.2).
    pub fn round_balance(&mut self, p: usize) {
        round_balance(&self.shared, self.cpus.as_mut_slice(), p);
    }

    /// Check the invariants over every part ([`check_invariants`]).
    pub fn check_invariants(&self) -> Result<(), String> {
        check_invariants(&self.shared, &self.cpus)
    }
}

impl<L: LocalQueue> Policy for DwrrPolicy<L> {
    #[inline]
    fn work_conserving(&self) -> bool {
        false // Gap DWRR-16
    }

    #[inline]
    fn join(&mut self, _r: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        self.shared.owners.reserve(c);
        join(&self.shared, self.cpus.as_mut_slice(), c, w);
        None
    }

    #[inline]
    fn leave(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight, _was: Status) {
        let gone = leave(&self.shared, self.cpus.as_mut_slice(), c);
        debug_assert!(gone, "{c} left while running");
    }

    #[inline]
    fn block(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) {
        let blocked = block(&self.shared, self.cpus.as_mut_slice(), c);
        debug_assert!(blocked, "{c} blocked while not waiting");
    }

    #[inline]
    fn wake(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        let woken = wake(&self.shared, self.cpus.as_mut_slice(), c);
        debug_assert!(woken, "{c} woke while not blocked");
        None
    }

    #[inline]
    fn set_weight(&mut self, _r: &Roster, _now: Time, c: ClientId, _old: Weight, w: Weight, _status: Status) {
        set_weight(&self.shared, self.cpus.as_mut_slice(), c, w);
    }

    #[inline]
    fn pick(&mut self, _r: &Roster, _now: Time, cpu: CpuId) -> Option<(ClientId, Time)> {
        pick(&self.shared, self.cpus.as_mut_slice(), cpu.index())
    }

    #[inline]
    fn stopped(&mut self, _r: &Roster, _now: Time, cpu: CpuId, c: ClientId, _w: Weight, ran: Time, why: StopReason) {
        let was = self.cpus[cpu.index()].stopped(&self.shared, ran, why);
        debug_assert_eq!(was, Some(c));
    }

    #[inline]
    fn check_invariants(&self, _r: &Roster) -> Result<(), String> {
        DwrrPolicy::check_invariants(self)
    }
}
