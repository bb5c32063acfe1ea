//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod rr;
pub mod wfq;
pub mod linux;
pub mod cfs;
pub mod eevdf;
