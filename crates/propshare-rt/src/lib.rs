//! # propshare-rt: a weighted-fair task runtime whose scheduler is a paper's
//!
//! Worker threads are a propshare scheduler's CPUs; *groups* (tenants) are
//! its clients. Each group has an integer weight and a queue of ready
//! tasks (closures and futures, one [`async_task`] task each). A worker asks
//! the scheduler which group to serve, runs that group's tasks until the
//! slice is used up, charges the thread CPU time it really used (one
//! `CLOCK_THREAD_CPUTIME_ID` read at each end of the slice), and asks
//! again. A group whose queue empties blocks in the scheduler; a spawn into
//! it wakes it. So the CPU shares the groups get are the scheduler's, with
//! its lag bound across all workers, and each group's lag against the fluid
//! reference is measured as the simulator measures it ([`lag`]).
//!
//! ```
//! use std::time::Duration;
//! let rt = propshare_rt::Runtime::builder()
//!     .workers(2)
//!     .scheduler("gr3mp")
//!     .slice(Duration::from_millis(1))
//!     .build()
//!     .unwrap();
//! let a = rt.group("a", 3).unwrap();
//! let b = rt.group("b", 1).unwrap();
//! let x = a.spawn(|| 6 * 7).unwrap();
//! let y = b.spawn_future(async { "hello" }).unwrap();
//! assert_eq!(x.join().unwrap(), 42);
//! assert_eq!(y.join().unwrap(), "hello");
//! let snap = rt.shutdown_drain();
//! assert!(snap.totals.balanced());
//! assert_eq!(snap.totals.completed, 2);
//! ```
//!
//! * **Cooperative.** A task runs until it returns or (a future) awaits;
//!   the runtime cannot interrupt it. Long closures check [`need_yield`];
//!   futures can `yield_if_needed().await`. A task longer than the slice
//!   overruns it, and the overrun is charged.
//! * **Locking** follows the algorithm ([`host`]): central schedulers sit
//!   behind one lock taken once per slice per worker; DWRR keeps each
//!   worker's part under its own lock; GDQ keeps each run queue under its
//!   own lock, with its global part under one more. No task runs under a
//!   scheduler lock.
//! * **Nothing lost.** Every accepted task's [`JoinHandle`] resolves: `Ok`,
//!   [`JoinError::Panicked`] (the panic is caught, the worker goes on) or
//!   [`JoinError::Cancelled`] (`shutdown_cancel`, `close_cancel`, drop).
//!   [`Totals::balanced`] checks `submitted = completed + panicked +
//!   cancelled + live`.
//! * **Unwinding needed**: with `panic = "abort"` a task panic aborts.

#![warn(missing_docs)]

mod error;
pub mod host;
pub mod lag;
mod runtime;
mod stats;
mod task;

pub use error::{BuildError, GroupError, JoinError, SpawnError};
pub use host::SchedEvent;
pub use runtime::{Builder, Group, Runtime, MAX_WORKERS};
pub use stats::{GroupStats, Snapshot, Totals, WorkerStats};
pub use task::{need_yield, yield_if_needed, yield_now, JoinHandle, YieldNow};
