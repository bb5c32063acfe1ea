//! Lag sampling: each client's lag (ideal − received) and, for static sets,
//! service error, sampled where their extremes are reached (when the client
//! starts or stops running); the lag series over time of selected clients;
//! the band grid ("within one quantum of its due share x% of the time").

use propshare::{Scheduler, Time};

use super::client::{State, NONE};
use super::events::Event;
use super::Engine;
use crate::fluid::{Service, FRAC};

pub(super) fn ns_of_fixed(v: i128) -> f64 {
    v as f64 / (1u128 << FRAC) as f64
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

    /// A band grid instant: count, per present client, whether |lag| is within the band.
    pub(super) fn band_grid(&mut self) {
        let now = self.now;
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

    /// A sampling grid instant: sample every client whose lag is recorded over time.
    pub(super) fn sample_grid(&mut self) {
        let now = self.now;
        for k in 0..self.series_clients.len() {
            self.sample(self.series_clients[k]);
        }
        if let Some(every) = self.series_every {
            self.push(now + every, Event::SampleGrid);
        }
    }

    /// Client i's received service up to now, ns, if it is present.
    #[inline]
    pub(super) fn service_now(&self, i: usize) -> Option<Time> {
        let c = &self.clients[i];
        match c.state {
            State::Absent | State::Gone => None,
            State::Running(cpu) => Some(c.received + self.now.saturating_sub(self.running_start[cpu as usize])),
            State::Waiting | State::Blocked => Some(c.received),
        }
    }

    /// Client i's lag now (fixed point), if it is present.
    pub(super) fn lag_now(&mut self, i: usize) -> Option<i128> {
        let received = self.service_now(i)?;
        Some(self.fluid.ideal(self.now, Self::id(i)) as i128 - ((received as i128) << FRAC))
    }

    /// Lag and service-error sample for client i at `now`. Integer
    /// arithmetic only (fixed point, [`FRAC`] bits): this runs twice per quantum.
    #[inline]
    pub(super) fn sample(&mut self, i: usize) {
        let Some(received) = self.service_now(i) else { return };
        let ideal: Service = self.fluid.ideal(self.now, Self::id(i));
        self.record(i, received, ideal);
    }

    /// Record a sample of present client i at `now`: it has received
    /// `received` ns and its ideal service is `ideal` (what [`Engine::sample`]
    /// reads; the one-CPU static path computes both more cheaply).
    #[inline]
    pub(super) fn record(&mut self, i: usize, received: Time, ideal: Service) {
        let now = self.now;
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
        if self.groups.is_some() {
            self.sample_groups();
        }
    }

    #[inline]
    pub(super) fn work_now(&self) -> Time {
        let running = (self.busy_cpus as u128 * self.now as u128).saturating_sub(self.start_sum);
        self.work_done + running as Time
    }
}
