//! What the engine reports as it runs, for traces and Gantt charts
//! ([`TraceEvent`]); the writers are in [`crate::output`].

use propshare::Time;

/// What the engine reports as it runs (for traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent<'a> {
    /// A client joined.
    Join {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
        /// Weight.
        weight: u64,
    },
    /// A client left.
    Leave {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
    },
    /// A client blocked.
    Block {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
    },
    /// A client woke.
    Wake {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
    },
    /// A client's weight changed.
    Weight {
        /// Time.
        t: Time,
        /// Client name.
        client: &'a str,
        /// New weight.
        weight: u64,
    },
    /// A client ran on a CPU over `[start, end)`.
    Run {
        /// CPU.
        cpu: usize,
        /// Client name.
        client: &'a str,
        /// Start, ns.
        start: Time,
        /// End, ns.
        end: Time,
    },
}

impl TraceEvent<'_> {
    /// Whether the event falls in the time window `[start, end)` (a run: overlaps it).
    pub fn within(&self, (start, end): (Time, Time)) -> bool {
        match *self {
            TraceEvent::Run { start: s, end: e, .. } => s < end && e > start,
            TraceEvent::Join { t, .. }
            | TraceEvent::Leave { t, .. }
            | TraceEvent::Block { t, .. }
            | TraceEvent::Wake { t, .. }
            | TraceEvent::Weight { t, .. } => (start..end).contains(&t),
        }
    }
}
