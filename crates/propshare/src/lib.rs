//! # propshare: proportional-share CPU scheduling on multiprocessors
//!
//! Users give *clients* (processes, threads, tenants) integer *weights*; a
//! proportional-share scheduler gives each runnable client CPU time in
//! proportion to its weight, on any number of CPUs P, except that no client
//! can use more than one CPU at a time (weights that would need more are
//! *infeasible* and are [readjusted](readjust)).
//!
//! This crate is the core: the model ([`ClientId`], [`Weight`], [`Time`] in
//! ns), one small event-driven trait ([`Scheduler`]), the shared weight
//! readjustment, and one file per algorithm under [`algo`]. It does no I/O,
//! starts no threads and reads no clock: hosts (the simulator, the process
//! scheduler, later sched_ext) own time and CPUs and report events.
//!
//! ```
//! use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, StopReason, Weight, MS};
//!
//! let mut s = registry::build("wfq", SchedConfig::new(1, 10 * MS)).unwrap();
//! s.join(0, ClientId(0), Weight::new(3).unwrap()).unwrap();
//! s.join(0, ClientId(1), Weight::new(1).unwrap()).unwrap();
//! let mut runs = [0; 2];
//! let mut now = 0;
//! for _ in 0..8 {
//!     let Decision::Run { client, slice } = s.pick(now, CpuId(0)).unwrap() else { unreachable!() };
//!     now += slice;
//!     s.stopped(now, CpuId(0), client, slice, StopReason::Expired).unwrap();
//!     runs[client.index()] += 1;
//! }
//! assert_eq!(runs, [6, 2]);
//! ```

#![warn(missing_docs)]

pub mod algo;
pub mod contract;
pub mod duration;
pub mod groups;
pub mod list;
pub mod model;
pub mod percpu;
pub mod readjust;
pub mod registry;
pub mod roster;
pub mod scheduler;
pub mod shell;
pub mod vtime;
pub mod wide;

pub use duration::{parse_duration, DurationError};
pub use model::{ClientId, CpuId, SchedError, StopReason, Time, Weight, WeightError, MS};
pub use roster::{ClientTable, Roster, Status, MAX_CLIENT_ID};
pub use scheduler::{Decision, Kick, SchedConfig, Scheduler};
pub use shell::{Policy, Shell};
