//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod cfs;
mod classes;
pub mod dfs;
pub mod dwrr;
pub mod eevdf;
pub mod gdq;
pub mod gr3;
pub mod gr3mp;
pub mod hwf2q;
pub mod linux;
pub mod linux_groups;
pub mod lottery;
pub mod one_queue;
pub mod reweigh;
pub mod rr;
pub mod sfq;
pub mod sfs;
pub mod srr;
pub mod stride;
pub mod vtrr;
pub mod wf2q;
pub mod wfq;
pub mod wrr;
