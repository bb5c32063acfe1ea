//! `propshare.Scheduler`: one registered scheduler driven event by event
//! from Python, as a host drives it (the protocol of
//! `propshare::scheduler`: the host owns time and CPUs, the scheduler
//! answers `pick`). Refused events raise `propshare.EventError` and leave
//! the scheduler as it was; times that go backwards are refused here,
//! before the scheduler sees them.

use pyo3::prelude::*;

use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight};

use crate::{EventError, SchedulerError};

/// A scheduler for a host written in Python.
#[pyclass(module = "propshare", name = "Scheduler", unsendable)]
pub struct PyScheduler {
    inner: Box<dyn Scheduler>,
    cfg: SchedConfig,
    /// The latest `now` given.
    now: Time,
}

/// A weight as the core takes it, or `EventError`.
pub fn weight(w: u64) -> PyResult<Weight> {
    Weight::new(w).map_err(|e| EventError::new_err(e.to_string()))
}

/// `now` if it does not go back before `last`.
pub fn monotone(last: Time, now: Time) -> PyResult<Time> {
    if now < last {
        return Err(EventError::new_err(format!(
            "now = {now} ns is before the previous event's {last} ns: time never goes backwards"
        )));
    }
    Ok(now)
}

fn refused(e: propshare::SchedError) -> PyErr {
    EventError::new_err(e.to_string())
}

impl PyScheduler {
    fn at(&mut self, now: Time) -> PyResult<()> {
        self.now = monotone(self.now, now)?;
        Ok(())
    }
}

#[pymethods]
impl PyScheduler {
    /// Build `spec` (a registry name or `name(param=value,...)`) for `cpus`
    /// CPUs and a quantum in ns; `seed` feeds the schedulers that draw
    /// random numbers (lottery).
    #[new]
    #[pyo3(signature = (spec, cpus=1, quantum=10_000_000, seed=0))]
    fn new(spec: &str, cpus: usize, quantum: Time, seed: u64) -> PyResult<PyScheduler> {
        let cfg = SchedConfig { cpus, quantum, seed };
        let inner = registry::build(spec, cfg).map_err(|e| SchedulerError::new_err(e.to_string()))?;
        Ok(PyScheduler { inner, cfg, now: 0 })
    }

    /// Its name (the spec as given, for one with parameters).
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    /// P.
    #[getter]
    fn cpus(&self) -> usize {
        self.cfg.cpus
    }
    /// The quantum, ns.
    #[getter]
    fn quantum(&self) -> Time {
        self.cfg.quantum
    }
    /// Whether no CPU stays idle while a client waits, once every idle CPU has been asked.
    #[getter]
    fn work_conserving(&self) -> bool {
        self.inner.work_conserving()
    }

    /// Client `client` joins, runnable, with `weight`; returns a CPU the scheduler would like preempted, or None.
    fn join(&mut self, now: Time, client: u32, weight: u64) -> PyResult<Option<u32>> {
        let w = self::weight(weight)?;
        self.at(now)?;
        Ok(self.inner.join(now, ClientId(client), w).map_err(refused)?.map(|c| c.0))
    }

    /// A client that is not running leaves.
    fn leave(&mut self, now: Time, client: u32) -> PyResult<()> {
        self.at(now)?;
        self.inner.leave(now, ClientId(client)).map_err(refused)
    }

    /// A runnable client that is not running blocks.
    fn block(&mut self, now: Time, client: u32) -> PyResult<()> {
        self.at(now)?;
        self.inner.block(now, ClientId(client)).map_err(refused)
    }

    /// A blocked client wakes; returns a CPU to preempt, or None.
    fn wake(&mut self, now: Time, client: u32) -> PyResult<Option<u32>> {
        self.at(now)?;
        Ok(self.inner.wake(now, ClientId(client)).map_err(refused)?.map(|c| c.0))
    }

    /// A client's weight changes (running or not).
    fn set_weight(&mut self, now: Time, client: u32, weight: u64) -> PyResult<()> {
        let w = self::weight(weight)?;
        self.at(now)?;
        self.inner.set_weight(now, ClientId(client), w).map_err(refused)
    }

    /// What idle CPU `cpu` runs next: `(client, slice_ns)`, or None to stay idle until the next event.
    fn pick(&mut self, now: Time, cpu: u32) -> PyResult<Option<(u32, Time)>> {
        self.at(now)?;
        Ok(match self.inner.pick(now, CpuId(cpu)).map_err(refused)? {
            Decision::Run { client, slice } => Some((client.0, slice)),
            Decision::Idle => None,
        })
    }

    /// The client picked for `cpu` stopped after running `ran` ns, because
    /// its slice `"expired"`, it was `"preempted"`, it `"blocked"` or it `"left"`.
    #[pyo3(signature = (now, cpu, client, ran, reason="expired"))]
    fn stopped(&mut self, now: Time, cpu: u32, client: u32, ran: Time, reason: &str) -> PyResult<()> {
        let why = match reason {
            "expired" => StopReason::Expired,
            "preempted" => StopReason::Preempted,
            "blocked" => StopReason::Blocked,
            "left" => StopReason::Left,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "reason {other:?}: one of \"expired\", \"preempted\", \"blocked\", \"left\""
                )))
            }
        };
        self.at(now)?;
        self.inner.stopped(now, CpuId(cpu), ClientId(client), ran, why).map_err(refused)
    }

    /// Check the scheduler's internal invariants; raises `EventError` with what is broken.
    fn check_invariants(&self) -> PyResult<()> {
        self.inner.check_invariants().map_err(EventError::new_err)
    }

    fn __repr__(&self) -> String {
        format!("Scheduler({:?}, cpus={}, quantum={})", self.inner.name(), self.cfg.cpus, self.cfg.quantum)
    }
}
