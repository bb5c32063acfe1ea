//! What a run measured, in the units a reader wants (quanta, shares):
//! per client ([`ClientMetrics`]), per run ([`RunMetrics`], summarised from
//! the engine's [`SimReport`]) and over windows ([`WindowLagMetrics`]).

use propshare::Time;
use serde::Serialize;

use crate::engine::{ServiceStats, SimReport, WindowLag};

/// One client's metrics, in the units a reader wants (quanta, shares).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientMetrics {
    /// Scheduler.
    pub scheduler: String,
    /// Seed of the run.
    pub seed: u64,
    /// Client name.
    pub client: String,
    /// Service received against the (fluid) ideal.
    #[serde(flatten)]
    pub service: ServiceMetrics,
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

/// The service a client or a group received against its ideal, in quanta
/// and shares: what [`ClientMetrics`] and [`GroupMetrics`] share (flattened
/// into their JSON).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServiceMetrics {
    /// Weight at arrival (a group: at the start).
    pub weight: u64,
    /// CPU time received, ns (a group: by its members while in it).
    pub received_ns: u64,
    /// Ideal service, ns: fluid for a client, hierarchical fluid for a group.
    pub ideal_ns: f64,
    /// Received time over the horizon, in CPUs.
    pub share: f64,
    /// Ideal service over the horizon, in CPUs.
    pub ideal_share: f64,
    /// Largest lag, quanta.
    pub max_lag: f64,
    /// Smallest lag, quanta.
    pub min_lag: f64,
}

impl ServiceMetrics {
    /// `s` in quanta of `q` ns and shares of a horizon of `h` ns.
    pub fn of(s: &ServiceStats, q: f64, h: f64) -> ServiceMetrics {
        ServiceMetrics {
            weight: s.weight,
            received_ns: s.received,
            ideal_ns: s.ideal,
            share: s.received as f64 / h,
            ideal_share: s.ideal / h,
            max_lag: s.max_lag / q,
            min_lag: s.min_lag / q,
        }
    }
}

/// One group's metrics (runs with groups).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupMetrics {
    /// Group name.
    pub group: String,
    /// Service its members received while in it, against the group's
    /// hierarchical fluid ideal.
    #[serde(flatten)]
    pub service: ServiceMetrics,
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
    /// Per group (none: left out of the JSON).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupMetrics>,
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
                service: ServiceMetrics::of(&c.service, q, h),
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
        max_lag: clients.iter().map(|c| c.service.max_lag).fold(f64::NEG_INFINITY, f64::max).max(0.0),
        min_lag: clients.iter().map(|c| c.service.min_lag).fold(f64::INFINITY, f64::min).min(0.0),
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
        groups: r
            .groups
            .iter()
            .map(|g| GroupMetrics { group: g.name.clone(), service: ServiceMetrics::of(&g.service, q, h) })
            .collect(),
    }
}

/// A window length for people: `"5 s"`, `"250 ms"`.
pub fn duration_label(t: Time) -> String {
    match t {
        t if t % 1_000_000_000 == 0 => format!("{} s", t / 1_000_000_000),
        t if t % 1_000_000 == 0 => format!("{} ms", t / 1_000_000),
        t if t % 1_000 == 0 => format!("{} us", t / 1_000),
        t => format!("{t} ns"),
    }
}

/// Window lag of one scheduler's runs for one window length: the extremes over every repeat.
pub fn window_lag_of(runs: &[RunMetrics], scheduler: &str, length: Time) -> Option<WindowLagMetrics> {
    let all = runs.iter().filter(|r| r.scheduler == scheduler).flat_map(|r| &r.window_lag);
    Some(WindowLagMetrics::over(length, all.filter(|m| m.window_ns == length))).filter(|m| m.windows > 0)
}
