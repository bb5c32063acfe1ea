//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod rr;
pub mod wfq;
