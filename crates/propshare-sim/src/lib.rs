//! # propshare-sim: a deterministic multiprocessor simulator
//!
//! Drives any [`propshare::Scheduler`] through a workload on P simulated
//! CPUs and measures it against the exact fluid reference ([`fluid`]).
//!
//! * [`fluid`]: ideal service of every client under GMS with readjustment.
//! * [`engine`]: the discrete-event engine and its per-client metrics.

#![warn(missing_docs)]

pub mod bench;
pub mod engine;
pub mod fluid;
pub mod output;
pub mod plot;
pub mod report;
pub mod run;
pub mod scenario;
