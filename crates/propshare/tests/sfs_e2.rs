//! The SFS paper's section 4.3 experiment (Fig. 5): frequent arrivals and
//! departures. On 2 CPUs, T1 (weight 20) and 20 clients of weight 1 run
//! throughout; a chain of short weight-5 tasks runs one at a time, each for
//! 300 ms, the next starting when the previous ends. The weights are
//! feasible, so readjustment changes nothing, and the fluid shares of T1,
//! the weight-1 group and the short chain are 20 : 20 : 5 = 4 : 4 : 1. The
//! paper reports SFQ ≈ 1 : 1 : 1 and SFS ≈ 4 : 4 : 1 at a 200 ms quantum.
//!
//! The paper leaves open what moves the result (notes 004 §4.4): whether a
//! short task "runs 300 ms" of CPU time or lives 300 ms of wall-clock time,
//! the quantum, how ties are broken, and whether an arrival preempts. This
//! file sweeps them with a small event-driven host (below) and prints the
//! table with
//! `cargo test -p propshare --test sfs_e2 section_4_3_sweep -- --ignored --nocapture`.

use propshare::algo::sfs::{Sfs, SfsOptions, Tie};
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight, MS};

const CPUS: usize = 2;
const SHORT_LIFE: Time = 300 * MS;
const FIRST_SHORT: u32 = 21;

#[derive(Clone, Copy, PartialEq)]
enum Reading {
    /// Each short task needs 300 ms of CPU time and leaves when it got it.
    CpuTime,
    /// Each short task lives 300 ms of wall-clock time, whatever it got.
    WallClock,
}

struct E2 {
    now: Time,
    reading: Reading,
    /// Per CPU: (client, start, slice end).
    running: [Option<(ClientId, Time, Time)>; CPUS],
    short: ClientId,
    /// CPU time the current short task still needs (CpuTime) ...
    short_left: Time,
    /// ... or when it leaves (WallClock).
    short_until: Time,
    /// Service in ns: T1, the weight-1 group, the short chain.
    service: [u128; 3],
}

fn group(c: ClientId) -> usize {
    match c.0 {
        0 => 0,
        1..=20 => 1,
        _ => 2,
    }
}

impl E2 {
    fn account(&mut self, c: ClientId, ran: Time) {
        self.service[group(c)] += ran as u128;
        if c == self.short {
            self.short_left = self.short_left.saturating_sub(ran);
        }
    }

    fn pick(&mut self, s: &mut dyn Scheduler, k: usize) {
        if let Decision::Run { client, slice } = s.pick(self.now, CpuId(k as u32)).unwrap() {
            let slice = if client == self.short && self.reading == Reading::CpuTime {
                slice.min(self.short_left)
            } else {
                slice
            };
            self.running[k] = Some((client, self.now, self.now + slice));
        }
    }

    /// Stop CPU k's client for `why`, accounting its run.
    fn stop(&mut self, s: &mut dyn Scheduler, k: usize, why: StopReason) {
        let (c, start, _) = self.running[k].take().unwrap();
        s.stopped(self.now, CpuId(k as u32), c, self.now - start, why).unwrap();
        self.account(c, self.now - start);
    }

    /// The next short task arrives; a kick preempts that CPU's client.
    fn next_short(&mut self, s: &mut dyn Scheduler) {
        self.short = ClientId(self.short.0 + 1);
        self.short_left = SHORT_LIFE;
        self.short_until = self.now + SHORT_LIFE;
        if let Some(cpu) = s.join(self.now, self.short, Weight::new(5).unwrap()).unwrap() {
            let k = cpu.index();
            if self.running[k].is_some() {
                self.stop(s, k, StopReason::Preempted);
                self.pick(s, k);
            }
        }
    }
}

/// Run section 4.3 for `horizon` ns; returns the service of T1, the
/// weight-1 group and the short chain, in ns.
fn run_e2(s: &mut dyn Scheduler, reading: Reading, horizon: Time) -> [u128; 3] {
    let mut e = E2 {
        now: 0,
        reading,
        running: [None; CPUS],
        short: ClientId(FIRST_SHORT - 1),
        short_left: 0,
        short_until: 0,
        service: [0; 3],
    };
    s.join(0, ClientId(0), Weight::new(20).unwrap()).unwrap();
    for i in 1..=20 {
        s.join(0, ClientId(i), Weight::ONE).unwrap();
    }
    e.next_short(s);
    for k in 0..CPUS {
        e.pick(s, k);
    }
    loop {
        let cpu_next = e.running.iter().flatten().map(|r| r.2).min().unwrap_or(Time::MAX);
        let short_next = if reading == Reading::WallClock { e.short_until } else { Time::MAX };
        let next = cpu_next.min(short_next);
        if next >= horizon {
            e.now = horizon;
            for r in e.running.iter_mut() {
                if let Some((c, start, _)) = r.take() {
                    e.service[group(c)] += (horizon - start) as u128;
                }
            }
            return e.service;
        }
        e.now = next;
        // Client events first (the wall-clock departure and the next arrival) ...
        if next == short_next {
            let short = e.short;
            match e.running.iter().position(|r| r.is_some_and(|r| r.0 == short)) {
                Some(k) => {
                    e.stop(s, k, StopReason::Left);
                    e.next_short(s);
                    if e.running[k].is_none() {
                        e.pick(s, k);
                    }
                }
                None => {
                    s.leave(e.now, short).unwrap();
                    e.next_short(s);
                }
            }
        }
        // ... then each CPU whose slice ends, in CPU order, picking at once.
        for k in 0..CPUS {
            let Some((c, _, end)) = e.running[k] else { continue };
            if end != e.now {
                continue;
            }
            let done = c == e.short && reading == Reading::CpuTime && {
                let ran = e.now - e.running[k].unwrap().1;
                ran >= e.short_left
            };
            e.stop(s, k, if done { StopReason::Left } else { StopReason::Expired });
            if done {
                e.next_short(s);
            }
            if e.running[k].is_none() {
                e.pick(s, k);
            }
        }
        for k in 0..CPUS {
            if e.running[k].is_none() {
                e.pick(s, k);
            }
        }
    }
}

/// T1 : weight-1 group : short chain, scaled so the chain is 1 (fluid: 4 : 4 : 1).
fn ratios(service: [u128; 3]) -> (f64, f64) {
    let short = service[2].max(1) as f64;
    (service[0] as f64 / short, service[1] as f64 / short)
}

fn sfs(quantum: Time, tie: Tie, preempt: bool) -> Box<dyn Scheduler> {
    Box::new(Sfs::with_options(SchedConfig::new(CPUS, quantum), SfsOptions { tie, preempt, ..SfsOptions::EXACT }))
}

/// What we reproduce and what we do not (figures from
/// `section_4_3_sweep`): with 10 ms quanta and short tasks that need 300 ms
/// of CPU, SFS comes close to the fluid 4 : 4 : 1; at the paper's 200 ms
/// quantum it does not (a new short task enters at v with surplus 0 and
/// gets whole 200 ms quanta, two thirds of its work, at once), in line with
/// the reading notes' own simulation (about 2 : 2 : 1).
#[test]
fn section_4_3_sfs_is_near_fluid_only_with_short_quanta() {
    let horizon = 120_000 * MS;
    let (t1, ones) = ratios(run_e2(&mut *sfs(10 * MS, Tie::StartTag, false), Reading::CpuTime, horizon));
    assert!((3.4..=4.6).contains(&t1) && (3.4..=4.6).contains(&ones), "10 ms: {t1:.2} : {ones:.2} : 1");
    let (t1, ones) = ratios(run_e2(&mut *sfs(200 * MS, Tie::StartTag, false), Reading::CpuTime, horizon));
    assert!(t1 < 3.4 && ones < 3.4, "200 ms: {t1:.2} : {ones:.2} : 1");
    assert!(t1 > 1.3 && ones > 1.3, "200 ms: {t1:.2} : {ones:.2} : 1 (worse than SFQ's reported 1 : 1 : 1?)");
    // The paper's qualitative claim does hold: at 200 ms SFS is much nearer
    // the fluid shares than SFQ (which gives about 1.2 : 1.2 : 1, the paper's
    // "roughly equal").
    match registry::find("sfq") {
        Ok(entry) => {
            let mut sfq = (entry.build)(SchedConfig::new(CPUS, 200 * MS));
            let (q1, qones) = ratios(run_e2(&mut sfq, Reading::CpuTime, horizon));
            assert!(q1 < 1.5 && qones < 1.5, "sfq at 200 ms: {q1:.2} : {qones:.2} : 1");
            assert!(t1 > q1 + 0.4 && ones > qones + 0.4, "sfs {t1:.2} vs sfq {q1:.2}");
        }
        Err(_) => eprintln!("SKIPPED: the SFQ comparison (\"sfq\" is not registered)"),
    }
}

/// The sweep table (120 s simulated per cell). The SFQ rows appear when the
/// build registers `sfq` / `sfq+readjust`.
#[test]
#[ignore]
fn section_4_3_sweep() {
    let horizon = 120_000 * MS;
    eprintln!("section 4.3 on 2 CPUs, 120 s: T1 : weight-1 group : short chain (fluid 4 : 4 : 1)");
    eprintln!("{:<28} {:>9} {:>16} {:>16}", "scheduler", "quantum", "300 ms of CPU", "300 ms of wall");
    let row = |label: &str, q: Time, make: &dyn Fn() -> Box<dyn Scheduler>| {
        let cell = |reading| {
            let (a, b) = ratios(run_e2(&mut *make(), reading, horizon));
            format!("{a:>5.2} : {b:>5.2} : 1")
        };
        eprintln!("{label:<28} {:>7}ms {:>16} {:>16}", q / MS, cell(Reading::CpuTime), cell(Reading::WallClock));
    };
    for q in [200 * MS, 50 * MS, 10 * MS] {
        for (tie, tname) in [(Tie::StartTag, "ties by S, id"), (Tie::ClientId, "ties by id")] {
            for preempt in [false, true] {
                let label = format!("sfs {tname}{}", if preempt { ", preempt" } else { "" });
                row(&label, q, &|| sfs(q, tie, preempt));
            }
        }
        for name in ["wfq+readjust", "sfq", "sfq+readjust"] {
            if registry::find(name).is_ok() {
                row(name, q, &|| registry::build(name, SchedConfig::new(CPUS, q)).unwrap());
            }
        }
    }
}
