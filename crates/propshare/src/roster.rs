//! Bookkeeping shared by every scheduler: which clients exist, their weights,
//! whether each is runnable, running (and where) or blocked, and the checks
//! that turn a host's invalid event into a [`SchedError`] before any
//! algorithm state is touched.
//!
//! The [`crate::Shell`] owns the roster and records every event in it
//! before calling the algorithm's [`crate::Policy`], which reads it and
//! updates its own queues knowing the event is valid.

use crate::algo::reweigh::Reweigh;
use crate::model::{ClientId, CpuId, SchedError, StopReason, Weight};
use crate::readjust::{Phi, Readjustment};

/// The largest client id a scheduler accepts: per-client tables are dense.
pub const MAX_CLIENT_ID: u32 = (1 << 26) - 1;

/// A dense table of per-client values indexed by [`ClientId`].
#[derive(Clone, Debug)]
pub struct ClientTable<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for ClientTable<T> {
    fn default() -> Self {
        ClientTable { slots: Vec::new() }
    }
}

impl<T> ClientTable<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value for `c`, if any.
    #[inline]
    pub fn get(&self, c: ClientId) -> Option<&T> {
        self.slots.get(c.index()).and_then(Option::as_ref)
    }

    /// The value for `c`, mutably, if any.
    #[inline]
    pub fn get_mut(&mut self, c: ClientId) -> Option<&mut T> {
        self.slots.get_mut(c.index()).and_then(Option::as_mut)
    }

    /// Store `value` for `c`, growing the table; returns the old value.
    pub fn insert(&mut self, c: ClientId, value: T) -> Option<T> {
        if c.index() >= self.slots.len() {
            self.slots.resize_with(c.index() + 1, || None);
        }
        self.slots[c.index()].replace(value)
    }

    /// Remove and return the value for `c`.
    pub fn remove(&mut self, c: ClientId) -> Option<T> {
        self.slots.get_mut(c.index()).and_then(Option::take)
    }

    /// Every (id, value) present, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (ClientId, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, v)| v.as_ref().map(|v| (ClientId(i as u32), v)))
    }
}

impl<T> std::ops::Index<ClientId> for ClientTable<T> {
    type Output = T;
    /// Panics if `c` is absent: for use after the roster has validated `c`.
    fn index(&self, c: ClientId) -> &T {
        self.get(c).expect("client validated by the roster")
    }
}

impl<T> std::ops::IndexMut<ClientId> for ClientTable<T> {
    fn index_mut(&mut self, c: ClientId) -> &mut T {
        self.get_mut(c).expect("client validated by the roster")
    }
}

/// Where a client is in its life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Runnable and waiting for a CPU.
    Runnable,
    /// Picked for this CPU and not yet reported stopped.
    Running(CpuId),
    /// Blocked until `wake`.
    Blocked,
}

impl Status {
    fn describe(self) -> &'static str {
        match self {
            Status::Runnable => "runnable",
            Status::Running(_) => "running",
            Status::Blocked => "blocked",
        }
    }

    /// Runnable or running.
    #[inline]
    pub fn is_runnable(self) -> bool {
        !matches!(self, Status::Blocked)
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    status: Status,
    weight: Weight,
}

/// The clients, their weights and states, which client each CPU runs, and
/// (for the `+readjust` variants) the readjustment bookkeeping.
#[derive(Clone, Debug)]
pub struct Roster {
    clients: ClientTable<Entry>,
    on_cpu: Vec<Option<ClientId>>,
    joined: usize,
    runnable: usize,
    runnable_weight: u64,
    readjust: Reweigh,
}

impl Roster {
    /// A roster for `cpus` CPUs, no readjustment.
    pub fn new(cpus: usize) -> Roster {
        Roster::with_readjustment(cpus, Reweigh::new(false))
    }

    /// A roster for `cpus` CPUs that keeps readjusted weights as `readjust` says.
    pub fn with_readjustment(cpus: usize, readjust: Reweigh) -> Roster {
        Roster {
            clients: ClientTable::new(),
            on_cpu: vec![None; cpus],
            joined: 0,
            runnable: 0,
            runnable_weight: 0,
            readjust,
        }
    }

    /// The readjustment bookkeeping (disabled for the plain variants).
    #[inline]
    pub fn readjustment(&self) -> &Reweigh {
        &self.readjust
    }

    /// The dedicated-CPU rule: the heaviest waiting capped client, if the
    /// rule is on ([`Reweigh::waiting_capped`]).
    #[inline]
    pub fn waiting_capped(&self) -> Option<ClientId> {
        self.readjust.waiting_capped(self)
    }

    /// `c` (weight `w`) entered the runnable set: readjustment bookkeeping.
    pub(crate) fn readjust_insert(&mut self, c: ClientId, w: Weight) {
        self.readjust.insert(c, w);
    }

    /// `c`'s weight changed from `old` to `new`; `runnable` says whether it
    /// is in the runnable set: readjustment bookkeeping.
    pub(crate) fn readjust_change_weight(&mut self, c: ClientId, old: Weight, new: Weight, runnable: bool) {
        self.readjust.change_weight(c, old, new, runnable);
    }

    /// `c` (weight `w`) left the runnable set: readjustment bookkeeping.
    pub(crate) fn readjust_remove(&mut self, c: ClientId, w: Weight) {
        self.readjust.remove(c, w);
    }

    /// Readjust the runnable set: the fluid rate and every φ that changed
    /// ([`Reweigh::refresh`]).
    pub(crate) fn refresh_readjustment(&mut self) -> (Readjustment, Vec<(ClientId, Phi)>) {
        let clients = &self.clients;
        self.readjust
            .refresh_over(self.on_cpu.len(), self.runnable, self.runnable_weight, |c| clients.get(c).map(|e| e.weight))
    }

    /// Number of clients running (picked and not yet stopped). O(P).
    pub fn running(&self) -> usize {
        self.on_cpu.iter().flatten().count()
    }

    /// Number of clients present (runnable, running or blocked).
    #[inline]
    pub fn len(&self) -> usize {
        self.joined
    }

    /// No client present.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.joined == 0
    }

    /// The roster's own invariants: R1, the runnable count and weight are
    /// those of the clients runnable or running; R2, a client is running on
    /// k exactly when CPU k runs it.
    pub fn check_invariants(&self) -> Result<(), String> {
        let (mut n, mut w, mut present) = (0usize, 0u64, 0usize);
        for (c, e) in self.clients.iter() {
            present += 1;
            if e.status.is_runnable() {
                n += 1;
                w += e.weight.get();
            }
            if let Status::Running(k) = e.status {
                if self.on_cpu(k) != Some(c) {
                    return Err(format!("R2: {c} is running on {k}, which runs {:?}", self.on_cpu(k)));
                }
            }
        }
        for (k, c) in self.on_cpu.iter().enumerate() {
            if let Some(c) = *c {
                if self.status(c) != Ok(Status::Running(CpuId(k as u32))) {
                    return Err(format!("R2: cpu {k} runs {c}, whose state is {:?}", self.status(c)));
                }
            }
        }
        if (n, w, present) != (self.runnable, self.runnable_weight, self.joined) {
            return Err(format!(
                "R1: counted {n} runnable of weight {w} among {present}, recorded {} of weight {} among {}",
                self.runnable, self.runnable_weight, self.joined
            ));
        }
        Ok(())
    }

    /// P.
    #[inline]
    pub fn cpus(&self) -> usize {
        self.on_cpu.len()
    }

    /// Number of runnable clients, running ones included.
    #[inline]
    pub fn runnable(&self) -> usize {
        self.runnable
    }

    /// Sum of the original weights of runnable clients, running ones included.
    #[inline]
    pub fn runnable_weight(&self) -> u64 {
        self.runnable_weight
    }

    /// The state of `c`, or `UnknownClient`.
    pub fn status(&self, c: ClientId) -> Result<Status, SchedError> {
        self.clients.get(c).map(|e| e.status).ok_or(SchedError::UnknownClient(c))
    }

    /// The weight of `c`, or `UnknownClient`.
    pub fn weight(&self, c: ClientId) -> Result<Weight, SchedError> {
        self.clients.get(c).map(|e| e.weight).ok_or(SchedError::UnknownClient(c))
    }

    /// The client running on `cpu`, if any.
    #[inline]
    pub fn on_cpu(&self, cpu: CpuId) -> Option<ClientId> {
        self.on_cpu.get(cpu.index()).copied().flatten()
    }

    /// Every client with its state and weight, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (ClientId, Status, Weight)> + '_ {
        self.clients.iter().map(|(c, e)| (c, e.status, e.weight))
    }

    /// Validate and record a join: `c` becomes runnable.
    pub fn join(&mut self, c: ClientId, weight: Weight) -> Result<(), SchedError> {
        if c.0 > MAX_CLIENT_ID {
            return Err(SchedError::IdTooLarge(c));
        }
        if self.clients.get(c).is_some() {
            return Err(SchedError::AlreadyJoined(c));
        }
        self.clients.insert(c, Entry { status: Status::Runnable, weight });
        self.joined += 1;
        self.runnable += 1;
        self.runnable_weight += weight.get();
        Ok(())
    }

    /// Validate and record a leave of a client that is not running.
    /// Returns the state it left from (runnable or blocked).
    pub fn leave(&mut self, c: ClientId) -> Result<Status, SchedError> {
        let status = self.status(c)?;
        if let Status::Running(_) = status {
            return Err(self.wrong(c, "leave", status));
        }
        let e = self.clients.remove(c).expect("present");
        self.joined -= 1;
        if status.is_runnable() {
            self.runnable -= 1;
            self.runnable_weight -= e.weight.get();
        }
        Ok(status)
    }

    /// Validate and record a block of a runnable client that is not running.
    pub fn block(&mut self, c: ClientId) -> Result<(), SchedError> {
        self.switch(c, "block", Status::Runnable, Status::Blocked)
    }

    /// Validate and record a wake of a blocked client.
    pub fn wake(&mut self, c: ClientId) -> Result<(), SchedError> {
        self.switch(c, "wake", Status::Blocked, Status::Runnable)
    }

    /// `event` moves `c` from status `from` (any other is an error) to `to`.
    fn switch(&mut self, c: ClientId, event: &'static str, from: Status, to: Status) -> Result<(), SchedError> {
        let status = self.status(c)?;
        if status != from {
            return Err(self.wrong(c, event, status));
        }
        self.set_status(c, to);
        Ok(())
    }

    /// Validate and record a weight change; returns the old weight.
    pub fn set_weight(&mut self, c: ClientId, weight: Weight) -> Result<Weight, SchedError> {
        let e = self.clients.get_mut(c).ok_or(SchedError::UnknownClient(c))?;
        let old = std::mem::replace(&mut e.weight, weight);
        if e.status.is_runnable() {
            self.runnable_weight = self.runnable_weight - old.get() + weight.get();
        }
        Ok(old)
    }

    /// Validate a `pick` for `cpu`: it must exist and be idle.
    pub fn check_pick(&self, cpu: CpuId) -> Result<(), SchedError> {
        match self.on_cpu.get(cpu.index()) {
            None => Err(SchedError::NoSuchCpu { cpu, cpus: self.cpus() }),
            Some(Some(client)) => Err(SchedError::CpuBusy { cpu, client: *client }),
            Some(None) => Ok(()),
        }
    }

    /// Record that `pick` chose `c` for `cpu`. `c` must be runnable and not running
    /// (a scheduler bug otherwise, caught here in debug builds).
    pub fn start(&mut self, cpu: CpuId, c: ClientId) {
        debug_assert_eq!(self.status(c), Ok(Status::Runnable), "{c} picked for {cpu}");
        debug_assert!(self.on_cpu[cpu.index()].is_none());
        self.set_status(c, Status::Running(cpu));
        self.on_cpu[cpu.index()] = Some(c);
    }

    /// Validate and record `stopped(cpu, c, reason)`. Returns `c`'s weight.
    pub fn stop(&mut self, cpu: CpuId, c: ClientId, reason: StopReason) -> Result<Weight, SchedError> {
        if cpu.index() >= self.cpus() {
            return Err(SchedError::NoSuchCpu { cpu, cpus: self.cpus() });
        }
        if self.status(c)? != Status::Running(cpu) {
            return Err(SchedError::NotRunningThere { client: c, cpu });
        }
        self.on_cpu[cpu.index()] = None;
        let weight = self.weight(c)?;
        match reason {
            StopReason::Expired | StopReason::Preempted => self.set_status(c, Status::Runnable),
            StopReason::Blocked => self.set_status(c, Status::Blocked),
            StopReason::Left => {
                self.set_status(c, Status::Blocked);
                self.clients.remove(c);
                self.joined -= 1;
            }
        }
        Ok(weight)
    }

    fn set_status(&mut self, c: ClientId, status: Status) {
        let e = &mut self.clients[c];
        match (e.status.is_runnable(), status.is_runnable()) {
            (true, false) => {
                self.runnable -= 1;
                self.runnable_weight -= e.weight.get();
            }
            (false, true) => {
                self.runnable += 1;
                self.runnable_weight += e.weight.get();
            }
            _ => {}
        }
        e.status = status;
    }

    fn wrong(&self, client: ClientId, event: &'static str, status: Status) -> SchedError {
        SchedError::WrongState { client, event, state: status.describe() }
    }
}
