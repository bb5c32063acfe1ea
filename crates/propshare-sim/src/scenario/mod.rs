//! Scenario files: a workload, a machine, the schedulers to run, and the
//! claims (a paper's numbers) the run should reproduce. The format is
//! documented field by field in `docs/SCENARIOS.md`.
//!
//! Every error names the file, the line and column, and the field, and no
//! input makes the loader panic: unknown fields, wrong types, zero or
//! negative weights, P = 0, times out of order and unknown scheduler names
//! are all refused with a [`ScenarioError`].
//!
//! Along the data path: `raw` (the file as written), `validate` (to a
//! [`Scenario`]), `draw` (each run's clients), `claims` (what a scenario
//! should reproduce, and the [`judge`] of what a run measured).

mod claims;
mod cost;
mod draw;
mod raw;
mod validate;

use std::path::{Path, PathBuf};

use propshare::registry::{self, BuildError, SchedSpec};
use propshare::{SchedConfig, Scheduler, Time};

use crate::engine::{ChainSpec, ClientSpec, SimConfig};
use draw::{Class, Poisson};

pub use claims::{judge, names_client, Claim, ClaimMetric, Expect, Verdict};
pub use cost::{
    bytes_label, parse_bytes, Cost, CostError, Limits, CLIENT_BYTES, DEFAULT_MAX_EVENTS, DEFAULT_MAX_MEMORY,
    RESULT_BYTES,
};
pub use propshare::parse_duration;
pub use raw::{Dur, WeightDist};
pub use validate::{MAX_GROUPED_CLIENTS, MAX_GROUPS, MAX_WINDOWS};

/// The largest scenario file read (1 MiB; the largest under scenarios/ is
/// a few KiB): [`Scenario::load`] refuses a longer one without reading past it.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;

/// The text of a scenario file, or why it cannot be one.
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let what = |m: &std::fs::Metadata| {
        let t = m.file_type();
        if t.is_dir() {
            "a directory"
        } else if t.is_file() {
            "a file"
        } else {
            "a FIFO, socket or device"
        }
    };
    // Metadata first: opening a FIFO would block until a writer comes.
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(format!("is {}, not a scenario file (a regular TOML file)", what(&meta)));
    }
    if meta.len() > MAX_SCENARIO_BYTES {
        return Err(format!("{} bytes, more than a scenario file may have ({MAX_SCENARIO_BYTES})", meta.len()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_SCENARIO_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(format!("more than {MAX_SCENARIO_BYTES} bytes, more than a scenario file may have"));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text (byte {} is not)", e.utf8_error().valid_up_to()))
}

/// The scenario files (`*.toml`) under `dir` and its subdirectories, in
/// path order.
pub fn scenario_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        let mut entries = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>()?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    Ok(out)
}

/// A scenario that could not be loaded: where and why.
/// Shown as `file:line:column: field: message`; `file: message` when the
/// fault has no place in the text (line 0: the file could not be read).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file}{at}: {field}{sep}{message}",
    at = if *line == 0 { String::new() } else { format!(":{line}:{column}") },
    sep = if field.is_empty() { "" } else { ": " }
)]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// 1-based line (0: no place in the text).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The field at fault (dotted path), if known.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// What the report should plot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportSpec {
    /// Lag sampling grid, ns.
    pub sample_every: Option<Time>,
    /// Clients whose lag is plotted over time (default: the first eight).
    pub lag_clients: Vec<String>,
    /// Window of the per-CPU Gantt chart, ns.
    pub gantt: Option<(Time, Time)>,
    /// Window lengths of the windowed lag metric (DWRR paper, Fig. 5), ns.
    pub lag_windows: Vec<Time>,
    /// Time window `[start, end)` of the event traces, ns (default: the whole run).
    pub trace: Option<(Time, Time)>,
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name (defaults to the file stem).
    pub name: String,
    /// One paragraph.
    pub description: String,
    /// The paper it reproduces, if any.
    pub paper: Option<String>,
    /// Schedulers to run (default: all registered): registry names or specs
    /// such as `gdq(delta=8)`.
    pub schedulers: Vec<String>,
    /// Parameters given in `[scheduler.NAME]` tables, by scheduler name, as
    /// (parameter, value) text; validated against the registry.
    pub scheduler_params: std::collections::BTreeMap<String, Vec<(String, String)>>,
    /// Base seed.
    pub seed: u64,
    /// Runs with seeds `seed..seed + repeat`.
    pub repeat: u32,
    /// The machine (its seed is set per run).
    pub machine: SimConfig,
    clients: Vec<ClientSpec>,
    /// The group of each explicit client, by index into `groups`.
    client_groups: Vec<Option<usize>>,
    /// The moves of each explicit client: (time, group index).
    client_moves: Vec<Vec<(Time, usize)>>,
    /// The `[[group]]` tables, parents before children.
    groups: Vec<crate::engine::GroupSpec>,
    classes: Vec<Class>,
    poisson: Vec<Poisson>,
    chains: Vec<ChainSpec>,
    /// Claims to check.
    pub claims: Vec<Claim>,
    /// Plots.
    pub report: ReportSpec,
}

impl Scenario {
    /// Build the scheduler this scenario calls `name` (a registry name or a
    /// spec), with the parameters of its `[scheduler.NAME]` table if any;
    /// it keeps the name `name`.
    /// A `lazy:` prefix ([`crate::engine::LAZY_PREFIX`]) names the same
    /// scheduler, run under lazy flattening of the groups.
    pub fn build_scheduler(&self, name: &str, cfg: SchedConfig) -> Result<Box<dyn Scheduler>, BuildError> {
        let (_, inner) = crate::engine::flattening_of(name);
        if inner != name {
            let mut spec = registry::parse_spec(inner)?;
            spec.given.extend(self.scheduler_params.get(name).cloned().unwrap_or_default());
            return registry::build_as(name, &spec, cfg);
        }
        match self.scheduler_params.get(name) {
            Some(given) => registry::build_as(name, &SchedSpec { name: name.to_string(), given: given.clone() }, cfg),
            None => registry::build(name, cfg),
        }
    }

    /// What the run will do that the user may not expect, one line each
    /// (not errors). For now: a round slice (DWRR: `w·B/U`) longer than a
    /// tenth of the horizon, for the heaviest weight any client has (arrival
    /// or weight change, first repeat): a weight raised mid-round is paid
    /// from the next round, so it may wait most of the run (issue 16).
    pub fn warnings(&self, only: Option<&[String]>) -> Vec<String> {
        let cfg = self.config(0);
        let sched = SchedConfig { cpus: cfg.cpus, quantum: cfg.quantum, seed: cfg.seed };
        let clients = self.clients(0);
        let heaviest = clients
            .iter()
            .flat_map(|c| std::iter::once(c.weight).chain(c.weight_changes.iter().map(|w| w.1)))
            .chain(self.chains().iter().map(|c| c.weight))
            .map(|w| w.get())
            .max()
            .unwrap_or(1);
        let names = only.unwrap_or(&self.schedulers);
        let mut out = Vec::new();
        for name in names {
            let spec = match self.scheduler_params.get(name) {
                Some(given) => SchedSpec { name: name.clone(), given: given.clone() },
                None => match registry::parse_spec(name) {
                    Ok(spec) => spec,
                    Err(_) => continue,
                },
            };
            if let Ok(Some(round)) = registry::round_slice(&spec, sched, heaviest) {
                if round > cfg.horizon / 10 {
                    out.push(format!(
                        "{name}: the round slice of weight {heaviest} is {} ms, more than a tenth of the {} ms horizon; \
                         a weight raised mid-round waits for the next round (raise `unit` to shorten rounds; docs/ALGORITHMS.md, DWRR)",
                        round / 1_000_000,
                        cfg.horizon / 1_000_000
                    ));
                }
            }
        }
        out
    }

    /// Load and validate a scenario file: a regular file (a FIFO, a device
    /// or a directory is refused before it is opened) of at most
    /// [`MAX_SCENARIO_BYTES`], read through a bounded reader, in UTF-8.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = Scenario::read_text(path)?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        Scenario::parse(&path.display().to_string(), &text, &stem)
    }

    /// The text of a scenario file, read as [`Scenario::load`] reads it
    /// (for hosts that keep the text, as the Python package does to ship a
    /// scenario to other processes).
    pub fn read_text(path: &Path) -> Result<String, ScenarioError> {
        read_bounded(path).map_err(|message| ScenarioError {
            file: path.display().to_string(),
            line: 0,
            column: 0,
            field: String::new(),
            message,
        })
    }

    /// The distinct measurement windows the claims use, in first-use order.
    pub fn windows(&self) -> Vec<(Time, Time)> {
        let mut w: Vec<(Time, Time)> = Vec::new();
        for c in &self.claims {
            if let Some(x) = c.window {
                if !w.contains(&x) {
                    w.push(x);
                }
            }
        }
        w
    }

    /// The chains of clients ([`crate::engine::Engine::chains`]); their
    /// members join at run time, after the clients of [`Scenario::clients`].
    pub fn chains(&self) -> &[ChainSpec] {
        &self.chains
    }

    /// The machine settings for run `k` (seed `seed + k`).
    pub fn config(&self, k: u32) -> SimConfig {
        SimConfig { seed: self.seed.wrapping_add(k as u64), ..self.machine.clone() }
    }
}
