//! Block inference. A process does not tell us when it sleeps, so its CPU
//! use decides: a run that used little of its wall time while none of its
//! threads is runnable has blocked, and a blocked job that uses CPU again
//! has woken. The thresholds are named here; the controller applies them in
//! its round, the baselines in theirs (for the ideal only).

use propshare::Time;

use crate::sys::{self, Pid};

/// A run whose deadline is at most this close counts as at its deadline
/// (waking again for the last few µs would cost more than it measures).
pub(super) const DEADLINE_SLACK_NS: Time = 50_000;

/// At its deadline, a run that used under 1/`DEADLINE_IDLE_ONE_IN` of the
/// wall time, with no runnable thread, stops as `Blocked` (else `Expired`).
pub(super) const DEADLINE_IDLE_ONE_IN: u64 = 4;

/// Between deadlines, the run's CPU use is checked over windows of at least
/// this length...
pub(super) const BLOCK_WINDOW_NS: Time = 1_000_000;

/// ...and a run that used under 1/`EARLY_IDLE_ONE_IN` of such a window, with
/// no runnable thread, stops early as `Blocked`.
pub(super) const EARLY_IDLE_ONE_IN: u64 = 8;

/// A blocked job that has used at least this much CPU since it blocked is
/// awake again.
pub(super) const WAKE_CPU_NS: u64 = 100_000;

/// Baselines: a job that used under 1/`BASELINE_IDLE_ONE_IN` of a sampling
/// interval and sleeps now counts as blocked for the ideal.
pub(super) const BASELINE_IDLE_ONE_IN: u64 = 2;

/// Whether `used` ns of CPU over `wall` ns is under 1/`one_in` of it while
/// no thread of `pid` is runnable: the job is asleep.
pub(super) fn asleep(used: u64, wall: Time, one_in: u64, pid: Pid) -> bool {
    used.saturating_mul(one_in) < wall && !sys::any_thread_runnable(pid)
}
