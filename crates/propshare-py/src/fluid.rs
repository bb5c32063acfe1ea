//! `propshare.Fluid`: the exact fluid reference (GMS with readjustment,
//! `propshare_sim::fluid`) driven by events from Python: give it joins,
//! leaves, blocks, wakes and weight changes, read each client's ideal
//! service. The simulator's own callers never break its preconditions;
//! this wrapper checks them (known clients, states, time order, the
//! limits of its fixed point) and raises `propshare.EventError`.

use std::collections::HashMap;

use pyo3::prelude::*;

use propshare::{ClientId, Time};
use propshare_sim::fluid::{ns_of_service, Fluid};

use crate::stepping::{monotone, weight};
use crate::EventError;

/// The largest time the fluid reference's fixed point covers (`2^50` ns, 13 days).
const MAX_TIME: Time = 1 << 50;
/// The most CPUs it covers.
const MAX_CPUS: usize = 1 << 12;

/// Ideal service of every client under the multiprocessor fluid model.
#[pyclass(module = "propshare", name = "Fluid")]
pub struct PyFluid {
    fluid: Fluid,
    cpus: usize,
    /// Present clients: runnable or not.
    runnable: HashMap<u32, bool>,
    now: Time,
}

impl PyFluid {
    fn at(&mut self, now: Time) -> PyResult<()> {
        if now >= MAX_TIME {
            return Err(EventError::new_err(format!("now = {now} ns is past the fluid reference's limit of 2^50 ns")));
        }
        self.now = monotone(self.now, now)?;
        Ok(())
    }

    fn state(&self, client: u32) -> PyResult<bool> {
        self.runnable
            .get(&client)
            .copied()
            .ok_or_else(|| EventError::new_err(format!("client {client} is not present")))
    }
}

#[pymethods]
impl PyFluid {
    /// A fluid reference for `cpus` CPUs (1 to 4096) with no clients.
    #[new]
    #[pyo3(signature = (cpus=1))]
    fn new(cpus: usize) -> PyResult<PyFluid> {
        if !(1..=MAX_CPUS).contains(&cpus) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("cpus = {cpus}: between 1 and {MAX_CPUS}")));
        }
        Ok(PyFluid { fluid: Fluid::new(cpus), cpus, runnable: HashMap::new(), now: 0 })
    }

    /// P.
    #[getter]
    fn cpus(&self) -> usize {
        self.cpus
    }

    /// Client `client` joins, runnable, with `weight`.
    fn join(&mut self, now: Time, client: u32, weight: u64) -> PyResult<()> {
        let w = self::weight(weight)?;
        if self.runnable.contains_key(&client) {
            return Err(EventError::new_err(format!("client {client} has already joined")));
        }
        self.at(now)?;
        self.fluid.join(now, ClientId(client), w);
        self.runnable.insert(client, true);
        Ok(())
    }

    /// Client `client` leaves; returns its final ideal service, ns.
    fn leave(&mut self, now: Time, client: u32) -> PyResult<f64> {
        self.state(client)?;
        self.at(now)?;
        self.runnable.remove(&client);
        Ok(ns_of_service(self.fluid.leave(now, ClientId(client))))
    }

    /// A runnable client blocks.
    fn block(&mut self, now: Time, client: u32) -> PyResult<()> {
        if !self.state(client)? {
            return Err(EventError::new_err(format!("client {client} cannot block: it is blocked")));
        }
        self.at(now)?;
        self.fluid.block(now, ClientId(client));
        self.runnable.insert(client, false);
        Ok(())
    }

    /// A blocked client wakes.
    fn wake(&mut self, now: Time, client: u32) -> PyResult<()> {
        if self.state(client)? {
            return Err(EventError::new_err(format!("client {client} cannot wake: it is runnable")));
        }
        self.at(now)?;
        self.fluid.wake(now, ClientId(client));
        self.runnable.insert(client, true);
        Ok(())
    }

    /// A client's weight changes.
    fn set_weight(&mut self, now: Time, client: u32, weight: u64) -> PyResult<()> {
        let w = self::weight(weight)?;
        self.state(client)?;
        self.at(now)?;
        self.fluid.set_weight(now, ClientId(client), w);
        Ok(())
    }

    /// Client `client`'s ideal service from its join to `now`, ns (exact to
    /// well below 1 ns; `now` no earlier than the last event).
    fn ideal(&mut self, now: Time, client: u32) -> PyResult<f64> {
        self.state(client)?;
        self.at(now)?;
        Ok(ns_of_service(self.fluid.ideal(now, ClientId(client))))
    }

    /// Client `client`'s current rate in CPUs as an exact fraction `(num, den)` in lowest terms.
    fn rate(&self, client: u32) -> PyResult<(u64, u64)> {
        self.state(client)?;
        let (num, den) = self.fluid.rate(ClientId(client));
        let g = gcd(num, den);
        Ok((num / g, den / g))
    }

    /// The clients present, sorted.
    #[getter]
    fn clients(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.runnable.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}
