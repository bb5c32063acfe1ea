//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod rr;
pub mod wfq;
pub mod gr3;
pub mod gr3mp;
