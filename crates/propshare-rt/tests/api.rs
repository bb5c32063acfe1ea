//! Bad input gets a typed error naming what is wrong, never a panic; a
//! panicking task is reported at its handle and the runtime goes on.

use std::time::Duration;

use propshare_rt::{BuildError, GroupError, JoinError, Runtime, SpawnError};

#[test]
fn bad_builds_are_refused_with_a_reason() {
    let e = Runtime::builder().workers(0).build().err().unwrap();
    assert!(matches!(e, BuildError::NoWorkers), "{e}");
    let e = Runtime::builder().workers(1).scheduler("nope").build().err().unwrap();
    assert!(e.to_string().contains("unknown scheduler \"nope\""), "{e}");
    let e = Runtime::builder().workers(1).scheduler("gdq(t=0)").build().err().unwrap();
    assert!(e.to_string().contains("parameter \"t\"") && e.to_string().contains("outside 1..="), "{e}");
    let e = Runtime::builder().workers(1).scheduler("gr3mp(x=1)").build().err().unwrap();
    assert!(e.to_string().contains("no parameter \"x\""), "{e}");
    let e = Runtime::builder().workers(1).slice(Duration::ZERO).build().err().unwrap();
    assert!(matches!(e, BuildError::BadSlice(_)), "{e}");
    let e = Runtime::builder().workers(1).max_groups(0).build().err().unwrap();
    assert!(matches!(e, BuildError::BadMaxGroups(0)), "{e}");
    // Typed parameters pass through the registry.
    let rt = Runtime::builder().workers(1).scheduler("gdq(delta=8)").build().unwrap();
    assert_eq!(rt.scheduler(), "gdq(delta=8)");
    assert_eq!(rt.locking(), "distributed");
    let rt = Runtime::builder().workers(2).scheduler("gdq").central(true).build().unwrap();
    assert_eq!(rt.locking(), "central");
    let rt = Runtime::builder().workers(2).scheduler("gr3mp").build().unwrap();
    assert_eq!(rt.locking(), "central");
    let rt = Runtime::builder().workers(2).scheduler("dwrr").build().unwrap();
    assert_eq!(rt.locking(), "distributed");
    let rt = Runtime::builder().workers(2).scheduler("dwrr").central(true).build().unwrap();
    assert_eq!(rt.locking(), "central");
}

#[test]
fn groups_refuse_bad_weights_and_spawns_after_close() {
    let rt = Runtime::builder().workers(1).max_groups(2).build().unwrap();
    let e = rt.group("zero", 0).err().unwrap();
    assert!(matches!(e, GroupError::Weight { .. }) && e.to_string().contains("zero"), "{e}");
    let e = rt.group("huge", 1 << 40).err().unwrap();
    assert!(e.to_string().contains("larger than the maximum"), "{e}");
    let a = rt.group("a", 1).unwrap();
    let _b = rt.group("b", 1).unwrap();
    let e = rt.group("c", 1).err().unwrap();
    assert!(matches!(e, GroupError::TooManyGroups { max: 2, .. }), "{e}");
    assert!(a.set_weight(0).is_err());
    a.spawn(|| ()).unwrap().join().unwrap();
    a.close();
    assert_eq!(a.spawn(|| ()).err(), Some(SpawnError::Closed("a".into())));
    // Closed with nothing left: it retires (at once if blocked, else at its
    // worker's slice end), and its id is free again.
    let t = std::time::Instant::now();
    while !a.stats().retired {
        assert!(t.elapsed() < Duration::from_secs(5), "a closed, drained group never retired");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.set_weight(2), Err(GroupError::Closed("a".into())));
    let c = rt.group("c", 1).unwrap();
    assert_eq!(c.id(), a.id());
    let snap = rt.shutdown_drain();
    assert!(snap.group("a").unwrap().retired);
    assert_eq!(c.spawn(|| ()).err(), Some(SpawnError::ShuttingDown));
}

#[test]
fn a_panic_is_reported_at_its_handle_and_the_group_goes_on() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let g = rt.group("g", 1).unwrap();
    let bad = g.spawn(|| -> u32 { panic!("boom") }).unwrap();
    let e = bad.join().unwrap_err();
    assert!(e.is_panic() && e.panic_message() == Some("boom"), "{e:?}");
    let bad = g.spawn_future(async { panic!("async boom") }).unwrap();
    assert!(matches!(futures_lite_block_on(bad), Err(JoinError::Panicked(_))));
    assert_eq!(g.spawn(|| 7).unwrap().join().unwrap(), 7);
    let snap = rt.shutdown_drain();
    let s = snap.group("g").unwrap();
    assert_eq!((s.completed, s.panicked, s.cancelled), (1, 2, 0));
    assert!(snap.totals.balanced());
}

/// A handle is a future too.
fn futures_lite_block_on<T>(h: propshare_rt::JoinHandle<T>) -> Result<T, JoinError> {
    h.join()
}

#[test]
fn shutdown_cancel_resolves_every_queued_handle() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let g = rt.group("g", 1).unwrap();
    let hs: Vec<_> = (0..200).map(|_| g.spawn(|| std::thread::sleep(Duration::from_micros(200))).unwrap()).collect();
    let snap = rt.shutdown_cancel();
    let (mut ok, mut cancelled) = (0, 0);
    for h in hs {
        match h.join() {
            Ok(()) => ok += 1,
            Err(JoinError::Cancelled) => cancelled += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(ok + cancelled, 200);
    assert!(cancelled > 0, "shutdown_cancel ran everything: the test proves nothing");
    let s = snap.group("g").unwrap();
    assert_eq!((s.completed, s.cancelled), (ok, cancelled));
}

#[test]
fn need_yield_is_false_outside_a_worker() {
    assert!(!propshare_rt::need_yield());
}
