//! Chaos: random spawns (closures and futures, some panicking, some
//! spawning more), weight changes, group closes (draining and cancelling),
//! pauses, and a shutdown (drain, cancel, or drop) in the middle, on random
//! schedulers, worker counts and slices. Seeded, so a failure repeats.
//!
//! Checked for every seed: every handle resolves (a watchdog aborts the
//! process if one hangs); a task that returns gives its own value back; a
//! task that does not panic never reports `Panicked`, one that panics never
//! reports `Ok`; the handles' outcomes add up exactly to the groups'
//! counters (completed, panicked, cancelled), every accepted task was
//! counted as submitted, and none is left live: zero lost.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use propshare_rt::{Group, GroupError, JoinError, JoinHandle, Runtime, SpawnError};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const SCHEDULERS: &[&str] = &[
    "gr3mp",
    "dwrr",
    "dwrr-cfs+carry",
    "wfq+readjust",
    "sfs",
    "gdq",
    "gdq(delta=8,t=5)",
    "dfs",
    "stride",
    "eevdf",
    "gr3",
];

/// A spawned task: its handle, whether it panics, the value it returns otherwise.
struct Spawned {
    handle: JoinHandle<u64>,
    panics: bool,
    value: u64,
}

type Book = Arc<Mutex<Vec<Spawned>>>;

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Spawn a closure of `work` µs into `g`; it may panic, and may spawn one
/// more into its own group (that one recorded in `book` as well).
fn spawn_closure(g: &Group, book: &Book, value: u64, work: u64, panics: bool, nested: bool) {
    let (g2, book2) = (g.clone(), book.clone());
    let r = g.spawn(move || {
        spin(Duration::from_micros(work));
        if nested {
            spawn_closure(&g2, &book2, value ^ 0xabcd, work / 2, false, false);
        }
        if panics {
            panic!("task {value} panics on purpose");
        }
        value
    });
    record(book, r, panics, value);
}

fn record(book: &Book, r: Result<JoinHandle<u64>, SpawnError>, panics: bool, value: u64) {
    match r {
        Ok(handle) => book.lock().unwrap().push(Spawned { handle, panics, value }),
        // Refused: never accepted, so nothing to resolve.
        Err(SpawnError::Closed(_) | SpawnError::ShuttingDown) => {}
    }
}

/// One chaos run; the scheduler is drawn from `schedulers`, the worker
/// count too unless `workers` is given.
fn chaos(seed: u64, schedulers: &[&str], workers: Option<usize>) {
    let mut r = Pcg64::seed_from_u64(seed);
    let spec = schedulers[r.random_range(0..schedulers.len())];
    let drawn = r.random_range(1..=4);
    let workers = workers.unwrap_or(drawn);
    let slice = [50u64, 200, 1000][r.random_range(0..3)];
    let what = format!("seed {seed}: {spec} on {workers} workers, {slice} µs slices");
    let rt = Runtime::builder()
        .workers(workers)
        .scheduler(spec)
        .slice(Duration::from_micros(slice))
        .max_groups(6)
        .drop_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let book: Book = Arc::new(Mutex::new(Vec::new()));
    let mut groups: Vec<Group> = Vec::new();
    let mut all: Vec<Group> = Vec::new();
    let ops = r.random_range(200..600);
    for op in 0..ops {
        let value = seed << 32 | op as u64;
        let roll = r.random_range(0..100);
        if groups.is_empty() || roll < 6 {
            match rt.group(&format!("g{op}"), r.random_range(1..=8)) {
                Ok(g) => {
                    groups.push(g.clone());
                    all.push(g);
                }
                Err(GroupError::TooManyGroups { .. }) => {}
                Err(e) => panic!("{what}: group: {e}"),
            }
            continue;
        }
        let g = groups[r.random_range(0..groups.len())].clone();
        match roll {
            6..50 => {
                let (work, panics, nested) = (r.random_range(0..40), r.random_bool(0.05), r.random_bool(0.1));
                spawn_closure(&g, &book, value, work, panics, nested);
            }
            50..70 => {
                let (yields, panics) = (r.random_range(0..5), r.random_bool(0.05));
                let h = g.spawn_future(async move {
                    for _ in 0..yields {
                        spin(Duration::from_micros(5));
                        propshare_rt::yield_now().await;
                    }
                    if panics {
                        panic!("future {value} panics on purpose");
                    }
                    value
                });
                record(&book, h, panics, value);
            }
            70..78 => match g.set_weight(r.random_range(1..=10)) {
                Ok(()) | Err(GroupError::Closed(_)) => {}
                Err(e) => panic!("{what}: set_weight: {e}"),
            },
            78..82 => {
                g.close();
                groups.retain(|x| x.id() != g.id() || x.name() != g.name());
            }
            82..84 => {
                g.close_cancel();
                groups.retain(|x| x.id() != g.id() || x.name() != g.name());
            }
            _ => std::thread::sleep(Duration::from_micros(r.random_range(0..400))),
        }
    }
    let how = r.random_range(0..3);
    match how {
        0 => drop(rt.shutdown_drain()),
        1 => drop(rt.shutdown_cancel()),
        _ => drop(rt),
    }
    // Every handle resolves; outcomes add up to the counters.
    let spawned = std::mem::take(&mut *book.lock().unwrap());
    let (mut ok, mut panicked, mut cancelled) = (0, 0, 0);
    for s in spawned {
        match s.handle.join() {
            Ok(v) => {
                assert!(!s.panics, "{what}: a panicking task returned");
                assert_eq!(v, s.value, "{what}: wrong value");
                ok += 1;
            }
            Err(JoinError::Panicked(p)) => {
                assert!(s.panics, "{what}: a task that does not panic reported a panic");
                let msg = p.downcast_ref::<String>().map(String::as_str).unwrap_or("");
                assert!(msg.contains("panics on purpose"), "{what}: wrong payload {msg:?}");
                panicked += 1;
            }
            Err(JoinError::Cancelled) => cancelled += 1,
        }
    }
    // Nested spawns may have landed after the book was taken: none can now.
    let late = book.lock().unwrap().len();
    assert_eq!(late, 0, "{what}: tasks accepted after shutdown");
    let stats: Vec<_> = all.iter().map(|g| g.stats()).collect();
    let sum = |f: fn(&propshare_rt::GroupStats) -> u64| stats.iter().map(f).sum::<u64>();
    assert_eq!(sum(|g| g.submitted), ok + panicked + cancelled, "{what}: submitted vs handles");
    assert_eq!(sum(|g| g.completed), ok, "{what}: completed");
    assert_eq!(sum(|g| g.panicked), panicked, "{what}: panicked");
    assert_eq!(sum(|g| g.cancelled), cancelled, "{what}: cancelled");
    assert_eq!(sum(|g| g.live), 0, "{what}: tasks neither ended nor cancelled");
    assert_eq!(sum(|g| g.overlaps), 0, "{what}: a group on two workers at once");
    eprintln!("{what}, shutdown {how}: {ok} ok, {panicked} panicked, {cancelled} cancelled, {} groups", all.len());
    if how == 0 {
        // Drain cancels nothing by itself: only close_cancel did.
        assert!(ok + panicked > 0, "{what}: nothing ran");
    }
}

/// Keep the intended panics out of the test output.
fn quiet_intended_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<String>().map(String::as_str).unwrap_or("");
        if !msg.contains("on purpose") {
            default(info);
        }
    }));
}

#[test]
fn chaos_loses_no_task() {
    let seeds_done = watchdog();
    for seed in 0..24 {
        chaos(seed, SCHEDULERS, None);
        seeds_done.fetch_add(1, Ordering::SeqCst);
    }
    // The distributed hosts (per-worker or per-queue locks) each a few more times.
    for seed in 24..30 {
        chaos(seed, &["dwrr", "gdq"], None);
        seeds_done.fetch_add(1, Ordering::SeqCst);
    }
}

/// The per-CPU schedulers on 4 workers: a wake-up or balance pass may
/// queue a group on an idle CPU's runqueue, which only that CPU takes, so
/// the runtime's poll of idle workers must reach it (without the poll
/// passed on by a worker that finds nothing, seed 9 on eevdf hung under
/// load).
#[test]
fn chaos_per_cpu_schedulers_on_4_workers() {
    let seeds_done = watchdog();
    for seed in 30..38 {
        chaos(seed, &["eevdf", "cfs"], Some(4));
        seeds_done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Quiet intended panics, and abort the process when no seed ends for
/// 120 s: a hang, not a slow machine (a seed takes well under a second on
/// a quiet one; a deadline on the whole test fired once on a loaded 2-core
/// machine). Count each seed done in the counter returned.
fn watchdog() -> Arc<AtomicUsize> {
    quiet_intended_panics();
    let seeds_done = Arc::new(AtomicUsize::new(0));
    let watch = seeds_done.clone();
    std::thread::spawn(move || {
        let mut last = (usize::MAX, Instant::now());
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let now = watch.load(Ordering::SeqCst);
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(120) {
                eprintln!("chaos test hung after {now} seeds: a handle never resolved or a shutdown never ended");
                std::process::abort();
            }
        }
    });
    seeds_done
}

/// The block/wake race, head on: each spawn comes the moment the previous
/// task ended, while its worker decides whether the group blocks. A lost
/// wake-up leaves the task queued in a blocked group: it would never run.
#[test]
fn ping_pong_spawns_never_lose_a_wakeup() {
    for spec in ["gr3mp", "dwrr", "gdq"] {
        let rt = Runtime::builder().workers(2).scheduler(spec).build().unwrap();
        let g = rt.group("ping", 1).unwrap();
        for i in 0..20_000u64 {
            let h = g.spawn(move || i).unwrap();
            let t = Instant::now();
            while !h.is_finished() {
                assert!(t.elapsed() < Duration::from_secs(5), "{spec}: task {i} never ran: a lost wake-up");
                std::hint::spin_loop();
            }
            assert_eq!(h.join().unwrap(), i);
        }
        let snap = rt.shutdown_drain();
        assert_eq!(snap.totals.completed, 20_000, "{spec}");
    }
}
