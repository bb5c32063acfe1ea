//! What a run recorded, the fluid reference it is measured against, the
//! per-process report, and the JSON Lines trace.
//!
//! # The ideal (fluid reference with readjustment)
//!
//! Between two events (join, leave, block, wake, weight change) the runnable
//! set is fixed. In the fluid model each runnable client i then receives CPU at
//! the constant rate
//!
//! ```text
//!     rate_i = φ_i · P' / Φ        (CPUs; P' = min(P, N), Φ = Σ φ)
//! ```
//!
//! where φ are the weights readjusted by [`propshare::readjust`]: a capped
//! client gets exactly one CPU, an uncapped one `w_i (P' − m) / R`. Ideal
//! service is the integral of the rate, computed by the simulator's fluid
//! reference ([`propshare_sim::fluid::Fluid`], exact to 2^-64 ns), fed the
//! events the host recorded; only the printed figures are rounded. Lag = ideal − received, evaluated at every
//! sample of the client's received CPU time (each run's start and end for our
//! scheduler, every period for the Linux baselines); "max lag" is the largest
//! |lag| over the run.
//!
//! Shares are fractions of the P managed CPUs over the time the client was
//! present (join to leave, or to the end of the run).

use propshare::{ClientId, Time, Weight};
use propshare_sim::engine::TraceEvent;
use propshare_sim::fluid::{ns_of_service, Fluid};
use propshare_sim::output::trace_line;
pub use propshare_sim::output::TraceMeta;
use serde::Serialize;
use std::io::Write;

/// A change of a client's state, as the host saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Joined with this weight.
    Join(u64),
    /// Left.
    Leave,
    /// Blocked.
    Block,
    /// Woke.
    Wake,
    /// New weight.
    Weight(u64),
}

/// One line of the trace, in emission order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A state change of `client` at `t`.
    Change {
        /// When.
        t: Time,
        /// Which client (index into [`Record::names`]).
        client: usize,
        /// What.
        change: Change,
    },
    /// `client` ran on CPU `cpu` (index into the managed CPUs) from `start` to `end`.
    Run {
        /// CPU index.
        cpu: usize,
        /// Client index.
        client: usize,
        /// Start, ns.
        start: Time,
        /// End, ns: start plus the CPU time it used (at most the wall time).
        end: Time,
    },
}

/// Everything a run recorded.
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// Client names, by index.
    pub names: Vec<String>,
    /// Trace entries in emission order.
    pub entries: Vec<Entry>,
    /// Per client: (time, cumulative CPU ns received), time non-decreasing.
    pub samples: Vec<Vec<(Time, u64)>>,
}

impl Record {
    /// A new client; returns its index.
    pub fn add_client(&mut self, name: &str) -> usize {
        self.names.push(name.to_string());
        self.samples.push(Vec::new());
        self.names.len() - 1
    }

    /// Record a change.
    pub fn change(&mut self, t: Time, client: usize, change: Change) {
        self.entries.push(Entry::Change { t, client, change });
    }

    /// Record a run.
    pub fn run(&mut self, cpu: usize, client: usize, start: Time, end: Time) {
        self.entries.push(Entry::Run { cpu, client, start, end });
    }

    /// Record that `client` had received `cum` ns of CPU by time `t`.
    pub fn sample(&mut self, t: Time, client: usize, cum: u64) {
        let s = &mut self.samples[client];
        let cum = s.last().map_or(cum, |&(_, c)| c.max(cum));
        s.push((t, cum));
    }

    /// Write the trace as JSON Lines (see the crate doc for the schema).
    pub fn write_trace(&self, w: &mut dyn Write, meta: &TraceMeta) -> std::io::Result<()> {
        write_meta(w, meta)?;
        self.write_entries(w, 0).map(|_| ())
    }

    /// Write the trace lines of entries `from..` (the meta line excluded);
    /// returns the number of entries written so far (the next `from`).
    /// The lines are the simulator's ([`propshare_sim::output::trace_line`]):
    /// one schema for both.
    pub fn write_entries(&self, w: &mut dyn Write, from: usize) -> std::io::Result<usize> {
        for e in self.entries.iter().skip(from) {
            let ev = match *e {
                Entry::Run { cpu, client, start, end } => {
                    TraceEvent::Run { cpu, client: &self.names[client], start, end }
                }
                Entry::Change { t, client, change } => {
                    let client = &self.names[client];
                    match change {
                        Change::Join(weight) => TraceEvent::Join { t, client, weight },
                        Change::Leave => TraceEvent::Leave { t, client },
                        Change::Block => TraceEvent::Block { t, client },
                        Change::Wake => TraceEvent::Wake { t, client },
                        Change::Weight(weight) => TraceEvent::Weight { t, client, weight },
                    }
                }
            };
            writeln!(w, "{}", trace_line(&ev))?;
        }
        Ok(self.entries.len().max(from))
    }
}

/// Write the trace's meta line (the simulator's).
pub fn write_meta(w: &mut dyn Write, meta: &TraceMeta) -> std::io::Result<()> {
    serde_json::to_writer(&mut *w, meta)?;
    w.write_all(b"\n")
}

/// A trace written as the run goes: created (and its meta line written)
/// before the run starts, then appended whole lines at each [`TraceFile::flush`]
/// with one `write` each, so a run killed at any moment leaves a valid trace
/// of everything up to its last flush.
pub struct TraceFile {
    path: std::path::PathBuf,
    file: std::fs::File,
    written: usize,
}

impl TraceFile {
    /// Create (truncate) `path` and write the meta line; the error names the path.
    pub fn create(path: &std::path::Path, meta: &TraceMeta) -> Result<TraceFile, String> {
        let named = |e: std::io::Error| format!("trace {}: {e}", path.display());
        let mut file = std::fs::File::create(path).map_err(named)?;
        let mut buf = Vec::new();
        write_meta(&mut buf, meta).map_err(named)?;
        file.write_all(&buf).map_err(named)?;
        Ok(TraceFile { path: path.to_path_buf(), file, written: 0 })
    }

    /// Append the entries recorded since the last flush.
    pub fn flush(&mut self, rec: &Record) -> Result<(), String> {
        let mut buf = Vec::new();
        let n = rec.write_entries(&mut buf, self.written).map_err(|e| format!("trace {}: {e}", self.path.display()))?;
        self.file.write_all(&buf).map_err(|e| format!("trace {}: {e}", self.path.display()))?;
        self.written = n;
        Ok(())
    }
}

/// Fairness figures of one client.
#[derive(Clone, Debug, Serialize)]
pub struct ClientMetrics {
    /// Time present (join to leave or end), ns.
    pub present_ns: u64,
    /// Ideal service over that time, ns.
    pub ideal_ns: f64,
    /// CPU time received, ns.
    pub received_ns: u64,
    /// Ideal share of the P CPUs, 0..1.
    pub ideal_share: f64,
    /// Achieved share of the P CPUs, 0..1.
    pub achieved_share: f64,
    /// Largest |ideal − received| at any sample, ns.
    pub max_lag_ns: f64,
    /// Its part of the CPU time all clients received, 0..1.
    pub norm_achieved_share: f64,
    /// Its part of the ideal service of all clients, 0..1.
    pub norm_ideal_share: f64,
    /// Largest |ideal_i/Σideal · Σreceived − received_i| at any sample, ns:
    /// the lag against the fluid division of the CPU time the clients
    /// actually got (insensitive to other load on the machine).
    pub norm_max_lag_ns: f64,
}

/// A recorded weight as the fluid's type (the hosts record weights they
/// validated; 0 cannot reach a record, and would count as 1).
fn weight(w: u64) -> Weight {
    Weight::new(w).unwrap_or(Weight::ONE)
}

/// Compute every client's figures from `rec`, on `cpus` CPUs, for a run that ended at `end`.
pub fn measure(rec: &Record, cpus: usize, end: Time) -> Vec<ClientMetrics> {
    let n = rec.names.len();
    // Set changes in time order.
    let mut changes: Vec<(Time, usize, Change)> = rec
        .entries
        .iter()
        .filter_map(|e| match *e {
            Entry::Change { t, client, change } => Some((t, client, change)),
            Entry::Run { .. } => None,
        })
        .collect();
    changes.sort_by_key(|c| c.0);
    // Query points: every sample of every client, in time order.
    let mut queries: Vec<(Time, usize, u64)> = Vec::new();
    for (i, s) in rec.samples.iter().enumerate() {
        queries.extend(s.iter().map(|&(t, c)| (t, i, c)));
    }
    queries.sort_by_key(|q| q.0);

    // The simulator's fluid reference (exact to 2^-64 ns), fed the same events.
    let mut fluid = Fluid::new(cpus);
    fluid.reserve(n);
    let id = |i: usize| ClientId(i as u32);
    let mut joined: Vec<Option<Time>> = vec![None; n];
    let mut left: Vec<Option<Time>> = vec![None; n];
    // A departed client's ideal service, frozen at its leave.
    let mut final_ideal: Vec<Option<f64>> = vec![None; n];
    let mut max_lag = vec![0f64; n];
    let mut norm_lag = vec![0f64; n];
    // Received CPU of client j at time t, interpolated between its samples.
    let received_at = |j: usize, t: Time| -> f64 {
        let s = &rec.samples[j];
        let k = s.partition_point(|&(ts, _)| ts <= t);
        if k == 0 {
            return 0.0;
        }
        let (t0, c0) = s[k - 1];
        match s.get(k) {
            Some(&(t1, c1)) if t1 > t0 => c0 as f64 + (c1 - c0) as f64 * (t - t0) as f64 / (t1 - t0) as f64,
            _ => c0 as f64,
        }
    };
    let ideal_at = |fluid: &mut Fluid, final_ideal: &[Option<f64>], i: usize, t: Time| -> f64 {
        final_ideal[i].unwrap_or_else(|| ns_of_service(fluid.ideal(t, id(i))))
    };

    let (mut ci, mut qi) = (0, 0);
    loop {
        let next_c = changes.get(ci).map(|c| c.0);
        let next_q = queries.get(qi).map(|q| q.0);
        // Queries at time t see the state just before the changes at t
        // (ideal service is continuous, so it makes no difference).
        match (next_c, next_q) {
            (None, None) => break,
            (Some(tc), Some(tq)) if tq <= tc => {}
            (Some(tc), _) => {
                let (_, c, ch) = changes[ci];
                ci += 1;
                match ch {
                    Change::Join(w) => {
                        if joined[c].is_none() {
                            joined[c] = Some(tc);
                            fluid.join(tc, id(c), weight(w));
                        }
                    }
                    Change::Leave => {
                        if left[c].is_none() && joined[c].is_some() {
                            left[c] = Some(tc);
                            final_ideal[c] = Some(ns_of_service(fluid.leave(tc, id(c))));
                        }
                    }
                    Change::Block => fluid.block(tc, id(c)),
                    Change::Wake => fluid.wake(tc, id(c)),
                    Change::Weight(w) => fluid.set_weight(tc, id(c), weight(w)),
                }
                continue;
            }
            (None, Some(_)) => {}
        }
        let (t, i, cum) = queries[qi];
        qi += 1;
        let mine = ideal_at(&mut fluid, &final_ideal, i, t);
        let lag = mine - cum as f64;
        max_lag[i] = max_lag[i].max(lag.abs());
        let all_ideal: f64 = (0..n).map(|j| ideal_at(&mut fluid, &final_ideal, j, t)).sum();
        if all_ideal > 0.0 {
            let all_received: f64 = (0..n).map(|j| received_at(j, t)).sum();
            let nl = (mine / all_ideal * all_received - cum as f64).abs();
            norm_lag[i] = norm_lag[i].max(nl);
        }
    }
    let last_change = changes.last().map_or(0, |c| c.0);
    let ideal_end: Vec<f64> = (0..n).map(|i| ideal_at(&mut fluid, &final_ideal, i, end.max(last_change))).collect();
    let sum_ideal: f64 = ideal_end.iter().sum();
    let sum_received: f64 = rec.samples.iter().map(|s| s.last().map_or(0, |x| x.1) as f64).sum();
    (0..n)
        .map(|i| {
            let j = joined[i].unwrap_or(0);
            let stop = left[i].unwrap_or(end).max(j);
            let present = stop - j;
            let id = ideal_end[i];
            let received = rec.samples[i].last().map_or(0, |s| s.1);
            let cap = (present as f64) * cpus as f64;
            ClientMetrics {
                present_ns: present,
                ideal_ns: id,
                received_ns: received,
                ideal_share: if cap > 0.0 { id / cap } else { 0.0 },
                achieved_share: if cap > 0.0 { received as f64 / cap } else { 0.0 },
                max_lag_ns: max_lag[i],
                norm_achieved_share: if sum_received > 0.0 { received as f64 / sum_received } else { 0.0 },
                norm_ideal_share: if sum_ideal > 0.0 { ideal_end[i] / sum_ideal } else { 0.0 },
                norm_max_lag_ns: norm_lag[i],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1:2:3 on 2 CPUs is feasible: shares 1/6, 2/6, 3/6 of the machine.
    /// 10:1:1 on 2 CPUs is not: 1/2, 1/4, 1/4.
    #[test]
    fn static_sets() {
        for (ws, want) in
            [(vec![1u64, 2, 3], vec![1.0f64 / 6.0, 2.0 / 6.0, 0.5]), (vec![10, 1, 1], vec![0.5, 0.25, 0.25])]
        {
            let mut r = Record::default();
            for (i, &w) in ws.iter().enumerate() {
                r.add_client(&format!("c{i}"));
                r.change(0, i, Change::Join(w));
                r.sample(0, i, 0);
            }
            // Each received exactly its ideal at the end: lag 0 at both samples.
            for (i, &s) in want.iter().enumerate() {
                r.sample(6_000_000, i, (s * 12_000_000.0f64).round() as u64);
            }
            let m = measure(&r, 2, 6_000_000);
            for (i, &s) in want.iter().enumerate() {
                assert!((m[i].ideal_share - s).abs() < 1e-12, "{ws:?} {i}: {}", m[i].ideal_share);
                assert!((m[i].achieved_share - s).abs() < 1e-6);
                assert!(m[i].max_lag_ns < 1.0);
            }
        }
    }

    /// A client that blocks for half the run: the other gets the whole CPU then.
    #[test]
    fn blocking_changes_the_ideal() {
        let mut r = Record::default();
        r.add_client("a");
        r.add_client("b");
        r.change(0, 0, Change::Join(1));
        r.change(0, 1, Change::Join(1));
        r.change(100, 1, Change::Block);
        r.sample(200, 0, 0); // a got nothing: ideal 50 + 100 = 150
        r.sample(200, 1, 50);
        let m = measure(&r, 1, 200);
        assert!((m[0].ideal_ns - 150.0).abs() < 1e-9);
        assert!((m[1].ideal_ns - 50.0).abs() < 1e-9);
        assert!((m[0].max_lag_ns - 150.0).abs() < 1e-9);
        assert!(m[1].max_lag_ns.abs() < 1e-9);
    }

    /// Other load took half the CPU, but what the clients got was divided 1:3:
    /// large absolute lag, no normalised lag.
    #[test]
    fn normalised_figures_ignore_other_load() {
        let mut r = Record::default();
        for (i, w) in [1u64, 3].into_iter().enumerate() {
            r.add_client(&format!("c{i}"));
            r.change(0, i, Change::Join(w));
            r.sample(0, i, 0);
        }
        r.sample(1000, 0, 125);
        r.sample(1000, 1, 375);
        let m = measure(&r, 1, 1000);
        assert!((m[1].max_lag_ns - 375.0).abs() < 1e-9);
        assert!(m[0].norm_max_lag_ns < 1e-9 && m[1].norm_max_lag_ns < 1e-9);
        assert!((m[1].norm_achieved_share - 0.75).abs() < 1e-12 && (m[1].norm_ideal_share - 0.75).abs() < 1e-12);
        assert!((m[1].achieved_share - 0.375).abs() < 1e-12);
    }

    #[test]
    fn trace_schema() {
        let mut r = Record::default();
        r.add_client("a");
        r.change(0, 0, Change::Join(2));
        r.run(1, 0, 0, 10);
        r.change(10, 0, Change::Weight(3));
        r.change(10, 0, Change::Block);
        r.change(20, 0, Change::Wake);
        r.change(30, 0, Change::Leave);
        let mut out = Vec::new();
        let meta = TraceMeta { ev: "meta", scheduler: "wfq", cpus: 2, quantum_ns: 10, seed: 0, scenario: "s" };
        r.write_trace(&mut out, &meta).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], r#"{"ev":"meta","scheduler":"wfq","cpus":2,"quantum_ns":10,"seed":0,"scenario":"s"}"#);
        assert_eq!(lines[1], r#"{"ev":"join","t":0,"client":"a","weight":2}"#);
        assert_eq!(lines[2], r#"{"ev":"run","cpu":1,"client":"a","start":0,"end":10}"#);
        assert_eq!(lines[3], r#"{"ev":"weight","t":10,"client":"a","weight":3}"#);
        assert_eq!(lines[4], r#"{"ev":"block","t":10,"client":"a"}"#);
        assert_eq!(lines[5], r#"{"ev":"wake","t":20,"client":"a"}"#);
        assert_eq!(lines[6], r#"{"ev":"leave","t":30,"client":"a"}"#);
    }
}
