//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod cfs;
pub mod eevdf;
pub mod linux;
pub mod rr;
pub mod wfq;
