//! CFS, the Completely Fair Scheduler of Linux 2.6.23 to 6.5
//! (`kernel/sched/fair.c`, Molnar 2007; the 5.x form), on per-CPU
//! runqueues with the load balancer of [`super::linux`].
//!
//! # Rules (one runqueue)
//!
//! * Every runnable task has a virtual runtime `v`; running `d` ns at load
//!   weight `w` adds `calc_delta_fair(d) = d · NICE_0_LOAD / w` (the
//!   kernel's fixed-point `__calc_delta`, [`calc_delta_fair`]).
//! * The runqueue keeps `min_vruntime`, which never decreases:
//!   `min_vruntime = max(min_vruntime, min(v_curr, v_leftmost))`
//!   (`update_min_vruntime`).
//! * Pick (`pick_next_entity`): the task with the smallest `v` (ties: lower id).
//! * Slice (`sched_slice`): `period · w / W`, W the runqueue's load with the
//!   task counted, where `period = latency` if at most
//!   `nr_latency = ⌈latency / min_granularity⌉` tasks are runnable, else
//!   `nr_running · min_granularity` (`__sched_period`); at least
//!   `min_granularity` (`BASE_SLICE`).
//! * Tick preemption (`check_preempt_tick`): after `min_granularity` the
//!   running task is also preempted once it is more than its slice (compared
//!   in virtual time, as the kernel does) ahead of the leftmost waiting task.
//! * New task (`place_entity(initial)`): `v = min_vruntime`, plus one
//!   virtual slice `sched_vslice` with `START_DEBIT`.
//! * Waking task (`place_entity(!initial)`): `v = max(v, min_vruntime −
//!   latency/2)` (`GENTLE_FAIR_SLEEPERS`; a whole latency without it): a
//!   sleeper is credited at most half a latency.
//! * Wake-up preemption (`wakeup_preempt_entity`): a wakee preempts the
//!   running task if `v_curr − v_wakee > calc_delta_fair(wakeup_granularity,
//!   wakee)`; the host gets a kick.
//! * Migration: `v` is made relative to the old runqueue's `min_vruntime` and
//!   rebased on the new one's (dequeue without `DEQUEUE_SLEEP`, enqueue
//!   without `ENQUEUE_WAKEUP`); a sleeper woken on another CPU is rebased the
//!   same way before its wake-up placement (`migrate_task_rq_fair`).
//! * Weight change (`reweight_entity`): a running task is first charged what
//!   it ran at the old weight (`update_curr`); `v` unchanged, runqueue load
//!   adjusted. With `keeplag` (`cfs(keeplag=true)`, not the kernel) `v`
//!   moves to `min_vruntime + (v − min_vruntime) w_old/w_new` (Gap CFS-6).
//!
//! On P CPUs the runqueues are independent; tasks move only by wake-up
//! placement and the load balancer ([`super::linux`]), which equalises
//! weighted load, so three equal CPU-bound tasks on two CPUs keep shares
//! 1, 1/2, 1/2 for ever.
//!
//! # Cost
//!
//! pick, stop, join, leave, block, wake: O(log n) on one runqueue (a B-tree
//! keyed by `(v, id)`), plus [`super::linux`]'s per-event costs.
//!
//! Gap CFS-1: ticks are not modelled. The slice is handed out whole at pick time;
//! `check_preempt_tick`'s second test is folded into it as
//! `min(slice, max(min_granularity, t*))`, t* the run time after which the
//! task would be ahead of the leftmost waiting task (as of the pick) by more
//! than its slice. (untested)
//!
//! Gap CFS-2: `sched_slice` divides exactly (u128) instead of through
//! `__calc_delta`, whose inverse weight saturates for runqueue loads of
//! 2^32 and more. (untested)
//!
//! Gap CFS-3: a new client has no parent to inherit `v` from; it is placed as a
//! fork whose parent sits at `min_vruntime`. (untested)
//!
//! Gap CFS-4: `min_vruntime` starts at 2^62 (the kernel starts at −2^20 and wraps);
//! virtual times saturate instead of wrapping, so nothing panics on absurd
//! inputs. (untested)
//!
//! Gap CFS-5: the host's quantum q sets `min_granularity = q`, `latency = 8q`,
//! `wakeup_granularity = 4q/3` (the kernel's ratios; see
//! [`Tunables::for_quantum`]); [`Tunables::kernel_defaults`] gives the
//! kernel's own values. (untested)
//!
//! Gap CFS-6: the kernel keeps `v` across a weight change, so a task that
//! ran ahead at a low weight keeps a lead worth `w_new/w_old` times more
//! service once raised: dropped from 1000 to 1 for a second and raised
//! again, a task ran one slice at weight 1 (its fair share then) and then
//! nothing for 9 s while its fair share was half a CPU
//! (`scenarios/examples/reweight-starvation.toml`). We keep the kernel's
//! rule as `cfs`; `cfs(keeplag=true)` (named `cfs+keeplag`) scales the lag
//! `v − min_vruntime` by `w_old/w_new` on a raise (a drop keeps `v`), as EEVDF's `reweight_entity` does
//! since 6.7 and as stride scheduling's `client_modify` does.
//! (test: `raised_weight_is_not_starved`)

use std::collections::BTreeSet;

use super::linux::{calc_delta_fair, real_for_virtual, Dequeue, Enqueue, Entity, FairRq, LinuxSched, Tunables};
use crate::model::{ClientId, Time};

/// `v` after a weight change from `old` to `new`: on a raise, keeping the
/// lag in service, `base + (v − base) · old / new` (saturating); on a drop,
/// `v` (the rule of [`crate::vtime::keep_lag`]).
fn keep_lag(v: u64, base: u64, old: u64, new: u64) -> u64 {
    if new <= old {
        return v; // a drop keeps v, as crate::vtime::keep_lag keeps a tag
    }
    let scaled = (v as i128 - base as i128) * old as i128 / new.max(1) as i128;
    (base as i128 + scaled).clamp(0, u64::MAX as i128) as u64
}

/// Where every runqueue's `min_vruntime` starts.
pub const VRUNTIME_START: u64 = 1 << 62;

/// Linux CFS on per-CPU runqueues (`cfs`).
pub type Cfs = LinuxSched<CfsRq>;

/// One CPU's CFS runqueue.
#[derive(Clone, Debug)]
pub struct CfsRq {
    /// Waiting tasks by (vruntime, id); the running one is not in it.
    tree: BTreeSet<(u64, ClientId)>,
    min_vruntime: u64,
    load: u64,
    nr_running: usize,
    /// The running task and its vruntime as of its pick.
    curr: Option<(ClientId, u64)>,
}

impl CfsRq {
    /// The runqueue's `min_vruntime`.
    pub fn min_vruntime(&self) -> u64 {
        self.min_vruntime
    }

    fn update_min_vruntime(&mut self) {
        let candidates = self.curr.map(|c| c.1).into_iter().chain(self.tree.first().map(|f| f.0));
        if let Some(v) = candidates.min() {
            self.min_vruntime = self.min_vruntime.max(v);
        }
    }

    /// `__sched_period`.
    fn period(t: &Tunables, nr: usize) -> Time {
        let nr_latency = t.latency.div_ceil(t.min_granularity.max(1)) as usize;
        if nr > nr_latency {
            (nr as u64).saturating_mul(t.min_granularity)
        } else {
            t.latency
        }
    }

    /// `sched_slice` for a task of weight `w` on a runqueue of `nr` tasks and
    /// load `load`, the task counted in both.
    fn slice_for(t: &Tunables, w: u64, load: u64, nr: usize) -> Time {
        let share = Self::period(t, nr) as u128 * w as u128 / load.max(1) as u128;
        (share as Time).max(t.min_granularity).max(1)
    }
}

impl FairRq for CfsRq {
    const NAME: &'static str = "cfs";

    fn new(_t: &Tunables) -> Self {
        CfsRq { tree: BTreeSet::new(), min_vruntime: VRUNTIME_START, load: 0, nr_running: 0, curr: None }
    }

    fn nr_running(&self) -> usize {
        self.nr_running
    }

    fn load(&self) -> u64 {
        self.load
    }

    fn curr(&self) -> Option<ClientId> {
        self.curr.map(|c| c.0)
    }

    fn enqueue(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, how: Enqueue) {
        match how {
            Enqueue::New => {
                let mut v = self.min_vruntime;
                if t.start_debit {
                    let slice = Self::slice_for(t, se.weight, self.load + se.weight, self.nr_running + 1);
                    v = v.saturating_add(calc_delta_fair(slice, se.weight));
                }
                se.vruntime = v;
            }
            Enqueue::Wakeup => {
                let credit = if t.gentle_fair_sleepers { t.latency / 2 } else { t.latency };
                se.vruntime = se.vruntime.max(self.min_vruntime.saturating_sub(credit));
            }
            Enqueue::Migrated => se.vruntime = se.vruntime.wrapping_add(self.min_vruntime),
        }
        self.tree.insert((se.vruntime, c));
        self.load += se.weight;
        self.nr_running += 1;
    }

    fn dequeue(&mut self, _t: &Tunables, c: ClientId, se: &mut Entity, how: Dequeue) {
        self.tree.remove(&(se.vruntime, c));
        self.load -= se.weight;
        self.nr_running -= 1;
        if how == Dequeue::Migrate {
            se.vruntime = se.vruntime.wrapping_sub(self.min_vruntime);
        }
        self.update_min_vruntime();
    }

    fn pick(&mut self, t: &Tunables, entity: impl Fn(ClientId) -> Entity) -> Option<(ClientId, Time)> {
        let (v, c) = self.tree.pop_first()?;
        self.curr = Some((c, v));
        let w = entity(c).weight;
        let ideal = Self::slice_for(t, w, self.load, self.nr_running);
        let slice = match self.tree.first() {
            // check_preempt_tick: resched once v − v_leftmost > ideal (virtual vs real, as the kernel).
            Some(&(left, _)) => {
                let ahead = real_for_virtual((left - v).saturating_add(ideal).saturating_add(1), w);
                ideal.min(ahead.max(t.min_granularity))
            }
            None => ideal,
        };
        Some((c, slice))
    }

    fn update_curr(&mut self, _t: &Tunables, c: ClientId, se: &mut Entity, ran: Time) {
        se.vruntime = se.vruntime.saturating_add(calc_delta_fair(ran, se.weight));
        se.sum_exec = se.sum_exec.saturating_add(ran);
        self.curr = Some((c, se.vruntime));
        self.update_min_vruntime();
    }

    fn put_prev(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, ran: Time, still_runnable: bool) {
        self.update_curr(t, c, se, ran);
        self.curr = None;
        if still_runnable {
            self.tree.insert((se.vruntime, c));
        } else {
            self.load -= se.weight;
            self.nr_running -= 1;
            self.update_min_vruntime();
        }
    }

    fn wakeup_preempt(&self, t: &Tunables, _wakee: ClientId, se: &Entity) -> bool {
        let Some((_, v_curr)) = self.curr else { return false };
        let vdiff = v_curr as i128 - se.vruntime as i128;
        vdiff > 0 && vdiff > calc_delta_fair(t.wakeup_granularity, se.weight) as i128
    }

    /// `reweight_entity`: `v` kept (the kernel), or with
    /// [`Tunables::reweight_keeps_lag`] moved so that its lag in service is
    /// kept (Gap CFS-6).
    fn reweight(&mut self, t: &Tunables, c: ClientId, se: &mut Entity, weight: u64) {
        if t.reweight_keeps_lag {
            let running = self.curr.is_some_and(|(x, _)| x == c);
            if !running {
                self.tree.remove(&(se.vruntime, c));
            }
            se.vruntime = keep_lag(se.vruntime, self.min_vruntime, se.weight, weight);
            if running {
                self.curr = Some((c, se.vruntime));
            } else {
                self.tree.insert((se.vruntime, c));
            }
        }
        self.load = self.load - se.weight + weight;
        se.weight = weight;
    }

    fn reweight_sleeping(&self, t: &Tunables, se: &mut Entity, weight: u64) {
        if t.reweight_keeps_lag {
            se.vruntime = keep_lag(se.vruntime, self.min_vruntime, se.weight, weight);
        }
        se.weight = weight;
    }

    fn migrate_sleeper(src: &Self, dst: &Self, se: &mut Entity) {
        se.vruntime = se.vruntime.wrapping_sub(src.min_vruntime).wrapping_add(dst.min_vruntime);
    }
}
