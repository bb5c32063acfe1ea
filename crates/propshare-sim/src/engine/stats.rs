//! What a run reports: per-client [`ClientStats`] (with their windowed
//! [`WindowLag`]), the run's [`SimReport`], and the [`CostHistogram`] of
//! decision costs; built from the run's state at the horizon.

use propshare::{Scheduler, Time};

use super::client::NONE;
use super::lag::ns_of_fixed;
use super::{Engine, SimConfig};

/// The service a client or a group received against its ideal: what
/// [`ClientStats`] and [`GroupStats`](super::GroupStats) share.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceStats {
    /// Weight at arrival (a group: at the start).
    pub weight: u64,
    /// CPU time received, ns (a group: by its members while in it).
    pub received: Time,
    /// Ideal service at the end of the run or at departure, ns: fluid for a
    /// client, hierarchical fluid for a group.
    pub ideal: f64,
    /// Largest lag (ideal − received) seen, ns.
    pub max_lag: f64,
    /// Smallest lag seen, ns.
    pub min_lag: f64,
}

/// Per-client results.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientStats {
    /// Name.
    pub name: String,
    /// Service received against the ideal.
    pub service: ServiceStats,
    /// Mean of |lag| over the samples, ns.
    pub mean_abs_lag: f64,
    /// Service error range (min, max) in ns, for runs with no dynamic events.
    pub service_error: Option<(f64, f64)>,
    /// Wake-up latencies (wake to next run), ns.
    pub wake_latencies: Vec<Time>,
    /// Times it was started on a CPU.
    pub runs: u64,
    /// Starts on a different CPU than its previous run.
    pub migrations: u64,
    /// Lag over time, ns: (time, lag), on the sampling grid and at the client's own events
    /// (only for clients selected with [`Engine::sample_lag`](super::Engine::sample_lag)).
    pub lag_series: Vec<(Time, f64)>,
    /// CPU time received inside each measurement window ([`Engine::windows`](super::Engine::windows)), ns.
    pub window_received: Vec<Time>,
    /// Fraction of the band grid's instants at which |lag| was within the
    /// band ([`Engine::lag_band`](super::Engine::lag_band)), over the instants the client was present.
    pub within_band: Option<f64>,
    /// Lag over fixed windows, one entry per window length ([`Engine::lag_windows`](super::Engine::lag_windows)).
    pub window_lags: Vec<WindowLag>,
}

/// One client's lag over the windows `[k·t, (k+1)·t)` of one length t
/// ([`Engine::lag_windows`](super::Engine::lag_windows)); only windows the client was present for from
/// start to end count.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowLag {
    /// The window length t, ns.
    pub length: Time,
    /// Windows measured.
    pub windows: u64,
    /// Smallest window lag (ideal − received in the window), ns (0 if none).
    pub min_lag: f64,
    /// Largest window lag, ns (0 if none).
    pub max_lag: f64,
    /// Largest |lag| / ideal over the windows with some ideal service.
    pub max_rel_error: Option<f64>,
    /// Sum of the window lags, ns: the lag at the last window's end minus the
    /// lag at the first window's start.
    pub total_lag: f64,
}

/// Results of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimReport {
    /// Scheduler name.
    pub scheduler: String,
    /// Settings.
    pub config: SimConfig,
    /// Per client, in spec order.
    pub clients: Vec<ClientStats>,
    /// Decisions (`pick` calls that returned a client).
    pub decisions: u64,
    /// Starts of a different client than the CPU's previous one.
    pub context_switches: u64,
    /// CPU-ns spent idle while a runnable client waited.
    pub idle_while_waiting: Time,
    /// CPU-ns spent running clients.
    pub busy: Time,
    /// CPU-ns lost to switch and migration costs.
    pub overhead: Time,
    /// Wall-clock cost of the scheduler's code per decision (pick plus the
    /// `stopped` that ends the run), when measured ([`Engine::measure_cost`](super::Engine::measure_cost)).
    /// Not deterministic: reports keep it apart from the metrics files.
    pub decision_cost: Option<CostHistogram>,
    /// Per group, in the order given to [`Engine::groups`](super::Engine::groups) (empty: no groups).
    pub groups: Vec<super::GroupStats>,
}

/// A histogram of nanosecond costs with about 6% resolution: 16 linear
/// sub-buckets per power of two.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostHistogram {
    buckets: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for CostHistogram {
    fn default() -> Self {
        CostHistogram { buckets: vec![0; 64 * 16], count: 0, max: 0 }
    }
}

impl CostHistogram {
    fn bucket(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize; // ≥ 4
        let sub = ((v >> (e - 4)) & 15) as usize;
        (e - 3) * 16 + sub
    }

    fn lower(b: usize) -> u64 {
        if b < 16 {
            return b as u64;
        }
        let e = b / 16 + 3;
        ((16 + (b % 16)) as u64) << (e - 4)
    }

    /// Add another histogram's values.
    pub fn merge(&mut self, other: &CostHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// Record one value.
    pub fn record(&mut self, v: u64) {
        self.buckets[Self::bucket(v)] += 1;
        self.count += 1;
        self.max = self.max.max(v);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Largest value.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The q-quantile (0..=1), as the lower edge of its bucket.
    pub fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count.max(1));
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::lower(b);
            }
        }
        0
    }
}

impl<S: Scheduler> Engine<S> {
    /// Build the report from the state at the horizon.
    pub(super) fn finish(self) -> SimReport {
        // Free the scheduler, the fluid and the queues before the results are built.
        let Engine {
            clients,
            mut report,
            cost,
            windows,
            window_received,
            mut series,
            band_counts,
            lag_windows,
            window_lag,
            groups,
            mut fluid,
            ..
        } = self;
        report.groups = super::groups::group_stats(groups, &mut fluid, report.config.horizon);
        let w = windows.len();
        let lw = lag_windows.len();
        report.decision_cost = cost;
        report.clients = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| ClientStats {
                service: ServiceStats {
                    weight: c.weight0.get(),
                    received: c.received,
                    ideal: c.ideal,
                    max_lag: ns_of_fixed(c.max_lag),
                    min_lag: ns_of_fixed(c.min_lag),
                },
                mean_abs_lag: if c.lag_samples > 0 { c.abs_lag_ns_sum / c.lag_samples as f64 } else { 0.0 },
                service_error: c.has_err.then(|| (ns_of_fixed(c.err_min), ns_of_fixed(c.err_max))),
                wake_latencies: c.wake_latencies,
                runs: c.runs,
                migrations: c.migrations,
                lag_series: if c.series == NONE { Vec::new() } else { std::mem::take(&mut series[c.series as usize]) },
                window_received: window_received.get(i * w..(i + 1) * w).map(<[Time]>::to_vec).unwrap_or_default(),
                within_band: band_counts.get(i).filter(|b| b.0 > 0).map(|b| b.1 as f64 / b.0 as f64),
                window_lags: lag_windows.iter().enumerate().map(|(j, &t)| window_lag[i * lw + j].stats(t)).collect(),
                name: c.name,
            })
            .collect();
        report
    }
}
