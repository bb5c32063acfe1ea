//! The event queues: client and machine events ([`EventQueue`]) and the
//! ends of runs ([`StopQueue`]). Together they hand out one instant's events
//! in the order the engine fixes (see the engine's "Time and order").

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use propshare::{Time, Weight};

/// A client or machine event (CPU stops live in [`StopQueue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    Arrive(u32),
    Depart(u32),
    SetWeight(u32, Weight),
    /// Group k's weight changes ([`propshare::groups::GroupId`]).
    GroupWeight(u32, Weight),
    /// Client i moves to group k.
    MoveClient(u32, u32),
    /// Group k moves (with its subtree) under group p.
    MoveGroup(u32, u32),
    /// Group k leaves: every client in it or below it departs.
    GroupDepart(u32),
    Wake(u32),
    /// The first member of chain k joins.
    ChainStart(u32),
    CpuStart(u32),
    SampleGrid,
    BandGrid,
    /// An edge of the windows of length `lag_windows[j]`.
    WindowEdge(u32),
    /// Service of the run `generation` on this CPU starts, its switch and
    /// migration costs paid: its client's lag is at a maximum.
    ServiceStart(u32, u64),
}

/// Order of events at one instant: client events, then CPU stops, then CPU
/// starts, then grid samples; within a class, the order they were scheduled.
pub(super) const CLASS_CLIENT: u64 = 0;
/// CPU stops ([`StopQueue`]) come between client events and CPU starts.
const CLASS_CPU_START: u64 = 2;
pub(super) const CLASS_SAMPLE: u64 = 3;
const SEQ_BITS: u32 = 56;

impl Event {
    pub(super) fn class(&self) -> u64 {
        match self {
            Event::CpuStart(_) => CLASS_CPU_START,
            Event::SampleGrid | Event::BandGrid | Event::WindowEdge(_) | Event::ServiceStart(..) => CLASS_SAMPLE,
            _ => CLASS_CLIENT,
        }
    }
}

/// A scheduled event, ordered by (time, class, sequence number).
#[derive(Clone, Copy, Debug)]
struct Entry {
    t: Time,
    /// class << SEQ_BITS | sequence number: unique, so the order is total.
    order: u64,
    ev: Event,
}

impl Entry {
    #[inline]
    fn key(&self) -> (Time, u64) {
        (self.t, self.order)
    }

    #[inline]
    fn class(&self) -> u64 {
        self.order >> SEQ_BITS
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// Client and machine events: those known at construction (arrivals,
/// departures, weight changes, CPU starts) in one sorted array read by a
/// cursor, the others (wake-ups, grid samples) in a heap; the next event is
/// the smaller of the two heads. A million arrivals cost one sort, not a
/// million heap operations.
#[derive(Default)]
pub(super) struct EventQueue {
    fixed: Vec<Entry>,
    next_fixed: usize,
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl EventQueue {
    fn entry(&mut self, t: Time, ev: Event) -> Entry {
        self.seq += 1;
        Entry { t, order: ev.class() << SEQ_BITS | self.seq, ev }
    }

    /// Schedule an event known at construction (call [`EventQueue::seal`] after the last).
    pub(super) fn push_fixed(&mut self, t: Time, ev: Event) {
        let e = self.entry(t, ev);
        self.fixed.push(e);
    }

    /// Sort the construction-time events. Keys are unique, so an unstable sort is exact.
    pub(super) fn seal(&mut self) {
        self.fixed.sort_unstable_by_key(Entry::key);
    }

    /// The clients whose construction-time arrival is at `t`, not yet handled.
    pub(super) fn fixed_arrivals_at(&self, t: Time) -> impl Iterator<Item = u32> + '_ {
        self.fixed[self.next_fixed..].iter().take_while(move |e| e.t <= t).filter_map(move |e| match e.ev {
            Event::Arrive(i) if e.t == t => Some(i),
            _ => None,
        })
    }

    pub(super) fn push(&mut self, t: Time, ev: Event) {
        let e = self.entry(t, ev);
        self.heap.push(Reverse(e));
    }

    /// When the next event is due.
    #[inline]
    pub(super) fn peek_time(&self) -> Option<Time> {
        self.peek().map(|e| e.t)
    }

    #[inline]
    fn peek(&self) -> Option<&Entry> {
        let f = self.fixed.get(self.next_fixed);
        match (f, self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => Some(if a.key() <= b.key() { a } else { b }),
            (Some(a), None) => Some(a),
            (None, Some(Reverse(b))) => Some(b),
            (None, None) => None,
        }
    }

    /// Pop the next event if it is at `t` and its class is at most `max_class`.
    #[inline]
    pub(super) fn pop_at(&mut self, t: Time, max_class: u64) -> Option<Event> {
        let e = *self.peek()?;
        if e.t != t || e.class() > max_class {
            return None;
        }
        if self.fixed.get(self.next_fixed).is_some_and(|f| f.key() == e.key()) {
            self.next_fixed += 1;
        } else {
            self.heap.pop();
        }
        Some(e.ev)
    }
}

/// The end of a run on a CPU, ordered by (time, generation): the order in
/// which the old single queue handled them (generations increase with every
/// pick, as sequence numbers did). Stale entries (the run was preempted or
/// its client left) stay queued and are skipped when popped; they still mark
/// an instant at which idle CPUs are polled, as before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Stop {
    pub(super) t: Time,
    pub(super) generation: u64,
    pub(super) cpu: u32,
}

/// CPU stops. Runs of equal length started in time order end in time order,
/// so most stops arrive in order: those go to a FIFO (O(1)); the rest go to
/// a heap (O(log P)). The next stop is the smaller of the two heads.
#[derive(Default)]
pub(super) struct StopQueue {
    fifo: std::collections::VecDeque<Stop>,
    heap: BinaryHeap<Reverse<Stop>>,
}

impl StopQueue {
    #[inline]
    pub(super) fn push(&mut self, s: Stop) {
        // Generations increase, so (t, generation) ≥ the back's iff t ≥ its t.
        if self.fifo.back().is_none_or(|b| b.t <= s.t) {
            self.fifo.push_back(s);
        } else {
            self.heap.push(Reverse(s));
        }
    }

    #[inline]
    pub(super) fn peek_time(&self) -> Option<Time> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => Some(a.t.min(b.t)),
            (Some(a), None) => Some(a.t),
            (None, Some(Reverse(b))) => Some(b.t),
            (None, None) => None,
        }
    }

    /// Pop the next stop if it is at `t`.
    #[inline]
    pub(super) fn pop_at(&mut self, t: Time) -> Option<Stop> {
        let from_heap = match (self.fifo.front(), self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => b < a,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => return None,
        };
        if from_heap {
            if self.heap.peek().is_some_and(|Reverse(b)| b.t == t) {
                return self.heap.pop().map(|Reverse(b)| b);
            }
            None
        } else if self.fifo.front().is_some_and(|a| a.t == t) {
            self.fifo.pop_front()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;

    /// The split queues hand out events in exactly the order of one heap
    /// keyed by (time, class, sequence), with CPU stops as class 1 ordered
    /// by generation: the order the engine had before the split.
    #[test]
    pub(super) fn split_queues_keep_the_single_queue_order() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut queue = EventQueue::default();
        let mut stops = StopQueue::default();
        // Reference: (t, class, seq) with one sequence counter over everything.
        let mut reference: BinaryHeap<Reverse<(Time, u64, u64, u32)>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut tag = 0u32;
        for _ in 0..200 {
            let t = rng.random_range(0..50u64);
            seq += 1;
            tag += 1;
            queue.push_fixed(t, Event::Arrive(tag));
            reference.push(Reverse((t, 0, seq, tag)));
        }
        queue.seal();
        let mut generation = 0;
        let mut got = Vec::new();
        let mut want = Vec::new();
        while let Some(Reverse((t, _, _, _))) = reference.peek().copied() {
            let now = t;
            while let Some(&Reverse((t2, _, _, tag))) = reference.peek() {
                if t2 != t {
                    break;
                }
                reference.pop();
                want.push(tag);
            }
            let mut pushed = Vec::new();
            let tag_of = |ev: Event| {
                let (Event::Arrive(k) | Event::Wake(k) | Event::CpuStart(k)) = ev else { panic!("{ev:?}") };
                k
            };
            while let Some(ev) = queue.pop_at(now, CLASS_CLIENT) {
                got.push(tag_of(ev));
            }
            while let Some(s) = stops.pop_at(now) {
                got.push(s.cpu);
            }
            while let Some(ev) = queue.pop_at(now, CLASS_SAMPLE) {
                got.push(tag_of(ev));
            }
            // Schedule a few later events of every class, in a random order.
            for _ in 0..rng.random_range(0..4) {
                let t = now + rng.random_range(1..30u64);
                seq += 1;
                tag += 1;
                match rng.random_range(0..3) {
                    0 => {
                        queue.push(t, Event::Wake(tag));
                        pushed.push(Reverse((t, 0, seq, tag)));
                    }
                    1 => {
                        generation += 1;
                        stops.push(Stop { t, generation, cpu: tag });
                        pushed.push(Reverse((t, 1, seq, tag)));
                    }
                    _ => {
                        queue.push(t, Event::CpuStart(tag));
                        pushed.push(Reverse((t, CLASS_CPU_START, seq, tag)));
                    }
                }
            }
            reference.extend(pushed);
            if queue.peek().is_none() && stops.peek_time().is_none() {
                break;
            }
        }
        assert!(want.len() > 300, "too few events to test: {}", want.len());
        assert_eq!(got, want);
    }
}
