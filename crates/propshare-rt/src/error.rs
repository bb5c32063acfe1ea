//! Typed errors: building a runtime, making a group, spawning, joining.

use std::any::Any;
use std::fmt;

use propshare::WeightError;

/// Why [`crate::Builder::build`] refused.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `workers(0)`.
    #[error("the number of workers must be at least 1")]
    NoWorkers,
    /// More workers than the scheduler's CPU ids can name.
    #[error("{0} workers is too many (at most {max})", max = crate::runtime::MAX_WORKERS)]
    TooManyWorkers(usize),
    /// A slice below 1 µs or above 10 s.
    #[error("slice {0:?} is outside 1µs..=10s")]
    BadSlice(std::time::Duration),
    /// `max_groups(0)` or above the core's client id limit.
    #[error("max_groups {0} is outside 1..={max}", max = propshare::MAX_CLIENT_ID as u64 + 1)]
    BadMaxGroups(usize),
    /// The scheduler spec (name or `name(param=value,...)`) was refused by the registry.
    #[error("scheduler: {0}")]
    Scheduler(#[from] propshare::registry::BuildError),
    /// The operating system refused a worker thread.
    #[error("could not start worker thread {index}: {source}")]
    Thread {
        /// Which worker.
        index: usize,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Why a group could not be made or changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// Weight 0 or above `2^32 - 1`.
    #[error("group {group:?}: {source}")]
    Weight {
        /// The group's name.
        group: String,
        /// What is wrong with the weight.
        source: WeightError,
    },
    /// Every group id is in use ([`crate::Builder::max_groups`]).
    #[error("group {group:?}: all {max} group ids are in use (raise Builder::max_groups)")]
    TooManyGroups {
        /// The group's name.
        group: String,
        /// The limit.
        max: usize,
    },
    /// The group was closed.
    #[error("group {0:?} is closed")]
    Closed(String),
    /// The runtime is shutting down (or has failed).
    #[error("the runtime is shutting down")]
    ShuttingDown,
}

/// Why a spawn was refused; the task was not submitted (and is dropped, unrun).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    /// The group was closed ([`crate::Group::close`]).
    #[error("group {0:?} is closed")]
    Closed(String),
    /// The runtime is shutting down (or has failed).
    #[error("the runtime is shutting down")]
    ShuttingDown,
}

/// How a task ended other than by returning: what its [`crate::JoinHandle`] resolves to.
pub enum JoinError {
    /// The task panicked; the payload, as `catch_unwind` gave it.
    Panicked(Box<dyn Any + Send>),
    /// The task was dropped unrun or unfinished: `shutdown_cancel`, a group
    /// closed with [`crate::Group::close_cancel`], the runtime dropped, or a
    /// future woken after shutdown.
    Cancelled,
}

impl JoinError {
    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// Whether the task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// The panic message, when the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => {
                p.downcast_ref::<String>().map(String::as_str).or(p.downcast_ref::<&str>().copied())
            }
            JoinError::Cancelled => None,
        }
    }

    /// The panic message, or a placeholder when the payload is not a string.
    fn panic_text(&self) -> &str {
        self.panic_message().unwrap_or("<non-string payload>")
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => write!(f, "Panicked({:?})", self.panic_text()),
            JoinError::Cancelled => write!(f, "Cancelled"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => write!(f, "the task panicked: {}", self.panic_text()),
            JoinError::Cancelled => write!(f, "the task was cancelled"),
        }
    }
}

impl std::error::Error for JoinError {}
