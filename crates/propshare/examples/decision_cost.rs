//! Decision cost of every registered scheduler: mean ns per decision (one
//! `pick` plus the `stopped` that follows it) on one CPU with N CPU-bound
//! clients of weights 1..=64, after a warm-up.
//!
//!     cargo run --release -p propshare --example decision_cost -- 1000 1000000
//!
//! Arguments: the values of N (default 1000). A rough first measurement, not
//! a benchmark harness: one run, wall clock, no statistics.

use std::time::Instant;

use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, StopReason, Weight, MS};

fn main() {
    let ns: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let ns = if ns.is_empty() { vec![1000] } else { ns };
    print!("{:<16}", "scheduler");
    for n in &ns {
        print!(" {:>14}", format!("N={n} ns/dec"));
    }
    println!();
    for entry in registry::SCHEDULERS {
        print!("{:<16}", entry.name);
        for &n in &ns {
            print!(" {:>14.0}", cost(entry.name, n));
        }
        println!();
    }
}

fn cost(name: &str, n: u32) -> f64 {
    let q = 10 * MS;
    let mut s = registry::build(name, SchedConfig { cpus: 1, quantum: q, seed: 1 }).expect("registered");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.join(0, ClientId(i), Weight::new(1 + x % 64).expect("positive")).expect("join");
    }
    let mut now = 0;
    let step = |s: &mut Box<dyn propshare::Scheduler>, now: &mut u64| {
        let Decision::Run { client, slice } = s.pick(*now, CpuId(0)).expect("pick") else { panic!("idle") };
        *now += slice;
        s.stopped(*now, CpuId(0), client, slice, StopReason::Expired).expect("stop");
    };
    for _ in 0..20_000 {
        step(&mut s, &mut now);
    }
    let decisions = 200_000;
    let start = Instant::now();
    for _ in 0..decisions {
        step(&mut s, &mut now);
    }
    start.elapsed().as_nanos() as f64 / decisions as f64
}
