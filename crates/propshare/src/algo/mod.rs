//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod cfs;
mod classes;
pub mod dfs;
pub mod dwrr;
pub mod eevdf;
pub mod gdq;
pub mod gr3;
pub mod gr3mp;
pub mod linux;
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

/// Two distinct elements of a slice, both mutable: the two per-CPU parts of
/// a cross-CPU step (steal, pull, balance).
pub(crate) fn two_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b, "a cross-CPU step between a CPU and itself");
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&mut lo[a], &mut hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&mut hi[0], &mut lo[b])
    }
}
