//! `propshare`: simulate, compare and reproduce proportional-share schedulers.
//!
//! Exit codes: 0 success; 2 bad input (a scenario file, a scheduler name, an
//! option, a scenario or size that would need more than `--max-memory` or
//! `--max-events`); 130 or 143 interrupted by SIGINT or SIGTERM (complete
//! output files kept, partial ones removed); 1 anything else (a scheduler
//! that broke its contract, I/O).

mod bench_cmd;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use propshare::{registry, Weight, MS};
use propshare_sim::engine::{simulate as simulate_one, ClientSpec, SimConfig, SimReport};
use propshare_sim::metrics::{RunMetrics, ServiceMetrics};
use propshare_sim::report::{write_report, write_reproduction};
use propshare_sim::results::ScenarioResult;
use propshare_sim::run::{run_scenario, Progress, RunOptions};
use propshare_sim::scenario::{bytes_label, parse_bytes, Expect, Limits, Scenario, CLIENT_BYTES};

#[global_allocator]
static ALLOC: propshare_sim::alloc::CountingAlloc = propshare_sim::alloc::CountingAlloc;

mod run_cmd;

#[derive(Parser)]
#[command(
    name = "propshare",
    version,
    about = "Proportional-share CPU scheduling on multiprocessors.\n\nWithout a command, runs `reproduce` on its defaults."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario file and print a per-client table; write metrics, traces and plots.
    Simulate(SimArgs),
    /// Run one scenario on several schedulers and write one HTML report with their plots side by side.
    Compare(SimArgs),
    /// Run every scenario under scenarios/papers/ and write report/index.html.
    Reproduce {
        /// Directory of scenario files (searched recursively for *.toml).
        #[arg(long, default_value = "scenarios/papers")]
        scenarios: PathBuf,
        /// Output directory.
        #[arg(long, default_value = "report")]
        out: PathBuf,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Fail (exit 1) when any claim's verdict differs from the one its
        /// scenario pins (`expect`), listing each with its file and line.
        #[arg(long)]
        check: bool,
        #[command(flatten)]
        limits: LimitArgs,
        /// Also write per-client metrics (JSON and CSV; hundreds of MB for
        /// the 8192-client scenarios).
        #[arg(long)]
        per_client: bool,
    },
    /// Run the built-in demo workload and print a per-client table.
    Demo {
        /// Schedulers to run (comma-separated names or specs such as `gdq(delta=8)`).
        #[arg(long, value_parser = spec_list, default_value = "rr,wfq,wfq+readjust")]
        scheduler: SpecList,
        /// Number of CPUs (1..=65536).
        #[arg(long, default_value_t = 2)]
        cpus: usize,
    },
    /// Measure ns per decision and memory per client for every scheduler across N and P.
    Bench {
        /// Schedulers (default: all registered); names or specs such as `gdq(delta=8)`.
        #[arg(long, value_parser = spec_list)]
        scheduler: Option<SpecList>,
        /// Small sizes and few iterations (CI: keeps the code working, asserts nothing).
        #[arg(long)]
        quick: bool,
        /// Every (N, P) combination instead of an N sweep at P = 8 and a P sweep.
        #[arg(long)]
        grid: bool,
        /// Measure exactly these client counts (with --cpus), instead of the built-in sweep.
        #[arg(long, value_delimiter = ',', requires = "cpus")]
        clients: Option<Vec<usize>>,
        /// CPU counts for --clients.
        #[arg(long, value_delimiter = ',')]
        cpus: Option<Vec<usize>>,
        /// Output directory for bench.csv, plots and bench.html.
        #[arg(long, default_value = "report")]
        out: PathBuf,
        /// Less chatter.
        #[arg(long)]
        quiet: bool,
        /// Refuse sizes whose clients would need more memory than this.
        #[arg(long, value_parser = parse_bytes, default_value = "4GiB")]
        max_memory: u64,
    },
    /// Simulator throughput (quanta per second) and memory per client at scale.
    BenchSim {
        /// The scheduler to simulate.
        #[arg(long, default_value = "rr")]
        scheduler: String,
        /// Smaller sizes.
        #[arg(long)]
        quick: bool,
        /// Run only this configuration: N clients (with --cpus and --quanta).
        #[arg(long, requires_all = ["cpus", "quanta"])]
        clients: Option<usize>,
        /// P, for --clients.
        #[arg(long, requires = "clients")]
        cpus: Option<usize>,
        /// Quanta per CPU to simulate, for --clients.
        #[arg(long, requires = "clients")]
        quanta: Option<u64>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Set up a steady workload and run exactly D decisions (for instruction counting under callgrind).
    BenchInsns {
        /// Scheduler.
        #[arg(long)]
        scheduler: String,
        /// N.
        #[arg(long)]
        clients: usize,
        /// P.
        #[arg(long, default_value_t = 1)]
        cpus: usize,
        /// D.
        #[arg(long)]
        decisions: u64,
        /// Refuse a size whose clients would need more memory than this.
        #[arg(long, value_parser = parse_bytes, default_value = "4GiB")]
        max_memory: u64,
    },
    /// List the registered schedulers (and, with --params, their parameters).
    List {
        /// Also list each scheduler's tunable parameters: name, range, default.
        #[arg(long)]
        params: bool,
    },
    /// Schedule real Linux processes by weight (needs root).
    Run(Box<run_cmd::RunArgs>),
}

#[derive(Args)]
struct SimArgs {
    /// The scenario file (TOML; see docs/SCENARIOS.md).
    scenario: PathBuf,
    /// Schedulers to run, comma-separated names or specs such as
    /// `gdq(delta=8,t=40)` (default: the scenario's list; `propshare list --params`).
    #[arg(long, value_parser = spec_list, conflicts_with = "all")]
    scheduler: Option<SpecList>,
    /// Run every registered scheduler.
    #[arg(long)]
    all: bool,
    /// Write no event traces (metrics and plots only).
    #[arg(long)]
    no_traces: bool,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Output directory (default: out/<scenario name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Measure wall-clock ns per decision.
    #[arg(long)]
    cost: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// What a run may cost; a scenario estimated above either is refused before it starts.
#[derive(Args, Clone, Copy)]
struct LimitArgs {
    /// Refuse a run estimated to need more memory than this (e.g. 16GiB).
    #[arg(long, value_parser = parse_bytes, default_value = "4GiB")]
    max_memory: u64,
    /// Refuse a run estimated to handle more simulation events than this.
    #[arg(long, default_value_t = propshare_sim::scenario::DEFAULT_MAX_EVENTS)]
    max_events: u64,
    /// Show progress on stderr even when it is not a terminal (plain lines, every 2 s).
    #[arg(long)]
    progress: bool,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits { memory: self.max_memory, events: self.max_events }
    }
}

/// Refuse `clients` clients (and `cpus` CPUs) whose memory would exceed `max_memory`.
fn check_size(clients: usize, cpus: usize, max_memory: u64) -> Result<(), Failure> {
    let need = (clients as u128 + cpus as u128) * CLIENT_BYTES as u128;
    if need > max_memory as u128 {
        return Err(bad_input(anyhow::anyhow!(
            "{clients} clients on {cpus} CPUs would need about {} of memory ({CLIENT_BYTES} B each), above the limit of {} (--max-memory)",
            bytes_label(u64::try_from(need).unwrap_or(u64::MAX)),
            bytes_label(max_memory)
        )));
    }
    Ok(())
}

/// An error with its exit code.
struct Failure {
    code: i32,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure { code: 1, error: e.into() }
    }
}

fn bad_input(e: impl Into<anyhow::Error>) -> Failure {
    Failure { code: 2, error: e.into() }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        None => reproduce(
            Path::new("scenarios/papers"),
            Path::new("report"),
            false,
            false,
            false,
            LimitArgs {
                max_memory: propshare_sim::scenario::DEFAULT_MAX_MEMORY,
                max_events: propshare_sim::scenario::DEFAULT_MAX_EVENTS,
                progress: false,
            },
        ),
        Some(Command::Reproduce { scenarios, out, quiet, check, per_client, limits }) => {
            reproduce(&scenarios, &out, quiet, check, per_client, limits)
        }
        Some(Command::Simulate(a)) => simulate(a, false),
        Some(Command::Compare(a)) => simulate(a, true),
        Some(Command::Demo { scheduler, cpus }) => demo(&scheduler.0, cpus),
        Some(Command::Run(args)) => run_cmd::main(*args),
        Some(Command::Bench { scheduler, quick, grid, clients, cpus, out, quiet, max_memory }) => (|| {
            let sizes = match (clients, cpus) {
                (Some(ns), Some(ps)) => {
                    let v: Vec<(usize, usize)> = ps.iter().flat_map(|&p| ns.iter().map(move |&n| (n, p))).collect();
                    if v.iter().any(|&(n, p)| p == 0 || n < p.saturating_mul(2)) {
                        return Err(bad_input(anyhow::anyhow!("need --cpus >= 1 and every --clients >= 2 x --cpus")));
                    }
                    for &(n, p) in &v {
                        check_size(n, p, max_memory)?;
                    }
                    Some(v)
                }
                (None, Some(_)) => return Err(bad_input(anyhow::anyhow!("--cpus needs --clients"))),
                _ => None,
            };
            let list = match scheduler.map(|l| l.0) {
                Some(l) => {
                    for s in &l {
                        registry::check(s).map_err(bad_input)?;
                    }
                    l
                }
                None => registry::names().map(String::from).collect(),
            };
            bench_cmd::bench(&list, quick, grid, sizes, &out, quiet).map_err(Failure::from)
        })(),
        Some(Command::BenchSim { scheduler, quick, clients, cpus, quanta, limits }) => {
            let only = clients.zip(cpus).zip(quanta).map(|((n, p), q)| (n, p, q));
            if only.is_some_and(|(n, p, q)| n == 0 || p == 0 || q == 0) {
                Err(bad_input(anyhow::anyhow!("--clients, --cpus and --quanta must be at least 1")))
            } else if let Some(Err(e)) = only.map(|(n, p, q)| {
                check_size(n, p, limits.max_memory)?;
                if (p as u128) * (q as u128) > limits.max_events as u128 {
                    return Err(bad_input(anyhow::anyhow!(
                        "{p} CPUs x {q} quanta is more than {} simulation events (--max-events)",
                        limits.max_events
                    )));
                }
                Ok(())
            }) {
                Err(e)
            } else {
                registry::check(&scheduler)
                    .map_err(bad_input)
                    .and_then(|_| bench_cmd::bench_sim(&scheduler, quick, only).map_err(Failure::from))
            }
        }
        Some(Command::BenchInsns { scheduler, clients, cpus, decisions, max_memory }) => {
            if clients < cpus.saturating_mul(2) || cpus == 0 {
                Err(bad_input(anyhow::anyhow!("need --cpus >= 1 and --clients >= 2 x --cpus")))
            } else if let Err(e) = check_size(clients, cpus, max_memory) {
                Err(e)
            } else {
                registry::check(&scheduler)
                    .map_err(bad_input)
                    .and_then(|_| bench_cmd::bench_insns(&scheduler, clients, cpus, decisions).map_err(Failure::from))
            }
        }
        Some(Command::List { params }) => {
            for e in registry::SCHEDULERS {
                println!("{:<20} {}", e.name, e.summary);
                for p in e.params.iter().filter(|_| params) {
                    let (kind, default) = match p.kind {
                        registry::ParamKind::Int { min, max } => (format!("{min}..={max}"), p.default.to_string()),
                        registry::ParamKind::Bool => ("true|false".to_string(), p.default.to_string()),
                        registry::ParamKind::Choice(names) => (names.join("|"), names[p.default as usize].to_string()),
                    };
                    println!("{:<20}   {}={default} ({kind}): {}", "", p.name, p.doc);
                }
            }
            if params {
                println!("\nGive parameters as NAME(param=value,...), e.g. --scheduler 'gdq(delta=8,t=40)',");
                println!("or in a scenario file as a table: [scheduler.gdq] delta = 8");
            }
            Ok(())
        }
    };
    if let Err(f) = result {
        eprintln!("propshare: error: {:#}", f.error);
        std::process::exit(f.code);
    }
}

/// A comma-separated list of scheduler specs (commas inside a spec's
/// parentheses do not split it).
#[derive(Clone, Debug)]
struct SpecList(Vec<String>);

fn spec_list(s: &str) -> Result<SpecList, String> {
    let list = registry::split_specs(s);
    if list.is_empty() {
        return Err("no scheduler given".into());
    }
    Ok(SpecList(list))
}

/// Progress on stderr: a bar when stderr is a terminal, plain lines every
/// 2 s with `--progress` otherwise, nothing with `--quiet` (or neither).
struct Reporter {
    bar: Option<ProgressBar>,
    plain: bool,
    last: Instant,
    /// Runs finished by earlier scenarios (reproduce), and all runs.
    before: u64,
    total: u64,
}

impl Reporter {
    /// Steps per run: progress within a run, in thousandths.
    const STEPS: u64 = 1000;

    fn new(total: u64, quiet: bool, force: bool) -> Reporter {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let pb = ProgressBar::new(total * Self::STEPS);
            pb.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% {msg}")
                    .expect("valid template"),
            );
            pb
        });
        Reporter { bar, plain: !quiet && !terminal && force, last: Instant::now(), before: 0, total }
    }

    fn update(&mut self, p: Progress, label: &str) {
        let at = (self.before + p.runs_done as u64) * Self::STEPS
            + (p.now as u128 * Self::STEPS as u128 / p.horizon.max(1) as u128) as u64;
        let run = (p.runs_done + 1).min(p.runs);
        let msg = format!(
            "{label} run {run}/{}, {:.1} s of {:.1} s simulated",
            p.runs,
            p.now as f64 / 1e9,
            p.horizon as f64 / 1e9
        );
        if let Some(pb) = &self.bar {
            pb.set_position(at.min(self.total * Self::STEPS));
            pb.set_message(msg);
        } else if self.plain && self.last.elapsed() >= Duration::from_secs(2) {
            self.last = Instant::now();
            eprintln!("propshare: {:>3}% {msg}", at * 100 / (self.total * Self::STEPS).max(1));
        }
    }

    fn finish(&self) {
        if let Some(pb) = &self.bar {
            pb.finish_and_clear();
        }
    }
}

/// The signal (SIGINT or SIGTERM) that asked the run to stop; 0: none.
/// A second one ends the process at once (exit 130), partial files and all.
fn stop_on_signals() -> Arc<AtomicUsize> {
    let got = Arc::new(AtomicUsize::new(0));
    let twice = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees `twice` as it was before this signal.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&twice));
        let _ = signal_hook::flag::register(sig, Arc::clone(&twice));
        let _ = signal_hook::flag::register_usize(sig, Arc::clone(&got), sig as usize);
    }
    got
}

/// A run's error as a failure: exit 128 + the signal when interrupted.
fn run_failure(e: propshare_sim::run::RunError, signal: &AtomicUsize) -> Failure {
    let code = if e.interrupted() { 128 + signal.load(Ordering::Relaxed).max(2) as i32 } else { 1 };
    Failure { code, error: e.into() }
}

fn simulate(a: SimArgs, html: bool) -> Result<(), Failure> {
    let mut scn = Scenario::load(&a.scenario).map_err(bad_input)?;
    if let Some(seed) = a.seed {
        scn.seed = seed;
    }
    let only: Option<Vec<String>> =
        if a.all { Some(registry::names().map(String::from).collect()) } else { a.scheduler.clone().map(|l| l.0) };
    if let Some(list) = &only {
        for s in list {
            registry::check(s).map_err(bad_input)?;
        }
    }
    let count = only.as_ref().map_or(scn.schedulers.len(), Vec::len);
    scn.check_cost(&a.scenario.display().to_string(), count, true, a.limits.limits()).map_err(bad_input)?;
    for w in scn.warnings(only.as_deref()) {
        eprintln!("propshare: warning: {w}");
    }
    let out = a.out.clone().unwrap_or_else(|| Path::new("out").join(&scn.name));
    let opts = RunOptions {
        out: Some(out.clone()),
        traces: !a.no_traces,
        plots: true,
        measure_cost: a.cost,
        per_client: true,
    };
    let total = count * scn.repeat as usize;
    let mut reporter = Reporter::new(total as u64, a.quiet, a.limits.progress);
    let signal = stop_on_signals();
    let result = run_scenario(&scn, only.as_deref(), &opts, &mut |p| {
        reporter.update(p, &scn.name);
        signal.load(Ordering::Relaxed) == 0
    });
    reporter.finish();
    let result = result.map_err(|e| run_failure(e, &signal))?;
    for run in &result.runs {
        print_metrics(run);
    }
    for (name, median, p99) in &result.costs {
        println!("{name}: {median} ns per decision (median), {p99} ns (p99), wall clock");
    }
    print_verdicts(&result);
    if html {
        write_report(&out, &format!("propshare: {}", scn.name), &scn.description, "", std::slice::from_ref(&result))
            .with_context(|| out.join("index.html").display().to_string())?;
        println!("\nreport: {}", out.join("index.html").display());
    } else {
        println!("\noutputs in {}", out.display());
    }
    Ok(())
}

fn reproduce(
    dir: &Path,
    out: &Path,
    quiet: bool,
    check: bool,
    per_client: bool,
    limits: LimitArgs,
) -> Result<(), Failure> {
    let files = propshare_sim::scenario::scenario_files(dir).map_err(|e| {
        bad_input(anyhow::anyhow!("{}: {e} (run from the repository root, or pass --scenarios)", dir.display()))
    })?;
    if files.is_empty() {
        return Err(bad_input(anyhow::anyhow!("no scenario files (*.toml) under {}", dir.display())));
    }
    let scenarios: Vec<Scenario> =
        files.iter().map(|f| Scenario::load(f)).collect::<Result<_, _>>().map_err(bad_input)?;
    for (f, s) in files.iter().zip(&scenarios) {
        s.check_cost(&f.display().to_string(), s.schedulers.len(), true, limits.limits()).map_err(bad_input)?;
    }
    let total: u64 = scenarios.iter().map(|s| (s.schedulers.len() * s.repeat as usize) as u64).sum();
    let mut reporter = Reporter::new(total, quiet, limits.progress);
    let signal = stop_on_signals();
    let mut results: Vec<ScenarioResult> = Vec::new();
    for scn in &scenarios {
        // Each experiment's plots and metrics in a folder of its own.
        let folder = propshare_sim::run::slug(&scn.name);
        let opts =
            RunOptions { out: Some(out.join(&folder)), traces: false, plots: true, measure_cost: true, per_client };
        let r = run_scenario(scn, None, &opts, &mut |p| {
            reporter.update(p, &scn.name);
            signal.load(Ordering::Relaxed) == 0
        });
        let mut r = r.map_err(|e| run_failure(e, &signal))?;
        reporter.before += r.runs.len() as u64;
        for (file, _) in &mut r.plots {
            *file = format!("{folder}/{file}");
        }
        results.push(r);
    }
    reporter.finish();
    let bench_note = if out.join("bench.html").exists() {
        " Decision cost: see bench.html (written by `propshare bench --out` this directory)."
    } else {
        " Decision cost: run `propshare bench` (writes bench.html here)."
    };
    write_reproduction(
        out,
        "Each paper's page runs its scenarios from scenarios/papers/ on the schedulers they name, and compares our figures with the paper's claims. Lag is ideal (exact fluid reference with weight readjustment) minus received service; service error is the papers' own metric for static sets. Each experiment's folder holds its plots and per-run metrics (per-client detail with `propshare reproduce --per-client`).",
        bench_note,
        &results,
    )
    .with_context(|| out.join("index.html").display().to_string())?;
    propshare_sim::output::write_claims(out, &results).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    for r in &results {
        print_verdicts(r);
    }
    println!("report: {} (claims as data: claims.csv, claims.json)", out.join("index.html").display());
    let verdicts: Vec<_> = results.iter().flat_map(|r| &r.verdicts).collect();
    let off: Vec<_> = verdicts.iter().filter(|v| !v.as_pinned()).collect();
    if check {
        for v in &off {
            let c = &v.claim;
            eprintln!(
                "{}: {} {} ({}): pinned {}, got {}: ours {}, claim {}",
                c.at,
                c.scheduler,
                c.metric.name(),
                c.source,
                if c.expect == Expect::Match { "MATCH" } else { "DIFFER" },
                if v.matches { "MATCH" } else { "DIFFER" },
                ours_text(v.ours),
                c.bounds_text()
            );
        }
        if !off.is_empty() {
            return Err(Failure {
                code: 1,
                error: anyhow::anyhow!(
                    "{} of {} claims differ from the verdict their scenario pins (listed above)",
                    off.len(),
                    verdicts.len()
                ),
            });
        }
        println!("check: all {} claims have the verdict their scenario pins", verdicts.len());
    }
    Ok(())
}

fn ours_text(ours: Option<(f64, f64)>) -> String {
    match ours {
        Some((a, b)) if a == b => format!("{a:.3}"),
        Some((a, b)) => format!("{a:.3} to {b:.3}"),
        None => "nothing measured".into(),
    }
}

/// One line per claim: verdict, scenario, scheduler, metric, our figure,
/// the claim's bounds and source; `(expected)` marks a pinned difference.
fn print_verdicts(r: &ScenarioResult) {
    for v in &r.verdicts {
        println!(
            "{} {:<28} {:<14} {:<14} ours {:<24} paper {}  ({}){}",
            if v.matches { "MATCH " } else { "DIFFER" },
            r.scenario.name,
            v.claim.scheduler,
            v.claim.metric.name(),
            ours_text(v.ours),
            v.claim.bounds_text(),
            v.claim.source,
            match (&v.claim.expect, v.as_pinned()) {
                (Expect::Differ { .. }, true) => " (expected)",
                (_, false) => " (NOT AS PINNED)",
                _ => "",
            }
        );
    }
    for c in &r.unjudged {
        eprintln!(
            "warning: {}: claim on {} ({}) not judged: {} was not run (see --scheduler)",
            c.at,
            c.scheduler,
            c.metric.name(),
            c.scheduler
        );
    }
}

fn print_metrics(m: &RunMetrics) {
    println!(
        "\n{} (seed {}): lag {:.2} to {:.2} quanta, idle while waiting {:.2}%",
        m.scheduler,
        m.seed,
        m.min_lag,
        m.max_lag,
        100.0 * m.idle_fraction
    );
    let widths = [12, 10, 9];
    let clients = m.clients.iter().take(40);
    print_shares("client", widths, clients.map(|c| share_row(&c.client, &c.service)));
    if m.clients.len() > 40 {
        println!("... {} more clients in the metrics files", m.clients.len() - 40);
    }
    if !m.groups.is_empty() {
        let groups = m.groups.iter();
        print_shares("group", widths, groups.map(|g| share_row(&g.group, &g.service)));
    }
}

/// A row of a table of shares: name, weight, ideal %, received %, max lag, min lag.
type ShareRow<'a> = (&'a str, u64, f64, f64, f64, f64);

/// A metrics row of [`print_shares`]: client or group `name`'s service.
fn share_row<'a>(name: &'a str, s: &ServiceMetrics) -> ShareRow<'a> {
    (name, s.weight, 100.0 * s.ideal_share, 100.0 * s.share, s.max_lag, s.min_lag)
}

/// A table of shares: a header, `first` naming the rows, then one line per
/// row; `[name, ideal, lag]` the widths of the name, ideal % and lag columns.
fn print_shares<'a>(first: &str, [name, ideal, lag]: [usize; 3], rows: impl Iterator<Item = ShareRow<'a>>) {
    println!(
        "{first:<name$} {:>8} {:>ideal$} {:>12} {:>lag$} {:>lag$}",
        "weight", "ideal %", "received %", "max lag", "min lag"
    );
    for (n, weight, i, r, max, min) in rows {
        println!("{n:<name$} {weight:>8} {i:>ideal$.2} {r:>12.2} {max:>lag$.2} {min:>lag$.2}");
    }
}

/// The built-in workload: five CPU-bound clients, one of them infeasible on 2 CPUs.
fn demo_clients() -> Vec<ClientSpec> {
    [1u64, 1, 2, 4, 12]
        .iter()
        .enumerate()
        .map(|(i, &w)| ClientSpec::cpu_bound(format!("c{i}"), Weight::new(w).expect("positive")))
        .collect()
}

fn demo(schedulers: &[String], cpus: usize) -> Result<(), Failure> {
    for s in schedulers {
        registry::check(s).map_err(bad_input)?;
    }
    if cpus == 0 || cpus > 1 << 16 {
        return Err(bad_input(anyhow::anyhow!("--cpus must be between 1 and 65536, got {cpus}")));
    }
    println!("{cpus} CPUs, quantum 10 ms, 10 s, CPU-bound clients; shares in % of one CPU, lag in quanta");
    for name in schedulers {
        let report = simulate_one(name, SimConfig::new(cpus, 10 * MS, 10_000 * MS), demo_clients())?;
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &SimReport) {
    let q = r.config.quantum as f64;
    let h = r.config.horizon as f64;
    println!("\n{}", r.scheduler);
    let clients = r.clients.iter();
    print_shares(
        "client",
        [8, 12, 10],
        clients.map(|c| {
            (
                c.name.as_str(),
                c.service.weight,
                100.0 * c.service.ideal / h,
                100.0 * c.service.received as f64 / h,
                c.service.max_lag / q,
                c.service.min_lag / q,
            )
        }),
    );
}
