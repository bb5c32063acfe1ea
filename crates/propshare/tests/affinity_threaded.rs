//! SFS's and DFS's per-CPU state split, proved with threads: the central
//! queues ([`SfsPolicy`], [`DfsPolicy`] inside their [`Shell`], with the
//! roster) are the global part, behind one lock; each CPU's processor
//! affinity (the clients that last ran on it, [`AffinePart`]) is its own
//! part, behind its own lock, reached through [`LockedAffinity`]. A client
//! that runs on another CPU than last time moves its entry between two
//! parts under both their locks (`percpu::ran_on`: at the stop for SFS, at
//! the pick for DFS).
//!
//! One thread per CPU runs a virtual clock in ticks of the quantum: it
//! picks, "runs" the client for a random part of its slice outside every
//! lock and stops it (now and then as blocked), until the tick ends. A
//! churn thread meanwhile joins, leaves, blocks, wakes and reweighs random
//! clients (the shell refuses what the roster forbids). Every `EPOCH` ticks
//! all threads meet at a barrier and one checks the shell's and the
//! policy's invariants (the affinity parts under all their locks); after
//! the churn every client is joined and woken, and a steady phase runs
//! without churn or blocking.
//!
//! Checked: no client is ever on two CPUs at once (a per-client atomic
//! flag); the invariants at every quiescent point (every affinity entry in
//! the part the owner map says, at most one per client); in the steady
//! phase every client is served, and at the end every client that ran has
//! exactly one affinity entry.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

use propshare::algo::dfs::{DfsOptions, DfsPolicy};
use propshare::algo::sfs::{SfsOptions, SfsPolicy};
use propshare::percpu::{AffinePart, AffinityParts, LockedAffinity, OwnerMap};
use propshare::{ClientId, CpuId, Decision, Policy, SchedConfig, Scheduler, Shell, StopReason, Time, Weight, MS};
use proptest::test_runner::TestRng;

mod threads;
use threads::{below, or_abort, rng};

/// Ticks between quiescent checks.
const EPOCH: u64 = 10;
/// Churn operations per epoch.
const CHURN_OPS: usize = 40;
const Q: Time = MS;

fn weight(r: &mut TestRng) -> Weight {
    Weight::new(1 + below(r, 4)).unwrap()
}

/// What every thread shares: the global part (the shell) and, per client,
/// whether it is on a CPU and its service in the steady phase.
struct World<P> {
    shell: Mutex<Shell<P>>,
    on_cpu: Vec<AtomicBool>,
    served: Vec<AtomicU64>,
}

impl<P: Policy> World<P> {
    fn check(&self) {
        if let Err(e) = self.shell.lock().unwrap().check_invariants() {
            panic!("invariant broken at a quiescent point: {e}");
        }
        assert!(self.on_cpu.iter().all(|f| !f.load(Ordering::Acquire)), "a client is on a CPU at a barrier");
    }
}

/// CPU `k`'s thread for `ticks`: blocks a client about once in
/// `block_one_in` dispatches (0: never); records service if `steady`.
fn run_cpu<P: Policy>(
    world: &World<P>,
    k: usize,
    ticks: std::ops::Range<u64>,
    r: &mut TestRng,
    block_one_in: u64,
    steady: bool,
) {
    let cpu = CpuId(k as u32);
    let mut clock = ticks.start * Q;
    for tick in ticks {
        let end = (tick + 1) * Q;
        while clock < end {
            let decision = world.shell.lock().unwrap().pick(clock, cpu).expect("a valid pick");
            let Decision::Run { client: c, slice } = decision else {
                clock = end;
                break;
            };
            assert!(!world.on_cpu[c.index()].swap(true, Ordering::AcqRel), "{c} is on two CPUs");
            let ran = 1 + below(r, slice);
            clock += ran;
            if steady {
                world.served[c.index()].fetch_add(ran, Ordering::Relaxed);
            }
            let why = if block_one_in > 0 && below(r, block_one_in) == 0 {
                StopReason::Blocked
            } else if ran < slice {
                StopReason::Preempted
            } else {
                StopReason::Expired
            };
            world.on_cpu[c.index()].store(false, Ordering::Release);
            world.shell.lock().unwrap().stopped(clock, cpu, c, ran, why).expect("a valid stop");
        }
    }
}

/// The churn thread's epoch `e`: random events on random clients; the
/// shell refuses the ones the roster forbids (blocking a running client,
/// waking a runnable one, ...).
fn churn<P: Policy>(world: &World<P>, n: u64, e: u64, r: &mut TestRng) {
    let now = e * EPOCH * Q;
    for _ in 0..CHURN_OPS {
        let c = ClientId(below(r, n) as u32);
        let mut s = world.shell.lock().unwrap();
        let _ = match below(r, 6) {
            0 => s.leave(now, c),
            1 | 2 => s.block(now, c),
            3 => s.wake(now, c).map(|_| ()),
            4 => s.set_weight(now, c, weight(r)),
            _ => s.join(now, c, weight(r)).map(|_| ()),
        };
        drop(s);
        if below(r, 8) == 0 {
            std::thread::yield_now();
        }
    }
}

/// `p` CPU threads and the churn thread over `n` clients for `epochs`
/// epochs of churn and `steady` steady epochs.
fn run<P: Policy + Send>(shell: Shell<P>, p: usize, n: usize, seed: u64, epochs: u64, steady: u64) -> Shell<P> {
    let world = World {
        shell: Mutex::new(shell),
        on_cpu: (0..n).map(|_| AtomicBool::new(false)).collect(),
        served: (0..n).map(|_| AtomicU64::new(0)).collect(),
    };
    let barrier = Barrier::new(p + 1);
    std::thread::scope(|scope| {
        for k in 0..p {
            let (world, barrier) = (&world, &barrier);
            scope.spawn(move || {
                or_abort(|| {
                    let mut r = rng(seed, k as u64 + 1);
                    for e in 0..epochs + 1 + steady {
                        let ticks = e * EPOCH..(e + 1) * EPOCH;
                        if e < epochs {
                            run_cpu(world, k, ticks, &mut r, 20, false);
                        } else if e > epochs {
                            run_cpu(world, k, ticks, &mut r, 0, true);
                        }
                        if barrier.wait().is_leader() {
                            world.check();
                        }
                        barrier.wait();
                    }
                })
            });
        }
        or_abort(|| {
            let mut r = rng(seed, 0);
            for e in 0..epochs + 1 + steady {
                if e < epochs {
                    churn(&world, n as u64, e, &mut r);
                } else if e == epochs {
                    // Quiescent: every client joined and runnable.
                    let mut s = world.shell.lock().unwrap();
                    for i in 0..n {
                        let c = ClientId(i as u32);
                        if s.join(epochs * EPOCH * Q, c, weight(&mut r)).is_err() {
                            let _ = s.wake(epochs * EPOCH * Q, c);
                        }
                    }
                }
                if barrier.wait().is_leader() {
                    world.check();
                }
                barrier.wait();
            }
        })
    });
    for (i, s) in world.served.iter().enumerate() {
        assert!(s.load(Ordering::Relaxed) > 0, "client {i} was never served in the steady phase");
    }
    world.shell.into_inner().unwrap()
}

/// Per-CPU affinity parts and their owner map for `p` CPUs and `n` clients.
fn affinity_parts(p: usize, n: usize) -> (OwnerMap, Vec<Mutex<AffinePart>>) {
    (OwnerMap::new(n), (0..p).map(|_| Mutex::new(AffinePart::default())).collect())
}

#[test]
fn sfs_affinity_parts_under_one_lock_per_cpu() {
    let (p, n) = (4, 16);
    for seed in 0..3 {
        let (owners, parts) = affinity_parts(p, n);
        let cfg = SchedConfig::new(p, Q);
        let opts = SfsOptions { affinity_bias: 4, affinity_slack: Some(Q), ..SfsOptions::EXACT };
        let affinity = LockedAffinity { owners: &owners, parts: &parts };
        run(SfsPolicy::shell(cfg, opts, affinity), p, n, seed, 20, 10);
        assert_eq!(affinity.check(), Ok(n), "one entry per client, all of them ran");
    }
}

#[test]
fn dfs_affinity_parts_under_one_lock_per_cpu() {
    let (p, n) = (4, 16);
    for seed in 0..3 {
        let (owners, parts) = affinity_parts(p, n);
        let cfg = SchedConfig::new(p, Q);
        let affinity = LockedAffinity { owners: &owners, parts: &parts };
        run(DfsPolicy::shell(cfg, DfsOptions::fa_affinity(p), "dfs-fa+affinity", affinity), p, n, seed, 20, 10);
        assert_eq!(affinity.check(), Ok(n), "one entry per client, all of them ran");
    }
}
