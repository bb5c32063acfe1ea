//! `propshare.Scenario`: a validated scenario and the text it came from.
//!
//! It keeps its TOML text so that it pickles as that text (to a process
//! pool or a Ray worker) and comes back identical: `_restore` parses it
//! again under the same file label.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use propshare_sim::scenario::{Expect, Scenario};

use crate::convert::toml_table;
use crate::ScenarioError;

/// A validated scenario (see docs/SCENARIOS.md for the format).
#[pyclass(module = "propshare", name = "Scenario", frozen)]
pub struct PyScenario {
    pub scn: Scenario,
    pub file: String,
    text: String,
    stem: String,
}

/// A scenario error as `propshare.ScenarioError`, with its place as attributes.
pub fn scenario_err(py: Python<'_>, e: propshare_sim::scenario::ScenarioError) -> PyErr {
    let err = ScenarioError::new_err(e.to_string());
    let value = err.value(py);
    let _ = value.setattr("file", &e.file);
    let _ = value.setattr("line", e.line);
    let _ = value.setattr("column", e.column);
    let _ = value.setattr("field", &e.field);
    let _ = value.setattr("reason", &e.message);
    err
}

impl PyScenario {
    fn parse(py: Python<'_>, file: String, text: String, stem: String) -> PyResult<PyScenario> {
        let scn = Scenario::parse(&file, &text, &stem).map_err(|e| scenario_err(py, e))?;
        Ok(PyScenario { scn, file, text, stem })
    }
}

#[pymethods]
impl PyScenario {
    /// Load a scenario from a file (a `pathlib.Path`, or a `str` with no
    /// newline) or from TOML text (a `str` with a newline). `name` is the
    /// name when the text gives none (default: the file's stem, or
    /// `"scenario"` for text).
    #[staticmethod]
    #[pyo3(signature = (path_or_text, name=None))]
    fn from_toml(py: Python<'_>, path_or_text: &Bound<'_, PyAny>, name: Option<String>) -> PyResult<PyScenario> {
        let text: Option<String> = match path_or_text.extract::<String>() {
            Ok(s) if s.contains('\n') => Some(s),
            _ => None,
        };
        if let Some(text) = text {
            return PyScenario::parse(py, "<toml>".into(), text, name.unwrap_or_else(|| "scenario".into()));
        }
        let path: PathBuf = path_or_text.extract()?;
        let text = Scenario::read_text(&path).map_err(|e| scenario_err(py, e))?;
        let stem =
            name.unwrap_or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
        PyScenario::parse(py, path.display().to_string(), text, stem)
    }

    /// Build a scenario from Python values laid out as the TOML file format
    /// (`{"machine": {"cpus": 2, ...}, "clients": [{...}], ...}`); it is
    /// written as TOML text (`.toml`) and validated as a file would be, so
    /// an error names the field (`<dict>:LINE:COL: clients[0].weight: ...`,
    /// lines of `.toml`).
    #[staticmethod]
    #[pyo3(signature = (spec, name="scenario"))]
    fn from_dict(py: Python<'_>, spec: &Bound<'_, PyDict>, name: &str) -> PyResult<PyScenario> {
        let table = toml_table(spec, "")?;
        let text = toml::to_string(&table)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("cannot write the scenario as TOML: {e}")))?;
        PyScenario::parse(py, "<dict>".into(), text, name.to_string())
    }

    /// Parse `text` again under `file` (unpickling).
    #[staticmethod]
    fn _restore(py: Python<'_>, file: String, text: String, stem: String) -> PyResult<PyScenario> {
        PyScenario::parse(py, file, text, stem)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let restore = py.get_type::<PyScenario>().getattr("_restore")?;
        let args = (me.file.clone(), me.text.clone(), me.stem.clone()).into_pyobject(py)?;
        PyTuple::new(py, [restore.into_any(), args.into_any()])
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.downcast::<PyScenario>().is_ok_and(|o| o.get().scn == self.scn)
    }

    fn __repr__(&self) -> String {
        format!(
            "Scenario({:?}: {} CPU(s), {} schedulers, horizon {} ns, {} claims, from {})",
            self.scn.name,
            self.scn.machine.cpus,
            self.scn.schedulers.len(),
            self.scn.machine.horizon,
            self.scn.claims.len(),
            self.file
        )
    }

    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        &self.scn.name
    }
    /// Its description.
    #[getter]
    fn description(&self) -> &str {
        &self.scn.description
    }
    /// The paper it reproduces, if any.
    #[getter]
    fn paper(&self) -> Option<&str> {
        self.scn.paper.as_deref()
    }
    /// The file it was read from (`<toml>` for text, `<dict>` for dicts).
    #[getter]
    fn file(&self) -> &str {
        &self.file
    }
    /// Its TOML text.
    #[getter]
    fn toml(&self) -> &str {
        &self.text
    }
    /// The schedulers it runs (names or specs).
    #[getter]
    fn schedulers(&self) -> Vec<String> {
        self.scn.schedulers.clone()
    }
    /// Base seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.scn.seed
    }
    /// Runs per scheduler (seeds `seed .. seed + repeat`).
    #[getter]
    fn repeat(&self) -> u32 {
        self.scn.repeat
    }
    /// P.
    #[getter]
    fn cpus(&self) -> usize {
        self.scn.machine.cpus
    }
    /// The quantum, ns.
    #[getter]
    fn quantum_ns(&self) -> u64 {
        self.scn.machine.quantum
    }
    /// The horizon, ns.
    #[getter]
    fn horizon_ns(&self) -> u64 {
        self.scn.machine.horizon
    }

    /// The clients of run `k` (seed `seed + k`) as drawn: name, weight,
    /// arrival and departure (ns). Chain members join at run time and are
    /// not listed.
    #[pyo3(signature = (k=0))]
    fn clients<'py>(&self, py: Python<'py>, k: u32) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for c in self.scn.clients(k) {
            let d = PyDict::new(py);
            d.set_item("client", c.name)?;
            d.set_item("weight", c.weight.get())?;
            d.set_item("arrive_ns", c.arrive)?;
            d.set_item("depart_ns", c.depart)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Its claims: paper, source, scheduler, metric, client, bounds, expected verdict, where written.
    #[getter]
    fn claims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for c in &self.scn.claims {
            out.append(crate::simulate::claim_dict(py, c)?)?;
        }
        Ok(out)
    }

    /// What the run will do that the user may not expect, one line each.
    #[pyo3(signature = (schedulers=None))]
    fn warnings(&self, schedulers: Option<Vec<String>>) -> Vec<String> {
        self.scn.warnings(schedulers.as_deref())
    }
}

/// `"match"` or `"differ"`.
pub fn expect_name(e: &Expect) -> &'static str {
    match e {
        Expect::Match => "match",
        Expect::Differ { .. } => "differ",
    }
}
