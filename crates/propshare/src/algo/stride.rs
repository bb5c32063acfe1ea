//! Stride scheduling (Waldspurger and Weihl, "Stride scheduling:
//! deterministic proportional-share resource management", MIT/LCS/TM-528,
//! 1995, sections 2 and 3; Waldspurger's thesis, MIT/LCS/TR-667, chapter 4),
//! on P CPUs with one global queue: any CPU that needs work takes the
//! waiting client with the smallest pass.
//!
//! # Rules (the paper's pseudo-code, section 3)
//!
//! * `stride = stride1 / tickets`. Our tickets are the (readjusted) weight φ
//!   and `stride1 = Q · VT_SCALE`, so a stride is [`tag_delta`]`(Q, φ)`: the
//!   pass is a [`VTime`], exact to 2^-32 ns per unit weight.
//! * Allocation: run the client with the smallest pass (ties: lower id);
//!   when it stops after `d` ns its pass advances by `stride · d/Q` (the
//!   paper's fractional-quantum rule, section 3.3 "nonuniform quanta").
//! * Global pass (`global_pass_update`): advances by `global_stride =
//!   stride1 / global_tickets` per quantum of elapsed time; on P CPUs at
//!   `P'` times that rate, i.e. the fluid virtual time ([`VirtualClock`]).
//! * `client_join`: `pass = global_pass + remain`, where a new client has
//!   `remain = stride`; `client_leave` (block) saves
//!   `remain = pass - global_pass` (may be negative: a client that was behind
//!   keeps its credit).
//! * `client_modify` (weight change): `remain := remain · stride'/stride`,
//!   then `pass = global_pass + remain`.
//!
//! Bound we test (TM-528 section 4: the relative error of any pair of
//! clients is at most one quantum): on one CPU with static weights and full
//! quanta, with `a_i` the quanta received,
//!
//! ```text
//!     -w_j ≤ a_i·w_j - a_j·w_i ≤ w_i     (so `a_i - a_j·w_i/w_j` lies in `[-1, w_i/w_j]`),
//! ```
//!
//! which implies the paper's `|a_i - (a_i + a_j)·w_i/(w_i + w_j)| < 1`. Its
//! absolute error is O(N) for basic stride (hierarchical stride, not built
//! here, gives O(log N)); on a static set its decisions equal WFQ's (the pass
//! is WFQ's finish tag), which a test checks.
//!
//! With [`Stride::with_readjustment`] (`stride+readjust`) tickets are the
//! readjusted weights (SFS paper section 2.9) and a readjustment is a
//! `client_modify` of each client whose φ changed.
//!
//! Cost: pick, stop, join, leave, block, wake O(log N) (a B-tree by pass);
//! readjustment adds O(P log N) per event.
//!
//! Gap STRIDE-1: the paper's global pass advances per quantum on one processor; on P
//! CPUs we advance it at the fluid rate `P'/Σφ` (the GMS virtual time). (untested)
//! Gap STRIDE-2: `remain · stride'/stride` is computed exactly in 128 bits and
//! saturates if it would overflow (strides near 2^98, far beyond any real
//! quantum and weight). (untested)

use std::collections::BTreeSet;

use super::one_queue::{OneQueue, TagRules, Tagged};
use crate::model::{ClientId, Time};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Status};
use crate::scheduler::SchedConfig;
use crate::shell::Shell;
use crate::vtime::{tag_delta, VTime, VirtualClock};

/// Stride scheduling on one global queue.
pub type Stride = Shell<OneQueue<StrideRules>>;

/// A client's pass and saved remain.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// Pass (meaningful while runnable).
    pass: VTime,
    /// `pass - global_pass`, saved while blocked.
    remain: i128,
}

/// Stride's rules: the global pass and the queue by pass.
#[derive(Clone, Debug)]
pub struct StrideRules {
    quantum: Time,
    global: VirtualClock,
    queue: BTreeSet<(VTime, ClientId)>,
}

fn to_signed(v: VTime) -> i128 {
    i128::try_from(v).unwrap_or(i128::MAX)
}

/// `global + remain`, at least 0.
fn offset(global: VTime, remain: i128) -> VTime {
    if remain >= 0 {
        global.saturating_add(remain as u128)
    } else {
        global.saturating_sub(remain.unsigned_abs())
    }
}

/// `remain · new / old` without overflow (saturating), exact when it fits.
fn rescale(remain: i128, new: VTime, old: VTime) -> i128 {
    let old = old.max(1);
    let mag = remain.unsigned_abs();
    let scaled = match mag.checked_mul(new) {
        Some(p) => p / old,
        None => (mag / old).saturating_mul(new),
    };
    let scaled = to_signed(scaled);
    if remain < 0 {
        -scaled
    } else {
        scaled
    }
}

impl StrideRules {
    fn stride(&self, phi: Phi) -> VTime {
        tag_delta(self.quantum, phi)
    }

    /// `client_leave`: `remain = pass - global_pass`.
    fn save_remain(&self, t: &mut Tagged<Pass>) {
        t.tags.remain = to_signed(t.tags.pass) - to_signed(self.global.value());
    }
}

impl TagRules for StrideRules {
    type Tags = Pass;
    const NAME: &'static str = "stride";
    const READJUSTED_NAME: &'static str = "stride+readjust";

    fn new(cfg: &SchedConfig) -> Self {
        StrideRules { quantum: cfg.quantum, global: VirtualClock::default(), queue: BTreeSet::new() }
    }

    /// A new client has `remain = stride`.
    fn join_tags(&self, phi: Phi) -> Pass {
        Pass { pass: 0, remain: to_signed(self.stride(phi)) }
    }

    fn advance(&mut self, now: Time) {
        self.global.advance(now);
    }

    fn set_rate(&mut self, rate: &Readjustment) {
        self.global.set_rate(rate);
    }

    /// `client_join`: `pass = global_pass + remain`.
    fn arrive(&mut self, c: ClientId, t: &mut Tagged<Pass>) {
        t.tags.pass = offset(self.global.value(), t.tags.remain);
        self.queue.insert((t.tags.pass, c));
    }

    fn depart(&mut self, c: ClientId, t: &mut Tagged<Pass>) {
        self.queue.remove(&(t.tags.pass, c));
        self.save_remain(t);
    }

    /// The pass advances by `stride · d/Q`.
    fn charge(&mut self, _c: ClientId, t: &mut Tagged<Pass>, ran: Time) {
        t.tags.pass = t.tags.pass.saturating_add(tag_delta(ran, t.phi));
    }

    fn requeue(&mut self, c: ClientId, t: &mut Tagged<Pass>) {
        self.queue.insert((t.tags.pass, c));
    }

    fn park(&mut self, _c: ClientId, t: &mut Tagged<Pass>) {
        self.save_remain(t);
    }

    /// `client_modify`: new tickets, remain scaled by the stride ratio.
    fn reweight(&mut self, c: ClientId, t: &mut Tagged<Pass>, phi: Phi, status: Status) {
        let (old_stride, new_stride) = (self.stride(t.phi), self.stride(phi));
        let queued = status == Status::Runnable;
        if queued {
            self.queue.remove(&(t.tags.pass, c));
        }
        t.phi = phi;
        if status == Status::Blocked {
            t.tags.remain = rescale(t.tags.remain, new_stride, old_stride);
        } else {
            let global = self.global.value();
            let remain = to_signed(t.tags.pass) - to_signed(global);
            t.tags.pass = offset(global, rescale(remain, new_stride, old_stride));
        }
        if queued {
            self.queue.insert((t.tags.pass, c));
        }
    }

    /// The smallest pass (ties: lower id).
    fn queued(&self) -> Vec<ClientId> {
        self.queue.iter().map(|&(_, c)| c).collect()
    }

    fn take(&mut self, _clients: &mut ClientTable<Tagged<Pass>>) -> Option<ClientId> {
        self.queue.pop_first().map(|(_, c)| c)
    }
}
