//! The runtime's scheduler calls, recorded and replayed through the core;
//! and the core alone on workers of unequal speed, which is what explains
//! the shares of an infeasible (capped) group on a loaded machine
//! (docs/EXECUTOR.md, "Why a capped group's share follows its worker").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, StopReason, Time, Weight};
use propshare_rt::{Runtime, SchedEvent};

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// 10:1:1 CPU-bound groups plus a bursty one (blocks and wakes) on 2
/// workers, recorded; returns the recording and the slice.
fn record(spec: &str) -> (Vec<SchedEvent>, Time) {
    let slice = Duration::from_micros(500);
    let rt = Runtime::builder().workers(2).scheduler(spec).slice(slice).record(true).build().unwrap();
    assert_eq!(rt.locking(), "central");
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for (i, w) in [10, 1, 1].into_iter().enumerate() {
        let g = rt.group(&format!("g{i}"), w).unwrap();
        let stop = stop.clone();
        handles.push(
            g.spawn_future(async move {
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_micros(50));
                    propshare_rt::yield_now().await;
                }
            })
            .unwrap(),
        );
    }
    let bursty = rt.group("bursty", 3).unwrap();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(300) {
        for _ in 0..5 {
            handles.push(bursty.spawn_future(async { spin(Duration::from_micros(30)) }).unwrap());
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    bursty.set_weight(2).unwrap();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    bursty.close();
    // A prefix of the calls (the workers may still be polling): a prefix
    // replays as well as the whole.
    let events = rt.recorded();
    assert!(rt.shutdown_drain().totals.balanced());
    (events, slice.as_nanos() as Time)
}

/// Replay `events` through a fresh `spec` scheduler for 2 CPUs with
/// quantum `slice`: every call must be accepted and every pick must decide
/// as it did in the runtime. Returns the number of picks compared.
fn replay(spec: &str, slice: Time, events: &[SchedEvent]) -> Result<usize, String> {
    let mut s = registry::build(spec, SchedConfig::new(2, slice)).map_err(|e| e.to_string())?;
    let mut picks = 0;
    for (i, e) in events.iter().enumerate() {
        let r = match *e {
            SchedEvent::Join { at, group, weight } => s.join(at, group, weight).map(drop),
            SchedEvent::Wake { at, group } => s.wake(at, group).map(drop),
            SchedEvent::SetWeight { at, group, weight } => s.set_weight(at, group, weight),
            SchedEvent::Leave { at, group } => s.leave(at, group),
            SchedEvent::Stop { at, worker, group, ran, why } => s.stopped(at, worker, group, ran, why),
            SchedEvent::Pick { at, worker, decision } => {
                let d = s.pick(at, worker).map_err(|e| format!("event {i}: {e}"))?;
                if d != decision {
                    return Err(format!("event {i}: the runtime got {decision:?}, the core now decides {d:?}"));
                }
                picks += 1;
                Ok(())
            }
        };
        r.map_err(|err| format!("event {i} {e:?}: {err}"))?;
    }
    Ok(picks)
}

/// What the runtime asked the scheduler, replayed through the core, gives
/// the same decisions: the runtime drives the algorithm as the simulator
/// does, so its shares are the algorithm's answer to the slices it really
/// ran (their order and CPU times). With one slice's `ran` changed, the
/// replay of SFS and WFQ (which charge virtual time by `ran`) diverges: the
/// comparison can fail. (GR3MP counts quanta, and a changed `ran` may
/// change none of its decisions.) The slice changed is a light group's
/// first, charged 100 slices more: the heavy group is capped at one worker
/// by readjustment, so a charge to it may change nothing (it did not in a
/// CI run under load).
#[test]
fn recorded_calls_replay_to_the_same_decisions() {
    for spec in ["sfs", "gr3mp", "wfq+readjust"] {
        let (events, slice) = record(spec);
        let joins = events.iter().filter(|e| matches!(e, SchedEvent::Join { .. })).count();
        let wakes = events.iter().filter(|e| matches!(e, SchedEvent::Wake { .. })).count();
        assert_eq!(joins, 4, "{spec}: every group joins once");
        assert!(wakes > 0, "{spec}: the bursty group never blocked and woke");
        // The CPU-bound groups (ids 0-2) never block until their future
        // ends, and never wake: no spurious block/wake of an empty group.
        for (i, e) in events.iter().enumerate() {
            match *e {
                SchedEvent::Wake { group, .. } => assert!(group.0 > 2, "{spec}: CPU-bound {group} woke"),
                SchedEvent::Stop { group, why: StopReason::Blocked, .. } if group.0 <= 2 => {
                    let runs_again = events[i + 1..].iter().any(|x| {
                        matches!(x, SchedEvent::Pick { decision: Decision::Run { client, .. }, .. } if *client == group)
                    });
                    assert!(!runs_again, "{spec}: CPU-bound {group} blocked and ran again");
                }
                _ => {}
            }
        }
        let picks = replay(spec, slice, &events).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert!(picks > 100, "{spec}: only {picks} picks recorded");

        if spec == "gr3mp" {
            continue;
        }
        // Tamper: charge a light group's first slice 100 slices more.
        let mut bent = events.clone();
        let first = bent
            .iter_mut()
            .find_map(|e| match e {
                SchedEvent::Stop { group, ran, .. } if *group == ClientId(1) => Some(ran),
                _ => None,
            })
            .unwrap();
        *first += 100 * slice;
        assert!(replay(spec, slice, &bent).is_err(), "{spec}: a changed charge did not change any decision");
    }
}

/// The core alone, event-driven: 2 CPUs, worker 0 `slow` times slower
/// than worker 1 (a slice of `q` ns of CPU takes `slow·q` ns of time on
/// it, as when the OS gives that worker thread 1/slow of a core), CPU-bound
/// groups 10:1:1 (readjusted ideal 50/25/25 %). Returns each group's share
/// of the CPU the two workers delivered, in %.
fn unequal_speeds(spec: &str, slow: Time) -> [f64; 3] {
    let q: Time = 1_000_000;
    let mut s = registry::build(spec, SchedConfig::new(2, q)).unwrap();
    for (i, w) in [10, 1, 1].into_iter().enumerate() {
        s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
    }
    let speed = |k: usize| if k == 0 { slow } else { 1 };
    // Per worker: (time its slice ends, the group).
    let mut running: [Option<(Time, ClientId)>; 2] = [None, None];
    for (k, r) in running.iter_mut().enumerate() {
        if let Decision::Run { client, .. } = s.pick(0, CpuId(k as u32)).unwrap() {
            *r = Some((q * speed(k), client));
        }
    }
    let mut got = [0u64; 3];
    for _ in 0..20_000 {
        let k = (0..2).min_by_key(|&k| running[k].map_or(Time::MAX, |r| r.0)).unwrap();
        let (now, c) = running[k].unwrap();
        got[c.index()] += q;
        s.stopped(now, CpuId(k as u32), c, q, StopReason::Expired).unwrap();
        running[k] = match s.pick(now, CpuId(k as u32)).unwrap() {
            Decision::Run { client, .. } => Some((now + q * speed(k), client)),
            Decision::Idle => None,
        };
    }
    let total: u64 = got.iter().sum();
    got.map(|g| 100.0 * g as f64 / total as f64)
}

/// With equal workers every scheduler gives the capped group its 50 %.
/// With worker 0 three times slower (it delivers a quarter of the CPU),
/// the capped group, which can use one worker at a time, gets what the
/// worker it settles on delivers: SFS and WFQ settle it on the slow worker
/// (25 %): once it is behind in virtual time it is never *waiting* when
/// the fast worker picks, so nothing moves it; while it is ahead on the
/// fast worker, the fast worker's next pick prefers a light group that is
/// behind. DWRR keeps it on its own (fast) worker's queue (75 %). This is
/// the runtime's 23-47 % (SFS) and 46-73 % (DWRR) on a loaded machine,
/// reproduced without threads: the OS gives the two worker threads unequal
/// CPU, which the schedulers' model (P equal CPUs) does not have.
#[test]
fn a_capped_group_gets_what_its_worker_delivers() {
    for spec in ["sfs", "wfq+readjust", "gr3mp", "dwrr"] {
        let even = unequal_speeds(spec, 1);
        assert!((even[0] - 50.0).abs() < 0.1, "{spec}, equal workers: {even:?}");
    }
    let sfs = unequal_speeds("sfs", 3);
    assert!((sfs[0] - 25.0).abs() < 0.5, "sfs, worker 0 3x slower: {sfs:?}");
    let wfq = unequal_speeds("wfq+readjust", 3);
    assert!((wfq[0] - 25.0).abs() < 0.5, "wfq+readjust, worker 0 3x slower: {wfq:?}");
    let dwrr = unequal_speeds("dwrr", 3);
    assert!((dwrr[0] - 75.0).abs() < 0.5, "dwrr, worker 0 3x slower: {dwrr:?}");
}
