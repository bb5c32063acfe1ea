//! Plain round robin: one global FIFO, every client gets one quantum per
//! turn, weights are ignored. The reference point for "unfair".
//!
//! Invariants (checked by [`Policy::check_invariants`]):
//! * RR-1: the queue holds exactly the runnable clients that are not running.
//!
//! Cost: O(1) for every operation (intrusive list).

use crate::list::ClientList;
use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::roster::{Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{Policy, Shell};

/// Round robin over one global queue.
pub type RoundRobin = Shell<RoundRobinPolicy>;

/// The rules of round robin.
#[derive(Clone, Debug)]
pub struct RoundRobinPolicy {
    quantum: Time,
    queue: ClientList,
}

impl RoundRobin {
    /// A round-robin scheduler for `cfg.cpus` CPUs with slices of `cfg.quantum`.
    pub fn new(cfg: SchedConfig) -> RoundRobin {
        Shell::build("rr", &cfg, RoundRobinPolicy { quantum: cfg.quantum, queue: ClientList::new() })
    }
}

impl Policy for RoundRobinPolicy {
    #[inline]
    fn join(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        self.queue.push_back(c);
        None
    }

    #[inline]
    fn leave(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight, _was: Status) {
        self.queue.remove(c);
    }

    #[inline]
    fn block(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) {
        self.queue.remove(c);
    }

    #[inline]
    fn wake(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        self.queue.push_back(c);
        None
    }

    #[inline]
    fn set_weight(&mut self, _r: &Roster, _now: Time, _c: ClientId, _old: Weight, _new: Weight, _s: Status) {}

    #[inline]
    fn pick(&mut self, _r: &Roster, _now: Time, _cpu: CpuId) -> Option<(ClientId, Time)> {
        self.queue.pop_front().map(|c| (c, self.quantum))
    }

    #[inline]
    fn stopped(&mut self, _r: &Roster, _now: Time, _cpu: CpuId, c: ClientId, _w: Weight, _ran: Time, why: StopReason) {
        if why.still_runnable() {
            self.queue.push_back(c);
        }
    }

    #[inline]
    fn check_invariants(&self, r: &Roster) -> Result<(), String> {
        crate::shell::check_queue_holds_waiting("RR-1", r, self.queue.iter())
    }
}
