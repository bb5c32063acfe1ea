//! What Linux's CFS ([`super::cfs`]) and EEVDF ([`super::eevdf`]) share,
//! modelled on `kernel/sched/fair.c` and `kernel/sched/core.c`: the
//! nice-to-weight table, the kernel's fixed-point `delta · NICE_0_LOAD / w`,
//! the per-CPU runqueue framework ([`LinuxSched`], generic over the
//! per-runqueue policy [`FairRq`]), wake-up placement and the load balancer.
//!
//! # Weights
//!
//! A client's propshare weight is used directly as its kernel *load weight*:
//! 1024 (`NICE_0_LOAD`) is a nice-0 task, [`SCHED_PRIO_TO_WEIGHT`] gives the
//! forty nice levels (each step ×1.25), and any other positive integer acts
//! like a cgroup weight. [`weight_to_nice`], [`nice_to_weight`] and
//! [`nices_for_weights`] translate between propshare weights and nice values
//! (for a host that can only `setpriority`).
//!
//! # Per-CPU runqueues
//!
//! Every CPU has its own runqueue ([`CpuPart`]: the policy's queue and
//! virtual time, the list of its tasks in least-recently-run order that
//! the balancer walks, and the slab of its tasks' entities). There is no
//! global virtual time. A client belongs to exactly one runqueue while
//! runnable (`task_cpu`) and stays with the last one while blocked: its
//! entity lives in that CPU's slab and moves with it. The global part is
//! small: the tunables, the owner map (client → (CPU, slot),
//! [`crate::percpu::OwnerMap`]) and the LRU stamp counter.
//! The policy ([`FairRq`]) decides the order *inside* a runqueue; everything
//! between runqueues is here, as free functions of the global part and
//! the per-CPU parts, reached through [`crate::percpu::Parts`] (a slice in
//! [`LinuxPolicy`], or one lock per CPU, [`crate::percpu::Locked`]):
//!
//! * the scheduling steps: [`pick`] (with [`newidle_balance`] first when
//!   the CPU's runqueue is empty) and [`CpuPart::stopped`];
//! * the client events: [`join`] (fork placement), [`wake`] (wake
//!   placement; an entity that wakes on another CPU moves under both
//!   CPUs' locks, `migrate_task_rq_fair`), [`block`], [`leave`] and
//!   [`set_load_weight`]; each finds its client's entity through the owner
//!   map and checks it again under the lock it takes, and reads the
//!   client's status from its part (listed in the LRU list: runnable; the
//!   runqueue's `curr`: running), which LX-3 checks against the roster;
//! * the balancers: [`load_balance`] (periodic, run by [`balance_due`])
//!   and [`newidle_balance`]. Each surveys the CPUs one at a time, then
//!   moves ([`migrate`]: detach, move the entity, attach) holding both
//!   CPUs' locks in CPU id order, with its verdict and its walk over the
//!   candidates made under them.
//!
//! The global part ([`LinuxShared`]) is the tunables, the owner map and two
//! atomic counters. The readjustment of `+readjust` ([`readjust`]) is the
//! one global step: it reads the whole runnable set (the policy's
//! [`Reweigh`] and the roster) and may reweight any CPU's clients; the
//! policy runs it between the steps above ([`join`] takes it as a hook,
//! since a joining client is reweighted before it is enqueued).
//! tests/linux_threaded.rs drives one thread per CPU and a churn thread of
//! client events and balance passes over locked parts.
//!
//! # Wake-up placement (`select_task_rq_fair`)
//!
//! * A joining client (fork, `SD_BALANCE_FORK`, `find_idlest_cpu`) goes to an
//!   idle CPU if there is one (lowest id), else to the CPU with the least
//!   weighted load (ties: lowest id).
//! * A waking client (`select_idle_sibling`) goes to its previous CPU if that
//!   is idle, else to the first idle CPU scanning upwards from it (wrapping),
//!   else back to its previous CPU.
//! * If the chosen CPU is running something, the policy's wake-up preemption
//!   test decides whether `join`/`wake` return a kick for it.
//!
//! # Load balancing (`sched_balance_rq`, formerly `load_balance`)
//!
//! One flat domain holds every CPU, each CPU its own group of capacity 1024.
//! A CPU's *load* is the sum of the weights of its runnable clients (running
//! one included); a CPU is *overloaded* when it has at least two runnable
//! clients (one waits), *fully busy* with one, *has spare* with none.
//!
//! * **Periodic** ([`load_balance`]): every
//!   [`Tunables::balance_interval`] (default [`BALANCE_INTERVAL`] = 4 ms)
//!   each CPU, as `this`, looks for the busiest CPU: the overloaded CPU with
//!   the highest load (only an overloaded CPU has a task that can move; the
//!   running task never moves). Then, as `calculate_imbalance` does:
//!   - `this` idle: pull one task (the kernel's `migrate_util`/`migrate_task`
//!     for a group with spare capacity; we move one task per pass);
//!   - otherwise balanced if `load(this) ≥ load(busiest)` or
//!     `load(this) ≥ avg`, and, when `this` is itself overloaded, if
//!     `100 · load(busiest) ≤ imbalance_pct · load(this)`
//!     (`imbalance_pct` = [`IMBALANCE_PCT`] = 117, the MC domain's);
//!   - else `imbalance = min(load(busiest) − avg, avg − load(this))` ("don't
//!     push ourselves above the average, nor the busiest below it"), and
//!     `detach_tasks` walks the busiest CPU's tasks from the least recently
//!     run, at most `nr_migrate` = 32 of them, skipping the running one and
//!     any whose weight exceeds what is left of the imbalance, and moves the
//!     rest, subtracting each weight.
//! * **New-idle** ([`newidle_balance`]): a CPU whose queue is
//!   empty when asked to pick pulls one task from the busiest overloaded CPU
//!   first. Since every waiting task sits on an overloaded CPU, this makes the
//!   scheduler work-conserving: no CPU is idle while a task waits after the
//!   host has polled its idle CPUs ([`Scheduler::work_conserving`](crate::Scheduler::work_conserving) is true).
//!
//! * **Failed-balance relaxation** (option, `cfs+lbfail` / `eevdf+lbfail`,
//!   [`Tunables::balance_failed_relax`]): as `sd->nr_balance_failed` does
//!   since the 5.5 rework, a periodic pass that finds an imbalance but moves
//!   nothing counts a failure, and a task of weight w then fits if
//!   `w >> failures ≤ imbalance`; a move or a balanced verdict resets the
//!   count. Tasks that are too heavy for the imbalance therefore move after
//!   a few passes, and the odd task of N on P rotates between CPUs.
//!   A task so moved is not moved again by the relaxation before it has
//!   run (Gap LINUX-7).
//!
//! Because the balancer equalises *load*, not service, a move happens only
//! when a whole task's weight fits in the imbalance. Three equal clients on
//! two CPUs (loads 2w and w, average 1.5w, imbalance w/2 < w) or ten on eight
//! therefore stay where they are for ever: one client keeps a CPU to itself
//! while two share the other, the known cross-CPU unfairness of Linux.
//!
//! # `cfs+readjust`, `eevdf+readjust`
//!
//! `LinuxSched::with_readjustment` runs the policy and the balancer over
//! readjusted weights (SFS paper section 2.9): after every join, leave,
//! block, wake and weight change the global runnable set is readjusted
//! ([`Reweigh`]) and each client whose φ changed gets load weight
//! `⌊φ + 1/2⌋` (at least 1) through the policy's `reweight` (queued or
//! running) or `reweight_sleeping` (blocked, or not yet enqueued). Feasible
//! weights are never changed, so on feasible sets the variant makes exactly
//! the plain decisions (tested).
//!
//! What it changes: Linux already keeps a heavy task alone on a CPU (a task
//! runs on one CPU and the balancer moves only waiting tasks), so the
//! readjusted shares of 10, 1, 1 on 2 CPUs come out either way. But the
//! balancer's average load counts the infeasible weight in full, which
//! lifts the average above every other CPU's load: `busiest − avg` is 0 and
//! no waiting task ever moves between the other CPUs. With weights 10 and
//! four 1s on 3 CPUs placed 1 | 3 | 1 ... plain Linux keeps three light
//! tasks at 1/3 of a CPU and one at a whole CPU for ever; over readjusted
//! loads (φ* = 2) the balancer moves one and every light task gets 1/2, the
//! fluid share (tested).
//!
//! Cost and what a kernel would pay: readjustment needs the *global*
//! runnable set in weight order, while everything else here is per CPU.
//! We keep one [`crate::readjust::FeasibleSet`] (a B-tree, O(log N) per
//! enqueue, dequeue or weight change, plus O(P) for the walk and O(P log n)
//! to reweight at most P clients). In a kernel that is a global structure
//! touched on every sleep and wake-up under one lock, the very contention
//! per-CPU runqueues exist to avoid. A kernel would rather keep the global
//! weight sum in an atomic and per-CPU lists of their heaviest tasks, and
//! readjust lazily (at balance time, or only when some task's weight
//! exceeds `W/P`, which one atomic read detects).
//!
//! Gap LINUX-1: φ is rounded to the nearest integer load weight (the kernel's
//! weight unit: `__calc_delta` uses integer weights). Only capped clients
//! are affected, with an error of at most 1/2, a relative error of at most
//! `1/(2·w_max)` with `w_max` the heaviest uncapped weight (at most 1/2048
//! for nice-0 tasks); φ* = R/(P' − m) is exact whenever P' − m divides R,
//! always on 2 CPUs. (untested)
//!
//! # Modelled and not modelled
//!
//! Modelled: per-CPU runqueues with their own virtual time, the policy of
//! each file (see there), nice weights and `__calc_delta`, fork/wake
//! placement, periodic and new-idle balancing of weighted load with
//! `imbalance_pct`, `nr_migrate` and the least-recently-run walk, wake-up
//! preemption kicks.
//!
//! Not modelled: PELT (load is the instantaneous runnable weight, as for
//! always-runnable tasks; util-based `migrate_util` amounts), cgroups and
//! group scheduling, the SMT/LLC/NUMA domain hierarchy (one flat domain),
//! CPU capacities and asymmetric packing, active balancing of running tasks
//! (and, by default, the `nr_balance_failed` relaxation),
//! cache hotness (`task_hot`, `migration_cost`), `busy_factor` and the
//! doubling of `balance_interval`, NOHZ idle balancing, wake-affine
//! heuristics between waker and wakee, buddies (`next`/`last`/`skip`),
//! bandwidth control, and ticks (slices are handed out whole; see the
//! policies' `Gap:` lines).
//!
//! Gap LINUX-2: the kernel computes the domain average with integer division and
//! (before 5.14) could underflow `busiest − avg`; we compare exactly
//! (everything multiplied by P) and saturate at zero, so a busiest CPU below
//! the average yields no move. (untested)
//!
//! Gap LINUX-3: the propshare weight is used directly as the kernel load weight
//! (1024 = nice 0). Virtual runtime goes through the kernel's 32-bit inverse
//! weight, whose relative error is about `w / 2^32`: negligible for nice
//! weights (2·10^-5 at nice −20), coarse for weights near 2^32, as it would
//! be in the kernel. (untested)
//!
//! Gap LINUX-4: balancing runs when an event arrives at or after a CPU's
//! `next_balance` (the kernel runs it from the tick), for every CPU that is
//! due, in CPU order. (untested)
//!
//! Gap LINUX-5: the scheduler reads no clock, so the running client's virtual
//! runtime is charged only when the host reports `stopped` (the kernel's
//! `update_curr` also charges it at every enqueue); events in the middle of a
//! slice see it as of its pick, except a weight change (Gap LINUX-6). (untested)
//!
//! Gap LINUX-6: a weight change of a running task charges it first what it ran
//! at the old weight (the kernel's `update_curr` in `reweight_entity`). The
//! host reports the time run only when the task stops, so the policy charges
//! the wall time since the pick (or the last change), `now − exec_start`,
//! and at the stop the rest of what the host reports. Until issue 16 the
//! whole run was charged at the weight in force at the stop.
//! (test: `raised_weight_is_not_starved`)
//!
//! Gap LINUX-7: with the failed-balance relaxation, a move that only fits
//! because of it can be a pure swap: the waiting task of weight w moves
//! from the busiest CPU (load L + w) to `this` (load L' < L + w), which is
//! then the busiest by the same margin, and the next pass of another CPU
//! moves it on. The kernel swaps too, but the task runs within a tick:
//! `attach_task` calls `wakeup_preempt`, and `check_preempt_tick` ends the
//! running task's slice once the newcomer is leftmost. The model hands
//! slices out whole and only `join`/`wake` can kick a CPU, so a task could
//! be moved at every pass for ever and never run (found by the contract
//! test: weight 24 among 43, 56, 45, 40 on 4 CPUs, moved every 4 ms in a
//! ring of 3 CPUs). We therefore let the relaxation skip a task that the
//! balancer moved and that has not been picked since; moves that fit the
//! imbalance without the relaxation, and the default balancer, are
//! unchanged. (test: `relaxed_balancer_does_not_starve_a_swapped_task`)
//!
//! # Cost
//!
//! Each event costs the policy's O(log n) on one runqueue (n its clients),
//! plus O(log n) for the least-recently-run set, plus an O(P) scan for due
//! balances. A balance pass is O(P) to find the busiest CPU plus
//! O(nr_migrate · log n) for the walk; a move is O(log n) on each side.
//! Placement is O(P).

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::algo::reweigh::Reweigh;
use crate::model::{ClientId, CpuId, StopReason, Time, Weight, MS};
use crate::percpu::{two_mut, with_client, Owned, OwnerMap, Parts, Slab, Slot};
use crate::readjust::Phi;
use crate::roster::{Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{Policy, Shell};

/// The load weight of a nice-0 task.
pub const NICE_0_LOAD: u64 = 1024;

/// `sched_prio_to_weight[]` (kernel/sched/core.c): the load weight of nice
/// −20 (index 0) to nice 19 (index 39). Each step is about ×1.25.
pub const SCHED_PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, // -20 .. -16
    29154, 23254, 18705, 14949, 11916, // -15 .. -11
    9548, 7620, 6100, 4904, 3906, // -10 .. -6
    3121, 2501, 1991, 1586, 1277, // -5 .. -1
    1024, 820, 655, 526, 423, // 0 .. 4
    335, 272, 215, 172, 137, // 5 .. 9
    110, 87, 70, 56, 45, // 10 .. 14
    36, 29, 23, 18, 15, // 15 .. 19
];

/// `sched_prio_to_wmult[]`: `2^32 / weight`, so that `__calc_delta` can
/// multiply and shift instead of dividing.
pub const SCHED_PRIO_TO_WMULT: [u64; 40] = [
    48388, 59856, 76040, 92818, 118348, // -20 .. -16
    147320, 184698, 229616, 287308, 360437, // -15 .. -11
    449829, 563644, 704093, 875809, 1099582, // -10 .. -6
    1376151, 1717300, 2157191, 2708050, 3363326, // -5 .. -1
    4194304, 5237765, 6557202, 8165337, 10153587, // 0 .. 4
    12820798, 15790321, 19976592, 24970740, 31350126, // 5 .. 9
    39045157, 49367440, 61356676, 76695844, 95443717, // 10 .. 14
    119304647, 148102320, 186737708, 238609294, 286331153, // 15 .. 19
];

/// `WMULT_CONST`: the inverse weight of weight 1, `2^32 − 1`.
const WMULT_CONST: u64 = u32::MAX as u64;
const WMULT_SHIFT: i32 = 32;

/// The load weight of `nice` (clamped to −20..=19).
pub fn nice_to_weight(nice: i32) -> u64 {
    SCHED_PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// The nice value whose weight is nearest to `weight` in ratio (the geometric
/// midpoint between two neighbours decides; ties go to the lighter level).
/// Weights beyond the table map to −20 or 19.
pub fn weight_to_nice(weight: u64) -> i32 {
    nice_for_ratio(weight as u128, 1)
}

/// The nice level nearest in ratio to `num / den`.
fn nice_for_ratio(num: u128, den: u128) -> i32 {
    // The table descends; find the first level whose weight is ≤ num/den.
    let mut i = 0;
    while i < 40 && SCHED_PRIO_TO_WEIGHT[i] as u128 * den > num {
        i += 1;
    }
    if i == 0 {
        return -20;
    }
    if i == 40 {
        return 19;
    }
    // Between heavier level i-1 (a) and lighter level i (b): nearer to a iff
    // (num/den)^2 > a·b.
    let (a, b) = (SCHED_PRIO_TO_WEIGHT[i - 1] as u128, SCHED_PRIO_TO_WEIGHT[i] as u128);
    if num * num > a * b * den * den {
        i as i32 - 1 - 20
    } else {
        i as i32 - 20
    }
}

/// Nice values for a set of propshare weights, preserving their ratios as
/// well as forty levels allow: the heaviest weight becomes nice 0 unless the
/// lightest would then fall below nice 19's weight (15), in which case the
/// lightest becomes nice 19 and the rest follow (clamped at −20).
pub fn nices_for_weights(weights: &[u64]) -> Vec<i32> {
    let Some(&max) = weights.iter().max() else { return Vec::new() };
    let min = weights.iter().copied().min().unwrap_or(1).max(1);
    let max = max.max(1) as u128;
    let lightest = SCHED_PRIO_TO_WEIGHT[39] as u128;
    // Scale s = num/den maps weight w to w·s.
    let (num, den) = if (min as u128) * NICE_0_LOAD as u128 >= lightest * max {
        (NICE_0_LOAD as u128, max)
    } else {
        (lightest, min as u128)
    };
    weights.iter().map(|&w| nice_for_ratio(w as u128 * num, den)).collect()
}

/// The kernel's inverse of a load weight (`__update_inv_weight`): the
/// `sched_prio_to_wmult` entry for a nice weight, else `WMULT_CONST / w`.
pub fn inv_weight(w: u64) -> u64 {
    if let Ok(i) = SCHED_PRIO_TO_WEIGHT.binary_search_by(|probe| w.cmp(probe)) {
        return SCHED_PRIO_TO_WMULT[i];
    }
    match w {
        0 => WMULT_CONST,
        w if w >= WMULT_CONST => 1,
        w => WMULT_CONST / w,
    }
}

/// `__calc_delta`: `delta · weight / lw` computed as
/// `(delta · (weight · inv(lw))) >> 32`, shifting the factor down until it
/// fits 32 bits (exact to within the inverse's rounding).
pub fn calc_delta(delta: Time, weight: u64, lw: u64) -> Time {
    let mut shift = WMULT_SHIFT;
    let mut fact = weight;
    while fact >> 32 != 0 {
        fact >>= 1;
        shift -= 1;
    }
    let mut fact = fact * inv_weight(lw);
    while fact >> 32 != 0 {
        fact >>= 1;
        shift -= 1;
    }
    let product = delta as u128 * fact as u128;
    let result = if shift >= 0 { product >> shift } else { product.checked_shl((-shift) as u32).unwrap_or(u128::MAX) };
    result.min(u64::MAX as u128) as u64
}

/// `calc_delta_fair`: virtual time for running `delta` ns at weight `w`,
/// `delta · NICE_0_LOAD / w`.
pub fn calc_delta_fair(delta: Time, w: u64) -> Time {
    if w == NICE_0_LOAD {
        delta
    } else {
        calc_delta(delta, NICE_0_LOAD, w)
    }
}

/// Real time a client of weight `w` must run to advance its virtual
/// runtime by `vdelta`: the least `t ≥ 1` with
/// `calc_delta_fair(t, w) ≥ vdelta` (saturating at `u64::MAX`).
///
/// The exact quotient `⌈vdelta·w/1024⌉` is not enough: `calc_delta_fair`
/// goes through the 32-bit inverse weight and can fall short of it (for
/// w = 2048, `calc_delta_fair(2, 2048) = 0`), and a slice that does not
/// reach the deadline would be handed out again and again, each time a few
/// ns long (an EEVDF livelock found with readjusted weights; the kernel's
/// tick hides it). So step up from the quotient, then search down to the
/// least such t. O(log t) calls of `calc_delta_fair`.
pub fn real_for_virtual(vdelta: u64, w: u64) -> Time {
    let exact = (vdelta as u128 * w as u128).div_ceil(NICE_0_LOAD as u128);
    let (mut lo, mut hi) = (0u64, exact.clamp(1, u64::MAX as u128) as Time);
    // Step up: each step adds the real time of the virtual shortfall.
    loop {
        let got = calc_delta_fair(hi, w);
        if got >= vdelta || hi == u64::MAX {
            break;
        }
        lo = hi;
        let step = ((vdelta - got) as u128 * w as u128).div_ceil(NICE_0_LOAD as u128).max(1);
        hi = (hi as u128 + step).min(u64::MAX as u128) as Time;
    }
    // calc_delta_fair is monotone in t: the least t in (lo, hi] that reaches vdelta.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if calc_delta_fair(mid, w) >= vdelta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi.max(1)
}

/// How often each CPU runs the periodic load balancer: 4 ms.
pub const BALANCE_INTERVAL: Time = 4 * MS;
/// The MC domain's `imbalance_pct`: a busier overloaded CPU must be 17% more
/// loaded than an overloaded `this` before `this` pulls.
pub const IMBALANCE_PCT: u64 = 117;
/// `sysctl_sched_nr_migrate`: tasks examined per balance pass.
pub const NR_MIGRATE: usize = 32;
/// `TICK_NSEC` at `HZ = 250`: the floor of EEVDF's lag clamp.
pub const TICK: Time = 4 * MS;

/// The kernel's tunables and scheduler features, as far as they are modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// CFS `sysctl_sched_latency`: the period in which every task runs once.
    pub latency: Time,
    /// CFS `sysctl_sched_min_granularity`: the shortest slice.
    pub min_granularity: Time,
    /// CFS `sysctl_sched_wakeup_granularity`: how far (in virtual time of the
    /// wakee) the running task must be ahead before a wakee preempts it.
    pub wakeup_granularity: Time,
    /// EEVDF `sysctl_sched_base_slice`: every request's size r.
    pub base_slice: Time,
    /// `TICK_NSEC`, the floor of EEVDF's lag clamp.
    pub tick: Time,
    /// Time between two periodic balance passes of one CPU.
    pub balance_interval: Time,
    /// `imbalance_pct`, in percent.
    pub imbalance_pct: u64,
    /// `sysctl_sched_nr_migrate`.
    pub nr_migrate: usize,
    /// CFS `START_DEBIT`: new tasks start one virtual slice after min_vruntime.
    pub start_debit: bool,
    /// CFS `GENTLE_FAIR_SLEEPERS`: wakers are credited half a latency, not a whole one.
    pub gentle_fair_sleepers: bool,
    /// EEVDF `PLACE_LAG`: restore the saved lag on enqueue.
    pub place_lag: bool,
    /// EEVDF `PLACE_DEADLINE_INITIAL`: new tasks get half a slice of deadline.
    pub place_deadline_initial: bool,
    /// EEVDF `RUN_TO_PARITY`: an eligible running task is not preempted by a
    /// wakee before its slice ends.
    pub run_to_parity: bool,
    /// Relax the imbalance cap after failed balance passes
    /// (`nr_balance_failed`); off by default (the classic balancer).
    pub balance_failed_relax: bool,
    /// CFS only: a weight change keeps the task's lag `v − min_vruntime`
    /// in service, scaling it by `w_old / w_new` (Gap CFS-6); off by
    /// default (the kernel keeps `v`). EEVDF always scales its lag, as the
    /// kernel does.
    pub reweight_keeps_lag: bool,
}

impl Tunables {
    /// Tunables for a host quantum q: EEVDF's base slice and CFS's minimum
    /// granularity are q, and the kernel's ratios are kept
    /// (latency = 8q as `sched_nr_latency` = 8, wakeup granularity = 4q/3 as
    /// 1 ms : 0.75 ms); kernel default features.
    pub fn for_quantum(q: Time) -> Tunables {
        let q = q.max(1);
        Tunables {
            latency: q.saturating_mul(8),
            min_granularity: q,
            wakeup_granularity: (q as u128 * 4 / 3).min(u64::MAX as u128) as Time,
            base_slice: q,
            tick: TICK,
            balance_interval: BALANCE_INTERVAL,
            imbalance_pct: IMBALANCE_PCT,
            nr_migrate: NR_MIGRATE,
            start_debit: true,
            gentle_fair_sleepers: true,
            place_lag: true,
            place_deadline_initial: true,
            run_to_parity: true,
            balance_failed_relax: false,
            reweight_keeps_lag: false,
        }
    }

    /// The kernel's defaults on `cpus` CPUs (`SCHED_TUNABLESCALING_LOG`:
    /// every granularity × (1 + ilog2(min(cpus, 8)))): latency 6 ms, minimum
    /// granularity 0.75 ms, wakeup granularity 1 ms, base slice 0.75 ms.
    pub fn kernel_defaults(cpus: usize) -> Tunables {
        let factor = 1 + (cpus.clamp(1, 8) as u64).ilog2() as u64;
        Tunables {
            latency: 6 * MS * factor,
            min_granularity: 750_000 * factor,
            wakeup_granularity: MS * factor,
            base_slice: 750_000 * factor,
            ..Tunables::for_quantum(750_000 * factor)
        }
    }
}

/// One client's scheduling entity (`struct sched_entity`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entity {
    /// Load weight (the propshare weight).
    pub weight: u64,
    /// Virtual runtime. For CFS, relative to its runqueue's min_vruntime while
    /// being moved between CPUs.
    pub vruntime: u64,
    /// EEVDF virtual deadline.
    pub deadline: u64,
    /// EEVDF saved virtual lag `V − v`, clamped.
    pub vlag: i64,
    /// EEVDF request size r.
    pub slice: Time,
    /// The CPU whose runqueue holds it (or held it last).
    pub cpu: usize,
    /// When it was last enqueued or picked (orders the balancer's walk).
    pub stamp: u64,
    /// Total CPU time charged.
    pub sum_exec: Time,
    /// While it runs: when the part of its run not yet charged began (the
    /// pick, or its last weight change; the kernel's `exec_start`).
    pub exec_start: Time,
    /// While it runs: the ns of this run already charged by `update_curr`.
    pub charged: Time,
    /// Moved by the balancer and not picked since (Gap LINUX-7).
    pub moved_unrun: bool,
}

/// Why an entity is enqueued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// A new client (fork).
    New,
    /// A blocked client wakes.
    Wakeup,
    /// Moved here by the balancer.
    Migrated,
}

/// Why a waiting (not running) entity is dequeued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dequeue {
    /// It blocks.
    Sleep,
    /// It leaves.
    Leave,
    /// The balancer moves it to another CPU.
    Migrate,
}

/// The policy of one per-CPU runqueue (`struct cfs_rq`): how its clients are
/// ordered, placed and charged. CFS and EEVDF implement it.
pub trait FairRq: Clone + Debug {
    /// Registry name of the scheduler built on this policy.
    const NAME: &'static str;
    /// An empty runqueue.
    fn new(t: &Tunables) -> Self;
    /// Runnable clients here, the running one included.
    fn nr_running(&self) -> usize;
    /// Sum of their weights.
    fn load(&self) -> u64;
    /// The client running from this runqueue, if any.
    fn curr(&self) -> Option<ClientId>;
    /// Add a runnable client that is not running.
    fn enqueue(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, how: Enqueue);
    /// Remove a waiting client.
    fn dequeue(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, how: Dequeue);
    /// Choose the next client (it becomes `curr`) and its slice in ns;
    /// `entity` gives a queued client's entity.
    fn pick(&mut self, t: &Tunables, entity: impl Fn(ClientId) -> Entity) -> Option<(ClientId, Time)>;
    /// `curr` stopped after running `ran` ns: charge it, and queue it again
    /// if it is still runnable (else it leaves this runqueue).
    fn put_prev(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, ran: Time, still_runnable: bool);
    /// Whether the just-enqueued `wakee`, with entity `se`, should preempt `curr`.
    fn wakeup_preempt(&self, t: &Tunables, wakee: ClientId, se: &Entity) -> bool;
    /// `update_curr`: charge the running client `c` the `ran` ns it has run
    /// since its last charge, at its current weight (before its weight
    /// changes, as `reweight_entity` does; `put_prev` charges the rest).
    fn update_curr(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, ran: Time);
    /// Change the weight of a client of this runqueue (waiting or running;
    /// a running one has just been charged by `update_curr`).
    fn reweight(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, weight: u64);
    /// Change the weight of a blocked client last on this runqueue.
    fn reweight_sleeping(&self, t: &Tunables, se: &mut Entity, weight: u64);
    /// A blocked client last on `src` wakes up on `dst`
    /// (`migrate_task_rq_fair`).
    fn migrate_sleeper(src: &Self, dst: &Self, se: &mut Entity);
}

/// A client's entry in its CPU's slab: its entity, named by its client.
#[derive(Clone, Copy, Debug)]
struct Task {
    client: ClientId,
    se: Entity,
}

impl Owned for Task {
    #[inline]
    fn client(&self) -> ClientId {
        self.client
    }
}

/// One CPU's part: its runqueue, the entities of its tasks (runnable here,
/// or blocked after they last ran here: the kernel's `task_cpu`), its
/// tasks in least-recently-run order (the kernel's `rq->cfs_tasks`), and
/// when it balances next.
#[derive(Clone, Debug)]
pub struct CpuPart<R> {
    /// The policy's runqueue.
    pub rq: R,
    tasks: Slab<Task>,
    lru: BTreeSet<(u64, ClientId)>,
    next_balance: Time,
    nr_balance_failed: u32,
}

impl<R: FairRq> CpuPart<R> {
    /// An empty part.
    pub fn new(tun: &Tunables) -> CpuPart<R> {
        CpuPart { rq: R::new(tun), tasks: Slab::default(), lru: BTreeSet::new(), next_balance: 0, nr_balance_failed: 0 }
    }

    /// The entity in slot `s`.
    #[inline]
    fn se(&mut self, s: Slot) -> &mut Entity {
        &mut self.tasks.get_mut(s).se
    }

    /// A new client `c` with entity `se` gets its entry here, CPU `k`
    /// (not yet queued: [`CpuPart::attach`]); returns its slot.
    pub fn admit(&mut self, sh: &LinuxShared, k: usize, c: ClientId, mut se: Entity) -> Slot {
        se.cpu = k;
        let s = self.tasks.insert(Task { client: c, se });
        sh.owners.set(c, k, s);
        s
    }

    /// Queue slot `s`'s task (its entity here) with a new LRU stamp; whether
    /// it should preempt the running client (`wakeup_preempt`).
    pub fn attach(&mut self, sh: &LinuxShared, s: Slot, how: Enqueue) -> bool {
        let stamp = sh.next_stamp();
        let Task { client: c, se } = self.tasks.get_mut(s);
        se.stamp = stamp;
        self.rq.enqueue(&sh.tun, *c, se, how);
        self.lru.insert((stamp, *c));
        let (c, se) = (*c, *se);
        self.rq.curr().is_some() && self.rq.wakeup_preempt(&sh.tun, c, &se)
    }

    /// Whether slot `s`'s task is queued here (runnable: waiting or
    /// running), i.e. in the LRU list.
    #[inline]
    fn is_queued(&self, s: Slot) -> bool {
        let Task { client, se } = self.tasks.get(s);
        self.lru.contains(&(se.stamp, *client))
    }

    /// Take waiting slot `s`'s task off the runqueue (its entity stays).
    fn detach(&mut self, tun: &Tunables, s: Slot, how: Dequeue) {
        let Task { client: c, se } = self.tasks.get_mut(s);
        self.rq.dequeue(tun, *c, se, how);
        self.lru.remove(&(se.stamp, *c));
    }

    /// Local dispatch: the runqueue's choice becomes `curr`, with a new
    /// LRU stamp; its slice (at least 1 ns).
    pub fn pick(&mut self, sh: &LinuxShared, now: Time) -> Option<(ClientId, Time)> {
        let CpuPart { rq, tasks, .. } = self;
        let (client, slice) = rq.pick(&sh.tun, |c| tasks.get(sh.owners.get(c).expect("queued").1).se)?;
        let stamp = sh.next_stamp();
        let (_, s) = sh.owners.get(client).expect("queued");
        let se = &mut self.tasks.get_mut(s).se;
        self.lru.remove(&(se.stamp, client));
        se.stamp = stamp;
        (se.exec_start, se.charged, se.moved_unrun) = (now, 0, false);
        self.lru.insert((stamp, client));
        Some((client, slice.max(1)))
    }

    /// The running client `c` stops after `ran` ns (`put_prev_task`): queued
    /// again if `why` leaves it runnable; its entry is dropped if it left.
    pub fn stopped(&mut self, sh: &LinuxShared, c: ClientId, ran: Time, why: StopReason) {
        let (_, s) = sh.owners.get(c).expect("a running client has an entity");
        let se = &mut self.tasks.get_mut(s).se;
        let rest = ran.saturating_sub(std::mem::take(&mut se.charged));
        self.rq.put_prev(&sh.tun, c, se, rest, why.still_runnable());
        if !why.still_runnable() {
            self.lru.remove(&(se.stamp, c));
            if why == StopReason::Left {
                self.tasks.remove(s);
                sh.owners.clear(c);
            }
        }
    }

    /// The waiting clients the balancer examines, least recently run first
    /// (at most `nr_migrate`, the running one counted).
    fn candidates(&self, nr_migrate: usize) -> Vec<ClientId> {
        let curr = self.rq.curr();
        self.lru.iter().take(nr_migrate).map(|&(_, c)| c).filter(|&c| Some(c) != curr).collect()
    }
}

/// The global part: the tunables, the owner map (client → (CPU, slot):
/// where its entity is), the LRU stamp counter and the migration count
/// (atomics: a concurrent host shares them without a lock). The
/// readjustment, when on, is the policy's.
#[derive(Debug)]
pub struct LinuxShared {
    tun: Tunables,
    owners: OwnerMap,
    stamp: AtomicU64,
    migrations: AtomicU64,
}

impl Clone for LinuxShared {
    fn clone(&self) -> LinuxShared {
        LinuxShared {
            tun: self.tun,
            owners: self.owners.clone(),
            stamp: AtomicU64::new(self.stamp.load(Ordering::Relaxed)),
            migrations: AtomicU64::new(self.migrations.load(Ordering::Relaxed)),
        }
    }
}

impl LinuxShared {
    /// The global part for `tun`, with room in the owner map for client ids
    /// below `capacity` (the policy grows it on join).
    pub fn new(tun: Tunables, capacity: usize) -> LinuxShared {
        LinuxShared { tun, owners: OwnerMap::new(capacity), stamp: AtomicU64::new(0), migrations: AtomicU64::new(0) }
    }

    /// The tunables in force.
    pub fn tunables(&self) -> &Tunables {
        &self.tun
    }

    /// Where client `c`'s entity is: its CPU and slot.
    pub fn entry_of(&self, c: ClientId) -> Option<(usize, Slot)> {
        self.owners.get(c)
    }

    /// Tasks moved between CPUs so far.
    pub fn migrations(&self) -> u64 {
        self.migrations.load(Ordering::Relaxed)
    }

    fn next_stamp(&self) -> u64 {
        self.stamp.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Move waiting slot `s` of `from` to `to`, CPU `dst` (`detach_task` +
/// `attach_task`): the balancer's cross-CPU step, a function of the two CPU
/// parts and the global part. The entity moves with its task.
pub fn migrate<R: FairRq>(sh: &LinuxShared, from: &mut CpuPart<R>, s: Slot, to: &mut CpuPart<R>, dst: usize) {
    from.detach(&sh.tun, s, Dequeue::Migrate);
    let t = sh.owners.move_entry(&mut from.tasks, s, &mut to.tasks, dst);
    let se = to.se(t);
    (se.cpu, se.moved_unrun) = (dst, true);
    to.attach(sh, t, Enqueue::Migrated);
    sh.migrations.fetch_add(1, Ordering::Relaxed);
}

/// What a balance pass reads of the CPUs, one at a time (under locks, each
/// under its own: a hint that the move checks again under both locks).
struct Survey {
    /// The overloaded CPU (≥ 2 runnable) other than `this` with the highest
    /// load (ties: lowest id).
    busiest: Option<usize>,
    /// The sum of every CPU's load.
    total: u128,
    /// Whether `this` runs nothing.
    idle: bool,
}

fn survey<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(parts: &mut P, this: usize) -> Survey {
    let mut best: Option<(u64, usize)> = None;
    let (mut total, mut idle) = (0, false);
    for k in 0..parts.count() {
        let (n, load) = parts.with(k, |p| (p.rq.nr_running(), p.rq.load()));
        total += load as u128;
        if k == this {
            idle = n == 0;
        } else if n >= 2 && best.is_none_or(|(l, _)| load > l) {
            best = Some((load, k));
        }
    }
    Survey { busiest: best.map(|(_, k)| k), total, idle }
}

/// New-idle balancing: an idle `this` pulls one waiting task from the
/// busiest CPU (the least recently run candidate there). Returns whether it
/// moved one. Under locks ([`crate::percpu::Locked`]) the survey reads one
/// CPU at a time and the move holds both CPUs' locks; the candidate is
/// chosen under them, so it is still waiting there.
pub fn newidle_balance<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    this: usize,
) -> bool {
    let Some(busiest) = survey(parts, this).busiest else { return false };
    parts.with_two(busiest, this, |from, to| {
        let Some(&c) = from.candidates(sh.tun.nr_migrate).first() else { return false };
        let (_, s) = sh.owners.get(c).expect("a candidate has an entity");
        migrate(sh, from, s, to, this);
        true
    })
}

/// CPU `k` picks: new-idle balancing first if its runqueue is empty, then
/// one local dispatch.
pub fn pick<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    k: usize,
    now: Time,
) -> Option<(ClientId, Time)> {
    if parts.with(k, |p| p.rq.nr_running() == 0) {
        newidle_balance(sh, parts, k);
    }
    parts.with(k, |p| p.pick(sh, now))
}

/// One periodic balance pass of CPU `this` (module doc, "Periodic");
/// returns the number of tasks moved. The survey reads one CPU at a time;
/// the verdict, the imbalance and the walk over the busiest CPU's
/// candidates run under both CPUs' locks ([`Parts::with_two`]), over the
/// surveyed total load (a hint under locks, exact in one thread).
pub fn load_balance<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    this: usize,
) -> usize {
    let Survey { busiest, total, idle } = survey(parts, this);
    let Some(busiest) = busiest else {
        parts.with(this, |q| q.nr_balance_failed = 0);
        return 0;
    };
    if idle {
        return newidle_balance(sh, parts, this) as usize;
    }
    let p = parts.count() as u128;
    let tun = &sh.tun;
    parts.with_two(busiest, this, |from, to| {
        let (local, busy) = (to.rq.load() as u128, from.rq.load() as u128);
        // Balanced: this is at least as loaded as the busiest, or as the average;
        // or both are overloaded and the busiest is within imbalance_pct.
        let overloaded = to.rq.nr_running() >= 2;
        if local >= busy || p * local >= total || (overloaded && 100 * busy <= tun.imbalance_pct as u128 * local) {
            to.nr_balance_failed = 0;
            return 0;
        }
        // In units of 1/P of a weight: min(busiest − avg, avg − this).
        let mut imbalance = (p * busy).saturating_sub(total).min(total - p * local);
        if imbalance == 0 {
            to.nr_balance_failed = 0;
            return 0;
        }
        let failed = if tun.balance_failed_relax { to.nr_balance_failed.min(63) } else { 0 };
        let mut moved = 0;
        for c in from.candidates(tun.nr_migrate) {
            if imbalance == 0 {
                break;
            }
            let (_, s) = sh.owners.get(c).expect("a candidate has an entity");
            let se = &from.tasks.get(s).se;
            let w = p * se.weight as u128;
            // The relaxation moves a task too heavy for the imbalance, but
            // not one it moved before that has not run since (Gap LINUX-7).
            if w >> failed > imbalance || (w > imbalance && se.moved_unrun) {
                continue;
            }
            migrate(sh, from, s, to, this);
            imbalance = imbalance.saturating_sub(w);
            moved += 1;
        }
        to.nr_balance_failed = if moved == 0 { to.nr_balance_failed.saturating_add(1) } else { 0 };
        moved
    })
}

/// Run the periodic balance of every CPU that is due at `now`, in CPU
/// order (Gap LINUX-4).
pub fn balance_due<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(sh: &LinuxShared, parts: &mut P, now: Time) {
    for k in 0..parts.count() {
        let due = parts.with(k, |q| {
            let due = now >= q.next_balance;
            if due {
                q.next_balance = now.saturating_add(sh.tun.balance_interval.max(1));
            }
            due
        });
        if due {
            load_balance(sh, parts, k);
        }
    }
}

/// Fork placement: an idle CPU (lowest id), else the least loaded (ties:
/// lowest id), reading one CPU at a time.
fn select_cpu_new<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(parts: &mut P) -> usize {
    let mut best: Option<(u64, usize)> = None;
    for k in 0..parts.count() {
        let (n, load) = parts.with(k, |p| (p.rq.nr_running(), p.rq.load()));
        if n == 0 {
            return k;
        }
        if best.is_none_or(|(l, _)| load < l) {
            best = Some((load, k));
        }
    }
    best.map_or(0, |(_, k)| k)
}

/// Wake placement: the previous CPU if idle, else the next idle one
/// scanning upwards (wrapping), else the previous one.
fn select_cpu_wake<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(parts: &mut P, prev: usize) -> usize {
    let p = parts.count();
    (0..p).map(|i| (prev + i) % p).find(|&k| parts.with(k, |q| q.rq.nr_running() == 0)).unwrap_or(prev)
}

/// Client `c` (no entity yet; its id must fit the owner map) joins with
/// weight `w`: its entity goes to the CPU fork placement chooses, then
/// `readjust` runs (the readjustment, a global step: it may reweight any
/// CPU's clients, `c` included, before `c` is enqueued), then `c` is
/// queued there. A kick if it should preempt that CPU's running client.
pub fn join<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    c: ClientId,
    w: Weight,
    readjust: impl FnOnce(&LinuxShared, &mut P),
) -> Kick {
    let k = select_cpu_new(parts);
    let se = Entity { weight: w.get(), slice: sh.tun.base_slice, cpu: k, ..Entity::default() };
    let s = parts.with(k, |q| q.admit(sh, k, c, se));
    readjust(sh, parts);
    parts.with(k, |q| q.attach(sh, s, Enqueue::New)).then_some(CpuId(k as u32))
}

/// Blocked client `c` wakes on the CPU wake placement chooses; its entity
/// moves there from its previous CPU (a cross-CPU step under both locks,
/// `migrate_task_rq_fair`). A kick if it should preempt that CPU's running
/// client; `None` if `c` is not blocked.
pub fn wake<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    c: ClientId,
) -> Option<Kick> {
    loop {
        let (prev, s) = sh.owners.get(c)?;
        let k = select_cpu_wake(parts, prev);
        // Under the lock: still there (else look again), and blocked.
        let here = |q: &CpuPart<R>| (sh.owners.get(c) == Some((prev, s))).then(|| !q.is_queued(s));
        let woke = if k == prev {
            parts.with(k, |q| Some(here(q)?.then(|| q.attach(sh, s, Enqueue::Wakeup))))
        } else {
            parts.with_two(prev, k, |from, to| {
                if !here(from)? {
                    return Some(None);
                }
                R::migrate_sleeper(&from.rq, &to.rq, &mut from.tasks.get_mut(s).se);
                let t = sh.owners.move_entry(&mut from.tasks, s, &mut to.tasks, k);
                to.se(t).cpu = k;
                sh.migrations.fetch_add(1, Ordering::Relaxed);
                Some(Some(to.attach(sh, t, Enqueue::Wakeup)))
            })
        };
        if let Some(woke) = woke {
            return woke.map(|kick| kick.then_some(CpuId(k as u32)));
        }
    }
}

/// Waiting client `c` blocks: off its runqueue, its entity stays. False
/// if it is not waiting (running, blocked or unknown).
pub fn block<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(sh: &LinuxShared, parts: &mut P, c: ClientId) -> bool {
    with_client(&sh.owners, parts, c, |q, s| {
        let waiting = q.is_queued(s) && q.rq.curr() != Some(c);
        if waiting {
            q.detach(&sh.tun, s, Dequeue::Sleep);
        }
        waiting
    }) == Some(true)
}

/// Waiting or blocked client `c` leaves: off its runqueue if it waits, and
/// its entity is dropped. Whether it was waiting; `None` if it is running
/// or unknown.
pub fn leave<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    c: ClientId,
) -> Option<bool> {
    with_client(&sh.owners, parts, c, |q, s| {
        if q.rq.curr() == Some(c) {
            return None;
        }
        let waiting = q.is_queued(s);
        if waiting {
            q.detach(&sh.tun, s, Dequeue::Leave);
        }
        q.tasks.remove(s);
        sh.owners.clear(c);
        Some(waiting)
    })
    .flatten()
}

/// Set client `c`'s load weight to `w`, on its runqueue if it is queued
/// (waiting or running; else as a sleeper). A running client is first
/// charged what it ran so far at its old weight (`reweight_entity`'s
/// `update_curr`, Gap LINUX-6). `pending` is a client that is runnable but
/// not yet enqueued (joining or waking): it is not queued. False if `c` has
/// no entity.
pub fn set_load_weight<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    sh: &LinuxShared,
    parts: &mut P,
    now: Time,
    c: ClientId,
    w: u64,
    pending: Option<ClientId>,
) -> bool {
    let tun = &sh.tun;
    with_client(&sh.owners, parts, c, |q, s| {
        let queued = q.is_queued(s) && pending != Some(c);
        let running = q.rq.curr() == Some(c);
        let CpuPart { rq, tasks, .. } = q;
        let se = &mut tasks.get_mut(s).se;
        if se.weight == w {
            return;
        }
        if queued {
            if running {
                let ran = now.saturating_sub(se.exec_start);
                rq.update_curr(tun, c, se, ran);
                se.exec_start = now;
                se.charged = se.charged.saturating_add(ran);
            }
            rq.reweight(tun, c, se, w);
        } else {
            rq.reweight_sleeping(tun, se, w);
        }
    })
    .is_some()
}

/// The readjustment, the one global step of `cfs+readjust` and
/// `eevdf+readjust` (module doc): readjust the runnable set after it or a
/// weight changed, and give every client whose φ changed its new load
/// weight ([`set_load_weight`]). `pending` is a client that is runnable but
/// not yet enqueued (joining or waking). It reads the global runnable set
/// (`reweigh`, kept in step by the caller, and the roster).
pub fn readjust<R: FairRq, P: Parts<Part = CpuPart<R>> + ?Sized>(
    reweigh: &mut Reweigh,
    r: &Roster,
    sh: &LinuxShared,
    parts: &mut P,
    now: Time,
    pending: Option<ClientId>,
) {
    let (_, changes) = reweigh.refresh(r);
    for (c, phi) in changes {
        set_load_weight(sh, parts, now, c, load_weight(phi), pending);
    }
}

/// Check the parts against each other (in CPU order); returns the number
/// of entities and of queued clients. LX-1: every entity is in the slab of
/// the CPU it names and where the owner map says, which names no other;
/// LX-2: each CPU's LRU list holds exactly the clients queued there (its
/// runqueue's count) and no client placed elsewhere.
pub fn check_parts<'a, R: FairRq + 'a>(
    sh: &LinuxShared,
    parts: impl IntoIterator<Item = &'a CpuPart<R>>,
) -> Result<(usize, usize), String> {
    let (mut ents, mut queued) = (0, 0);
    for (k, part) in parts.into_iter().enumerate() {
        ents += sh.owners.check_slab(k, &part.tasks).map_err(|e| format!("LX-1: {e}"))?;
        if let Some((_, t)) = part.tasks.iter().find(|(_, t)| t.se.cpu != k) {
            return Err(format!("LX-1: {} has its entity on cpu {k} but names cpu {}", t.client, t.se.cpu));
        }
        if part.lru.len() != part.rq.nr_running() {
            return Err(format!("LX-2: cpu {k} lists {} tasks but runs {}", part.lru.len(), part.rq.nr_running()));
        }
        if let Some(&(_, c)) = part.lru.iter().find(|&&(_, c)| sh.owners.get(c).is_none_or(|(j, _)| j != k)) {
            return Err(format!("LX-2: {c} listed on cpu {k} but placed elsewhere"));
        }
        queued += part.rq.nr_running();
    }
    sh.owners.check_count(ents).map_err(|e| format!("LX-1: {e}"))?;
    Ok((ents, queued))
}

/// A Linux-like scheduler: per-CPU runqueues of policy `R` plus the shared
/// placement and load balancing.
pub type LinuxSched<R> = Shell<LinuxPolicy<R>>;

/// The rules of the Linux-like schedulers: per-CPU run queues `R`, wake-up
/// placement and load balancing. They readjust inside their rules (when
/// readjusting), because the kernel sets a load weight before an entity is
/// enqueued (`reweight_entity` on a sleeping entity).
#[derive(Clone, Debug)]
pub struct LinuxPolicy<R: FairRq> {
    sh: LinuxShared,
    cpus: Vec<CpuPart<R>>,
    reweigh: Reweigh,
}

/// The integer load weight nearest to `phi` (halves round up), at least 1.
pub fn load_weight(phi: Phi) -> u64 {
    let den = phi.den.max(1) as u128;
    let w = (2 * phi.num as u128 + den) / (2 * den);
    w.clamp(1, u64::MAX as u128) as u64
}

impl<R: FairRq> LinuxSched<R> {
    /// With [`Tunables::for_quantum`]`(cfg.quantum)`.
    pub fn new(cfg: SchedConfig) -> Self {
        Self::with_tunables(cfg, Tunables::for_quantum(cfg.quantum))
    }

    /// With the failed-balance relaxation (`+lbfail`).
    pub fn with_balance_failed_relax(cfg: SchedConfig) -> Self {
        let tun = Tunables { balance_failed_relax: true, ..Tunables::for_quantum(cfg.quantum) };
        Self::with_tunables(cfg, tun)
    }

    /// Over readjusted weights (`+readjust`).
    pub fn with_readjustment(cfg: SchedConfig) -> Self {
        Self::with_options(cfg, Tunables::for_quantum(cfg.quantum), true)
    }

    /// With explicit tunables, over readjusted weights if `readjust`; named
    /// by its options (`cfs`, `cfs+lbfail`, `cfs+readjust`, `cfs+lbfail+readjust`).
    pub fn with_options(cfg: SchedConfig, tun: Tunables, readjust: bool) -> Self {
        let name = format!(
            "{}{}{}{}",
            R::NAME,
            if tun.balance_failed_relax { "+lbfail" } else { "" },
            if tun.reweight_keeps_lag { "+keeplag" } else { "" },
            if readjust { "+readjust" } else { "" }
        );
        Shell::build(name, &cfg, LinuxPolicy::new(&cfg, tun, Reweigh::new(readjust)))
    }

    /// With explicit tunables.
    pub fn with_tunables(cfg: SchedConfig, tun: Tunables) -> Self {
        Self::with_options(cfg, tun, false)
    }
}

impl<R: FairRq> LinuxPolicy<R> {
    fn new(cfg: &SchedConfig, tun: Tunables, reweigh: Reweigh) -> Self {
        let cpus = cfg.cpus;
        LinuxPolicy { sh: LinuxShared::new(tun, 0), cpus: (0..cpus).map(|_| CpuPart::new(&tun)).collect(), reweigh }
    }

    /// The tunables in force.
    pub fn tunables(&self) -> &Tunables {
        &self.sh.tun
    }

    /// The CPU that holds client `c`'s entity: its runqueue, or where it
    /// last ran if it sleeps (the kernel's `task_cpu`).
    pub fn cpu_of(&self, c: ClientId) -> Option<usize> {
        self.sh.entry_of(c).map(|(k, _)| k)
    }

    /// The runqueue of CPU `cpu`.
    pub fn rq(&self, cpu: usize) -> &R {
        &self.cpus[cpu].rq
    }

    /// A client's entity.
    pub fn entity(&self, c: ClientId) -> Option<&Entity> {
        let (k, s) = self.sh.owners.get(c)?;
        Some(&self.cpus[k].tasks.get(s).se)
    }

    /// Tasks moved between CPUs so far (balancing and wake-up placement).
    pub fn migrations(&self) -> u64 {
        self.sh.migrations()
    }

    /// Readjust after a change of the runnable set or a weight
    /// ([`readjust`] over this policy's parts).
    fn readjust(&mut self, r: &Roster, now: Time, pending: Option<ClientId>) {
        readjust(&mut self.reweigh, r, &self.sh, self.cpus.as_mut_slice(), now, pending);
    }

    /// Move waiting client `c` from CPU `src` to CPU `dst` ([`migrate`]).
    pub fn migrate(&mut self, src: usize, dst: usize, c: ClientId) {
        let (k, s) = self.sh.owners.get(c).expect("an entity");
        debug_assert_eq!(k, src, "{c} is not on cpu {src}");
        let (from, to) = two_mut(&mut self.cpus, src, dst);
        migrate(&self.sh, from, s, to, dst);
    }

    /// One periodic balance pass of CPU `this` ([`load_balance`]); returns
    /// the number of tasks moved.
    pub fn load_balance(&mut self, this: usize) -> usize {
        load_balance(&self.sh, self.cpus.as_mut_slice(), this)
    }

    /// Run the periodic balance of every CPU that is due at `now` ([`balance_due`]).
    fn balance_due(&mut self, now: Time) {
        balance_due(&self.sh, self.cpus.as_mut_slice(), now);
    }
}

impl<R: FairRq> Policy for LinuxPolicy<R> {
    #[inline]
    fn work_conserving(&self) -> bool {
        // New-idle balancing pulls any waiting task to an idle CPU.
        true
    }

    #[inline]
    fn join(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight) -> Kick {
        self.balance_due(now);
        self.sh.owners.reserve(c);
        let LinuxPolicy { sh, cpus, reweigh } = self;
        join(sh, cpus.as_mut_slice(), c, w, |sh, parts| {
            reweigh.insert(c, w);
            readjust(reweigh, r, sh, parts, now, Some(c));
        })
    }

    #[inline]
    fn leave(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight, was: Status) {
        let left = leave(&self.sh, self.cpus.as_mut_slice(), c);
        debug_assert_eq!(left, Some(was == Status::Runnable), "{c} left as {was:?}");
        self.reweigh.remove(c, w);
        self.readjust(r, now, None);
        self.balance_due(now);
    }

    #[inline]
    fn block(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight) {
        let blocked = block(&self.sh, self.cpus.as_mut_slice(), c);
        debug_assert!(blocked, "{c} was waiting");
        self.reweigh.remove(c, w);
        self.readjust(r, now, None);
        self.balance_due(now);
    }

    #[inline]
    fn wake(&mut self, r: &Roster, now: Time, c: ClientId, w: Weight) -> Kick {
        self.reweigh.insert(c, w);
        self.readjust(r, now, Some(c));
        self.balance_due(now);
        wake(&self.sh, self.cpus.as_mut_slice(), c).expect("a blocked client has an entity")
    }

    #[inline]
    fn set_weight(&mut self, r: &Roster, now: Time, c: ClientId, old: Weight, new: Weight, status: Status) {
        self.reweigh.change_weight(c, old, new, status.is_runnable());
        set_load_weight(&self.sh, self.cpus.as_mut_slice(), now, c, new.get(), None);
        self.readjust(r, now, None);
        self.balance_due(now);
    }

    #[inline]
    fn pick(&mut self, _r: &Roster, now: Time, cpu: CpuId) -> Option<(ClientId, Time)> {
        self.balance_due(now);
        pick(&self.sh, self.cpus.as_mut_slice(), cpu.index(), now)
    }

    #[inline]
    fn stopped(&mut self, r: &Roster, now: Time, cpu: CpuId, c: ClientId, w: Weight, ran: Time, why: StopReason) {
        self.cpus[cpu.index()].stopped(&self.sh, c, ran, why);
        if !why.still_runnable() {
            self.reweigh.remove(c, w);
            self.readjust(r, now, None);
        }
        self.balance_due(now);
    }

    /// LX-1: every client has an entity, in the slab of the CPU the entity
    /// names and where the owner map says (which names no other), and the
    /// CPUs' run queues count exactly the runnable clients (running ones
    /// included); LX-2: each CPU's LRU list holds exactly the clients
    /// queued on it; LX-3: the parts know each client's status as the
    /// roster does (running on CPU k: CPU k's `curr`; waiting: listed, not
    /// running; blocked: not listed), which is what the client events over
    /// the parts read.
    #[inline]
    fn check_invariants(&self, r: &Roster) -> Result<(), String> {
        for (c, status, _) in r.iter() {
            let (k, s) = self.sh.owners.get(c).ok_or_else(|| format!("LX-1: {c} has no entity"))?;
            let part = &self.cpus[k];
            let seen = match (part.is_queued(s), part.rq.curr() == Some(c)) {
                (true, true) => Status::Running(CpuId(k as u32)),
                (true, false) => Status::Runnable,
                (false, false) => Status::Blocked,
                (false, true) => return Err(format!("LX-3: {c} runs on cpu {k} but is not listed")),
            };
            if seen != status {
                return Err(format!("LX-3: {c} is {status:?} but its part on cpu {k} says {seen:?}"));
            }
        }
        let queued: usize = self.cpus.iter().map(|k| k.rq.nr_running()).sum();
        if queued != r.runnable() {
            return Err(format!("LX-1: run queues hold {queued}, {} runnable", r.runnable()));
        }
        let (ents, queued) = check_parts(&self.sh, &self.cpus)?;
        if ents != r.len() {
            return Err(format!("LX-1: {ents} entities for {} clients", r.len()));
        }
        if queued != r.runnable() {
            return Err(format!("LX-2: LRU lists hold {queued}, {} runnable", r.runnable()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state split: an entity lives in the slab of its task's CPU (a
    /// blocked task's: the last one) and moves with it; the owner map follows.
    #[test]
    fn entity_moves_with_its_task() {
        use crate::Scheduler;
        let mut s = super::super::cfs::Cfs::new(SchedConfig::new(2, MS));
        let w = Weight::new(1024).unwrap();
        let (a, b, c) = (ClientId(0), ClientId(1), ClientId(2));
        let home = |s: &super::super::cfs::Cfs, x: ClientId| {
            let p = s.policy();
            let (k, slot) = p.sh.owners.get(x).unwrap();
            assert_eq!(p.cpus[k].tasks.get(slot).client, x);
            assert_eq!(p.cpus[k].tasks.get(slot).se.cpu, k);
            (k, p.cpus[0].tasks.len(), p.cpus[1].tasks.len())
        };
        s.join(0, a, w).unwrap(); // idle cpu 0
        s.join(0, b, w).unwrap(); // idle cpu 1
        s.block(0, b).unwrap(); // b's entity stays on cpu 1
        assert_eq!(home(&s, b), (1, 1, 1));
        s.join(0, c, w).unwrap(); // cpu 1 is idle again
        s.block(0, a).unwrap();
        s.wake(0, b).unwrap(); // cpu 1 is busy, cpu 0 idle: b moves
        assert_eq!(home(&s, b), (0, 2, 1));
        assert_eq!(home(&s, c), (1, 2, 1));
        s.leave(0, a).unwrap();
        assert_eq!(home(&s, b), (0, 1, 1));
        assert_eq!(s.policy().entity(a), None);
        s.policy().check_invariants(s.roster()).unwrap();
    }
}
