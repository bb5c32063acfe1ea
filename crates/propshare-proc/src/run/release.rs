//! Release: every way out of a run resumes every managed process, restores
//! its affinity and nice values, leaves the cgroups, and ends the jobs we
//! started (attached ones keep running).

use super::controller::Controller;
use super::job::{exit_text, St};
use crate::sys;

/// How long the jobs we started get to end after `term` before SIGKILL
/// (the guardian gives the same after a SIGKILL of the scheduler).
const TERM_GRACE_NS: u64 = crate::guardian::TERM_GRACE_NS;
/// How often they are looked at meanwhile.
const REAP_POLL: std::time::Duration = std::time::Duration::from_millis(2);

impl Controller {
    /// Resume everything, restore affinity and nice, leave the cgroups, then
    /// end the jobs we started with `term` (attached ones keep running).
    pub(super) fn release_all(&mut self, term: i32) {
        if self.released {
            return;
        }
        self.released = true;
        let now = self.now();
        for i in 0..self.jobs.len() {
            if let St::Running { cpu, start, start_cpu, .. } = self.jobs[i].st {
                let c = self.jobs[i].clock.read();
                let used = c.saturating_sub(start_cpu).min(now.saturating_sub(start));
                self.rec.run(cpu, i, start, start + used);
                self.rec.sample(now, i, c);
                self.running[cpu] = None;
                self.jobs[i].st = St::Runnable;
            }
        }
        for i in 0..self.jobs.len() {
            self.track_descendants(i, false);
            self.place_descendants(i, None);
            self.signal_descendants(i, libc::SIGCONT);
        }
        for j in self.jobs.iter_mut() {
            if j.st == St::Gone {
                continue;
            }
            let _ = sys::set_process_affinity(j.pid, &j.orig_mask);
            for &(t, n) in &j.orig_nice {
                let _ = sys::set_nice(t, n);
            }
            j.signal(if j.user_stopped { libc::SIGSTOP } else { libc::SIGCONT });
            j.sigstopped = j.user_stopped;
            j.pinned = None;
        }
        if let Some(mut cg) = self.cgroups.take() {
            cg.destroy();
        }
        // Our own children: ask them to end, then make sure.
        let children: Vec<usize> =
            (0..self.jobs.len()).filter(|&i| self.jobs[i].spawned && self.jobs[i].st != St::Gone).collect();
        for &i in &children {
            self.jobs[i].signal(term);
        }
        // The descendants of the jobs we started (including those whose main
        // process has gone) get the same signal and grace.
        let started: Vec<usize> = (0..self.jobs.len()).filter(|&i| self.jobs[i].spawned).collect();
        for &i in &started {
            self.signal_descendants(i, term);
        }
        let deadline = sys::monotonic_ns() + TERM_GRACE_NS;
        let mut left: Vec<usize> = children;
        while !left.is_empty() {
            left.retain(|&i| {
                let j = &mut self.jobs[i];
                let mut status = 0;
                // SAFETY: reaping our own child.
                let r = unsafe { libc::waitpid(j.pid, &mut status, libc::WNOHANG) };
                if r == j.pid || r < 0 {
                    if r == j.pid {
                        j.end = Some(exit_text(status));
                    }
                    if let Some(g) = j.group {
                        let _ = sys::kill(-g, libc::SIGCONT);
                    }
                    j.st = St::Gone;
                    false
                } else {
                    true
                }
            });
            if sys::monotonic_ns() > deadline {
                for &i in &left {
                    self.jobs[i].signal(libc::SIGKILL);
                }
                for &i in &left {
                    let mut status = 0;
                    // SAFETY: reaping our own child (SIGKILL cannot be refused).
                    unsafe { libc::waitpid(self.jobs[i].pid, &mut status, 0) };
                    self.jobs[i].end = Some(exit_text(status));
                    self.jobs[i].st = St::Gone;
                }
                break;
            }
            std::thread::sleep(REAP_POLL);
        }
        // Descendants: wait out what is left of the same grace, then SIGKILL.
        loop {
            for &i in &started {
                self.jobs[i].kids.retain(|k| !sys::pidfd_exited(&k.pidfd));
            }
            if started.iter().all(|&i| self.jobs[i].kids.is_empty()) {
                break;
            }
            if sys::monotonic_ns() > deadline {
                for &i in &started {
                    self.signal_descendants(i, libc::SIGKILL);
                }
                break;
            }
            std::thread::sleep(REAP_POLL);
        }
        for j in self.jobs.iter_mut() {
            if j.end.is_none() {
                j.end = Some("running (released)".into());
            }
        }
        // cgroup v2 directories can only go once the processes in them have.
        if let Some(mut b) = self.cg2.take() {
            for d in b.destroy() {
                self.notes.push(format!("cgroup {} could not be removed (a process is still in it)", d.display()));
            }
        }
        if let Some(g) = self.guardian.take() {
            let _ = g.disarm();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.release_all(libc::SIGTERM);
    }
}
