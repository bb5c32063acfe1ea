//! Per-CPU state for the distributed algorithms (DWRR, GDQ, ...): the pieces
//! every split shares, so that an algorithm's file holds its rules only.
//!
//! # The split
//!
//! An algorithm's state is one small global part plus one part per CPU. A
//! CPU's part owns its queue(s) and the entries of the clients it holds, in
//! a [`Slab`]; an entry moves with its client. The global part holds an
//! [`OwnerMap`], client → (CPU, slot), so that an event naming a client
//! (block, leave, set_weight, wake) finds its entry in O(1).
//!
//! A step on one CPU is a method of that CPU's part; a cross-CPU step
//! (steal, pull, migrate) is a function of the global part and two CPU
//! parts. The steps over all the CPUs reach the parts through [`Parts`]:
//! directly (one thread: a slice of parts, what a [`Shell`](crate::Shell)
//! policy holds) or under one lock per CPU ([`Locked`]). The code of the
//! steps is the same in both; under locks a step reads the owner map as a
//! hint and checks it again under the lock it takes ([`with_client`]).
//!
//! The central-queue algorithms with processor affinity (SFS, DFS) keep
//! their queues as the global part and only where each client last ran per
//! CPU: [`AffinePart`] (the clients that last ran there, entries in a
//! slab, an owner map to find them), reached owned ([`Affinity`]) or under
//! one lock per CPU ([`LockedAffinity`]) through [`AffinityParts`]; a client
//! that runs on another CPU moves its entry between two parts ([`ran_on`]).
//!
//! # Rules for a concurrent host
//!
//! * A one-CPU step holds its CPU's lock alone; a cross-CPU step holds both
//!   CPUs' locks, taken in CPU id order ([`Locked::with_two`]), so no two
//!   steps wait for each other in a cycle.
//! * The owner map is written only by a step that holds the lock of the CPU
//!   whose slab holds the entry (both CPUs' when it moves: [`OwnerMap::move_entry`]).
//! * No step holds a lock while it waits for anything else.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::model::ClientId;

/// An entry's index in its CPU's [`Slab`].
pub type Slot = u32;

/// A per-CPU entry that names its client (what [`OwnerMap`] maps back).
pub trait Owned {
    /// The client this entry belongs to.
    fn client(&self) -> ClientId;
}

/// One CPU's slab of client entries. A vacant slot is reused by the next
/// entry, so a slab is as long as the most clients its CPU has held at once.
#[derive(Clone, Debug)]
pub struct Slab<E> {
    slots: Vec<Option<E>>,
    free: Vec<Slot>,
}

impl<E> Default for Slab<E> {
    fn default() -> Slab<E> {
        Slab { slots: Vec::new(), free: Vec::new() }
    }
}

impl<E> Slab<E> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry in slot `s`, if occupied.
    #[inline]
    pub fn try_get(&self, s: Slot) -> Option<&E> {
        self.slots.get(s as usize).and_then(Option::as_ref)
    }

    /// The entry in slot `s` (which must be occupied).
    #[inline]
    pub fn get(&self, s: Slot) -> &E {
        self.try_get(s).expect("an occupied slot")
    }

    /// The entry in slot `s` (which must be occupied), mutably.
    #[inline]
    pub fn get_mut(&mut self, s: Slot) -> &mut E {
        self.slots[s as usize].as_mut().expect("an occupied slot")
    }

    /// Store `e` in a vacant slot (the last one freed) or a new one.
    pub fn insert(&mut self, e: E) -> Slot {
        match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(e);
                s
            }
            None => {
                self.slots.push(Some(e));
                (self.slots.len() - 1) as Slot
            }
        }
    }

    /// Take the entry out of slot `s` (which must be occupied).
    pub fn remove(&mut self, s: Slot) -> E {
        let e = self.slots[s as usize].take().expect("an occupied slot");
        self.free.push(s);
        e
    }

    /// Every entry with its slot, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Slot, &E)> {
        self.slots.iter().enumerate().filter_map(|(s, e)| Some((s as Slot, e.as_ref()?)))
    }
}

impl<E: Owned> Slab<E> {
    /// The client in slot `s` (which must be occupied).
    #[inline]
    pub fn client(&self, s: Slot) -> ClientId {
        self.get(s).client()
    }
}

/// "No entry" in the owner map.
const NO_OWNER: u64 = u64::MAX;

/// Client → (CPU, slot): one atomic word per client id.
///
/// Written only by a step that holds the lock of the CPU whose slab holds
/// the entry (both CPUs' when it moves). Anyone may read it without a lock,
/// as a hint: a step that finds a client through it takes that CPU's lock
/// and reads it again ([`with_client`]).
#[derive(Debug, Default)]
pub struct OwnerMap(Vec<AtomicU64>);

/// A copy of every word as it is now (for a single-threaded policy's clone).
impl Clone for OwnerMap {
    fn clone(&self) -> OwnerMap {
        OwnerMap(self.0.iter().map(|o| AtomicU64::new(o.load(Ordering::Acquire))).collect())
    }
}

impl OwnerMap {
    /// Room for client ids below `capacity` (a single-threaded host grows
    /// it on join with [`OwnerMap::reserve`]).
    pub fn new(capacity: usize) -> OwnerMap {
        let mut m = OwnerMap(Vec::new());
        m.0.resize_with(capacity, || AtomicU64::new(NO_OWNER));
        m
    }

    /// Make room for client `c`.
    pub fn reserve(&mut self, c: ClientId) {
        if c.index() >= self.0.len() {
            self.0.resize_with(c.index() + 1, || AtomicU64::new(NO_OWNER));
        }
    }

    /// Where client `c`'s entry is: its CPU and slot.
    #[inline]
    pub fn get(&self, c: ClientId) -> Option<(usize, Slot)> {
        let v = self.0.get(c.index())?.load(Ordering::Acquire);
        (v != NO_OWNER).then_some(((v >> 32) as usize, v as Slot))
    }

    /// Client `c`'s entry is in slot `s` of CPU `cpu`.
    #[inline]
    pub fn set(&self, c: ClientId, cpu: usize, s: Slot) {
        self.0[c.index()].store(((cpu as u64) << 32) | s as u64, Ordering::Release);
    }

    /// Client `c` has no entry any more.
    #[inline]
    pub fn clear(&self, c: ClientId) {
        self.0[c.index()].store(NO_OWNER, Ordering::Release);
    }

    /// Move slot `s`'s entry from slab `from` to slab `to` (CPU `to_cpu`'s),
    /// and its owner word with it; returns its slot in `to`.
    pub fn move_entry<E: Owned>(&self, from: &mut Slab<E>, s: Slot, to: &mut Slab<E>, to_cpu: usize) -> Slot {
        let e = from.remove(s);
        let c = e.client();
        let t = to.insert(e);
        self.set(c, to_cpu, t);
        t
    }

    /// Check that every entry of CPU `k`'s slab is where this map says;
    /// returns how many there are.
    pub fn check_slab<E: Owned>(&self, k: usize, slab: &Slab<E>) -> Result<usize, String> {
        for (s, e) in slab.iter() {
            let c = e.client();
            if self.get(c) != Some((k, s)) {
                return Err(format!("{c} is in slot {s} of cpu {k} but the owner map says {:?}", self.get(c)));
            }
        }
        Ok(slab.len())
    }

    /// Check that this map names exactly `entries` clients (the sum of
    /// [`OwnerMap::check_slab`] over every CPU): it names no other.
    pub fn check_count(&self, entries: usize) -> Result<(), String> {
        let mapped = self.0.iter().filter(|o| o.load(Ordering::Acquire) != NO_OWNER).count();
        if mapped != entries {
            return Err(format!("the owner map names {mapped} clients but the parts hold {entries} entries"));
        }
        Ok(())
    }
}

/// How a step reaches the per-CPU parts: directly (one thread: a slice of
/// parts) or under one lock per CPU ([`Locked`]). A step on one CPU runs
/// inside `with`, a cross-CPU step inside `with_two`; a survey of the CPUs
/// reads each inside its own `with`, one CPU at a time.
pub trait Parts {
    /// One CPU's part.
    type Part;
    /// Number of CPUs.
    fn count(&self) -> usize;
    /// Run `f` on CPU `k`'s part.
    fn with<R>(&mut self, k: usize, f: impl FnOnce(&mut Self::Part) -> R) -> R;
    /// Run `f` on the parts of CPUs `a` and `b` (distinct), in that order.
    fn with_two<R>(&mut self, a: usize, b: usize, f: impl FnOnce(&mut Self::Part, &mut Self::Part) -> R) -> R;
}

impl<T> Parts for [T] {
    type Part = T;
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn with<R>(&mut self, k: usize, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self[k])
    }
    #[inline]
    fn with_two<R>(&mut self, a: usize, b: usize, f: impl FnOnce(&mut T, &mut T) -> R) -> R {
        let (x, y) = two_mut(self, a, b);
        f(x, y)
    }
}

/// The per-CPU parts of a concurrent host, each behind its own lock.
///
/// `with` takes CPU k's lock alone; `with_two` takes both CPUs' locks in
/// CPU id order, so no two steps wait for each other in a cycle.
pub struct Locked<'a, T>(pub &'a [Mutex<T>]);

impl<T> Parts for Locked<'_, T> {
    type Part = T;
    fn count(&self) -> usize {
        self.0.len()
    }
    fn with<R>(&mut self, k: usize, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0[k].lock().expect("a step panicked holding this CPU's lock"))
    }
    fn with_two<R>(&mut self, a: usize, b: usize, f: impl FnOnce(&mut T, &mut T) -> R) -> R {
        assert_ne!(a, b, "a cross-CPU step between a CPU and itself");
        let first = self.0[a.min(b)].lock().expect("a step panicked holding this CPU's lock");
        let second = self.0[a.max(b)].lock().expect("a step panicked holding this CPU's lock");
        let (mut x, mut y) = if a < b { (first, second) } else { (second, first) };
        f(&mut x, &mut y)
    }
}

/// Run `f` on the part that holds client `c`'s entry, with its slot; `None`
/// if `c` has none. The owner map is read again under the lock: if the
/// entry moved meanwhile, look again.
pub fn with_client<P: Parts + ?Sized, R>(
    owners: &OwnerMap,
    parts: &mut P,
    c: ClientId,
    f: impl FnOnce(&mut P::Part, Slot) -> R,
) -> Option<R> {
    let mut f = Some(f);
    loop {
        let (k, s) = owners.get(c)?;
        let done = parts.with(k, |q| if owners.get(c) == Some((k, s)) { f.take().map(|f| f(q, s)) } else { None });
        if done.is_some() {
            return done;
        }
    }
}

/// A client that last ran on this CPU (an entry of an [`AffinePart`]).
#[derive(Clone, Copy, Debug)]
struct LastRan(ClientId);

impl Owned for LastRan {
    #[inline]
    fn client(&self) -> ClientId {
        self.0
    }
}

/// One CPU's part of processor affinity for a central-queue algorithm
/// (SFS section 2.4, DFS section 5): the clients that last ran on it. A
/// client has at most one entry, on the CPU it last ran on, which moves
/// with it when it runs elsewhere ([`ran_on`]).
#[derive(Clone, Debug, Default)]
pub struct AffinePart {
    ran_here: Slab<LastRan>,
}

impl AffinePart {
    /// Whether client `c` last ran on this CPU, `k`: the owner map says its
    /// entry is here (authoritative under this CPU's lock: an entry moves
    /// here or away only under it).
    #[inline]
    pub fn ran_last(&self, owners: &OwnerMap, k: usize, c: ClientId) -> bool {
        let here = owners.get(c).filter(|&(j, _)| j == k);
        debug_assert!(here.is_none_or(|(_, s)| self.ran_here.try_get(s).is_some_and(|e| e.0 == c)), "{c}'s entry");
        here.is_some()
    }
}

/// Client `c` runs on CPU `k`: its entry moves there from the CPU it last
/// ran on (a cross-CPU step under both CPUs' locks), or is made there if it
/// has none. `c`'s id must fit `owners`. Only the CPU that runs `c` calls
/// this for `c`.
pub fn ran_on<P: Parts<Part = AffinePart> + ?Sized>(owners: &OwnerMap, parts: &mut P, c: ClientId, k: usize) {
    loop {
        match owners.get(c) {
            None => {
                return parts.with(k, |q| {
                    let s = q.ran_here.insert(LastRan(c));
                    owners.set(c, k, s);
                })
            }
            Some((j, _)) if j == k => return,
            Some((j, s)) => {
                let moved = parts.with_two(j, k, |from, to| {
                    (owners.get(c) == Some((j, s)))
                        .then(|| owners.move_entry(&mut from.ran_here, s, &mut to.ran_here, k))
                });
                if moved.is_some() {
                    return;
                }
            }
        }
    }
}

/// Client `c` leaves: its entry, if any, is dropped.
pub fn forget<P: Parts<Part = AffinePart> + ?Sized>(owners: &OwnerMap, parts: &mut P, c: ClientId) {
    with_client(owners, parts, c, |q, s| {
        q.ran_here.remove(s);
        owners.clear(c);
    });
}

/// Check the affinity parts (in CPU order) against the owner map: every
/// entry where the map says, and the map names no other; returns the
/// number of entries.
pub fn check_affinity<'a>(owners: &OwnerMap, parts: impl IntoIterator<Item = &'a AffinePart>) -> Result<usize, String> {
    let mut n = 0;
    for (k, part) in parts.into_iter().enumerate() {
        n += owners.check_slab(k, &part.ran_here)?;
    }
    owners.check_count(n)?;
    Ok(n)
}

/// How a central-queue policy (SFS, DFS) reaches its processor affinity:
/// the global owner map (client → the CPU it last ran on) and one
/// [`AffinePart`] per CPU, owned ([`Affinity`], one thread) or each behind
/// its own lock ([`LockedAffinity`]).
pub trait AffinityParts: std::fmt::Debug {
    /// Whether client `c` last ran on CPU `k` ([`AffinePart::ran_last`]).
    fn ran_last_on(&self, c: ClientId, k: usize) -> bool;
    /// Client `c` runs on CPU `k` ([`ran_on`]).
    fn ran_on(&mut self, c: ClientId, k: usize);
    /// Client `c` leaves ([`forget`]).
    fn forget(&mut self, c: ClientId);
    /// [`check_affinity`] over every part; the number of entries.
    fn check(&self) -> Result<usize, String>;
}

/// Processor affinity as a single-threaded policy holds it.
#[derive(Clone, Debug)]
pub struct Affinity {
    owners: OwnerMap,
    cpus: Vec<AffinePart>,
}

impl Affinity {
    /// No client has run yet on any of `cpus` CPUs.
    pub fn new(cpus: usize) -> Affinity {
        Affinity { owners: OwnerMap::new(0), cpus: vec![AffinePart::default(); cpus] }
    }
}

impl AffinityParts for Affinity {
    #[inline]
    fn ran_last_on(&self, c: ClientId, k: usize) -> bool {
        self.cpus[k].ran_last(&self.owners, k, c)
    }

    #[inline]
    fn ran_on(&mut self, c: ClientId, k: usize) {
        self.owners.reserve(c);
        ran_on(&self.owners, self.cpus.as_mut_slice(), c, k);
    }

    #[inline]
    fn forget(&mut self, c: ClientId) {
        forget(&self.owners, self.cpus.as_mut_slice(), c);
    }

    fn check(&self) -> Result<usize, String> {
        check_affinity(&self.owners, &self.cpus)
    }
}

/// Processor affinity for a concurrent host: the owner map (room for every
/// client id it will see) and the per-CPU parts, each behind its own lock;
/// each step takes the locks it needs through [`Locked`].
#[derive(Clone, Copy, Debug)]
pub struct LockedAffinity<'a> {
    /// Client → the CPU it last ran on, and its slot there.
    pub owners: &'a OwnerMap,
    /// One part per CPU.
    pub parts: &'a [Mutex<AffinePart>],
}

impl AffinityParts for LockedAffinity<'_> {
    fn ran_last_on(&self, c: ClientId, k: usize) -> bool {
        Locked(self.parts).with(k, |q| q.ran_last(self.owners, k, c))
    }

    fn ran_on(&mut self, c: ClientId, k: usize) {
        ran_on(self.owners, &mut Locked(self.parts), c, k);
    }

    fn forget(&mut self, c: ClientId) {
        forget(self.owners, &mut Locked(self.parts), c);
    }

    /// Under every part's lock, taken in CPU id order.
    fn check(&self) -> Result<usize, String> {
        let guards: Vec<_> =
            self.parts.iter().map(|m| m.lock().expect("a step panicked holding this CPU's lock")).collect();
        check_affinity(self.owners, guards.iter().map(|g| &**g))
    }
}

/// Two distinct elements of a slice, both mutable: the two per-CPU parts of
/// a cross-CPU step (steal, pull, balance).
pub fn two_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b, "a cross-CPU step between a CPU and itself");
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&mut lo[a], &mut hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&mut hi[0], &mut lo[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(u32);
    impl Owned for E {
        fn client(&self) -> ClientId {
            ClientId(self.0)
        }
    }

    #[test]
    fn slab_reuses_the_last_freed_slot() {
        let mut s = Slab::default();
        assert_eq!((s.insert(E(1)), s.insert(E(2)), s.insert(E(3))), (0, 1, 2));
        s.remove(0);
        s.remove(2);
        assert_eq!(s.len(), 1);
        assert_eq!(s.insert(E(4)), 2);
        assert_eq!(s.iter().map(|(k, e)| (k, e.0)).collect::<Vec<_>>(), vec![(1, 2), (2, 4)]);
    }

    #[test]
    fn owner_map_follows_a_moved_entry_and_checks_catch_strays() {
        let mut m = OwnerMap::new(0);
        m.reserve(ClientId(5));
        let (mut a, mut b) = (Slab::default(), Slab::default());
        let s = a.insert(E(5));
        m.set(ClientId(5), 0, s);
        let t = m.move_entry(&mut a, s, &mut b, 1);
        assert_eq!(m.get(ClientId(5)), Some((1, t)));
        assert_eq!(m.check_slab(0, &a), Ok(0));
        assert_eq!(m.check_slab(1, &b), Ok(1));
        assert!(m.check_count(1).is_ok());
        // A stale word is caught by the slab that holds the entry.
        m.set(ClientId(5), 0, 0);
        assert!(m.check_slab(1, &b).is_err());
        m.clear(ClientId(5));
        assert!(m.check_count(1).is_err());
    }

    #[test]
    fn locked_two_parts_come_in_the_order_asked() {
        let parts = [Mutex::new(0), Mutex::new(1), Mutex::new(2)];
        let mut l = Locked(&parts);
        assert_eq!(l.with_two(2, 0, |x, y| (*x, *y)), (2, 0));
        assert_eq!(two_mut(&mut [0, 1, 2], 2, 1), (&mut 2, &mut 1));
    }
}
