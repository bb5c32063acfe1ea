//! What the threaded test hosts (`*_threaded.rs`) share: a thread body
//! that cannot leave the others waiting at a barrier, and seeded random
//! streams, one per thread.
#![allow(dead_code)] // each host uses its own part of it

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use propshare::ClientId;

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Run `f`; if it panics, say why on the real stderr (the harness captures
/// the panic message, and would lose it) and abort the process: the other
/// threads would wait at the barrier for ever.
pub fn or_abort(f: impl FnOnce()) {
    if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let why = e.downcast_ref::<String>().map(String::as_str).or(e.downcast_ref::<&str>().copied());
        let _ = writeln!(std::io::stderr(), "a thread panicked: {}", why.unwrap_or("?"));
        std::process::abort();
    }
}

/// Random stream `stream` of run `seed`.
pub fn rng(seed: u64, stream: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&stream.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// A number below `n`.
pub fn below(r: &mut TestRng, n: u64) -> u64 {
    r.next_u64() % n
}

/// What the threads of [`lock_step`] do in an epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// CPU threads run while the churn thread sends client events.
    Churn,
    /// Quiescent: the CPU threads wait while the churn thread fixes the set
    /// of clients for the steady phase.
    Settle,
    /// CPU threads run; the churn thread waits.
    Steady,
}

/// The shape of a [`lock_step`] run.
#[derive(Clone, Copy, Debug)]
pub struct Epochs {
    /// CPU threads.
    pub cpus: usize,
    /// The run's seed: CPU k draws from stream k + 1, the churn thread
    /// from stream 0.
    pub seed: u64,
    /// Epochs of churn.
    pub churn: u64,
    /// Steady epochs after the settle epoch (0: no settle epoch either).
    pub steady: u64,
    /// Ticks per epoch.
    pub ticks: u64,
    /// In the churn epochs a CPU thread blocks the client it stops about
    /// once in this many dispatches (0: never; never in the steady ones).
    pub block_one_in: u64,
}

/// How a CPU thread runs an epoch.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    /// Block the client it stops about once in this many dispatches (0: never).
    pub block_one_in: u64,
    /// A steady epoch: count the service.
    pub steady: bool,
}

/// `e.cpus` CPU threads (`cpu(k, ticks, mode, rng)`, in the churn and
/// steady epochs) and one churn thread (`churn(epoch, phase, rng)`) in lock
/// step: `e.churn` epochs of churn, then, if `e.steady > 0`, one settle
/// epoch and the steady ones. After every epoch all threads meet at a
/// barrier (a quiescent point) and one of them runs `check(phase)` before
/// any goes on.
pub fn lock_step(
    e: Epochs,
    cpu: impl Fn(usize, std::ops::Range<u64>, Mode, &mut TestRng) + Sync,
    mut churn: impl FnMut(u64, Phase, &mut TestRng) + Send,
    check: impl Fn(Phase) + Sync,
) {
    let epochs = e.churn + if e.steady > 0 { 1 + e.steady } else { 0 };
    let phase = |i: u64| match i {
        i if i < e.churn => Phase::Churn,
        i if i == e.churn => Phase::Settle,
        _ => Phase::Steady,
    };
    let barrier = std::sync::Barrier::new(e.cpus + 1);
    let meet = |i: u64| {
        if barrier.wait().is_leader() {
            check(phase(i));
        }
        barrier.wait();
    };
    std::thread::scope(|scope| {
        for k in 0..e.cpus {
            let (cpu, meet) = (&cpu, &meet);
            scope.spawn(move || {
                or_abort(|| {
                    let mut r = rng(e.seed, k as u64 + 1);
                    for i in 0..epochs {
                        let ticks = i * e.ticks..(i + 1) * e.ticks;
                        match phase(i) {
                            Phase::Churn => cpu(k, ticks, Mode { block_one_in: e.block_one_in, steady: false }, &mut r),
                            Phase::Settle => {}
                            Phase::Steady => cpu(k, ticks, Mode { block_one_in: 0, steady: true }, &mut r),
                        }
                        meet(i);
                    }
                })
            });
        }
        or_abort(|| {
            let mut r = rng(e.seed, 0);
            for i in 0..epochs {
                churn(i, phase(i), &mut r);
                meet(i);
            }
        })
    });
}

/// Why a CPU thread stops the client it ran `ran` of `slice` ns: blocked
/// about once in `block_one_in` dispatches (0: never), else preempted if
/// it stopped early, else expired.
pub fn stop_reason(r: &mut TestRng, block_one_in: u64, ran: u64, slice: u64) -> propshare::StopReason {
    use propshare::StopReason;
    if block_one_in > 0 && below(r, block_one_in) == 0 {
        StopReason::Blocked
    } else if ran < slice {
        StopReason::Preempted
    } else {
        StopReason::Expired
    }
}

/// The clients as the CPU threads see them: which is on a CPU now (a
/// client picked while it runs elsewhere is the bug these hosts look for)
/// and the service each got in the steady phase.
pub struct Clients {
    on_cpu: Vec<AtomicBool>,
    served: Vec<AtomicU64>,
}

impl Clients {
    /// `n` clients, none running, none served.
    pub fn new(n: usize) -> Clients {
        Clients {
            on_cpu: (0..n).map(|_| AtomicBool::new(false)).collect(),
            served: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// `c` was picked: it must not be on a CPU already.
    pub fn start(&self, c: ClientId) {
        assert!(!self.on_cpu[c.index()].swap(true, Ordering::AcqRel), "{c} is on two CPUs at once");
    }

    /// `c` stops after `ran` ns, service of the steady phase if `steady`.
    pub fn stop(&self, c: ClientId, ran: u64, steady: bool) {
        if steady {
            self.served[c.index()].fetch_add(ran, Ordering::Relaxed);
        }
        self.on_cpu[c.index()].store(false, Ordering::Release);
    }

    /// At a quiescent point: no client is on a CPU.
    pub fn assert_none_running(&self) {
        assert!(self.on_cpu.iter().all(|f| !f.load(Ordering::Acquire)), "a client is on a CPU at a barrier");
    }

    /// Each client's service in the steady phase, in ns.
    pub fn served(&self) -> Vec<u64> {
        self.served.iter().map(|s| s.load(Ordering::Relaxed)).collect()
    }

    /// Every client got some service in the steady phase.
    pub fn assert_all_served(&self) {
        let served = self.served();
        for (i, &s) in served.iter().enumerate() {
            assert!(s > 0, "client {i} was never served in the steady phase (service in ns: {served:?})");
        }
    }
}

/// A CPU thread's virtual clock over `ticks` of `q` ns: `dispatch(clock)`
/// runs one client and returns the ns it ran (`None`: nothing to run; the
/// CPU idles to the tick's end), until the clock reaches each tick's end.
pub fn cpu_clock(clock: &mut u64, ticks: std::ops::Range<u64>, q: u64, mut dispatch: impl FnMut(u64) -> Option<u64>) {
    for tick in ticks {
        let end = (tick + 1) * q;
        while *clock < end {
            match dispatch(*clock) {
                Some(ran) => *clock += ran,
                None => *clock = end,
            }
        }
    }
}
