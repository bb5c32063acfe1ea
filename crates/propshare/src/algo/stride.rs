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
//! Gap: the paper's global pass advances per quantum on one processor; on P
//! CPUs we advance it at the fluid rate `P'/Σφ` (the GMS virtual time).
//! Gap: `remain · stride'/stride` is computed exactly in 128 bits and
//! saturates if it would overflow (strides near 2^98, far beyond any real
//! quantum and weight).

use std::collections::BTreeSet;

use crate::algo::reweigh::{same_phi, Reweigh};
use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::readjust::Phi;
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};
use crate::vtime::{tag_delta, VTime, VirtualClock};

#[derive(Clone, Copy, Debug)]
struct Client {
    /// Pass (meaningful while runnable).
    pass: VTime,
    /// `pass - global_pass`, saved while blocked.
    remain: i128,
    /// Tickets: current (readjusted) weight.
    phi: Phi,
}

/// Stride scheduling on one global queue.
#[derive(Clone, Debug)]
pub struct Stride {
    roster: Roster,
    quantum: Time,
    global: VirtualClock,
    clients: ClientTable<Client>,
    queue: BTreeSet<(VTime, ClientId)>,
    reweigh: Reweigh,
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

impl Stride {
    /// Plain stride scheduling.
    pub fn new(cfg: SchedConfig) -> Stride {
        Stride {
            roster: Roster::new(cfg.cpus),
            quantum: cfg.quantum,
            global: VirtualClock::default(),
            clients: ClientTable::new(),
            queue: BTreeSet::new(),
            reweigh: Reweigh::new(false),
        }
    }

    /// Stride scheduling over readjusted weights (`stride+readjust`).
    pub fn with_readjustment(cfg: SchedConfig) -> Stride {
        Stride { reweigh: Reweigh::new(true), ..Stride::new(cfg) }
    }

    fn stride(&self, phi: Phi) -> VTime {
        tag_delta(self.quantum, phi)
    }

    /// `client_modify`: new tickets, remain scaled by the stride ratio.
    fn set_phi(&mut self, c: ClientId, phi: Phi) {
        let Some(&cl) = self.clients.get(c) else { return };
        if same_phi(cl.phi, phi) {
            return;
        }
        let (old_stride, new_stride) = (self.stride(cl.phi), self.stride(phi));
        let global = self.global.value();
        let status = self.roster.status(c);
        let queued = status == Ok(Status::Runnable);
        if queued {
            self.queue.remove(&(cl.pass, c));
        }
        let e = &mut self.clients[c];
        e.phi = phi;
        match status {
            Ok(Status::Blocked) => e.remain = rescale(cl.remain, new_stride, old_stride),
            _ => {
                let remain = to_signed(cl.pass) - to_signed(global);
                e.pass = offset(global, rescale(remain, new_stride, old_stride));
            }
        }
        if queued {
            self.queue.insert((e.pass, c));
        }
    }

    fn refresh(&mut self) {
        let (r, changes) = self.reweigh.refresh(&self.roster);
        self.global.set_rate(&r);
        for (c, phi) in changes {
            self.set_phi(c, phi);
        }
    }

    /// `client_join`: `pass = global_pass + remain`.
    fn join_queue(&mut self, c: ClientId, w: Weight) {
        let global = self.global.value();
        let e = &mut self.clients[c];
        e.pass = offset(global, e.remain);
        self.queue.insert((e.pass, c));
        self.reweigh.insert(c, w);
        self.refresh();
    }

    /// `client_leave`: `remain = pass - global_pass`.
    fn leave_queue(&mut self, c: ClientId, w: Weight) {
        let global = self.global.value();
        let e = &mut self.clients[c];
        self.queue.remove(&(e.pass, c));
        e.remain = to_signed(e.pass) - to_signed(global);
        self.reweigh.remove(c, w);
    }
}

impl Scheduler for Stride {
    fn name(&self) -> &str {
        if self.reweigh.enabled() {
            "stride+readjust"
        } else {
            "stride"
        }
    }

    fn join(&mut self, now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        self.global.advance(now);
        let phi = Phi::whole(w.get());
        let remain = to_signed(self.stride(phi));
        self.clients.insert(c, Client { pass: 0, remain, phi });
        self.join_queue(c, w);
        Ok(None)
    }

    fn leave(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        let w = self.roster.weight(c)?;
        let was = self.roster.leave(c)?;
        self.global.advance(now);
        if was == Status::Runnable {
            self.leave_queue(c, w);
        }
        self.clients.remove(c);
        self.refresh();
        Ok(())
    }

    fn block(&mut self, now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        self.global.advance(now);
        self.leave_queue(c, self.roster.weight(c)?);
        self.refresh();
        Ok(())
    }

    fn wake(&mut self, now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        self.global.advance(now);
        let w = self.roster.weight(c)?;
        self.set_phi(c, Phi::whole(w.get()));
        self.join_queue(c, w);
        Ok(None)
    }

    fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        let status = self.roster.status(c)?;
        let old = self.roster.set_weight(c, w)?;
        self.global.advance(now);
        self.reweigh.change_weight(c, old, w, status.is_runnable());
        self.set_phi(c, Phi::whole(w.get()));
        self.refresh();
        Ok(())
    }

    fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        self.global.advance(now);
        Ok(super::run_first(&mut self.roster, &mut self.queue, cpu, self.quantum))
    }

    fn stopped(&mut self, now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        let w = self.roster.stop(cpu, c, why)?;
        let global = self.global.advance(now);
        let e = &mut self.clients[c];
        e.pass = e.pass.saturating_add(tag_delta(ran, e.phi));
        match why {
            StopReason::Expired | StopReason::Preempted => {
                self.queue.insert((e.pass, c));
            }
            StopReason::Blocked => {
                e.remain = to_signed(e.pass) - to_signed(global);
                self.reweigh.remove(c, w);
                self.refresh();
            }
            StopReason::Left => {
                self.reweigh.remove(c, w);
                self.clients.remove(c);
                self.refresh();
            }
        }
        Ok(())
    }
}
