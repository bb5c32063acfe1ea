//! One file per algorithm, each behind [`crate::Scheduler`].

pub mod cfs;
pub mod dfs;
pub mod dwrr;
pub mod eevdf;
pub mod gdq;
pub mod gr3;
pub mod gr3mp;
pub mod linux;
pub mod lottery;
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

use std::collections::BTreeSet;

use crate::model::{ClientId, CpuId, Time};
use crate::roster::Roster;
use crate::scheduler::Decision;

/// Start the first client of a key-ordered queue on `cpu` with `slice`, or
/// idle if the queue is empty: the pick of every single-queue fair-queueing
/// scheduler whose queue holds only waiting clients.
pub(crate) fn run_first<K: Ord>(
    roster: &mut Roster,
    queue: &mut BTreeSet<(K, ClientId)>,
    cpu: CpuId,
    slice: Time,
) -> Decision {
    match queue.pop_first() {
        Some((_, client)) => {
            roster.start(cpu, client);
            Decision::Run { client, slice }
        }
        None => Decision::Idle,
    }
}
