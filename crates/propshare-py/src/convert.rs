//! Python values to TOML: a scenario built from dicts becomes the TOML
//! text of the same scenario, which the simulator's loader validates with
//! its located errors (fields named as in the file format).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// `value` (dicts with string keys, lists, tuples, str, int, float, bool)
/// as a TOML value; `at` is its dotted path, for the error.
pub fn toml_value(value: &Bound<'_, PyAny>, at: &str) -> PyResult<toml::Value> {
    let here = |what: &str| PyTypeError::new_err(format!("{}: {what}", if at.is_empty() { "scenario" } else { at }));
    // bool before int: Python's bool is an int.
    if let Ok(b) = value.downcast::<PyBool>() {
        return Ok(toml::Value::Boolean(b.is_true()));
    }
    if let Ok(i) = value.downcast::<PyInt>() {
        let v: i64 = i.extract().map_err(|_| here("an integer outside the 64-bit signed range TOML allows"))?;
        return Ok(toml::Value::Integer(v));
    }
    if let Ok(f) = value.downcast::<PyFloat>() {
        return Ok(toml::Value::Float(f.value()));
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(toml::Value::String(s.extract::<String>()?));
    }
    if let Ok(d) = value.downcast::<PyDict>() {
        return Ok(toml::Value::Table(toml_table(d, at)?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (k, item) in value.try_iter()?.enumerate() {
            out.push(toml_value(&item?, &format!("{at}[{k}]"))?);
        }
        return Ok(toml::Value::Array(out));
    }
    Err(here(&format!(
        "a {} cannot be written in a scenario (use dicts, lists, str, int, float or bool)",
        value.get_type().name()?
    )))
}

/// A dict with string keys as a TOML table; `None` values are left out.
pub fn toml_table(d: &Bound<'_, PyDict>, at: &str) -> PyResult<toml::Table> {
    let mut t = toml::Table::new();
    for (k, v) in d.iter() {
        let key: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{}: keys must be strings, got {}",
                if at.is_empty() { "scenario" } else { at },
                k
            ))
        })?;
        if v.is_none() {
            continue;
        }
        let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
        t.insert(key, toml_value(&v, &path)?);
    }
    Ok(t)
}
