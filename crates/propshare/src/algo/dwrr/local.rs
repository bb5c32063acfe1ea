//! The local per-CPU schedulers DWRR is layered over (paper section 3.2.1:
//! "the run queue can be implemented with any data structure ... DWRR
//! retains it in both round-active and round-expired").
//!
//! Each CPU holds two queues of the same [`LocalQueue`] type. DWRR decides
//! *which queue* a client is in and *which CPU* owns it; the local queue alone
//! decides the dispatch order inside round-active, as Linux does under the
//! paper's patch.
//!
//! * [`RoundRobinQueue`]: FIFO, one quantum per turn; the O(1) scheduler with
//!   equal priorities (the paper's first port, Linux 2.6.22). O(1) per
//!   operation. The default (`dwrr`).
//! * [`VruntimeQueue`]: CFS-like, runs the client with the least virtual
//!   runtime (`ran / w`); the Linux 2.6.24 port (`dwrr-cfs`). O(log n) per
//!   operation.
//!
//! # Frames
//!
//! A CFS-like queue measures virtual runtime from its own `min_vruntime`, so a
//! client that changes queue (expiry into round-expired, stealing, sleeping)
//! is renormalised as in Linux: [`LocalQueue::exit`] and
//! [`LocalQueue::release`] turn its key into an offset from the queue's
//! `min_vruntime`, and [`LocalQueue::enter`] turns the offset back into an
//! absolute key in the new queue. A weight change rescales the offset by
//! `old / new` so that the service it stands for is kept (otherwise a
//! client that ran at a small weight and then became heavy would wait
//! behind heavy clients whose virtual runtime hardly moves).

use std::collections::BTreeSet;
use std::fmt::Debug;

use crate::list::{Link, List};
use crate::model::{ClientId, Time, Weight};
use crate::readjust::Phi;
use crate::roster::ClientTable;
use crate::vtime::{tag_delta, VTime};

/// A per-CPU run queue that DWRR can layer over. One CPU holds two of them
/// (round-active and round-expired); `Key` is the per-client state the
/// policy needs, stored in DWRR's client table.
pub trait LocalQueue: Debug + Default {
    /// Per-client policy state (its virtual runtime, or nothing).
    type Key: Copy + Debug + Default;

    /// Per-client state shared by all the queues of one scheduler (the
    /// round-robin links, like the run-list links in Linux's task_struct),
    /// so that memory is O(N), not O(P·N). A queue only touches the entries
    /// of its own clients: in a concurrent host, under its CPU's lock.
    type Links: Debug + Default;

    /// Appended to `dwrr` in the registry name (`""` for the default, round robin).
    const SUFFIX: &'static str;

    /// This policy's load of a client of weight `w` (CFS: the weight; RR: 1),
    /// used by arrival placement and stealing (paper 3.2.2: "load is subject
    /// to the definition of the underlying scheduler").
    fn load(w: Weight) -> u64;

    /// Number of queued clients (a running client is not queued).
    fn len(&self) -> usize;

    /// Whether no client is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queue `c`, arriving from outside this queue (join, wake, migration,
    /// expiry). `key` is queue-independent on entry and this queue's on exit.
    fn enter(&mut self, links: &mut Self::Links, c: ClientId, key: &mut Self::Key);

    /// Take queued `c` out of this queue; `key` becomes queue-independent.
    fn exit(&mut self, links: &mut Self::Links, c: ClientId, key: &mut Self::Key);

    /// Dispatch: remove and return the client the policy runs next.
    fn take_next(&mut self, links: &mut Self::Links) -> Option<ClientId>;

    /// The client taken by [`LocalQueue::take_next`] returns to this queue.
    fn put_back(&mut self, links: &mut Self::Links, c: ClientId, key: &mut Self::Key);

    /// The client taken by [`LocalQueue::take_next`] goes elsewhere; `key`
    /// becomes queue-independent.
    fn release(&mut self, key: &mut Self::Key);

    /// The client taken by [`LocalQueue::take_next`] and released by
    /// [`LocalQueue::release`] is again this queue's (inverse of `release`).
    fn adopt(&mut self, key: &mut Self::Key);

    /// Account `ran` ns of service at weight `w`.
    fn charge(key: &mut Self::Key, ran: Time, w: Weight);

    /// The client's weight changes from `old` to `new`; `key` is
    /// queue-independent.
    fn rescale(key: &mut Self::Key, old: Weight, new: Weight);

    /// The queued clients in dispatch order (stealing takes them in this order).
    fn in_order<'a>(&'a self, links: &'a Self::Links) -> impl Iterator<Item = ClientId> + 'a;
}

/// Round robin: an intrusive FIFO (links in the shared per-client table),
/// weights ignored by the local order.
#[derive(Clone, Debug, Default)]
pub struct RoundRobinQueue(List);

impl LocalQueue for RoundRobinQueue {
    type Key = ();
    type Links = ClientTable<Link>;
    const SUFFIX: &'static str = "";

    fn load(_w: Weight) -> u64 {
        1
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn enter(&mut self, links: &mut Self::Links, c: ClientId, _key: &mut ()) {
        self.0.push_back(links, c);
    }
    fn exit(&mut self, links: &mut Self::Links, c: ClientId, _key: &mut ()) {
        debug_assert!(links.get(c).is_some(), "{c} is not queued");
        if links.get(c).is_some() {
            self.0.remove(links, c);
        }
    }
    fn take_next(&mut self, links: &mut Self::Links) -> Option<ClientId> {
        self.0.pop_front(links)
    }
    fn put_back(&mut self, links: &mut Self::Links, c: ClientId, _key: &mut ()) {
        self.0.push_back(links, c);
    }
    fn release(&mut self, _key: &mut ()) {}
    fn adopt(&mut self, _key: &mut ()) {}
    fn charge(_key: &mut (), _ran: Time, _w: Weight) {}
    fn rescale(_key: &mut (), _old: Weight, _new: Weight) {}
    fn in_order<'a>(&'a self, links: &'a Self::Links) -> impl Iterator<Item = ClientId> + 'a {
        self.0.iter(links)
    }
}

/// CFS-like: a tree ordered by virtual runtime (ties by id), and a
/// monotone `min_vruntime` that new arrivals are placed at.
#[derive(Clone, Debug, Default)]
pub struct VruntimeQueue {
    tree: BTreeSet<(VTime, ClientId)>,
    min_vruntime: VTime,
}

impl LocalQueue for VruntimeQueue {
    /// Virtual runtime: absolute while in (or running from) a queue, an
    /// offset from the queue's `min_vruntime` while outside.
    type Key = VTime;
    type Links = ();
    const SUFFIX: &'static str = "-cfs";

    fn load(w: Weight) -> u64 {
        w.get()
    }
    fn len(&self) -> usize {
        self.tree.len()
    }
    fn enter(&mut self, _links: &mut (), c: ClientId, key: &mut VTime) {
        *key = self.min_vruntime.saturating_add(*key);
        self.tree.insert((*key, c));
    }
    fn exit(&mut self, _links: &mut (), c: ClientId, key: &mut VTime) {
        self.tree.remove(&(*key, c));
        *key = key.saturating_sub(self.min_vruntime);
    }
    fn take_next(&mut self, _links: &mut ()) -> Option<ClientId> {
        let (v, c) = self.tree.pop_first()?;
        // Every key is at least min_vruntime (entries are placed at or after
        // it, and it only rises to the smallest key), so this is monotone.
        self.min_vruntime = self.min_vruntime.max(v);
        Some(c)
    }
    fn put_back(&mut self, _links: &mut (), c: ClientId, key: &mut VTime) {
        self.tree.insert((*key, c));
    }
    fn release(&mut self, key: &mut VTime) {
        *key = key.saturating_sub(self.min_vruntime);
    }
    fn adopt(&mut self, key: &mut VTime) {
        *key = self.min_vruntime.saturating_add(*key);
    }
    fn charge(key: &mut VTime, ran: Time, w: Weight) {
        *key = key.saturating_add(tag_delta(ran, Phi::whole(w.get())));
    }
    /// The distance from `min_vruntime` is service over weight: keep the
    /// service, so scale it by `old / new` (as Linux's `reweight_entity`).
    fn rescale(key: &mut VTime, old: Weight, new: Weight) {
        let (old, new) = (old.get() as u128, new.get() as u128);
        *key = match key.checked_mul(old) {
            Some(x) => x / new,
            None => (*key / new).saturating_mul(old),
        };
    }
    fn in_order<'a>(&'a self, _links: &'a ()) -> impl Iterator<Item = ClientId> + 'a {
        self.tree.iter().map(|&(_, c)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MS;

    fn w(x: u64) -> Weight {
        Weight::new(x).unwrap()
    }

    #[test]
    fn vruntime_runs_the_least_served_and_renormalises_between_queues() {
        let mut q = VruntimeQueue::default();
        let mut keys = [0 as VTime; 3];
        for i in 0..3 {
            q.enter(&mut (), ClientId(i), &mut keys[i as usize]);
        }
        // Client 0 runs 10 ms at weight 1, client 1 runs 10 ms at weight 2.
        let a = q.take_next(&mut ()).unwrap();
        assert_eq!(a, ClientId(0));
        VruntimeQueue::charge(&mut keys[0], 10 * MS, w(1));
        q.put_back(&mut (), a, &mut keys[0]);
        let b = q.take_next(&mut ()).unwrap();
        assert_eq!(b, ClientId(1));
        VruntimeQueue::charge(&mut keys[1], 10 * MS, w(2));
        q.put_back(&mut (), b, &mut keys[1]);
        // Client 2 has not run; then client 1 (half the vruntime of 0).
        assert_eq!(q.in_order(&()).collect::<Vec<_>>(), vec![ClientId(2), ClientId(1), ClientId(0)]);
        // Move client 0 to another queue whose min_vruntime is far ahead:
        // it keeps its distance from the minimum, not its absolute key.
        let mut other = VruntimeQueue { tree: BTreeSet::new(), min_vruntime: 1 << 80 };
        q.exit(&mut (), ClientId(0), &mut keys[0]);
        assert_eq!(keys[0], tag_delta(10 * MS, Phi::whole(1)));
        other.enter(&mut (), ClientId(0), &mut keys[0]);
        assert_eq!(keys[0], (1 << 80) + tag_delta(10 * MS, Phi::whole(1)));
    }

    #[test]
    fn round_robin_is_fifo_with_shared_links() {
        let mut links = ClientTable::<Link>::new();
        let (mut q, mut r) = (RoundRobinQueue::default(), RoundRobinQueue::default());
        for i in 0..3 {
            q.enter(&mut links, ClientId(i), &mut ());
        }
        r.enter(&mut links, ClientId(7), &mut ());
        let a = q.take_next(&mut links).unwrap();
        q.put_back(&mut links, a, &mut ());
        q.exit(&mut links, ClientId(1), &mut ());
        assert_eq!(q.in_order(&links).collect::<Vec<_>>(), vec![ClientId(2), ClientId(0)]);
        assert_eq!(r.in_order(&links).collect::<Vec<_>>(), vec![ClientId(7)]);
        assert_eq!((q.len(), r.len()), (2, 1));
        assert_eq!(RoundRobinQueue::load(w(7)), 1);
    }
}
