//! A loom model of the block/wake handshake (`src/runtime.rs`, "A group's
//! life"): every interleaving of a worker ending a slice whose queue looks
//! empty against spawners pushing into that queue, every interleaving
//! explored by loom (no preemption bound; a few seconds).
//!
//! The model keeps the protocol's steps and orderings exactly as the
//! runtime has them, over loom's atomics and mutexes:
//!
//! * spawner (`GroupInner::schedule` / `activate`): push, load the state;
//!   if `IDLE`, take the transition lock, and if still `IDLE` store
//!   `ACTIVE` and `wake` the group in the scheduler;
//! * worker (`serve`): queue empty → take the transition lock, store
//!   `IDLE`, look at the queue again: non-empty → `ACTIVE`, the slice ends
//!   `Expired`; empty → report `Blocked` to the scheduler while holding the
//!   transition lock.
//!
//! Both sides are a store then a load of another location, each `SeqCst`
//! in the runtime (the queue's side is SegQueue's `SeqCst` CAS of its tail
//! index in `push` and `SeqCst` load of it in `is_empty`): in the single
//! total order of `SeqCst` operations one side's load comes after the
//! other's store, so at least one sees the other. Loom treats `SeqCst`
//! accesses as `AcqRel` (its README, "Limitations"), which would allow
//! both loads to miss, a behaviour the runtime cannot have; it does model
//! `fence(SeqCst)`, so the model puts one between each side's store and
//! load to give its accesses that total order.
//!
//! The queue is a counter (SegQueue's push / is_empty are linearizable);
//! the scheduler is the group's status behind its own mutex, and it refuses
//! a wake of a group that is not blocked, as the core does
//! (`SchedError::WrongState`).
//!
//! Properties, at the end of every interleaving: no lost wake-up (tasks
//! queued ⇒ the scheduler has the group runnable), never a wake of a
//! running group, and the state word agrees with the scheduler. Two
//! broken variants show that the model catches what it is meant to:
//! without the worker's second look at the queue a wake-up is lost, and
//! with `Blocked` reported after the transition lock is released the
//! scheduler can see a wake before the block.

use loom::sync::atomic::{fence, AtomicU8, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};

const IDLE: u8 = 0;
const ACTIVE: u8 = 1;

/// The scheduler's view of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sched {
    /// On the worker (its slice is ending).
    Running,
    /// Stopped `Expired` or woken: waiting for a pick.
    Runnable,
    Blocked,
}

/// Which protocol the worker follows.
#[derive(Clone, Copy)]
struct Worker {
    /// Look at the queue again after storing `IDLE`.
    second_look: bool,
    /// Report `Blocked` while still holding the transition lock.
    block_under_lock: bool,
}

const RUNTIME: Worker = Worker { second_look: true, block_under_lock: true };

struct Group {
    queue: AtomicUsize,
    state: AtomicU8,
    transition: Mutex<()>,
    sched: Mutex<Sched>,
}

impl Group {
    fn spawn(&self) {
        self.queue.fetch_add(1, SeqCst);
        fence(SeqCst);
        if self.state.load(SeqCst) == IDLE {
            let _t = self.transition.lock().unwrap();
            if self.state.load(SeqCst) != IDLE {
                return;
            }
            self.state.store(ACTIVE, SeqCst);
            let mut s = self.sched.lock().unwrap();
            assert_eq!(*s, Sched::Blocked, "the scheduler was told to wake a group that is not blocked");
            *s = Sched::Runnable;
        }
    }

    fn end_slice(&self, w: Worker) {
        let stop = |why: Sched| {
            let mut s = self.sched.lock().unwrap();
            assert_eq!(*s, Sched::Running, "a stop of a group that is not running");
            *s = why;
        };
        if self.queue.load(SeqCst) != 0 {
            return stop(Sched::Runnable);
        }
        let t = self.transition.lock().unwrap();
        self.state.store(IDLE, SeqCst);
        fence(SeqCst);
        if w.second_look && self.queue.load(SeqCst) != 0 {
            self.state.store(ACTIVE, SeqCst);
            drop(t);
            return stop(Sched::Runnable);
        }
        if w.block_under_lock {
            stop(Sched::Blocked);
            drop(t);
        } else {
            drop(t);
            stop(Sched::Blocked);
        }
    }
}

/// The worker ends a slice (its group's queue just emptied) while
/// `spawners` threads each spawn one task into the group.
fn model(w: Worker, spawners: usize) {
    loom::model(move || {
        let g = Arc::new(Group {
            queue: AtomicUsize::new(0),
            state: AtomicU8::new(ACTIVE),
            transition: Mutex::new(()),
            sched: Mutex::new(Sched::Running),
        });
        let threads: Vec<_> = (0..spawners)
            .map(|_| {
                let g = g.clone();
                loom::thread::spawn(move || g.spawn())
            })
            .collect();
        g.end_slice(w);
        for t in threads {
            t.join().unwrap();
        }
        let s = *g.sched.lock().unwrap();
        let queued = g.queue.load(SeqCst);
        assert_eq!(queued, spawners);
        assert_eq!(s, Sched::Runnable, "lost wake-up: {queued} tasks queued and the group is {s:?}");
        assert_eq!(g.state.load(SeqCst), ACTIVE, "the state word says IDLE for a runnable group");
    });
}

#[test]
fn no_lost_wakeup_one_spawner() {
    model(RUNTIME, 1);
}

#[test]
fn no_lost_wakeup_no_double_wake_two_spawners() {
    model(RUNTIME, 2);
}

fn fails(w: Worker) -> String {
    let r = std::panic::catch_unwind(|| model(w, 1));
    let p = r.expect_err("the model passed a broken protocol");
    p.downcast_ref::<String>().cloned().or(p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// Without the second look, the spawner can read `ACTIVE` (before the
/// worker stores `IDLE`) while the worker read an empty queue (before the
/// push): the group blocks with a task queued.
#[test]
fn without_the_second_look_a_wakeup_is_lost() {
    let why = fails(Worker { second_look: false, ..RUNTIME });
    assert!(why.contains("lost wake-up"), "{why}");
}

/// With `Blocked` reported after the transition lock is released, the
/// spawner can wake the group in between: a wake of a running group.
#[test]
fn blocked_reported_outside_the_lock_can_follow_the_wake() {
    let why = fails(Worker { block_under_lock: false, ..RUNTIME });
    assert!(why.contains("not blocked"), "{why}");
}
