//! Plain round robin: one global FIFO, every client gets one quantum per
//! turn, weights are ignored. The reference point for "unfair".
//!
//! Cost: O(1) for every operation (intrusive list).

use crate::list::ClientList;
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::roster::Roster;
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};

/// Round robin over one global queue.
#[derive(Clone, Debug)]
pub struct RoundRobin {
    roster: Roster,
    quantum: Time,
    queue: ClientList,
}

impl RoundRobin {
    /// A round-robin scheduler for `cfg.cpus` CPUs with slices of `cfg.quantum`.
    pub fn new(cfg: SchedConfig) -> RoundRobin {
        RoundRobin { roster: Roster::new(cfg.cpus), quantum: cfg.quantum, queue: ClientList::new() }
    }
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &str {
        "rr"
    }

    fn join(&mut self, _now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        self.queue.push_back(c);
        Ok(None)
    }

    fn leave(&mut self, _now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.leave(c)?;
        self.queue.remove(c);
        Ok(())
    }

    fn block(&mut self, _now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        self.queue.remove(c);
        Ok(())
    }

    fn wake(&mut self, _now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        self.queue.push_back(c);
        Ok(None)
    }

    fn set_weight(&mut self, _now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        self.roster.set_weight(c, w).map(drop)
    }

    fn pick(&mut self, _now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        Ok(self.roster.dispatch(cpu, self.queue.pop_front(), self.quantum))
    }

    fn stopped(&mut self, _now: Time, cpu: CpuId, c: ClientId, _ran: Time, why: StopReason) -> Result<(), SchedError> {
        self.roster.stop(cpu, c, why)?;
        if why.still_runnable() {
            self.queue.push_back(c);
        }
        Ok(())
    }
}
