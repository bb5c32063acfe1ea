//! `propshare.simulate`: run a scenario as `propshare simulate` does
//! (`propshare_sim::run::run_scenario`, so the same numbers), with the GIL
//! released; the result keeps the simulator's [`ScenarioResult`] and hands
//! out columns (dicts of lists) that the Python side makes DataFrames of.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use propshare::registry;
use propshare_sim::results::ScenarioResult;
use propshare_sim::run::{run_scenario, RunError, RunOptions};
use propshare_sim::scenario::{Claim, Limits, DEFAULT_MAX_EVENTS, DEFAULT_MAX_MEMORY};

use crate::scenario::{expect_name, PyScenario};
use crate::{SchedulerError, SimulationError};

/// How often a running simulation looks for Ctrl-C (it takes the GIL to look).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Run `scenario`: every scheduler (or `schedulers`, names or specs) on
/// every repeat. `seed` and `repeat` override the scenario's; with `lag`
/// the first repeat's lag series of `lag_clients` (default: the scenario's
/// `[report]` choice) are sampled every `lag_every_ns`; with `trace_dir`
/// the first repeat's event traces (JSON Lines) are written there.
/// Refuses a run estimated above `max_memory` bytes or `max_events` events,
/// as the CLI does.
#[pyfunction]
#[pyo3(signature = (scenario, schedulers=None, seed=None, repeat=None, lag=true, lag_clients=None,
                    lag_every_ns=None, trace_dir=None, max_memory=None, max_events=None))]
#[allow(clippy::too_many_arguments)]
pub fn simulate(
    py: Python<'_>,
    scenario: &PyScenario,
    schedulers: Option<Vec<String>>,
    seed: Option<u64>,
    repeat: Option<u32>,
    lag: bool,
    lag_clients: Option<Vec<String>>,
    lag_every_ns: Option<u64>,
    trace_dir: Option<PathBuf>,
    max_memory: Option<u64>,
    max_events: Option<u64>,
) -> PyResult<PyRunResult> {
    let mut scn = scenario.scn.clone();
    if let Some(seed) = seed {
        scn.seed = seed;
    }
    if let Some(repeat) = repeat {
        if repeat == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err("repeat must be at least 1"));
        }
        scn.repeat = repeat;
    }
    if let Some(list) = &schedulers {
        if list.is_empty() {
            return Err(SchedulerError::new_err("schedulers: give at least one (or None for the scenario's)"));
        }
        for s in list {
            registry::check(s).map_err(|e| SchedulerError::new_err(e.to_string()))?;
        }
    }
    if let Some(names) = lag_clients {
        let known: Vec<String> = scn.clients(0).into_iter().map(|c| c.name).collect();
        if let Some(bad) = names.iter().find(|n| !known.contains(n)) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "lag_clients: {bad:?} is not a client of {} (its clients: {}{})",
                scn.name,
                known.iter().take(8).cloned().collect::<Vec<_>>().join(", "),
                if known.len() > 8 { ", ..." } else { "" }
            )));
        }
        scn.report.lag_clients = names;
    }
    if let Some(every) = lag_every_ns {
        if every == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err("lag_every must be at least 1 ns"));
        }
        scn.report.sample_every = Some(every);
    }
    let count = schedulers.as_ref().map_or(scn.schedulers.len(), Vec::len);
    let limits =
        Limits { memory: max_memory.unwrap_or(DEFAULT_MAX_MEMORY), events: max_events.unwrap_or(DEFAULT_MAX_EVENTS) };
    scn.check_cost(&scenario.file, count, lag, limits).map_err(|e| SimulationError::new_err(e.to_string()))?;
    let opts =
        RunOptions { traces: trace_dir.is_some(), out: trace_dir, plots: lag, measure_cost: false, per_client: false };
    let mut interrupt: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut last = Instant::now();
        run_scenario(&scn, schedulers.as_deref(), &opts, &mut |_| {
            if last.elapsed() < SIGNAL_CHECK {
                return true;
            }
            last = Instant::now();
            match Python::with_gil(|py| py.check_signals()) {
                Ok(()) => true,
                Err(e) => {
                    interrupt = Some(e);
                    false
                }
            }
        })
    });
    match (result, interrupt) {
        (Ok(r), _) => Ok(PyRunResult { result: r }),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(run_err(e)),
    }
}

fn run_err(e: RunError) -> PyErr {
    SimulationError::new_err(e.to_string())
}

/// What one [`simulate`] produced.
#[pyclass(module = "propshare", name = "RunResult", frozen)]
pub struct PyRunResult {
    result: ScenarioResult,
}

#[pymethods]
impl PyRunResult {
    /// The scenario's name.
    #[getter]
    fn scenario(&self) -> &str {
        &self.result.scenario.name
    }

    /// One row per run (scheduler × seed): the run's summary, with its
    /// service error range over clients (static sets only, quanta).
    fn runs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let runs = &self.result.runs;
        let d = PyDict::new(py);
        macro_rules! put {
            ($name:literal, $r:ident => $e:expr) => {
                d.set_item($name, runs.iter().map(|$r| $e).collect::<Vec<_>>())?
            };
        }
        put!("scenario", r => r.scenario.as_str());
        put!("scheduler", r => r.scheduler.as_str());
        put!("seed", r => r.seed);
        put!("cpus", r => r.cpus);
        put!("quantum_ns", r => r.quantum_ns);
        put!("horizon_ns", r => r.horizon_ns);
        put!("clients", r => r.clients.len());
        put!("decisions", r => r.decisions);
        put!("context_switches", r => r.context_switches);
        put!("migrations", r => r.migrations);
        put!("utilisation", r => r.utilisation);
        put!("idle_while_waiting_ns", r => r.idle_while_waiting_ns);
        put!("idle_fraction", r => r.idle_fraction);
        put!("max_lag", r => r.max_lag);
        put!("min_lag", r => r.min_lag);
        put!("service_error_min", r => r.clients.iter().filter_map(|c| c.service_error_min).reduce(f64::min));
        put!("service_error_max", r => r.clients.iter().filter_map(|c| c.service_error_max).reduce(f64::max));
        Ok(d)
    }

    /// One row per client of every run (lags and service errors in quanta).
    fn clients<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let all: Vec<&propshare_sim::metrics::ClientMetrics> =
            self.result.runs.iter().flat_map(|r| r.clients.iter()).collect();
        let d = PyDict::new(py);
        macro_rules! put {
            ($name:literal, $($f:ident).+) => {
                d.set_item($name, all.iter().map(|c| c.$($f).+.clone()).collect::<Vec<_>>())?
            };
        }
        put!("scheduler", scheduler);
        put!("seed", seed);
        put!("client", client);
        put!("weight", service.weight);
        put!("received_ns", service.received_ns);
        put!("ideal_ns", service.ideal_ns);
        put!("share", service.share);
        put!("ideal_share", service.ideal_share);
        put!("max_lag", service.max_lag);
        put!("min_lag", service.min_lag);
        put!("mean_abs_lag", mean_abs_lag);
        put!("service_error_min", service_error_min);
        put!("service_error_max", service_error_max);
        put!("wake_latency_median_ns", wake_latency_median_ns);
        put!("wake_latency_p99_ns", wake_latency_p99_ns);
        put!("wake_latency_max_ns", wake_latency_max_ns);
        put!("runs", runs);
        put!("migrations", migrations);
        put!("within_quantum", within_quantum);
        put!("window_received_ns", window_received_ns);
        Ok(d)
    }

    /// The quantum, ns (lags in quanta are lags in ns over it).
    #[getter]
    fn quantum_ns(&self) -> u64 {
        self.result.scenario.machine.quantum
    }

    /// Lag over time of the sampled clients (first repeat of each
    /// scheduler), one tuple per client and run: scheduler, seed, client,
    /// the times (ns, little-endian u64) and the lags (ns, little-endian
    /// f64) as bytes, for `numpy.frombuffer`: a series can hold a point per
    /// quantum, too many for a Python object each.
    #[allow(clippy::type_complexity)]
    fn lag<'py>(&self, py: Python<'py>) -> Vec<(&str, u64, &str, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        self.result
            .lag
            .iter()
            .map(|s| {
                let t: Vec<u8> = s.points.iter().flat_map(|p| p.0.to_le_bytes()).collect();
                let lag: Vec<u8> = s.points.iter().flat_map(|p| p.1.to_le_bytes()).collect();
                (s.scheduler.as_str(), s.seed, s.client.as_str(), PyBytes::new(py, &t), PyBytes::new(py, &lag))
            })
            .collect()
    }

    /// The windowed lag (DWRR paper, Fig. 5), one row per run and window
    /// length (over every client), when the scenario measures it.
    fn window_lag<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let rows: Vec<_> = self.result.runs.iter().flat_map(|r| r.window_lag.iter().map(move |w| (r, w))).collect();
        let d = PyDict::new(py);
        d.set_item("scheduler", rows.iter().map(|(r, _)| r.scheduler.as_str()).collect::<Vec<_>>())?;
        d.set_item("seed", rows.iter().map(|(r, _)| r.seed).collect::<Vec<_>>())?;
        d.set_item("window_ns", rows.iter().map(|(_, w)| w.window_ns).collect::<Vec<_>>())?;
        d.set_item("windows", rows.iter().map(|(_, w)| w.windows).collect::<Vec<_>>())?;
        d.set_item("min_lag", rows.iter().map(|(_, w)| w.min_lag).collect::<Vec<_>>())?;
        d.set_item("max_lag", rows.iter().map(|(_, w)| w.max_lag).collect::<Vec<_>>())?;
        d.set_item("max_rel_error", rows.iter().map(|(_, w)| w.max_rel_error).collect::<Vec<_>>())?;
        Ok(d)
    }

    /// One row per claim judged: the claim, our figure (low, high) and the
    /// verdict, as `propshare simulate` prints them.
    fn claims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for v in &self.result.verdicts {
            let d = claim_dict(py, &v.claim)?;
            d.set_item("ours_min", v.ours.map(|o| o.0))?;
            d.set_item("ours_max", v.ours.map(|o| o.1))?;
            d.set_item("matches", v.matches)?;
            d.set_item("as_pinned", v.as_pinned())?;
            out.append(d)?;
        }
        Ok(out)
    }
}

/// A claim as a dict (without a verdict).
pub fn claim_dict<'py>(py: Python<'py>, c: &Claim) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("scheduler", &c.scheduler)?;
    d.set_item("metric", c.metric.name())?;
    d.set_item("client", c.client.as_deref())?;
    d.set_item("clients", c.clients.clone())?;
    d.set_item("paper", &c.paper)?;
    d.set_item("source", &c.source)?;
    d.set_item("min", c.min)?;
    d.set_item("max", c.max)?;
    d.set_item("reach", c.reach.clone())?;
    d.set_item("bounds", c.bounds_text())?;
    d.set_item("expect", expect_name(&c.expect))?;
    d.set_item("at", &c.at)?;
    Ok(d)
}
