//! Claims: a paper's number that a scenario should reproduce ([`Claim`],
//! about a [`ClaimMetric`]), and their judge: what we measured over the
//! runs and whether it matches ([`judge`], [`Verdict`]).
//!
//! A claim bounds our figure from both sides where the paper's number is
//! the point: `min`/`max` say what our figure must stay within, `reach`
//! what our extremes must get to (for the range metrics: the range over
//! clients must cover every value in `reach`, so "WFQ's error reaches
//! +819" fails for a WFQ that became fair). Each claim pins the verdict
//! we expect ([`Expect`]); `propshare reproduce --check` fails when a
//! verdict differs from its pin.

use std::ops::Range;

use propshare::Time;

use crate::metrics::{ClientMetrics, RunMetrics, WindowLagMetrics};

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
    /// Lag of groups against the hierarchical fluid reference, range over
    /// groups (or the groups `client` names), in quanta.
    GroupLag,
    /// Migrations (starts on another CPU than the client's previous run) per
    /// second of simulated time, over all clients (or of `client`).
    MigrationsPerS,
}

impl ClaimMetric {
    /// The metric names accepted in files.
    pub const NAMES: &'static str = "service_error, lag, share, share_ratio, idle_fraction, within_quantum, \
                                     window_lag, window_max_abs_lag, window_rel_error, window_lag_growth, \
                                     migrations_per_s, group_lag";

    pub(super) fn parse(s: &str) -> Option<ClaimMetric> {
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
            "group_lag" => ClaimMetric::GroupLag,
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
            ClaimMetric::GroupLag => "group_lag",
        }
    }

    /// Whether our figure is a range over clients (low end, high end), so a
    /// claim may say which values it must `reach`; the other metrics are one
    /// number per run.
    pub fn is_range(self) -> bool {
        matches!(self, ClaimMetric::ServiceError | ClaimMetric::Lag | ClaimMetric::WindowLag | ClaimMetric::GroupLag)
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
    /// Expected lower end: all our values are at least this.
    pub min: Option<f64>,
    /// Expected upper end: all our values are at most this.
    pub max: Option<f64>,
    /// Values our range must reach (range metrics only): our low end is at
    /// most, and our high end at least, each of them.
    pub reach: Vec<f64>,
    /// The verdict the scenario pins (`expect` in the file).
    pub expect: Expect,
    /// Which figure or sentence of the paper the claim encodes, and how.
    pub note: Option<String>,
    /// Where the claim is written: `file:line` of its `[[claim]]`.
    pub at: String,
    /// For share and share_ratio: measure only inside `[start, end)`, ns.
    pub window: Option<(Time, Time)>,
    /// For the window metrics: only windows of this length, ns (`None`: every length).
    pub window_length: Option<Time>,
}

/// The verdict a claim pins: `expect = "match"` (the default) or
/// `expect = "differ"` with the written `reason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Our figure should match the paper's.
    Match,
    /// We know we differ, and why.
    Differ {
        /// Why we differ.
        reason: String,
    },
}

/// The bounds of a claim as written, checked by [`check_bounds`].
pub(super) struct Bounds {
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
    pub(super) reach: Vec<f64>,
    pub(super) expect: Expect,
}

/// What is wrong with a claim's bounds: the span, the field (below the
/// claim) and why.
pub(super) type BoundsError = (Range<usize>, &'static str, String);

/// Check a claim's `min`, `max`, `reach` and `expect`/`reason`: numbers are
/// finite, `min <= max`, every reach value inside `[min, max]` and only on
/// a range metric, at least one bound, a reason exactly when the claim
/// expects to differ. `whole` is the claim's span, for errors with no
/// field of their own.
pub(super) fn check_bounds(
    raw: &super::raw::RawClaim,
    metric: ClaimMetric,
    whole: Range<usize>,
) -> Result<Bounds, BoundsError> {
    let finite = |v: &Option<toml::Spanned<f64>>, field: &'static str| match v {
        Some(x) if !x.get_ref().is_finite() => {
            Err((x.span(), field, format!("must be a finite number, got {}", x.get_ref())))
        }
        x => Ok(x.as_ref().map(|x| *x.get_ref())),
    };
    let min = finite(&raw.min, "min")?;
    let max = finite(&raw.max, "max")?;
    if let (Some(lo), Some(hi), Some(span)) = (min, max, raw.min.as_ref().map(|m| m.span())) {
        if lo > hi {
            return Err((span, "min", format!("min {lo} is above max {hi}: no figure can match")));
        }
    }
    let reach: Vec<f64> = match &raw.reach {
        None => Vec::new(),
        Some(r) => {
            let values = match r.get_ref() {
                super::raw::RawReach::One(v) => vec![*v],
                super::raw::RawReach::Many(v) => v.clone(),
            };
            if !metric.is_range() {
                return Err((
                    r.span(),
                    "reach",
                    format!(
                        "reach applies to the range metrics (service_error, lag, window_lag); {} is one number \
                         per run: bound it with min and max",
                        metric.name()
                    ),
                ));
            }
            if values.is_empty() {
                return Err((r.span(), "reach", "give at least one value".into()));
            }
            for &v in &values {
                if !v.is_finite() {
                    return Err((r.span(), "reach", format!("must be finite numbers, got {v}")));
                }
                if min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m) {
                    return Err((r.span(), "reach", format!("{v} lies outside [min, max]: no figure can match")));
                }
            }
            values
        }
    };
    if min.is_none() && max.is_none() && reach.is_empty() {
        return Err((whole, "", "a claim needs `min`, `max`, `reach` or some of them".into()));
    }
    let expect = match (raw.expect.as_ref().map(|e| (e.get_ref().as_str(), e.span())), &raw.reason) {
        (None | Some(("match", _)), None) => Expect::Match,
        (None | Some(("match", _)), Some(_)) => {
            return Err((whole, "reason", "a reason goes with expect = \"differ\" only".into()))
        }
        (Some(("differ", _)), Some(reason)) if !reason.trim().is_empty() => Expect::Differ { reason: reason.clone() },
        (Some(("differ", span)), _) => {
            return Err((span, "reason", "expect = \"differ\" needs a written `reason`: why we differ".into()))
        }
        (Some((other, span)), _) => {
            return Err((span, "expect", format!("expect is \"match\" or \"differ\", got {other:?}")))
        }
    };
    Ok(Bounds { min, max, reach, expect })
}

impl Claim {
    /// The claim's bounds in words: `-1 to 819.5, reaching 800`.
    pub fn bounds_text(&self) -> String {
        let n = |v: f64| format!("{v}");
        let mut s = match (self.min, self.max) {
            (Some(a), Some(b)) => format!("{} to {}", n(a), n(b)),
            (Some(a), None) => format!(">= {}", n(a)),
            (None, Some(b)) => format!("<= {}", n(b)),
            (None, None) => String::new(),
        };
        if !self.reach.is_empty() {
            let r: Vec<String> = self.reach.iter().map(|&v| n(v)).collect();
            if !s.is_empty() {
                s.push_str(", ");
            }
            s.push_str(&format!("reaching {}", r.join(" and ")));
        }
        s
    }
}

/// A claim and what we measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The claim.
    pub claim: Claim,
    /// Our value: (low, high) for range metrics, (v, v) for scalars.
    pub ours: Option<(f64, f64)>,
    /// Whether ours lies inside the claimed range and reaches what it must.
    pub matches: bool,
}

impl Verdict {
    /// Whether the verdict is the one the scenario pins.
    pub fn as_pinned(&self) -> bool {
        self.matches == (self.claim.expect == Expect::Match)
    }
}

/// Evaluate one claim over the runs of its scheduler (all repeats);
/// `windows` are the scenario's measurement windows. `share` and
/// `share_ratio` add up the CPU time of every client a name or group names
/// ([`names_client`]); the other metrics range (or average) over them.
pub fn judge(claim: &Claim, windows: &[(Time, Time)], runs: &[RunMetrics]) -> Verdict {
    let slot = claim.window.and_then(|w| windows.iter().position(|&x| x == w));
    let span = claim.window.map_or(0.0, |(a, b)| (b - a) as f64);
    let received = |c: &ClientMetrics| match slot {
        Some(k) => c.window_received_ns.get(k).copied().unwrap_or(0) as f64,
        None => c.service.received_ns as f64,
    };
    let mine: Vec<&RunMetrics> = runs.iter().filter(|r| r.scheduler == claim.scheduler).collect();
    let about = |c: &str| claim.client.as_deref().is_none_or(|x| names_client(x, c));
    // CPU time of the clients `pattern` names in run r (None: it names none).
    let group = |r: &RunMetrics, pattern: &str| {
        let mut named = r.clients.iter().filter(|c| names_client(pattern, &c.client)).peekable();
        named.peek().is_some().then(|| named.map(&received).sum::<f64>())
    };
    let of_length = |m: &&WindowLagMetrics| m.windows > 0 && claim.window_length.is_none_or(|t| t == m.window_ns);
    let fold = |vals: Vec<f64>| -> Option<(f64, f64)> {
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        lo.is_finite().then_some((lo, hi))
    };
    let ours = match claim.metric {
        ClaimMetric::ServiceError => fold(
            mine.iter()
                .flat_map(|r| r.clients.iter().filter(|c| about(&c.client)))
                .flat_map(|c| [c.service_error_min, c.service_error_max])
                .flatten()
                .collect(),
        ),
        ClaimMetric::Lag => fold(
            mine.iter()
                .flat_map(|r| r.clients.iter().filter(|c| about(&c.client)))
                .flat_map(|c| [-c.service.max_lag, -c.service.min_lag])
                .collect(),
        )
        .map(|(lo, hi)| (-hi, -lo)),
        ClaimMetric::GroupLag => fold(
            mine.iter()
                .flat_map(|r| r.groups.iter().filter(|g| about(&g.group)))
                .flat_map(|g| [g.service.min_lag, g.service.max_lag])
                .collect(),
        ),
        ClaimMetric::Share => fold(
            mine.iter()
                .filter_map(|r| {
                    let over = if slot.is_some() { span } else { r.horizon_ns as f64 };
                    group(r, claim.client.as_deref().unwrap_or("*")).map(|t| t / over)
                })
                .collect(),
        ),
        ClaimMetric::ShareRatio => fold(
            mine.iter()
                .filter_map(|r| match (group(r, &claim.clients[0]), group(r, &claim.clients[1])) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                })
                .collect(),
        ),
        ClaimMetric::IdleFraction => fold(mine.iter().map(|r| r.idle_fraction).collect()),
        ClaimMetric::WindowLag => fold(
            mine.iter()
                .flat_map(|r| r.clients.iter().filter(|c| about(&c.client)))
                .flat_map(|c| c.window_lag.iter().filter(|m| of_length(m)))
                .flat_map(|m| [m.min_lag, m.max_lag])
                .collect(),
        ),
        ClaimMetric::WindowMaxAbsLag => fold(
            mine.iter()
                .filter_map(|r| {
                    let all = r.clients.iter().filter(|c| about(&c.client)).flat_map(|c| &c.window_lag);
                    all.filter(|m| of_length(m)).map(|m| m.max_abs_lag()).reduce(f64::max)
                })
                .collect(),
        ),
        ClaimMetric::WindowRelError => fold(
            mine.iter()
                .filter_map(|r| {
                    let all = r.clients.iter().filter(|c| about(&c.client)).flat_map(|c| &c.window_lag);
                    all.filter(|m| of_length(m)).filter_map(|m| m.max_rel_error).reduce(f64::max)
                })
                .collect(),
        ),
        ClaimMetric::WindowLagGrowth => fold(
            mine.iter()
                .filter_map(|r| {
                    let at = |j: usize| {
                        let all = r.clients.iter().filter(|c| about(&c.client)).filter_map(|c| c.window_lag.get(j));
                        all.filter(|m| m.windows > 0).map(|m| m.max_abs_lag()).reduce(f64::max)
                    };
                    let by_length = |a: &(usize, &WindowLagMetrics), b: &(usize, &WindowLagMetrics)| {
                        a.1.window_ns.cmp(&b.1.window_ns)
                    };
                    let shortest = r.window_lag.iter().enumerate().min_by(by_length)?.0;
                    let longest = r.window_lag.iter().enumerate().max_by(by_length)?.0;
                    Some(at(longest)? / at(shortest).filter(|&v| v > 0.0)?)
                })
                .collect(),
        ),
        ClaimMetric::MigrationsPerS => fold(
            mine.iter()
                .map(|r| {
                    let moves: u64 = r.clients.iter().filter(|c| about(&c.client)).map(|c| c.migrations).sum();
                    moves as f64 / (r.horizon_ns as f64 / 1e9)
                })
                .collect(),
        ),
        ClaimMetric::WithinQuantum => fold(
            mine.iter()
                .filter_map(|r| {
                    let v: Vec<f64> =
                        r.clients.iter().filter(|c| about(&c.client)).filter_map(|c| c.within_quantum).collect();
                    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                })
                .collect(),
        ),
    };
    let matches = ours.is_some_and(|(lo, hi)| {
        claim.min.is_none_or(|m| lo >= m - 1e-9)
            && claim.max.is_none_or(|m| hi <= m + 1e-9)
            && claim.reach.iter().all(|&r| lo <= r + 1e-9 && hi >= r - 1e-9)
    });
    Verdict { claim: claim.clone(), ours, matches }
}
