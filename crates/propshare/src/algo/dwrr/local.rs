//! The local per-CPU schedulers DWRR is layered over (paper section 3.2.1:
//! "the run queue can be implemented with any data structure ... DWRR
//! retains it in both round-active and round-expired").
//!
//! Each CPU holds two queues of the same [`LocalQueue`] type over the slots
//! of its entry slab ([`Entries`]); a client's local key lives in its
//! entry and moves with it. DWRR decides
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

use super::{Entries, Slot};
use crate::list::{Link, Links, List};
use crate::model::{ClientId, Time, Weight};
use crate::readjust::Phi;
use crate::vtime::{tag_delta, VTime};

/// A per-CPU run queue that DWRR can layer over. One CPU holds two of them
/// (round-active and round-expired) and the [`Entries`] of its clients; a
/// queue holds slots of that slab, and a client's `Key` lives in its entry,
/// so a queue operation touches only its own CPU's part.
pub trait LocalQueue: Debug + Default {
    /// Per-client policy state, kept in the client's entry: its virtual
    /// runtime, or its round-robin links (slots of the same slab, like the
    /// run-list links in Linux's task_struct). It moves with the client.
    type Key: Copy + Debug + Default;

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

    /// Queue slot `s`, arriving from outside this queue (join, wake,
    /// migration, expiry). Its key is queue-independent on entry and this
    /// queue's on exit.
    fn enter(&mut self, e: &mut Entries<Self::Key>, s: Slot);

    /// Take queued slot `s` out of this queue; its key becomes queue-independent.
    fn exit(&mut self, e: &mut Entries<Self::Key>, s: Slot);

    /// Dispatch: remove and return the slot the policy runs next.
    fn take_next(&mut self, e: &mut Entries<Self::Key>) -> Option<Slot>;

    /// The slot taken by [`LocalQueue::take_next`] returns to this queue.
    fn put_back(&mut self, e: &mut Entries<Self::Key>, s: Slot);

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

    /// The queued slots in dispatch order (stealing takes them in this order).
    fn in_order<'a>(&'a self, e: &'a Entries<Self::Key>) -> impl Iterator<Item = Slot> + 'a;
}

/// Round-robin links live in the entries' keys, and name slots.
impl Links<Slot> for Entries<Link<Slot>> {
    #[inline]
    fn link(&self, s: Slot) -> Link<Slot> {
        *self.key(s)
    }
    #[inline]
    fn set_prev(&mut self, s: Slot, prev: Option<Slot>) {
        self.key_mut(s).set_prev(prev);
    }
    #[inline]
    fn set_next(&mut self, s: Slot, next: Option<Slot>) {
        self.key_mut(s).set_next(next);
    }
}

/// Round robin: an intrusive FIFO of slots (links in the entries),
/// weights ignored by the local order.
#[derive(Clone, Debug, Default)]
pub struct RoundRobinQueue(List<Slot>);

impl LocalQueue for RoundRobinQueue {
    type Key = Link<Slot>;
    const SUFFIX: &'static str = "";

    fn load(_w: Weight) -> u64 {
        1
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn enter(&mut self, e: &mut Entries<Link<Slot>>, s: Slot) {
        self.0.push_back(e, s);
    }
    fn exit(&mut self, e: &mut Entries<Link<Slot>>, s: Slot) {
        self.0.remove(e, s);
    }
    fn take_next(&mut self, e: &mut Entries<Link<Slot>>) -> Option<Slot> {
        self.0.pop_front(e)
    }
    fn put_back(&mut self, e: &mut Entries<Link<Slot>>, s: Slot) {
        self.0.push_back(e, s);
    }
    fn release(&mut self, _key: &mut Link<Slot>) {}
    fn adopt(&mut self, _key: &mut Link<Slot>) {}
    fn charge(_key: &mut Link<Slot>, _ran: Time, _w: Weight) {}
    fn rescale(_key: &mut Link<Slot>, _old: Weight, _new: Weight) {}
    fn in_order<'a>(&'a self, e: &'a Entries<Link<Slot>>) -> impl Iterator<Item = Slot> + 'a {
        self.0.iter(e)
    }
}

/// CFS-like: a tree ordered by virtual runtime (ties by client id), and a
/// monotone `min_vruntime` that new arrivals are placed at.
#[derive(Clone, Debug, Default)]
pub struct VruntimeQueue {
    tree: BTreeSet<(VTime, ClientId, Slot)>,
    min_vruntime: VTime,
}

impl LocalQueue for VruntimeQueue {
    /// Virtual runtime: absolute while in (or running from) a queue, an
    /// offset from the queue's `min_vruntime` while outside.
    type Key = VTime;
    const SUFFIX: &'static str = "-cfs";

    fn load(w: Weight) -> u64 {
        w.get()
    }
    fn len(&self) -> usize {
        self.tree.len()
    }
    fn enter(&mut self, e: &mut Entries<VTime>, s: Slot) {
        let c = e.client(s);
        let key = e.key_mut(s);
        *key = self.min_vruntime.saturating_add(*key);
        self.tree.insert((*key, c, s));
    }
    fn exit(&mut self, e: &mut Entries<VTime>, s: Slot) {
        let c = e.client(s);
        let key = e.key_mut(s);
        self.tree.remove(&(*key, c, s));
        *key = key.saturating_sub(self.min_vruntime);
    }
    fn take_next(&mut self, _e: &mut Entries<VTime>) -> Option<Slot> {
        let (v, _, s) = self.tree.pop_first()?;
        // Every key is at least min_vruntime (entries are placed at or after
        // it, and it only rises to the smallest key), so this is monotone.
        self.min_vruntime = self.min_vruntime.max(v);
        Some(s)
    }
    fn put_back(&mut self, e: &mut Entries<VTime>, s: Slot) {
        self.tree.insert((*e.key(s), e.client(s), s));
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
    fn in_order<'a>(&'a self, _e: &'a Entries<VTime>) -> impl Iterator<Item = Slot> + 'a {
        self.tree.iter().map(|&(_, _, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MS;

    fn w(x: u64) -> Weight {
        Weight::new(x).unwrap()
    }

    /// A slab holding clients `ids` (weight 1), slot i for the i-th.
    fn slab<K: Copy + Debug + Default>(ids: &[u32]) -> Entries<K> {
        let mut e = Entries::default();
        for (i, &c) in ids.iter().enumerate() {
            assert_eq!(e.insert(super::super::Entry::new(ClientId(c), w(1))), i as Slot);
        }
        e
    }

    #[test]
    fn vruntime_runs_the_least_served_and_renormalises_between_queues() {
        let mut e = slab::<VTime>(&[0, 1, 2]);
        let mut q = VruntimeQueue::default();
        for s in 0..3 {
            q.enter(&mut e, s);
        }
        // Client 0 runs 10 ms at weight 1, client 1 runs 10 ms at weight 2.
        let a = q.take_next(&mut e).unwrap();
        assert_eq!(e.client(a), ClientId(0));
        VruntimeQueue::charge(e.key_mut(a), 10 * MS, w(1));
        q.put_back(&mut e, a);
        let b = q.take_next(&mut e).unwrap();
        assert_eq!(e.client(b), ClientId(1));
        VruntimeQueue::charge(e.key_mut(b), 10 * MS, w(2));
        q.put_back(&mut e, b);
        // Client 2 has not run; then client 1 (half the vruntime of 0).
        assert_eq!(q.in_order(&e).collect::<Vec<_>>(), vec![2, 1, 0]);
        // Move client 0 to another queue whose min_vruntime is far ahead:
        // it keeps its distance from the minimum, not its absolute key.
        let mut other = VruntimeQueue { tree: BTreeSet::new(), min_vruntime: 1 << 80 };
        q.exit(&mut e, 0);
        assert_eq!(*e.key(0), tag_delta(10 * MS, Phi::whole(1)));
        other.enter(&mut e, 0);
        assert_eq!(*e.key(0), (1 << 80) + tag_delta(10 * MS, Phi::whole(1)));
    }

    #[test]
    fn round_robin_is_fifo_over_the_slab() {
        let mut e = slab::<Link<Slot>>(&[10, 11, 12, 17]);
        let (mut q, mut r) = (RoundRobinQueue::default(), RoundRobinQueue::default());
        for s in 0..3 {
            q.enter(&mut e, s);
        }
        r.enter(&mut e, 3);
        let a = q.take_next(&mut e).unwrap();
        q.put_back(&mut e, a);
        q.exit(&mut e, 1);
        assert_eq!(q.in_order(&e).collect::<Vec<_>>(), vec![2, 0]);
        assert_eq!(r.in_order(&e).map(|s| e.client(s)).collect::<Vec<_>>(), vec![ClientId(17)]);
        assert_eq!((q.len(), r.len()), (2, 1));
        assert_eq!(RoundRobinQueue::load(w(7)), 1);
    }
}
