//! # propshare-py: the native module of the `propshare` Python package
//!
//! A thin host over the core and simulator crates, for notebooks and
//! sweeps; the pure-Python package (`python/propshare`) turns what it
//! returns into pandas DataFrames and runs sweeps.
//!
//! * [`schedulers`]: the registry with its typed parameters.
//! * [`scenario::PyScenario`]: a validated scenario, from a TOML file, TOML
//!   text or Python dicts; it pickles as its text.
//! * [`simulate::simulate`]: `propshare_sim::run::run_scenario`, as the CLI
//!   runs it, with the GIL released; results as columns.
//! * [`stepping::PyScheduler`]: one scheduler driven event by event.
//! * [`fluid::PyFluid`]: the exact fluid reference driven by events.
//!
//! Every error becomes a Python exception carrying the message the CLI
//! prints (a scenario's as `file:line:column: field: message`).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use propshare::registry::{self, ParamKind};

mod convert;
mod fluid;
mod scenario;
mod simulate;
mod stepping;

create_exception!(propshare, PropshareError, PyException, "Base class of every propshare error.");
create_exception!(
    propshare,
    ScenarioError,
    PropshareError,
    "A scenario that cannot be loaded: `file:line:column: field: message`, with those as attributes."
);
create_exception!(
    propshare,
    SchedulerError,
    PropshareError,
    "A scheduler name, spec, parameter or configuration that is not valid."
);
create_exception!(
    propshare,
    EventError,
    PropshareError,
    "An event the scheduler or the fluid reference refused; its state is unchanged."
);
create_exception!(propshare, SimulationError, PropshareError, "A simulation that failed or was too large to start.");

/// Every registered scheduler: name, summary and parameters (name, kind
/// `"int"` or `"bool"`, range, default, doc), as `propshare list --params`.
#[pyfunction]
fn schedulers(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for name in registry::names() {
        let entry = registry::find(name).expect("a registered name");
        let params = PyList::empty(py);
        for p in entry.params {
            let d = PyDict::new(py);
            d.set_item("name", p.name)?;
            match p.kind {
                ParamKind::Int { min, max } => {
                    d.set_item("kind", "int")?;
                    d.set_item("min", min)?;
                    d.set_item("max", max)?;
                    d.set_item("default", p.default)?;
                }
                ParamKind::Bool => {
                    d.set_item("kind", "bool")?;
                    d.set_item("min", py.None())?;
                    d.set_item("max", py.None())?;
                    d.set_item("default", p.default != 0)?;
                }
                ParamKind::Choice(names) => {
                    d.set_item("kind", "choice")?;
                    d.set_item("min", py.None())?;
                    d.set_item("max", py.None())?;
                    d.set_item("default", names[p.default as usize])?;
                }
            }
            d.set_item("doc", p.doc)?;
            params.append(d)?;
        }
        let d = PyDict::new(py);
        d.set_item("name", entry.name)?;
        d.set_item("summary", entry.summary)?;
        d.set_item("params", params)?;
        out.append(d)?;
    }
    Ok(out)
}

/// Check a scheduler spec (`"gdq(delta=8)"`) without building it; raises
/// [`SchedulerError`] naming what is wrong.
#[pyfunction]
fn check_scheduler(spec: &str) -> PyResult<()> {
    registry::check(spec).map_err(|e| SchedulerError::new_err(e.to_string()))
}

/// A duration as the scenario files write it (`"1ms"`, `"2.5s"`), in ns.
#[pyfunction]
fn parse_duration(text: &str) -> PyResult<u64> {
    propshare::parse_duration(text).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

#[pymodule]
fn _propshare(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PropshareError", py.get_type::<PropshareError>())?;
    m.add("ScenarioError", py.get_type::<ScenarioError>())?;
    m.add("SchedulerError", py.get_type::<SchedulerError>())?;
    m.add("EventError", py.get_type::<EventError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(check_scheduler, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate, m)?)?;
    m.add_class::<scenario::PyScenario>()?;
    m.add_class::<simulate::PyRunResult>()?;
    m.add_class::<stepping::PyScheduler>()?;
    m.add_class::<fluid::PyFluid>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
