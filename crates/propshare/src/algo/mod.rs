//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod rr;
pub mod wfq;
pub mod lottery;
pub mod reweigh;
pub mod sfq;
pub mod srr;
pub mod stride;
pub mod vtrr;
pub mod wf2q;
pub mod wrr;
