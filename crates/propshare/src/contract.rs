//! The trait contract as an executable check, shared by every scheduler's
//! property tests (`tests/contract.rs` adds one line per scheduler).
//!
//! [`check`] drives a scheduler through a sequence of [`Op`]s as a host
//! would (it keeps its own model of every client's state and of the clock),
//! polls every idle CPU after each event, and verifies after every event:
//!
//! 1. `pick` only returns clients that are runnable and not running on any CPU
//!    (so no client ever runs on two CPUs at once);
//! 2. a blocked or departed client is never chosen;
//! 3. for a scheduler that declares itself work-conserving, no CPU is idle
//!    while a runnable client is not running;
//! 4. valid events are accepted, invalid ones (duplicate join, wake of a
//!    runnable client, stop on the wrong CPU, unknown CPU) are refused with
//!    an error and change nothing;
//! 5. every scheduler's own invariants ([`Scheduler::check_invariants`]:
//!    the shell's roster and the algorithm's numbered ones) hold after every
//!    event at any size (in debug builds the shell's own check covers the
//!    picks too: after every one while P + runnable ≤ 16, amortised up to 128);
//! 6. liveness: after the random history, with the runnable set frozen, every
//!    runnable client runs within a budget of quanta proportional to
//!    `Σw / w_min` (skipped when the weights make the budget unreasonably large;
//!    the run stops as soon as every one has run).
//!
//! Nothing may panic.
//!
//! [`xorshift`] is the seeded number stream the tests and measurements use
//! for their random workloads.

use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::scheduler::{Decision, Scheduler};

/// One host event. Indices (`which`) select among the clients or CPUs for
/// which the event is valid, modulo their number; an event with no valid
/// target is skipped.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// A new client joins with this weight.
    Join(u64),
    /// A client that is not running leaves.
    Leave(usize),
    /// A runnable, not running client blocks.
    Block(usize),
    /// A blocked client wakes.
    Wake(usize),
    /// Any client gets a new weight.
    SetWeight(usize, u64),
    /// Advance to the earliest slice end and stop that CPU's client (Expired).
    Tick,
    /// Advance by this many ns, then stop the `which`-th busy CPU's client for `reason`
    /// (0 expired, 1 preempted, 2 blocked, 3 left).
    Stop(usize, Time, u8),
    /// Send an invalid event and check it is refused.
    Invalid(u8),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Model {
    Waiting,
    Running(usize),
    Blocked,
}

struct Host<'a> {
    sched: &'a mut dyn Scheduler,
    cpus: usize,
    quantum: Time,
    now: Time,
    clients: Vec<(ClientId, Model, u64)>,
    /// Per CPU: (client, start time, slice end).
    running: Vec<Option<(ClientId, Time, Time)>>,
    next_id: u32,
    served: Vec<u64>,
}

/// Marsaglia's xorshift64 stream from `seed` (non-zero): a cheap,
/// reproducible source of workload numbers for tests and measurements (the
/// figures they print, some quoted in `docs/ALGORITHMS.md`, depend on it).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = seed;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

/// Run `ops` against `sched` on `cpus` CPUs; `Err` describes the first violation.
pub fn check(sched: &mut dyn Scheduler, cpus: usize, quantum: Time, ops: &[Op]) -> Result<(), String> {
    let mut host = Host {
        sched,
        cpus,
        quantum,
        now: 0,
        clients: Vec::new(),
        running: vec![None; cpus],
        next_id: 0,
        served: Vec::new(),
    };
    for (step, op) in ops.iter().enumerate() {
        host.apply(*op).map_err(|e| format!("step {step} ({op:?}): {e}"))?;
        host.sched.check_invariants().map_err(|e| format!("invariant after step {step} ({op:?}): {e}"))?;
        host.poll().map_err(|e| format!("after step {step} ({op:?}): {e}"))?;
    }
    host.liveness()
}

impl Host<'_> {
    fn idx(&self, c: ClientId) -> usize {
        self.clients.iter().position(|x| x.0 == c).expect("known client")
    }

    fn nth(&self, which: usize, f: impl Fn(&Model) -> bool) -> Option<usize> {
        let cands: Vec<usize> = (0..self.clients.len()).filter(|&i| f(&self.clients[i].1)).collect();
        (!cands.is_empty()).then(|| cands[which % cands.len()])
    }

    fn weight(w: u64) -> Weight {
        Weight::new(w.clamp(1, Weight::MAX)).expect("clamped")
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        let now = self.now;
        match op {
            Op::Join(w) => {
                let c = ClientId(self.next_id);
                self.next_id += 1;
                self.sched.join(now, c, Self::weight(w)).map_err(|e| format!("join refused: {e}"))?;
                self.clients.push((c, Model::Waiting, w.clamp(1, Weight::MAX)));
                self.served.push(0);
            }
            Op::Leave(which) => {
                if let Some(i) = self.nth(which, |m| !matches!(m, Model::Running(_))) {
                    self.sched.leave(now, self.clients[i].0).map_err(|e| format!("leave refused: {e}"))?;
                    self.clients.remove(i);
                    self.served.remove(i);
                }
            }
            Op::Block(which) => {
                if let Some(i) = self.nth(which, |m| *m == Model::Waiting) {
                    self.sched.block(now, self.clients[i].0).map_err(|e| format!("block refused: {e}"))?;
                    self.clients[i].1 = Model::Blocked;
                }
            }
            Op::Wake(which) => {
                if let Some(i) = self.nth(which, |m| *m == Model::Blocked) {
                    self.sched.wake(now, self.clients[i].0).map_err(|e| format!("wake refused: {e}"))?;
                    self.clients[i].1 = Model::Waiting;
                }
            }
            Op::SetWeight(which, w) => {
                if let Some(i) = self.nth(which, |_| true) {
                    self.sched
                        .set_weight(now, self.clients[i].0, Self::weight(w))
                        .map_err(|e| format!("set_weight refused: {e}"))?;
                    self.clients[i].2 = w.clamp(1, Weight::MAX);
                }
            }
            Op::Tick => {
                if let Some(cpu) =
                    (0..self.cpus).filter(|&k| self.running[k].is_some()).min_by_key(|&k| self.running[k].map(|r| r.2))
                {
                    let end = self.running[cpu].expect("busy").2;
                    self.now = self.now.max(end);
                    self.stop(cpu, StopReason::Expired)?;
                }
            }
            Op::Stop(which, dt, reason) => {
                let busy: Vec<usize> = (0..self.cpus).filter(|&k| self.running[k].is_some()).collect();
                if !busy.is_empty() {
                    self.now += dt;
                    let reason = [StopReason::Expired, StopReason::Preempted, StopReason::Blocked, StopReason::Left]
                        [reason as usize % 4];
                    self.stop(busy[which % busy.len()], reason)?;
                }
            }
            Op::Invalid(kind) => self.invalid(kind)?,
        }
        Ok(())
    }

    fn stop(&mut self, cpu: usize, reason: StopReason) -> Result<(), String> {
        let (c, start, _) = self.running[cpu].take().expect("busy");
        let ran = self.now - start;
        self.sched.stopped(self.now, CpuId(cpu as u32), c, ran, reason).map_err(|e| format!("stopped refused: {e}"))?;
        let i = self.idx(c);
        self.served[i] += 1;
        match reason {
            StopReason::Expired | StopReason::Preempted => self.clients[i].1 = Model::Waiting,
            StopReason::Blocked => self.clients[i].1 = Model::Blocked,
            StopReason::Left => {
                self.clients.remove(i);
                self.served.remove(i);
            }
        }
        Ok(())
    }

    fn invalid(&mut self, kind: u8) -> Result<(), String> {
        let now = self.now;
        let ghost = ClientId(self.next_id + 1000);
        let refused = match kind % 6 {
            0 => {
                self.sched.leave(now, ghost).is_err()
                    && self.sched.block(now, ghost).is_err()
                    && self.sched.wake(now, ghost).is_err()
            }
            1 => match self.clients.first() {
                Some(&(c, _, w)) => self.sched.join(now, c, Self::weight(w)).is_err(),
                None => true,
            },
            2 => match self.nth(0, |m| *m != Model::Blocked) {
                Some(i) => self.sched.wake(now, self.clients[i].0).is_err(),
                None => true,
            },
            3 => match self.nth(0, |m| matches!(m, Model::Running(_))) {
                Some(i) => {
                    let c = self.clients[i].0;
                    let Model::Running(k) = self.clients[i].1 else { unreachable!() };
                    let other = (k + 1) % self.cpus;
                    let wrong_cpu = self.cpus == 1
                        || self.sched.stopped(now, CpuId(other as u32), c, 0, StopReason::Expired).is_err();
                    wrong_cpu && self.sched.leave(now, c).is_err() && self.sched.block(now, c).is_err()
                }
                None => true,
            },
            4 => self.sched.pick(now, CpuId(self.cpus as u32)).is_err(),
            _ => match (0..self.cpus).find(|&k| self.running[k].is_some()) {
                Some(k) => self.sched.pick(now, CpuId(k as u32)).is_err(),
                None => true,
            },
        };
        if refused {
            Ok(())
        } else {
            Err(format!("invalid event of kind {} was accepted", kind % 6))
        }
    }

    /// Poll every idle CPU once, checking each answer, then work conservation.
    fn poll(&mut self) -> Result<(), String> {
        for cpu in 0..self.cpus {
            if self.running[cpu].is_some() {
                continue;
            }
            let d =
                self.sched.pick(self.now, CpuId(cpu as u32)).map_err(|e| format!("pick on cpu {cpu} refused: {e}"))?;
            if let Decision::Run { client, slice } = d {
                let Some(i) = self.clients.iter().position(|x| x.0 == client) else {
                    return Err(format!("cpu {cpu} was given departed or unknown {client}"));
                };
                match self.clients[i].1 {
                    Model::Waiting => {}
                    Model::Running(k) => return Err(format!("{client} given to cpu {cpu} while running on cpu {k}")),
                    Model::Blocked => return Err(format!("blocked {client} given to cpu {cpu}")),
                }
                if slice == 0 {
                    return Err(format!("zero slice for {client}"));
                }
                self.clients[i].1 = Model::Running(cpu);
                self.running[cpu] = Some((client, self.now, self.now + slice));
            }
        }
        if self.sched.work_conserving() {
            let idle = self.running.iter().filter(|r| r.is_none()).count();
            let waiting = self.clients.iter().filter(|c| c.1 == Model::Waiting).count();
            if idle > 0 && waiting > 0 {
                return Err(format!("{idle} CPUs idle while {waiting} runnable clients wait"));
            }
        }
        Ok(())
    }

    fn liveness(&mut self) -> Result<(), String> {
        let runnable: Vec<usize> = (0..self.clients.len()).filter(|&i| self.clients[i].1 != Model::Blocked).collect();
        if runnable.is_empty() {
            return Ok(());
        }
        // A client may legitimately wait while others catch up with service it
        // got ahead during the history (at most the whole history's length),
        // and then for about Σw / w_min quanta of its own turn.
        let total: u64 = runnable.iter().map(|&i| self.clients[i].2).sum();
        let min = runnable.iter().map(|&i| self.clients[i].2).min().unwrap_or(1);
        let ratio = (total / min).saturating_add(1);
        let turn = 8 * (runnable.len() as u64 + self.cpus as u64) * self.quantum;
        let budget_ns = (self.now.saturating_add(turn)).saturating_mul(ratio);
        // Weighted round robin may run each other client for its whole weight
        // in quanta before returning: Σw quanta per round.
        let budget = (budget_ns / self.quantum.max(1)).saturating_add(total).saturating_mul(self.cpus as u64);
        if budget > 200_000 {
            return Ok(());
        }
        for s in self.served.iter_mut() {
            *s = 0;
        }
        // The verdict is in once every runnable client has run: stop there
        // rather than spend the rest of the budget.
        for _ in 0..budget {
            if runnable.iter().all(|&i| self.served[i] > 0) {
                return Ok(());
            }
            self.apply(Op::Tick)?;
            self.poll()?;
            if self.running.iter().all(Option::is_none) {
                self.now += self.quantum;
                self.poll()?;
            }
        }
        for &i in &runnable {
            if self.served[i] == 0 {
                let (c, _, w) = self.clients[i];
                return Err(format!("{c} (weight {w}) never ran in {budget} quanta with the runnable set frozen"));
            }
        }
        Ok(())
    }
}
