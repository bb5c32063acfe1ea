//! Running a scenario: every scheduler, every repeat, metrics, traces,
//! plots, and the verdict on each claim.

use std::path::{Path, PathBuf};

use propshare::registry::BuildError;
use propshare::{SchedConfig, Scheduler, Time};

use crate::engine::{Engine, SimError, TraceEvent};
use crate::metrics::{self, duration_label, window_lag_of, RunMetrics};
use crate::output::{self, TraceMeta, TraceWriter};
use crate::plot::{self, Bar, Scale, Series};
use crate::results::{LagSeries, ScenarioResult};
use crate::scenario::{judge, ClaimMetric, Scenario};

/// What to write besides metrics.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Directory for all outputs (created).
    pub out: Option<PathBuf>,
    /// Write JSON Lines and Perfetto traces (first repeat of each scheduler).
    pub traces: bool,
    /// Draw SVG plots (with `out`), and keep the lag series of the first
    /// repeat in [`ScenarioResult::lag`] (with or without `out`).
    pub plots: bool,
    /// Measure wall-clock cost per decision.
    pub measure_cost: bool,
    /// Write per-client detail (`metrics.json` with every client,
    /// `metrics.csv`, `window_lag.csv`); without it `metrics.json` holds
    /// each run's summary only (`reproduce` without `--per-client`: a
    /// scenario of 8192 clients would write 150 MB).
    pub per_client: bool,
}

/// Where a scenario's runs stand ([`run_scenario`]'s progress callback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Runs finished.
    pub runs_done: usize,
    /// Runs in all (schedulers × repeat).
    pub runs: usize,
    /// Simulated time reached in the run in progress (the horizon once it is done), ns.
    pub now: Time,
    /// The horizon, ns.
    pub horizon: Time,
}

/// Run error: simulation or I/O.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// Writing outputs failed.
    #[error("{path}: {cause}")]
    Io {
        /// File.
        path: String,
        /// Cause (shown in the message, so not an error source: printed once).
        cause: std::io::Error,
    },
    /// Plotting failed.
    #[error("plot {path}: {message}")]
    Plot {
        /// File.
        path: String,
        /// Cause.
        message: String,
    },
    /// The progress callback asked to stop (Ctrl-C).
    #[error("interrupted during run {run} of {runs} ({scheduler}, at {t} ns of simulated time)")]
    Interrupted {
        /// Scheduler of the run in progress.
        scheduler: String,
        /// 1-based number of that run.
        run: usize,
        /// Runs in all.
        runs: usize,
        /// Simulated time it had reached.
        t: Time,
    },
    /// A scenario that stopped part way: why, and the output files that
    /// were complete then (kept). Files being written were removed.
    #[error("{cause}; {}", kept(written))]
    Incomplete {
        /// What stopped it.
        cause: Box<RunError>,
        /// The files written in full before it stopped.
        written: Vec<PathBuf>,
    },
}

impl RunError {
    /// Whether the run was interrupted on request (not a failure of its own).
    pub fn interrupted(&self) -> bool {
        match self {
            RunError::Interrupted { .. } => true,
            RunError::Incomplete { cause, .. } => cause.interrupted(),
            _ => false,
        }
    }
}

fn kept(written: &[PathBuf]) -> String {
    if written.is_empty() {
        return "no output file was complete (partial files removed)".into();
    }
    let list: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    format!("kept {} complete file(s), partial files removed: {}", list.len(), list.join(", "))
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |cause| RunError::Io { path: path.display().to_string(), cause }
}

/// A file or folder name for `s`: letters, digits, `-` and `_` kept, the
/// rest `_` (output files, and `reproduce`'s folder per experiment).
pub fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Run every scheduler of `scn` (or `only`, if given) on every repeat.
/// `progress` is called during runs (about every millisecond of work) and
/// after each; when it returns false the scenario stops with
/// [`RunError::Interrupted`]. With an output directory, any error comes as
/// [`RunError::Incomplete`], listing the complete files kept; a file being
/// written when it stopped is removed.
pub fn run_scenario(
    scn: &Scenario,
    only: Option<&[String]>,
    opts: &RunOptions,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<ScenarioResult, RunError> {
    run_scenario_with(scn, only, opts, &|name, cfg| scn.build_scheduler(name, cfg), progress)
}

/// Builds the scheduler a scenario calls `name` for one run.
pub type BuildScheduler<'a> = dyn Fn(&str, SchedConfig) -> Result<Box<dyn Scheduler>, BuildError> + 'a;

/// [`run_scenario`] with the schedulers built by `build(name, config)`
/// instead of [`Scenario::build_scheduler`] (the claims' mutation test runs
/// deliberately broken schedulers under the names the claims use).
pub fn run_scenario_with(
    scn: &Scenario,
    only: Option<&[String]>,
    opts: &RunOptions,
    build: &BuildScheduler,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<ScenarioResult, RunError> {
    let mut written = Vec::new();
    run_all(scn, only, opts, build, progress, &mut written).map_err(|cause| match opts.out {
        Some(_) => RunError::Incomplete { cause: Box::new(cause), written },
        None => cause,
    })
}

fn run_all(
    scn: &Scenario,
    only: Option<&[String]>,
    opts: &RunOptions,
    build: &BuildScheduler,
    progress: &mut dyn FnMut(Progress) -> bool,
    written: &mut Vec<PathBuf>,
) -> Result<ScenarioResult, RunError> {
    let schedulers: Vec<String> = only.map(|o| o.to_vec()).unwrap_or_else(|| scn.schedulers.clone());
    if let Some(dir) = &opts.out {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let total = schedulers.len() * scn.repeat as usize;
    let mut runs = Vec::new();
    let mut plots = Vec::new();
    let mut costs = Vec::new();
    let mut lag_plot: Vec<(String, Vec<Series>)> = Vec::new();
    let mut lag = Vec::new();
    let mut done = 0;
    let windows = scn.windows();
    for name in &schedulers {
        let mut cost_hist: Option<crate::engine::CostHistogram> = None;
        for k in 0..scn.repeat {
            let cfg = scn.config(k);
            let clients = scn.clients(k);
            let mut names: Vec<String> = clients.iter().map(|c| c.name.clone()).collect();
            let sched = build(name, SchedConfig { cpus: cfg.cpus, quantum: cfg.quantum, seed: cfg.seed })
                .map_err(|e| SimError::Config(e.to_string()))?;
            let mut engine = Engine::new(sched, cfg.clone(), clients)?;
            engine.chains(scn.chains())?;
            if let Some(groups) = scn.groups() {
                engine.groups(&groups, crate::engine::flattening_of(name).0)?;
            }
            let first = k == 0;
            let lag_idx: Vec<usize> = if scn.report.lag_clients.is_empty() {
                (0..names.len().min(8)).collect()
            } else {
                scn.report.lag_clients.iter().filter_map(|n| names.iter().position(|m| m == n)).collect()
            };
            if first && opts.plots {
                let every = scn.report.sample_every.or(Some((cfg.horizon / 200).max(1)));
                engine.sample_lag(&lag_idx, every);
            }
            if opts.measure_cost {
                engine.measure_cost();
            }
            engine.windows(&windows);
            if !scn.report.lag_windows.is_empty() {
                engine.lag_windows(&scn.report.lag_windows);
            }
            if scn.claims.iter().any(|c| c.metric == ClaimMetric::WithinQuantum) {
                let every = scn.report.sample_every.unwrap_or(cfg.quantum);
                engine.lag_band(every, cfg.quantum);
            }
            let window = scn.report.gantt.unwrap_or((0, (cfg.quantum * 40).min(cfg.horizon)));
            let mut bars: Vec<Bar> = Vec::new();
            let mut writer = match (&opts.out, first && opts.traces) {
                (Some(dir), true) => {
                    let base = format!("{}__{}", slug(&scn.name), slug(name));
                    let meta = TraceMeta {
                        ev: "meta",
                        scheduler: name,
                        cpus: cfg.cpus,
                        quantum_ns: cfg.quantum,
                        seed: cfg.seed,
                        scenario: &scn.name,
                    };
                    let j = dir.join(format!("{base}.trace.jsonl"));
                    let p = dir.join(format!("{base}.perfetto.json"));
                    Some((TraceWriter::create(Some(&j), Some(&p), &meta).map_err(io_err(&j))?, [j, p]))
                }
                _ => None,
            };
            let runs_done = done;
            let horizon = cfg.horizon;
            let mut watch = |t: Time| progress(Progress { runs_done, runs: total, now: t, horizon });
            let report = engine.run_watched(
                &mut |e: TraceEvent| {
                    if let Some((w, _)) = writer.as_mut() {
                        let in_window = match scn.report.trace {
                            Some(window) => e.within(window),
                            None => true,
                        };
                        if in_window {
                            w.event(&e);
                        }
                    }
                    if let (true, true, TraceEvent::Run { cpu, client, start, end }) = (first, opts.plots, e) {
                        if end > window.0 && start < window.1 && bars.len() < 20_000 {
                            // Chain members are not in the client list: they get the next index.
                            let client = names.iter().position(|m| m == client).unwrap_or_else(|| {
                                names.push(client.to_string());
                                names.len() - 1
                            });
                            let ms = |t: Time| t as f64 / 1e6;
                            bars.push(Bar { cpu, client, start: ms(start.max(window.0)), end: ms(end.min(window.1)) });
                        }
                    }
                },
                &mut watch,
            );
            let mut report = match report {
                Err(SimError::Interrupted { scheduler, t }) => {
                    return Err(RunError::Interrupted { scheduler, run: done + 1, runs: total, t })
                }
                r => r?,
            };
            if let Some((w, files)) = writer {
                w.finish().map_err(io_err(&files[0]))?;
                written.extend(files);
            }
            if let Some(h) = &report.decision_cost {
                let acc = cost_hist.get_or_insert_with(Default::default);
                acc.merge(h);
            }
            if first && opts.plots {
                if let Some(dir) = &opts.out {
                    let q = cfg.quantum as f64;
                    let series: Vec<Series> = report
                        .clients
                        .iter()
                        .filter(|c| !c.lag_series.is_empty())
                        .map(|c| Series {
                            name: c.name.clone(),
                            points: plot::envelope(
                                &c.lag_series.iter().map(|&(t, l)| (t as f64 / 1e9, l / q)).collect::<Vec<_>>(),
                                1000,
                            ),
                        })
                        .collect();
                    lag_plot.push((name.clone(), series));
                    let file = format!("{}__{}__gantt.svg", slug(&scn.name), slug(name));
                    plot::gantt(
                        &dir.join(&file),
                        &format!("{name}: CPUs over time"),
                        "time (ms)",
                        cfg.cpus,
                        &bars,
                        &names,
                    )
                    .map_err(|e| RunError::Plot { path: file.clone(), message: e.to_string() })?;
                    written.push(dir.join(&file));
                    plots.push((file, format!("{name}: which client ran on each CPU")));
                }
            }
            for c in report.clients.iter_mut().filter(|c| !c.lag_series.is_empty()) {
                let points = std::mem::take(&mut c.lag_series);
                lag.push(LagSeries { scheduler: name.clone(), seed: cfg.seed, client: c.name.clone(), points });
            }
            runs.push(metrics::metrics(&scn.name, &report));
            done += 1;
            if !progress(Progress { runs_done: done, runs: total, now: horizon, horizon }) {
                return Err(RunError::Interrupted { scheduler: name.clone(), run: done, runs: total, t: horizon });
            }
        }
        if let Some(h) = cost_hist {
            costs.push((name.clone(), h.quantile(0.5), h.quantile(0.99)));
        }
    }
    if let (Some(dir), true) = (&opts.out, opts.plots) {
        for (name, series) in &lag_plot {
            let file = format!("{}__{}__lag.svg", slug(&scn.name), slug(name));
            plot::line_chart(
                &dir.join(&file),
                &format!("{name}: lag over time"),
                "time (s)",
                "lag (quanta)",
                series,
                (Scale::Linear, Scale::Linear),
            )
            .map_err(|e| RunError::Plot { path: file.clone(), message: e.to_string() })?;
            written.push(dir.join(&file));
            plots.push((file, format!("{name}: lag (ideal − received) of each client, in quanta")));
        }
        let file = format!("{}__lagdist.svg", slug(&scn.name));
        let dist: Vec<Series> = schedulers
            .iter()
            .map(|s| Series {
                name: s.clone(),
                points: runs
                    .iter()
                    .filter(|r| &r.scheduler == s)
                    .flat_map(|r| r.clients.iter().flat_map(|c| [(c.service.max_lag, 0.0), (c.service.min_lag, 0.0)]))
                    .collect(),
            })
            .collect();
        plot::histogram(&dir.join(&file), "distribution of per-client max and min lag", "lag (quanta)", &dist, 30)
            .map_err(|e| RunError::Plot { path: file.clone(), message: e.to_string() })?;
        written.push(dir.join(&file));
        plots.push((file, "distribution of each client's largest and smallest lag, all schedulers".into()));
        if !scn.report.lag_windows.is_empty() {
            let file = format!("{}__window_lag.svg", slug(&scn.name));
            window_lag_chart(&dir.join(&file), &scn.report.lag_windows, &schedulers, &runs)
                .map_err(|e| RunError::Plot { path: file.clone(), message: e.to_string() })?;
            written.push(dir.join(&file));
            plots.push((
                file,
                "largest |lag| over every client and every window of each length, per scheduler (the DWRR paper's \
                 Fig. 5); above each bar, the largest relative error (window lag / ideal service in the window)"
                    .into(),
            ));
        }
    }
    if let Some(dir) = &opts.out {
        let base = slug(&scn.name);
        let j = dir.join(format!("{base}.metrics.json"));
        if !opts.per_client {
            let summary: Vec<RunMetrics> =
                runs.iter().map(|r| RunMetrics { clients: Vec::new(), ..r.clone() }).collect();
            output::write_metrics_json(&j, &summary).map_err(io_err(&j))?;
            written.push(j);
        } else {
            output::write_metrics_json(&j, &runs).map_err(io_err(&j))?;
            written.push(j);
            let c = dir.join(format!("{base}.metrics.csv"));
            output::write_metrics_csv(&c, &runs).map_err(io_err(&c))?;
            written.push(c);
            if runs.iter().any(|r| !r.groups.is_empty()) {
                let g = dir.join(format!("{base}.groups.csv"));
                output::write_group_metrics_csv(&g, &runs).map_err(io_err(&g))?;
                written.push(g);
            }
        }
        if opts.per_client && !scn.report.lag_windows.is_empty() {
            let w = dir.join(format!("{base}.window_lag.csv"));
            output::write_window_lag_csv(&w, &runs).map_err(io_err(&w))?;
            written.push(w);
        }
    }
    // A claim on a scheduler this run left out (`--scheduler`) is not judged.
    let (judged, unjudged): (Vec<_>, Vec<_>) =
        scn.claims.iter().cloned().partition(|c| schedulers.contains(&c.scheduler));
    let verdicts = judged.iter().map(|c| judge(c, &windows, &runs)).collect();
    Ok(ScenarioResult { scenario: scn.clone(), runs, verdicts, unjudged, plots, costs, lag })
}

/// The grouped bar chart of the DWRR paper's Fig. 5: per window length, one
/// bar per scheduler, its largest |window lag| in ms, the largest relative
/// error written above it.
fn window_lag_chart(path: &Path, lengths: &[Time], schedulers: &[String], runs: &[RunMetrics]) -> plot::PlotResult {
    let groups: Vec<String> = lengths.iter().map(|&t| duration_label(t)).collect();
    let bars: Vec<plot::BarSeries> = schedulers
        .iter()
        .map(|s| {
            let quantum = runs.iter().find(|r| &r.scheduler == s).map_or(0, |r| r.quantum_ns) as f64;
            let (values, labels) = lengths
                .iter()
                .map(|&t| match window_lag_of(runs, s, t) {
                    Some(m) => (
                        Some(m.max_abs_lag() * quantum / 1e6),
                        m.max_rel_error.map(|e| format!("{:.2}%", 100.0 * e)).unwrap_or_default(),
                    ),
                    None => (None, String::new()),
                })
                .unzip();
            plot::BarSeries { name: s.clone(), values, labels }
        })
        .collect();
    // A log axis when the bars span more than a factor 20, so small ones stay visible.
    let values = || bars.iter().flat_map(|b| b.values.iter().flatten()).copied().filter(|&v| v > 0.0);
    let spread = values().fold(0.0, f64::max) / values().fold(f64::INFINITY, f64::min);
    let scale = if spread > 20.0 { Scale::Log } else { Scale::Linear };
    let title = "largest |lag| over windows of each length";
    plot::grouped_bars(path, title, ("window length", "max |lag| (ms)"), &groups, &bars, scale)
}
