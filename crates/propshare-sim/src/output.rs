//! Outputs of a run: the metrics summary ([`crate::metrics`], as JSON and
//! tidy CSV), the JSON Lines trace, and the Chrome/Perfetto trace. Every
//! file is written to a temporary file beside it ([`Pending`], named
//! `.NAME.XXXXXX.tmp`) and renamed into place once complete, so a reader
//! never sees half a file; a temporary file is removed on every other path
//! (a write error, a full disk, an interrupted run, a panic), since it is
//! deleted when dropped.
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

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::TraceEvent;
use crate::metrics::{RunMetrics, ServiceMetrics};
use crate::results::ScenarioResult;
use crate::scenario::Expect;

/// A file being written: a temporary file in `path`'s directory, moved to
/// `path` by [`Pending::keep`] and deleted if dropped before.
pub struct Pending {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl Pending {
    /// Start writing `path`.
    pub fn new(path: &Path) -> io::Result<Pending> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // Not tempfile's 0600: the finished file is an ordinary output (the umask applies).
            b.permissions(std::fs::Permissions::from_mode(0o666));
        }
        Ok(Pending { tmp: b.tempfile_in(dir)?, path: path.to_path_buf() })
    }

    /// The temporary file's path (for writers that open it by name).
    pub fn tmp_path(&self) -> &Path {
        self.tmp.path()
    }

    /// Flush to disk and move into place.
    pub fn keep(self) -> io::Result<()> {
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Writes go to the file itself: its errors name no temporary path (the
/// caller names the file it was writing).
impl Write for Pending {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.as_file_mut().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.as_file_mut().flush()
    }
}

/// Write `path` atomically ([`Pending`]): complete, or not at all.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut BufWriter<Pending>) -> io::Result<()>) -> io::Result<()> {
    let mut w = BufWriter::new(Pending::new(path)?);
    write(&mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.keep()
}

/// Metrics of several runs as pretty JSON.
pub fn write_metrics_json(path: &Path, runs: &[RunMetrics]) -> io::Result<()> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, runs)?;
        writeln!(w)
    })
}

/// The columns a client's and a group's CSV row start with; `who` names the
/// client or group column.
fn service_header(who: &str) -> String {
    format!("scenario,scheduler,seed,{who},weight,received_ns,ideal_ns,share,ideal_share,max_lag,min_lag")
}

/// Those columns of one row (no line end): the run, the client or group
/// `who`, and its service.
fn write_service_cols(
    w: &mut impl Write,
    scenario: &str,
    scheduler: &str,
    seed: u64,
    who: &str,
    s: &ServiceMetrics,
) -> io::Result<()> {
    write!(
        w,
        "{},{},{},{},{},{},{},{},{},{},{}",
        csv(scenario),
        csv(scheduler),
        seed,
        csv(who),
        s.weight,
        s.received_ns,
        s.ideal_ns,
        s.share,
        s.ideal_share,
        s.max_lag,
        s.min_lag
    )
}

/// Group metrics of several runs as tidy CSV: one row per scheduler, seed and group.
pub fn write_group_metrics_csv(path: &Path, runs: &[RunMetrics]) -> io::Result<()> {
    write_atomic(path, |w| {
        writeln!(w, "{}", service_header("group"))?;
        for r in runs {
            for g in &r.groups {
                write_service_cols(w, &r.scenario, &r.scheduler, r.seed, &g.group, &g.service)?;
                writeln!(w)?;
            }
        }
        Ok(())
    })
}

/// Metrics of several runs as tidy CSV: one row per scheduler, seed and client.
pub fn write_metrics_csv(path: &Path, runs: &[RunMetrics]) -> io::Result<()> {
    write_atomic(path, |w| {
        writeln!(
            w,
            "{},mean_abs_lag,service_error_min,service_error_max,wake_latency_median_ns,wake_latency_p99_ns,\
             wake_latency_max_ns,runs,migrations",
            service_header("client")
        )?;
        let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
        let opt_u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        for r in runs {
            for c in &r.clients {
                write_service_cols(w, &r.scenario, &c.scheduler, c.seed, &c.client, &c.service)?;
                writeln!(
                    w,
                    ",{},{},{},{},{},{},{},{}",
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

/// One claim and its verdict, as a row of `claims.csv` and an object of
/// `claims.json`: bounds and our range are numbers (empty when absent).
#[derive(Serialize)]
pub struct ClaimRow<'a> {
    /// The paper.
    pub paper: &'a str,
    /// Where in the paper.
    pub source: &'a str,
    /// The scenario that reproduces it.
    pub scenario: &'a str,
    /// The scheduler the claim is about.
    pub scheduler: &'a str,
    /// The metric (`docs/SCENARIOS.md`).
    pub metric: &'a str,
    /// The client, group or `first/second` pair it is about (empty: all clients).
    pub clients: String,
    /// Lower bound.
    pub min: Option<f64>,
    /// Upper bound.
    pub max: Option<f64>,
    /// Values our range must reach, `;`-separated.
    pub reach: String,
    /// Our lowest value over clients and runs.
    pub ours_low: Option<f64>,
    /// Our highest value.
    pub ours_high: Option<f64>,
    /// `match` or `differ`.
    pub verdict: &'static str,
    /// The verdict the scenario pins.
    pub expected: &'static str,
    /// Why we differ, for an expected difference.
    pub reason: &'a str,
    /// Which figure or sentence the claim encodes.
    pub note: &'a str,
    /// The claim in its file: `file:line`.
    pub at: &'a str,
}

/// The claims of `results` as rows, in order.
pub fn claim_rows(results: &[ScenarioResult]) -> Vec<ClaimRow<'_>> {
    let word = |m: bool| if m { "match" } else { "differ" };
    results
        .iter()
        .flat_map(|r| r.verdicts.iter().map(move |v| (r, v)))
        .map(|(r, v)| {
            let c = &v.claim;
            ClaimRow {
                paper: &c.paper,
                source: &c.source,
                scenario: &r.scenario.name,
                scheduler: &c.scheduler,
                metric: c.metric.name(),
                clients: c.client.clone().unwrap_or_else(|| c.clients.join("/")),
                min: c.min,
                max: c.max,
                reach: c.reach.iter().map(f64::to_string).collect::<Vec<_>>().join(";"),
                ours_low: v.ours.map(|o| o.0),
                ours_high: v.ours.map(|o| o.1),
                verdict: word(v.matches),
                expected: word(c.expect == Expect::Match),
                reason: match &c.expect {
                    Expect::Differ { reason } => reason,
                    Expect::Match => "",
                },
                note: c.note.as_deref().unwrap_or(""),
                at: &c.at,
            }
        })
        .collect()
}

/// `claims.csv` and `claims.json` in `dir`: every claim of `results`.
pub fn write_claims(dir: &Path, results: &[ScenarioResult]) -> io::Result<()> {
    let rows = claim_rows(results);
    write_atomic(&dir.join("claims.json"), |w| {
        serde_json::to_writer_pretty(&mut *w, &rows)?;
        writeln!(w)
    })?;
    write_atomic(&dir.join("claims.csv"), |w| {
        writeln!(
            w,
            "paper,source,scenario,scheduler,metric,clients,min,max,reach,ours_low,ours_high,verdict,expected,reason,note,at"
        )?;
        let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
        for r in &rows {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                csv(r.paper),
                csv(r.source),
                csv(r.scenario),
                csv(r.scheduler),
                r.metric,
                csv(&r.clients),
                opt(r.min),
                opt(r.max),
                r.reach,
                opt(r.ours_low),
                opt(r.ours_high),
                r.verdict,
                r.expected,
                csv(r.reason),
                csv(r.note),
                csv(r.at)
            )?;
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
/// Both files are [`Pending`] until [`TraceWriter::finish`]: dropped
/// before, they leave nothing behind.
pub struct TraceWriter {
    jsonl: Option<BufWriter<Pending>>,
    perfetto: Option<(BufWriter<Pending>, bool)>,
    error: Option<io::Error>,
}

impl TraceWriter {
    /// Open the files (either may be `None`) and write their headers.
    pub fn create(jsonl: Option<&Path>, perfetto: Option<&Path>, meta: &TraceMeta) -> io::Result<TraceWriter> {
        let mut t = TraceWriter { jsonl: None, perfetto: None, error: None };
        if let Some(p) = jsonl {
            let mut w = BufWriter::new(Pending::new(p)?);
            serde_json::to_writer(&mut w, meta)?;
            writeln!(w)?;
            t.jsonl = Some(w);
        }
        if let Some(p) = perfetto {
            let mut w = BufWriter::new(Pending::new(p)?);
            write!(w, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
            for cpu in 0..meta.cpus {
                write!(
                    w,
                    "{}{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{cpu},\"args\":{{\"name\":\"cpu {cpu}\"}}}}",
                    if cpu == 0 { "" } else { "," }
                )?;
            }
            t.perfetto = Some((w, meta.cpus > 0));
        }
        Ok(t)
    }

    /// Record one event (errors are kept and returned by `finish`).
    pub fn event(&mut self, e: &TraceEvent) {
        if self.error.is_some() {
            return;
        }
        let r = (|| -> io::Result<()> {
            if let Some(w) = &mut self.jsonl {
                writeln!(w, "{}", trace_line(e))?;
            }
            if let (Some((w, comma)), TraceEvent::Run { cpu, client, start, end }) = (&mut self.perfetto, e) {
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

    /// Close the files and move them into place; an unfinished one is
    /// never left behind.
    pub fn finish(self) -> io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let jsonl = self.jsonl.map(|w| w.into_inner().map_err(|e| e.into_error())).transpose()?;
        let perfetto = match self.perfetto {
            Some((mut w, _)) => {
                writeln!(w, "]}}")?;
                Some(w.into_inner().map_err(|e| e.into_error())?)
            }
            None => None,
        };
        for p in [jsonl, perfetto].into_iter().flatten() {
            p.keep()?;
        }
        Ok(())
    }
}

/// ns as a decimal string of µs (the Chrome trace unit), exact.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}
