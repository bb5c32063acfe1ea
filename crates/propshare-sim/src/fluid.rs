//! The exact fluid reference: the multiprocessor fluid model (GPS on one
//! CPU, GMS on P CPUs; SFS paper section 2.3) with weight readjustment.
//!
//! # The model
//!
//! At every instant the runnable clients share P' = min(P, N) CPUs in
//! proportion to their readjusted weights φ ([`propshare::readjust`]): the m
//! capped clients get exactly one CPU each, every other runnable client i gets
//!
//! ```text
//!     rate_i = w_i · (P' - m) / R        (R = Σ w over uncapped clients)
//! ```
//!
//! CPUs. Blocked and departed clients get nothing. Rates change only at
//! events (join, leave, block, wake, weight change).
//!
//! # How it is computed in O(P + log N) per event
//!
//! Uncapped clients all grow in proportion to their weight, so one global
//! *normalised service* `V(t) = ∫ (P' - m)/R dt` serves them all: an uncapped
//! client's ideal service is `base_i + w_i · (V(t) - V_i)` where `V_i` is V
//! when it was last settled. A capped client's is `base_i + (t - t_i)`. An
//! event advances V, settles only the clients whose rate law changes (the
//! client concerned and the at most 2P whose cap status changes), and updates
//! the weight-ordered set. Nothing is O(N).
//!
//! # Exactness
//!
//! Service is kept in fixed point, `2^-64` ns ([`FRAC`] bits). Each advance of
//! V rounds down by less than one unit, so after E events a client of weight
//! w is off by less than `w · E · 2^-64` ns: below `2^-32` ns per event even
//! at the largest weight, i.e. under 0.25 ns after a billion events. Tests
//! compare it with exact big-rational arithmetic. Limits: simulated time below
//! `2^50` ns (13 days) and P ≤ 2^12 keep V inside u128.

use propshare::readjust::{FeasibleSet, Readjustment};
use propshare::{ClientId, ClientTable, Time, Weight};

/// Fixed-point fraction bits of service values.
pub const FRAC: u32 = 64;

/// Fixed-point service: ns · 2^FRAC.
pub type Service = u128;

/// Convert whole ns to [`Service`].
#[inline]
pub fn service_of_ns(ns: u64) -> Service {
    (ns as u128) << FRAC
}

/// Convert [`Service`] to (fractional) ns, for reports.
pub fn ns_of_service(s: Service) -> f64 {
    (s >> FRAC) as f64 + ((s & ((1u128 << FRAC) - 1)) as f64) / (1u128 << FRAC) as f64
}

#[derive(Clone, Copy, Debug)]
struct FluidClient {
    weight: Weight,
    runnable: bool,
    capped: bool,
    /// Ideal service up to the last settle.
    base: Service,
    /// V at the last settle (uncapped clients).
    v_mark: u128,
    /// Time of the last settle (capped clients).
    t_mark: Time,
}

/// The fluid reference for one run.
#[derive(Clone, Debug)]
pub struct Fluid {
    cpus: usize,
    clients: ClientTable<FluidClient>,
    runnable: FeasibleSet,
    readjustment: Readjustment,
    capped: Vec<ClientId>,
    /// Scratch list for [`Fluid::readjust`] (no allocation per event).
    now_capped: Vec<ClientId>,
    v: u128,
    last: Time,
    /// The last advance of V: over `step_dt` ns it grew by `step_dv`
    /// (0 = none since the readjustment changed). Steps of one quantum
    /// repeat, and this saves their u128 division.
    step_dt: Time,
    step_dv: u128,
}

impl Fluid {
    /// A fluid reference for `cpus` CPUs with no clients.
    pub fn new(cpus: usize) -> Fluid {
        Fluid {
            cpus,
            clients: ClientTable::new(),
            runnable: FeasibleSet::new(),
            readjustment: Readjustment::EMPTY,
            capped: Vec::new(),
            now_capped: Vec::new(),
            v: 0,
            last: 0,
            step_dt: 0,
            step_dv: 0,
        }
    }

    /// Make room for clients with ids below `n` (avoids regrowing the table
    /// while a million clients join).
    pub fn reserve(&mut self, n: usize) {
        if n > 0 && self.clients.get(ClientId(n as u32 - 1)).is_none() {
            // Grow once to n slots; the placeholder is removed at once.
            let c = ClientId(n as u32 - 1);
            let placeholder =
                FluidClient { weight: Weight::ONE, runnable: false, capped: false, base: 0, v_mark: 0, t_mark: 0 };
            self.clients.insert(c, placeholder);
            self.clients.remove(c);
        }
    }

    /// The readjustment in force.
    pub fn readjustment(&self) -> Readjustment {
        self.readjustment
    }

    #[inline]
    fn advance(&mut self, now: Time) {
        debug_assert!(now >= self.last, "fluid time went backwards");
        let r = self.readjustment;
        if now > self.last && r.feasible_weight > 0 {
            let dt = now - self.last;
            if dt != self.step_dt {
                self.step_dt = dt;
                self.step_dv = ((dt as u128) << FRAC) * r.feasible_cpus() as u128 / r.feasible_weight as u128;
            }
            self.v += self.step_dv;
        }
        self.last = self.last.max(now);
    }

    #[inline]
    fn value(&self, c: &FluidClient, now: Time) -> Service {
        if !c.runnable {
            c.base
        } else if c.capped {
            c.base + service_of_ns(now - c.t_mark)
        } else {
            c.base + c.weight.get() as u128 * (self.v - c.v_mark)
        }
    }

    fn settle(&mut self, id: ClientId) {
        let now = self.last;
        if let Some(c) = self.clients.get(id).copied() {
            let base = self.value(&c, now);
            let v = self.v;
            let e = &mut self.clients[id];
            e.base = base;
            e.v_mark = v;
            e.t_mark = now;
        }
    }

    /// After the runnable set changed: readjust, and switch the rate law of
    /// the clients whose cap status changed (settling them first). O(m + log N)
    /// for m capped clients before or after (m < P).
    ///
    /// Settling a client whose law does not change is harmless (the value is
    /// an exact integer sum either way), so when the capped set changes we
    /// settle all old and new capped clients rather than test membership.
    fn readjust(&mut self) {
        let r = self.runnable.readjust(self.cpus);
        if r != self.readjustment {
            self.step_dt = 0;
        }
        self.readjustment = r;
        let mut now_capped = std::mem::take(&mut self.now_capped);
        now_capped.clear();
        now_capped.extend(self.runnable.heaviest(r.capped).map(|(c, _)| c));
        if now_capped != self.capped {
            for k in 0..self.capped.len() {
                let c = self.capped[k];
                self.settle(c);
                if let Some(e) = self.clients.get_mut(c) {
                    e.capped = false;
                }
            }
            for &c in &now_capped {
                self.settle(c);
                self.clients[c].capped = true;
            }
            std::mem::swap(&mut self.capped, &mut now_capped);
        }
        self.now_capped = now_capped;
    }

    /// Client `c` joins, runnable, with weight `w`, at `now`.
    pub fn join(&mut self, now: Time, c: ClientId, w: Weight) {
        self.advance(now);
        self.clients
            .insert(c, FluidClient { weight: w, runnable: true, capped: false, base: 0, v_mark: self.v, t_mark: now });
        self.runnable.insert(c, w);
        self.readjust();
    }

    /// Client `c` leaves at `now`; returns its final ideal service.
    pub fn leave(&mut self, now: Time, c: ClientId) -> Service {
        let ideal = self.ideal(now, c);
        self.set_runnable(now, c, false);
        self.clients.remove(c);
        ideal
    }

    /// Client `c` blocks at `now`.
    pub fn block(&mut self, now: Time, c: ClientId) {
        self.set_runnable(now, c, false);
    }

    /// Client `c` wakes at `now`.
    pub fn wake(&mut self, now: Time, c: ClientId) {
        self.set_runnable(now, c, true);
    }

    fn set_runnable(&mut self, now: Time, c: ClientId, runnable: bool) {
        self.advance(now);
        let Some(e) = self.clients.get(c).copied() else { return };
        if e.runnable == runnable {
            return;
        }
        self.settle(c);
        self.clients[c].runnable = runnable;
        if runnable {
            self.runnable.insert(c, e.weight);
        } else {
            self.runnable.remove(c, e.weight);
            self.clients[c].capped = false;
            self.capped.retain(|&x| x != c);
        }
        self.readjust();
    }

    /// Client `c`'s weight becomes `w` at `now`.
    pub fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) {
        self.advance(now);
        let Some(e) = self.clients.get(c).copied() else { return };
        self.settle(c);
        if e.runnable {
            self.runnable.remove(c, e.weight);
            self.runnable.insert(c, w);
        }
        self.clients[c].weight = w;
        if e.runnable {
            self.readjust();
        }
    }

    /// Client `c`'s ideal service from its join to `now` (`now` ≥ the last event).
    #[inline]
    pub fn ideal(&mut self, now: Time, c: ClientId) -> Service {
        self.advance(now);
        self.clients.get(c).map(|e| self.value(e, now)).unwrap_or(0)
    }

    /// The normalised service V at `now` (`now` ≥ the last event): a client
    /// that joined when V was 0 and has been runnable and uncapped since has
    /// ideal service `w · V` (what [`Fluid::ideal`] returns for it).
    #[inline]
    pub fn normalised(&mut self, now: Time) -> u128 {
        self.advance(now);
        self.v
    }

    /// Client `c`'s current ideal rate in CPUs as an exact fraction (num, den).
    pub fn rate(&self, c: ClientId) -> (u64, u64) {
        match self.clients.get(c) {
            Some(e) if e.runnable && e.capped => (1, 1),
            Some(e) if e.runnable => {
                (e.weight.get() * self.readjustment.feasible_cpus(), self.readjustment.feasible_weight)
            }
            _ => (0, 1),
        }
    }
}
