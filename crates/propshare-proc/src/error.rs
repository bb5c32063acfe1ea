//! Errors, split into the user's mistakes (exit status 2) and failures.

use std::io;

/// Why a run failed. Whatever the error, every managed process has been
/// resumed and its affinity restored before it is returned.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// Bad input: options, jobs, weights, CPUs, commands or PIDs (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// The scheduler refused an event (a bug in the host or the scheduler).
    #[error("scheduler error: {0}")]
    Sched(#[from] propshare::SchedError),
    /// The groups' adapter refused an event (the exact effective weights
    /// outgrew 2^32 - 1, or a bug in the host).
    #[error("groups: {0}")]
    Groups(#[from] propshare::groups::GroupError),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl ProcError {
    /// A usage error.
    pub fn usage(msg: impl Into<String>) -> ProcError {
        ProcError::Usage(msg.into())
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: io::Error) -> ProcError {
        ProcError::Io { what: what.into(), source }
    }

    /// Whether this is the user's mistake (the CLI exits with status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, ProcError::Usage(_))
    }

    /// The exit status the CLI uses: 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.is_usage() {
            2
        } else {
            1
        }
    }
}
