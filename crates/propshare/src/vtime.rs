//! Virtual time for the tag-based fair queueing algorithms (WFQ, SFQ, WF2Q+,
//! SFS, DFS, stride).
//!
//! A client with (readjusted) weight φ that runs `q` ns advances its tag by
//! `q / φ`. Tags are kept exact enough to decide with integers: a [`VTime`]
//! is `u128` in units of `1 / VT_SCALE` ns per unit of weight, and
//!
//! ```text
//!     tag_delta(q, φ = num/den) = floor(q · VT_SCALE · den / num).
//! ```
//!
//! With q < 2^40 ns (18 minutes), VT_SCALE = 2^32 and den ≤ 2^26 the product
//! stays below 2^98, far inside u128, and a sum of 2^20 such deltas cannot
//! overflow. The floor loses less than 2^-32 ns per unit of weight per
//! charge, far below anything a decision can observe.

use crate::model::Time;
use crate::readjust::{Phi, Readjustment};
use crate::wide::mul_div;

/// Virtual time: ns per unit weight, scaled by [`VT_SCALE`].
pub type VTime = u128;

/// Fixed-point scale of [`VTime`].
pub const VT_SCALE: u128 = 1 << 32;

/// The tag advance for running `ran` ns at weight `phi`.
#[inline]
pub fn tag_delta(ran: Time, phi: Phi) -> VTime {
    (ran as u128 * VT_SCALE * phi.den as u128) / phi.num.max(1) as u128
}

/// A tag after a weight change from `old` to `new`. A tag `S` stands for
/// the service `φ(S − v)` ahead of (or, below `v`, behind) the virtual time
/// `v`. When the weight is raised, the new tag keeps that lag in service:
///
/// ```text
///     S' = v + (S − v) · φ_old / φ_new        (the distance rounded down, S' ≥ 0),
/// ```
///
/// so `φ_new (S' − v) = φ_old (S − v)`. Keeping `S` instead would multiply
/// the lead by `φ_new / φ_old`: a client that ran one quantum ahead at
/// weight 1 and is raised to 1000 would be a thousand quanta ahead. This is
/// stride scheduling's `client_modify` (remaining pass scaled by the stride
/// ratio) and DFS's Gap DFS-8, in the tags of WFQ, WF2Q+, SFQ, SFS and VTRR.
///
/// When the weight is dropped (or unchanged) the tag is kept: the client's
/// lead in service shrinks by `φ_new / φ_old`, so it never waits longer than
/// it would have. Scaling on a drop too made a client dropped from weight
/// 59201 to 1, a fraction of a quantum ahead, wait more than 13000 quanta in
/// the contract harness (`tests/contract.rs`, liveness); whether that wait
/// is what the fluid model owes it we have not settled.
pub fn keep_lag(tag: VTime, v: VTime, old: Phi, new: Phi) -> VTime {
    let ratio_num = old.num as u128 * new.den.max(1) as u128;
    let ratio_den = old.den.max(1) as u128 * new.num.max(1) as u128;
    if ratio_num >= ratio_den {
        return tag;
    }
    if tag >= v {
        v.saturating_add(mul_div(tag - v, ratio_num, ratio_den, false))
    } else {
        v.saturating_sub(mul_div(v - tag, ratio_num, ratio_den, false))
    }
}

/// The fluid (GPS on one CPU, GMS on P) system virtual time: it advances at
/// `(P' - m) / R` per ns, the rate at which every uncapped client's
/// normalised service grows in the fluid model ([`Readjustment`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct VirtualClock {
    value: VTime,
    last: Time,
    rate_cpus: u64,
    rate_weight: u64,
}

impl VirtualClock {
    /// The virtual time at `now` (advances the clock to `now`).
    pub fn advance(&mut self, now: Time) -> VTime {
        if now > self.last && self.rate_weight > 0 {
            let dt = (now - self.last) as u128;
            self.value += dt * VT_SCALE * self.rate_cpus as u128 / self.rate_weight as u128;
        }
        self.last = self.last.max(now);
        self.value
    }

    /// Change the rate from `now` on (call after `advance(now)`).
    pub fn set_rate(&mut self, r: &Readjustment) {
        self.rate_cpus = r.feasible_cpus();
        self.rate_weight = r.feasible_weight;
    }

    /// The current value without advancing.
    pub fn value(&self) -> VTime {
        self.value
    }
}
