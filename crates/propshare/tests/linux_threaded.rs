//! The Linux-like schedulers' per-CPU state split, proved with threads: the
//! global part ([`LinuxShared`]: tunables, owner map, atomic counters) and
//! one [`CpuPart`] per CPU (runqueue, LRU list, the slab of its tasks'
//! entities), each behind its own lock ([`Locked`]), driven by one thread
//! per CPU through the same step functions the single-threaded policy
//! calls (`linux::pick`, with new-idle balancing's cross-CPU `migrate`
//! under two locks, and `CpuPart::stopped`).
//!
//! All clients fork on CPU 0 (a burst); every other CPU starts idle and
//! pulls work with new-idle balancing while CPU 0 keeps dispatching. Each
//! CPU thread runs a virtual clock in ticks of the quantum: it picks, "runs"
//! the client for a random part of its slice and stops it, until the tick
//! ends. Every `EPOCH` ticks the threads meet at a barrier (no client runs)
//! and one checks the parts under all the locks.
//!
//! Checked:
//! * no client is ever on two CPUs at once (a per-client atomic flag);
//! * at every quiescent point, `linux::check_parts` (every entity in the
//!   slab of the CPU it names and where the owner map says, which names no
//!   other; LRU lists match the runqueues) and that all N clients are
//!   queued, each exactly once;
//! * no CPU ever picks nothing (N ≥ P and new-idle balancing always finds
//!   an overloaded CPU with a waiting task), and every CPU ends with work.
//!
//! Not covered: sleep/wake churn and the periodic balancer, whose steps
//! still run over the policy's slice of parts only.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, MutexGuard};

use propshare::algo::cfs::CfsRq;
use propshare::algo::eevdf::EevdfRq;
use propshare::algo::linux::{self, CpuPart, Enqueue, Entity, FairRq, LinuxShared, Tunables};
use propshare::percpu::{Locked, Parts};
use propshare::{ClientId, StopReason, Time, MS};

mod threads;
use threads::or_abort;

/// Ticks between quiescent checks.
const EPOCH: u64 = 10;
/// Quiescent checks per run.
const EPOCHS: u64 = 100;
const Q: Time = MS;

/// What every thread shares.
struct World<R> {
    sh: LinuxShared,
    parts: Vec<Mutex<CpuPart<R>>>,
    on_cpu: Vec<AtomicBool>,
    idle_picks: AtomicU64,
}

impl<R: FairRq> World<R> {
    fn check(&self, n: usize) {
        let guards: Vec<MutexGuard<'_, CpuPart<R>>> = self.parts.iter().map(|m| m.lock().unwrap()).collect();
        match linux::check_parts(&self.sh, guards.iter().map(|g| &**g)) {
            Ok((ents, queued)) => assert_eq!((ents, queued), (n, n), "entities and queued clients"),
            Err(e) => panic!("invariant broken at a quiescent point: {e}"),
        }
        assert!(self.on_cpu.iter().all(|f| !f.load(Ordering::Acquire)), "a client is on a CPU at a barrier");
    }
}

/// `p` CPU threads over `n` clients of weights 1024·(1 + i mod 3), all
/// forked on CPU 0.
fn run<R: FairRq + Send>(p: usize, n: usize, seed: u64) {
    let tun = Tunables::for_quantum(Q);
    let world = World {
        sh: LinuxShared::new(tun, n),
        parts: (0..p).map(|_| Mutex::new(CpuPart::<R>::new(&tun))).collect(),
        on_cpu: (0..n).map(|_| AtomicBool::new(false)).collect(),
        idle_picks: AtomicU64::new(0),
    };
    {
        let mut cpu0 = world.parts[0].lock().unwrap();
        for i in 0..n {
            let se = Entity { weight: 1024 * (1 + i as u64 % 3), slice: tun.base_slice, ..Entity::default() };
            let s = cpu0.admit(&world.sh, 0, ClientId(i as u32), se);
            cpu0.attach(&world.sh, s, Enqueue::New);
        }
    }
    world.check(n);
    let barrier = Barrier::new(p);
    std::thread::scope(|scope| {
        for k in 0..p {
            let (world, barrier) = (&world, &barrier);
            scope.spawn(move || {
                or_abort(|| {
                    let mut parts = Locked(&world.parts);
                    let mut rng = seed ^ (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let mut clock = 0;
                    for tick in 0..EPOCH * EPOCHS {
                        let end = (tick + 1) * Q;
                        while clock < end {
                            let Some((c, slice)) = linux::pick(&world.sh, &mut parts, k, clock) else {
                                world.idle_picks.fetch_add(1, Ordering::Relaxed);
                                clock = end;
                                break;
                            };
                            assert!(!world.on_cpu[c.index()].swap(true, Ordering::AcqRel), "{c} is on two CPUs");
                            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                            let ran = 1 + (rng >> 33) % slice;
                            clock += ran;
                            world.on_cpu[c.index()].store(false, Ordering::Release);
                            let why = if ran < slice { StopReason::Preempted } else { StopReason::Expired };
                            parts.with(k, |q| q.stopped(&world.sh, c, ran, why));
                        }
                        if tick % EPOCH == EPOCH - 1 {
                            barrier.wait();
                            if k == 0 {
                                world.check(n);
                            }
                            barrier.wait();
                        }
                    }
                })
            });
        }
    });
    assert_eq!(world.idle_picks.load(Ordering::Relaxed), 0, "a CPU found nothing to run");
    for (k, part) in world.parts.iter().enumerate() {
        assert!(part.lock().unwrap().rq.nr_running() >= 1, "cpu {k} ends idle");
    }
    assert!(world.sh.migrations() >= p as u64 - 1, "every idle CPU pulled a task");
}

#[test]
fn cfs_parts_under_one_lock_per_cpu() {
    for seed in 0..4 {
        run::<CfsRq>(4, 16, seed);
    }
}

#[test]
fn eevdf_parts_under_one_lock_per_cpu() {
    for seed in 0..4 {
        run::<EevdfRq>(4, 16, seed);
    }
}
