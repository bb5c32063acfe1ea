//! The one intrusive doubly-linked list of clients, with O(1) insertion,
//! removal from the middle and rotation: the run queues of the round-robin
//! algorithms (RR, WRR, VTRR, SRR's columns, GR3's groups, GDQ's queues,
//! DWRR's per-CPU queues) and the weight classes, where blocking must take a
//! client out of its queue without a scan.
//!
//! A [`List`] header (ends and length) belongs to the queue, the [`Link`]s
//! to the clients. Where the links live is the user's choice through
//! [`Links`]: a [`ClientTable<Link>`] of their own (shared by many lists, as
//! DWRR's per-CPU queues share one table), fields of each client's entry
//! (GDQ, VTRR), or SRR's rows. Round-robin rings (GR3's groups, GDQ's
//! queues, the weight classes) are lists read cyclically from a current
//! client the user keeps ([`List::next_cyclic`], [`List::insert_before_cyclic`]).
//!
//! Nodes are [`ClientId`]s unless a user names its own [`Node`] type (DWRR's
//! per-CPU queues link the slots of their CPU's entry slab, so that a list
//! step touches only that CPU's entries).

use crate::model::ClientId;
use crate::roster::ClientTable;

/// What a list links: a small copyable id with a value that stands for "none".
pub trait Node: Copy + Eq + std::fmt::Debug {
    /// "No neighbour" inside a [`Link`] (an id no list holds).
    const NIL: Self;
}

/// `ClientId(u32::MAX)`: a table that large cannot exist.
impl Node for ClientId {
    const NIL: ClientId = ClientId(u32::MAX);
}

/// "No neighbour" for client lists (users that spell their links out).
pub(crate) const NIL: ClientId = <ClientId as Node>::NIL;

/// A slot index (`u32::MAX`: a slab that large cannot exist).
impl Node for u32 {
    const NIL: u32 = u32::MAX;
}

/// A client's neighbours in its list (`None` at the ends), in 8 bytes:
/// [`Node::NIL`] stands for `None`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Link<N: Node = ClientId> {
    pub(crate) prev: N,
    pub(crate) next: N,
}

impl<N: Node> Link<N> {
    /// The link between `prev` and `next`.
    #[inline]
    pub fn new(prev: Option<N>, next: Option<N>) -> Link<N> {
        Link { prev: prev.unwrap_or(N::NIL), next: next.unwrap_or(N::NIL) }
    }

    /// The client before.
    #[inline]
    pub fn prev(self) -> Option<N> {
        (self.prev != N::NIL).then_some(self.prev)
    }

    /// The client after.
    #[inline]
    pub fn next(self) -> Option<N> {
        (self.next != N::NIL).then_some(self.next)
    }

    /// Change the client before.
    #[inline]
    pub fn set_prev(&mut self, prev: Option<N>) {
        self.prev = prev.unwrap_or(N::NIL);
    }

    /// Change the client after.
    #[inline]
    pub fn set_next(&mut self, next: Option<N>) {
        self.next = next.unwrap_or(N::NIL);
    }
}

impl<N: Node> Default for Link<N> {
    fn default() -> Link<N> {
        Link { prev: N::NIL, next: N::NIL }
    }
}

impl<N: Node> std::fmt::Debug for Link<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("prev", &self.prev()).field("next", &self.next()).finish()
    }
}

/// Where a list's links live.
pub trait Links<N: Node = ClientId> {
    /// `c`'s link (`c` must be linked).
    fn link(&self, c: N) -> Link<N>;
    /// Set the client before `c` (`c` must be linked).
    fn set_prev(&mut self, c: N, prev: Option<N>);
    /// Set the client after `c` (`c` must be linked).
    fn set_next(&mut self, c: N, next: Option<N>);
    /// `c` enters a list with `link`.
    #[inline]
    fn put(&mut self, c: N, link: Link<N>) {
        self.set_prev(c, link.prev());
        self.set_next(c, link.next());
    }
    /// `c` leaves its list: its last link.
    #[inline]
    fn take(&mut self, c: N) -> Link<N> {
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
    fn set_prev(&mut self, c: ClientId, prev: Option<ClientId>) {
        self[c].set_prev(prev);
    }
    #[inline]
    fn set_next(&mut self, c: ClientId, next: Option<ClientId>) {
        self[c].set_next(next);
    }
    #[inline]
    fn put(&mut self, c: ClientId, link: Link) {
        debug_assert!(self.get(c).is_none() && c != NIL, "{c} linked twice");
        self.insert(c, link);
    }
    #[inline]
    fn take(&mut self, c: ClientId) -> Link {
        self.remove(c).expect("linked")
    }
}

/// A list's header: its ends and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct List<N: Node = ClientId> {
    head: Option<N>,
    tail: Option<N>,
    len: usize,
}

impl<N: Node> Default for List<N> {
    fn default() -> List<N> {
        List { head: None, tail: None, len: 0 }
    }
}

impl List {
    /// An empty list.
    pub const EMPTY: List = List { head: None, tail: None, len: 0 };
}

impl<N: Node> List<N> {
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

    /// The first client.
    #[inline]
    pub fn front(&self) -> Option<N> {
        self.head
    }

    /// The last client.
    #[inline]
    pub fn back(&self) -> Option<N> {
        self.tail
    }

    /// The client after `c` (in this list), or `None` after the last.
    #[inline]
    pub fn next(&self, links: &impl Links<N>, c: N) -> Option<N> {
        links.link(c).next()
    }

    /// The client before `c` (in this list), or `None` before the first.
    #[inline]
    pub fn prev(&self, links: &impl Links<N>, c: N) -> Option<N> {
        links.link(c).prev()
    }

    /// The client after `c` read as a ring: the first after the last.
    #[inline]
    pub fn next_cyclic(&self, links: &impl Links<N>, c: N) -> N {
        links.link(c).next().or(self.head).expect("c is in this list")
    }

    /// The client before `c` read as a ring: the last before the first.
    #[inline]
    pub fn prev_cyclic(&self, links: &impl Links<N>, c: N) -> N {
        links.link(c).prev().or(self.tail).expect("c is in this list")
    }

    /// Link `c` (not linked) last.
    #[inline]
    pub fn push_back(&mut self, links: &mut impl Links<N>, c: N) {
        links.put(c, Link::new(self.tail, None));
        match self.tail {
            Some(t) => links.set_next(t, Some(c)),
            None => self.head = Some(c),
        }
        self.tail = Some(c);
        self.len += 1;
    }

    /// Link `c` (not linked) first.
    #[inline]
    pub fn push_front(&mut self, links: &mut impl Links<N>, c: N) {
        links.put(c, Link::new(None, self.head));
        match self.head {
            Some(h) => links.set_prev(h, Some(c)),
            None => self.tail = Some(c),
        }
        self.head = Some(c);
        self.len += 1;
    }

    /// Link `c` (not linked) just before `before`, or last if `before` is `None`.
    pub fn insert_before(&mut self, links: &mut impl Links<N>, before: Option<N>, c: N) {
        let Some(b) = before else { return self.push_back(links, c) };
        let Some(p) = links.link(b).prev() else { return self.push_front(links, c) };
        links.put(c, Link::new(Some(p), Some(b)));
        links.set_next(p, Some(c));
        links.set_prev(b, Some(c));
        self.len += 1;
    }

    /// Link `c` (not linked) just before `at` read as a ring: the last
    /// position of a round that starts at `at` (last if `at` is first).
    #[inline]
    pub fn insert_before_cyclic(&mut self, links: &mut impl Links<N>, at: N, c: N) {
        if self.head == Some(at) {
            self.push_back(links, c);
        } else {
            self.insert_before(links, Some(at), c);
        }
    }

    /// Unlink `c` (which must be in this list). Returns its last link.
    #[inline]
    pub fn remove(&mut self, links: &mut impl Links<N>, c: N) -> Link<N> {
        let l = links.take(c);
        match l.prev() {
            Some(p) => links.set_next(p, l.next()),
            None => self.head = l.next(),
        }
        match l.next() {
            Some(n) => links.set_prev(n, l.prev()),
            None => self.tail = l.prev(),
        }
        self.len -= 1;
        l
    }

    /// Unlink and return the first client.
    #[inline]
    pub fn pop_front(&mut self, links: &mut impl Links<N>) -> Option<N> {
        let c = self.head?;
        self.remove(links, c);
        Some(c)
    }

    /// The clients in order.
    pub fn iter<'a>(&self, links: &'a impl Links<N>) -> impl Iterator<Item = N> + 'a
    where
        N: 'a,
    {
        std::iter::successors(self.head, move |&c| links.link(c).next())
    }

    /// `n` clients read as a ring from `start` (in this list) on.
    pub fn walk_cyclic<'a>(&self, links: &'a impl Links<N>, start: N, n: usize) -> impl Iterator<Item = N> + 'a
    where
        N: 'a,
    {
        let head = self.head;
        std::iter::successors(Some(start), move |&c| links.link(c).next().or(head)).take(n)
    }
}

/// A FIFO of distinct clients with its own link table.
#[derive(Clone, Debug, Default)]
pub struct ClientList {
    links: ClientTable<Link>,
    list: List,
}

impl ClientList {
    /// An empty list.
    pub fn new() -> ClientList {
        ClientList::default()
    }

    /// Number of clients queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `c` is queued.
    #[inline]
    pub fn contains(&self, c: ClientId) -> bool {
        self.links.get(c).is_some()
    }

    /// The first client.
    #[inline]
    pub fn front(&self) -> Option<ClientId> {
        self.list.front()
    }

    /// The client after `c`.
    #[inline]
    pub fn next(&self, c: ClientId) -> Option<ClientId> {
        self.links.get(c).and_then(|l| l.next())
    }

    /// Append `c` (which must not be queued).
    #[inline]
    pub fn push_back(&mut self, c: ClientId) {
        self.list.push_back(&mut self.links, c);
    }

    /// Put `c` (which must not be queued) first.
    #[inline]
    pub fn push_front(&mut self, c: ClientId) {
        self.list.push_front(&mut self.links, c);
    }

    /// Remove and return the first client.
    #[inline]
    pub fn pop_front(&mut self) -> Option<ClientId> {
        self.list.pop_front(&mut self.links)
    }

    /// Remove `c` if queued; returns whether it was.
    #[inline]
    pub fn remove(&mut self, c: ClientId) -> bool {
        let queued = self.contains(c);
        if queued {
            self.list.remove(&mut self.links, c);
        }
        queued
    }

    /// The clients in order.
    pub fn iter(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.list.iter(&self.links)
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

    /// Two lists share one table; a list read as a ring.
    #[test]
    fn lists_share_links_and_read_as_rings() {
        let mut links = ClientTable::<Link>::new();
        let (mut a, mut b) = (List::EMPTY, List::EMPTY);
        for i in 0..4 {
            a.push_back(&mut links, ClientId(i));
            b.push_back(&mut links, ClientId(10 + i));
        }
        a.insert_before(&mut links, Some(ClientId(2)), ClientId(7));
        a.insert_before(&mut links, Some(ClientId(0)), ClientId(8));
        assert_eq!(ids(a.iter(&links)), vec![8, 0, 1, 7, 2, 3]);
        assert_eq!((a.front(), a.back()), (Some(ClientId(8)), Some(ClientId(3))));
        assert_eq!(a.next_cyclic(&links, ClientId(3)), ClientId(8));
        assert_eq!(a.prev_cyclic(&links, ClientId(8)), ClientId(3));
        assert_eq!((a.next(&links, ClientId(3)), a.prev(&links, ClientId(8))), (None, None));
        a.insert_before_cyclic(&mut links, ClientId(8), ClientId(9));
        a.insert_before_cyclic(&mut links, ClientId(1), ClientId(6));
        assert_eq!(ids(a.iter(&links)), vec![8, 0, 6, 1, 7, 2, 3, 9]);
        let l = a.remove(&mut links, ClientId(7));
        assert_eq!(l, Link::new(Some(ClientId(1)), Some(ClientId(2))));
        assert_eq!(ids(a.walk_cyclic(&links, ClientId(3), 4)), vec![3, 9, 8, 0]);
        assert_eq!(b.pop_front(&mut links), Some(ClientId(10)));
        assert_eq!(ids(b.iter(&links)), vec![11, 12, 13]);
        for c in [8, 0, 6, 1, 2, 3, 9] {
            a.remove(&mut links, ClientId(c));
        }
        assert!(a.is_empty() && a.front().is_none() && a.back().is_none());
        assert!(links.get(ClientId(0)).is_none() && links.get(ClientId(11)).is_some());
    }
}
