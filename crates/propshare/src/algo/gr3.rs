//! GR3, Group Ratio Round-Robin: the central run queue (Caprita, Chan, Nieh,
//! Stein, Zheng, "Group Ratio Round-Robin: O(1) Proportional Share Scheduling
//! for Uniprocessor and Multiprocessor Systems", USENIX ATC 2005, sections 2,
//! 3.3 and 4). The [`Scheduler`](crate::Scheduler) that drives it on one or P
//! CPUs, with frontlogs, is [`super::gr3mp::Gr3Mp`] (registry names `gr3`,
//! `gr3mp`, `gr3+fairjoin`, `gr3mp+fairjoin`).
//!
//! # Rules (paper section 2)
//!
//! * **Groups.** A client of weight φ belongs to the group of order
//!   σ = ⌊log2 φ⌋ ([`Weight::order`]), which holds weights 2^σ ..= 2^(σ+1) - 1.
//!   A group keeps its weight Φ_G = Σ φ, its work W_G (quanta charged to it),
//!   an unordered circular queue of clients and a current client.
//! * **Group list.** Non-empty groups sorted by Φ_G, largest first, ties by
//!   lower order first (this is what the paper's Figure 2 needs).
//! * **Intergroup (§2.2).** With i the current group (first group at start):
//!   run INTRAGROUP on G_i, W_i += 1, then
//!   `if i < g and (W_i + 1)/(W_{i+1} + 1) > Φ_i/Φ_{i+1} then i += 1 else i = 1`,
//!   decided as `(W_i + 1)·Φ_{i+1} > (W_{i+1} + 1)·Φ_i` in integers. Its
//!   negation is the well-ordering condition (2):
//!   `(W_i + 1)/Φ_i ≤ (W_{i+1} + 1)/Φ_{i+1}`.
//! * **Intragroup (§2.2).** Deficit round robin over normalised weights
//!   φ/2^σ ∈ [1, 2): if the current client's deficit D < 1, advance to the
//!   next client and add its normalised weight to its deficit; then D -= 1
//!   and run it. A client gets 1 or 2 quanta per round, one per selection of
//!   its group.
//! * **Join (§2.3).** Insert the client right before its group's current
//!   client with D = 0 (a new group: it becomes the current client), add φ to
//!   Φ_G, move G to its place k in the list and rescale its work:
//!   `W_k = ⌊(W_{k+1} + 1)·Φ_k/Φ_{k+1}⌋ - 1` if k < g,
//!   `W_k = ⌈(W_{k-1} + 1)·Φ_k/Φ_{k-1}⌉ - 1` if k = g. Resume from group 1.
//! * **Block (§2.3), lazy removal.** A client that blocks is only flagged, its
//!   deficit capped, `D = min(D, 1)`, and its turn ends. If it wakes before the
//!   round pointer reaches it, the flag is cleared and nothing else changes.
//!   If the pointer reaches it still blocked, it is removed (Φ_G -= φ,
//!   reposition, rescale as for a join) and the decision restarts at group 1.
//! * **Charge.** By default (the paper) every selection costs its group and
//!   its client one quantum. With `charge=runtime` ([`Charge::Runtime`]) the
//!   host's report of how long the client ran corrects that charge when the
//!   run ends (Gaps GR3-13 to GR3-17).
//!
//! # Weight readjustment (§3.3)
//!
//! On P CPUs (P > 1) every change of the queued set recomputes the infeasible
//! set I through the groups of *original* weights, walked by decreasing
//! order: a whole group is infeasible while
//! `|G| < P' - |I|` and `2^σ·(P' - |I| - |G|) > Φ_T - Φ_I - Φ_G`; the
//! boundary group, if `|G| < 2(P' - |I|)`, is sorted and scanned client by
//! client (`φ·(P' - |I|) > Φ_T - Φ_I`). Every client of I then weighs
//! φ* = R/(P' - |I|), R = Φ_T - Φ_I, which is exactly what
//! [`crate::readjust`] computes (checked on random cases in the tests). All
//! weights are kept exact over one common denominator `den = P' - |I|`: a
//! client's weight is the numerator `w·den` (or `R` if capped), a group's is
//! `A·den + k·R` (A the original weight of its uncapped members, k the number
//! of capped ones), so every comparison and rescale stays in integers.
//!
//! # Cost
//!
//! * pick: O(1) (one intragroup step, one ratio test), plus O(g) for every
//!   lazily removed client it meets, once per block (amortised O(g));
//! * insert, remove, weight change: O(g) to move one group in the list, plus
//!   on P > 1 the readjustment: O(g + P log P) to find I through the weight
//!   classes (`algo/classes.rs`: whole classes in O(1) each, the boundary
//!   class of < 2P clients sorted), O(P) to move the at most P clients whose
//!   weight changed, O(g) to re-weigh the groups and O(g) per touched group to
//!   re-insert it in the list (the others keep their relative order); no
//!   allocation once the buffers are warm;
//! * a group's weight Φ_G is cached (`Group::weight`), so a pick does one
//!   product comparison, in 64-bit factors when they fit;
//! * block, wake before removal: O(1);
//! * space: O(N + g), g ≤ 32.
//!
//! # Decisions (see also docs/ALGORITHMS.md)
//!
//! * Gap GR3-1: the join/leave rescale formula is garbled in the source; we use the
//!   notes' reconstruction `W_k = ⌊(W_{k+1}+1)Φ_k/Φ_{k+1}⌋ - 1` (k < g) and
//!   `⌈(W_{k-1}+1)Φ_k/Φ_{k-1}⌉ - 1` (k = g). It can starve the moved group
//!   (notes P1); [`RescaleRule::Predecessor`] (`+fairjoin`) uses the second
//!   form whenever k > 1, the first only for k = 1. (untested)
//! * Gap GR3-2: with g = 1 there is no neighbour: the group's work is left as is
//!   (a new group starts at W = 0). (untested)
//! * Gap GR3-3: while no group has done any work (every W = 0, as when all clients
//!   join before the first pick) joins and removals do not rescale: all-zero
//!   work is the initial state of §2.2 that Theorem 1 assumes, and it is
//!   well-ordered because the list is sorted by weight. (The rescale formula
//!   would instead give a middle group W = ⌊Φ_k/Φ_{k+1}⌋ - 1 and starve it:
//!   weights 512, 1, 5 joined in that order leave the 5 unserved for 512
//!   quanta.) (untested)
//! * Gap GR3-4: the OCR reads "D_C(0) = φ_C/φ_min", the prose says D = 0 at
//!   insertion. A client inserted into an existing group gets D = 0; the
//!   client that creates a group becomes its current client with its first
//!   turn already started, D = φ/2^σ, so the group's first selection runs it
//!   (this reproduces Figure 2 exactly, and equals starting the round pointer
//!   at the last client). (untested)
//! * Gap GR3-5: a client that blocks while it is its group's current client has its
//!   turn ended by an explicit mark (else the `D < 1` test, with D capped at
//!   1, would run it again at once); the mark moves the pointer on at the
//!   next selection of the group. The deficit cap is `D := min(D, 1)` on the
//!   deficit the code holds (= D(r-1) + φ/φ_min - ⌈w⌉ of the paper).
//!   (test: `blocking_ends_the_turn`)
//! * Gap GR3-6: a selection that meets a lazily removed client is aborted without
//!   charging W_G, and restarts at group 1 (the paper: "resumes scheduling
//!   from the largest weight group"). (untested)
//! * Gap GR3-7: an explicit leave (and a weight change) removes the client at once
//!   with the same steps as a lazy removal; a weight change is a removal
//!   followed by a join with the new weight (the paper does not describe it).
//!   Removing the current client moves the pointer to its predecessor with
//!   its turn ended, so the next selection continues with its successor. (untested)
//! * Gap GR3-8: deficits are fixed point, 2^-32 quantum per unit. For integer
//!   weights φ/2^σ = φ·2^(32-σ) units exactly; only readjusted (rational)
//!   weights are floored, by less than 2^-32 quantum per round. (untested)
//! * Gap GR3-9: readjustment moves only the clients whose readjusted weight changes
//!   group; they are re-inserted there as joins (D = 0). Clients that stay in
//!   their group keep place and deficit even if their weight changed. Every
//!   group whose weight changed other than by a common factor (the groups
//!   holding or losing capped clients) is rescaled with the join rule, the
//!   list re-sorted, and scheduling resumes at group 1. (untested)
//! * Gap GR3-10: when several groups change at once (only a readjustment does
//!   that), each is tied to a neighbour that is already consistent: the one
//!   the rule prefers if it is untouched or already rescaled, else the other;
//!   if every group changed, the last (paper rule) or first (predecessor
//!   rule) keeps its work. (Tying a group to a neighbour that is itself about
//!   to be rescaled, e.g. a new group with W = 0, gave errors of 100+ quanta.) (untested)
//! * Gap GR3-11: as in [`crate::readjust`], P' = min(P, N) (the paper assumes
//!   N ≥ P); with N ≤ P every client weighs the same. (test: `fewer_clients_than_cpus`)
//! * Gap GR3-12: group work W is a u64 (2^64 quanta is never reached); products are
//!   taken in 256 bits, and a rescaled W saturates at u64::MAX - 1. (test: `huge_weights`)
//! * Gap GR3-13: `charge=runtime` (not in the paper, which charges whole quanta,
//!   §2.2.3; GR3MP-6). A pick still charges one quantum (W_G += 1, D -= 1,
//!   exactly as above), and the end of the run corrects it by
//!   `x = (ran - q)/q` quanta, in deficit units `⌊((ran - q)·2^32 + r)/q⌋`
//!   with the remainder r carried per client: an overrun (x > 0) is extra
//!   work and a debt, an underrun (x < 0) a credit. W_G gets whole quanta
//!   from a per-client carry of the fraction (`work_carry`), so a client that
//!   always runs `ran` ns adds exactly ⌊N·ran/q⌋ quanta to W_G in N runs; a
//!   credit lowers W_G (never below 0). The debt or credit goes to the
//!   client's balance `owed`, not to D, so every deficit bound of
//!   `check_invariants` holds as under the paper's rule. A rescale (join,
//!   removal) then works on the corrected W. (test: `runtime_charge_is_exact_in_the_long_run`)
//! * Gap GR3-14: with corrected charges a group can be more than one quantum
//!   ahead of the next, and the intergroup rule always runs the first group
//!   of a sweep: a first group that overran would keep one run per sweep
//!   and take k times its share. Under `charge=runtime` a selection first
//!   moves the cursor past every group i with `W_i·Φ_{i+1} > (W_{i+1} +
//!   1)·Φ_i` (condition (2) broken even with slack 1, which whole-quantum
//!   charges never do, so runs of exactly q decide as the paper does),
//!   O(g) per pick. A group behind (an underrun credit) needs nothing: the
//!   rule advances to it more often. (test: `overrunning_first_group_is_skipped`)
//! * Gap GR3-15: inside a group, under `charge=runtime`, a client's debt is
//!   paid from its deficit at the start of its turn (down to 0); if it is
//!   then still under one quantum its turn passes to the next client (the
//!   loop ends: each pass pays at least a quantum of debt or clears one).
//!   A credit is used by the current client: when its deficit drops under
//!   one quantum, up to one quantum of credit is moved into it and its turn
//!   goes on, so a client whose runs are short gets as many runs in a turn
//!   as its allotment buys in time. (test: `overrunning_client_in_a_group_pays_by_passing_turns`)
//! * Gap GR3-16: the correction is taken in i128 (`(ran - q)·2^32` < 2^97),
//!   clamped to ±2^62 units; a client's balance is kept within ±2^16 quanta
//!   (a larger debt or credit is dropped; W_G keeps the whole charge,
//!   saturating at 0 and u64::MAX - 1), so paying a debt takes at most 2^16
//!   passes. (test: `absurd_runs_saturate`)
//! * Gap GR3-17: a client that blocks under `charge=runtime` has its credit
//!   added to its deficit before §2.3's cap `D := min(D, 1)` (an early block
//!   keeps up to a quantum, as the cap allows); a debt is kept through
//!   block and wake. A lazy removal or leave drops the balance with the
//!   client (a rejoin starts at D = 0, §2.3); its group keeps the work
//!   already charged.
//!   (test: `block_takes_credit_before_the_cap_and_keeps_debt`, `interactive_client_gets_its_share_with_runtime_charge`)

use std::cmp::{Ordering, Reverse};

use super::classes::{WeightClasses, ORDERS};
use crate::list::{Link, List};
use crate::model::{ClientId, Weight};
use crate::roster::ClientTable;
use crate::wide::{cmp_products, mul_div};

/// One quantum, in deficit units (2^-32 quantum).
const ONE: u64 = 1 << 32;

/// `charge=runtime`: the most a client may owe (or be owed) in deficit
/// units, 2^16 quanta (Gap GR3-16); paying it costs at most 2^16 steps.
const MAX_OWED: i64 = 1 << 48;

/// What a selection costs its group's work W and its client's deficit D.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Charge {
    /// The paper's rule (§2.2.3): one quantum per selection, however long
    /// the client then runs.
    #[default]
    Quantum,
    /// The time the client really ran (`charge=runtime`): a selection still
    /// charges one quantum when it is made, and [`Gr3Queue::ran`] corrects
    /// it by `(ran - q)/q` quanta when the run ends (see the module doc).
    Runtime,
}

/// How a moved group's work is rescaled on a join or removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RescaleRule {
    /// The paper's rule (§2.3): tie W to the next (lighter) group, or to the
    /// previous one if the group is last.
    Paper,
    /// Tie W to the previous (heavier) group whenever there is one, to the
    /// next only for the first group (notes P1; `+fairjoin`).
    Predecessor,
}

/// A scheduling group (clients of one order of *readjusted* weight).
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    /// The members, read as a ring from `current`.
    ring: List,
    /// The round pointer k: the most recently scheduled client.
    current: Option<ClientId>,
    /// The current client's turn is over: advance at the next selection.
    turn_over: bool,
    /// A: Σ original weights of the uncapped members.
    uncapped: u128,
    /// k: number of capped members (each weighs R/den).
    capped: usize,
    /// Φ_G as a numerator over den, `uncapped·den + capped·R`, kept in step
    /// with the three (read at every pick).
    weight: u128,
    /// W_G.
    work: u64,
}

#[derive(Clone, Copy, Debug)]
struct Member {
    /// Original weight.
    weight: u64,
    /// In the infeasible set I (weighs R/den).
    capped: bool,
    /// Order of the group it is queued in.
    group: u32,
    /// D, in units of 2^-32 quantum.
    deficit: u64,
    /// Blocked, awaiting lazy removal.
    flagged: bool,
    /// `charge=runtime`: charge corrections not yet taken from D, in deficit
    /// units (positive: overrun debt; negative: underrun credit).
    owed: i64,
    /// `charge=runtime`: the part of a quantum charged to this client's
    /// group not yet in W, in deficit units, `0..ONE`.
    work_carry: u64,
    /// `charge=runtime`: the remainder of `(ran - q)·2^32` modulo q, in
    /// `0..q` (so that the corrections sum exactly to Σ(ran - q)/q).
    time_carry: u64,
}

/// What one intragroup step did.
enum Step {
    Picked(ClientId),
    /// Met a lazily removed client and removed it: restart the decision.
    Removed,
}

/// The GR3 central run queue: groups, group list, intergroup and intragroup
/// scheduling, lazy removal, and (for P > 1) readjustment through the groups.
#[derive(Clone, Debug)]
pub struct Gr3Queue {
    cpus: usize,
    rule: RescaleRule,
    charge: Charge,
    members: ClientTable<Member>,
    links: ClientTable<Link>,
    /// The queued clients by order of original weight (readjustment, §3.3).
    classes: WeightClasses,
    groups: [Group; ORDERS],
    /// Orders of the non-empty groups, in list order.
    list: Vec<u32>,
    /// Index i of the current group in `list`.
    cursor: usize,
    len: usize,
    /// Σ original weights of the uncapped clients.
    uncapped_total: u128,
    /// Common denominator of all weights: P' - |I| (1 when nothing is capped).
    den: u64,
    /// R: the numerator of every capped weight R/den.
    capped_num: u128,
    /// The infeasible set I.
    capped: Vec<ClientId>,
    /// Reused buffers of the readjustment (no allocation once warm).
    scratch: Scratch,
}

/// Buffers reused by every readjustment.
#[derive(Clone, Debug, Default)]
struct Scratch {
    /// The new infeasible set.
    capped: Vec<ClientId>,
    /// The clients whose capped state may change.
    movers: Vec<ClientId>,
}

/// `charge=runtime` (Gap GR3-15), at the start of `m`'s turn: pay what it
/// owes from its deficit, down to 0; the rest stays owed.
fn pay_debt(m: &mut Member) {
    if m.owed > 0 {
        let pay = m.deficit.min(m.owed as u64);
        m.deficit -= pay;
        m.owed -= pay as i64;
    }
}

/// `charge=runtime` (Gap GR3-15), when the current client's deficit is
/// under one quantum: take up to one quantum of its credit into it.
fn use_credit(m: &mut Member) {
    if m.deficit < ONE && m.owed < 0 {
        let take = m.owed.unsigned_abs().min(ONE);
        m.deficit += take;
        m.owed += take as i64;
    }
}

/// A set of group orders (bit σ), in increasing order when iterated.
type Orders = u32;

/// The orders in `set`, lowest first.
fn orders(mut set: Orders) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        let o = set.trailing_zeros();
        set &= set.wrapping_sub(1);
        (o < ORDERS as u32).then_some(o)
    })
}

impl Gr3Queue {
    /// An empty queue for `cpus` CPUs (readjustment runs only when `cpus > 1`)
    /// that charges whole quanta (the paper's rule).
    pub fn new(cpus: usize, rule: RescaleRule) -> Gr3Queue {
        Gr3Queue::with_charge(cpus, rule, Charge::Quantum)
    }

    /// An empty queue for `cpus` CPUs that charges selections by `charge`.
    pub fn with_charge(cpus: usize, rule: RescaleRule, charge: Charge) -> Gr3Queue {
        Gr3Queue {
            cpus: cpus.max(1),
            rule,
            charge,
            members: ClientTable::new(),
            links: ClientTable::new(),
            groups: [Group::default(); ORDERS],
            classes: WeightClasses::default(),
            list: Vec::new(),
            cursor: 0,
            len: 0,
            uncapped_total: 0,
            den: 1,
            capped_num: 0,
            capped: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Number of queued clients (lazily blocked ones included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no client is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `c` is queued (possibly flagged blocked).
    pub fn contains(&self, c: ClientId) -> bool {
        self.members.get(c).is_some()
    }

    /// g, the number of non-empty groups.
    pub fn groups(&self) -> usize {
        self.list.len()
    }

    /// The group list: (order, weight numerator over [`Self::den`], work W).
    pub fn group_list(&self) -> Vec<(u32, u128, u64)> {
        self.list.iter().map(|&o| (o, self.group_weight(o), self.groups[o as usize].work)).collect()
    }

    /// The common denominator of all weights.
    pub fn den(&self) -> u64 {
        self.den
    }

    /// `c`'s (readjusted) weight as a numerator over [`Self::den`].
    pub fn weight_num(&self, c: ClientId) -> Option<u128> {
        self.members.get(c).map(|m| self.num(m))
    }

    /// Φ_T as a numerator over [`Self::den`].
    pub fn total_num(&self) -> u128 {
        self.uncapped_total * self.den as u128 + self.capped.len() as u128 * self.capped_num
    }

    /// The infeasible (capped) clients.
    pub fn capped(&self) -> &[ClientId] {
        &self.capped
    }

    /// `c`'s deficit in quanta, as a numerator over 2^32.
    pub fn deficit(&self, c: ClientId) -> Option<u64> {
        self.members.get(c).map(|m| m.deficit)
    }

    /// `charge=runtime`: `c`'s charge corrections not yet taken from its
    /// deficit, in quanta as a numerator over 2^32 (positive: owed).
    pub fn owed(&self, c: ClientId) -> Option<i64> {
        self.members.get(c).map(|m| m.owed)
    }

    /// The clients of the group of order `o` in round order, starting after
    /// the current client (the order the round pointer will visit them).
    pub fn round_order(&self, o: u32) -> Vec<ClientId> {
        let g = &self.groups[o as usize];
        match g.current {
            Some(cur) => g.ring.walk_cyclic(&self.links, g.ring.next_cyclic(&self.links, cur), g.ring.len()).collect(),
            None => Vec::new(),
        }
    }

    // ----- weights -------------------------------------------------------

    fn num(&self, m: &Member) -> u128 {
        if m.capped {
            self.capped_num
        } else {
            m.weight as u128 * self.den as u128
        }
    }

    fn group_weight(&self, o: u32) -> u128 {
        self.groups[o as usize].weight
    }

    /// Φ_G recomputed from the group's sums (the cache `Group::weight` must equal it).
    fn weigh(&self, g: &Group) -> u128 {
        g.uncapped * self.den as u128 + g.capped as u128 * self.capped_num
    }

    /// The order of the capped weight R/den (≥ 1, see `WeightClasses::infeasible`).
    fn capped_order(&self) -> u32 {
        let q = (self.capped_num / self.den as u128).max(1);
        127 - q.leading_zeros()
    }

    /// The normalised weight φ/2^σ of a member of group σ, in deficit units.
    fn allotment(&self, m: &Member) -> u64 {
        if m.capped {
            ((self.capped_num << 32) / ((self.den as u128) << m.group)) as u64
        } else {
            m.weight << (32 - m.group)
        }
    }

    /// The list order: heavier groups first, ties by lower order.
    fn key(&self, o: u32) -> (Reverse<u128>, u32) {
        (Reverse(self.group_weight(o)), o)
    }

    // ----- scheduling ----------------------------------------------------

    /// INTERGROUP-SCHEDULE (§2.2): the next client, or `None` if the queue
    /// is empty. Lazily removed clients met on the way are dropped.
    pub fn pick(&mut self) -> Option<ClientId> {
        loop {
            if self.list.is_empty() {
                return None;
            }
            if self.cursor >= self.list.len() {
                self.cursor = 0;
            }
            if self.charge == Charge::Runtime {
                self.skip_ahead_groups();
            }
            let i = self.cursor;
            let o = self.list[i];
            let Step::Picked(c) = self.intragroup(o) else {
                self.cursor = 0;
                continue;
            };
            let g = &mut self.groups[o as usize];
            g.work = g.work.saturating_add(1);
            // Test (1): (W_i + 1)·Φ_{i+1} > (W_{i+1} + 1)·Φ_i.
            self.cursor = 0;
            if i + 1 < self.list.len() {
                let next = self.list[i + 1];
                let (wi, wn) = (self.groups[o as usize].work as u128 + 1, self.groups[next as usize].work as u128 + 1);
                if cmp_products(wi, self.group_weight(next), wn, self.group_weight(o)) == Ordering::Greater {
                    self.cursor = i + 1;
                }
            }
            return Some(c);
        }
    }

    /// `charge=runtime` (Gap GR3-14): move the cursor past every group that
    /// is more than one quantum ahead of the next, `W_i·Φ_{i+1} > (W_{i+1} +
    /// 1)·Φ_i` (condition (2) with slack 1 broken; whole-quantum charges
    /// never break it, an overrun can). O(g).
    fn skip_ahead_groups(&mut self) {
        while self.cursor + 1 < self.list.len() {
            let (a, b) = (self.list[self.cursor] as usize, self.list[self.cursor + 1] as usize);
            let (wa, wb) = (self.groups[a].work as u128, self.groups[b].work as u128 + 1);
            if cmp_products(wa, self.groups[b].weight, wb, self.groups[a].weight) != Ordering::Greater {
                return;
            }
            self.cursor += 1;
        }
    }

    /// INTRAGROUP-SCHEDULE (§2.2) on the group of order `o`.
    fn intragroup(&mut self, o: u32) -> Step {
        let g = &self.groups[o as usize];
        let mut c = g.current.expect("listed groups are non-empty");
        let mut turn_over = g.turn_over;
        if !turn_over {
            // charge=runtime: the turn goes on while its credit lasts.
            use_credit(&mut self.members[c]);
        }
        while turn_over || self.members[c].deficit < ONE {
            c = self.groups[o as usize].ring.next_cyclic(&self.links, c);
            if self.members[c].flagged {
                self.remove(c);
                return Step::Removed;
            }
            let g = &mut self.groups[o as usize];
            g.current = Some(c);
            g.turn_over = false;
            turn_over = false;
            let add = self.allotment(&self.members[c]);
            let m = &mut self.members[c];
            m.deficit += add;
            // charge=runtime (Gap GR3-15): pay what is owed; a client still
            // under one quantum lets its turn pass. (Nothing is ever owed
            // under charge=quantum: the loop runs once.)
            pay_debt(m);
        }
        self.members[c].deficit -= ONE;
        Step::Picked(c)
    }

    /// `charge=runtime`: `c`'s run that was charged one quantum when it was
    /// picked lasted `ran` ns, quantum `q` ns: correct its group's work and
    /// its deficit by `(ran - q)/q` quanta, exactly in the long run (Gaps
    /// GR3-13 and GR3-16). Does nothing under `charge=quantum` or if `c` is
    /// not queued. O(1).
    pub fn ran(&mut self, c: ClientId, ran: u64, q: u64) {
        if self.charge != Charge::Runtime || q == 0 {
            return;
        }
        let Some(m) = self.members.get_mut(c) else { return };
        // (ran - q)·2^32/q deficit units, the remainder carried.
        let x = (ran as i128 - q as i128) * ONE as i128 + m.time_carry as i128;
        let units = x.div_euclid(q as i128);
        m.time_carry = x.rem_euclid(q as i128) as u64;
        // |units| < 2^97: clamp to what the i64 balances hold, and keep at
        // most MAX_OWED quanta owed either way (Gap GR3-16).
        let units = units.clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64;
        m.owed = m.owed.saturating_add(units).clamp(-MAX_OWED, MAX_OWED);
        let w = m.work_carry as i128 + units as i128;
        m.work_carry = w.rem_euclid(ONE as i128) as u64;
        let whole = w.div_euclid(ONE as i128);
        let g = &mut self.groups[m.group as usize];
        g.work = if whole >= 0 {
            g.work.saturating_add(whole as u64).min(u64::MAX - 1)
        } else {
            g.work.saturating_sub(whole.unsigned_abs() as u64)
        };
    }

    // ----- dynamic operations --------------------------------------------

    /// `c` becomes runnable with weight `w` (§2.3 join). O(g) (+ readjustment).
    pub fn insert(&mut self, c: ClientId, w: Weight) {
        debug_assert!(!self.contains(c), "{c} queued twice");
        let (weight, o) = (w.get(), w.order());
        self.classes.insert(c, weight);
        let m = Member {
            weight,
            capped: false,
            group: o,
            deficit: 0,
            flagged: false,
            owed: 0,
            work_carry: 0,
            time_carry: 0,
        };
        self.members.insert(c, m);
        self.ring_insert(c, o);
        self.account(c, true);
        self.len += 1;
        self.uncapped_total += weight as u128;
        self.settle(1 << o);
    }

    /// Remove `c` now (leave, weight change, or lazy removal). Returns
    /// whether it was queued. O(g) (+ readjustment).
    pub fn remove(&mut self, c: ClientId) -> bool {
        let Some(m) = self.members.get(c).copied() else { return false };
        self.account(c, false);
        self.ring_remove(c);
        self.classes.remove(c, m.weight);
        self.members.remove(c);
        self.len -= 1;
        if m.capped {
            self.capped.retain(|&x| x != c);
        } else {
            self.uncapped_total -= m.weight as u128;
        }
        self.settle(1 << m.group);
        true
    }

    /// A queued client blocked: flag it for lazy removal, cap its deficit at
    /// one quantum, and end its turn (§2.3). Under `charge=runtime` a credit
    /// is added to the deficit before the cap, a debt is kept (Gap GR3-17). O(1).
    pub fn block(&mut self, c: ClientId) {
        let Some(m) = self.members.get_mut(c) else { return };
        m.flagged = true;
        if m.owed < 0 {
            m.deficit = m.deficit.saturating_add(m.owed.unsigned_abs());
            m.owed = 0;
        }
        m.deficit = m.deficit.min(ONE);
        let g = &mut self.groups[m.group as usize];
        if g.current == Some(c) {
            g.turn_over = true;
        }
    }

    /// A flagged client woke before it was removed: clear the flag. Returns
    /// false if it is no longer queued (the caller re-inserts it). O(1).
    pub fn wake(&mut self, c: ClientId) -> bool {
        match self.members.get_mut(c) {
            Some(m) => {
                m.flagged = false;
                true
            }
            None => false,
        }
    }

    fn ring_insert(&mut self, c: ClientId, o: u32) {
        self.members[c].group = o;
        let g = &mut self.groups[o as usize];
        let deficit = match g.current {
            None => {
                // A new group: c is its current client with its first turn started.
                // (A lazily blocked client moved here by readjustment has its turn over.)
                *g = Group { current: Some(c), turn_over: self.members[c].flagged, ..Group::default() };
                g.ring.push_back(&mut self.links, c);
                self.allotment(&self.members[c])
            }
            Some(cur) => {
                // Last in the round: just before the current client.
                g.ring.insert_before_cyclic(&mut self.links, cur, c);
                0
            }
        };
        self.members[c].deficit = deficit;
    }

    fn ring_remove(&mut self, c: ClientId) {
        let o = self.members[c].group as usize;
        let g = &mut self.groups[o];
        let link = g.ring.remove(&mut self.links, c);
        if g.current == Some(c) {
            // The pointer steps back (read as a ring) so that the next turn
            // goes to c's successor.
            g.current = link.prev().or(g.ring.back());
            g.turn_over = true;
        }
    }

    /// Add (or take away) `c`'s weight to (from) its group's sums.
    fn account(&mut self, c: ClientId, add: bool) {
        let m = self.members[c];
        let g = &mut self.groups[m.group as usize];
        match (m.capped, add) {
            (true, true) => g.capped += 1,
            (true, false) => g.capped -= 1,
            (false, true) => g.uncapped += m.weight as u128,
            (false, false) => g.uncapped -= m.weight as u128,
        }
        let g = &self.groups[m.group as usize];
        self.groups[m.group as usize].weight = self.weigh(g);
    }

    /// After the queued set changed in the groups `touched`: readjust (P > 1),
    /// move the touched groups in the list, rescale their work, and resume at
    /// group 1.
    fn settle(&mut self, mut touched: Orders) {
        if self.cpus > 1 {
            self.readjust(&mut touched);
        }
        // Only the touched groups can be out of place: the others' weights
        // are unchanged or all scaled by the same den'/den, and list keys are
        // distinct, so taking the touched out and re-inserting them restores
        // the one sorted order.
        self.list.retain(|&o| touched & (1 << o) == 0);
        for o in orders(touched) {
            self.reposition(o);
        }
        self.rescale_touched(touched);
        self.cursor = 0;
    }

    /// Rescale the work of the touched groups (§2.3). Each is tied to a
    /// neighbour whose work is already consistent: the one the rule prefers
    /// if it is untouched or already rescaled, else the other one. (With one
    /// touched group, the usual case, this is exactly the rule; several are
    /// touched only by a readjustment.) If every group is touched, the last
    /// (paper rule) or first (predecessor rule) keeps its work as the anchor.
    fn rescale_touched(&mut self, touched: Orders) {
        let g = self.list.len();
        // Nothing has run yet (every W = 0): this is the initial state of
        // §2.2, already well-ordered; keep it.
        if g < 2 || self.list.iter().all(|&o| self.groups[o as usize].work == 0) {
            return;
        }
        let mut settled = [false; ORDERS];
        for (k, &o) in self.list.iter().enumerate() {
            settled[k] = touched & (1 << o) == 0;
        }
        if !settled[..g].contains(&true) {
            settled[if self.rule == RescaleRule::Paper { g - 1 } else { 0 }] = true;
        }
        // The paper's rule works from the last group up, the predecessor rule down.
        let paper = self.rule == RescaleRule::Paper;
        let position = move |i: usize| if paper { g - 1 - i } else { i };
        let mut progress = true;
        while progress {
            progress = false;
            for k in (0..g).map(position) {
                if settled[k] {
                    continue;
                }
                let next_ok = k + 1 < g && settled[k + 1];
                let prev_ok = k > 0 && settled[k - 1];
                let prefer_next = match self.rule {
                    RescaleRule::Paper => k + 1 < g,
                    RescaleRule::Predecessor => k == 0,
                };
                let use_next = match (prefer_next, next_ok, prev_ok) {
                    (true, true, _) | (false, true, false) => true,
                    (_, _, true) => false,
                    _ => continue,
                };
                self.rescale(k, use_next);
                settled[k] = true;
                progress = true;
            }
        }
    }

    /// Move group `o` to its place in the list (or out of it if empty). O(g).
    fn reposition(&mut self, o: u32) {
        self.list.retain(|&x| x != o);
        if self.groups[o as usize].ring.is_empty() {
            return;
        }
        let key = self.key(o);
        let at = self.list.iter().position(|&x| self.key(x) > key).unwrap_or(self.list.len());
        self.list.insert(at, o);
    }

    /// The work rescale of §2.3 for the group at list position `k`, tied to
    /// the next group (`⌊(W_{k+1} + 1)·Φ_k/Φ_{k+1}⌋ - 1`) or to the previous
    /// one (`⌈(W_{k-1} + 1)·Φ_k/Φ_{k-1}⌉ - 1`).
    fn rescale(&mut self, k: usize, use_next: bool) {
        let o = self.list[k];
        let phi = self.group_weight(o);
        let work = if use_next {
            let n = self.list[k + 1];
            mul_div(self.groups[n as usize].work as u128 + 1, phi, self.group_weight(n), false)
        } else {
            let p = self.list[k - 1];
            mul_div(self.groups[p as usize].work as u128 + 1, phi, self.group_weight(p), true)
        };
        self.groups[o as usize].work = work.saturating_sub(1).min(u64::MAX as u128 - 1) as u64;
    }

    // ----- weight readjustment (§3.3) ------------------------------------

    /// Recompute I and apply it; adds the groups whose weight changed other
    /// than by the common factor to `touched`.
    fn readjust(&mut self, touched: &mut Orders) {
        let mut new = std::mem::take(&mut self.scratch.capped);
        let members = &self.members;
        let (r, den) = self.classes.infeasible(self.cpus, &mut new, |c| members[c].weight);
        let r = if new.is_empty() { 0 } else { r };
        new.sort_unstable();
        let mut old = std::mem::take(&mut self.capped);
        old.sort_unstable();
        if old == new && r == self.capped_num && den == self.den {
            self.capped = old;
            self.scratch.capped = new;
            return;
        }
        let mut movers = std::mem::take(&mut self.scratch.movers);
        movers.clear();
        movers.extend(old.iter().chain(&new));
        movers.sort_unstable();
        movers.dedup();
        // Groups holding capped clients change weight with R and den.
        for &c in &movers {
            *touched |= 1 << self.members[c].group;
        }
        // Take the movers' weights out of their groups, re-weigh, put back.
        for &c in &movers {
            self.account(c, false);
        }
        for &c in &old {
            self.members[c].capped = false;
            self.uncapped_total += self.members[c].weight as u128;
        }
        for &c in &new {
            self.members[c].capped = true;
            self.uncapped_total -= self.members[c].weight as u128;
        }
        self.capped_num = r;
        self.den = den;
        for o in 0..ORDERS {
            self.groups[o].weight = self.weigh(&self.groups[o]);
        }
        let capped_order = if new.is_empty() { 0 } else { self.capped_order() };
        for &c in &movers {
            let m = self.members[c];
            let target = if m.capped { capped_order } else { m.weight.ilog2() };
            if target != m.group {
                // Its weight moved it to another group: re-insert it there as a join.
                self.ring_remove(c);
                self.ring_insert(c, target);
                *touched |= 1 << target;
            }
            self.account(c, true);
        }
        self.capped = new;
        self.scratch.capped = old;
        self.scratch.movers = movers;
    }

    /// Check the queue's internal invariants (tests).
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut n = 0;
        for (o, g) in self.groups.iter().enumerate() {
            if g.ring.is_empty() {
                if self.list.contains(&(o as u32)) {
                    return Err(format!("empty group {o} listed"));
                }
                continue;
            }
            n += g.ring.len();
            let cur = g.current.ok_or_else(|| format!("group {o} has no current client"))?;
            let (mut a, mut k) = (0u128, 0usize);
            for c in g.ring.walk_cyclic(&self.links, cur, g.ring.len()) {
                let m = self.members.get(c).ok_or_else(|| format!("{c} ringed but not a member"))?;
                if m.group as usize != o {
                    return Err(format!("{c} in ring {o} but records group {}", m.group));
                }
                let num = self.num(m);
                let lo = (1u128 << o) * self.den as u128;
                if num < lo || num >= 2 * lo {
                    return Err(format!("{c} weight {num}/{} outside order {o}", self.den));
                }
                if m.capped {
                    k += 1;
                } else {
                    a += m.weight as u128;
                }
                let cap = if m.flagged {
                    ONE
                } else if Some(c) == g.current {
                    2 * ONE - 1
                } else {
                    ONE - 1
                };
                if m.deficit > cap {
                    return Err(format!("{c} deficit {} out of range", m.deficit));
                }
            }
            if g.ring.iter(&self.links).count() != g.ring.len() {
                return Err(format!("group {o} ring length is not {}", g.ring.len()));
            }
            if g.weight != self.weigh(g) {
                return Err(format!("group {o} cached weight {} is not {}", g.weight, self.weigh(g)));
            }
            if (a, k) != (g.uncapped, g.capped) {
                return Err(format!("group {o} sums ({a}, {k}) recorded ({}, {})", g.uncapped, g.capped));
            }
        }
        if n != self.len {
            return Err(format!("{n} ringed, {} queued", self.len));
        }
        for w in self.list.windows(2) {
            if self.key(w[0]) > self.key(w[1]) {
                return Err(format!("group list out of order at {w:?}"));
            }
        }
        Ok(())
    }

    /// The well-ordering condition (2) for every adjacent pair of groups,
    /// `(W_i + 1)/Φ_i ≤ (W_{i+1} + 1)/Φ_{i+1}`, with `slack` subtracted from
    /// every W_i on the left: GR3 keeps it with slack 1 after every pick
    /// (it runs G_i only while (2) holds), and with slack 0 whenever the
    /// current group is back at the first one.
    #[doc(hidden)]
    pub fn well_ordered(&self, slack: u64) -> bool {
        self.list.windows(2).all(|w| {
            let (a, b) = (&self.groups[w[0] as usize], &self.groups[w[1] as usize]);
            let lhs = (a.work as u128 + 1).saturating_sub(slack as u128);
            cmp_products(lhs, self.group_weight(w[1]), b.work as u128 + 1, self.group_weight(w[0])) != Ordering::Greater
        })
    }

    /// Index of the current group in the list (0 = the first group).
    #[doc(hidden)]
    pub fn cursor(&self) -> usize {
        self.cursor
    }
}
