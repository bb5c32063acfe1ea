//! A job's descendants: every process its main process forks (directly or
//! not, `setsid` ones included) is stopped, continued and placed with it, and
//! released with it at the end, also after the main process has exited.
//!
//! Rules (the SIGSTOP fallback; a cgroup would hold them by itself):
//!
//! * A job's descendants are found by walking `/proc/<pid>/task/*/children`
//!   from its main process and from every descendant already known, until no
//!   new one appears. A running job can fork, a stopped one cannot, so the
//!   walk is made each time the job is stopped (after its SIGSTOP; a
//!   descendant found then is stopped at once, and the walk repeated), when it
//!   leaves, and at the end of the run. A descendant once seen stays known by
//!   pidfd even when its parent exits (it is reparented away from the tree).
//! * Each known descendant is stopped and continued with its job (by pidfd,
//!   as well as through the job's process group), pinned to the job's CPU
//!   when the job is placed, and told to the guardian (restored to the job's
//!   original mask and, for a job we started, ended, if the scheduler dies).
//! * When the main process exits, its descendants are unpinned and resumed at
//!   once; at the end of the run they are released like the job: resumed and
//!   unpinned, and for a job we started sent the same signal as the job, then
//!   SIGKILL after the same grace.
//!
//! Gap: a descendant that leaves the job's process group (`setsid`) and whose
//! parent exits before the controller next walks the tree is reparented to
//! init (or a subreaper) outside the tree and is not found; one that stays
//! in the group is found at the end through the group (started jobs).

use super::controller::Controller;
use super::job::{Kid, St};
use crate::guardian::Release;
use crate::sys::{self, CpuMask, Pid};

/// How many times a walk is repeated while it finds new descendants.
const MAX_WALKS: usize = 8;

impl Controller {
    /// Find job `i`'s descendants not yet known; `stop`: SIGSTOP each new one.
    /// Forgets those that have exited.
    pub(super) fn track_descendants(&mut self, i: usize, stop: bool) {
        let guardian = self.guardian.as_ref().map(|g| g.pid());
        let j = &mut self.jobs[i];
        let mut gone = Vec::new();
        j.kids.retain(|k| {
            let alive = !sys::pidfd_exited(&k.pidfd);
            if !alive {
                gone.push(k.pid);
            }
            alive
        });
        let mut frontier: Vec<Pid> = j.kids.iter().map(|k| k.pid).collect();
        if j.st != St::Gone {
            frontier.push(j.pid);
        }
        if j.spawned && self.released {
            if let Some(g) = j.group {
                // At the end: what is left in its group, wherever it was reparented.
                frontier.extend(sys::group_members(g));
            }
        }
        let mut added = Vec::new();
        for _ in 0..MAX_WALKS {
            let mut new = Vec::new();
            for &p in &frontier {
                let mut found = sys::children(p);
                if p != j.pid && !j.kids.iter().any(|k| k.pid == p) && !added.contains(&p) {
                    found.push(p); // a group member found at the end
                }
                for c in found {
                    let known = c == j.pid || j.kids.iter().any(|k| k.pid == c) || new.contains(&c);
                    let anchor = guardian.is_some() && sys::proc_stat(c).is_ok_and(|s| Some(s.ppid) == guardian);
                    if !known && !anchor {
                        new.push(c);
                    }
                }
            }
            if new.is_empty() {
                break;
            }
            for &c in &new {
                let Ok(pidfd) = sys::pidfd_open(c) else { continue };
                if stop {
                    let _ = sys::pidfd_signal(&pidfd, libc::SIGSTOP);
                }
                j.kids.push(Kid { pid: c, pidfd, pinned: None });
                added.push(c);
            }
            frontier = new;
        }
        let (mask, how) = (j.orig_mask, Release { terminate: j.spawned, leave_stopped: false });
        let name = j.name.clone();
        for p in gone {
            if let Some(g) = self.guardian.as_mut() {
                let _ = g.remove(p);
            }
        }
        for p in added {
            if let Some(g) = self.guardian.as_mut() {
                if let Err(e) = g.add(p, None, mask, how) {
                    self.note(format!("{name}: descendant {p} not watched by the guardian: {e}"));
                }
            }
        }
    }

    /// Send `sig` to every known descendant of job `i`.
    pub(super) fn signal_descendants(&self, i: usize, sig: i32) {
        for k in &self.jobs[i].kids {
            let _ = sys::pidfd_signal(&k.pidfd, sig);
        }
    }

    /// Pin job `i`'s descendants to managed CPU `cpu` (`None`: back to the job's original mask).
    pub(super) fn place_descendants(&mut self, i: usize, cpu: Option<usize>) {
        let mask = match cpu {
            Some(c) => CpuMask::of(&[self.cpus[c]]),
            None => self.jobs[i].orig_mask,
        };
        for k in self.jobs[i].kids.iter_mut() {
            // Unpinning is always done: a descendant forked while its job was
            // pinned inherited the pin without our knowing.
            if (k.pinned != cpu || cpu.is_none()) && sys::set_process_affinity(k.pid, &mask).is_ok() {
                k.pinned = cpu;
            }
        }
    }
}
