//! Scenario files: a workload, a machine, the schedulers to run, and the
//! claims (a paper's numbers) the run should reproduce. The format is
//! documented field by field in `docs/SCENARIOS.md`.
//!
//! Every error names the file, the line and column, and the field, and no
//! input makes the loader panic: unknown fields, wrong types, zero or
//! negative weights, P = 0, times out of order and unknown scheduler names
//! are all refused with a [`ScenarioError`].

use std::ops::Range;
use std::path::Path;

use propshare::{Time, Weight};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use crate::engine::{Behavior, ChainSpec, ClientSpec, Dist, MemberLeaves, SimConfig};

/// The most windows one length of `[report] lag_windows` may cut the horizon
/// into (each window edge costs O(N)).
pub const MAX_WINDOWS: u64 = 100_000;

/// A scenario that could not be loaded: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {field}{sep}{message}", sep = if field.is_empty() { "" } else { ": " })]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The field at fault (dotted path), if known.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// A duration: an integer number of ns, or a string with a unit
/// (`"10ms"`, `"1.5s"`, `"250us"`, `"100ns"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Time);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration: integer ns or a string like \"10ms\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                u64::try_from(v).map(Dur).map_err(|_| E::custom(format!("duration must not be negative, got {v}")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                Ok(Dur(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Parse `"10ms"`, `"1.5s"`, `"250us"`, `"100ns"`, `"2min"` into ns.
pub fn parse_duration(s: &str) -> Result<Time, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "" => return Err(format!("duration {s:?} needs a unit (ns, us, ms, s, min)")),
        u => return Err(format!("unknown time unit {u:?} in {s:?} (use ns, us, ms, s, min)")),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(format!("duration {s:?} has no number"));
    }
    let int: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| format!("bad number in duration {s:?}"))? };
    let mut ns = int.checked_mul(scale).ok_or_else(|| format!("duration {s:?} is too long"))?;
    let mut place = scale;
    for d in frac.chars() {
        let d = d.to_digit(10).ok_or_else(|| format!("bad number in duration {s:?}"))? as u64;
        place /= 10;
        ns += d * place;
    }
    Ok(ns)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    paper: Option<String>,
    schedulers: Option<Vec<Spanned<String>>>,
    seed: Option<u64>,
    repeat: Option<Spanned<u32>>,
    machine: Spanned<RawMachine>,
    #[serde(default, rename = "client")]
    clients: Vec<Spanned<RawClient>>,
    #[serde(default, rename = "class")]
    classes: Vec<Spanned<RawClass>>,
    #[serde(default)]
    poisson: Vec<Spanned<RawPoisson>>,
    #[serde(default, rename = "chain")]
    chains: Vec<Spanned<RawChain>>,
    #[serde(default, rename = "claim")]
    claims: Vec<Spanned<RawClaim>>,
    report: Option<RawReport>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    cpus: Spanned<i64>,
    quantum: Spanned<Dur>,
    horizon: Spanned<Dur>,
    #[serde(default)]
    offsets: Option<Spanned<RawOffsets>>,
    #[serde(default)]
    switch_cost: Option<Dur>,
    #[serde(default)]
    migration_cost: Option<Dur>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawOffsets {
    List(Vec<Dur>),
    Named(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    name: Spanned<String>,
    weight: Spanned<i64>,
    #[serde(default)]
    arrive: Option<Spanned<Dur>>,
    #[serde(default)]
    depart: Option<Spanned<Dur>>,
    #[serde(default)]
    run: Option<RawTimeDist>,
    #[serde(default)]
    sleep: Option<RawTimeDist>,
    #[serde(default)]
    weight_changes: Vec<Spanned<RawWeightChange>>,
    #[serde(default)]
    work: Option<Spanned<Dur>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChain {
    prefix: Spanned<String>,
    weight: Spanned<i64>,
    #[serde(default)]
    work: Option<Spanned<Dur>>,
    #[serde(default)]
    lifetime: Option<Spanned<Dur>>,
    #[serde(default)]
    start: Option<Dur>,
    #[serde(default)]
    count: Option<Spanned<i64>>,
    #[serde(default)]
    until: Option<Spanned<Dur>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeightChange {
    at: Dur,
    weight: Spanned<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawTimeDist {
    Fixed(Dur),
    Dist(RawTimeDistTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, tag = "dist", rename_all = "kebab-case")]
enum RawTimeDistTable {
    Constant { value: Dur },
    Uniform { min: Dur, max: Dur },
    Exponential { mean: Dur },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    prefix: Spanned<String>,
    count: Spanned<i64>,
    weight: Spanned<RawWeightDist>,
    #[serde(default)]
    run: Option<RawTimeDist>,
    #[serde(default)]
    sleep: Option<RawTimeDist>,
    #[serde(default)]
    arrive: Option<Dur>,
}

/// How the weights of a class of clients are drawn.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, tag = "dist", rename_all = "kebab-case")]
pub enum WeightDist {
    /// Every client has this weight.
    Constant {
        /// The weight.
        value: i64,
    },
    /// Uniform integers in `[min, max]`.
    Uniform {
        /// Smallest.
        min: i64,
        /// Largest.
        max: i64,
    },
    /// Log-uniform integers in `[min, max]`.
    LogUniform {
        /// Smallest.
        min: i64,
        /// Largest.
        max: i64,
    },
    /// The first client holds `percent`% of `total`; the rest split the remainder at random (each ≥ 1).
    Heavy {
        /// Share of the heavy client, in percent of the total weight.
        percent: f64,
        /// Total weight of the class.
        total: i64,
    },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawWeightDist {
    Fixed(i64),
    Dist(WeightDist),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPoisson {
    prefix: Spanned<String>,
    mean_interarrival: Spanned<Dur>,
    lifetime: RawTimeDist,
    weight: Spanned<RawWeightDist>,
    #[serde(default)]
    start: Option<Spanned<Dur>>,
    stop: Spanned<Dur>,
    #[serde(default)]
    run: Option<RawTimeDist>,
    #[serde(default)]
    sleep: Option<RawTimeDist>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClaim {
    paper: String,
    source: String,
    scheduler: Spanned<String>,
    metric: Spanned<String>,
    #[serde(default)]
    client: Option<String>,
    #[serde(default)]
    clients: Vec<String>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    window: Option<Spanned<[Dur; 2]>>,
    #[serde(default)]
    window_length: Option<Spanned<Dur>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReport {
    #[serde(default)]
    sample_every: Option<Dur>,
    #[serde(default)]
    lag_clients: Vec<Spanned<String>>,
    #[serde(default)]
    gantt: Option<Spanned<[Dur; 2]>>,
    #[serde(default)]
    lag_windows: Vec<Spanned<Dur>>,
    #[serde(default)]
    trace: Option<Spanned<[Dur; 2]>>,
}

/// A metric a claim is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimMetric {
    /// The papers' service error range over clients (or one client), in quanta.
    ServiceError,
    /// Lag against the fluid reference, range over clients, in quanta.
    Lag,
    /// One client's (or group's) received CPU time over the horizon, in CPUs.
    Share,
    /// `clients[0]`'s received time divided by `clients[1]`'s (clients or groups).
    ShareRatio,
    /// Idle CPU time while clients waited, as a fraction of total CPU time.
    IdleFraction,
    /// Fraction of the time a client's |lag| is at most one quantum (mean over clients).
    WithinQuantum,
    /// Lag over the windows of `[report] lag_windows` (ideal − received in
    /// each window), range over clients and windows, in quanta.
    WindowLag,
    /// The largest |window lag| over clients and windows, in quanta (the DWRR paper's Fig. 5 bar).
    WindowMaxAbsLag,
    /// The largest |window lag| / ideal service in the window.
    WindowRelError,
    /// The largest |window lag| at the longest window length over that at the
    /// shortest: the length ratio if lag grows linearly, about 1 if bounded.
    WindowLagGrowth,
    /// Migrations (starts on another CPU than the client's previous run) per
    /// second of simulated time, over all clients (or of `client`).
    MigrationsPerS,
}

impl ClaimMetric {
    /// The metric names accepted in files.
    pub const NAMES: &'static str = "service_error, lag, share, share_ratio, idle_fraction, within_quantum, \
                                     window_lag, window_max_abs_lag, window_rel_error, window_lag_growth, \
                                     migrations_per_s";

    fn parse(s: &str) -> Option<ClaimMetric> {
        Some(match s {
            "service_error" => ClaimMetric::ServiceError,
            "lag" => ClaimMetric::Lag,
            "share" => ClaimMetric::Share,
            "share_ratio" => ClaimMetric::ShareRatio,
            "idle_fraction" => ClaimMetric::IdleFraction,
            "within_quantum" => ClaimMetric::WithinQuantum,
            "window_lag" => ClaimMetric::WindowLag,
            "window_max_abs_lag" => ClaimMetric::WindowMaxAbsLag,
            "window_rel_error" => ClaimMetric::WindowRelError,
            "window_lag_growth" => ClaimMetric::WindowLagGrowth,
            "migrations_per_s" => ClaimMetric::MigrationsPerS,
            _ => return None,
        })
    }

    /// The name used in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            ClaimMetric::ServiceError => "service_error",
            ClaimMetric::Lag => "lag",
            ClaimMetric::Share => "share",
            ClaimMetric::ShareRatio => "share_ratio",
            ClaimMetric::IdleFraction => "idle_fraction",
            ClaimMetric::WithinQuantum => "within_quantum",
            ClaimMetric::WindowLag => "window_lag",
            ClaimMetric::WindowMaxAbsLag => "window_max_abs_lag",
            ClaimMetric::WindowRelError => "window_rel_error",
            ClaimMetric::WindowLagGrowth => "window_lag_growth",
            ClaimMetric::MigrationsPerS => "migrations_per_s",
        }
    }

    /// Whether the metric is measured over `[report] lag_windows`.
    pub fn windowed(self) -> bool {
        self.takes_window_length() || self == ClaimMetric::WindowLagGrowth
    }

    /// Whether a claim on the metric may name one `window_length`.
    pub fn takes_window_length(self) -> bool {
        matches!(self, ClaimMetric::WindowLag | ClaimMetric::WindowMaxAbsLag | ClaimMetric::WindowRelError)
    }
}

/// Whether a claim's `pattern` names the client `name`: a plain name names
/// that client; a name ending in `*` names every client whose name starts
/// with what precedes the `*` (a group: `"short*"` is every member of a
/// chain or class with prefix `short`).
pub fn names_client(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The client names a scenario can produce: the explicit clients' names,
/// and numbered members `prefix0`, `prefix1`, ... of classes (fixed at
/// load, `count` of them) and of Poisson arrivals and chains (numbered at
/// run time, no known bound).
struct KnownNames {
    explicit: Vec<String>,
    /// Prefix and, for classes, the member count.
    numbered: Vec<(String, Option<usize>)>,
}

impl KnownNames {
    /// Whether `digits` is a member number (decimal, no leading zero) below `count`.
    fn member_number(digits: &str, count: Option<usize>) -> bool {
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        canonical
            && match count {
                None => true,
                Some(n) => digits.parse::<usize>().is_ok_and(|v| v < n),
            }
    }

    /// Whether `name` is a client present from the start (a lag plot can follow it).
    fn is_static(&self, name: &str) -> bool {
        self.explicit.iter().any(|n| n == name)
            || self.numbered.iter().any(|(p, count)| {
                count.is_some() && name.strip_prefix(p.as_str()).is_some_and(|d| Self::member_number(d, *count))
            })
    }

    /// Whether `pattern` ([`names_client`]) can name at least one client.
    fn can_name(&self, pattern: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(group) => {
                self.explicit.iter().any(|n| n.starts_with(group))
                    || self.numbered.iter().any(|(p, count)| {
                        count != &Some(0)
                            && (p.starts_with(group)
                                || group.strip_prefix(p.as_str()).is_some_and(|d| Self::member_number(d, *count)))
                    })
            }
            None => {
                self.explicit.iter().any(|n| n == pattern)
                    || self.numbered.iter().any(|(p, count)| {
                        pattern.strip_prefix(p.as_str()).is_some_and(|d| Self::member_number(d, *count))
                    })
            }
        }
    }
}

/// A paper's claim that a scenario reproduces.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The paper.
    pub paper: String,
    /// Where in the paper (section, figure, table).
    pub source: String,
    /// The scheduler it is about.
    pub scheduler: String,
    /// The metric.
    pub metric: ClaimMetric,
    /// The client it is about (`None`: all clients), or a group of clients
    /// ([`names_client`]).
    pub client: Option<String>,
    /// Two clients or groups, for ratios.
    pub clients: Vec<String>,
    /// Expected lower end.
    pub min: Option<f64>,
    /// Expected upper end.
    pub max: Option<f64>,
    /// Why we differ, if we know.
    pub note: Option<String>,
    /// For share and share_ratio: measure only inside `[start, end)`, ns.
    pub window: Option<(Time, Time)>,
    /// For the window metrics: only windows of this length, ns (`None`: every length).
    pub window_length: Option<Time>,
}

#[derive(Clone, Debug, PartialEq)]
enum Behave {
    Cpu,
    Phases(Dist, Dist),
}

impl Behave {
    fn behavior(&self) -> Behavior {
        match *self {
            Behave::Cpu => Behavior::CpuBound,
            Behave::Phases(run, sleep) => Behavior::Phases { run, sleep },
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Class {
    prefix: String,
    count: usize,
    weight: WeightDist,
    behave: Behave,
    arrive: Time,
}

#[derive(Clone, Debug, PartialEq)]
struct Poisson {
    prefix: String,
    mean_interarrival: Time,
    lifetime: Dist,
    weight: WeightDist,
    start: Time,
    stop: Time,
    behave: Behave,
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
    /// Schedulers to run (default: all registered).
    pub schedulers: Vec<String>,
    /// Base seed.
    pub seed: u64,
    /// Runs with seeds `seed..seed + repeat`.
    pub repeat: u32,
    /// The machine (its seed is set per run).
    pub machine: SimConfig,
    clients: Vec<ClientSpec>,
    classes: Vec<Class>,
    poisson: Vec<Poisson>,
    chains: Vec<ChainSpec>,
    /// Claims to check.
    pub claims: Vec<Claim>,
    /// Plots.
    pub report: ReportSpec,
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ScenarioError {
        let upto = &self.text[..span.start.min(self.text.len())];
        let line = upto.matches('\n').count() + 1;
        let column = upto.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ScenarioError { file: self.file.to_string(), line, column, field: field.to_string(), message: message.into() }
    }

    fn weight(&self, v: &Spanned<i64>, field: &str) -> Result<Weight, ScenarioError> {
        let w = *v.get_ref();
        if w <= 0 {
            return Err(self.err(v.span(), field, format!("weight must be a positive integer, got {w}")));
        }
        Weight::new(w as u64).map_err(|e| self.err(v.span(), field, e.to_string()))
    }

    fn weight_dist(&self, v: &Spanned<RawWeightDist>, field: &str, count: usize) -> Result<WeightDist, ScenarioError> {
        let bad = |m: String| self.err(v.span(), field, m);
        let ok = |w: i64| w > 0 && (w as u64) <= Weight::MAX;
        let d = match v.get_ref() {
            RawWeightDist::Fixed(w) => WeightDist::Constant { value: *w },
            RawWeightDist::Dist(d) => d.clone(),
        };
        match &d {
            WeightDist::Constant { value } if !ok(*value) => {
                return Err(bad(format!("weight must be a positive integer up to {}, got {value}", Weight::MAX)))
            }
            WeightDist::Uniform { min, max } | WeightDist::LogUniform { min, max }
                if !(ok(*min) && ok(*max) && min <= max) =>
            {
                return Err(bad(format!("weights need 1 <= min <= max <= {}, got min {min}, max {max}", Weight::MAX)))
            }
            WeightDist::Heavy { percent, total } => {
                if !(*percent > 0.0 && *percent < 100.0) {
                    return Err(bad(format!("percent must be strictly between 0 and 100, got {percent}")));
                }
                if count < 2 || *total < count as i64 + 1 || !ok(*total) {
                    return Err(bad(format!(
                        "a heavy class needs count >= 2 and total >= count + 1, got count {count}, total {total}"
                    )));
                }
            }
            _ => {}
        }
        Ok(d)
    }

    /// `[report] lag_windows`: distinct lengths, each at least 1 ns, at most
    /// the horizon, and at most [`MAX_WINDOWS`] windows in the horizon.
    fn lag_windows(&self, lengths: &[Spanned<Dur>], horizon: Time) -> Result<Vec<Time>, ScenarioError> {
        let mut out = Vec::new();
        for (k, l) in lengths.iter().enumerate() {
            let field = format!("report.lag_windows[{k}]");
            let t = l.get_ref().0;
            let bad = |m: String| Err(self.err(l.span(), &field, m));
            if t == 0 {
                return bad("a window length must be at least 1 ns".into());
            }
            if t > horizon {
                return bad(format!("{t} ns is longer than the horizon ({horizon} ns): no complete window"));
            }
            if horizon / t > MAX_WINDOWS {
                return bad(format!("{t} ns cuts the horizon into more than {MAX_WINDOWS} windows"));
            }
            if out.contains(&t) {
                return bad(format!("duplicate window length {t} ns"));
            }
            out.push(t);
        }
        Ok(out)
    }

    /// A `[start, end]` window of the run: `start < end`, `start` before the horizon.
    fn time_window(
        &self,
        w: Option<&Spanned<[Dur; 2]>>,
        field: &str,
        horizon: Time,
    ) -> Result<Option<(Time, Time)>, ScenarioError> {
        let Some(w) = w else { return Ok(None) };
        let [Dur(start), Dur(end)] = *w.get_ref();
        if start >= end {
            return Err(self.err(w.span(), field, format!("start ({start} ns) must be before end ({end} ns)")));
        }
        if start >= horizon {
            return Err(self.err(w.span(), field, format!("starts at {start} ns, after the horizon ({horizon} ns)")));
        }
        Ok(Some((start, end)))
    }

    fn time_dist(&self, d: &RawTimeDist, span: Range<usize>, field: &str) -> Result<Dist, ScenarioError> {
        Ok(match d {
            RawTimeDist::Fixed(Dur(t)) | RawTimeDist::Dist(RawTimeDistTable::Constant { value: Dur(t) }) => {
                Dist::Constant(*t)
            }
            RawTimeDist::Dist(RawTimeDistTable::Uniform { min, max }) => {
                if min > max {
                    return Err(self.err(span, field, "uniform needs min <= max"));
                }
                Dist::Uniform(min.0, max.0)
            }
            RawTimeDist::Dist(RawTimeDistTable::Exponential { mean }) => {
                if mean.0 == 0 {
                    return Err(self.err(span, field, "exponential needs a positive mean"));
                }
                Dist::Exponential(mean.0)
            }
        })
    }

    /// An optional duration that must be at least 1 ns.
    fn positive(&self, d: &Option<Spanned<Dur>>, field: &str) -> Result<Option<Time>, ScenarioError> {
        match d {
            Some(v) if v.get_ref().0 == 0 => Err(self.err(v.span(), field, "must be at least 1 ns")),
            v => Ok(v.as_ref().map(|v| v.get_ref().0)),
        }
    }

    fn behave(
        &self,
        run: &Option<RawTimeDist>,
        sleep: &Option<RawTimeDist>,
        span: Range<usize>,
        at: &str,
    ) -> Result<Behave, ScenarioError> {
        match (run, sleep) {
            (None, None) => Ok(Behave::Cpu),
            (Some(r), Some(s)) => {
                let run = self.time_dist(r, span.clone(), &format!("{at}.run"))?;
                if run == Dist::Constant(0) {
                    return Err(self.err(span, &format!("{at}.run"), "a run phase must be at least 1 ns"));
                }
                Ok(Behave::Phases(run, self.time_dist(s, span, &format!("{at}.sleep"))?))
            }
            _ => Err(self.err(span, at, "give both `run` and `sleep` for a client that sleeps, or neither")),
        }
    }
}

impl Scenario {
    /// Load and validate a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        Scenario::parse(&file, &text, &stem)
    }

    /// Parse and validate scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str, default_name: &str) -> Result<Scenario, ScenarioError> {
        let cx = Ctx { file, text };
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            // Name the key written on the offending line, when there is one.
            let start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
            let line = text[start..].lines().next().unwrap_or("");
            let key = line
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-.\"".contains(c)));
            cx.err(span, key.unwrap_or(""), e.message().trim().to_string())
        })?;
        let m = raw.machine.get_ref();
        let cpus = *m.cpus.get_ref();
        if cpus <= 0 || cpus > 1 << 16 {
            return Err(cx.err(m.cpus.span(), "machine.cpus", format!("must be between 1 and 65536, got {cpus}")));
        }
        let cpus = cpus as usize;
        let quantum = m.quantum.get_ref().0;
        if quantum == 0 {
            return Err(cx.err(m.quantum.span(), "machine.quantum", "must be at least 1 ns"));
        }
        let horizon = m.horizon.get_ref().0;
        if horizon == 0 || horizon >= 1 << 50 {
            return Err(cx.err(m.horizon.span(), "machine.horizon", "must be between 1 ns and 2^50 ns (13 days)"));
        }
        let offsets = match &m.offsets {
            None => Vec::new(),
            Some(o) => match o.get_ref() {
                RawOffsets::List(l) => l.iter().map(|d| d.0).collect(),
                RawOffsets::Named(n) if n == "staggered" => {
                    (0..cpus as u64).map(|k| k * quantum / cpus as u64).collect()
                }
                RawOffsets::Named(n) => {
                    return Err(cx.err(
                        o.span(),
                        "machine.offsets",
                        format!("expected a list of durations or \"staggered\", got {n:?}"),
                    ))
                }
            },
        };
        let machine = SimConfig {
            cpus,
            quantum,
            horizon,
            cpu_offsets: offsets,
            switch_cost: m.switch_cost.map_or(0, |d| d.0),
            migration_cost: m.migration_cost.map_or(0, |d| d.0),
            seed: 0,
        };

        let mut names = std::collections::HashSet::new();
        let mut clients = Vec::new();
        for (i, rc) in raw.clients.iter().enumerate() {
            let at = format!("client[{i}]");
            let c = rc.get_ref();
            let name = c.name.get_ref().clone();
            if !names.insert(name.clone()) {
                return Err(cx.err(c.name.span(), &format!("{at}.name"), format!("duplicate client name {name:?}")));
            }
            let weight = cx.weight(&c.weight, &format!("{at}.weight"))?;
            let arrive = c.arrive.as_ref().map_or(0, |a| a.get_ref().0);
            let depart = match &c.depart {
                Some(d) if d.get_ref().0 <= arrive => {
                    return Err(cx.err(
                        d.span(),
                        &format!("{at}.depart"),
                        format!("departure ({} ns) must come after arrival ({arrive} ns)", d.get_ref().0),
                    ))
                }
                d => d.as_ref().map(|d| d.get_ref().0),
            };
            let mut last = arrive;
            let mut weight_changes = Vec::new();
            for (k, wc) in c.weight_changes.iter().enumerate() {
                let f = format!("{at}.weight_changes[{k}]");
                let t = wc.get_ref().at.0;
                if t < last {
                    return Err(cx.err(
                        wc.span(),
                        &format!("{f}.at"),
                        format!("times out of order: {t} ns comes before {last} ns"),
                    ));
                }
                last = t;
                weight_changes.push((t, cx.weight(&wc.get_ref().weight, &format!("{f}.weight"))?));
            }
            let behave = cx.behave(&c.run, &c.sleep, rc.span(), &at)?;
            let work = cx.positive(&c.work, &format!("{at}.work"))?;
            clients.push(ClientSpec {
                name,
                weight,
                arrive,
                depart,
                behavior: behave.behavior(),
                weight_changes,
                work,
            });
        }

        let mut classes = Vec::new();
        for (i, rc) in raw.classes.iter().enumerate() {
            let at = format!("class[{i}]");
            let c = rc.get_ref();
            let count = *c.count.get_ref();
            if count <= 0 || count > propshare::MAX_CLIENT_ID as i64 {
                return Err(cx.err(
                    c.count.span(),
                    &format!("{at}.count"),
                    format!("must be between 1 and {}, got {count}", propshare::MAX_CLIENT_ID),
                ));
            }
            classes.push(Class {
                prefix: c.prefix.get_ref().clone(),
                count: count as usize,
                weight: cx.weight_dist(&c.weight, &format!("{at}.weight"), count as usize)?,
                behave: cx.behave(&c.run, &c.sleep, rc.span(), &at)?,
                arrive: c.arrive.map_or(0, |d| d.0),
            });
        }

        let mut poisson = Vec::new();
        for (i, rp) in raw.poisson.iter().enumerate() {
            let at = format!("poisson[{i}]");
            let p = rp.get_ref();
            let start = p.start.as_ref().map_or(0, |s| s.get_ref().0);
            let stop = p.stop.get_ref().0;
            if stop <= start {
                return Err(cx.err(
                    p.stop.span(),
                    &format!("{at}.stop"),
                    "times out of order: stop must come after start",
                ));
            }
            let mean = p.mean_interarrival.get_ref().0;
            if mean == 0 {
                return Err(cx.err(p.mean_interarrival.span(), &format!("{at}.mean_interarrival"), "must be positive"));
            }
            poisson.push(Poisson {
                prefix: p.prefix.get_ref().clone(),
                mean_interarrival: mean,
                lifetime: cx.time_dist(&p.lifetime, rp.span(), &format!("{at}.lifetime"))?,
                weight: cx.weight_dist(&p.weight, &format!("{at}.weight"), 2)?,
                start,
                stop,
                behave: cx.behave(&p.run, &p.sleep, rp.span(), &at)?,
            });
        }

        let mut chains = Vec::new();
        for (i, rc) in raw.chains.iter().enumerate() {
            let at = format!("chain[{i}]");
            let c = rc.get_ref();
            let leaves = match (cx.positive(&c.work, &format!("{at}.work"))?, cx.positive(&c.lifetime, &format!("{at}.lifetime"))?) {
                (Some(w), None) => MemberLeaves::AfterWork(w),
                (None, Some(l)) => MemberLeaves::AfterLifetime(l),
                _ => {
                    return Err(cx.err(
                        rc.span(),
                        &at,
                        "give exactly one of `work` (CPU time each member needs) and `lifetime` (wall-clock time each member stays)",
                    ))
                }
            };
            let count = match &c.count {
                Some(n) if *n.get_ref() <= 0 => {
                    return Err(cx.err(
                        n.span(),
                        &format!("{at}.count"),
                        format!("must be at least 1, got {}", n.get_ref()),
                    ))
                }
                n => n.as_ref().map(|n| *n.get_ref() as u64),
            };
            let start = c.start.map_or(0, |d| d.0);
            let until = match &c.until {
                Some(u) if u.get_ref().0 <= start => {
                    return Err(cx.err(
                        u.span(),
                        &format!("{at}.until"),
                        format!("times out of order: until ({} ns) must come after start ({start} ns)", u.get_ref().0),
                    ))
                }
                u => u.as_ref().map(|u| u.get_ref().0),
            };
            chains.push(ChainSpec {
                prefix: c.prefix.get_ref().clone(),
                weight: cx.weight(&c.weight, &format!("{at}.weight"))?,
                start,
                leaves,
                count,
                until,
            });
        }

        let schedulers = match &raw.schedulers {
            None => propshare::registry::names().map(String::from).collect(),
            Some(list) => {
                for s in list {
                    if let Err(e) = propshare::registry::find(s.get_ref()) {
                        return Err(cx.err(s.span(), "schedulers", e.to_string()));
                    }
                }
                list.iter().map(|s| s.get_ref().clone()).collect()
            }
        };

        let known = KnownNames {
            explicit: clients.iter().map(|c| c.name.clone()).collect(),
            numbered: classes
                .iter()
                .map(|c| (c.prefix.clone(), Some(c.count)))
                .chain(poisson.iter().map(|p| (p.prefix.clone(), None)))
                .chain(chains.iter().map(|c| (c.prefix.clone(), None)))
                .collect(),
        };
        if let Some(r) = &raw.report {
            if let Some((k, n)) = r.lag_clients.iter().enumerate().find(|(_, n)| !known.is_static(n.get_ref())) {
                return Err(cx.err(
                    n.span(),
                    &format!("report.lag_clients[{k}]"),
                    format!("no client is named {:?} (lag plots need a [[client]] or [[class]] member)", n.get_ref()),
                ));
            }
        }
        let report = match raw.report {
            None => ReportSpec::default(),
            Some(r) => ReportSpec {
                sample_every: r.sample_every.map(|d| d.0).filter(|&d| d > 0),
                lag_windows: cx.lag_windows(&r.lag_windows, horizon)?,
                lag_clients: r.lag_clients.iter().map(|n| n.get_ref().clone()).collect(),
                gantt: cx.time_window(r.gantt.as_ref(), "report.gantt", horizon)?,
                trace: cx.time_window(r.trace.as_ref(), "report.trace", horizon)?,
            },
        };

        let mut claims = Vec::new();
        for (i, rc) in raw.claims.iter().enumerate() {
            let at = format!("claim[{i}]");
            let c = rc.get_ref();
            let metric = ClaimMetric::parse(c.metric.get_ref()).ok_or_else(|| {
                cx.err(
                    c.metric.span(),
                    &format!("{at}.metric"),
                    format!("unknown metric {:?}; known: {}", c.metric.get_ref(), ClaimMetric::NAMES),
                )
            })?;
            if let Err(e) = propshare::registry::find(c.scheduler.get_ref()) {
                return Err(cx.err(c.scheduler.span(), &format!("{at}.scheduler"), e.to_string()));
            }
            if metric == ClaimMetric::ShareRatio && c.clients.len() != 2 {
                return Err(cx.err(rc.span(), &format!("{at}.clients"), "share_ratio needs exactly two clients"));
            }
            if metric == ClaimMetric::Share && c.client.is_none() {
                return Err(cx.err(rc.span(), &format!("{at}.client"), "share needs a client"));
            }
            let window = match &c.window {
                Some(w) if w.get_ref()[0] >= w.get_ref()[1] => {
                    return Err(cx.err(
                        w.span(),
                        &format!("{at}.window"),
                        "times out of order: the window must end after it starts",
                    ))
                }
                Some(w) if !matches!(metric, ClaimMetric::Share | ClaimMetric::ShareRatio) => {
                    return Err(cx.err(
                        w.span(),
                        &format!("{at}.window"),
                        "a window applies only to share and share_ratio",
                    ))
                }
                w => w.as_ref().map(|w| (w.get_ref()[0].0, w.get_ref()[1].0)),
            };
            if metric.windowed() && report.lag_windows.is_empty() {
                return Err(cx.err(
                    c.metric.span(),
                    &format!("{at}.metric"),
                    format!("{} needs window lengths in [report] lag_windows", metric.name()),
                ));
            }
            if metric == ClaimMetric::WindowLagGrowth && report.lag_windows.len() < 2 {
                return Err(cx.err(
                    c.metric.span(),
                    &format!("{at}.metric"),
                    "window_lag_growth needs at least two lengths in [report] lag_windows",
                ));
            }
            let window_length = match &c.window_length {
                Some(l) if !metric.takes_window_length() => {
                    return Err(cx.err(
                        l.span(),
                        &format!("{at}.window_length"),
                        "window_length applies only to window_lag, window_max_abs_lag and window_rel_error",
                    ))
                }
                Some(l) if !report.lag_windows.contains(&l.get_ref().0) => {
                    return Err(cx.err(
                        l.span(),
                        &format!("{at}.window_length"),
                        format!("{} ns is not one of the lengths in [report] lag_windows", l.get_ref().0),
                    ))
                }
                l => l.as_ref().map(|l| l.get_ref().0),
            };
            if c.min.is_none() && c.max.is_none() {
                return Err(cx.err(rc.span(), &at, "a claim needs `min`, `max` or both"));
            }
            let named = c.client.iter().map(|n| (n, format!("{at}.client")));
            let named = named.chain(c.clients.iter().enumerate().map(|(k, n)| (n, format!("{at}.clients[{k}]"))));
            for (n, field) in named {
                if !known.can_name(n) {
                    return Err(cx.err(rc.span(), &field, format!("no client is named {n:?}")));
                }
            }
            claims.push(Claim {
                paper: c.paper.clone(),
                source: c.source.clone(),
                scheduler: c.scheduler.get_ref().clone(),
                metric,
                client: c.client.clone(),
                clients: c.clients.clone(),
                min: c.min,
                max: c.max,
                note: c.note.clone(),
                window,
                window_length,
            });
        }

        let repeat = match &raw.repeat {
            Some(r) if *r.get_ref() == 0 => return Err(cx.err(r.span(), "repeat", "must be at least 1")),
            Some(r) => *r.get_ref(),
            None => 1,
        };
        if clients.is_empty() && classes.is_empty() && poisson.is_empty() && chains.is_empty() {
            return Err(cx.err(
                0..0,
                "client",
                "the scenario has no clients (add [[client]], [[class]], [[poisson]] or [[chain]])",
            ));
        }
        Ok(Scenario {
            name: raw.name.unwrap_or_else(|| default_name.to_string()),
            description: raw.description.unwrap_or_default(),
            paper: raw.paper,
            schedulers,
            seed: raw.seed.unwrap_or(1),
            repeat,
            machine,
            clients,
            classes,
            poisson,
            chains,
            claims,
            report,
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

    /// The clients of run `k`: explicit clients, then classes, then Poisson
    /// arrivals, all drawn deterministically from the run's seed.
    pub fn clients(&self, k: u32) -> Vec<ClientSpec> {
        let mut rng = Pcg64Mcg::seed_from_u64(self.seed.wrapping_add(k as u64) ^ 0x5eed_c1a5);
        let mut out = self.clients.clone();
        for c in &self.classes {
            let weights = draw_weights(&c.weight, c.count, &mut rng);
            for (j, w) in weights.into_iter().enumerate() {
                out.push(ClientSpec {
                    name: format!("{}{}", c.prefix, j),
                    weight: w,
                    arrive: c.arrive,
                    depart: None,
                    behavior: c.behave.behavior(),
                    weight_changes: Vec::new(),
                    work: None,
                });
            }
        }
        for p in &self.poisson {
            let mut t = p.start;
            let mut j = 0;
            let gap = Dist::Exponential(p.mean_interarrival);
            loop {
                t = t.saturating_add(gap.sample(&mut rng));
                if t >= p.stop || out.len() >= propshare::MAX_CLIENT_ID as usize {
                    break;
                }
                let w = draw_weights(&p.weight, 1, &mut rng)[0];
                let life = p.lifetime.sample(&mut rng).max(1);
                out.push(ClientSpec {
                    name: format!("{}{}", p.prefix, j),
                    weight: w,
                    arrive: t,
                    depart: Some(t + life),
                    behavior: p.behave.behavior(),
                    weight_changes: Vec::new(),
                    work: None,
                });
                j += 1;
            }
        }
        out
    }
}

/// Draw `n` weights (validated distributions only).
fn draw_weights(d: &WeightDist, n: usize, rng: &mut Pcg64Mcg) -> Vec<Weight> {
    let w = |x: u64| Weight::new(x.clamp(1, Weight::MAX)).expect("clamped");
    match *d {
        WeightDist::Constant { value } => vec![w(value as u64); n],
        WeightDist::Uniform { min, max } => (0..n).map(|_| w(rng.random_range(min as u64..=max as u64))).collect(),
        WeightDist::LogUniform { min, max } => {
            let (lo, hi) = ((min as f64).ln(), (max as f64 + 1.0).ln());
            (0..n).map(|_| w((rng.random_range(lo..hi).exp().floor() as u64).clamp(min as u64, max as u64))).collect()
        }
        WeightDist::Heavy { percent, total } => {
            if n == 1 {
                return vec![w(total as u64)];
            }
            let total = total as u64;
            let heavy = ((total as f64 * percent / 100.0).round() as u64).clamp(1, total - (n as u64 - 1));
            let rest = total - heavy;
            // A uniformly random composition of `rest` into n-1 positive parts:
            // n-2 distinct cut points in 1..rest.
            let mut cuts = rand::seq::index::sample(rng, (rest - 1) as usize, n - 2).into_vec();
            cuts.iter_mut().for_each(|c| *c += 1);
            cuts.sort_unstable();
            let mut out = vec![w(heavy)];
            let mut prev = 0;
            for c in cuts.into_iter().chain(std::iter::once(rest as usize)) {
                out.push(w((c - prev) as u64));
                prev = c;
            }
            out
        }
    }
}

#[cfg(test)]
mod known_names_tests {
    use super::KnownNames;

    #[test]
    fn names_that_can_exist() {
        let k = KnownNames {
            explicit: vec!["T1".into()],
            numbered: vec![("one".into(), Some(12)), ("short".into(), None), ("none".into(), Some(0))],
        };
        for ok in ["T1", "one0", "one11", "short0", "short123", "T*", "one*", "one1*", "on*", "short4*"] {
            assert!(k.can_name(ok), "{ok}");
        }
        for bad in ["T2", "one12", "one01", "one", "short", "shortx", "one12*", "none0", "none*", "x*"] {
            assert!(!k.can_name(bad), "{bad}");
        }
        assert!(k.is_static("one11") && k.is_static("T1"));
        assert!(!k.is_static("short0") && !k.is_static("one12"));
    }
}
