//! An intrusive doubly-linked FIFO of clients with O(1) push, pop and
//! removal from the middle: the run queue of round-robin algorithms (RR,
//! WRR, VTRR, GR3 groups, DWRR's per-CPU queues), where blocking must take a
//! client out of the queue without a scan.

use crate::model::ClientId;
use crate::roster::ClientTable;

#[derive(Clone, Copy, Debug)]
struct Link {
    prev: Option<ClientId>,
    next: Option<ClientId>,
}

/// A FIFO of distinct clients.
#[derive(Clone, Debug, Default)]
pub struct ClientList {
    links: ClientTable<Link>,
    head: Option<ClientId>,
    tail: Option<ClientId>,
    len: usize,
}

impl ClientList {
    /// An empty list.
    pub fn new() -> ClientList {
        ClientList::default()
    }

    /// Number of clients queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `c` is queued.
    #[inline]
    pub fn contains(&self, c: ClientId) -> bool {
        self.links.get(c).is_some()
    }

    /// The first client.
    #[inline]
    pub fn front(&self) -> Option<ClientId> {
        self.head
    }

    /// The client after `c`.
    #[inline]
    pub fn next(&self, c: ClientId) -> Option<ClientId> {
        self.links.get(c).and_then(|l| l.next)
    }

    /// Append `c` (which must not be queued).
    pub fn push_back(&mut self, c: ClientId) {
        debug_assert!(!self.contains(c), "{c} queued twice");
        self.links.insert(c, Link { prev: self.tail, next: None });
        match self.tail {
            Some(t) => self.links[t].next = Some(c),
            None => self.head = Some(c),
        }
        self.tail = Some(c);
        self.len += 1;
    }

    /// Put `c` (which must not be queued) first.
    pub fn push_front(&mut self, c: ClientId) {
        debug_assert!(!self.contains(c), "{c} queued twice");
        self.links.insert(c, Link { prev: None, next: self.head });
        match self.head {
            Some(h) => self.links[h].prev = Some(c),
            None => self.tail = Some(c),
        }
        self.head = Some(c);
        self.len += 1;
    }

    /// Remove and return the first client.
    pub fn pop_front(&mut self) -> Option<ClientId> {
        let c = self.head?;
        self.remove(c);
        Some(c)
    }

    /// Remove `c` if queued; returns whether it was.
    pub fn remove(&mut self, c: ClientId) -> bool {
        let Some(link) = self.links.remove(c) else {
            return false;
        };
        match link.prev {
            Some(p) => self.links[p].next = link.next,
            None => self.head = link.next,
        }
        match link.next {
            Some(n) => self.links[n].prev = link.prev,
            None => self.tail = link.prev,
        }
        self.len -= 1;
        true
    }

    /// The clients in order.
    pub fn iter(&self) -> impl Iterator<Item = ClientId> + '_ {
        std::iter::successors(self.head, |&c| self.next(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_middle_removal() {
        let mut l = ClientList::new();
        for i in [3, 1, 4, 5] {
            l.push_back(ClientId(i));
        }
        assert!(l.remove(ClientId(4)));
        assert!(!l.remove(ClientId(4)));
        l.push_front(ClientId(9));
        assert_eq!(l.iter().map(|c| c.0).collect::<Vec<_>>(), vec![9, 3, 1, 5]);
        assert_eq!(l.pop_front(), Some(ClientId(9)));
        assert!(l.remove(ClientId(5)));
        assert_eq!(l.iter().map(|c| c.0).collect::<Vec<_>>(), vec![3, 1]);
        assert_eq!(l.len(), 2);
        l.remove(ClientId(3));
        l.remove(ClientId(1));
        assert!(l.is_empty() && l.front().is_none());
    }
}
