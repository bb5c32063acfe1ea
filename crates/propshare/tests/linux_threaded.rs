//! The Linux-like schedulers' per-CPU state split, proved with threads: the
//! global part ([`LinuxShared`]: tunables, owner map, atomic counters) and
//! one [`CpuPart`] per CPU (runqueue, LRU list, the slab of its tasks'
//! entities), each behind its own lock ([`Locked`]), driven through the
//! same step functions the single-threaded policy calls.
//!
//! * One thread per CPU runs a virtual clock in ticks of the quantum: it
//!   picks (`linux::pick`, with new-idle balancing's cross-CPU `migrate`
//!   under two locks), "runs" the client for a random part of its slice and
//!   stops it (`CpuPart::stopped`; now and then as blocked), until the tick
//!   ends; every `BALANCE_TICKS` ticks it runs its own periodic balance pass
//!   (`linux::load_balance`: survey one CPU at a time, verdict and walk
//!   under both CPUs' locks).
//! * One churn thread meanwhile joins, leaves, blocks, wakes and reweighs
//!   random clients (`linux::join`, `leave`, `block`, `wake`,
//!   `set_load_weight`; a wake onto another CPU moves the entity under both
//!   locks) and runs the due balance passes of every CPU
//!   (`linux::balance_due`).
//! * Every `EPOCH` ticks all threads meet at a barrier (a quiescent point:
//!   no client runs) and one checks the parts under all the locks. After
//!   the churn, every client is joined and woken, and a steady phase runs
//!   without churn or blocking.
//!
//! All clients start forked on CPU 0 (a burst), so the other CPUs start
//! idle and pull work.
//!
//! Checked:
//! * no client is ever on two CPUs at once (a per-client atomic flag, set
//!   after `pick` and cleared before `stopped`);
//! * at every quiescent point, `linux::check_parts` (every entity in the
//!   slab of the CPU it names and where the owner map says, which names no
//!   other; LRU lists match the runqueues), with one entity per joined
//!   client, and in the steady phase all N clients queued;
//! * in the steady phase no CPU ever picks nothing (N ≥ P and new-idle
//!   balancing always finds an overloaded CPU with a waiting task), and
//!   every client is served.
//!
//! Not covered: the readjustment (`+readjust`), which reads the global
//! runnable set and stays a step of the single-threaded policy.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use propshare::algo::cfs::CfsRq;
use propshare::algo::eevdf::EevdfRq;
use propshare::algo::linux::{self, CpuPart, Enqueue, Entity, FairRq, LinuxShared, Tunables};
use propshare::percpu::{Locked, Parts};
use propshare::{ClientId, Time, Weight, MS};
use proptest::test_runner::TestRng;

mod threads;
use threads::{below, cpu_clock, lock_step, stop_reason, Clients, Epochs, Mode, Phase};

/// Ticks between quiescent checks.
const EPOCH: u64 = 10;
/// Ticks between two periodic balance passes of a CPU thread's own CPU.
const BALANCE_TICKS: u64 = 4;
/// Churn operations per epoch.
const CHURN_OPS: usize = 40;
const Q: Time = MS;

/// A weight of 1024·(1..=3).
fn weight(r: &mut TestRng) -> u64 {
    1024 * (1 + below(r, 3))
}

/// What every thread shares.
struct World<R> {
    sh: LinuxShared,
    parts: Vec<Mutex<CpuPart<R>>>,
    clients: Clients,
    /// Clients with an entity (the churn thread's count).
    joined: AtomicUsize,
    /// Picks that found nothing in the steady phase.
    idle_picks: AtomicU64,
}

impl<R: FairRq> World<R> {
    /// At a quiescent point: the parts agree, one entity per joined client,
    /// `queued` of them queued if given.
    fn check(&self, queued: Option<usize>) {
        let guards: Vec<MutexGuard<'_, CpuPart<R>>> = self.parts.iter().map(|m| m.lock().unwrap()).collect();
        match linux::check_parts(&self.sh, guards.iter().map(|g| &**g)) {
            Ok((ents, q)) => {
                assert_eq!(ents, self.joined.load(Ordering::Acquire), "entities and joined clients");
                if let Some(n) = queued {
                    assert_eq!(q, n, "queued clients in the steady phase");
                }
            }
            Err(e) => panic!("invariant broken at a quiescent point: {e}"),
        }
        self.clients.assert_none_running();
    }
}

/// CPU `k`'s thread for `ticks`, its own periodic balance pass every
/// `BALANCE_TICKS` ticks, each dispatch a random part of the slice.
fn run_cpu<R: FairRq>(world: &World<R>, k: usize, ticks: Range<u64>, r: &mut TestRng, mode: Mode) {
    let Mode { block_one_in, steady } = mode;
    let mut parts = Locked(&world.parts);
    let mut clock = ticks.start * Q;
    for tick in ticks {
        if tick % BALANCE_TICKS == 0 {
            linux::load_balance(&world.sh, &mut parts, k);
        }
        cpu_clock(&mut clock, tick..tick + 1, Q, |now| {
            let Some((c, slice)) = linux::pick(&world.sh, &mut parts, k, now) else {
                if steady {
                    world.idle_picks.fetch_add(1, Ordering::Relaxed);
                }
                return None;
            };
            world.clients.start(c);
            let ran = 1 + below(r, slice);
            let why = stop_reason(r, block_one_in, ran, slice);
            world.clients.stop(c, ran, steady);
            parts.with(k, |q| q.stopped(&world.sh, c, ran, why));
            Some(ran)
        });
    }
}

/// The churn thread's epoch `e`: random operations on random clients.
/// `joined` is its record of which ids have an entity (only it joins and
/// leaves).
fn churn<R: FairRq>(world: &World<R>, joined: &mut [bool], e: u64, r: &mut TestRng) {
    let mut parts = Locked(&world.parts);
    let (sh, n) = (&world.sh, joined.len() as u64);
    let now = e * EPOCH * Q;
    for _ in 0..CHURN_OPS {
        let c = ClientId(below(r, n) as u32);
        let i = c.index();
        match below(r, 7) {
            _ if !joined[i] => {
                let w = Weight::new(weight(r)).unwrap();
                linux::join(sh, &mut parts, c, w, |_, _| {});
                joined[i] = true;
                world.joined.fetch_add(1, Ordering::AcqRel);
            }
            0 => {
                if linux::leave(sh, &mut parts, c).is_some() {
                    joined[i] = false;
                    world.joined.fetch_sub(1, Ordering::AcqRel);
                }
            }
            1 | 2 => {
                linux::block(sh, &mut parts, c);
            }
            3 | 4 => {
                linux::wake(sh, &mut parts, c);
            }
            5 => assert!(linux::set_load_weight(sh, &mut parts, now, c, weight(r), None)),
            _ => linux::balance_due(sh, &mut parts, now),
        }
        if below(r, 8) == 0 {
            std::thread::yield_now();
        }
    }
}

/// `p` CPU threads and the churn thread over `n` clients of weights
/// 1024·(1 + i mod 3), all forked on CPU 0: `epochs` epochs of churn, then
/// every client joined and woken, then `steady` epochs without churn.
fn run<R: FairRq + Send>(p: usize, n: usize, seed: u64, epochs: u64, steady: u64) {
    let tun = Tunables::for_quantum(Q);
    let world = World {
        sh: LinuxShared::new(tun, n),
        parts: (0..p).map(|_| Mutex::new(CpuPart::<R>::new(&tun))).collect(),
        clients: Clients::new(n),
        joined: AtomicUsize::new(n),
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
    world.check(Some(n));
    let mut joined = vec![true; n];
    let epochs = Epochs { cpus: p, seed, churn: epochs, steady, ticks: EPOCH, block_one_in: 20 };
    lock_step(
        epochs,
        |k, ticks, mode, r| run_cpu(&world, k, ticks, r, mode),
        |e, phase, r| match phase {
            Phase::Churn => churn(&world, &mut joined, e, r),
            Phase::Settle => {
                // Quiescent: every client joined and runnable.
                let mut parts = Locked(&world.parts);
                for (i, j) in joined.iter_mut().enumerate() {
                    let c = ClientId(i as u32);
                    if !*j {
                        linux::join(&world.sh, &mut parts, c, Weight::new(weight(r)).unwrap(), |_, _| {});
                        *j = true;
                        world.joined.fetch_add(1, Ordering::AcqRel);
                    } else {
                        linux::wake(&world.sh, &mut parts, c);
                    }
                }
            }
            Phase::Steady => {}
        },
        |phase| world.check((phase != Phase::Churn).then_some(n)),
    );
    assert_eq!(world.idle_picks.load(Ordering::Relaxed), 0, "a CPU found nothing to run in the steady phase");
    world.clients.assert_all_served();
    assert!(world.sh.migrations() >= p as u64 - 1, "every idle CPU pulled a task");
}

#[test]
fn cfs_parts_under_one_lock_per_cpu() {
    for seed in 0..4 {
        run::<CfsRq>(4, 16, seed, 20, 10);
    }
}

#[test]
fn eevdf_parts_under_one_lock_per_cpu() {
    for seed in 0..4 {
        run::<EevdfRq>(4, 16, seed, 20, 10);
    }
}
