//! DWRR's per-CPU state split, proved with threads: the global part
//! ([`DwrrShared`]) and one [`CpuPart`] per CPU, each behind its own lock
//! ([`Locked`]), driven by one thread per CPU plus one churn thread.
//!
//! Every CPU thread runs a virtual clock in ticks of the quantum Q: in each
//! tick it picks, "runs" the client for its whole dispatch slice (advancing
//! its own clock) and stops it, until its clock reaches the tick's end (an
//! idle CPU skips to it). The churn thread meanwhile joins, leaves, blocks,
//! wakes and reweighs random clients through the same step functions; CPU
//! threads also stop a client as blocked now and then. Every `EPOCH` ticks
//! all threads meet at a barrier (a quiescent point: no client runs), and
//! one of them checks DWRR's invariants over every part under all the locks.
//!
//! Checked:
//! * no client is ever on two CPUs at once (a per-client atomic "on a CPU"
//!   flag, set after `pick` and cleared before `stopped`);
//! * at every quiescent point, `dwrr::check_invariants` (Invariant 1, loads,
//!   queues, every entry where the owner map says);
//! * after the churn, with a fixed set of runnable clients of feasible
//!   weights, every client's service over the steady phase is within
//!   `3·w_max·B + Q` of its weighted share of all the service given:
//!   Theorem 1's bound (`-3·w_max·B < lag < 2·w_max·B`, B in ns at U = 1)
//!   plus the clock skew between CPU threads at a barrier (one dispatch,
//!   at most Q).

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use propshare::algo::dwrr::{
    self, CpuPart, DwrrOptions, DwrrShared, LocalQueue, Locked, RoundRobinQueue, VruntimeQueue,
};
use propshare::{ClientId, Time, Weight, MS};
use proptest::prelude::*;
use proptest::test_runner::TestRng;

mod threads;
use threads::{below, cpu_clock, lock_step, stop_reason, Clients, Epochs, Mode, Phase};

/// Ticks between quiescent checks.
const EPOCH: u64 = 20;
/// Largest weight (all weights feasible: see `N_PER_CPU`).
const W_MAX: u64 = 4;
/// Clients per CPU: with weights in 1..=W_MAX, the heaviest has at most
/// `W_MAX / (N_PER_CPU·P)·P = W_MAX/N_PER_CPU ≤ 1` CPU's share, so every
/// weight is feasible.
const N_PER_CPU: usize = 4;

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

/// What every thread shares.
struct World<L: LocalQueue> {
    sh: DwrrShared,
    parts: Vec<Mutex<CpuPart<L>>>,
    quantum: Time,
    clients: Clients,
}

impl<L: LocalQueue> World<L> {
    fn check(&self) {
        let guards: Vec<MutexGuard<'_, CpuPart<L>>> = self.parts.iter().map(|m| m.lock().unwrap()).collect();
        if let Err(e) = dwrr::check_invariants(&self.sh, guards.iter().map(|g| &**g)) {
            panic!("invariant broken at a quiescent point: {e}");
        }
        self.clients.assert_none_running();
    }
}

/// CPU `k`'s thread for `ticks`, each dispatch a whole slice.
fn run_cpu<L: LocalQueue>(world: &World<L>, k: usize, ticks: Range<u64>, r: &mut TestRng, mode: Mode) {
    let Mode { block_one_in, steady } = mode;
    let mut parts = Locked(&world.parts);
    cpu_clock(&mut (ticks.start * world.quantum), ticks, world.quantum, |_| {
        let (c, slice) = dwrr::pick(&world.sh, &mut parts, k)?;
        world.clients.start(c);
        let why = stop_reason(r, block_one_in, slice, slice);
        world.clients.stop(c, slice, steady);
        let was = dwrr::stopped(&world.sh, &mut parts, k, slice, why);
        assert_eq!(was, Some(c), "cpu {k} stopped the wrong client");
        Some(slice)
    });
}

/// The churn thread: `ops` random operations on random clients. `joined`
/// is its record of which ids have an entry (only it joins and leaves).
fn churn<L: LocalQueue>(world: &World<L>, joined: &mut [bool], ops: usize, r: &mut TestRng) {
    let mut parts = Locked(&world.parts);
    let (sh, n) = (&world.sh, joined.len() as u64);
    for _ in 0..ops {
        let c = ClientId(below(r, n) as u32);
        let i = c.index();
        match below(r, 6) {
            _ if !joined[i] => {
                dwrr::join(sh, &mut parts, c, w(1 + below(r, W_MAX)));
                joined[i] = true;
            }
            0 => joined[i] = !dwrr::leave(sh, &mut parts, c),
            1 | 2 => {
                dwrr::block(sh, &mut parts, c);
            }
            3 | 4 => {
                dwrr::wake(sh, &mut parts, c);
            }
            _ => assert!(dwrr::set_weight(sh, &mut parts, c, w(1 + below(r, W_MAX)))),
        }
        if below(r, 8) == 0 {
            std::thread::yield_now();
        }
    }
}

/// `cpus` CPU threads and the churn thread for `epochs` epochs, then every
/// client joined and woken, then `steady` epochs with no churn; returns the
/// world and the final weights.
fn run<L: LocalQueue + Send>(cpus: usize, seed: u64, epochs: u64, steady: u64) -> (World<L>, Vec<u64>)
where
    L::Key: Send,
{
    let n = cpus * N_PER_CPU;
    let quantum = MS;
    let opts = DwrrOptions { round_unit: 3 * quantum, weight_unit: 1, carry_overrun: false };
    let world = World::<L> {
        sh: DwrrShared::new(quantum, opts, n),
        parts: (0..cpus).map(|k| Mutex::new(CpuPart::new(k))).collect(),
        quantum,
        clients: Clients::new(n),
    };
    let mut weights = vec![0; n];
    let mut joined = vec![false; n];
    let epochs = Epochs { cpus, seed, churn: epochs, steady, ticks: EPOCH, block_one_in: 50 };
    lock_step(
        epochs,
        |k, ticks, mode, r| run_cpu(&world, k, ticks, r, mode),
        |_, phase, r| match phase {
            Phase::Churn => churn(&world, &mut joined, 40, r),
            Phase::Settle => {
                // Quiescent: fix the set, every client runnable at a known weight.
                let mut parts = Locked(&world.parts);
                for (i, wi) in weights.iter_mut().enumerate() {
                    let c = ClientId(i as u32);
                    *wi = 1 + below(r, W_MAX);
                    if !joined[i] {
                        dwrr::join(&world.sh, &mut parts, c, w(*wi));
                        joined[i] = true;
                    } else {
                        dwrr::wake(&world.sh, &mut parts, c);
                        assert!(dwrr::set_weight(&world.sh, &mut parts, c, w(*wi)));
                    }
                }
            }
            Phase::Steady => {}
        },
        |_| world.check(),
    );
    (world, weights)
}

/// Every client's steady-phase service within `3·w_max·B + Q` of its
/// weighted share of the total.
fn assert_proportional<L: LocalQueue>(world: &World<L>, weights: &[u64]) {
    // Every client has one entry, in the slab of the CPU that owns it.
    let entries: usize = world.parts.iter().map(|m| m.lock().unwrap().entries().len()).sum();
    assert_eq!(entries, weights.len(), "entries in the slabs");
    let served: Vec<u128> = world.clients.served().into_iter().map(u128::from).collect();
    let total: u128 = served.iter().sum();
    let weight: u128 = weights.iter().map(|&x| x as u128).sum();
    let b = world.sh.options().round_unit as u128;
    let bound = 3 * W_MAX as u128 * b + world.quantum as u128;
    assert!(total > 0, "no service in the steady phase");
    for (i, (&got, &wi)) in served.iter().zip(weights).enumerate() {
        let share = total * wi as u128 / weight;
        let off = got.abs_diff(share);
        assert!(
            off <= bound,
            "client {i} (weight {wi}) got {got} ns, its share is {share} ns: off by {off} > {bound} (total {total})"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn threads_drive_cpus_rr(cpus in 2usize..=4, seed in any::<u64>()) {
        let (world, weights) = run::<RoundRobinQueue>(cpus, seed, 10, 10);
        assert_proportional(&world, &weights);
    }

    #[test]
    fn threads_drive_cpus_cfs(cpus in 2usize..=4, seed in any::<u64>()) {
        let (world, weights) = run::<VruntimeQueue>(cpus, seed, 10, 10);
        assert_proportional(&world, &weights);
    }
}

/// A longer stress run (4 CPUs, 300 epochs of churn): more chances for a
/// step to find an entry moved under it, a survey gone stale, or a client
/// picked twice.
#[test]
fn stress_long_churn() {
    for seed in 0..2 {
        let (world, weights) = run::<RoundRobinQueue>(4, seed, 300, 10);
        assert_proportional(&world, &weights);
        let (world, weights) = run::<VruntimeQueue>(4, seed, 300, 10);
        assert_proportional(&world, &weights);
    }
}
