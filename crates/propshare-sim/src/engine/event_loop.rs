//! The loop: handle each instant's events in the fixed order, ask idle CPUs
//! for clients, run them, stop them, and keep the books (service, idle time,
//! switches) as it goes.

use propshare::{CpuId, Decision, Scheduler, StopReason, Time};

use super::client::{SimClient, State, NEVER, NONE};
use super::events::{Event, Stop, CLASS_CLIENT, CLASS_SAMPLE};
use super::stats::SimReport;
use super::trace::TraceEvent;
use super::windows::WindowState;
use super::workload::{ClientSpec, MemberLeaves};
use super::{Engine, Running, SimError};
use crate::fluid::ns_of_service;

/// Instants between two calls of [`Engine::run_watched`]'s watch: about a
/// millisecond of simulation.
pub const WATCH_EVERY: u32 = 1 << 14;

impl<S: Scheduler> Engine<S> {
    /// Run to the horizon, reporting trace events to `trace`.
    pub fn run(self, trace: &mut dyn FnMut(TraceEvent)) -> Result<SimReport, SimError> {
        self.run_watched(trace, &mut |_| true)
    }

    /// [`Engine::run`], calling `watch(now)` every [`WATCH_EVERY`] instants
    /// (progress, interruption): when it returns false the run stops there
    /// with [`SimError::Interrupted`].
    pub fn run_watched(
        mut self,
        trace: &mut dyn FnMut(TraceEvent),
        watch: &mut dyn FnMut(Time) -> bool,
    ) -> Result<SimReport, SimError> {
        let horizon = self.cfg.horizon;
        let mut countdown = WATCH_EVERY;
        while let Some(t) = self.next_instant() {
            if t > horizon {
                break;
            }
            self.tick(&mut countdown, t, watch)?;
            self.instant(t, trace)?;
            if self.static_one_cpu() {
                // From here on only this CPU's runs happen: the fast path (fast.rs) runs them to the horizon.
                self.run_static_one_cpu(&mut countdown, trace, watch)?;
                break;
            }
        }
        self.close(trace);
        Ok(self.finish())
    }

    /// Count an instant, calling `watch` every [`WATCH_EVERY`] of them.
    #[inline]
    pub(super) fn tick(
        &self,
        countdown: &mut u32,
        t: Time,
        watch: &mut dyn FnMut(Time) -> bool,
    ) -> Result<(), SimError> {
        *countdown -= 1;
        if *countdown == 0 {
            *countdown = WATCH_EVERY;
            if !watch(t) {
                return Err(SimError::Interrupted { scheduler: self.report.scheduler.clone(), t });
            }
        }
        Ok(())
    }

    /// Handle every event of instant `t`, then poll the idle CPUs.
    fn instant(&mut self, t: Time, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        self.account_idle(t);
        self.now = t;
        // Handling an event at t schedules nothing at t, so the three
        // classes can be drained in turn.
        while let Some(ev) = self.queue.pop_at(t, CLASS_CLIENT) {
            self.handle(ev, trace)?;
        }
        while let Some(s) = self.stops.pop_at(t) {
            self.cpu_stop(s.cpu as usize, s.generation, trace)?;
        }
        while let Some(ev) = self.queue.pop_at(t, CLASS_SAMPLE) {
            self.handle(ev, trace)?;
        }
        self.poll_idle()
    }

    /// Close the books at the horizon: sample every client, stop every
    /// running one (without telling the scheduler), read the ideal services.
    fn close(&mut self, trace: &mut dyn FnMut(TraceEvent)) {
        let horizon = self.cfg.horizon;
        self.account_idle(horizon);
        self.now = horizon;
        for i in 0..self.clients.len() {
            self.sample(i);
        }
        for cpu in 0..self.cpus.len() {
            if let Some(r) = self.cpus[cpu] {
                self.cpus[cpu] = None;
                self.credit(cpu, r, horizon, trace);
                self.set_state(r.client, State::Waiting);
            }
        }
        for i in 0..self.clients.len() {
            if !matches!(self.clients[i].state, State::Absent | State::Gone) {
                self.clients[i].ideal = ns_of_service(self.fluid.ideal(horizon, Self::id(i)));
            }
        }
    }

    /// Change client i's state, keeping the O(1) counters in step.
    #[inline]
    pub(super) fn set_state(&mut self, i: usize, new: State) {
        let old = std::mem::replace(&mut self.clients[i].state, new);
        if old == State::Waiting {
            self.waiting -= 1;
        }
        if new == State::Waiting {
            self.waiting += 1;
        }
        if let State::Running(cpu) = old {
            let start = self.running_start[cpu as usize];
            self.busy_cpus -= 1;
            self.start_sum -= start as u128;
        }
        if let State::Running(cpu) = new {
            self.busy_cpus += 1;
            self.start_sum += self.running_start[cpu as usize] as u128;
        }
    }

    #[inline]
    pub(super) fn account_idle(&mut self, until: Time) {
        if until <= self.now {
            return;
        }
        let idle = (self.ready_cpus - self.busy_cpus) as Time;
        self.report.idle_while_waiting += idle.min(self.waiting as Time) * (until - self.now);
    }

    pub(super) fn handle(&mut self, ev: Event, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let now = self.now;
        match ev {
            Event::Arrive(i) => {
                let i = i as usize;
                let (w, g) = (self.clients[i].weight, self.group_of(i));
                let effective = self.join_groups(i, g, w)?;
                let kick = self.sched.join(now, Self::id(i), effective).map_err(|e| self.refused(e))?;
                self.fluid.join(now, Self::id(i), g, w);
                if self.groups.is_some() {
                    self.sample_groups();
                }
                self.set_state(i, State::Waiting);
                self.start_phase(i);
                trace(TraceEvent::Join { t: now, client: &self.clients[i].name, weight: w.get() });
                self.kick(kick, trace)?;
            }
            Event::Depart(i) => {
                let i = i as usize;
                match self.clients[i].state {
                    State::Running(cpu) => {
                        self.stop(cpu as usize, StopReason::Left, trace)?;
                    }
                    State::Waiting | State::Blocked => {
                        self.sample(i);
                        self.sched.leave(now, Self::id(i)).map_err(|e| self.refused(e))?;
                        self.depart(i, trace)?;
                    }
                    State::Absent | State::Gone => {}
                }
            }
            Event::SetWeight(i, w) => {
                let i = i as usize;
                if matches!(self.clients[i].state, State::Absent | State::Gone) {
                    return Ok(());
                }
                if self.groups.is_some() {
                    if self.native_groups() {
                        self.sched.set_weight(now, Self::id(i), w).map_err(|e| self.refused(e))?;
                    }
                    if let Some(e) = self.regroup(Some(i), |t| t.set_weight(Self::id(i), w))? {
                        self.sched.set_weight(now, Self::id(i), e).map_err(|e| self.refused(e))?;
                    }
                } else {
                    self.sched.set_weight(now, Self::id(i), w).map_err(|e| self.refused(e))?;
                }
                self.fluid.set_weight(now, Self::id(i), w);
                self.clients[i].weight = w;
                self.static_set = false;
                trace(TraceEvent::Weight { t: now, client: &self.clients[i].name, weight: w.get() });
            }
            Event::Wake(i) => {
                let i = i as usize;
                if self.clients[i].state != State::Blocked {
                    return Ok(());
                }
                if let Some(w) = self.regroup(Some(i), |t| t.set_runnable(Self::id(i), true))? {
                    self.sched.set_weight(now, Self::id(i), w).map_err(|e| self.refused(e))?;
                }
                let kick = self.sched.wake(now, Self::id(i)).map_err(|e| self.refused(e))?;
                self.fluid.wake(now, Self::id(i));
                self.sample(i);
                self.set_state(i, State::Waiting);
                self.clients[i].woke_at = now;
                self.start_phase(i);
                trace(TraceEvent::Wake { t: now, client: &self.clients[i].name });
                self.kick(kick, trace)?;
            }
            Event::GroupWeight(k, w) => {
                let g = propshare::groups::GroupId(k);
                if let super::Reference::Hier(h) = &mut self.fluid {
                    h.set_group_weight(now, g, w).map_err(|e| SimError::Config(format!("groups: {e}")))?;
                }
                if let Some(h) = self.sched.hierarchical() {
                    h.set_group_weight(now, g, w).map_err(|e| SimError::Config(format!("groups: {e}")))?;
                }
                self.regroup(None, |t| t.set_group_weight(g, w))?;
                self.sample_groups();
            }
            Event::MoveClient(i, k) => {
                let (i, g) = (i as usize, propshare::groups::GroupId(k));
                if matches!(self.clients[i].state, State::Absent | State::Gone) {
                    return Ok(());
                }
                if let super::Reference::Hier(h) = &mut self.fluid {
                    h.move_client(now, Self::id(i), g).map_err(|e| SimError::Config(format!("groups: {e}")))?;
                }
                if let Some(h) = self.sched.hierarchical() {
                    h.place(now, Self::id(i), g).map_err(|e| SimError::Config(format!("groups: {e}")))?;
                }
                self.credit_before_move(|_, c| c == Self::id(i));
                if let Some(w) = self.regroup(Some(i), |t| t.move_client(Self::id(i), g))? {
                    self.sched.set_weight(now, Self::id(i), w).map_err(|e| self.refused(e))?;
                }
                self.sample_groups();
            }
            Event::MoveGroup(k, p) => {
                let (g, parent) = (propshare::groups::GroupId(k), propshare::groups::GroupId(p));
                let config = |e: propshare::groups::GroupError| SimError::Config(format!("groups: {e}"));
                if let super::Reference::Hier(h) = &mut self.fluid {
                    h.move_group(now, g, parent).map_err(config)?;
                }
                if let Some(h) = self.sched.hierarchical() {
                    h.move_group(now, g, parent).map_err(config)?;
                }
                self.credit_before_move(|t, c| {
                    t.client(c).is_some_and(|(h, _, _)| h == g || t.path(h).any(|x| x == g))
                });
                self.regroup(None, |t| t.move_group(g, parent))?;
                self.sample_groups();
            }
            Event::GroupDepart(k) => {
                for i in self.clients_below(propshare::groups::GroupId(k)) {
                    self.handle(Event::Depart(i as u32), trace)?;
                }
            }
            Event::BandGrid => self.band_grid(),
            Event::WindowEdge(j) => self.window_edge(j),
            Event::SampleGrid => self.sample_grid(),
            Event::ServiceStart(cpu, generation) => {
                if let Some(r) = self.cpus[cpu as usize].filter(|r| r.generation == generation) {
                    self.sample(r.client);
                }
            }
            Event::ChainStart(k) => self.chain_join(k as usize, trace)?,
            Event::CpuStart(cpu) => {
                let cpu = cpu as usize;
                self.ready_cpus += 1;
                if self.cpus[cpu].is_none() {
                    self.set_idle_ready(cpu, true);
                }
            }
        }
        Ok(())
    }

    /// A run on `cpu` reaches its end: stop it and pick again, unless the
    /// stop is stale (that run was preempted or its client left).
    #[inline]
    pub(super) fn cpu_stop(
        &mut self,
        cpu: usize,
        generation: u64,
        trace: &mut dyn FnMut(TraceEvent),
    ) -> Result<(), SimError> {
        let Some(r) = self.cpus[cpu] else { return Ok(()) };
        if r.generation != generation {
            return Ok(());
        }
        let c = &self.clients[r.client];
        let ran = self.now.saturating_sub(r.start);
        let reason = if c.work_left <= ran {
            StopReason::Left
        } else if c.phases.is_some() && c.phase_left <= ran {
            StopReason::Blocked
        } else {
            StopReason::Expired
        };
        self.stop(cpu, reason, trace)?;
        self.pick(cpu)
    }

    pub(super) fn kick(&mut self, kick: Option<CpuId>, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        if let Some(cpu) = kick {
            let k = cpu.index();
            if k < self.cpus.len() && self.cpus[k].is_some() {
                self.stop(k, StopReason::Preempted, trace)?;
            }
        }
        Ok(())
    }

    pub(super) fn start_phase(&mut self, i: usize) {
        if let Some(p) = &self.clients[i].phases {
            let run = p.0;
            self.clients[i].phase_left = run.sample(&mut self.rng).max(1);
        }
    }

    /// Client i has left the scheduler: close its books and, if it belongs
    /// to a chain, let the next member join at once.
    pub(super) fn depart(&mut self, i: usize, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let ideal = self.fluid.leave(self.now, Self::id(i));
        if self.groups.is_some() {
            self.regroup(None, |t| t.leave(Self::id(i)))?;
            self.forget_issued(i);
        }
        self.set_state(i, State::Gone);
        let c = &mut self.clients[i];
        c.ideal = ns_of_service(ideal);
        trace(TraceEvent::Leave { t: self.now, client: &c.name });
        match c.chain {
            NONE => Ok(()),
            k => self.chain_join(k as usize, trace),
        }
    }

    /// The next member of chain k joins now, unless the chain is over. It
    /// is created here, as client `clients.len()`; a lifetime member's
    /// departure is scheduled at once.
    pub(super) fn chain_join(&mut self, k: usize, trace: &mut dyn FnMut(TraceEvent)) -> Result<(), SimError> {
        let now = self.now;
        let (spec, joined) = &mut self.chains[k];
        if spec.count.is_some_and(|n| *joined >= n) || spec.until.is_some_and(|u| now >= u) {
            return Ok(());
        }
        let i = self.clients.len();
        if i > propshare::MAX_CLIENT_ID as usize {
            return Err(SimError::Config(format!("chain {:?}: too many clients ({})", spec.prefix, i + 1)));
        }
        let (work, depart) = match spec.leaves {
            MemberLeaves::AfterWork(w) => (Some(w), None),
            MemberLeaves::AfterLifetime(l) => (None, Some(now.saturating_add(l))),
        };
        let member = ClientSpec {
            name: format!("{}{}", spec.prefix, joined),
            arrive: now,
            depart,
            work,
            ..ClientSpec::cpu_bound(String::new(), spec.weight)
        };
        *joined += 1;
        let mut client = SimClient::new(member);
        client.chain = k as u32;
        self.clients.push(client);
        // Per-client measurement slots, laid out client-major, grow at the end.
        self.window_received.extend(std::iter::repeat_n(0, self.windows.len()));
        self.window_lag.extend(std::iter::repeat_n(WindowState::default(), self.lag_windows.len()));
        if self.band.is_some() {
            self.band_counts.push((0, 0));
        }
        if let Some(d) = depart {
            self.push(d, Event::Depart(i as u32));
        }
        self.handle(Event::Arrive(i as u32), trace)
    }

    /// Ask every started idle CPU, in CPU order, for a client. A pick changes
    /// only its own CPU, so the idle set can be read a word at a time.
    pub(super) fn poll_idle(&mut self) -> Result<(), SimError> {
        for word in 0..self.idle_ready.len() {
            let mut bits = self.idle_ready[word];
            while bits != 0 {
                let cpu = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.pick(cpu)?;
            }
        }
        Ok(())
    }

    #[inline]
    pub(super) fn pick(&mut self, cpu: usize) -> Result<(), SimError> {
        let now = self.now;
        let clock = self.cost.is_some().then(std::time::Instant::now);
        let d = self.sched.pick(now, CpuId(cpu as u32));
        if let Some(t0) = clock {
            self.pick_cost[cpu] = t0.elapsed().as_nanos() as u64;
        }
        let d = d.map_err(|e| self.refused(e))?;
        let Decision::Run { client, slice } = d else { return Ok(()) };
        let i = self.decided(cpu, client, slice)?;
        let mut cost = 0;
        if self.last_on_cpu[cpu] != i as u32 {
            cost += self.cfg.switch_cost;
            self.report.context_switches += 1;
        }
        let c = &mut self.clients[i];
        if c.last_cpu != NONE && c.last_cpu != cpu as u32 {
            cost += self.cfg.migration_cost;
            c.migrations += 1;
        }
        c.runs += 1;
        c.last_cpu = cpu as u32;
        if c.woke_at != NEVER {
            c.wake_latencies.push(now - c.woke_at);
            c.woke_at = NEVER;
        }
        let run_for = if c.phases.is_some() { slice.min(c.phase_left) } else { slice }.min(c.work_left);
        self.report.decisions += 1;
        self.report.overhead += cost;
        self.last_on_cpu[cpu] = i as u32;
        self.generation += 1;
        let r = Running { client: i, start: now + cost, generation: self.generation };
        self.cpus[cpu] = Some(r);
        self.set_idle_ready(cpu, false);
        self.running_start[cpu] = r.start;
        self.set_state(i, State::Running(cpu as u32));
        self.stops.push(Stop { t: now + cost + run_for, generation: r.generation, cpu: cpu as u32 });
        // The lag grows until service starts, after the costs: sample there.
        if cost == 0 {
            self.sample(i);
        } else {
            self.push(r.start, Event::ServiceStart(cpu as u32, r.generation));
        }
        Ok(())
    }

    /// Credit the run on `cpu` up to `end` and emit its trace interval.
    #[inline]
    pub(super) fn credit(&mut self, cpu: usize, r: Running, end: Time, trace: &mut dyn FnMut(TraceEvent)) -> Time {
        let ran = end.saturating_sub(r.start);
        let c = &mut self.clients[r.client];
        c.received += ran;
        let w = self.windows.len();
        for (k, &(w0, w1)) in self.windows.iter().enumerate() {
            let (a, b) = (r.start.max(w0), end.min(w1));
            if b > a {
                self.window_received[r.client * w + k] += b - a;
            }
        }
        self.work_done += ran;
        self.report.busy += ran;
        if end > r.start {
            trace(TraceEvent::Run { cpu, client: &c.name, start: r.start, end });
        }
        self.credit_groups(cpu, r.client, r.start, end);
        ran
    }

    #[inline]
    pub(super) fn stop(
        &mut self,
        cpu: usize,
        reason: StopReason,
        trace: &mut dyn FnMut(TraceEvent),
    ) -> Result<(), SimError> {
        let now = self.now;
        let r = self.cpus[cpu].expect("running");
        let i = r.client;
        // Sample before crediting: received_now already counts the partial run.
        self.sample(i);
        self.cpus[cpu] = None;
        self.set_idle_ready(cpu, true);
        let ran = self.credit(cpu, r, now, trace);
        let clock = self.cost.is_some().then(std::time::Instant::now);
        let result = self.sched.stopped(now, CpuId(cpu as u32), Self::id(i), ran, reason);
        if let (Some(t0), Some(h)) = (clock, self.cost.as_mut()) {
            h.record(self.pick_cost[cpu] + t0.elapsed().as_nanos() as u64);
        }
        result.map_err(|e| self.refused(e))?;
        let c = &mut self.clients[i];
        c.phase_left = c.phase_left.saturating_sub(ran);
        if c.work_left != NEVER {
            c.work_left = c.work_left.saturating_sub(ran);
        }
        match reason {
            StopReason::Expired | StopReason::Preempted => self.set_state(i, State::Waiting),
            StopReason::Blocked => {
                self.set_state(i, State::Blocked);
                let Some(p) = &self.clients[i].phases else { unreachable!("only phased clients block") };
                let sleep = p.1;
                let wake = now + sleep.sample(&mut self.rng).max(1);
                self.fluid.block(now, Self::id(i));
                self.regroup(None, |t| t.set_runnable(Self::id(i), false))?;
                trace(TraceEvent::Block { t: now, client: &self.clients[i].name });
                self.push(wake, Event::Wake(i as u32));
            }
            StopReason::Left => self.depart(i, trace)?,
        }
        Ok(())
    }
}
