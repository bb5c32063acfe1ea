//! Shares of CPU-bound groups against the readjusted ideal, with the check
//! shown able to fail (a scheduler that ignores weights fails it), and no
//! group ever on two workers at once.
//!
//! Tolerance: every group's share of the CPU the workers received is within
//! `TOL` (10 percentage points) of its readjusted ideal share. Shares are
//! of thread CPU time, so other processes taking CPU do not bias them
//! directly, but they do indirectly: a group is served by one worker at a
//! time, and when the OS leaves that worker's thread off the CPU for a few
//! ms the other worker serves the other groups. At load 15 on this 2-core
//! machine we measured GR3MP's heaviest group (ideal 50 %) at 40-50 % and
//! DWRR's at 44-50 % (DWRR keeps a group on one worker's queue for a whole
//! round, so it inherits the OS's unfairness between worker threads more
//! than a central scheduler does); on a quiet machine both are within 1
//! point (docs/EXECUTOR.md). With weights ignored (`rr`) the 1:2:3 groups
//! get a third each, at least 16.7 points off for the first group, and
//! the test that shows this check fails for `rr` is part of the file. The
//! tests run one at a time (`SERIAL`) so they do not load each other.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use propshare_rt::{Runtime, Snapshot};

const TOL: f64 = 0.10;

/// One runtime at a time in this file.
static SERIAL: Mutex<()> = Mutex::new(());

/// Spin for `d` of wall time.
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// The longest a run may take in wall time, however loaded the machine.
const WALL_CAP: Duration = Duration::from_secs(60);

/// `weights.len()` CPU-bound groups (one future each: 100 µs of work, then
/// yield) on `workers` workers until the groups have received `cpu` of CPU
/// time in all (or [`WALL_CAP`] passed); the snapshot at the end. Counting
/// CPU time, not wall time, keeps the figures the same on a loaded machine,
/// where the workers get less of the wall clock.
fn cpu_bound(spec: &str, workers: usize, weights: &[u64], cpu: Duration) -> Snapshot {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = Runtime::builder().workers(workers).scheduler(spec).slice(Duration::from_millis(1)).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let groups: Vec<_> = weights.iter().enumerate().map(|(i, &w)| rt.group(&format!("g{i}"), w).unwrap()).collect();
    let handles: Vec<_> = groups
        .iter()
        .map(|g| {
            let stop = stop.clone();
            g.spawn_future(async move {
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_micros(100));
                    propshare_rt::yield_now().await;
                }
            })
            .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut snap = rt.snapshot();
    while snap.groups.iter().map(|g| g.cpu_ns).sum::<u64>() < cpu.as_nanos() as u64 && start.elapsed() < WALL_CAP {
        std::thread::sleep(Duration::from_millis(20));
        snap = rt.snapshot();
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let end = rt.shutdown_drain();
    assert!(end.totals.balanced(), "{:?}", end.totals);
    assert!(end.groups.iter().all(|g| g.overlaps == 0), "a group ran on two workers at once");
    snap
}

/// The largest distance, in share points, between a group's share of the
/// CPU given and its ideal share (`ideal[i]`, summing to 1).
fn worst_share_error(snap: &Snapshot, ideal: &[f64]) -> (f64, Vec<f64>) {
    let total: u64 = snap.groups.iter().map(|g| g.cpu_ns).sum();
    let shares: Vec<f64> = snap.groups.iter().map(|g| g.cpu_ns as f64 / total as f64).collect();
    let worst = shares.iter().zip(ideal).map(|(s, i)| (s - i).abs()).fold(0.0, f64::max);
    (worst, shares)
}

fn assert_shares(spec: &str, weights: &[u64], ideal: &[f64], tol: f64) {
    let snap = cpu_bound(spec, 2, weights, Duration::from_millis(3000));
    let (worst, shares) = worst_share_error(&snap, ideal);
    let lags: Vec<(i64, i64)> = snap.groups.iter().map(|g| (g.min_lag_ns, g.max_lag_ns)).collect();
    eprintln!("{spec} {weights:?}: shares {shares:.4?} (ideal {ideal:.4?}), lag ranges ns {lags:?}");
    assert!(worst <= tol, "{spec} {weights:?}: shares {shares:?}, ideal {ideal:?}: off by {worst:.3} > {tol}");
}

#[test]
fn gr3mp_shares_follow_weights() {
    assert_shares("gr3mp", &[1, 2, 3], &[1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0], TOL);
}

/// 10:1:1 on 2 workers is infeasible: readjustment caps the heavy group at
/// one worker, the other two share the second.
#[test]
fn gr3mp_infeasible_weight_is_capped_at_one_worker() {
    assert_shares("gr3mp", &[10, 1, 1], &[0.5, 0.25, 0.25], TOL);
}

#[test]
fn dwrr_distributed_shares_follow_weights() {
    assert_shares("dwrr", &[1, 2, 3], &[1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0], TOL);
}

/// GDQ with its global part and each run queue under their own locks.
#[test]
fn gdq_distributed_shares_follow_weights() {
    assert_shares("gdq", &[1, 2, 3], &[1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0], TOL);
}

#[test]
fn sfs_shares_follow_weights() {
    assert_shares("sfs", &[1, 2, 3], &[1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0], TOL);
}

/// The check can fail: round robin ignores weights, and is caught.
#[test]
fn weights_ignored_fail_the_share_check() {
    let snap = cpu_bound("rr", 2, &[1, 2, 3], Duration::from_millis(1600));
    let (worst, shares) = worst_share_error(&snap, &[1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0]);
    assert!(worst > TOL, "rr passed the share check ({shares:?}): the check cannot tell weights from none");
    let lowest = snap.groups.iter().map(|g| g.min_lag_ns).min().unwrap();
    assert!(
        lowest < -LAG_BOUND_SLICES * snap.slice_ns as i64,
        "rr passed the lag check (lowest lag {lowest} ns): the check cannot tell weights from none"
    );
}

/// Lag bound for the lag tests, in slices. GR3MP's Theorem 2 gives
/// (-4, 14.5) slices for 1:2:3 on 2 CPUs; a worker thread that the OS
/// leaves off the CPU mid-slice holds its group meanwhile (at load 15 we
/// measured -14 slices, at load 12 with a debug build +42), so the test
/// allows 60. Weights ignored, the
/// weight-3 group falls behind by a sixth of the CPU clock, about 270
/// slices in 1.6 s of CPU time (`weights_ignored_fail_the_share_check`
/// checks that).
const LAG_BOUND_SLICES: i64 = 60;

/// Lag against the fluid reference (on the runtime's CPU clock, see
/// `propshare_rt::lag`) stays bounded for GR3MP: no drift.
#[test]
fn gr3mp_lag_stays_bounded() {
    let snap = cpu_bound("gr3mp", 2, &[1, 2, 3], Duration::from_millis(1000));
    let bound = LAG_BOUND_SLICES * snap.slice_ns as i64;
    for g in &snap.groups {
        assert!(
            g.max_lag_ns <= bound && g.min_lag_ns >= -bound,
            "{}: lag in [{}, {}] ns, bound ±{bound}",
            g.name,
            g.min_lag_ns,
            g.max_lag_ns
        );
    }
}

/// Many tasks in each group, more workers than groups: a group's tasks
/// never run on two workers at once (each task counts itself in and out).
#[test]
fn no_group_on_two_workers_at_once() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for spec in ["gr3mp", "dwrr", "sfs", "gdq"] {
        let rt = Runtime::builder().workers(4).scheduler(spec).slice(Duration::from_micros(200)).build().unwrap();
        let violations = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for i in 0..3 {
            let g = rt.group(&format!("g{i}"), 1 + i as u64).unwrap();
            let inside = Arc::new(AtomicUsize::new(0));
            for _ in 0..300 {
                let (inside, violations) = (inside.clone(), violations.clone());
                handles.push(
                    g.spawn(move || {
                        if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        spin(Duration::from_micros(20));
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                    .unwrap(),
                );
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        let snap = rt.shutdown_drain();
        assert_eq!(violations.load(Ordering::SeqCst), 0, "{spec}: a group's tasks overlapped");
        assert!(snap.groups.iter().all(|g| g.overlaps == 0), "{spec}");
        assert_eq!(snap.totals.completed, 900, "{spec}");
    }
}
