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
//! Gap: on P CPUs a running client holds no tickets (it cannot win a CPU
//! it already has); the paper has one processor.
//! Gap: compensation is computed from the real time used and capped only by
//! d ≥ 1 ns; a run that exceeds Q gets no negative compensation (the paper
//! does not cover overruns).

use crate::model::{ClientId, CpuId, SchedError, StopReason, Time, Weight};
use crate::roster::{ClientTable, Roster};
use crate::scheduler::{Decision, Kick, SchedConfig, Scheduler};

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
#[derive(Clone, Debug)]
pub struct Lottery {
    roster: Roster,
    quantum: Time,
    rng: SplitMix64,
    clients: ClientTable<Client>,
    tickets: TicketTree,
}

impl Lottery {
    /// A lottery scheduler seeded with `cfg.seed`.
    pub fn new(cfg: SchedConfig) -> Lottery {
        Lottery {
            roster: Roster::new(cfg.cpus),
            quantum: cfg.quantum,
            rng: SplitMix64::new(cfg.seed),
            clients: ClientTable::new(),
            tickets: TicketTree::default(),
        }
    }

    /// The tickets `c` holds while waiting: its weight, inflated by its compensation.
    fn tickets_of(&self, c: ClientId, w: Weight) -> u128 {
        let w = w.get() as u128;
        match self.clients.get(c).and_then(|e| e.short_run) {
            Some(d) => w * self.quantum as u128 / d.max(1) as u128,
            None => w,
        }
    }

    fn put_in_pool(&mut self, c: ClientId) {
        if let Ok(w) = self.roster.weight(c) {
            let t = self.tickets_of(c, w);
            self.tickets.set(c, t);
        }
    }
}

impl Scheduler for Lottery {
    fn name(&self) -> &str {
        "lottery"
    }

    fn join(&mut self, _now: Time, c: ClientId, w: Weight) -> Result<Kick, SchedError> {
        self.roster.join(c, w)?;
        self.clients.insert(c, Client { short_run: None });
        self.put_in_pool(c);
        Ok(None)
    }

    fn leave(&mut self, _now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.leave(c)?;
        self.tickets.set(c, 0);
        self.clients.remove(c);
        Ok(())
    }

    fn block(&mut self, _now: Time, c: ClientId) -> Result<(), SchedError> {
        self.roster.block(c)?;
        self.tickets.set(c, 0);
        Ok(())
    }

    fn wake(&mut self, _now: Time, c: ClientId) -> Result<Kick, SchedError> {
        self.roster.wake(c)?;
        self.put_in_pool(c);
        Ok(None)
    }

    fn set_weight(&mut self, _now: Time, c: ClientId, w: Weight) -> Result<(), SchedError> {
        let status = self.roster.status(c)?;
        self.roster.set_weight(c, w)?;
        if status == crate::roster::Status::Runnable {
            self.put_in_pool(c);
        }
        Ok(())
    }

    fn pick(&mut self, _now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
        self.roster.check_pick(cpu)?;
        if self.tickets.total == 0 {
            return Ok(Decision::Idle);
        }
        let winner = self.tickets.find(self.rng.below(self.tickets.total));
        self.tickets.set(winner, 0);
        self.clients[winner].short_run = None;
        self.roster.start(cpu, winner);
        Ok(Decision::Run { client: winner, slice: self.quantum })
    }

    fn stopped(&mut self, _now: Time, cpu: CpuId, c: ClientId, ran: Time, why: StopReason) -> Result<(), SchedError> {
        self.roster.stop(cpu, c, why)?;
        if why == StopReason::Left {
            self.clients.remove(c);
            return Ok(());
        }
        self.clients[c].short_run = (ran < self.quantum).then_some(ran);
        if why.still_runnable() {
            self.put_in_pool(c);
        }
        Ok(())
    }
}
