//! The one intrusive doubly-linked list of clients, with O(1) insertion,
//! removal from the middle and rotation: the run queues of the round-robin
//! algorithms (RR, WRR, VTRR, SRR's columns, GR3's groups, GDQ's queues,
//! DWRR's per-CPU queues) and the weight classes, where blocking must take a
//! client out of its queue without a scan.
//!
//! A [`Ring`] is a circular list with a front: the header (front and length)
//! belongs to the queue, the [`Link`]s to the clients. Where the links live is
//! the user's choice through [`Links`]: a [`ClientTable<Link>`] of their own
//! (shared by many rings, as DWRR's per-CPU queues share one table), or a
//! field of each client's entry (GDQ, VTRR). Read as a FIFO, the front is the
//! first client and its predecessor the last; read as a round-robin ring, the
//! front is the current client and [`Ring::advance`] moves it on.

use crate::model::ClientId;
use crate::roster::ClientTable;

/// A client's neighbours in its ring (itself twice when alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The client before it.
    pub prev: ClientId,
    /// The client after it.
    pub next: ClientId,
}

impl Link {
    /// The link of a client alone in its ring.
    pub const fn alone(c: ClientId) -> Link {
        Link { prev: c, next: c }
    }
}

/// Where a ring's links live.
pub trait Links {
    /// `c`'s link (`c` must be linked).
    fn link(&self, c: ClientId) -> Link;
    /// Set the client before `c` (`c` must be linked).
    fn set_prev(&mut self, c: ClientId, prev: ClientId);
    /// Set the client after `c` (`c` must be linked).
    fn set_next(&mut self, c: ClientId, next: ClientId);
    /// `c` enters a ring with `link`.
    fn put(&mut self, c: ClientId, link: Link) {
        self.set_prev(c, link.prev);
        self.set_next(c, link.next);
    }
    /// `c` leaves its ring: its last link.
    fn take(&mut self, c: ClientId) -> Link {
        self.link(c)
    }
}

/// Links in a table of their own: a client is linked iff it has an entry.
impl Links for ClientTable<Link> {
    #[inline]
    fn link(&self, c: ClientId) -> Link {
        self[c]
    }
    #[inline]
    fn set_prev(&mut self, c: ClientId, prev: ClientId) {
        self[c].prev = prev;
    }
    #[inline]
    fn set_next(&mut self, c: ClientId, next: ClientId) {
        self[c].next = next;
    }
    #[inline]
    fn put(&mut self, c: ClientId, link: Link) {
        debug_assert!(self.get(c).is_none(), "{c} linked twice");
        self.insert(c, link);
    }
    #[inline]
    fn take(&mut self, c: ClientId) -> Link {
        self.remove(c).expect("linked")
    }
}

/// A circular list's header: its front and its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    front: Option<ClientId>,
    len: usize,
}

impl Ring {
    /// An empty ring.
    pub const EMPTY: Ring = Ring { front: None, len: 0 };

    /// Number of clients.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The front (first, or current) client.
    #[inline]
    pub fn front(&self) -> Option<ClientId> {
        self.front
    }

    /// The last client (the front's predecessor).
    #[inline]
    pub fn back(&self, links: &impl Links) -> Option<ClientId> {
        self.front.map(|f| links.link(f).prev)
    }

    /// The client after `c`, the front again after the last.
    #[inline]
    pub fn next(&self, links: &impl Links, c: ClientId) -> ClientId {
        links.link(c).next
    }

    /// The client before `c`, or `None` before the first.
    #[inline]
    pub fn before(&self, links: &impl Links, c: ClientId) -> Option<ClientId> {
        (self.front != Some(c)).then(|| links.link(c).prev)
    }

    /// The client after `c`, or `None` after the last.
    #[inline]
    pub fn after(&self, links: &impl Links, c: ClientId) -> Option<ClientId> {
        Some(links.link(c).next).filter(|&n| Some(n) != self.front)
    }

    /// Link `c` (not linked) last: just before the front.
    #[inline]
    pub fn push_back(&mut self, links: &mut impl Links, c: ClientId) {
        match self.front {
            None => {
                links.put(c, Link::alone(c));
                self.front = Some(c);
            }
            Some(f) => Self::link_before(links, f, c),
        }
        self.len += 1;
    }

    /// Link `c` (not linked) first.
    #[inline]
    pub fn push_front(&mut self, links: &mut impl Links, c: ClientId) {
        self.push_back(links, c);
        self.front = Some(c);
    }

    /// Link `c` (not linked) just before `before` (first if `before` is the
    /// front), or last if `before` is `None`.
    pub fn insert_before(&mut self, links: &mut impl Links, before: Option<ClientId>, c: ClientId) {
        match before {
            Some(b) if self.front != Some(b) => {
                Self::link_before(links, b, c);
                self.len += 1;
            }
            Some(_) => self.push_front(links, c),
            None => self.push_back(links, c),
        }
    }

    fn link_before(links: &mut impl Links, at: ClientId, c: ClientId) {
        let prev = links.link(at).prev;
        links.put(c, Link { prev, next: at });
        links.set_next(prev, c);
        links.set_prev(at, c);
    }

    /// Unlink `c` (which must be in this ring); the front passes to its
    /// successor. Returns `c`'s last link.
    #[inline]
    pub fn remove(&mut self, links: &mut impl Links, c: ClientId) -> Link {
        let l = links.take(c);
        self.len -= 1;
        if self.len == 0 {
            self.front = None;
        } else {
            links.set_next(l.prev, l.next);
            links.set_prev(l.next, l.prev);
            if self.front == Some(c) {
                self.front = Some(l.next);
            }
        }
        l
    }

    /// Unlink and return the front.
    #[inline]
    pub fn pop_front(&mut self, links: &mut impl Links) -> Option<ClientId> {
        let c = self.front?;
        self.remove(links, c);
        Some(c)
    }

    /// Make `c` (in this ring, or `None` for an empty ring) the front.
    #[inline]
    pub fn set_front(&mut self, c: Option<ClientId>) {
        debug_assert_eq!(c.is_none(), self.len == 0);
        self.front = c;
    }

    /// `n` clients from `start` (in this ring) on, in ring order.
    pub fn walk<'a>(&self, links: &'a impl Links, start: ClientId, n: usize) -> impl Iterator<Item = ClientId> + 'a {
        std::iter::successors(Some(start), move |&c| Some(links.link(c).next)).take(n)
    }

    /// The clients from the front on.
    pub fn iter<'a>(&self, links: &'a impl Links) -> impl Iterator<Item = ClientId> + 'a {
        let (front, len) = (self.front, self.len);
        std::iter::successors(front, move |&c| Some(links.link(c).next)).take(len)
    }
}

/// A FIFO of distinct clients with its own link table.
#[derive(Clone, Debug, Default)]
pub struct ClientList {
    links: ClientTable<Link>,
    ring: Ring,
}

impl ClientList {
    /// An empty list.
    pub fn new() -> ClientList {
        ClientList::default()
    }

    /// Number of clients queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Whether `c` is queued.
    #[inline]
    pub fn contains(&self, c: ClientId) -> bool {
        self.links.get(c).is_some()
    }

    /// The first client.
    #[inline]
    pub fn front(&self) -> Option<ClientId> {
        self.ring.front()
    }

    /// The client after `c`.
    #[inline]
    pub fn next(&self, c: ClientId) -> Option<ClientId> {
        self.links.get(c).and_then(|_| self.ring.after(&self.links, c))
    }

    /// Append `c` (which must not be queued).
    pub fn push_back(&mut self, c: ClientId) {
        self.ring.push_back(&mut self.links, c);
    }

    /// Put `c` (which must not be queued) first.
    pub fn push_front(&mut self, c: ClientId) {
        self.ring.push_front(&mut self.links, c);
    }

    /// Remove and return the first client.
    pub fn pop_front(&mut self) -> Option<ClientId> {
        self.ring.pop_front(&mut self.links)
    }

    /// Remove `c` if queued; returns whether it was.
    pub fn remove(&mut self, c: ClientId) -> bool {
        let queued = self.contains(c);
        if queued {
            self.ring.remove(&mut self.links, c);
        }
        queued
    }

    /// The clients in order.
    pub fn iter(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.ring.iter(&self.links)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(it: impl Iterator<Item = ClientId>) -> Vec<u32> {
        it.map(|c| c.0).collect()
    }

    #[test]
    fn fifo_with_middle_removal() {
        let mut l = ClientList::new();
        for i in [3, 1, 4, 5] {
            l.push_back(ClientId(i));
        }
        assert!(l.remove(ClientId(4)));
        assert!(!l.remove(ClientId(4)));
        l.push_front(ClientId(9));
        assert_eq!(ids(l.iter()), vec![9, 3, 1, 5]);
        assert_eq!(l.next(ClientId(1)), Some(ClientId(5)));
        assert_eq!(l.next(ClientId(5)), None);
        assert_eq!(l.pop_front(), Some(ClientId(9)));
        assert!(l.remove(ClientId(5)));
        assert_eq!(ids(l.iter()), vec![3, 1]);
        assert_eq!(l.len(), 2);
        l.remove(ClientId(3));
        l.remove(ClientId(1));
        assert!(l.is_empty() && l.front().is_none());
    }

    /// Two rings share one table; a ring read round-robin: insertion before
    /// the front is the end of the round, removal of the front advances it.
    #[test]
    fn rings_share_links_and_rotate() {
        let mut links = ClientTable::<Link>::new();
        let (mut a, mut b) = (Ring::EMPTY, Ring::EMPTY);
        for i in 0..4 {
            a.push_back(&mut links, ClientId(i));
            b.push_back(&mut links, ClientId(10 + i));
        }
        a.insert_before(&mut links, Some(ClientId(2)), ClientId(7));
        a.insert_before(&mut links, Some(ClientId(0)), ClientId(8));
        assert_eq!(ids(a.iter(&links)), vec![8, 0, 1, 7, 2, 3]);
        assert_eq!(a.back(&links), Some(ClientId(3)));
        assert_eq!(a.next(&links, ClientId(3)), ClientId(8));
        assert_eq!(a.after(&links, ClientId(3)), None);
        assert_eq!((a.before(&links, ClientId(8)), a.before(&links, ClientId(0))), (None, Some(ClientId(8))));
        a.set_front(Some(ClientId(7)));
        assert_eq!(a.remove(&mut links, ClientId(7)), Link { prev: ClientId(1), next: ClientId(2) });
        assert_eq!(ids(a.iter(&links)), vec![2, 3, 8, 0, 1]);
        assert_eq!(ids(a.walk(&links, ClientId(0), 3)), vec![0, 1, 2]);
        assert_eq!(b.pop_front(&mut links), Some(ClientId(10)));
        assert_eq!(ids(b.iter(&links)), vec![11, 12, 13]);
        for c in [2, 3, 8, 0, 1] {
            a.remove(&mut links, ClientId(c));
        }
        assert!(a.is_empty() && a.front().is_none() && a.back(&links).is_none());
        assert!(links.get(ClientId(0)).is_none() && links.get(ClientId(11)).is_some());
    }
}
