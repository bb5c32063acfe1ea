//! What a scenario will cost, known before it runs: the events the engine
//! will handle and the memory it will hold, so that a scenario that cannot
//! fit is refused before any work with how much it would need
//! ([`Scenario::cost`], checked against [`Limits`] by [`Scenario::check_cost`]).
//!
//! # The estimate
//!
//! Per run (one scheduler, one seed), with P CPUs, quantum Q and horizon H
//! (every division rounds up, every length is at least 1 ns):
//!
//! * **clients** N = explicit clients + class members + Σ over `[[poisson]]`
//!   of (stop − start) / mean_interarrival (the expected arrivals, at most
//!   [`propshare::MAX_CLIENT_ID`]) + Σ over `[[chain]]` of
//!   min(count, (end − start) / stay + 1), where stay is a member's `work`
//!   or `lifetime` (a member stays at least that long) and end is
//!   min(until, H);
//! * **events** E = P · H/Q (a decision per CPU per quantum), plus
//!   3 · stay / (run + sleep) for each client that sleeps, run and sleep
//!   its mean phase lengths (each cycle blocks, wakes and is picked once),
//!   plus 3 · N (arrival, departure, one decision) and the weight changes,
//!   plus N · H/b for the `within_quantum` band grid b (every grid instant
//!   reads every client) and N · H/t for each `lag_windows` length t, plus
//!   k · H/s for the lag plot grid s (first run only);
//! * **lag samples** S = k · (H/s + 2 · H/Q · min(P, N)/N), the k plotted
//!   clients (at most 8 by default) sampled on the grid and at each of
//!   their runs' starts and stops, a client running in at most min(1, P/N)
//!   of the quanta (first run only, when plots are drawn);
//! * **memory** M = N · [`CLIENT_BYTES`] (engine, scheduler, fluid reference
//!   and the client's spec), plus 16 B · S, 8 B per wake-up (wake
//!   latencies), N · (8 B per claim window + 96 B per lag window length),
//!   and R · N · [`RESULT_BYTES`] for the per-client results of all R runs,
//!   which are kept until the metrics files are written.
//!
//! The whole scenario costs R · E events and at most max(M) bytes, with
//! R = schedulers × repeat. A client that sleeps, a flood of arrivals or a
//! chain of very short members can also be slower than E says (a short
//! run phase is a decision on its own); the estimate is an order of
//! magnitude, meant to tell a run that fits from one that cannot.

use std::fmt::Write as _;

use super::draw::Behave;
use super::Scenario;
use crate::engine::{Dist, MemberLeaves};
use crate::scenario::ClaimMetric;

/// Memory per client during a run: the engine's state, the scheduler's,
/// the fluid reference's and the client's spec and name (`propshare
/// bench-sim` measures about 600 B to 1 KB for the first three), rounded up.
pub const CLIENT_BYTES: u64 = 1536;
/// Memory per client and run of the results kept until the metrics are written.
pub const RESULT_BYTES: u64 = 512;
/// Default [`Limits::memory`]: 4 GiB.
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;
/// Default [`Limits::events`]: 10^10 events, a few minutes to an hour of
/// simulation depending on the scheduler.
pub const DEFAULT_MAX_EVENTS: u64 = 10_000_000_000;

/// The most a run may cost (`propshare simulate --max-memory`, `--max-events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of memory.
    pub memory: u64,
    /// Engine events over every run.
    pub events: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { memory: DEFAULT_MAX_MEMORY, events: DEFAULT_MAX_EVENTS }
    }
}

/// The estimate of [`Scenario::cost`] (module docs give the formulas).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cost {
    /// Runs: schedulers × repeat.
    pub runs: u64,
    /// Clients in one run.
    pub clients: u64,
    /// Engine events over every run.
    pub events: u64,
    /// Lag samples of the first run's plotted clients.
    pub samples: u64,
    /// Peak memory, bytes.
    pub memory: u64,
    /// The largest memory term: (field, bytes, what it is).
    memory_term: (String, u64, String),
    /// The largest events term: (field, events per run, what it is).
    events_term: (String, u64, String),
}

/// A scenario that would need more than the [`Limits`] allow.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct CostError {
    /// The scenario file.
    pub file: String,
    /// The field that costs the most.
    pub field: String,
    /// How much it would need, and how to raise the limit.
    pub message: String,
}

/// Bytes in a readable unit.
pub fn bytes_label(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parse a size such as `4GiB`, `512MiB`, `8G` or `1000000` (bytes);
/// units are binary (K = KiB = 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().trim_end_matches("iB").trim_end_matches('B') {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("{s:?}: write a size such as \"4GiB\", \"512MiB\" or a number of bytes")),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{s:?}: write a size such as \"4GiB\", \"512MiB\" or a number of bytes"))
}

/// ⌈a / b⌉ with b at least 1.
fn per(a: u128, b: u128) -> u128 {
    a.div_ceil(b.max(1))
}

fn mean(d: &Dist) -> u128 {
    match *d {
        Dist::Constant(t) | Dist::Exponential(t) => t as u128,
        Dist::Uniform(lo, hi) => (lo as u128 + hi as u128) / 2,
    }
    .max(1)
}

/// Sleep/wake cycles of a client with this behaviour present for `stay` ns.
fn cycles(b: &Behave, stay: u128) -> u128 {
    match b {
        Behave::Cpu => 0,
        Behave::Phases(run, sleep) => per(stay, mean(run) + mean(sleep)),
    }
}

/// Sums the terms of one estimate and remembers the largest.
#[derive(Default)]
struct Terms {
    total: u128,
    largest: (String, u128, String),
}

impl Terms {
    fn add(&mut self, field: &str, v: u128, what: impl FnOnce() -> String) {
        self.total = self.total.saturating_add(v);
        if v > self.largest.1 {
            self.largest = (field.to_string(), v, what());
        }
    }
}

fn clamp(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl Scenario {
    /// The estimated cost of running `schedulers` schedulers on every repeat
    /// (`plots`: the first run of each also records lag series for plots);
    /// the module docs give the formulas. No allocation grows with the
    /// scenario's size.
    pub fn cost(&self, schedulers: usize, plots: bool) -> Cost {
        let m = &self.machine;
        let (p, q, h) = (m.cpus as u128, m.quantum as u128, m.horizon as u128);
        let runs = (schedulers as u128).saturating_mul(self.repeat as u128).max(1);
        let mut clients = Terms::default();
        let mut events = Terms::default();
        let mut memory = Terms::default();
        let mut wakes: u128 = 0;
        events.add("machine.quantum", p.saturating_mul(per(h, q)), || {
            format!("{p} CPUs × {} quanta of {} ns in the horizon", per(h, q), q)
        });
        for (i, c) in self.clients.iter().enumerate() {
            let stay = (c.depart.unwrap_or(m.horizon).min(m.horizon).saturating_sub(c.arrive)) as u128;
            let b = match c.behavior {
                crate::engine::Behavior::CpuBound => Behave::Cpu,
                crate::engine::Behavior::Phases { run, sleep } => Behave::Phases(run, sleep),
            };
            let n = cycles(&b, stay);
            wakes = wakes.saturating_add(n);
            let field = format!("client[{i}].run");
            events.add(&field, n.saturating_mul(3), || format!("{n} run/sleep cycles of {:?}", c.name));
            clients.add(&format!("client[{i}]"), 1, String::new);
            events.add(&format!("client[{i}].weight_changes"), c.weight_changes.len() as u128, String::new);
        }
        for (i, c) in self.classes.iter().enumerate() {
            let n = c.count as u128;
            clients.add(&format!("class[{i}].count"), n, || format!("{n} members of class {:?}", c.prefix));
            let k = n.saturating_mul(cycles(&c.behave, h.saturating_sub(c.arrive as u128)));
            wakes = wakes.saturating_add(k);
            events.add(&format!("class[{i}].run"), k.saturating_mul(3), || {
                format!("{k} run/sleep cycles of the members of class {:?}", c.prefix)
            });
        }
        for (i, pz) in self.poisson.iter().enumerate() {
            let span = (pz.stop.min(m.horizon).saturating_sub(pz.start)) as u128;
            let n = per(span, pz.mean_interarrival as u128).min(propshare::MAX_CLIENT_ID as u128);
            clients.add(&format!("poisson[{i}].mean_interarrival"), n, || {
                format!("about {n} arrivals of {:?} (one per {} ns for {span} ns)", pz.prefix, pz.mean_interarrival)
            });
            let k = n.saturating_mul(cycles(&pz.behave, mean(&pz.lifetime).min(h)));
            wakes = wakes.saturating_add(k);
            events.add(&format!("poisson[{i}].run"), k.saturating_mul(3), || {
                format!("{k} run/sleep cycles of the arrivals {:?}", pz.prefix)
            });
        }
        for (i, c) in self.chains.iter().enumerate() {
            let end = c.until.unwrap_or(m.horizon).min(m.horizon) as u128;
            let (MemberLeaves::AfterWork(stay) | MemberLeaves::AfterLifetime(stay)) = c.leaves;
            let field = match c.leaves {
                MemberLeaves::AfterWork(_) => format!("chain[{i}].work"),
                MemberLeaves::AfterLifetime(_) => format!("chain[{i}].lifetime"),
            };
            let n = (per(end.saturating_sub(c.start as u128), stay as u128) + 1)
                .min(c.count.map_or(u128::MAX, u128::from))
                .min(propshare::MAX_CLIENT_ID as u128);
            clients.add(&field, n, || format!("up to {n} members of chain {:?} (one per {stay} ns)", c.prefix));
        }
        let n = clients.total;
        events.add("client", n.saturating_mul(3), || format!("{n} clients join, leave and are picked"));
        let band = self.claims.iter().any(|c| c.metric == ClaimMetric::WithinQuantum);
        if band {
            let every = self.report.sample_every.unwrap_or(m.quantum) as u128;
            let k = per(h, every);
            events.add("report.sample_every", n.saturating_mul(k), || {
                format!("{k} within_quantum grid instants × {n} clients")
            });
        }
        for (j, &t) in self.report.lag_windows.iter().enumerate() {
            let k = per(h, t as u128);
            events.add(&format!("report.lag_windows[{j}]"), n.saturating_mul(k), || {
                format!("{k} window edges × {n} clients")
            });
        }
        let mut samples = 0u128;
        if plots {
            let plotted =
                if self.report.lag_clients.is_empty() { n.min(8) } else { self.report.lag_clients.len() as u128 };
            let every = self.report.sample_every.unwrap_or((m.horizon / 200).max(1)) as u128;
            let grid = per(h, every);
            // A plotted client runs in at most min(1, P/N) of the quanta.
            let own = per(h, q).saturating_mul(2).saturating_mul(p.min(n.max(1))) / n.max(1);
            samples = plotted.saturating_mul(grid.saturating_add(own));
            events.add("report.sample_every", plotted.saturating_mul(grid), || {
                format!("{grid} lag plot grid instants × {plotted} clients")
            });
            memory.add("report.sample_every", samples.saturating_mul(16), || {
                format!("{plotted} plotted clients × {} lag samples × 16 B", samples / plotted.max(1))
            });
        }
        let (f, k, what) = &clients.largest;
        let field = if f.is_empty() { "client" } else { f.as_str() };
        memory.add(field, n.saturating_mul(CLIENT_BYTES as u128), || {
            let what = if what.is_empty() { format!("{k} clients") } else { what.clone() };
            format!("{n} clients × {CLIENT_BYTES} B, the most from {what}")
        });
        memory.add("client.run", wakes.saturating_mul(8), || format!("{wakes} wake-ups × 8 B of wake latency"));
        let windows = self.windows().len() as u128 * 8 + self.report.lag_windows.len() as u128 * 96 + 16;
        memory.add("report.lag_windows", n.saturating_mul(windows), || {
            format!("{n} clients × {windows} B of window state")
        });
        memory.add("repeat", runs.saturating_mul(n).saturating_mul(RESULT_BYTES as u128), || {
            format!("{runs} runs (schedulers × repeat) × {n} clients × {RESULT_BYTES} B of results")
        });
        let per_run = events.total;
        let (ef, ev, ew) = events.largest;
        Cost {
            runs: clamp(runs),
            clients: clamp(n),
            events: clamp(per_run.saturating_mul(runs)),
            samples: clamp(samples),
            memory: clamp(memory.total),
            memory_term: (memory.largest.0, clamp(memory.largest.1), memory.largest.2),
            events_term: (ef, clamp(ev), ew),
        }
    }

    /// [`Scenario::cost`], refused with a [`CostError`] naming the costliest
    /// field when it exceeds `limits`; `file` names the scenario.
    pub fn check_cost(&self, file: &str, schedulers: usize, plots: bool, limits: Limits) -> Result<Cost, CostError> {
        let cost = self.cost(schedulers, plots);
        if cost.memory > limits.memory {
            let (field, bytes, what) = &cost.memory_term;
            let mut message = format!(
                "this scenario would need about {} of memory, above the limit of {} (--max-memory); the most, {}, is {what}",
                bytes_label(cost.memory),
                bytes_label(limits.memory),
                bytes_label(*bytes)
            );
            let _ = write!(message, " ({} clients, {} runs)", cost.clients, cost.runs);
            return Err(CostError { file: file.to_string(), field: field.clone(), message });
        }
        if cost.events > limits.events {
            let (field, k, what) = &cost.events_term;
            let message = format!(
                "this scenario would take about {} simulation events over {} runs, above the limit of {} (--max-events); \
                 the most, {k} per run, is {what}",
                cost.events, cost.runs, limits.events
            );
            return Err(CostError { file: file.to_string(), field: field.clone(), message });
        }
        Ok(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_bytes("4GiB"), Ok(4 << 30));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("4 parsecs").is_err() && parse_bytes("99999999999999T").is_err());
        assert_eq!(bytes_label(3 << 29), "1.5 GiB");
        assert_eq!(bytes_label(12), "12 B");
    }
}
