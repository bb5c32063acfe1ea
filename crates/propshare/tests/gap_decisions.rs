//! Tests for `Gap` decisions that had none (see tests/gaps.rs): each names
//! the decision it checks.

use propshare::readjust::readjust_weights;
use propshare::registry::build;
use propshare::scheduler::{Decision, SchedConfig, Scheduler};
use propshare::{ClientId, CpuId, StopReason, Time, Weight, MS};

fn w(x: u64) -> Weight {
    Weight::new(x).unwrap()
}

fn run_on(s: &mut dyn Scheduler, now: Time, cpu: usize) -> Option<ClientId> {
    match s.pick(now, CpuId(cpu as u32)).unwrap() {
        Decision::Run { client, .. } => Some(client),
        _ => None,
    }
}

/// Both CPUs busy with light clients; a heavy client joins, then a running
/// client blocks and wakes: the scheduler never asks for a preemption.
fn joins_and_wakes_never_kick(name: &str) {
    let mut s = build(name, SchedConfig::new(2, 10 * MS)).unwrap();
    for c in 0..2 {
        assert_eq!(s.join(0, ClientId(c), w(1)).unwrap(), None);
    }
    let a = run_on(&mut *s, 0, 0).unwrap();
    run_on(&mut *s, 0, 1).unwrap();
    assert_eq!(s.join(MS, ClientId(2), w(1000)).unwrap(), None, "{name}: join kicked");
    s.stopped(2 * MS, CpuId(0), a, 2 * MS, StopReason::Blocked).unwrap();
    run_on(&mut *s, 2 * MS, 0).unwrap();
    assert_eq!(s.wake(3 * MS, a).unwrap(), None, "{name}: wake kicked");
    assert_eq!(s.join(3 * MS, ClientId(3), w(1 << 20)).unwrap(), None, "{name}: join kicked");
}

/// Gap SFS-6: no preemption on arrival or wake-up.
#[test]
fn sfs_joins_and_wakes_never_kick() {
    for name in ["sfs", "sfs+heuristic", "sfs+affinity"] {
        joins_and_wakes_never_kick(name);
    }
}

/// Gap DFS-6: no wake-up or join preemption.
#[test]
fn dfs_joins_and_wakes_never_kick() {
    for name in ["dfs", "dfs-fa", "dfs-fa+readjust"] {
        joins_and_wakes_never_kick(name);
    }
}

/// Gap DWRR-15: join and wake return no kick.
#[test]
fn dwrr_joins_and_wakes_never_kick() {
    for name in ["dwrr", "dwrr-cfs"] {
        joins_and_wakes_never_kick(name);
    }
}

/// The decisions of `name` on one CPU for four clients of one group
/// (weights 4..8) over 200 runs of Q/4, with the first stop of client 0
/// reported as `first` after `first_ran`, every other stop as an expiry.
fn decisions_after_first_stop(name: &str, first: StopReason, first_ran: Time) -> Vec<ClientId> {
    let mut s = build(name, SchedConfig::new(1, 10 * MS)).unwrap();
    for c in 0..4u32 {
        s.join(0, ClientId(c), w(4 + c as u64)).unwrap();
    }
    let (mut now, mut out, mut first_done) = (0, Vec::new(), false);
    for _ in 0..200 {
        let c = run_on(&mut *s, now, 0).unwrap();
        out.push(c);
        let (why, ran) = if c == ClientId(0) && !first_done {
            first_done = true;
            (first, first_ran)
        } else {
            (StopReason::Expired, 10 * MS / 4)
        };
        now += ran;
        s.stopped(now, CpuId(0), c, ran, why).unwrap();
    }
    out
}

/// Gap GDQ-19: a preempted stop is charged like an expiry of the same length,
/// so every later decision is the same.
#[test]
fn gdq_preempted_stop_is_charged_like_expiry() {
    let expired = decisions_after_first_stop("gdq", StopReason::Expired, MS);
    assert_eq!(decisions_after_first_stop("gdq", StopReason::Preempted, MS), expired);
    // The charge is what decides: a longer first run changes the sequence.
    assert_ne!(decisions_after_first_stop("gdq", StopReason::Preempted, 10 * MS), expired);
}

/// Gap READJUST-1: with N ≤ P runnable clients, P' = N and every client gets
/// one CPU, whatever the weights: every readjusted φ is the same.
#[test]
fn fewer_clients_than_cpus_each_get_one_cpu() {
    for weights in [vec![1u64, 100], vec![5, 3, 1], vec![7, 7, 2, 1], vec![1 << 30, 1, 1, 1, 1, 1, 1, 1]] {
        for cpus in weights.len()..weights.len() + 3 {
            let phi = readjust_weights(&weights, cpus);
            for p in &phi {
                let (a, b) = (p.num as u128 * phi[0].den as u128, phi[0].num as u128 * p.den as u128);
                assert_eq!(a, b, "weights {weights:?} on {cpus} CPUs: {phi:?}");
            }
        }
    }
    // More clients than CPUs: the weights matter again.
    let phi = readjust_weights(&[1, 100, 1], 2);
    assert_ne!(phi[0].num as u128 * phi[1].den as u128, phi[1].num as u128 * phi[0].den as u128);
}
