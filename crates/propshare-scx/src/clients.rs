// SPDX-License-Identifier: GPL-2.0-only
//! What both host models (`own_host.rs` for our BPF side, `host.rs` for the
//! stock one) share: the map between kernel pids and the core's client ids,
//! kernel weights as core weights, where weights come from, the states of a
//! task, and asking the core what a free CPU runs.
//!
//! Client ids are dense and reused (a freed id is handed out again), so the
//! core's per-client tables stay as small as the number of live tasks.

use propshare::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use propshare::scheduler::{Decision, Scheduler};

/// Kernel pid <-> core client id.
#[derive(Debug, Default)]
pub struct Clients {
    pids: Vec<Option<i32>>,
    free: Vec<u32>,
}

impl Clients {
    /// A fresh client id for `pid`.
    pub fn alloc(&mut self, pid: i32) -> ClientId {
        if let Some(id) = self.free.pop() {
            self.pids[id as usize] = Some(pid);
            ClientId(id)
        } else {
            self.pids.push(Some(pid));
            ClientId((self.pids.len() - 1) as u32)
        }
    }

    /// `c` is no longer in use (its task left, or its join failed).
    pub fn free(&mut self, c: ClientId) {
        if let Some(slot) = self.pids.get_mut(c.index()) {
            if slot.take().is_some() {
                self.free.push(c.0);
            }
        }
    }

    /// The pid of client `c`, if `c` is in use.
    pub fn pid(&self, c: ClientId) -> Option<i32> {
        self.pids.get(c.index()).copied().flatten()
    }
}

/// Where weights come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// `p->scx.weight` as the kernel reports it (nice or cgroup).
    Kernel,
    /// Fixed weights resolved once per pid by the caller (job mode).
    Fixed,
}

/// A task in a host model: known to the core and waiting for a CPU, the
/// decided task of core CPU k (in its slot, or running there), or blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Runnable, with no CPU.
    Runnable,
    /// The core gave it CPU k.
    Decided(usize),
    /// Blocked.
    Blocked,
}

/// A kernel weight (1..10000) or a job weight as a core weight. Both are
/// validated before they get here, so the clamp never changes a value in
/// practice.
pub fn weight(w: u64) -> Weight {
    Weight::new(w.clamp(1, Weight::MAX)).unwrap_or(Weight::ONE)
}

/// The core scheduler of a host model and the pid <-> client map it is
/// asked through.
pub struct Core {
    /// The core scheduler.
    pub sched: Box<dyn Scheduler>,
    /// Kernel pid <-> core client id.
    pub clients: Clients,
}

impl Core {
    /// `sched`, with no clients yet.
    pub fn new(sched: Box<dyn Scheduler>) -> Core {
        Core { sched, clients: Clients::default() }
    }

    /// Ask the core what free CPU `k` runs: `(client, pid, slice)`, or `None`
    /// when it idles. A pick of an id the host never gave out (a core bug) is
    /// handed back at once, so the one-decided-task-per-CPU protocol stays
    /// consistent.
    pub fn pick(&mut self, now: Time, k: usize) -> Result<Option<(ClientId, i32, Time)>, SchedError> {
        match self.sched.pick(now, CpuId(k as u32))? {
            Decision::Idle => Ok(None),
            Decision::Run { client, slice } => match self.clients.pid(client) {
                Some(pid) => Ok(Some((client, pid, slice))),
                None => {
                    self.sched.stopped(now, CpuId(k as u32), client, 0, StopReason::Preempted)?;
                    Ok(None)
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reused_and_freed_once() {
        let mut c = Clients::default();
        let a = c.alloc(10);
        let b = c.alloc(11);
        assert_eq!((c.pid(a), c.pid(b)), (Some(10), Some(11)));
        c.free(a);
        c.free(a);
        assert_eq!(c.pid(a), None);
        assert_eq!(c.alloc(12), a, "a freed id is handed out again");
        assert_ne!(c.alloc(13), a, "and only once");
    }

    #[test]
    fn weights_are_clamped_into_the_core_range() {
        assert_eq!(weight(0).get(), 1);
        assert_eq!(weight(305).get(), 305);
    }
}
