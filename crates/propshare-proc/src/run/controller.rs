//! The controller: the jobs, what runs on each CPU, and one round of our
//! scheduler (steps 1-4 of [`super`]'s "One round"); the control socket's
//! commands act on it.

use propshare::{ClientId, CpuId, Decision, Scheduler, StopReason, Time, Weight};

use super::blocking;
use super::job::{exit_text, Job, St};
use super::spawn::resolve_program;
use super::{Accounting, Charge, Mode};
use crate::baseline::Cgroups;
use crate::error::ProcError;
use crate::groups::HostGroups;
use crate::guardian::Guardian;
use crate::metrics::{Change, Record};
use crate::spec::{self, Target};
use crate::sys::{self, CpuMask, Pid};

pub(super) struct Controller {
    pub(super) mode: Mode,
    pub(super) cpus: Vec<usize>,
    pub(super) cpu_mask: CpuMask,
    pub(super) quantum: Time,
    pub(super) sched: Option<Box<dyn Scheduler>>,
    /// The groups' adapter (runs with groups): the scheduler sees effective weights.
    pub(super) groups: Option<HostGroups>,
    /// `--cgroup2`: the subtree enforced.
    pub(super) watch: Option<super::cgroup2::Watch>,
    /// `--baseline cgroup2`: the cgroups made.
    pub(super) cg2: Option<super::cgroup2::Baseline2>,
    pub(super) jobs: Vec<Job>,
    pub(super) running: Vec<Option<usize>>,
    pub(super) guardian: Option<Guardian>,
    pub(super) cgroups: Option<Cgroups>,
    pub(super) rec: Record,
    pub(super) t0: u64,
    pub(super) accounting: Accounting,
    pub(super) charge: Charge,
    pub(super) notes: Vec<String>,
    pub(super) released: bool,
    pub(super) verbose: bool,
    pub(super) names: Vec<String>,
}

impl Controller {
    pub(super) fn now(&self) -> Time {
        sys::monotonic_ns().saturating_sub(self.t0)
    }

    pub(super) fn note(&mut self, n: String) {
        if self.verbose {
            eprintln!("propshare run: {n}");
        }
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    pub(super) fn managed_pids(&self) -> Vec<Pid> {
        self.jobs.iter().filter(|j| j.st != St::Gone).map(|j| j.pid).collect()
    }

    pub(super) fn set_weight(&mut self, name: &str, w: u64) -> Result<(), ProcError> {
        let weight = Weight::new(w).map_err(|e| ProcError::usage(e.to_string()))?;
        let idx = self
            .jobs
            .iter()
            .position(|j| j.name == name && j.st != St::Gone)
            .ok_or_else(|| ProcError::usage(format!("no job named {name:?}")))?;
        let now = self.now();
        self.jobs[idx].weight = w;
        self.rec.change(now, idx, Change::Weight(w));
        match self.mode {
            Mode::Propshare => {
                let c = ClientId(idx as u32);
                match (self.sched.as_mut(), self.groups.as_mut()) {
                    (Some(s), Some(g)) => g.set_weight(&mut **s, now, c, weight)?,
                    (Some(s), None) => s.set_weight(now, c, weight)?,
                    _ => {}
                }
                Ok(())
            }
            _ => self.apply_baseline_weights(),
        }
    }

    /// Whether job `i` has exited; reaps it if it is our child.
    pub(super) fn exited(&mut self, i: usize) -> bool {
        let j = &mut self.jobs[i];
        let dead = match &j.pidfd {
            Some(fd) => sys::pidfd_exited(fd),
            None => sys::state(j.pid).is_none_or(|s| s == 'Z' || s == 'X'),
        };
        if dead && j.spawned && j.end.is_none() {
            let mut status = 0;
            // SAFETY: reaping our own child.
            let r = unsafe { libc::waitpid(j.pid, &mut status, libc::WNOHANG) };
            if r == j.pid {
                j.end = Some(exit_text(status));
            } else {
                return false; // not reapable yet: look again next round
            }
        }
        dead
    }

    /// Job `i` has gone: tell the scheduler, the guardian and the record.
    pub(super) fn job_left(&mut self, i: usize, now: Time) -> Result<(), ProcError> {
        let cpu_now = self.jobs[i].clock.read();
        let st = self.jobs[i].st;
        if let St::Running { cpu, start, start_cpu, .. } = st {
            self.finish_run(i, cpu, start, start_cpu, cpu_now, now, StopReason::Left)?;
        } else if self.mode == Mode::Propshare {
            if let Some(s) = self.sched.as_mut() {
                s.leave(now, ClientId(i as u32))?;
            }
        }
        if let (Some(s), Some(g)) = (self.sched.as_mut(), self.groups.as_mut()) {
            g.leave(&mut **s, now, ClientId(i as u32))?;
        }
        if self.mode != Mode::Propshare {
            self.rec.sample(now, i, cpu_now);
        }
        let j = &mut self.jobs[i];
        j.st = St::Gone;
        j.end.get_or_insert_with(|| "exited".into());
        // Its group may still hold stopped descendants; those it left behind
        // run unpinned until the end of the run (see `descendants`).
        if let Some(g) = j.group {
            let _ = sys::kill(-g, libc::SIGCONT);
        }
        self.track_descendants(i, false);
        self.place_descendants(i, None);
        self.signal_descendants(i, libc::SIGCONT);
        let j = &mut self.jobs[i];
        let pid = j.pid;
        if let Some(g) = self.guardian.as_mut() {
            let _ = g.remove(pid);
        }
        self.rec.change(now, i, Change::Leave);
        Ok(())
    }

    /// Close the run of job `i` on CPU `cpu`: charge it and report the stop.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_run(
        &mut self,
        i: usize,
        cpu: usize,
        start: Time,
        start_cpu: u64,
        cpu_now: u64,
        now: Time,
        why: StopReason,
    ) -> Result<(), ProcError> {
        let j = &mut self.jobs[i];
        let mut ran = cpu_now.saturating_sub(j.charged);
        j.charged = j.charged.max(cpu_now);
        if self.charge == Charge::Slot && why.still_runnable() {
            ran = now.saturating_sub(start).max(1);
        }
        let used = cpu_now.saturating_sub(start_cpu).min(now.saturating_sub(start));
        self.rec.run(cpu, i, start, start + used);
        self.rec.sample(now, i, cpu_now);
        self.running[cpu] = None;
        j.st = match why {
            StopReason::Blocked => St::Blocked { cpu_at: cpu_now },
            StopReason::Left => St::Gone,
            _ => St::Runnable,
        };
        if why == StopReason::Blocked {
            self.rec.change(now, i, Change::Block);
        }
        if let Some(s) = self.sched.as_mut() {
            s.stopped(now, CpuId(cpu as u32), ClientId(i as u32), ran, why)?;
            if let (Some(g), StopReason::Blocked) = (self.groups.as_mut(), why) {
                g.block(&mut **s, now, ClientId(i as u32))?;
            }
        }
        Ok(())
    }

    /// One round of our scheduler (steps 1-4 of the module doc). Returns the next wake-up time.
    pub(super) fn round(&mut self) -> Result<Time, ProcError> {
        let now = self.now();
        // 1. exits
        for i in 0..self.jobs.len() {
            if self.jobs[i].st != St::Gone && self.exited(i) {
                self.job_left(i, now)?;
            }
        }
        // 2. running jobs
        for cpu in 0..self.cpus.len() {
            let Some(i) = self.running[cpu] else { continue };
            let St::Running { start, deadline, start_cpu, check_t, check_cpu, .. } = self.jobs[i].st else { continue };
            let c = self.jobs[i].clock.read();
            let wall = now.saturating_sub(start);
            if now + blocking::DEADLINE_SLACK_NS >= deadline {
                let pid = self.jobs[i].pid;
                let idle = blocking::asleep(c.saturating_sub(start_cpu), wall, blocking::DEADLINE_IDLE_ONE_IN, pid);
                let why = if idle { StopReason::Blocked } else { StopReason::Expired };
                self.finish_run(i, cpu, start, start_cpu, c, now, why)?;
            } else if now.saturating_sub(check_t) >= blocking::BLOCK_WINDOW_NS {
                let window = now - check_t;
                let pid = self.jobs[i].pid;
                if blocking::asleep(c.saturating_sub(check_cpu), window, blocking::EARLY_IDLE_ONE_IN, pid) {
                    self.finish_run(i, cpu, start, start_cpu, c, now, StopReason::Blocked)?;
                } else if let St::Running { check_t, check_cpu, .. } = &mut self.jobs[i].st {
                    *check_t = now;
                    *check_cpu = c;
                }
            }
        }
        // 3. blocked jobs: awake again once they use CPU
        for i in 0..self.jobs.len() {
            let St::Blocked { cpu_at } = self.jobs[i].st else { continue };
            let c = self.jobs[i].clock.read();
            if c.saturating_sub(cpu_at) >= blocking::WAKE_CPU_NS {
                self.jobs[i].st = St::Runnable;
                self.rec.change(now, i, Change::Wake);
                self.rec.sample(now, i, c);
                if let Some(s) = self.sched.as_mut() {
                    if let Some(g) = self.groups.as_mut() {
                        g.wake(&mut **s, now, ClientId(i as u32))?;
                    }
                    s.wake(now, ClientId(i as u32))?;
                }
            }
        }
        // 4. picks
        for cpu in 0..self.cpus.len() {
            if self.running[cpu].is_some() {
                continue;
            }
            let Some(s) = self.sched.as_mut() else { break };
            if let Decision::Run { client, slice } = s.pick(now, CpuId(cpu as u32))? {
                let i = client.index();
                let j = self.jobs.get_mut(i).ok_or(ProcError::Sched(propshare::SchedError::UnknownClient(client)))?;
                let c = j.clock.read();
                j.st = St::Running {
                    cpu,
                    start: now,
                    deadline: now + slice.max(1),
                    start_cpu: c,
                    check_t: now,
                    check_cpu: c,
                };
                self.running[cpu] = Some(i);
                self.rec.sample(now, i, c);
            }
        }
        // Apply: stop first (with every descendant), then pin and continue.
        for i in 0..self.jobs.len() {
            let j = &mut self.jobs[i];
            if j.st == St::Runnable && !j.sigstopped {
                j.signal(libc::SIGSTOP);
                j.sigstopped = true;
                self.track_descendants(i, true);
                self.signal_descendants(i, libc::SIGSTOP);
            }
        }
        for cpu in 0..self.cpus.len() {
            let Some(i) = self.running[cpu] else { continue };
            self.place_descendants(i, Some(cpu));
            if self.jobs[i].sigstopped {
                self.signal_descendants(i, libc::SIGCONT);
            }
            let j = &mut self.jobs[i];
            if j.pinned != Some(cpu) {
                let m = CpuMask::of(&[self.cpus[cpu]]);
                match sys::set_process_affinity(j.pid, &m) {
                    Ok(()) => j.pinned = Some(cpu),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) || e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(ProcError::io(format!("pinning {} to CPU {}", j.name, self.cpus[cpu]), e)),
                }
            }
            if j.sigstopped {
                j.signal(libc::SIGCONT);
                j.sigstopped = false;
            }
        }
        let mut next = now + self.quantum;
        for j in &self.jobs {
            if let St::Running { deadline, .. } = j.st {
                next = next.min(deadline);
            }
        }
        Ok(next)
    }
}

impl crate::control::Host for Controller {
    fn add(&mut self, words: &[String]) -> Result<String, ProcError> {
        let mut spec = spec::parse_job(words)?;
        let mut taken = self.names.clone();
        let mut one = [spec.clone()];
        spec::assign_names(&mut one, &mut taken)?;
        spec = one[0].clone();
        if let Target::Command(argv) = &spec.target {
            resolve_program(&argv[0])?;
        }
        let nice = if self.mode == Mode::BaselineNice { Some(0) } else { None };
        let i = self.add_job(&spec, nice)?;
        Ok(self.jobs[i].name.clone())
    }

    fn weight(&mut self, name: &str, w: u64) -> Result<(), ProcError> {
        self.set_weight(name, w)
    }

    fn list(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for j in self.jobs.iter_mut() {
            let st = match j.st {
                St::Runnable => "runnable".to_string(),
                St::Running { cpu, .. } => format!("running:{}", self.cpus[cpu]),
                St::Blocked { .. } => "blocked".into(),
                St::Gone => "gone".into(),
            };
            let c = if j.st == St::Gone { 0 } else { j.clock.read() };
            out.push(format!("{} pid={} weight={} state={} cpu_ms={:.1}", j.name, j.pid, j.weight, st, c as f64 / 1e6));
        }
        out
    }
}
