//! # propshare-sim: a deterministic multiprocessor simulator
//!
//! Drives any [`propshare::Scheduler`] through a workload on P simulated
//! CPUs and measures it against the exact fluid reference ([`fluid`]).
//!
//! * [`fluid`]: ideal service of every client under GMS with readjustment.
//! * [`engine`]: the discrete-event engine and its per-client metrics.
//! * [`scenario`]: scenario files, validated, and their claims with the judge.
//! * [`run`]: running a scenario (every scheduler and repeat), writing
//!   [`output`]s and plots; it yields [`results`] made of [`metrics`].
//! * [`report`]: the HTML report, from [`results`] only.
//! * [`bench`]: decision-cost benchmarks.

#![warn(missing_docs)]

pub mod alloc;
pub mod bench;
pub mod engine;
pub mod fluid;
pub mod hier;
pub mod metrics;
pub mod output;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
