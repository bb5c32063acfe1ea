//! One client's state during a run ([`SimClient`]).

use propshare::{Time, Weight};

use super::workload::{Behavior, ClientSpec, Dist};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Absent,
    Waiting,
    Running(u32),
    Blocked,
    Gone,
}

/// "None" for the u32 fields of [`SimClient`] and `last_on_cpu`.
pub(super) const NONE: u32 = u32::MAX;
/// "None" for `woke_at` (times stay below 2^50 ns).
pub(super) const NEVER: Time = Time::MAX;

/// One client's state during a run, kept small: memory per client is a
/// target (at most 1 KB with the scheduler and the fluid reference at a
/// million clients). [`ClientStats`](super::ClientStats) are built from it at the end.
pub(super) struct SimClient {
    /// Lag extremes and service-error range, fixed point (ns · 2^FRAC).
    pub(super) max_lag: i128,
    pub(super) min_lag: i128,
    pub(super) err_min: i128,
    pub(super) err_max: i128,
    /// φ_C/Φ_T in fixed point, for the service error of static sets (once `has_share`).
    pub(super) static_share: u128,
    pub(super) abs_lag_ns_sum: f64,
    pub(super) lag_samples: u64,
    pub(super) received: Time,
    /// CPU time left in the current run phase (phased clients).
    pub(super) phase_left: Time,
    /// CPU time left before it leaves (NEVER: it never finishes).
    pub(super) work_left: Time,
    /// When it woke, until its next run (NEVER: not waiting for one).
    pub(super) woke_at: Time,
    pub(super) runs: u64,
    pub(super) migrations: u64,
    /// Ideal service at departure (or at the horizon), ns.
    pub(super) ideal: f64,
    pub(super) weight: Weight,
    /// Weight at arrival.
    pub(super) weight0: Weight,
    pub(super) state: State,
    /// CPU of its last run (NONE: never ran).
    pub(super) last_cpu: u32,
    /// Its slot in `series` if its lag is recorded over time (NONE: not).
    pub(super) series: u32,
    /// The chain it belongs to, by index (NONE: none).
    pub(super) chain: u32,
    pub(super) has_share: bool,
    pub(super) has_err: bool,
    pub(super) name: String,
    /// Run and sleep phase lengths (phased clients only).
    pub(super) phases: Option<Box<(Dist, Dist)>>,
    pub(super) wake_latencies: Vec<Time>,
}

impl SimClient {
    pub(super) fn new(spec: ClientSpec) -> SimClient {
        SimClient {
            max_lag: 0,
            min_lag: 0,
            err_min: 0,
            err_max: 0,
            static_share: 0,
            abs_lag_ns_sum: 0.0,
            lag_samples: 0,
            received: 0,
            phase_left: 0,
            work_left: spec.work.unwrap_or(NEVER),
            woke_at: NEVER,
            runs: 0,
            migrations: 0,
            ideal: 0.0,
            weight: spec.weight,
            weight0: spec.weight,
            state: State::Absent,
            last_cpu: NONE,
            series: NONE,
            chain: NONE,
            has_share: false,
            has_err: false,
            phases: match spec.behavior {
                Behavior::CpuBound => None,
                Behavior::Phases { run, sleep } => Some(Box::new((run, sleep))),
            },
            name: spec.name,
            wake_latencies: Vec::new(),
        }
    }
}
