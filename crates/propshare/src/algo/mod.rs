//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod gr3;
pub mod gr3mp;
pub mod rr;
pub mod wfq;
