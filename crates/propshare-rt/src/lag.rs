//! Lag against the fluid reference, fed with the executor's real slices.
//!
//! The simulator's definition: a group's lag is the CPU time it received
//! minus what the multiprocessor fluid model with weight readjustment
//! ([`propshare_sim::fluid::Fluid`]) would have given it over the same
//! history of joins, blocks, wake-ups, weight changes and departures.
//!
//! # Which clock the fluid runs on
//!
//! The workers share the machine with other processes, so they do not get P
//! whole CPUs: against wall time every group would lag by whatever the OS
//! gave to others, which says nothing about the scheduler. The fluid here
//! runs on the executor's *CPU clock* instead: each slice charged (thread
//! CPU time `ran`) advances it by `ran / P'`, where `P' = min(P, runnable
//! groups)` is the number of CPUs the fluid model uses at that moment. On a
//! dedicated machine with every worker busy this is wall time; on a loaded
//! one it is wall time with the stolen CPU taken out. So the lag measures
//! how the scheduler divided the CPU the workers really got, with the
//! readjusted ideal as the yardstick. (A worker idle while groups are
//! runnable, as DWRR allows, does not advance the clock: that idleness is
//! not counted as lag.)
//!
//! A group is charged its whole slice at the slice's end while the fluid
//! serves it continuously, so lag moves by up to one slice around each
//! charge: the maximum is taken just after a charge, the minimum as the
//! value just before it (`lag - ran`), which bounds the linear drift in
//! between.

use propshare::{ClientId, Time, Weight};
use propshare_sim::fluid::{Fluid, FRAC};

/// The extremes of one group's lag, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LagRange {
    /// Largest lag seen (ahead of the fluid).
    pub max: i64,
    /// Smallest lag seen (behind the fluid).
    pub min: i64,
}

/// The fluid model and each group's service, behind one lock of its own.
pub(crate) struct LagBook {
    fluid: Fluid,
    cpus: usize,
    runnable: usize,
    clock: Time,
    carry: u64,
    service: Vec<u64>,
    range: Vec<LagRange>,
}

impl LagBook {
    pub fn new(cpus: usize, groups: usize) -> LagBook {
        let mut fluid = Fluid::new(cpus);
        fluid.reserve(groups);
        LagBook {
            fluid,
            cpus,
            runnable: 0,
            clock: 0,
            carry: 0,
            service: vec![0; groups],
            range: vec![LagRange::default(); groups],
        }
    }

    pub fn join(&mut self, c: ClientId, w: Weight) {
        self.fluid.join(self.clock, c, w);
        self.service[c.index()] = 0;
        self.range[c.index()] = LagRange::default();
        self.runnable += 1;
    }

    pub fn wake(&mut self, c: ClientId) {
        self.fluid.wake(self.clock, c);
        self.runnable += 1;
    }

    pub fn block(&mut self, c: ClientId) {
        self.fluid.block(self.clock, c);
        self.runnable -= 1;
    }

    /// `c` departs; `running` if it left from a worker (it was runnable).
    pub fn leave(&mut self, c: ClientId, running: bool) {
        self.fluid.leave(self.clock, c);
        if running {
            self.runnable -= 1;
        }
    }

    pub fn set_weight(&mut self, c: ClientId, w: Weight) {
        self.fluid.set_weight(self.clock, c, w);
    }

    /// Charge `ran` ns of CPU to `c` (still counted runnable) and advance the clock.
    pub fn charge(&mut self, c: ClientId, ran: Time) {
        let p = self.cpus.min(self.runnable).max(1) as u64;
        self.carry += ran;
        self.clock += self.carry / p;
        self.carry %= p;
        let s = &mut self.service[c.index()];
        *s = s.saturating_add(ran);
        let lag = self.lag(c);
        let r = &mut self.range[c.index()];
        r.max = r.max.max(lag);
        r.min = r.min.min(lag.saturating_sub(ran.min(i64::MAX as u64) as i64));
    }

    /// `c`'s lag now, in ns.
    pub fn lag(&mut self, c: ClientId) -> i64 {
        let ideal = (self.fluid.ideal(self.clock, c) >> FRAC) as i128;
        (self.service[c.index()] as i128 - ideal).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// `c`'s lag extremes so far.
    pub fn range(&self, c: ClientId) -> LagRange {
        self.range[c.index()]
    }

    /// `c`'s ideal rate in CPUs, as an exact fraction.
    pub fn rate(&self, c: ClientId) -> (u64, u64) {
        self.fluid.rate(c)
    }

    /// The fluid clock, ns.
    pub fn clock(&self) -> Time {
        self.clock
    }
}
