//! The model every scheduler and host shares: client and CPU ids, weights,
//! time, and the typed errors for bad input.
//!
//! * Time is integer nanoseconds ([`Time`] = `u64`), always passed in by the
//!   host: the core never reads a clock.
//! * A [`Weight`] is a positive integer in `1..=`[`Weight::MAX`] (`2^32 - 1`,
//!   so every weight up to and beyond `2^31` is accepted). Zero and
//!   out-of-range values are rejected by [`Weight::new`] with a
//!   [`WeightError`], never a panic.
//! * A [`ClientId`] is a small integer chosen by the host. Schedulers keep
//!   per-client state in dense tables indexed by it ([`crate::ClientTable`]),
//!   so hosts should keep ids dense (reuse the ids of departed clients):
//!   scheduler memory is O(largest id).

use std::fmt;

/// Time and durations, in nanoseconds.
pub type Time = u64;

/// One millisecond in [`Time`] units.
pub const MS: Time = 1_000_000;

/// A `u32` id newtype: `index()` into tables, displayed as `"<noun> <id>"`.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $noun:literal, $index_doc:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            #[doc = $index_doc]
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($noun, " {}"), self.0)
            }
        }
    };
}

id_type!(
    /// A client (process, thread, tenant) as the host names it to the scheduler.
    ClientId,
    "client",
    "The id as an index into dense per-client tables."
);

id_type!(
    /// A processor, numbered `0..P`.
    CpuId,
    "cpu",
    "The id as an index into per-CPU tables."
);

/// A client's weight: a positive integer, at most [`Weight::MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Weight(u32);

impl Weight {
    /// The largest accepted weight, `2^32 - 1`.
    pub const MAX: u64 = u32::MAX as u64;
    /// Weight 1.
    pub const ONE: Weight = Weight(1);

    /// A weight, or a [`WeightError`] if `value` is zero or above [`Weight::MAX`].
    pub fn new(value: u64) -> Result<Weight, WeightError> {
        match value {
            0 => Err(WeightError::Zero),
            v if v > Self::MAX => Err(WeightError::TooLarge(v)),
            v => Ok(Weight(v as u32)),
        }
    }

    /// The weight as an integer.
    #[inline]
    pub fn get(self) -> u64 {
        self.0 as u64
    }

    /// `floor(log2 w)`: the GR3/GDQ group order of this weight.
    #[inline]
    pub fn order(self) -> u32 {
        31 - self.0.leading_zeros()
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a weight was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WeightError {
    /// Weights must be positive.
    #[error("weight must be a positive integer, got 0")]
    Zero,
    /// Weights are limited to `2^32 - 1` so that sums of a million weights fit in 64 bits.
    #[error("weight {0} is larger than the maximum {max}", max = Weight::MAX)]
    TooLarge(u64),
}

/// An event the scheduler refused; the scheduler's state is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchedError {
    /// `join` with an id that is already a client.
    #[error("{0} has already joined")]
    AlreadyJoined(ClientId),
    /// An event for an id that is not a client.
    #[error("{0} is not a client")]
    UnknownClient(ClientId),
    /// `block` of a client that is not runnable, or `wake` of one that is not blocked.
    #[error("{client} cannot {event}: it is {state}")]
    WrongState {
        /// The client.
        client: ClientId,
        /// The refused event (`"block"`, `"wake"`, `"leave"`...).
        event: &'static str,
        /// Its state at the time (`"running"`, `"blocked"`, `"runnable"`).
        state: &'static str,
    },
    /// A CPU id outside `0..P`.
    #[error("{cpu} does not exist (this scheduler has {cpus} CPUs)")]
    NoSuchCpu {
        /// The CPU named.
        cpu: CpuId,
        /// P.
        cpus: usize,
    },
    /// `stopped` for a client that the scheduler did not start on that CPU.
    #[error("{client} was not running on {cpu}")]
    NotRunningThere {
        /// The client.
        client: ClientId,
        /// The CPU named.
        cpu: CpuId,
    },
    /// A client id beyond what the scheduler can index ([`crate::MAX_CLIENT_ID`]).
    #[error("{0} is too large an id (the largest is {max})", max = crate::MAX_CLIENT_ID)]
    IdTooLarge(ClientId),
    /// `pick` for a CPU that is still running a client.
    #[error("{cpu} is still running {client}")]
    CpuBusy {
        /// The CPU named.
        cpu: CpuId,
        /// The client it runs.
        client: ClientId,
    },
}

/// Why a running client stopped, as the host reports it in
/// [`crate::Scheduler::stopped`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// Its slice ended (or the host's quantum timer fired); it is still runnable.
    Expired,
    /// The host took the CPU away early (wake-up preemption, a higher class); still runnable.
    Preempted,
    /// It blocked while running: it is now blocked, and will `wake` later.
    Blocked,
    /// It left while running: it is no longer a client.
    Left,
}

impl StopReason {
    /// Whether the client is still runnable after this stop.
    #[inline]
    pub fn still_runnable(self) -> bool {
        matches!(self, StopReason::Expired | StopReason::Preempted)
    }
}
