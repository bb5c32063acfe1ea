//! Outputs of a run: the metrics summary (JSON and tidy CSV), the JSON Lines
//! trace, and the Chrome/Perfetto trace. Every file is written to a
//! temporary name and renamed into place, so a reader never sees half a file.
//!
//! The trace schema is fixed (other tools read it); times are integer ns:
//!
//! ```text
//! {"ev":"meta","scheduler":S,"cpus":P,"quantum_ns":Q,"seed":N,"scenario":NAME}
//! {"ev":"join","t":T,"client":ID,"weight":W}   {"ev":"leave","t":T,"client":ID}
//! {"ev":"block","t":T,"client":ID}             {"ev":"wake","t":T,"client":ID}
//! {"ev":"weight","t":T,"client":ID,"weight":W}
//! {"ev":"run","cpu":K,"client":ID,"start":T0,"end":T1}
//! ```

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::{SimReport, TraceEvent, WindowLag};

/// One client's metrics, in the units a reader wants (quanta, shares).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientMetrics {
    /// Scheduler.
    pub scheduler: String,
    /// Seed of the run.
    pub seed: u64,
    /// Client name.
    pub client: String,
    /// Weight at arrival.
    pub weight: u64,
    /// CPU time received, ns.
    pub received_ns: u64,
    /// Ideal (fluid) service, ns.
    pub ideal_ns: f64,
    /// Received time over the horizon, in CPUs.
    pub share: f64,
    /// Ideal service over the horizon, in CPUs.
    pub ideal_share: f64,
    /// Largest lag, quanta.
    pub max_lag: f64,
    /// Smallest lag, quanta.
    pub min_lag: f64,
    /// Mean |lag| over its samples, quanta.
    pub mean_abs_lag: f64,
    /// Smallest service error (static sets), quanta.
    pub service_error_min: Option<f64>,
    /// Largest service error (static sets), quanta.
    pub service_error_max: Option<f64>,
    /// Median wake-up latency, ns.
    pub wake_latency_median_ns: Option<u64>,
    /// 99th percentile wake-up latency, ns.
    pub wake_latency_p99_ns: Option<u64>,
    /// Largest wake-up latency, ns.
    pub wake_latency_max_ns: Option<u64>,
    /// Times started on a CPU.
    pub runs: u64,
    /// Starts on another CPU than the previous one.
    pub migrations: u64,
    /// CPU time inside each of the scenario's measurement windows, ns.
    pub window_received_ns: Vec<u64>,
    /// Fraction of the time (band grid) with |lag| within one quantum, when measured.
    pub within_quantum: Option<f64>,
    /// Lag over fixed windows, per window length, when measured.
    pub window_lag: Vec<WindowLagMetrics>,
}

/// Lag over the windows `[k·t, (k+1)·t)` of one length t (DWRR paper, Fig. 5):
/// of one client, or of every client of a run together.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowLagMetrics {
    /// The window length t, ns.
    pub window_ns: u64,
    /// Windows measured (over all clients, for a run).
    pub windows: u64,
    /// Smallest window lag (ideal − received in the window), quanta.
    pub min_lag: f64,
    /// Largest window lag, quanta.
    pub max_lag: f64,
    /// Largest |window lag| / ideal service in the window.
    pub max_rel_error: Option<f64>,
}

impl WindowLagMetrics {
    fn of(w: &WindowLag, q: f64) -> WindowLagMetrics {
        WindowLagMetrics {
            window_ns: w.length,
            windows: w.windows,
            min_lag: w.min_lag / q,
            max_lag: w.max_lag / q,
            max_rel_error: w.max_rel_error,
        }
    }

    /// The largest |window lag|, quanta (the paper's bar).
    pub fn max_abs_lag(&self) -> f64 {
        self.min_lag.abs().max(self.max_lag.abs())
    }

    /// The extremes over several clients' metrics for window length `window_ns`
    /// (clients with no window left out).
    pub fn over<'a>(window_ns: u64, all: impl Iterator<Item = &'a WindowLagMetrics>) -> WindowLagMetrics {
        let empty = WindowLagMetrics { window_ns, windows: 0, min_lag: 0.0, max_lag: 0.0, max_rel_error: None };
        all.filter(|m| m.windows > 0).fold(empty, |a, m| WindowLagMetrics {
            window_ns,
            windows: a.windows + m.windows,
            min_lag: if a.windows == 0 { m.min_lag } else { a.min_lag.min(m.min_lag) },
            max_lag: if a.windows == 0 { m.max_lag } else { a.max_lag.max(m.max_lag) },
            max_rel_error: match (a.max_rel_error, m.max_rel_error) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => x.or(y),
            },
        })
    }
}

/// A run's metrics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMetrics {
    /// Scenario name.
    pub scenario: String,
    /// Scheduler.
    pub scheduler: String,
    /// Seed.
    pub seed: u64,
    /// P.
    pub cpus: usize,
    /// Quantum, ns.
    pub quantum_ns: u64,
    /// Horizon, ns.
    pub horizon_ns: u64,
    /// Decisions made.
    pub decisions: u64,
    /// Context switches.
    pub context_switches: u64,
    /// Migrations.
    pub migrations: u64,
    /// Busy CPU time over total CPU time.
    pub utilisation: f64,
    /// CPU-ns idle while a runnable client waited.
    pub idle_while_waiting_ns: u64,
    /// The same as a fraction of total CPU time.
    pub idle_fraction: f64,
    /// Largest lag over clients, quanta.
    pub max_lag: f64,
    /// Smallest lag over clients, quanta.
    pub min_lag: f64,
    /// Windowed lag over every client, per window length, when measured.
    pub window_lag: Vec<WindowLagMetrics>,
    /// Per client.
    pub clients: Vec<ClientMetrics>,
}

fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Summarise a report.
pub fn metrics(scenario: &str, r: &SimReport) -> RunMetrics {
    let q = r.config.quantum as f64;
    let h = r.config.horizon as f64;
    let clients: Vec<ClientMetrics> = r
        .clients
        .iter()
        .map(|c| {
            let mut lat = c.wake_latencies.clone();
            lat.sort_unstable();
            ClientMetrics {
                scheduler: r.scheduler.clone(),
                seed: r.config.seed,
                client: c.name.clone(),
                weight: c.weight,
                received_ns: c.received,
                ideal_ns: c.ideal,
                share: c.received as f64 / h,
                ideal_share: c.ideal / h,
                max_lag: c.max_lag / q,
                min_lag: c.min_lag / q,
                mean_abs_lag: c.mean_abs_lag / q,
                service_error_min: c.service_error.map(|e| e.0 / q),
                service_error_max: c.service_error.map(|e| e.1 / q),
                wake_latency_median_ns: percentile(&lat, 0.5),
                wake_latency_p99_ns: percentile(&lat, 0.99),
                wake_latency_max_ns: lat.last().copied(),
                runs: c.runs,
                migrations: c.migrations,
                window_received_ns: c.window_received.clone(),
                within_quantum: c.within_band,
                window_lag: c.window_lags.iter().map(|w| WindowLagMetrics::of(w, q)).collect(),
            }
        })
        .collect();
    let total = h * r.config.cpus as f64;
    RunMetrics {
        scenario: scenario.to_string(),
        scheduler: r.scheduler.clone(),
        seed: r.config.seed,
        cpus: r.config.cpus,
        quantum_ns: r.config.quantum,
        horizon_ns: r.config.horizon,
        decisions: r.decisions,
        context_switches: r.context_switches,
        migrations: r.clients.iter().map(|c| c.migrations).sum(),
        utilisation: r.busy as f64 / total,
        idle_while_waiting_ns: r.idle_while_waiting,
        idle_fraction: r.idle_while_waiting as f64 / total,
        max_lag: clients.iter().map(|c| c.max_lag).fold(f64::NEG_INFINITY, f64::max).max(0.0),
        min_lag: clients.iter().map(|c| c.min_lag).fold(f64::INFINITY, f64::min).min(0.0),
        window_lag: r
            .clients
            .first()
            .map(|c| c.window_lags.iter().map(|w| w.length).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(j, t)| WindowLagMetrics::over(t, clients.iter().map(|c| &c.window_lag[j])))
            .collect(),
        clients,
    }
}

/// Write `path` atomically: into `path.tmp`, then rename.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>) -> io::Result<()> {
    let tmp = tmp_path(path);
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        write(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    match result {
        Ok(()) => std::fs::rename(&tmp, path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Metrics of several runs as pretty JSON.
pub fn write_metrics_json(path: &Path, runs: &[RunMetrics]) -> io::Result<()> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, runs)?;
        writeln!(w)
    })
}

/// Metrics of several runs as tidy CSV: one row per scheduler, seed and client.
pub fn write_metrics_csv(path: &Path, runs: &[RunMetrics]) -> io::Result<()> {
    write_atomic(path, |w| {
        writeln!(
            w,
            "scenario,scheduler,seed,client,weight,received_ns,ideal_ns,share,ideal_share,max_lag,min_lag,mean_abs_lag,\
             service_error_min,service_error_max,wake_latency_median_ns,wake_latency_p99_ns,wake_latency_max_ns,runs,migrations"
        )?;
        let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
        let opt_u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        for r in runs {
            for c in &r.clients {
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    csv(&r.scenario),
                    csv(&c.scheduler),
                    c.seed,
                    csv(&c.client),
                    c.weight,
                    c.received_ns,
                    c.ideal_ns,
                    c.share,
                    c.ideal_share,
                    c.max_lag,
                    c.min_lag,
                    c.mean_abs_lag,
                    opt(c.service_error_min),
                    opt(c.service_error_max),
                    opt_u(c.wake_latency_median_ns),
                    opt_u(c.wake_latency_p99_ns),
                    opt_u(c.wake_latency_max_ns),
                    c.runs,
                    c.migrations
                )?;
            }
        }
        Ok(())
    })
}

/// Windowed lag as tidy CSV: one row per scheduler, seed, client and window length.
pub fn write_window_lag_csv(path: &Path, runs: &[RunMetrics]) -> io::Result<()> {
    write_atomic(path, |w| {
        writeln!(w, "scenario,scheduler,seed,client,window_ns,windows,min_lag,max_lag,max_rel_error")?;
        for r in runs {
            for c in &r.clients {
                for m in &c.window_lag {
                    writeln!(
                        w,
                        "{},{},{},{},{},{},{},{},{}",
                        csv(&r.scenario),
                        csv(&c.scheduler),
                        c.seed,
                        csv(&c.client),
                        m.window_ns,
                        m.windows,
                        m.min_lag,
                        m.max_lag,
                        m.max_rel_error.map(|x| x.to_string()).unwrap_or_default()
                    )?;
                }
            }
        }
        Ok(())
    })
}

fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The trace header line.
#[derive(Serialize)]
pub struct TraceMeta<'a> {
    /// Always "meta".
    pub ev: &'static str,
    /// Scheduler.
    pub scheduler: &'a str,
    /// P.
    pub cpus: usize,
    /// Quantum, ns.
    pub quantum_ns: u64,
    /// Seed.
    pub seed: u64,
    /// Scenario name.
    pub scenario: &'a str,
}

/// One trace line as JSON (the fixed schema above).
pub fn trace_line(e: &TraceEvent) -> String {
    use serde_json::json;
    match *e {
        TraceEvent::Join { t, client, weight } => json!({"ev":"join","t":t,"client":client,"weight":weight}),
        TraceEvent::Leave { t, client } => json!({"ev":"leave","t":t,"client":client}),
        TraceEvent::Block { t, client } => json!({"ev":"block","t":t,"client":client}),
        TraceEvent::Wake { t, client } => json!({"ev":"wake","t":t,"client":client}),
        TraceEvent::Weight { t, client, weight } => json!({"ev":"weight","t":t,"client":client,"weight":weight}),
        TraceEvent::Run { cpu, client, start, end } => {
            json!({"ev":"run","cpu":cpu,"client":client,"start":start,"end":end})
        }
    }
    .to_string()
}

/// Streams trace events to a JSON Lines file and, optionally, a Perfetto
/// (Chrome trace event) JSON file, with the run intervals as complete
/// events ("ph":"X") on one track per CPU.
pub struct TraceWriter {
    jsonl: Option<(PathBuf, BufWriter<File>)>,
    perfetto: Option<(PathBuf, BufWriter<File>, bool)>,
    error: Option<io::Error>,
}

impl TraceWriter {
    /// Open the files (either may be `None`) and write their headers.
    pub fn create(jsonl: Option<&Path>, perfetto: Option<&Path>, meta: &TraceMeta) -> io::Result<TraceWriter> {
        let mut t = TraceWriter { jsonl: None, perfetto: None, error: None };
        if let Some(p) = jsonl {
            let mut w = BufWriter::new(File::create(tmp_path(p))?);
            serde_json::to_writer(&mut w, meta)?;
            writeln!(w)?;
            t.jsonl = Some((p.to_path_buf(), w));
        }
        if let Some(p) = perfetto {
            let mut w = BufWriter::new(File::create(tmp_path(p))?);
            write!(w, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
            for cpu in 0..meta.cpus {
                write!(
                    w,
                    "{}{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{cpu},\"args\":{{\"name\":\"cpu {cpu}\"}}}}",
                    if cpu == 0 { "" } else { "," }
                )?;
            }
            t.perfetto = Some((p.to_path_buf(), w, meta.cpus > 0));
        }
        Ok(t)
    }

    /// Record one event (errors are kept and returned by `finish`).
    pub fn event(&mut self, e: &TraceEvent) {
        if self.error.is_some() {
            return;
        }
        let r = (|| -> io::Result<()> {
            if let Some((_, w)) = &mut self.jsonl {
                writeln!(w, "{}", trace_line(e))?;
            }
            if let (Some((_, w, comma)), TraceEvent::Run { cpu, client, start, end }) = (&mut self.perfetto, e) {
                write!(
                    w,
                    "{}{{\"name\":{},\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{},\"dur\":{}}}",
                    if *comma { "," } else { "" },
                    serde_json::to_string(client)?,
                    cpu,
                    micros(*start),
                    micros(end - start)
                )?;
                *comma = true;
            }
            Ok(())
        })();
        if let Err(err) = r {
            self.error = Some(err);
        }
    }

    /// Close the files and move them into place.
    pub fn finish(self) -> io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if let Some((p, w)) = self.jsonl {
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(tmp_path(&p), &p)?;
        }
        if let Some((p, mut w, _)) = self.perfetto {
            writeln!(w, "]}}")?;
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(tmp_path(&p), &p)?;
        }
        Ok(())
    }
}

/// ns as a decimal string of µs (the Chrome trace unit), exact.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}
