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
//!   ([`DwrrPolicy::round_balance`]):
//!   - Step 1, if `round(p) = highest` or p's round-expired is empty: find
//!     clients that are not running and are in round `highest` (round-active
//!     of a CPU in round `highest`) or `highest-1` (round-active or
//!     round-expired of a CPU in round `highest-1`), never those that finished
//!     round `highest`; move some to p's round-active. The authors' policy:
//!     ⌈X/2⌉ of the X clients in the round-expired queue of the first CPU in
//!     round `highest-1` ([`DwrrPolicy::steal_expired_half`]), and from the most
//!     loaded CPU in round `highest` or `highest-1` (round-active load only)
//!     as many as bring p up to the average load ([`DwrrPolicy::steal_to_average`]).
//!   - Step 2, if p's round-active is still empty: swap round-active and
//!     round-expired ([`DwrrPolicy::advance_round`]); if the new round-active is
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
//! One [`CpuPart`] per CPU (round, the two queues, the running client, their
//! loads) and the global [`Highest`]. Every cross-CPU step is a named function
//! between two per-CPU parts: [`DwrrPolicy::migrate`] and the stealing policies built
//! on it. Per-client state (weight, `used`, owner, local key, round-robin
//! links) is in dense [`ClientTable`]s, O(N) in all rather than per CPU;
//! in a concurrent host an entry is guarded by its owner CPU's lock.
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

use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::roster::{ClientTable, Roster, Status};
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

/// The global part: the highest round number of any CPU (paper 3.2.2).
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

/// Which of its CPU's two queues a waiting client is in. The queues swap
/// roles at every round advance (an O(1) swap: the clients do not move), so
/// a client records the physical slot, and the CPU says which slot is active.
type Slot = usize;

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Waiting in queue `slot` of its CPU.
    Queued(Slot),
    /// On its CPU (part of round-active).
    Running,
    /// Blocked: owned by no CPU.
    Blocked,
}

#[derive(Clone, Copy, Debug)]
struct Client<K> {
    weight: Weight,
    /// Service in the current round, in ns·U.
    used: u128,
    /// The CPU that owns it (meaningless while blocked).
    cpu: usize,
    place: Place,
    /// While blocked: the round its `used` counts toward (Gap DWRR-8).
    round: u64,
    /// The local policy's state.
    key: K,
}

/// One CPU's part of the state (paper Fig. 1): its round number, the two
/// queues of the local policy, round-active being `queues[active]`, the
/// running client, and the local-policy load of each queue (the running
/// client counts in round-active's).
#[derive(Debug, Default)]
pub struct CpuPart<L: LocalQueue> {
    round: u64,
    queues: [L; 2],
    loads: [u64; 2],
    active: Slot,
    running: Option<ClientId>,
}

impl<L: LocalQueue> CpuPart<L> {
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
        self.running
    }

    #[inline]
    fn expired_slot(&self) -> Slot {
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

    fn enqueue(&mut self, links: &mut L::Links, slot: Slot, c: ClientId, key: &mut L::Key, load: u64) {
        self.queues[slot].enter(links, c, key);
        self.loads[slot] += load;
    }

    fn dequeue(&mut self, links: &mut L::Links, slot: Slot, c: ClientId, key: &mut L::Key, load: u64) {
        self.queues[slot].exit(links, c, key);
        self.loads[slot] -= load;
    }

    /// Whether some client here may be stolen by a CPU when `highest` is `h`
    /// (paper Step 1 (i)): waiting in round-active of a round-h CPU, or in
    /// either queue of a round-(h-1) CPU.
    fn has_eligible(&self, h: u64) -> bool {
        if self.is_idle() {
            return false;
        }
        if self.round == h {
            !self.active_q().is_empty()
        } else if self.round + 1 == h {
            !self.active_q().is_empty() || !self.expired_q().is_empty()
        } else {
            false
        }
    }
}

/// DWRR over the local policy `L`.
pub type Dwrr<L> = Shell<DwrrPolicy<L>>;

/// The rules of DWRR: the global `highest` and one part per CPU.
#[derive(Debug)]
pub struct DwrrPolicy<L: LocalQueue> {
    quantum: Time,
    opts: DwrrOptions,
    highest: Highest,
    cpus: Vec<CpuPart<L>>,
    clients: ClientTable<Client<L::Key>>,
    /// The local policy's per-client links (see [`LocalQueue::Links`]).
    links: L::Links,
    migrations: u64,
    balancing_steps: u64,
}

/// DWRR over round robin, O(1) per decision (`dwrr`).
pub type DwrrRr = Shell<DwrrPolicy<RoundRobinQueue>>;
/// DWRR over a CFS-like local queue, the paper's Linux 2.6.24 port (`dwrr-cfs`).
pub type DwrrCfs = Shell<DwrrPolicy<VruntimeQueue>>;

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

impl<L: LocalQueue> Shell<DwrrPolicy<L>> {
    /// DWRR for `cfg.cpus` CPUs, dispatch quantum `cfg.quantum`, with `opts`.
    pub fn new(cfg: SchedConfig, opts: DwrrOptions) -> Dwrr<L> {
        let opts = DwrrOptions { round_unit: opts.round_unit.max(1), weight_unit: opts.weight_unit.max(1), ..opts };
        let name = match (L::SUFFIX, opts.carry_overrun) {
            ("", false) => "dwrr",
            ("", true) => "dwrr+carry",
            ("-cfs", false) => "dwrr-cfs",
            ("-cfs", true) => "dwrr-cfs+carry",
            _ => "dwrr-custom",
        };
        let policy = DwrrPolicy {
            quantum: cfg.quantum,
            opts,
            highest: Highest::default(),
            cpus: (0..cfg.cpus).map(|_| CpuPart::default()).collect(),
            clients: ClientTable::new(),
            links: L::Links::default(),
            migrations: 0,
            balancing_steps: 0,
        };
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
        self.opts
    }

    /// The global `highest`.
    pub fn highest(&self) -> u64 {
        self.highest.get()
    }

    /// CPU `k`'s part.
    pub fn cpu(&self, k: CpuId) -> Option<&CpuPart<L>> {
        self.cpus.get(k.index())
    }

    /// The CPU that owns runnable client `c` (None if blocked or unknown).
    pub fn owner(&self, c: ClientId) -> Option<CpuId> {
        self.clients.get(c).filter(|x| x.place != Place::Blocked).map(|x| CpuId(x.cpu as u32))
    }

    /// The clients waiting in CPU `k`'s round-active, in local dispatch
    /// order (the running one excluded), and in its round-expired.
    pub fn queues(&self, k: CpuId) -> (Vec<ClientId>, Vec<ClientId>) {
        self.cpus.get(k.index()).map_or((Vec::new(), Vec::new()), |p| {
            (p.active_q().in_order(&self.links).collect(), p.expired_q().in_order(&self.links).collect())
        })
    }

    /// Clients moved between CPUs by round balancing so far.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    /// Round-balancing steps so far: picks that found round-active empty
    /// and ran [`DwrrPolicy::round_balance`] (what the benchmark times apart).
    pub fn balancing_steps(&self) -> u64 {
        self.balancing_steps
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
    fn dispatch_slice(&self, c: &Client<L::Key>) -> Time {
        let left = self.slice_of(c.weight).saturating_sub(c.used);
        let ns = left.div_ceil(self.opts.weight_unit as u128).max(1);
        ns.min(self.quantum as u128) as Time
    }

    /// Arrival placement (3.2.3): the least loaded CPU that is idle or in
    /// round `highest` (ties: lowest id); an idle target takes `highest`.
    fn place(&mut self) -> usize {
        let h = self.highest.get();
        let target = (0..self.cpus.len())
            .filter(|&k| self.cpus[k].is_idle() || self.cpus[k].round == h)
            .min_by_key(|&k| (self.cpus[k].load(), k))
            // Never empty: the CPU that last reached `highest` stays there
            // until it advances (raising `highest`) or goes idle.
            .unwrap_or(0);
        if self.cpus[target].is_idle() {
            self.cpus[target].round = h;
        }
        target
    }

    /// Queue client `c` (owned by no CPU) on CPU `k`: in round-active, or
    /// in round-expired if it already finished round(k) (Gap DWRR-8).
    fn attach(&mut self, k: usize, c: ClientId, into_expired: bool) {
        let p = &mut self.cpus[k];
        let x = &mut self.clients[c];
        let slot = if into_expired { p.expired_slot() } else { p.active };
        x.cpu = k;
        x.place = Place::Queued(slot);
        p.enqueue(&mut self.links, slot, c, &mut x.key, L::load(x.weight));
    }

    /// Take waiting client `c` off its CPU (it blocks or leaves).
    fn detach(&mut self, c: ClientId) {
        let x = &mut self.clients[c];
        let Place::Queued(slot) = x.place else {
            debug_assert!(false, "detach of {c} in {:?}", x.place);
            return;
        };
        let k = x.cpu;
        self.cpus[k].dequeue(&mut self.links, slot, c, &mut x.key, L::load(x.weight));
        x.place = Place::Blocked;
        self.idle_if_empty(k);
    }

    /// Idle means owning no client, and an idle CPU is in round 0 (3.2.2 Step 2).
    fn idle_if_empty(&mut self, k: usize) {
        if self.cpus[k].is_idle() {
            self.cpus[k].round = 0;
        }
    }

    /// The round a waiting client's `used` counts toward (Gap DWRR-8).
    fn round_of(&self, c: &Client<L::Key>) -> u64 {
        let p = &self.cpus[c.cpu];
        match c.place {
            Place::Queued(slot) if slot == p.expired_slot() => p.round + 1,
            _ => p.round,
        }
    }

    /// Move waiting client `c` from round-active to round-expired of its CPU
    /// (round slicing, 3.2.1).
    fn expire_waiting(&mut self, c: ClientId) {
        let slice = self.slice_of(self.clients[c].weight);
        let used = self.next_round_used(self.clients[c].used, slice);
        let x = &mut self.clients[c];
        let p = &mut self.cpus[x.cpu];
        let load = L::load(x.weight);
        p.dequeue(&mut self.links, p.active, c, &mut x.key, load);
        x.used = used;
        x.place = Place::Queued(p.expired_slot());
        p.enqueue(&mut self.links, p.expired_slot(), c, &mut x.key, load);
    }

    // ----- cross-CPU steps: each between two per-CPU parts -----

    /// Move waiting client `c` from CPU `from` (either queue) to CPU `to`'s
    /// round-active. It keeps `used` (Gap DWRR-7). A source left with no client
    /// is idle at once (it may be between a stop and its next pick).
    pub fn migrate(&mut self, from: usize, to: usize, c: ClientId) {
        let (src, dst) = super::two_mut(&mut self.cpus, from, to);
        let x = &mut self.clients[c];
        let Place::Queued(slot) = x.place else {
            debug_assert!(false, "migrate of {c} in {:?}", x.place);
            return;
        };
        debug_assert_eq!(x.cpu, from);
        let load = L::load(x.weight);
        src.dequeue(&mut self.links, slot, c, &mut x.key, load);
        dst.enqueue(&mut self.links, dst.active, c, &mut x.key, load);
        x.cpu = to;
        x.place = Place::Queued(dst.active);
        self.migrations += 1;
        self.idle_if_empty(from);
    }

    /// The authors' policy, first part: ⌈X/2⌉ of the X clients in `from`'s
    /// round-expired (a CPU in round highest-1) to `to`'s round-active.
    pub fn steal_expired_half(&mut self, from: usize, to: usize) -> usize {
        let q = self.cpus[from].expired_q();
        let take: Vec<ClientId> = q.in_order(&self.links).take(q.len().div_ceil(2)).collect();
        for &c in &take {
            self.migrate(from, to, c);
        }
        take.len()
    }

    /// The authors' policy, second part: waiting clients of `from`'s
    /// round-active (a CPU in round highest or highest-1), in its dispatch
    /// order, each while it keeps `to`'s load at most the average `total / P`.
    pub fn steal_to_average(&mut self, from: usize, to: usize, total_load: u128) -> usize {
        let p = self.cpus.len() as u128;
        let mut load = self.cpus[to].load() as u128;
        let mut take = Vec::new();
        for c in self.cpus[from].active_q().in_order(&self.links) {
            if load * p >= total_load {
                break;
            }
            let l = L::load(self.clients[c].weight) as u128;
            if (load + l) * p <= total_load {
                load += l;
                take.push(c);
            }
        }
        for &c in &take {
            self.migrate(from, to, c);
        }
        take.len()
    }

    /// Gap DWRR-6: one eligible client from `from` (in round h or h-1) to `to`:
    /// from round-expired of a round-(h-1) CPU first, else from round-active.
    pub fn steal_one(&mut self, from: usize, to: usize) -> usize {
        let h = self.highest.get();
        let src = &self.cpus[from];
        let behind = if src.round != h { src.expired_q().in_order(&self.links).next() } else { None };
        match behind.or_else(|| src.active_q().in_order(&self.links).next()) {
            Some(c) => {
                self.migrate(from, to, c);
                1
            }
            None => 0,
        }
    }

    /// Step 1 (i): look at every other CPU once, from p+1 round the ring.
    fn survey(&self, p: usize, h: u64) -> Survey {
        let n = self.cpus.len();
        let mut s = Survey {
            first_behind: None,
            most_loaded: None,
            any_eligible: None,
            total_load: self.cpus[p].load() as u128,
        };
        let mut best = 0;
        for k in (1..n).map(|i| (p + i) % n) {
            let q = &self.cpus[k];
            s.total_load += q.load() as u128;
            if q.is_idle() {
                continue;
            }
            let behind = q.round + 1 == h;
            if behind && s.first_behind.is_none() {
                s.first_behind = Some(k);
            }
            if (q.round == h || behind) && !q.active_q().is_empty() && q.active_load() > best {
                best = q.active_load();
                s.most_loaded = Some(k);
            }
            if s.any_eligible.is_none() && q.has_eligible(h) {
                s.any_eligible = Some(k);
            }
        }
        s
    }

    /// Round balancing on CPU `p`, whose round-active is empty (3.2.2).
    pub fn round_balance(&mut self, p: usize) {
        debug_assert!(self.cpus[p].active_q().is_empty() && self.cpus[p].running.is_none());
        self.balancing_steps += 1;
        let h = self.highest.get();
        // Step 1.
        if self.cpus[p].round == h || self.cpus[p].expired_q().is_empty() {
            let owned_nothing = self.cpus[p].is_idle();
            let s = self.survey(p, h);
            let mut moved = 0;
            if let Some(a) = s.first_behind {
                moved += self.steal_expired_half(a, p);
            }
            if let Some(b) = s.most_loaded {
                moved += self.steal_to_average(b, p, s.total_load);
            }
            if moved == 0 {
                if let Some(k) = s.any_eligible {
                    moved += self.steal_one(k, p);
                }
            }
            if moved > 0 {
                if owned_nothing {
                    self.cpus[p].round = h; // Gap DWRR-5
                }
                return;
            }
        }
        // Step 2.
        self.advance_round(p);
    }

    /// Step 2: swap round-active and round-expired; idle, or the next round.
    pub fn advance_round(&mut self, p: usize) {
        let cpu = &mut self.cpus[p];
        cpu.active = cpu.expired_slot();
        if cpu.active_q().is_empty() {
            cpu.round = 0;
        } else {
            cpu.round += 1;
            self.highest.raise_to(cpu.round);
        }
    }

    /// Check the paper's Invariant 1 and our bookkeeping; `Err` names the
    /// first violation.
    ///
    /// * numThreads(p) > 1 implies round(p) ∈ {highest, highest-1} (6.1, Invariant 1);
    /// * an idle CPU is in round 0, and no CPU is beyond `highest`;
    /// * loads and client places agree with the queues, and every waiting
    ///   client has some round slice left.
    pub fn check_invariants(&self) -> Result<(), String> {
        let h = self.highest.get();
        for (k, p) in self.cpus.iter().enumerate() {
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
            let run = p.running.map_or(0, |c| L::load(self.clients[c].weight));
            for slot in 0..2 {
                let mut load = if slot == p.active { run } else { 0 };
                for c in p.queues[slot].in_order(&self.links) {
                    let x = self.clients.get(c).ok_or_else(|| format!("departed {c} queued on cpu {k}"))?;
                    if x.cpu != k || x.place != Place::Queued(slot) {
                        return Err(format!(
                            "{c} is in queue {slot} of cpu {k} but recorded {:?} on {}",
                            x.place, x.cpu
                        ));
                    }
                    if x.used >= self.slice_of(x.weight) {
                        return Err(format!("{c} waits on cpu {k} with its round slice used up"));
                    }
                    load += L::load(x.weight);
                }
                if load != p.loads[slot] {
                    return Err(format!(
                        "cpu {k}: queue {slot} load is {} but its clients weigh {load}",
                        p.loads[slot]
                    ));
                }
            }
        }
        Ok(())
    }
}

impl<L: LocalQueue> Policy for DwrrPolicy<L> {
    #[inline]
    fn work_conserving(&self) -> bool {
        false // Gap DWRR-16
    }

    #[inline]
    fn join(&mut self, _r: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        let k = self.place();
        let x = Client { weight: w, used: 0, cpu: k, place: Place::Blocked, round: 0, key: L::Key::default() };
        self.clients.insert(c, x);
        self.attach(k, c, false);
        None
    }

    #[inline]
    fn leave(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight, _was: Status) {
        if self.clients[c].place != Place::Blocked {
            self.detach(c);
        }
        self.clients.remove(c);
    }

    #[inline]
    fn block(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) {
        let round = self.round_of(&self.clients[c]);
        self.detach(c);
        self.clients[c].round = round;
    }

    #[inline]
    fn wake(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        let k = self.place();
        let t = self.cpus[k].round;
        let x = &mut self.clients[c];
        if x.round < t {
            x.used = 0;
        }
        let into_expired = x.round > t;
        self.attach(k, c, into_expired);
        None
    }

    #[inline]
    fn set_weight(&mut self, _r: &Roster, _now: Time, c: ClientId, _old: Weight, w: Weight, _status: Status) {
        let x = self.clients[c];
        let (old, new) = (L::load(x.weight), L::load(w));
        let p = &mut self.cpus[x.cpu];
        let y = &mut self.clients[c];
        match x.place {
            Place::Queued(slot) => {
                p.loads[slot] = p.loads[slot] - old + new;
                p.queues[slot].exit(&mut self.links, c, &mut y.key);
                L::rescale(&mut y.key, x.weight, w);
                p.queues[slot].enter(&mut self.links, c, &mut y.key);
            }
            Place::Running => {
                p.loads[p.active] = p.loads[p.active] - old + new;
                p.queues[p.active].release(&mut y.key);
                L::rescale(&mut y.key, x.weight, w);
                p.queues[p.active].adopt(&mut y.key);
            }
            Place::Blocked => L::rescale(&mut y.key, x.weight, w),
        }
        y.weight = w;
        let slice = self.slice_of(w);
        if x.used >= slice {
            let in_expired = matches!(x.place, Place::Queued(s) if s == self.cpus[x.cpu].expired_slot());
            match x.place {
                Place::Queued(_) if in_expired => self.clients[c].used = slice - 1,
                Place::Queued(_) => self.expire_waiting(c), // Gap DWRR-9
                Place::Blocked => {
                    // It has finished the round it was in (Gap DWRR-9, DWRR-8).
                    let used = self.next_round_used(x.used, slice);
                    let y = &mut self.clients[c];
                    y.used = used;
                    y.round += 1;
                }
                Place::Running => {} // expires when it stops
            }
        }
    }

    #[inline]
    fn pick(&mut self, _r: &Roster, _now: Time, cpu: CpuId) -> Option<(ClientId, Time)> {
        let k = cpu.index();
        if self.cpus[k].active_q().is_empty() {
            self.round_balance(k);
        }
        let p = &mut self.cpus[k];
        let c = p.queues[p.active].take_next(&mut self.links)?;
        p.running = Some(c);
        self.clients[c].place = Place::Running;
        Some((c, self.dispatch_slice(&self.clients[c])))
    }

    #[inline]
    fn stopped(&mut self, _r: &Roster, _now: Time, cpu: CpuId, c: ClientId, w: Weight, ran: Time, why: StopReason) {
        let k = cpu.index();
        let slice = self.slice_of(w);
        let used = self.clients[c].used.saturating_add(ran as u128 * self.opts.weight_unit as u128);
        let finished = used >= slice;
        let used_next = if finished { self.next_round_used(used, slice) } else { used };
        let p = &mut self.cpus[k];
        let x = &mut self.clients[c];
        L::charge(&mut x.key, ran, w);
        p.running = None;
        let (active, load) = (p.active, L::load(w));
        match why {
            StopReason::Expired | StopReason::Preempted if finished => {
                // Round slicing: its round slice is used up; it waits for the next round.
                p.queues[active].release(&mut x.key);
                p.loads[active] -= load;
                x.used = used_next;
                x.place = Place::Queued(p.expired_slot());
                p.enqueue(&mut self.links, p.expired_slot(), c, &mut x.key, load);
            }
            StopReason::Expired | StopReason::Preempted => {
                x.used = used;
                x.place = Place::Queued(active);
                p.queues[active].put_back(&mut self.links, c, &mut x.key);
            }
            StopReason::Blocked => {
                p.queues[active].release(&mut x.key);
                p.loads[active] -= load;
                x.used = used_next;
                x.place = Place::Blocked;
                x.round = p.round + u64::from(finished);
                self.idle_if_empty(k);
            }
            StopReason::Left => {
                p.loads[active] -= load;
                self.clients.remove(c);
                self.idle_if_empty(k);
            }
        }
    }

    #[inline]
    fn check_invariants(&self, _r: &Roster) -> Result<(), String> {
        DwrrPolicy::check_invariants(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MS;
    use crate::scheduler::{Decision, Scheduler};

    fn w(x: u64) -> Weight {
        Weight::new(x).unwrap()
    }

    #[test]
    fn exact_slices_in_weight_units() {
        // U = 1024, B = 30 ms: weight 820 gets 820/1024 · 30 ms = 24.0234375 ms.
        let cfg = SchedConfig::new(1, 100 * MS);
        let opts = DwrrOptions { round_unit: 30 * MS, weight_unit: 1024, carry_overrun: false };
        let mut s = DwrrRr::new(cfg, opts);
        s.join(0, ClientId(0), w(820)).unwrap();
        let Decision::Run { slice, .. } = s.pick(0, CpuId(0)).unwrap() else { panic!() };
        assert_eq!(slice, 24_023_438); // rounded up to whole ns
        s.stopped(slice, CpuId(0), ClientId(0), slice - 1, StopReason::Preempted).unwrap();
        let Decision::Run { slice, .. } = s.pick(slice, CpuId(0)).unwrap() else { panic!() };
        assert_eq!(slice, 1);
    }

    #[test]
    fn highest_only_rises() {
        let h = Highest::default();
        h.raise_to(3);
        h.raise_to(2);
        assert_eq!(h.get(), 3);
    }
}
