//! SFS, surplus fair scheduling (Chandra, Adler, Goyal, Shenoy, "Surplus Fair
//! Scheduling: A Proportional-Share CPU Scheduling Algorithm for Symmetric
//! Multiprocessors", OSDI 2000): one global run queue, weights readjusted so
//! that no client asks for more than one CPU (section 2.2, [`crate::readjust`]),
//! and each CPU that needs work runs the waiting client that is least ahead
//! of the multiprocessor fluid model (GMS).
//!
//! # The maths (section 2.3)
//!
//! Every client has a user weight `w`, an instantaneous (readjusted) weight
//! `φ`, a start tag `S` and a finish tag `F`. `φ·S` approximates the service
//! the client has received; the virtual time `v` is the smallest start tag
//! of any runnable client, so `φ·v` approximates what the least-served client
//! got. The *surplus* of client i is (Eq. 4)
//!
//! ```text
//!     α_i = φ_i · (S_i − v)     ≥ 0 for every runnable client, = 0 for the one(s) at v.
//! ```
//!
//! Rules, as the paper states them:
//!
//! * Arrival: `S = v` (and `F = S`: undefined until the first run).
//! * End of a quantum in which the client ran `q` ns (Eq. 5): `F = S + q/φ`,
//!   with φ its instantaneous weight *at the end* of the quantum.
//! * Start tag (Eq. 6): `S = F` if it is still runnable; `S = max(F, v)` when
//!   it wakes up.
//! * `v` = min S over all runnable clients, *running ones included*; it starts
//!   at 0 and, while nothing is runnable, stays at the finish tag of the
//!   client that ran last.
//! * Each scheduling instant on a CPU runs the waiting client with the least α.
//! * Readjustment runs after every arrival, departure, block, wake-up and
//!   weight change (section 3.1).
//!
//! On one CPU nobody runs at a pick, so the least α is 0 and belongs to the
//! least start tag: SFS is exactly SFQ there (section 2.3).
//!
//! Options, each its own registry name:
//! * `sfs+heuristic` (section 3.2): do not re-sort the surplus queue each time
//!   v changes; examine only the first `k` (default 20) waiting clients of
//!   each queue (least stale surplus, least start tag, and least weight, the
//!   weight queue read from its light end), compute their current α and run
//!   the least; re-sort every `resort_every` (default 50) picks. "The first
//!   k of the surplus queue" is its order at the v of the last re-sort.
//! * `sfs+affinity` (section 2.4): among the `B` (default 4) waiting clients
//!   with the least α, run one that last ran on this CPU, else the least;
//!   bounded: the affine client must be within one quantum of service of the
//!   least surplus. The paper's literal rule (no bound) starves clients
//!   whenever at most B clients wait: on one CPU with two clients, the one
//!   that ran last is always among the B least and always preferred, forever.
//!   It is kept as an unregistered option (`affinity_slack: None`) and a test
//!   shows the starvation.
//!
//! State split (issue 15): the queues, tags and v are the global part; where
//! each client last ran is per-CPU state, one [`crate::percpu::AffinePart`]
//! per CPU listing the clients that last ran there (kept only with B > 1).
//! A stop on another CPU than last time moves the client's entry between
//! two parts ([`crate::percpu::ran_on`]). [`SfsPolicy::shell`] takes the
//! parts from a concurrent host, each behind its own lock
//! ([`crate::percpu::LockedAffinity`], tests/affinity_threaded.rs).
//!
//! # Data structures (section 3.1) and how the surplus order stays exact
//!
//! * `Qw`: runnable clients by weight, heaviest first ([`FeasibleSet`]); it
//!   drives readjustment in O(P) and, read backwards, the heuristic.
//! * `QS`: runnable clients (running included) by start tag; its head is v.
//! * `Qα`: waiting clients by surplus. The key `φ_i (S_i − v)` is not a
//!   fixed key: two clients with different φ swap order as v grows
//!   (α_i − α_j falls by `(φ_i − φ_j)·Δv`), which is why the paper
//!   recomputes every surplus and re-sorts whenever v changes. Two exact
//!   forms are implemented ([`SurplusOrder`]):
//!   - default, *weight classes* (module `kinetic`): one queue per distinct
//!     φ value, ordered by (S, id). Within a class the surplus order is the
//!     start-tag order at every v, so nothing is ever re-sorted; the least
//!     surplus is the least (α, S, id) among the G class heads (G = number
//!     of distinct φ, at most the number of distinct weights + 1). A head's
//!     surplus `α(x) = φ·S − φ·x` is a line in the time x, and x only
//!     grows, so the heads sit in a *kinetic tournament*: a binary tree
//!     whose nodes hold the winner of their two children at the current
//!     time and the exact time (a 256-by-128-bit division) at which the
//!     loser would overtake it. Moving time forward recomputes only the
//!     nodes whose certificate fell due; a changed head recomputes its path
//!     (lazily, at the next query). The least n are found best-first from
//!     the root. The exact pick keeps the tournament at v; the heuristic
//!     keeps it at the v of its last re-sort, so that "re-sorting" is moving
//!     its time forward, and caches the 2k least at that time;
//!   - the paper's single sorted queue (`ResortOnVirtualTime`): entries keyed
//!     by the exact pair (φ, S − v_sorted) for a reference `v_sorted`, so it
//!     is an ordinary ordered set until v moves; when it has, the queue is
//!     re-keyed and rebuilt (O(t)) before the pick, or for the heuristic
//!     every `resort_every` picks. Either structure gives every variant the
//!     same decisions (a property test runs them side by side).
//!
//!   In both, a client whose S or φ changes (quantum end, readjustment,
//!   weight change) is removed under its old key and re-inserted under its
//!   new one. Every exact pick is the least (α, S, id); the property tests
//!   compare every pick with [`Sfs::min_surplus_scan`], an O(t) scan kept as
//!   the reference.
//!
//! All comparisons are exact integers: S and v are `u128` fixed point
//! ([`crate::vtime`]), φ is a rational `num/den` with 64-bit parts, and
//! `α_i < α_j` is decided as `num_i·den_j·(S_i − v) < num_j·den_i·(S_j − v)`
//! in 256-bit arithmetic (a 128-bit by 128-bit product cannot overflow it).
//!
//! # Cost (t runnable clients, P CPUs)
//!
//! | operation | cost |
//! |---|---|
//! | join, wake | O(log t) in each queue; readjustment O(P) plus an O(log t) re-insertion for each of the ≤ 2(P−1) clients whose φ changed |
//! | leave, block | O(log t) removals; readjustment as above |
//! | stopped | O(log t) in `QS` and `Qα`; readjustment if it blocked or left |
//! | pick, exact (weight classes) | O(log t) for the removal, plus O(log G) per head change and per certificate that falls due since the last pick; O(B·(log G + log t)·log B) with affinity |
//! | pick, exact (re-sorted queue), v unchanged | O(B + log t) |
//! | pick, exact (re-sorted queue), v changed | re-key O(t), re-sort O(t) when nearly sorted (O(t log t) worst), bulk rebuild O(t): the paper's O(t log t); v changes about once every P picks (section 3.2) |
//! | pick, heuristic (weight classes) | O(k log t) to read `QS` and `Qw`, 3k exact α comparisons; `Qα`'s first k from the cache, refilled (O(k·(log G + log t)·log k) plus the stale tournament paths) when fewer than k remain cached or after a re-sort; no O(t) step |
//! | pick, heuristic (re-sorted queue) | as above, with the O(t) rebuild every `resort_every` picks |
//!
//! Measured (`propshare bench`, P = 8, N = 16 / 256 / 4096, ~1000 distinct
//! weights, a block and a wake every 16 stops, median ns per decision, the
//! old and new binaries run back to back): sfs 315 / 852 / 907,
//! sfs+heuristic 872 / 2357 / 2408, sfs+affinity 493 / 1273 / 1230; with
//! the class heads compared one by one and the heuristic on the re-sorted
//! queue they were 463 / 4907 / 18650, 852 / 2639 / 15150 and
//! 575 / 7069 / 94054. With G in the hundreds the exact pick is now cheaper
//! than the heuristic, whose 3k exact comparisons per pick are its floor.
//!
//! The paper's doubly linked lists give O(1) removal but O(t) insertion;
//! balanced trees give O(log t) for both.
//!
//! # Gaps (decisions where the paper is silent)
//!
//! * Gap SFS-1: while nothing is runnable, v = max(v, F of the client that stopped
//!   last). The paper says "set to the finish tag of the thread that ran last";
//!   that F can be below v if that client blocked before others left, and v
//!   must never decrease (arrivals enter at v). SFQ's own rule (the largest
//!   finish tag served, end of a busy period) differs, so on one CPU SFS and
//!   `sfq` make the same decisions except after the CPU has had nothing
//!   runnable (a test shows one such case).
//!   (test: `idle_virtual_time_is_last_finish`, `one_cpu_idle_virtual_time_differs_from_sfq`)
//! * Gap SFS-2: the paper re-sorts the surplus queue only when v changes. A
//!   readjustment or weight change also changes φ and hence α, so we
//!   re-insert every client whose φ changed; without this the exact pick is
//!   wrong. (test: `readjustment_reorders_the_surplus_queue`)
//! * Gap SFS-3: the default surplus queue is weight classes under a kinetic
//!   tournament instead of the paper's single surplus list (same decisions,
//!   nothing re-sorted); the heuristic reads it at the v of its last
//!   re-sort, which gives exactly the paper's stale list order, so its
//!   decisions are those of the re-sorted list too (tested side by side).
//!   The paper's list is kept as `SurplusOrder::ResortOnVirtualTime`. Its
//!   re-sort happens lazily at the next pick (the only reader of the
//!   order), with an adaptive stable sort (linear on nearly sorted input,
//!   O(t log t) worst) instead of insertion sort (quadratic worst case),
//!   into a B-tree rather than a linked list.
//!   (test: `kinetic_classes_decide_as_the_resorted_queue`)
//! * Gap SFS-4: `Qα` holds waiting clients only (a client leaves it when picked and
//!   re-enters at its quantum end); `QS` and `Qw` hold every runnable client,
//!   running ones included, as v and readjustment need them. The paper's
//!   queues hold all runnable clients; exact picks are the same either way. (untested)
//! * Gap SFS-5: ties in α ("broken arbitrarily") go to the smaller start tag, then
//!   the smaller client id; on one CPU this is SFQ's (start tag, id) order. (untested)
//! * Gap SFS-6: no preemption on arrival or wake-up (`Kick` is `None`): the paper
//!   invokes the scheduler only when a quantum expires or a client blocks.
//!   For sweeps, [`SfsOptions::preempt`] (unregistered) kicks the CPU whose
//!   running client has the greatest surplus when a newcomer's is smaller,
//!   and [`SfsOptions::tie`] can break ties by id alone. (test: `sfs_joins_and_wakes_never_kick`)
//! * Gap SFS-7: the slice is the configured quantum (the paper: Linux's 200 ms);
//!   `F` is charged with the time actually run, as the host reports it in ns
//!   (so a client that blocks early is charged exactly, never zero ticks).
//!   (test: `finish_tag_from_actual_run_and_wake_rule`)
//! * Gap SFS-8: a waking client restarts with φ = w, then readjustment runs. (untested)
//! * Gap SFS-9: the heuristic's "first few of the weight queue" means its light end
//!   (the queue is heaviest first; small φ gives small α); "first k" counts
//!   waiting clients (running ones are skipped in `QS` and `Qw`); the full
//!   re-sort period, "every so often" in the paper, is 50 picks; candidates
//!   are ranked by their exact current α.
//!   (test: `heuristic_on_weight_classes_decides_as_on_the_resorted_queue`)
//! * Gap SFS-10: the affinity bias B is not given in the paper; `sfs+affinity` uses
//!   B = 4. With the heuristic, the B lowest candidates are used. (test: `affinity_bias`)
//! * Gap SFS-11: the literal affinity rule can starve (above); `sfs+affinity` prefers
//!   an affine client only if its surplus is at most the least surplus plus
//!   one quantum (an exact comparison), which keeps every client live.
//!   (test: `literal_affinity_rule_starves`)
//! * Gap SFS-12: tags use the crate's 2^-32 ns fixed point in u128 instead of the
//!   paper's 10^4 scale in machine words; the horizon (over 10^5 years at
//!   φ ≥ 1/P, P ≤ 2^20) makes the paper's wraparound rebasing unnecessary.
//!   Arithmetic that could still overflow on absurd host input saturates.
//!   (test: `surplus_compares_exactly_where_u128_would_overflow`)
//! * Gap SFS-13: fewer runnable clients than CPUs: readjustment uses P' = min(P, t)
//!   (see [`crate::readjust`]), so no φ is ever 0. (untested)
//! * Gap SFS-14: section 4.3's "each short task ran for 300ms" is read as 300 ms
//!   of CPU time (`work`), the next task joining the instant the previous one
//!   has it; the wall-clock reading (`lifetime`) is the `-wall` scenario. The
//!   paper's Fig. 5 gives no horizon; ours is 120 s (scenarios under
//!   `scenarios/papers/sfs/frequent-arrivals-4.3*.toml`). (untested)
//! * Gap SFS-15: a weight change (`setweight`, section 3.1) moves the client's
//!   tags so that its lag in service `φ(S − v)` is kept: `S' = v + (S − v)
//!   φ/φ'` (F likewise), φ the instantaneous weight before and the new
//!   weight, if it is a raise; a drop keeps the tags ([`keep_lag`]); readjustment then runs as the paper says, and a φ it
//!   changes keeps S (Eq. 4 reads the current φ). The paper does not say
//!   what S becomes. Keeping S, as we did, turned the one-quantum lead a
//!   client earned at weight 1 into a thousand-quantum lead when it was
//!   raised to 1000: it did not run for 20 s while its fluid share was 2/3
//!   of a CPU (`scenarios/examples/reweight-starvation.toml`).
//!   (test: `raised_weight_is_not_starved`)
//!
//! Readjustment can be switched off ([`SfsOptions::readjust`], not
//! registered) to show why it is part of SFS: without it SFS starves a
//! client in the section 4.2 scenario exactly as SFQ does.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::percpu::{Affinity, AffinityParts};
use crate::readjust::{readjust_weights, FeasibleSet, Phi};
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{Policy, Shell};
use crate::vtime::{keep_lag, VTime, VT_SCALE};
use crate::wide::U256;

mod kinetic;
use kinetic::KineticClasses;

/// The paper's k: clients examined per queue by the heuristic (section 3.2).
pub const DEFAULT_HEURISTIC_K: usize = 20;
/// Picks between two full surplus re-sorts under the heuristic (Gap: the paper says "every so often").
pub const DEFAULT_RESORT_EVERY: u64 = 50;
/// The affinity bias B of `sfs+affinity` (Gap: the paper gives no value).
pub const DEFAULT_AFFINITY_BIAS: usize = 4;

/// The cost-cutting heuristic of section 3.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heuristic {
    /// k: waiting clients examined at the head of each of the three queues.
    pub per_queue: usize,
    /// Re-key and re-sort the surplus queue after this many picks.
    pub resort_every: u64,
}

impl Default for Heuristic {
    fn default() -> Heuristic {
        Heuristic { per_queue: DEFAULT_HEURISTIC_K, resort_every: DEFAULT_RESORT_EVERY }
    }
}

/// Variants of SFS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SfsOptions {
    /// Readjust infeasible weights (section 2.2). Part of SFS; off only to show why.
    pub readjust: bool,
    /// Examine only a few clients per pick (section 3.2); `None` is the exact pick.
    pub heuristic: Option<Heuristic>,
    /// Processor affinity bias B (section 2.4); 1 is pure SFS.
    pub affinity_bias: usize,
    /// With B > 1: prefer a client that last ran on this CPU only if its
    /// surplus exceeds the least by at most this many ns of service. `None`
    /// is the paper's literal rule, which can starve (see the module doc).
    pub affinity_slack: Option<Time>,
    /// How ties in surplus are broken.
    pub tie: Tie,
    /// Ask the host to preempt on arrival and wake-up (a [`Kick`]) when the
    /// newcomer's surplus is below that of some running client. Not in the
    /// paper (its scheduler runs only at quantum ends and blocks); for sweeps.
    pub preempt: bool,
    /// The structure behind `Qα` (the same decisions either way; the
    /// heuristic reads it in its order at the last re-sort).
    pub surplus_order: SurplusOrder,
}

/// The structure behind the exact least-surplus pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SurplusOrder {
    /// One start-tag queue per distinct φ, the heads in a kinetic
    /// tournament. Within a class the surplus order is the start-tag order
    /// whatever v is, so nothing is ever re-sorted: O(log G) per head change
    /// or overtaking between heads, O(1) for the least.
    #[default]
    WeightClasses,
    /// The paper's single surplus queue (section 3.1), re-keyed and re-sorted
    /// whenever v has moved (with the heuristic: every `resort_every`
    /// picks): O(t) to O(t log t) per re-sort.
    ResortOnVirtualTime,
}

/// How ties in surplus are broken (Gap: "arbitrarily" in the paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Tie {
    /// The smaller start tag, then the smaller client id (the default; SFQ's order on one CPU).
    #[default]
    StartTag,
    /// The smaller client id only.
    ClientId,
}

impl SfsOptions {
    /// Exact SFS as in section 2.3.
    pub const EXACT: SfsOptions = SfsOptions {
        readjust: true,
        heuristic: None,
        affinity_bias: 1,
        affinity_slack: None,
        tie: Tie::StartTag,
        preempt: false,
        surplus_order: SurplusOrder::WeightClasses,
    };
}

impl Default for SfsOptions {
    fn default() -> SfsOptions {
        SfsOptions::EXACT
    }
}

/// An exact surplus `α = φ·(S − v)`, in tag units (ns · 2^32): compare two
/// with `Ord` (256-bit cross-multiplication, never overflows).
#[derive(Clone, Copy, Debug)]
pub struct Surplus {
    /// The client's instantaneous weight φ.
    pub phi: Phi,
    /// `S − v`, at least 0.
    pub lag: VTime,
}

impl Surplus {
    /// α = 0: the client is at the virtual time.
    pub fn is_zero(&self) -> bool {
        self.lag == 0 || self.phi.num == 0
    }

    /// Whether `self ≤ other + ns` nanoseconds of service, exactly.
    pub fn within(&self, other: &Surplus, ns: Time) -> bool {
        // num_a·den_b·lag_a ≤ num_b·den_a·lag_b + ns·2^32·den_a·den_b, in 256 bits.
        let lhs = U256::mul(self.phi.num as u128 * other.phi.den as u128, self.lag);
        let rhs = U256::mul(other.phi.num as u128 * self.phi.den as u128, other.lag);
        let slack = U256::mul(ns as u128 * VT_SCALE, self.phi.den as u128 * other.phi.den as u128);
        lhs <= rhs.saturating_add(slack)
    }

    /// `floor(α)` in ns, for reports (saturates).
    pub fn ns_floor(&self) -> u128 {
        let (hi, lo) = U256::mul(self.phi.num as u128, self.lag).parts();
        if hi != 0 {
            return u128::MAX;
        }
        lo / self.phi.den.max(1) as u128 / VT_SCALE
    }
}

impl PartialEq for Surplus {
    fn eq(&self, other: &Surplus) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Surplus {}

impl PartialOrd for Surplus {
    fn partial_cmp(&self, other: &Surplus) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Surplus {
    /// `num_a/den_a · lag_a` against `num_b/den_b · lag_b`, as
    /// `(num_a·den_b)·lag_a` against `(num_b·den_a)·lag_b` in 256 bits.
    fn cmp(&self, other: &Surplus) -> Ordering {
        let a = self.phi.num as u128 * other.phi.den as u128;
        let b = other.phi.num as u128 * self.phi.den as u128;
        // Fast path, the usual case: four factors below 2^64, two 64-bit products.
        if (a | b | self.lag | other.lag) >> 64 == 0 {
            return (a * self.lag).cmp(&(b * other.lag));
        }
        U256::mul(a, self.lag).cmp(&U256::mul(b, other.lag))
    }
}

/// The tag advance `q / φ` in fixed point (the formula of
/// [`crate::vtime::tag_delta`]), saturating instead of overflowing.
fn charge(ran: Time, phi: Phi) -> VTime {
    (ran as u128).checked_mul(VT_SCALE * phi.den as u128).map_or(VTime::MAX, |x| x / phi.num.max(1) as u128)
}

#[derive(Clone, Copy, Debug)]
struct Client {
    phi: Phi,
    start: VTime,
    finish: VTime,
    /// Capped by the last readjustment.
    capped: bool,
}

/// One waiting client in the surplus queue, with the φ and S it was queued under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Queued {
    client: ClientId,
    phi: Phi,
    start: VTime,
}

impl Queued {
    fn surplus(&self, v: VTime) -> Surplus {
        Surplus { phi: self.phi, lag: self.start.saturating_sub(v) }
    }

    /// The pick order at virtual time v: least α, then (by default) least S, then least id.
    fn order(&self, other: &Queued, v: VTime, tie: Tie) -> Ordering {
        self.surplus(v)
            .cmp(&other.surplus(v))
            .then(self.tie_key(tie).cmp(&other.tie_key(tie)))
            .then(self.client.cmp(&other.client))
    }

    fn tie_key(&self, tie: Tie) -> VTime {
        match tie {
            Tie::StartTag => self.start,
            Tie::ClientId => 0,
        }
    }
}

/// A client's position in `Qα`: (α at `v_sorted`, tie key (S by default), id). The surplus is
/// stored as (φ, S − v_sorted), an exact value with a context-free order,
/// so the queue is an ordinary ordered set until `v_sorted` moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SurplusKey {
    alpha: Surplus,
    tie: VTime,
    client: ClientId,
    start: VTime,
}

impl SurplusKey {
    fn queued(&self) -> Queued {
        Queued { client: self.client, phi: self.alpha.phi, start: self.start }
    }
}

/// `Qα`: waiting clients by [`Queued::order`] at `v_sorted`.
#[derive(Clone, Debug)]
struct SurplusQueue {
    set: BTreeSet<SurplusKey>,
    v_sorted: VTime,
    tie: Tie,
}

impl SurplusQueue {
    fn key(&self, q: Queued) -> SurplusKey {
        SurplusKey { alpha: q.surplus(self.v_sorted), tie: q.tie_key(self.tie), client: q.client, start: q.start }
    }

    fn insert(&mut self, q: Queued) {
        self.set.insert(self.key(q));
    }

    fn remove(&mut self, q: Queued) -> bool {
        self.set.remove(&self.key(q))
    }

    fn len(&self) -> usize {
        self.set.len()
    }

    /// The first `n` entries, least surplus first.
    fn head(&self, n: usize) -> impl Iterator<Item = Queued> + '_ {
        self.set.iter().take(n).map(SurplusKey::queued)
    }

    /// Re-key every entry for the virtual time `v` and rebuild: the keys
    /// are collected, sorted (adaptive: linear when the order barely
    /// changed) and bulk-loaded.
    fn resort(&mut self, v: VTime) {
        self.v_sorted = v;
        let set = std::mem::take(&mut self.set);
        self.set = set.into_iter().map(|k| self.key(k.queued())).collect();
    }
}

/// Surplus fair scheduling on one global run queue.
pub type Sfs = Shell<SfsPolicy>;

/// The rules of SFS: the queues by weight, start tag and surplus, and v.
#[derive(Clone, Debug)]
pub struct SfsPolicy<A = Affinity> {
    opts: SfsOptions,
    quantum: Time,
    clients: ClientTable<Client>,
    /// `Qw`: runnable clients by weight.
    by_weight: FeasibleSet,
    /// `QS`: runnable clients by start tag.
    by_start: BTreeSet<(VTime, ClientId)>,
    /// `Qα` for [`SurplusOrder::ResortOnVirtualTime`].
    by_surplus: SurplusQueue,
    /// `Qα` for [`SurplusOrder::WeightClasses`], kept at v (exact) or at
    /// the v of the last re-sort (heuristic).
    by_class: KineticClasses,
    v: VTime,
    last_finish: VTime,
    capped: Vec<ClientId>,
    picks_since_sort: u64,
    /// Where each client last ran, in per-CPU parts (kept only with
    /// affinity, B > 1; a stop on another CPU moves a client's entry).
    affinity: A,
}

impl Sfs {
    /// Exact SFS (`sfs`).
    pub fn new(cfg: SchedConfig) -> Sfs {
        Sfs::with_options(cfg, SfsOptions::EXACT)
    }

    /// SFS with processor affinity bias B = 4, an affine client being
    /// preferred only within one quantum of the least surplus (`sfs+affinity`).
    pub fn with_affinity(cfg: SchedConfig) -> Sfs {
        let opts =
            SfsOptions { affinity_bias: DEFAULT_AFFINITY_BIAS, affinity_slack: Some(cfg.quantum), ..SfsOptions::EXACT };
        Sfs::with_options(cfg, opts)
    }

    /// Any combination of the options.
    pub fn with_options(cfg: SchedConfig, opts: SfsOptions) -> Sfs {
        SfsPolicy::shell(cfg, opts, Affinity::new(cfg.cpus))
    }

    /// `c`'s surplus (section 2.3), if it is runnable.
    pub fn surplus(&self, c: ClientId) -> Option<Surplus> {
        self.policy().surplus(self.roster(), c)
    }

    /// The least surplus among waiting clients by a full scan (for tests).
    pub fn min_surplus_scan(&self) -> Option<(ClientId, Surplus)> {
        self.policy().min_surplus_scan(self.roster())
    }
}

impl<A: AffinityParts> SfsPolicy<A> {
    /// [`Sfs::with_options`] with its processor affinity reached through
    /// `affinity` (a concurrent host's [`crate::percpu::LockedAffinity`]:
    /// the central queues are the global part, each CPU's affinity its own).
    pub fn shell(cfg: SchedConfig, opts: SfsOptions, affinity: A) -> Shell<SfsPolicy<A>> {
        let opts = SfsOptions {
            affinity_bias: opts.affinity_bias.max(1),
            heuristic: opts
                .heuristic
                .map(|h| Heuristic { per_queue: h.per_queue.max(1), resort_every: h.resort_every.max(1) }),
            ..opts
        };
        let name = format!(
            "sfs{}{}{}{}{}",
            if opts.readjust { "" } else { "-readjust" },
            if opts.heuristic.is_some() { "+heuristic" } else { "" },
            match (opts.affinity_bias > 1, opts.affinity_slack) {
                (false, _) => "",
                (true, Some(_)) => "+affinity",
                (true, None) => "+affinity-literal",
            },
            if opts.tie == Tie::ClientId { "+tie-id" } else { "" },
            if opts.preempt { "+preempt" } else { "" },
        );
        let policy = SfsPolicy {
            opts,
            quantum: cfg.quantum,
            clients: ClientTable::new(),
            by_weight: FeasibleSet::new(),
            by_start: BTreeSet::new(),
            by_surplus: SurplusQueue { set: BTreeSet::new(), v_sorted: 0, tie: opts.tie },
            by_class: KineticClasses::new(opts.tie, opts.heuristic.map_or(0, |h| 2 * h.per_queue)),
            v: 0,
            last_finish: 0,
            capped: Vec::new(),
            picks_since_sort: 0,
            affinity,
        };
        Shell::build(name, &cfg, policy)
    }

    /// The options this instance runs with.
    pub fn options(&self) -> SfsOptions {
        self.opts
    }

    /// The virtual time v.
    pub fn virtual_time(&self) -> VTime {
        self.v
    }

    /// The start tag of a client.
    pub fn start_tag(&self, c: ClientId) -> Option<VTime> {
        self.clients.get(c).map(|x| x.start)
    }

    /// The finish tag of a client (its start tag until it first runs).
    pub fn finish_tag(&self, c: ClientId) -> Option<VTime> {
        self.clients.get(c).map(|x| x.finish)
    }

    /// The instantaneous (readjusted) weight of a client.
    pub fn phi(&self, c: ClientId) -> Option<Phi> {
        self.clients.get(c).map(|x| x.phi)
    }

    /// The current surplus of a runnable client (running or waiting).
    pub fn surplus(&self, roster: &Roster, c: ClientId) -> Option<Surplus> {
        if !roster.status(c).ok()?.is_runnable() {
            return None;
        }
        self.queued(c).map(|q| q.surplus(self.v))
    }

    /// The reference exact pick by an O(t) scan: the waiting client with the
    /// least (α, S, id) at the current v, and its surplus.
    pub fn min_surplus_scan(&self, roster: &Roster) -> Option<(ClientId, Surplus)> {
        self.by_start
            .iter()
            .filter(|&&(_, c)| roster.status(c) == Ok(Status::Runnable))
            .filter_map(|&(_, c)| self.queued(c))
            .min_by(|a, b| a.order(b, self.v, self.opts.tie))
            .map(|q| (q.client, q.surplus(self.v)))
    }

    fn queued(&self, c: ClientId) -> Option<Queued> {
        self.clients.get(c).map(|x| Queued { client: c, phi: x.phi, start: x.start })
    }

    /// Put a runnable client into the three queues.
    fn enter(&mut self, c: ClientId, w: Weight) {
        let q = self.queued(c).expect("client exists");
        self.by_weight.insert(c, w);
        self.by_start.insert((q.start, c));
        self.queue_insert(q);
    }

    /// Take a client that stopped being runnable out of `QS` and `Qw` (it is
    /// not in `Qα` when it was running).
    fn exit(&mut self, c: ClientId, w: Weight, was_waiting: bool) {
        let q = self.queued(c).expect("client exists");
        if was_waiting {
            self.queue_remove(q);
        }
        self.by_start.remove(&(q.start, c));
        self.by_weight.remove(c, w);
    }

    /// v = min S over runnable clients; frozen (at the last finish tag, never
    /// lower) when there are none.
    fn update_v(&mut self) {
        self.v = match self.by_start.first() {
            Some(&(s, _)) => s,
            None => self.v.max(self.last_finish),
        };
        // The exact weight-class queue follows v; the heuristic's moves only at a re-sort.
        if self.classes() && self.opts.heuristic.is_none() {
            self.by_class.advance(self.v);
        }
    }

    /// Section 2.2 readjustment over the runnable set; re-queue every
    /// client whose φ changed.
    fn readjust(&mut self, roster: &Roster) {
        if !self.opts.readjust {
            return;
        }
        let r = self.by_weight.readjust(roster.cpus());
        let now: Vec<ClientId> = self.by_weight.heaviest(r.capped).map(|(c, _)| c).collect();
        let old = std::mem::take(&mut self.capped);
        for &c in &old {
            if let Some(x) = self.clients.get_mut(c) {
                x.capped = false;
            }
        }
        for &c in &now {
            self.clients[c].capped = true;
        }
        for &c in &old {
            if self.clients.get(c).is_some_and(|x| !x.capped) {
                if let Ok(w) = roster.weight(c) {
                    self.set_phi(roster, c, Phi::whole(w.get()));
                }
            }
        }
        let phi = r.capped_phi();
        for &c in &now {
            self.set_phi(roster, c, phi);
        }
        self.capped = now;
    }

    /// Change φ, moving the client in `Qα` if it waits there.
    fn set_phi(&mut self, roster: &Roster, c: ClientId, phi: Phi) {
        let Some(x) = self.clients.get(c) else { return };
        if x.phi == phi {
            return;
        }
        let waiting = roster.status(c) == Ok(Status::Runnable);
        if waiting {
            self.queue_remove(self.queued(c).expect("exists"));
        }
        self.clients[c].phi = phi;
        if waiting {
            self.queue_insert(self.queued(c).expect("exists"));
        }
    }

    /// Before `c`'s weight changes to `phi` (Gap SFS-15): move its tags so
    /// that its lag in service `φ(S − v)` is kept, `S' = v + (S − v) φ/φ'`
    /// ([`keep_lag`]); v does not move (S ≥ v, and S = v stays at v).
    fn keep_lag(&mut self, roster: &Roster, c: ClientId, phi: Phi) {
        let Ok(status) = roster.status(c) else { return };
        let v = self.v;
        let waiting = status == Status::Runnable;
        let q = self.queued(c).expect("client exists");
        if waiting {
            self.queue_remove(q);
        }
        let x = &mut self.clients[c];
        let (start, finish) = (keep_lag(x.start, v, x.phi, phi), keep_lag(x.finish, v, x.phi, phi));
        (x.start, x.finish) = (start, finish);
        if status.is_runnable() {
            self.by_start.remove(&(q.start, c));
            self.by_start.insert((start, c));
        }
        if waiting {
            self.queue_insert(self.queued(c).expect("exists"));
        }
    }

    fn classes(&self) -> bool {
        self.opts.surplus_order == SurplusOrder::WeightClasses
    }

    fn queue_insert(&mut self, q: Queued) {
        if self.classes() {
            self.by_class.insert(q);
        } else {
            self.by_surplus.insert(q);
        }
    }

    fn queue_remove(&mut self, q: Queued) {
        if self.classes() {
            self.by_class.remove(q);
        } else {
            self.by_surplus.remove(q);
        }
    }

    fn queue_len(&self) -> usize {
        if self.classes() {
            self.by_class.len()
        } else {
            self.by_surplus.len()
        }
    }

    /// The waiting clients this pick considers, best first: the head of the
    /// exact `Qα`, or the heuristic's candidates ranked by current α.
    fn candidates(&mut self, roster: &Roster, want: usize) -> Vec<ClientId> {
        let Some(h) = self.opts.heuristic else {
            if self.classes() {
                return self.by_class.least(want).into_iter().map(|q| q.client).collect();
            }
            if self.by_surplus.v_sorted != self.v {
                self.by_surplus.resort(self.v);
            }
            return self.by_surplus.head(want).map(|q| q.client).collect();
        };
        self.picks_since_sort += 1;
        if self.picks_since_sort >= h.resort_every {
            self.picks_since_sort = 0;
            if self.classes() {
                self.by_class.advance(self.v);
            } else {
                self.by_surplus.resort(self.v);
            }
        }
        let k = h.per_queue;
        let waiting = |c: &ClientId| roster.status(*c) == Ok(Status::Runnable);
        // The first k of Qα in its order at the last re-sort (either structure gives the same k).
        let mut cands: Vec<Queued> = Vec::with_capacity(3 * k);
        if self.classes() {
            cands.extend(self.by_class.least(k));
        } else {
            cands.extend(self.by_surplus.head(k));
        }
        let by_s = self.by_start.iter().map(|&(_, c)| c).filter(waiting).take(k);
        let by_w = self.by_weight.iter().rev().map(|(c, _)| c).filter(waiting).take(k);
        cands.extend(by_s.chain(by_w).filter_map(|c| self.queued(c)));
        // Rank by exact current α; a client found in several queues is the
        // same entry, so duplicates sort next to each other.
        let (v, tie) = (self.v, self.opts.tie);
        if want == 1 {
            return cands.into_iter().min_by(|a, b| a.order(b, v, tie)).map(|q| q.client).into_iter().collect();
        }
        cands.sort_unstable_by(|a, b| a.order(b, v, tie));
        cands.dedup_by_key(|q| q.client);
        cands.truncate(want);
        cands.into_iter().map(|q| q.client).collect()
    }

    /// With [`SfsOptions::preempt`]: the CPU whose running client has the
    /// greatest surplus, if the newcomer `c`'s surplus is smaller. O(P).
    fn kick_for(&self, roster: &Roster, c: ClientId) -> Kick {
        if !self.opts.preempt {
            return None;
        }
        let mine = self.surplus(roster, c)?;
        let (cpu, theirs) = (0..roster.cpus())
            .filter_map(|k| {
                let cpu = CpuId(k as u32);
                Some((cpu, self.surplus(roster, roster.on_cpu(cpu)?)?))
            })
            .max_by(|a, b| a.1.cmp(&b.1))?;
        (mine < theirs).then_some(cpu)
    }

    /// Check every internal invariant against the roster; `Err` names the
    /// first violation. O(t log t); for tests.
    fn check(&self, roster: &Roster) -> Result<(), String> {
        let mut runnable: Vec<(ClientId, Weight)> = Vec::new();
        let mut waiting = 0;
        for (c, status, w) in roster.iter() {
            let x = self.clients.get(c).ok_or_else(|| format!("{c} has no tags"))?;
            if status.is_runnable() {
                runnable.push((c, w));
                if !self.by_start.contains(&(x.start, c)) {
                    return Err(format!("{c} is runnable but not in QS under its start tag"));
                }
                // α ≥ 0 for every runnable client, running ones included.
                if x.start < self.v {
                    return Err(format!("{c} has S < v: negative surplus"));
                }
            } else if x.phi != Phi::whole(w.get()) {
                return Err(format!("blocked {c} has φ {:?} ≠ w {w}", x.phi));
            }
            if status == Status::Runnable {
                waiting += 1;
                let q = self.queued(c).expect("exists");
                let queued = if self.classes() {
                    self.by_class.contains(q)
                } else {
                    self.by_surplus.set.contains(&self.by_surplus.key(q))
                };
                if !queued {
                    return Err(format!("waiting {c} is not in Qα under its current φ and S"));
                }
            }
        }
        if self.clients.iter().count() != roster.iter().count() {
            return Err("tags for a departed client".into());
        }
        // Every affinity entry where the owner map says, one per client at most.
        let affine = self.affinity.check()?;
        if affine > roster.len() {
            return Err(format!("{affine} affinity entries for {} clients", roster.len()));
        }
        if self.by_start.len() != runnable.len() || self.by_weight.len() != runnable.len() {
            return Err(format!(
                "QS has {}, Qw {}, but {} clients are runnable",
                self.by_start.len(),
                self.by_weight.len(),
                runnable.len()
            ));
        }
        if self.queue_len() != waiting {
            return Err(format!("Qα has {} entries for {waiting} waiting clients", self.queue_len()));
        }
        let unused = if self.classes() { self.by_surplus.len() } else { self.by_class.len() };
        if unused != 0 {
            return Err("the unused surplus structure is not empty".into());
        }
        let vs = if self.classes() { self.by_class.at() } else { self.by_surplus.v_sorted };
        if vs > self.v {
            return Err("Qα ordered for a future virtual time".into());
        }
        if self.classes() && self.opts.heuristic.is_none() && vs != self.v {
            return Err("exact Qα ordered for a past virtual time".into());
        }
        self.by_class.check()?;
        if self.by_surplus.set.iter().any(|k| k.start.checked_sub(vs) != Some(k.alpha.lag)) {
            return Err("Qα keyed for another virtual time".into());
        }
        match self.by_start.first() {
            Some(&(s, c)) if s != self.v => return Err(format!("v ≠ S of {c}, the least start tag")),
            None if self.v < self.last_finish => return Err("idle v below the last finish tag".into()),
            _ => {}
        }
        let weights: Vec<u64> = runnable.iter().map(|&(_, w)| w.get()).collect();
        let want = if self.opts.readjust {
            readjust_weights(&weights, roster.cpus())
        } else {
            weights.iter().map(|&w| Phi::whole(w)).collect()
        };
        for (&(c, _), phi) in runnable.iter().zip(want) {
            if self.clients[c].phi != phi {
                return Err(format!("{c} has φ {:?}, readjustment gives {phi:?}", self.clients[c].phi));
            }
        }
        if self.capped.len() >= roster.cpus().max(1) {
            return Err(format!("{} clients capped on {} CPUs", self.capped.len(), roster.cpus()));
        }
        Ok(())
    }
}

impl<A: AffinityParts> Policy for SfsPolicy<A> {
    #[inline]
    fn join(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        // Arrival: S = v (F = S until it first runs).
        let v = self.v;
        self.clients.insert(c, Client { phi: Phi::whole(w.get()), start: v, finish: v, capped: false });
        self.enter(c, w);
        self.update_v();
        self.readjust(roster);
        self.kick_for(roster, c)
    }

    #[inline]
    fn leave(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight, was: Status) {
        if was == Status::Runnable {
            self.exit(c, w, true);
        }
        self.clients.remove(c);
        self.affinity.forget(c);
        if was == Status::Runnable {
            self.update_v();
            self.readjust(roster);
        }
    }

    #[inline]
    fn block(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight) {
        self.exit(c, w, true);
        self.update_v();
        self.readjust(roster);
    }

    #[inline]
    fn wake(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        // Eq. 6: a waking client restarts at max(F, v): no credit for sleeping.
        let v = self.v;
        let x = &mut self.clients[c];
        x.phi = Phi::whole(w.get());
        x.start = x.finish.max(v);
        self.enter(c, w);
        self.update_v();
        self.readjust(roster);
        self.kick_for(roster, c)
    }

    #[inline]
    fn set_weight(&mut self, roster: &Roster, _now: Time, c: ClientId, old: Weight, w: Weight, status: Status) {
        if status.is_runnable() {
            self.by_weight.remove(c, old);
            self.by_weight.insert(c, w);
        }
        // Gap SFS-15: the tags move so that the lag in service is kept; a
        // running client's new φ enters its finish tag at its quantum end.
        self.keep_lag(roster, c, Phi::whole(w.get()));
        self.set_phi(roster, c, Phi::whole(w.get()));
        if status.is_runnable() {
            self.readjust(roster);
        }
    }

    #[inline]
    fn pick(&mut self, roster: &Roster, _now: Time, cpu: CpuId) -> Option<(ClientId, Time)> {
        if self.queue_len() == 0 {
            return None;
        }
        // Section 2.4: among the B least surpluses prefer one that last ran here.
        let best = self.candidates(roster, self.opts.affinity_bias);
        let &first = best.first()?;
        let least = self.surplus(roster, first).expect("waiting");
        let slack = self.opts.affinity_slack;
        let client = best
            .iter()
            .copied()
            .find(|&c| {
                self.affinity.ran_last_on(c, cpu.index())
                    && match slack {
                        None => true,
                        Some(ns) => self.surplus(roster, c).expect("waiting").within(&least, ns),
                    }
            })
            .unwrap_or(first);
        self.queue_remove(self.queued(client).expect("exists"));
        Some((client, self.quantum))
    }

    #[inline]
    fn stopped(&mut self, roster: &Roster, _now: Time, cpu: CpuId, c: ClientId, w: Weight, ran: Time, why: StopReason) {
        // Eq. 5: F = S + q/φ with φ as it is now, at the end of the quantum.
        let x = &mut self.clients[c];
        let old_start = x.start;
        x.finish = old_start.saturating_add(charge(ran, x.phi));
        let finish = x.finish;
        if self.opts.affinity_bias > 1 {
            self.affinity.ran_on(c, cpu.index());
        }
        self.last_finish = finish;
        self.by_start.remove(&(old_start, c));
        match why {
            StopReason::Expired | StopReason::Preempted => {
                // Eq. 6, continuously runnable: S = F.
                self.clients[c].start = finish;
                self.by_start.insert((finish, c));
                self.queue_insert(self.queued(c).expect("exists"));
                self.update_v();
            }
            StopReason::Blocked | StopReason::Left => {
                self.by_weight.remove(c, w);
                if why == StopReason::Left {
                    self.clients.remove(c);
                    self.affinity.forget(c);
                }
                self.update_v();
                self.readjust(roster);
            }
        }
    }

    #[inline]
    fn check_invariants(&self, roster: &Roster) -> Result<(), String> {
        self.check(roster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surplus_compares_exactly_where_u128_would_overflow() {
        let big = Surplus { phi: Phi { num: u64::MAX, den: 3 }, lag: u128::MAX / 2 };
        let bigger = Surplus { phi: Phi { num: u64::MAX, den: 3 }, lag: u128::MAX / 2 + 1 };
        assert!(big < bigger);
        // 2/4 · x = 1/2 · x exactly.
        let x = u128::MAX - 7;
        assert_eq!(Surplus { phi: Phi { num: 2, den: 4 }, lag: x }, Surplus { phi: Phi { num: 1, den: 2 }, lag: x });
        assert!(Surplus { phi: Phi::whole(1), lag: 0 }.is_zero());
        assert!(Surplus { phi: Phi::whole(3), lag: 2 } > Surplus { phi: Phi::whole(5), lag: 1 });
    }

    #[test]
    fn charge_saturates() {
        assert_eq!(charge(u64::MAX, Phi { num: 1, den: u64::MAX }), VTime::MAX);
        assert_eq!(charge(10, Phi { num: 2, den: 1 }), 5 * VT_SCALE);
    }
}
