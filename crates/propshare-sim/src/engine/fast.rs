//! The one-CPU static fast path: the same run as the general loop, with the
//! general machinery left out where it provably does nothing.
//!
//! # When
//!
//! After an instant of the general loop ([`Engine::static_one_cpu`]): one
//! CPU, a static set (every client arrives at 0, is CPU-bound, never
//! leaves, never changes weight), no groups, chains, lag series, band grid,
//! windowed lag or cost measurement, no switch or migration cost, and no
//! event left in the queue. The GR3 paper's S1/S2 sweep is such a run.
//!
//! # What it leaves out, and why nothing changes
//!
//! From then on the only events are the ends of this CPU's runs: no client
//! event can come, and every run ends by expiring (no work limit, no
//! phases), so no stop is ever stale and no kick can come. So the event
//! queues, the idle-CPU polling (the CPU is idle only after an `Idle`
//! decision, and then no instant follows: the general loop ends there too)
//! and the idle accounting (zero while the CPU runs) are skipped, and each
//! instant is: sample and credit the client that ran, `stopped`, `pick`,
//! sample the client picked, exactly as [`Engine::cpu_stop`] and
//! [`Engine::pick`] do them in this case.
//!
//! The samples are the general ones ([`Engine::record`]) with a cheaper
//! ideal service: on one CPU no client is ever capped (a rate `w/Φ_T` never
//! exceeds one CPU), and every client joined at 0, when the fluid's
//! normalised service V was 0, so its ideal service is `w · V(now)` with
//! V advanced at the same instants as the general path advances it (one
//! call per instant): the same fixed-point value, without the per-client
//! lookup. The received service of the client on the CPU is its credited
//! service plus the time since its run started, as in
//! [`Engine::service_now`].
//!
//! Checked: `tests/engine.rs` runs random static one-CPU sets under every
//! registered scheduler on both paths ([`Engine::general_path_only`]) and
//! requires identical reports and traces; `scripts/golden.sh` hashes did
//! not change.

use propshare::{CpuId, Decision, Scheduler, StopReason, Time};

use super::client::{State, NONE};
use super::trace::TraceEvent;
use super::{Engine, Reference, Running, SimError};

impl<S: Scheduler> Engine<S> {
    /// Whether the rest of the run may take the fast path (module doc).
    #[inline]
    pub(super) fn static_one_cpu(&self) -> bool {
        self.fast_path
            && self.static_set
            && self.cfg.cpus == 1
            && self.cfg.switch_cost == 0
            && self.cfg.migration_cost == 0
            && matches!(self.fluid, Reference::Flat(_))
            && self.groups.is_none()
            && self.chains.is_empty()
            && self.series_clients.is_empty()
            && self.series_every.is_none()
            && self.band.is_none()
            && self.lag_windows.is_empty()
            && self.cost.is_none()
            && self.queue.peek_time().is_none()
    }

    /// Run the rest of a one-CPU static run to the horizon (module doc).
    pub(super) fn run_static_one_cpu(
        &mut self,
        countdown: &mut u32,
        trace: &mut dyn FnMut(TraceEvent),
        watch: &mut dyn FnMut(Time) -> bool,
    ) -> Result<(), SimError> {
        let horizon = self.cfg.horizon;
        // The stop of the run started at the last instant, if any.
        let Some(mut end) = self.stops.peek_time() else { return Ok(()) };
        self.stops.pop_at(end);
        while end <= horizon {
            self.tick(countdown, end, watch)?;
            let now = end;
            self.now = now;
            let v = match &mut self.fluid {
                Reference::Flat(f) => f.normalised(now),
                Reference::Hier(_) => unreachable!("the fast path runs without groups"),
            };
            // The run ends: as `stop` with reason Expired.
            let r = self.cpus[0].expect("a run ends only on a busy CPU");
            let i = r.client;
            self.sample_running(i, v);
            self.cpus[0] = None;
            let ran = self.credit(0, r, now, trace);
            self.sched.stopped(now, CpuId(0), Self::id(i), ran, StopReason::Expired).map_err(|e| self.refused(e))?;
            self.set_state(i, State::Waiting);
            // The next run: as `pick` with no costs, phases or work limits.
            let d = self.sched.pick(now, CpuId(0)).map_err(|e| self.refused(e))?;
            let Decision::Run { client, slice } = d else { break };
            let i = self.decided(0, client, slice)?;
            if self.last_on_cpu[0] != i as u32 {
                self.report.context_switches += 1;
            }
            let c = &mut self.clients[i];
            debug_assert!(c.last_cpu == NONE || c.last_cpu == 0, "one CPU: no migration");
            c.runs += 1;
            c.last_cpu = 0;
            self.report.decisions += 1;
            self.last_on_cpu[0] = i as u32;
            self.generation += 1;
            self.cpus[0] = Some(Running { client: i, start: now, generation: self.generation });
            self.running_start[0] = now;
            self.set_state(i, State::Running(0));
            end = now + slice;
            self.sample_running(i, v);
        }
        Ok(())
    }

    /// [`Engine::sample`] of client i, running on CPU 0, where V = `v`.
    #[inline]
    fn sample_running(&mut self, i: usize, v: u128) {
        let c = &self.clients[i];
        let received = c.received + (self.now - self.running_start[0]);
        let ideal = c.weight.get() as u128 * v;
        self.record(i, received, ideal);
    }
}
