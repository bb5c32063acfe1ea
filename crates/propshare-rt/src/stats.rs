//! What a [`crate::Runtime::snapshot`] reports.

use std::time::Duration;

/// One group's counters and lag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStats {
    /// Its client id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its weight now.
    pub weight: u64,
    /// Closed to new spawns.
    pub closed: bool,
    /// Closed and drained: it left the scheduler.
    pub retired: bool,
    /// Tasks accepted.
    pub submitted: u64,
    /// Tasks that returned.
    pub completed: u64,
    /// Tasks that panicked (caught, reported at the handle).
    pub panicked: u64,
    /// Tasks dropped unrun or unfinished (their handles say `Cancelled`).
    pub cancelled: u64,
    /// Tasks not ended yet: `submitted - completed - panicked - cancelled`
    /// (computed so, and 0 if the ends ever exceeded `submitted`, which
    /// [`Totals::balanced`] would then report).
    pub live: u64,
    /// Ready tasks in its queue now.
    pub queue_len: usize,
    /// Thread CPU time charged to it (what the scheduler was told), ns.
    pub cpu_ns: u64,
    /// Wall time it held a worker, ns.
    pub run_ns: u64,
    /// Wall time it was runnable but not running, ns.
    pub wait_ns: u64,
    /// Slices it was given.
    pub slices: u64,
    /// Times it was found on two workers at once (always 0 unless a bug).
    pub overlaps: u64,
    /// Lag now against the fluid reference, ns (see [`crate::lag`]).
    pub lag_ns: i64,
    /// Largest lag seen, ns.
    pub max_lag_ns: i64,
    /// Smallest lag seen, ns.
    pub min_lag_ns: i64,
    /// Its ideal rate now in the fluid model, in CPUs, as (num, den); (0, 1) when not runnable or not tracked.
    pub ideal_rate: (u64, u64),
}

impl GroupStats {
    /// Tasks that ran to an end (returned or panicked).
    pub fn tasks_run(&self) -> u64 {
        self.completed + self.panicked
    }
}

/// Sums over every group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tasks accepted.
    pub submitted: u64,
    /// Tasks that returned.
    pub completed: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Tasks cancelled.
    pub cancelled: u64,
    /// Tasks not ended.
    pub live: u64,
    /// CPU time charged, ns.
    pub cpu_ns: u64,
}

impl Totals {
    /// `submitted = completed + panicked + cancelled + live`. `live` is
    /// derived from the others, so this fails only if a task's end was
    /// counted more often than its spawn (a double count), or the counters
    /// were read while tasks were spawned or ended.
    pub fn balanced(&self) -> bool {
        self.submitted == self.completed + self.panicked + self.cancelled + self.live
    }
}

/// The runtime at one instant.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Since the runtime started.
    pub elapsed: Duration,
    /// The scheduler spec.
    pub scheduler: String,
    /// "central" or "distributed".
    pub locking: &'static str,
    /// Workers.
    pub workers: usize,
    /// The scheduler's quantum, ns.
    pub slice_ns: u64,
    /// The fluid reference's CPU clock, ns (0 if lag is not tracked).
    pub fluid_clock_ns: u64,
    /// Every group, live ones first, by id.
    pub groups: Vec<GroupStats>,
    /// Sums.
    pub totals: Totals,
    /// Why the runtime failed (a scheduler error: fail-stop), if it did.
    pub failure: Option<String>,
}

impl Snapshot {
    /// The group named `name` (the live one first).
    pub fn group(&self, name: &str) -> Option<&GroupStats> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// One worker's scheduler calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Calls to stop-and-pick (slice ends and idle polls).
    pub picks: u64,
    /// Wall time inside them, lock waits included, ns.
    pub pick_ns: u64,
    /// Tasks (polls) run.
    pub tasks: u64,
    /// Thread CPU time it charged for its slices, ns: how much CPU the
    /// operating system gave this worker while it served groups.
    pub cpu_ns: u64,
}
