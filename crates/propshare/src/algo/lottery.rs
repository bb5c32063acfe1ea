//! Lottery scheduling (Waldspurger and Weihl, "Lottery scheduling: flexible
//! proportional-share resource management", OSDI 1994, sections 2-4), on P
//! CPUs with one global pool: any CPU that needs work holds a lottery among
//! the waiting clients.
//!
//! # Rules
//!
//! * A client holds tickets in proportion to its weight (`tickets = w`).
//! * Each pick draws a winning ticket uniformly from the tickets of the
//!   waiting clients (section 4.2) and runs the holder for one quantum.
//! * Compensation tickets (section 3.4): a client that used only a fraction
//!   `f = d/Q` of its last quantum has its tickets inflated by `1/f`
//!   (`tickets = ⌊w·Q/d⌋`, with d ≥ 1 ns) until it next wins, so that clients
//!   that block early still get their share of CPU time.
//!
//! Randomness: a SplitMix64 generator (Steele, Lea, Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014) seeded from
//! [`SchedConfig::seed`], so a run is a deterministic function of the seed
//! and the events. Draws are exactly uniform (rejection, no modulo bias).
//!
//! Known behaviour (the paper's section 2.1): a client's number of wins
//! after n lotteries is binomial with mean `n·p` and variance `n·p(1-p)`,
//! `p = w/W`, so its share converges to `w/W` while its absolute error grows
//! like `√n` quanta; our tests check the convergence (within 5 standard
//! deviations, seeded) and that the error exceeds what WF2Q+ allows.
//!
//! Cost: pick, stop, join, leave, block, wake O(log N) (a Fenwick tree of
//! tickets indexed by client id; growing it to a larger id is O(N),
//! amortised O(1)).
//!
//! # `lottery+readjust`
//!
//! [`Lottery::with_readjustment`] gives each client tickets in proportion to
//! its readjusted weight φ (SFS paper section 2.9: "give out tickets in
//! proportion to φ"). Uncapped clients keep `φ = w` and stay in the Fenwick
//! tree; the at most P − 1 capped clients share one rational `φ* = R/D`
//! (D = P' − m) and are kept out of the tree. Scaling every ticket by D makes
//! all of them integers without touching the tree: a capped client holds
//! `a = R` (compensated `⌊R·Q/d⌋`) scaled tickets and the tree's U tickets
//! count `D·U`, so one exact draw `x` uniform in `[0, A + D·U)`, with A the
//! sum of the waiting capped clients' `a`, picks the capped client whose
//! range holds `x` if `x < A`, else the tree's ticket `⌊(x − A)/D⌋`, which
//! is uniform on `[0, U)`. Client i wins with probability exactly
//! `φ_i / Σ_waiting φ` (tested by enumerating every `x`). With no capped
//! client the draw is the plain one (`x` uniform in `[0, U)`), so on feasible
//! sets `lottery+readjust` makes exactly `lottery`'s decisions for the same
//! seed. Cost: pick O(P + log N); readjustment O(P log N) per event.
//!
//! What it does on P CPUs (tested, `tests/readjust_variants.rs`): the
//! draw excludes running clients, so a client's chance of a CPU is not its
//! fluid share, and a capped client, whose φ* is only `1/P'` of the
//! tickets, wins an idle CPU less often than its infeasible w made it win.
//! In the SFS paper's section 4.2 pattern (weights 1, 10, 1 on 2 CPUs, both
//! CPUs deciding together) the heavy client runs a quantum with probability
//! `10/12 + 2/12·10/11 = 65/66` under plain lottery and `1/2 + 1/2·2/3 = 5/6`
//! under `lottery+readjust` (the readjusted ideal is 1): the paper (section
//! 1.1) calls lottery's error on infeasible weights "slight" and says
//! readjustment can help; on P CPUs tickets in proportion to φ move the
//! capped client further from its CPU.
//!
//! Option `lottery+readjust+dedicate` ([`Lottery::with_dedicated_cpus`]):
//! a waiting capped client runs on the next idle CPU without a draw (its
//! readjusted share is exactly one CPU; [`Reweigh::waiting_capped`](crate::algo::reweigh::Reweigh::waiting_capped)); the
//! lottery is held among the others. Section 4.2 pattern: 1:2:1 (tested).
//!
//! Gap LOTTERY-1: the paper gives no rule for compensation tickets of capped clients;
//! we apply section 3.4's `1/f` to `φ*`, rounded down in the scaled units. (untested)
//! Gap LOTTERY-2: `A + D·U` saturates at 2^128 (beyond any real Q, weights and N). (untested)
//!
//! Gap LOTTERY-3: on P CPUs a running client holds no tickets (it cannot win a CPU
//! it already has); the paper has one processor. (untested)
//! Gap LOTTERY-4: compensation is computed from the real time used and capped only by
//! d ≥ 1 ns; a run that exceeds Q gets no negative compensation (the paper
//! does not cover overruns). (test: `lottery_compensation_restores_short_runners_share`)

use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::readjust::{Phi, Readjustment};
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{Policy, Shell, Variants};

/// SplitMix64: 64 bits of state, period 2^64, passes BigCrush.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..bound` (`bound ≥ 1`), without bias.
    pub fn below(&mut self, bound: u128) -> u128 {
        let bound = bound.max(1);
        // Reject the lowest 2^128 mod bound values so that every residue is equally likely.
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let x = ((self.next_u64() as u128) << 64) | self.next_u64() as u128;
            if x >= threshold {
                return x % bound;
            }
        }
    }
}

/// A Fenwick (binary indexed) tree of ticket counts over client ids, with
/// O(log N) update and O(log N) "which client holds ticket r" search.
#[derive(Clone, Debug, Default)]
struct TicketTree {
    /// Tickets per id.
    own: Vec<u128>,
    /// Fenwick sums, 1-based over a power-of-two length.
    tree: Vec<u128>,
    total: u128,
}

impl TicketTree {
    fn grow(&mut self, id: usize) {
        if id < self.own.len() {
            return;
        }
        let len = (id + 1).next_power_of_two().max(16);
        self.own.resize(len, 0);
        self.tree = vec![0; len + 1];
        for i in 0..len {
            let v = self.own[i];
            let mut k = i + 1;
            while k <= len {
                self.tree[k] += v;
                k += k & k.wrapping_neg();
            }
        }
    }

    fn set(&mut self, c: ClientId, tickets: u128) {
        let i = c.index();
        self.grow(i);
        let old = std::mem::replace(&mut self.own[i], tickets);
        self.total = self.total - old + tickets;
        let len = self.own.len();
        let mut k = i + 1;
        while k <= len {
            self.tree[k] = self.tree[k] - old + tickets;
            k += k & k.wrapping_neg();
        }
    }

    /// The client holding ticket `r` (`r < total`): the smallest id whose
    /// prefix sum exceeds r.
    fn find(&self, mut r: u128) -> ClientId {
        let len = self.own.len();
        let mut pos = 0;
        let mut step = len;
        while step > 0 {
            if pos + step <= len && self.tree[pos + step] <= r {
                pos += step;
                r -= self.tree[pos];
            }
            step >>= 1;
        }
        ClientId(pos as u32)
    }
}

#[derive(Clone, Copy, Debug)]
struct Client {
    /// Length of its last run, if shorter than a quantum (compensation).
    short_run: Option<Time>,
}

/// Lottery scheduling on one global pool of tickets.
pub type Lottery = Shell<LotteryPolicy>;

/// The rules of lottery scheduling: the ticket pool and the generator.
#[derive(Clone, Debug)]
pub struct LotteryPolicy {
    quantum: Time,
    rng: SplitMix64,
    clients: ClientTable<Client>,
    /// Tickets of waiting uncapped clients.
    tickets: TicketTree,
    /// The last readjustment (capped clients: the roster's).
    readjustment: Readjustment,
}

impl Variants for LotteryPolicy {
    const NAMES: [&'static str; 3] = ["lottery", "lottery+readjust", "lottery+readjust+dedicate"];

    fn fresh(cfg: &SchedConfig) -> Self {
        LotteryPolicy {
            quantum: cfg.quantum,
            rng: SplitMix64::new(cfg.seed),
            clients: ClientTable::new(),
            tickets: TicketTree::default(),
            readjustment: Readjustment::EMPTY,
        }
    }
}

impl Lottery {
    /// Winning probabilities of the next draw, exactly, as (client, numerator)
    /// over a common denominator: the number of draw values `x` each client
    /// wins, counted range by range (for tests; O(N + P)).
    pub fn draw_odds(&self) -> (Vec<(ClientId, u128)>, u128) {
        self.policy().draw_odds(self.roster())
    }
}

impl LotteryPolicy {
    /// `tickets`, inflated by `c`'s compensation `Q/d` (section 3.4).
    fn compensated(&self, c: ClientId, tickets: u128) -> u128 {
        match self.clients.get(c).and_then(|e| e.short_run) {
            Some(d) => tickets.saturating_mul(self.quantum as u128) / d.max(1) as u128,
            None => tickets,
        }
    }

    fn is_capped(r: &Roster, c: ClientId) -> bool {
        r.readjustment().capped().contains(&c)
    }

    /// Put waiting client `c` in the tree with its weight's tickets, unless
    /// it is capped (capped clients are drawn outside the tree).
    fn put_in_pool(&mut self, r: &Roster, c: ClientId) {
        if let Ok(w) = r.weight(c) {
            let t = if Self::is_capped(r, c) { 0 } else { self.compensated(c, w.get() as u128) };
            self.tickets.set(c, t);
        }
    }

    /// Readjust after a change of the runnable set or a weight: capped
    /// clients leave the tree, uncapped ones (back at `φ = w`) return to it.
    fn refresh(&mut self, r: &Roster, rate: &Readjustment, changes: &[(ClientId, Phi)]) {
        self.readjustment = *rate;
        for &(c, _) in changes {
            if r.status(c) == Ok(Status::Runnable) {
                self.put_in_pool(r, c);
            }
        }
    }

    /// The waiting capped clients with their scaled tickets `a` (`R`, or
    /// `⌊R·Q/d⌋` with compensation), heaviest first. At most P − 1.
    fn capped_tickets(&self, r: &Roster) -> Vec<(ClientId, u128)> {
        let weight = self.readjustment.feasible_weight as u128;
        r.readjustment()
            .capped()
            .iter()
            .filter(|&&c| r.status(c) == Ok(Status::Runnable))
            .map(|&c| (c, self.compensated(c, weight)))
            .collect()
    }

    /// The winner of one lottery among the waiting clients, if any.
    fn draw(&mut self, r: &Roster) -> Option<ClientId> {
        let capped = self.capped_tickets(r);
        if capped.is_empty() {
            // The plain draw (also readjusted when no waiting client is capped).
            return (self.tickets.total > 0).then(|| self.tickets.find(self.rng.below(self.tickets.total)));
        }
        let d = self.readjustment.feasible_cpus().max(1) as u128;
        let a: u128 = capped.iter().map(|&(_, t)| t).fold(0, u128::saturating_add);
        let x = self.rng.below(a.saturating_add(d.saturating_mul(self.tickets.total)));
        Some(Self::winner(&capped, a, x).unwrap_or_else(|| self.tickets.find((x - a) / d)))
    }

    /// The capped client holding scaled ticket `x` if `x < a` (their sum).
    fn winner(capped: &[(ClientId, u128)], a: u128, mut x: u128) -> Option<ClientId> {
        if x >= a {
            return None;
        }
        capped.iter().find_map(|&(c, t)| {
            if x < t {
                Some(c)
            } else {
                x -= t;
                None
            }
        })
    }

    /// Winning probabilities of the next draw, exactly, as (client, numerator)
    /// over a common denominator: the number of draw values `x` each client
    /// wins, counted range by range (for tests; O(N + P)).
    fn draw_odds(&self, r: &Roster) -> (Vec<(ClientId, u128)>, u128) {
        let capped = self.capped_tickets(r);
        let (scale, a) = if capped.is_empty() {
            (1, 0)
        } else {
            (self.readjustment.feasible_cpus().max(1) as u128, capped.iter().map(|&(_, t)| t).sum())
        };
        let mut odds: Vec<(ClientId, u128)> = capped.clone();
        for (i, &t) in self.tickets.own.iter().enumerate() {
            if t > 0 {
                odds.push((ClientId(i as u32), t * scale));
            }
        }
        (odds, a + scale * self.tickets.total)
    }
}

impl Policy for LotteryPolicy {
    #[inline]
    fn join(&mut self, r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        self.clients.insert(c, Client { short_run: None });
        self.put_in_pool(r, c);
        None
    }

    #[inline]
    fn leave(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight, _was: Status) {
        self.tickets.set(c, 0);
        self.clients.remove(c);
    }

    #[inline]
    fn block(&mut self, _r: &Roster, _now: Time, c: ClientId, _w: Weight) {
        self.tickets.set(c, 0);
    }

    #[inline]
    fn wake(&mut self, r: &Roster, _now: Time, c: ClientId, _w: Weight) -> Kick {
        self.put_in_pool(r, c);
        None
    }

    #[inline]
    fn set_weight(&mut self, r: &Roster, _now: Time, c: ClientId, _old: Weight, _new: Weight, status: Status) {
        if status == Status::Runnable {
            self.put_in_pool(r, c);
        }
    }

    #[inline]
    fn pick(&mut self, r: &Roster, _now: Time, _cpu: CpuId) -> Option<(ClientId, Time)> {
        let winner = r.waiting_capped().or_else(|| self.draw(r))?;
        self.tickets.set(winner, 0);
        self.clients[winner].short_run = None;
        Some((winner, self.quantum))
    }

    #[inline]
    fn stopped(&mut self, r: &Roster, _now: Time, _cpu: CpuId, c: ClientId, _w: Weight, ran: Time, why: StopReason) {
        if why == StopReason::Left {
            self.clients.remove(c);
            return;
        }
        self.clients[c].short_run = (ran < self.quantum).then_some(ran);
        if why.still_runnable() {
            self.put_in_pool(r, c);
        }
    }

    /// Capped clients leave the tree, uncapped ones (back at `φ = w`) return to it.
    #[inline]
    fn readjusted(&mut self, r: &Roster, rate: &Readjustment, changes: &[(ClientId, Phi)]) {
        self.refresh(r, rate, changes);
    }

    /// LOT-1: the tree holds tickets exactly for the waiting (runnable, not
    /// running) uncapped clients, its total is the sum of its tickets, and
    /// every client present has a record.
    #[inline]
    fn check_invariants(&self, r: &Roster) -> Result<(), String> {
        let mut total = 0u128;
        for (i, &t) in self.tickets.own.iter().enumerate() {
            let c = ClientId(i as u32);
            let should = r.status(c) == Ok(Status::Runnable) && !Self::is_capped(r, c);
            if (t > 0) != should {
                return Err(format!("LOT-1: {c} holds {t} tickets but is {:?}", r.status(c)));
            }
            total += t;
        }
        if total != self.tickets.total {
            return Err(format!("LOT-1: tickets sum to {total}, total says {}", self.tickets.total));
        }
        if self.clients.iter().count() != r.len() {
            return Err(format!("LOT-1: {} records for {} clients", self.clients.iter().count(), r.len()));
        }
        Ok(())
    }
}
