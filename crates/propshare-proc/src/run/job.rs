//! One managed process ([`Job`]) and its state as the controller sees it ([`St`]).

use std::os::fd::OwnedFd;

use propshare::Time;

use super::clock::Clock;
use crate::sys::{self, CpuMask, Pid};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum St {
    Runnable,
    Running { cpu: usize, start: Time, deadline: Time, start_cpu: u64, check_t: Time, check_cpu: u64 },
    Blocked { cpu_at: u64 },
    Gone,
}

pub(super) struct Job {
    pub(super) name: String,
    pub(super) pid: Pid,
    /// Process group we created (spawned jobs): signals go to the whole group.
    pub(super) group: Option<Pid>,
    pub(super) spawned: bool,
    /// Attached while stopped by its user: left stopped when released.
    pub(super) user_stopped: bool,
    pub(super) weight: u64,
    pub(super) orig_mask: CpuMask,
    pub(super) orig_nice: Vec<(Pid, i32)>,
    pub(super) pidfd: Option<OwnedFd>,
    pub(super) clock: Clock,
    /// CPU ns reported to the scheduler so far.
    pub(super) charged: u64,
    pub(super) st: St,
    pub(super) sigstopped: bool,
    pub(super) pinned: Option<usize>,
    pub(super) cgroup: Option<usize>,
    pub(super) end: Option<String>,
    /// Baselines: the time and the CPU time at the last sample.
    pub(super) last_sample: (Time, u64),
    /// Its descendants seen so far (see `descendants`).
    pub(super) kids: Vec<Kid>,
}

/// A descendant of a job's main process: forked, `setsid`, or left behind
/// when the main process exited.
pub(super) struct Kid {
    pub(super) pid: Pid,
    pub(super) pidfd: OwnedFd,
    /// The managed CPU it is pinned to (`None`: its own mask).
    pub(super) pinned: Option<usize>,
}

impl Job {
    pub(super) fn signal(&self, sig: i32) {
        let _ = sys::kill(self.pid, sig);
        if let Some(g) = self.group {
            let _ = sys::kill(-g, sig);
        }
    }
}

pub(super) fn exit_text(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        "exited".into()
    }
}
