//! Running under Linux's own weighting instead of our scheduler: nice values
//! or cgroup v1 `cpu.shares` (the mapping is in [`crate::baseline`]), with
//! CPU use sampled every quantum for the metrics.

use propshare::Time;

use super::blocking;
use super::controller::Controller;
use super::job::St;
use super::Mode;
use crate::baseline;
use crate::error::ProcError;
use crate::metrics::Change;
use crate::sys;

impl Controller {
    pub(super) fn start_baseline_job(&mut self, idx: usize) -> Result<(), ProcError> {
        let mask = self.cpu_mask;
        let j = &mut self.jobs[idx];
        if self.mode == Mode::BaselineShares {
            let shares = baseline::shares_for_weights(&[j.weight])[0];
            if let Some(cg) = self.cgroups.as_mut() {
                j.cgroup = Some(cg.add(j.pid, shares)?);
            }
        } else {
            if self.mode == Mode::BaselineCgroup2 {
                self.enter_cgroup2(idx)?;
            }
            let j = &mut self.jobs[idx];
            sys::set_process_affinity(j.pid, &mask)
                .map_err(|e| ProcError::io(format!("setting the affinity of {}", j.name), e))?;
        }
        let now = sys::monotonic_ns().saturating_sub(self.t0);
        let j = &mut self.jobs[idx];
        j.last_sample = (now, j.clock.read());
        if j.sigstopped {
            j.signal(libc::SIGCONT);
            j.sigstopped = false;
        }
        self.apply_baseline_weights()
    }

    /// Re-derive nice values / shares for the whole live set (nice is relative).
    pub(super) fn apply_baseline_weights(&mut self) -> Result<(), ProcError> {
        let live: Vec<usize> = (0..self.jobs.len()).filter(|&i| self.jobs[i].st != St::Gone).collect();
        let ws: Vec<u64> = live.iter().map(|&i| self.jobs[i].weight).collect();
        match self.mode {
            Mode::BaselineNice => {
                let nices = baseline::nice_for_weights(&ws);
                for (k, &i) in live.iter().enumerate() {
                    let j = &mut self.jobs[i];
                    for t in sys::threads(j.pid).unwrap_or_default() {
                        if !j.orig_nice.iter().any(|&(x, _)| x == t) {
                            if let Ok(n) = sys::get_nice(t) {
                                j.orig_nice.push((t, n));
                            }
                        }
                        let _ = sys::set_nice(t, nices[k]);
                    }
                }
            }
            Mode::BaselineShares => {
                let shares = baseline::shares_for_weights(&ws);
                for (k, &i) in live.iter().enumerate() {
                    if let (Some(cg), Some(g)) = (self.cgroups.as_ref(), self.jobs[i].cgroup) {
                        cg.set_shares(g, shares[k])?;
                    }
                }
            }
            Mode::BaselineCgroup2 => {
                for i in live {
                    self.reweigh_cgroup2(i)?;
                }
            }
            Mode::Propshare => {}
        }
        Ok(())
    }

    /// One sampling round of a Linux baseline. Returns the next wake-up time.
    pub(super) fn baseline_round(&mut self) -> Result<Time, ProcError> {
        let now = self.now();
        for i in 0..self.jobs.len() {
            if self.jobs[i].st == St::Gone {
                continue;
            }
            if self.exited(i) {
                self.job_left(i, now)?;
                continue;
            }
            let c = self.jobs[i].clock.read();
            let (t_prev, c_prev) = self.jobs[i].last_sample;
            let used = c.saturating_sub(c_prev);
            let wall = now.saturating_sub(t_prev);
            if wall == 0 {
                continue;
            }
            let cpu = sys::proc_stat(self.jobs[i].pid).map(|s| s.processor).unwrap_or(0);
            let cpu_idx = self.cpus.iter().position(|&x| x == cpu).unwrap_or(0);
            if used > 0 {
                self.rec.run(cpu_idx, i, t_prev, t_prev + used.min(wall));
            }
            self.rec.sample(now, i, c);
            self.jobs[i].last_sample = (now, c);
            // Inferred blocking, for the ideal: asleep now and used under half a CPU.
            let asleep = blocking::asleep(used, wall, blocking::BASELINE_IDLE_ONE_IN, self.jobs[i].pid);
            match (self.jobs[i].st, asleep) {
                (St::Runnable, true) => {
                    self.jobs[i].st = St::Blocked { cpu_at: c };
                    self.rec.change(now, i, Change::Block);
                }
                (St::Blocked { .. }, false) => {
                    self.jobs[i].st = St::Runnable;
                    self.rec.change(now, i, Change::Wake);
                }
                _ => {}
            }
        }
        Ok(now + self.quantum)
    }
}
