//! CPU-time clocks: perf task-clock counters on every thread, or failing
//! that `/proc/<pid>/task/*/schedstat` ([`Clock`]); the controller opens one
//! per job and reads it every round.

use std::os::fd::OwnedFd;

use super::controller::Controller;
use super::Accounting;
use crate::error::ProcError;
use crate::sys::{self, Pid};

pub(super) enum Clock {
    Perf(Vec<OwnedFd>),
    Schedstat { pid: Pid, base: u64, last: u64 },
}

impl Clock {
    pub(super) fn read(&mut self) -> u64 {
        match self {
            Clock::Perf(fds) => fds.iter().map(|fd| sys::perf_read(fd).unwrap_or(0)).sum(),
            Clock::Schedstat { pid, base, last } => {
                if let Ok(v) = sys::schedstat_ns(*pid) {
                    *last = (*last).max(v.saturating_sub(*base));
                }
                *last
            }
        }
    }
}

impl Controller {
    pub(super) fn open_clock(&mut self, pid: Pid, tids: &[Pid]) -> Result<Clock, ProcError> {
        if self.accounting != Accounting::Schedstat {
            let mut fds = Vec::new();
            let mut err = None;
            for &t in tids {
                match sys::perf_task_clock(t) {
                    Ok(fd) => fds.push(fd),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            match err {
                None if !fds.is_empty() => {
                    self.accounting = Accounting::Perf;
                    return Ok(Clock::Perf(fds));
                }
                Some(e) if self.accounting == Accounting::Perf => {
                    return Err(ProcError::io(format!("perf_event_open(task-clock) on PID {pid}"), e))
                }
                e => {
                    self.note(format!(
                        "perf task-clock unavailable ({}); CPU time from /proc/<pid>/task/*/schedstat, refreshed only at ticks and context switches",
                        e.map_or("no thread".to_string(), |e| e.to_string())
                    ));
                    self.accounting = Accounting::Schedstat;
                }
            }
        }
        let base = sys::schedstat_ns(pid).unwrap_or(0);
        Ok(Clock::Schedstat { pid, base, last: 0 })
    }
}
