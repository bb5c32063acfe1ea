//! DFS and DFS-FA, Deadline Fair Scheduling (Chandra, Adler, Shenoy, RTAS
//! 2001, "Deadline Fair Scheduling: Bridging the Theory and Practice of
//! Proportionate Fair Scheduling in Multiprocessor Systems"), sections 3.3
//! (the algorithm), 4.2 (fair airport), 5 (processor affinity) and 6 (the
//! Linux run queues). Reading notes: `papers/notes/003-dfs.md`.
//!
//! # The maths (section 3.3)
//!
//! Every client i has a share φ_i (its weight), a start tag S_i and a finish
//! tag F_i; p is the number of CPUs, q = q_max the host quantum, Φ = Σ φ_j over
//! the runnable clients (running ones included).
//!
//! ```text
//!   join:            S_i = v
//!   after a run q:   S_i = S_i + q/φ_i                          (Eq. 4)
//!   wake:            S_i = max(S_i, v)                          (Eq. 4)
//!   finish tag:      F_i = S_i + q̄_i/φ_i    (q̄_i: the most i may run next)
//!   virtual time:    v = max(v, Σ φ_j S_j / Φ)                  (Eq. 5)
//!   eligible:        S_i φ_i / q + 1 ≤ ⌈ φ_i (v/q + p/Φ) ⌉       (Eq. 6)
//!   deadline:        d_i = ⌈ (F_i / q) (Φ / p) ⌉                 (Eq. 7)
//! ```
//!
//! The eligible client with the smallest deadline runs. Equal deadlines are
//! broken by PD²'s rules: Rule 1 prefers a client whose `F_i Φ/(q p)` is not
//! an integer (PD²'s b-bit), Rule 2 then prefers the largest group deadline
//! ⌈G_i⌉ (see Gap DFS-1 below for the formula as we repaired it).
//!
//! In the ideal setting (synchronised unit quanta, fixed set, feasible
//! shares w_i = p φ_i/Φ ≤ 1), `S_i = m_i q/φ_i` and `v = t q p/Φ`, Eq. 6
//! releases subtask m+1 at slot ⌊m/w_i⌋ and Eq. 7 gives it deadline
//! ⌈(m+1)/w_i⌉: these are PD²'s Pfair windows, so DFS is PD² and every
//! client's lag stays strictly within one quantum (Lemmas 1 and 2). The tests
//! check this on random sets.
//!
//! # Exact integer form
//!
//! We never store S, F or v. Per client we keep `A_i = φ_i S_i` (weighted
//! service, integer ns: a run of q ns adds exactly q), and globally
//! `Ψ = Σ A_j` and `V = v Φ` (integer ns, over the current Φ). Then
//! (using `a + 1 ≤ ⌈b⌉ ⇔ ⌈a⌉ < b`, notes §2.3)
//!
//! ```text
//!   Eq. 6  ⇔  ⌈A_i/q⌉ · q · Φ  <  φ_i (V + p q)      ⇔   Ŝ_i < θ = (V + p q)/Φ,
//!                                                          Ŝ_i = ⌈A_i/q⌉ q/φ_i
//!   Eq. 7:    d_i = ⌈ (A_i + q̄_i) Φ / (φ_i q p) ⌉,     Rule 1: that ratio is not an integer
//!   Eq. 5:    V = max(V, Ψ);   when Φ changes to Φ', V = ⌈V Φ'/Φ⌉ (v kept)
//! ```
//!
//! Weights may be rational (readjusted φ), so every comparison is a
//! cross-multiplication, in u128 when the products fit and in 256-bit
//! arithmetic ([`crate::wide`]) when not: exact, no floats, no overflow for any
//! weight and any time below 2^64 ns.
//!
//! # Queues (section 6)
//!
//! EQ (eligible, the GSQ) is ordered by F: every deadline is F times the same
//! factor Φ/(q p), so F order is EDF order up to ties, and a change of Φ never
//! re-sorts it. IQ (ineligible, the ASQ) is kept twice: by Ŝ, the order in
//! which clients become eligible (the threshold θ is the same for everyone),
//! and by S, the ASQ service order. At each pick, IQ heads with Ŝ < θ move to
//! EQ; EQ entries found ineligible while scanning (θ falls when Φ grows) move
//! back, so the pick is exactly "the best eligible client" of section 3.3.
//!
//! # DFS-FA (sections 4.2 and 5)
//!
//! * Fair airport: when no client is eligible, run the ineligible client with
//!   the smallest start tag (SFQ on the ASQ). Work-conserving.
//! * Affinity: among the first W eligible clients in priority order, run the
//!   one with the smallest goodness `d + α·[it last ran on another CPU]`
//!   (Eq. 8); ties go to the higher priority. W = 1 is plain DFS.
//!
//! # Variants (registry names)
//!
//! * `dfs`: Eqs. 4-7 with Rules 1 and 2; not work-conserving.
//! * `dfs-notiebreak`: the same without Rules 1 and 2 (the paper's simulations);
//!   equal deadlines go by F, then φ, then id.
//! * `dfs-fa`: DFS-FA as in the paper's kernel: fair airport, no tie rules, W = 1.
//! * `dfs-fa+affinity`: DFS-FA with W = p, α = 2 slots.
//!   Where each client last ran is per-CPU state (issue 15): one
//!   [`crate::percpu::AffinePart`] per CPU lists the clients that last ran
//!   there (kept only when α > 0); a pick on another CPU than last time
//!   moves the client's entry between two parts ([`crate::percpu::ran_on`]);
//!   the queues and V are the global part. [`DfsPolicy::shell`] takes the
//!   parts from a concurrent host, each behind its own lock
//!   ([`crate::percpu::LockedAffinity`], tests/affinity_threaded.rs).
//! * `dfs-fa+readjust`: DFS-FA over readjusted weights ([`crate::readjust`]).
//!
//! # Cost
//!
//! join, leave, block, wake, stopped: O(log N) (B-trees), plus O(P log N)
//! with readjustment (re-keying the at most P capped clients). pick: O(log N)
//! per client examined; without the tie rules it examines the first W
//! eligible clients, with them also the rest of the group sharing the W-th
//! deadline, one client per distinct (F, φ) in it (clients with equal F and
//! φ are skipped in one step); every move between EQ and IQ is O(log N) and
//! happens at most once per eligibility change. A decision (stop plus pick)
//! does about four times WFQ's B-tree work (EQ, and IQ kept twice), and
//! measures about 5x WFQ's cost (`propshare bench`). With W = P (`+affinity`)
//! a pick computes P deadlines: the paper meant W = p for fewer than 32 CPUs.
//!
//! # Gaps (where the paper is silent or garbled, and what we decided)
//!
//! * Gap DFS-1: Rule 2's group deadline. The printed test "v ≥ ⌈G_i⌉ p/Φ" lacks
//!   q_max (v is in time per unit weight, ⌈G_i⌉ in slots): we use
//!   `v ≥ ⌈G_i⌉ q p/Φ`, i.e. slot T = ⌊V/(q p)⌋ ≥ ⌈G_i⌉. The printed
//!   sequence G = (k + w)/(1 - w), k = 0, 1, ..., advanced while T ≥ ⌈G⌉, is
//!   computed in closed form from the current w and T: with u = 1/(1 - w),
//!   ⌈G⌉ = ⌈j u⌉ - 1 for j = ⌊(T + 1)/u⌋ + 1 (the same value the loop
//!   reaches from v = 0; with changing Φ the paper does not say when to
//!   "initialise" G, and the closed form needs no state).
//!   (test: `group_deadline_closed_form_matches_the_printed_loop`)
//! * Gap DFS-2: at w_i = 1 the printed increment Φ/(Φ - p φ_i) divides by zero; we
//!   take G_i = +∞ (such a client must run every slot; its b-bit is always 0,
//!   so Rule 2 never compares it). Infeasible w_i > 1 (plain DFS allows it
//!   when the runnable set is infeasible) is treated the same way. (untested)
//! * Gap DFS-3: which clients count in v and Φ: all runnable ones, running ones
//!   included with their tags as of their last charge (section 6 says "the
//!   start tags of all the runnable tasks"). (untested)
//! * Gap DFS-4: q̄ (the "most the task may run next time", section 3.3) is a slice
//!   budget: q_max at join, reduced by each run, refilled to q_max when used
//!   up; the remainder is kept across blocking and preemption. `pick` hands
//!   out q̄ as the slice. (untested)
//! * Gap DFS-5: the clock. Runs are charged the exact ns the host measured (not
//!   ticks), and q_max is the host quantum ([`SchedConfig::quantum`]). (untested)
//! * Gap DFS-6: wake-up and join preemption: none (no kick); the paper schedules
//!   only at quantum end, block and exit. The host re-polls idle CPUs.
//!   (test: `dfs_joins_and_wakes_never_kick`)
//! * Gap DFS-7: runs taken from the ASQ are charged like any other run (S += q/φ),
//!   the paper's single accounting path (section 6). (untested)
//! * Gap DFS-8: weight changes (`setshare`, and readjustment changing a capped
//!   client's φ) keep the client's lag in service, φ(v - S): S' = v - (v - S)
//!   φ/φ' (floored at 0; A' = A + ⌈φ'v⌉ - ⌈φv⌉), which leaves v where it was.
//!   Keeping S instead ([`Reweight::KeepStart`], the notes' suggestion) lets a
//!   client that ran ahead at weight 1 keep a lead worth φ'(S - v) of service
//!   when raised to weight 10^9: it starves for ~10^9 quanta (test
//!   `reweight_keeps_lag`; the contract harness found it). (test: `reweight_keeps_lag`)
//! * Gap DFS-9: when Φ changes, v is kept, so V = vΦ is rescaled and rounded up (v
//!   grows by less than 1 ns/Φ: still monotone). When nothing is runnable, v
//!   stays frozen at its last value (section 3.3), which the clamp already
//!   made at least the start tag of the client that left last. (test: `t12_t13_virtual_time`)
//! * Gap DFS-10: eligibility can be lost without running (θ falls when Φ grows);
//!   the paper only describes promotion. We re-test EQ entries at the pick
//!   and move stale ones back to IQ, so the pick follows the definition. (untested)
//! * Gap DFS-11: the affinity rule (window and goodness) applies to EQ picks only;
//!   ASQ picks ignore affinity (the paper specifies goodness for the eligible
//!   queue only). α is given in slots (deadline units); the paper gives no
//!   value. W = 1 or α = 0 is plain DFS. `dfs-fa+affinity` uses the paper's
//!   rule of thumb W = p and our α = 2 (an affine client may pass one whose
//!   deadline is one slot earlier). Goodness ties go to the higher priority.
//!   (test: `t14_t15_affinity_window`)
//! * Gap DFS-12: ties left after the rules ("broken arbitrarily") go by F, then φ,
//!   then id: the EQ order, free of cost. Among equal deadlines the client
//!   whose F Φ/(q p) is an integer has the largest F, so this order already
//!   holds most of Rule 1 (`dfs-notiebreak` fails P-fairness on 26 of 5,000
//!   random sets; with ties by id instead, [`LastTie::ClientId`], no rules
//!   fail 3 of 300 sets and Rule 1 alone 2 of 300). (untested)
//! * Gap DFS-13: admission control (Eq. 1) is not applied: the host, not the
//!   scheduler, admits clients, and the trait cannot refuse a join for
//!   feasibility. The plain variants run an infeasible runnable set as given
//!   (some w_i > 1, as the paper's formulas do); `+readjust` caps it. (untested)
//! * Gap DFS-14: with partial quanta the literal Eq. 6 can leave every runnable
//!   client ineligible while every CPU is idle; v is then frozen and pure DFS
//!   would idle forever (notes §6 pitfall 1; the paper never reports it, so its
//!   simulator did not reach that state). `dfs` breaks exactly this state: if
//!   no CPU runs anything and nothing is eligible, it runs the ASQ head (min S).
//!   With whole quanta the state cannot arise (Σ A_j ≤ V forces an eligible
//!   client), so ideal-model behaviour and the idling the paper studies are
//!   unchanged. [`DfsOptions::stall_breaker`] = false keeps the deadlock (test T17).
//!   (test: `t17_partial_quanta_stall`)
//! * Gap DFS-15: DFS-FA uses no tie rules (section 4.1: "we have not used the
//!   tie-breaking rules ... in our kernel implementation and simulation study"). (untested)
//! * Gap DFS-16: readjustment is not in the paper (faithful DFS-FA can starve a
//!   low-weight client for ~1,640 quanta, notes T18). `dfs-fa+readjust` runs
//!   every formula on the readjusted φ and with p replaced by P' = min(P, n),
//!   so every w_i ≤ 1. (test: `t18_infeasible_runnable_set_starvation`)

use std::collections::BTreeSet;
use std::ops::Bound::{Excluded, Unbounded};

use crate::model::{ClientId, CpuId, StopReason, Time, Weight};
use crate::percpu::{Affinity, AffinityParts};
use crate::readjust::{FeasibleSet, Phi};
use crate::roster::{ClientTable, Roster, Status};
use crate::scheduler::{Kick, SchedConfig};
use crate::shell::{Policy, Shell};
use crate::wide::U256;

/// Which of section 3.3's tie-breaking rules apply among equal deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieRules {
    /// None (the paper's simulations and kernel).
    None,
    /// Rule 1 only: b-bit 1 (F Φ/(q p) not an integer) first.
    BBit,
    /// Rules 1 and 2 (PD²): then the larger group deadline ⌈G⌉ first.
    Pd2,
}

/// How ties left after the rules are broken ("arbitrarily", section 3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastTie {
    /// Smaller finish tag, then smaller φ, then smaller id: EQ order, costs nothing.
    FinishTag,
    /// Smaller id only (for tests: shows what the rules do on their own).
    ClientId,
}

/// What a share change keeps (the paper is silent; see the module Gap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reweight {
    /// The lag in service, φ(v - S): S moves towards v in proportion φ/φ'
    /// (floored at S = 0), and v is undisturbed.
    KeepLag,
    /// The start tag S (the notes' suggestion): a client that ran ahead at a
    /// low weight and is then raised keeps a lead worth φ'(S - v) of service.
    KeepStart,
}

/// Which rules a DFS instance applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DfsOptions {
    /// Tie-breaking rules among equal deadlines (section 3.3).
    pub tie_rules: TieRules,
    /// The order of whatever ties remain.
    pub last_tie: LastTie,
    /// Fair airport (section 4.2): run the ineligible client with the smallest
    /// start tag when nothing is eligible. Makes the scheduler work-conserving.
    pub fair_airport: bool,
    /// Run every formula on readjusted weights (not in the paper).
    pub readjust: bool,
    /// W, the affinity window (section 5), at least 1.
    pub window: usize,
    /// α of Eq. 8 as a fraction `(num, den)` of one slot.
    pub alpha: (u64, u64),
    /// Without fair airport: when nothing is eligible and no CPU is busy, run
    /// the ASQ head rather than idle forever (see the module Gap).
    pub stall_breaker: bool,
    /// What a share change (set_weight, readjustment) keeps.
    pub reweight: Reweight,
}

impl DfsOptions {
    /// `dfs`: Eqs. 4-7 with the PD² tie rules.
    pub const DFS: DfsOptions = DfsOptions {
        tie_rules: TieRules::Pd2,
        last_tie: LastTie::FinishTag,
        fair_airport: false,
        readjust: false,
        window: 1,
        alpha: (0, 1),
        stall_breaker: true,
        reweight: Reweight::KeepLag,
    };
    /// `dfs-notiebreak`: DFS with ties broken by finish tag, then id.
    pub const NO_TIE_BREAK: DfsOptions = DfsOptions { tie_rules: TieRules::None, ..DfsOptions::DFS };
    /// `dfs-fa`: DFS-FA as in the paper's kernel.
    pub const FA: DfsOptions = DfsOptions { tie_rules: TieRules::None, fair_airport: true, ..DfsOptions::DFS };
    /// `dfs-fa+readjust`: DFS-FA over readjusted weights.
    pub const FA_READJUST: DfsOptions = DfsOptions { readjust: true, ..DfsOptions::FA };

    /// `dfs-fa+affinity`: DFS-FA with W = P and α = 2 slots.
    pub fn fa_affinity(cpus: usize) -> DfsOptions {
        DfsOptions { window: cpus.max(1), alpha: (2, 1), ..DfsOptions::FA }
    }
}

/// An exact positive rational (the total share Φ and the weight V refers to).
#[derive(Clone, Copy, Debug)]
struct Ratio {
    num: u128,
    den: u128,
}

impl Ratio {
    const ZERO: Ratio = Ratio { num: 0, den: 1 };

    fn same(self, o: Ratio) -> bool {
        U256::mul(self.num, o.den) == U256::mul(o.num, self.den)
    }
}

/// A queue key: the rational `num / den`, then `tie` (EQ: the client's φ, so
/// that clients with equal F and φ, which tie on every rule, are adjacent),
/// then the client id.
#[derive(Clone, Copy, Debug)]
struct Key {
    num: u128,
    den: u128,
    tie: u128,
    id: ClientId,
}

impl Ord for Key {
    fn cmp(&self, o: &Key) -> std::cmp::Ordering {
        U256::mul(self.num, o.den).cmp(&U256::mul(o.num, self.den)).then(self.tie.cmp(&o.tie)).then(self.id.cmp(&o.id))
    }
}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Key {
    fn eq(&self, o: &Key) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Key {}

/// Where a runnable client waits.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// Running, blocked, or not queued.
    Nowhere,
    /// In EQ under its finish-tag key.
    Eligible(Key),
    /// In IQ under its Ŝ key and its S key.
    Ineligible(Key, Key),
}

#[derive(Clone, Copy, Debug)]
struct Client {
    /// A = φ S: weighted service in ns (a run of q ns adds q).
    a: u128,
    /// The share used in every formula (readjusted with `+readjust`).
    phi: Phi,
    /// q̄: the most it may run at its next dispatch.
    budget: Time,
    place: Place,
}

/// A candidate for the pick: PD² priority data.
#[derive(Clone, Copy, Debug)]
struct Cand {
    key: Key,
    deadline: u128,
    b_bit: bool,
    group: u128,
}

/// DFS / DFS-FA on one global pair of queues.
pub type Dfs = Shell<DfsPolicy>;

/// The rules of DFS: the eligible and ineligible queues and the virtual time.
#[derive(Clone, Debug)]
pub struct DfsPolicy<A = Affinity> {
    opts: DfsOptions,
    quantum: Time,
    clients: ClientTable<Client>,
    eq: BTreeSet<Key>,
    iq_hat: BTreeSet<Key>,
    iq_start: BTreeSet<Key>,
    /// Ψ = Σ A_j over runnable clients (running ones included).
    psi: u128,
    /// Φ over runnable clients (exact; readjusted with `+readjust`).
    phi_total: Ratio,
    /// The p of the formulas: P, or P' = min(P, n) with readjustment.
    p_eff: u64,
    /// V = v · `v_over`, integer ns; `v_over` is Φ while anything is runnable.
    v_scaled: u128,
    v_over: Ratio,
    /// Clients running on some CPU.
    running: usize,
    feasible: FeasibleSet,
    capped: Vec<ClientId>,
    /// Where each client last ran, in per-CPU parts (kept only when α > 0;
    /// a pick on another CPU moves a client's entry).
    affinity: A,
}

impl Dfs {
    /// A DFS scheduler with the given rules, named `name`.
    pub fn with_options(cfg: SchedConfig, opts: DfsOptions, name: &'static str) -> Dfs {
        DfsPolicy::shell(cfg, opts, name, Affinity::new(cfg.cpus))
    }

    /// `dfs`.
    pub fn new(cfg: SchedConfig) -> Dfs {
        Dfs::with_options(cfg, DfsOptions::DFS, "dfs")
    }

    /// `dfs-notiebreak`.
    pub fn no_tie_break(cfg: SchedConfig) -> Dfs {
        Dfs::with_options(cfg, DfsOptions::NO_TIE_BREAK, "dfs-notiebreak")
    }

    /// `dfs-fa`.
    pub fn fair_airport(cfg: SchedConfig) -> Dfs {
        Dfs::with_options(cfg, DfsOptions::FA, "dfs-fa")
    }

    /// `dfs-fa+readjust`.
    pub fn fair_airport_readjusted(cfg: SchedConfig) -> Dfs {
        Dfs::with_options(cfg, DfsOptions::FA_READJUST, "dfs-fa+readjust")
    }

    /// `dfs-fa+affinity`.
    pub fn fair_airport_affinity(cfg: SchedConfig) -> Dfs {
        Dfs::with_options(cfg, DfsOptions::fa_affinity(cfg.cpus), "dfs-fa+affinity")
    }

    /// Whether runnable `c` satisfies Eq. 6 now.
    pub fn is_eligible(&self, c: ClientId) -> Option<bool> {
        self.policy().is_eligible(self.roster(), c)
    }
}

impl<A: AffinityParts> DfsPolicy<A> {
    /// [`Dfs::with_options`] with its processor affinity reached through
    /// `affinity` (a concurrent host's [`crate::percpu::LockedAffinity`]:
    /// the central queues are the global part, each CPU's affinity its own).
    pub fn shell(cfg: SchedConfig, opts: DfsOptions, name: &'static str, affinity: A) -> Shell<DfsPolicy<A>> {
        let policy = DfsPolicy {
            opts: DfsOptions { window: opts.window.max(1), alpha: (opts.alpha.0, opts.alpha.1.max(1)), ..opts },
            quantum: cfg.quantum,
            clients: ClientTable::new(),
            eq: BTreeSet::new(),
            iq_hat: BTreeSet::new(),
            iq_start: BTreeSet::new(),
            psi: 0,
            phi_total: Ratio::ZERO,
            p_eff: cfg.cpus as u64,
            v_scaled: 0,
            v_over: Ratio::ZERO,
            running: 0,
            feasible: FeasibleSet::new(),
            capped: Vec::new(),
            affinity,
        };
        Shell::build(name, &cfg, policy)
    }

    /// The options in force.
    pub fn options(&self) -> DfsOptions {
        self.opts
    }

    // ----- diagnostics (for tests and traces) -----

    /// The virtual time v as an exact fraction `(num, den)` in ns per unit weight.
    pub fn virtual_time(&self) -> (u128, u128) {
        if self.v_over.num == 0 {
            return (0, 1);
        }
        // v = V / Φ = V · den / num.
        (self.v_scaled.saturating_mul(self.v_over.den), self.v_over.num)
    }

    /// The start tag S of `c` as an exact fraction `(num, den)` in ns per unit weight.
    pub fn start_tag(&self, c: ClientId) -> Option<(u128, u128)> {
        self.clients.get(c).map(|k| (k.a.saturating_mul(k.phi.den as u128), k.phi.num as u128))
    }

    /// The share φ of `c` used in the formulas, as `(num, den)`.
    pub fn share(&self, c: ClientId) -> Option<(u64, u64)> {
        self.clients.get(c).map(|k| (k.phi.num, k.phi.den))
    }

    /// Whether runnable `c` satisfies Eq. 6 now.
    fn is_eligible(&self, roster: &Roster, c: ClientId) -> Option<bool> {
        let k = self.clients.get(c)?;
        roster.status(c).ok()?.is_runnable().then(|| self.eligible(k))
    }

    /// `c`'s Eq. 7 deadline (in slots) and whether Rule 1's b-bit is set.
    pub fn deadline(&self, c: ClientId) -> Option<(u128, bool)> {
        let k = self.clients.get(c)?;
        (self.phi_total.num > 0).then(|| self.deadline_of(k))
    }

    /// `c`'s finish tag F = S + q̄/φ as an exact fraction `(num, den)`.
    pub fn finish_tag(&self, c: ClientId) -> Option<(u128, u128)> {
        let k = self.clients.get(c)?;
        Some(((k.a.saturating_add(k.budget as u128)).saturating_mul(k.phi.den as u128), k.phi.num as u128))
    }

    // ----- the formulas -----

    fn eligible(&self, k: &Client) -> bool {
        eq6(k.a, k.phi, self.v_scaled, self.phi_total, self.p_eff, self.quantum)
    }

    fn deadline_of(&self, k: &Client) -> (u128, bool) {
        eq7(k.a.saturating_add(k.budget as u128), k.phi, self.phi_total, self.p_eff, self.quantum)
    }

    /// Rule 2 (Gap DFS-1): ⌈G⌉ = ⌈j u⌉ - 1, u = 1/(1 - w), j = ⌊(T + 1)/u⌋ + 1.
    fn group_of(&self, k: &Client) -> u128 {
        let p = self.p_eff as u128;
        // w = p φ/Φ = pw / x.
        let x = self.phi_total.num.saturating_mul(k.phi.den as u128);
        let pw = p.saturating_mul(k.phi.num as u128).saturating_mul(self.phi_total.den);
        if pw.saturating_mul(2) < x {
            return 0;
        }
        if pw >= x {
            return u128::MAX;
        }
        let y = x - pw; // u = x / y
        let slot = self.v_scaled / self.quantum as u128 / p.max(1);
        let j = U256::mul(slot.saturating_add(1), y).div_rem(U256::from(x)).0.saturating_u128().saturating_add(1);
        U256::mul(j, x).div_ceil_u128(U256::from(y)).saturating_sub(1)
    }

    fn finish_key(&self, c: ClientId, k: &Client) -> Key {
        Key {
            num: (k.a.saturating_add(k.budget as u128)).saturating_mul(k.phi.den as u128),
            den: k.phi.num as u128,
            tie: ((k.phi.num as u128) << 64) | k.phi.den as u128,
            id: c,
        }
    }

    fn ineligible_keys(&self, c: ClientId, k: &Client) -> (Key, Key) {
        let q = self.quantum as u128;
        let hat = k.a.div_ceil(q).saturating_mul(q);
        let den = k.phi.num as u128;
        let b = k.phi.den as u128;
        (Key { num: hat.saturating_mul(b), den, tie: 0, id: c }, Key { num: k.a.saturating_mul(b), den, tie: 0, id: c })
    }

    // ----- queues -----

    fn insert_eligible(&mut self, c: ClientId) {
        let key = self.finish_key(c, &self.clients[c]);
        self.eq.insert(key);
        self.clients[c].place = Place::Eligible(key);
    }

    fn insert_ineligible(&mut self, c: ClientId) {
        let (hat, start) = self.ineligible_keys(c, &self.clients[c]);
        self.iq_hat.insert(hat);
        self.iq_start.insert(start);
        self.clients[c].place = Place::Ineligible(hat, start);
    }

    /// Queue a runnable client that is not running, by Eq. 6 now.
    fn enqueue(&mut self, c: ClientId) {
        if self.eligible(&self.clients[c]) {
            self.insert_eligible(c);
        } else {
            self.insert_ineligible(c);
        }
    }

    /// Take `c` out of whichever queue holds it; returns whether it was eligible-queued.
    fn dequeue(&mut self, c: ClientId) -> Option<bool> {
        let k = self.clients.get_mut(c)?;
        let place = std::mem::replace(&mut k.place, Place::Nowhere);
        match place {
            Place::Nowhere => None,
            Place::Eligible(key) => {
                self.eq.remove(&key);
                Some(true)
            }
            Place::Ineligible(hat, start) => {
                self.iq_hat.remove(&hat);
                self.iq_start.remove(&start);
                Some(false)
            }
        }
    }

    /// Move IQ heads that satisfy Eq. 6 to EQ (section 6).
    fn promote(&mut self) {
        while let Some(&head) = self.iq_hat.first() {
            if !self.eligible(&self.clients[head.id]) {
                break;
            }
            self.dequeue(head.id);
            self.insert_eligible(head.id);
        }
    }

    // ----- shares, Φ and v -----

    /// Give `c` the share `phi`, keeping its lag φ(v - S) (or S; Gap: weight changes).
    fn set_phi(&mut self, roster: &Roster, c: ClientId, phi: Phi) {
        let Some(&k) = self.clients.get(c) else { return };
        if k.phi.num == phi.num && k.phi.den == phi.den {
            return;
        }
        let queued = self.dequeue(c);
        let a = match self.opts.reweight {
            Reweight::KeepLag => {
                // φ'(v - S') = φ(v - S): A' = A + ⌈φ'v⌉ - ⌈φv⌉, at least 0.
                let (now_v, new_v) = (self.a_at_v(k.phi), self.a_at_v(phi));
                if new_v >= now_v {
                    k.a.saturating_add(new_v - now_v)
                } else {
                    k.a.saturating_sub(now_v - new_v)
                }
            }
            Reweight::KeepStart => {
                // A' = ⌈A φ'/φ⌉ = ⌈A a' b / (b' a)⌉.
                let num = U256::mul(k.a, (phi.num as u128).saturating_mul(k.phi.den as u128));
                num.div_ceil_u128(U256::from((phi.den as u128).saturating_mul(k.phi.num as u128)))
            }
        };
        let k = &mut self.clients[c];
        let old = std::mem::replace(&mut k.a, a);
        k.phi = phi;
        if roster.status(c).is_ok_and(Status::is_runnable) {
            self.psi = self.psi.saturating_sub(old).saturating_add(a);
        }
        match queued {
            Some(true) => self.insert_eligible(c),
            Some(false) => self.insert_ineligible(c),
            None => {}
        }
    }

    /// ⌈φ v⌉ for a client of share `phi`: the A of a start tag equal to v.
    fn a_at_v(&self, phi: Phi) -> u128 {
        if self.v_over.num == 0 {
            return 0;
        }
        // φ v = (a/b) V den/num.
        let num = U256::mul((phi.num as u128).saturating_mul(self.v_over.den), self.v_scaled);
        num.div_ceil_u128(U256::mul(phi.den as u128, self.v_over.num))
    }

    /// After the runnable set or a weight changed: new φ's (readjustment), Φ,
    /// p, and V over the new Φ with v kept (then Eq. 5's clamp).
    fn retotal(&mut self, roster: &Roster) {
        if self.opts.readjust {
            let r = self.feasible.readjust(roster.cpus());
            let now_capped: Vec<ClientId> = self.feasible.heaviest(r.capped).map(|(c, _)| c).collect();
            for c in std::mem::take(&mut self.capped) {
                if !now_capped.contains(&c) {
                    if let Ok(w) = roster.weight(c) {
                        self.set_phi(roster, c, Phi::whole(w.get()));
                    }
                }
            }
            for &c in &now_capped {
                self.set_phi(roster, c, r.capped_phi());
            }
            self.capped = now_capped;
            self.p_eff = r.cpus.max(1);
            let den = r.feasible_cpus().max(1) as u128;
            self.phi_total = Ratio { num: (r.feasible_weight as u128).saturating_mul(r.cpus as u128), den };
        } else {
            self.phi_total = Ratio { num: roster.runnable_weight() as u128, den: 1 };
        }
        if self.phi_total.num == 0 {
            return; // nothing runnable: v frozen
        }
        if self.v_over.num != 0 && !self.v_over.same(self.phi_total) {
            // V' = ⌈V Φ'/Φ⌉.
            let num = U256::mul(self.v_scaled, self.phi_total.num.saturating_mul(self.v_over.den));
            self.v_scaled = num.div_ceil_u128(U256::mul(self.phi_total.den, self.v_over.num));
        }
        self.v_over = self.phi_total;
        self.v_scaled = self.v_scaled.max(self.psi);
    }

    /// `c` (already in the roster as runnable, with its tags set) enters the runnable set.
    fn add_runnable(&mut self, roster: &Roster, c: ClientId, w: Weight) {
        self.psi = self.psi.saturating_add(self.clients[c].a);
        if self.opts.readjust {
            self.feasible.insert(c, w);
        }
        self.retotal(roster);
        self.enqueue(c);
    }

    /// `c` (not running, its charge done) leaves the runnable set.
    fn remove_runnable(&mut self, c: ClientId, w: Weight) {
        self.dequeue(c);
        self.psi = self.psi.saturating_sub(self.clients[c].a);
        if self.opts.readjust {
            self.feasible.remove(c, w);
        }
    }

    // ----- the pick -----

    fn cand(&self, key: Key) -> Cand {
        let k = &self.clients[key.id];
        let (deadline, b_bit) =
            if self.scans_ties() || self.opts.window > 1 { self.deadline_of(k) } else { (0, false) };
        let group = if self.opts.tie_rules == TieRules::Pd2 && b_bit { self.group_of(k) } else { 0 };
        Cand { key, deadline, b_bit, group }
    }

    /// Whether picks must look at the whole group of equal deadlines (EQ's F
    /// order is not the priority order).
    fn scans_ties(&self) -> bool {
        self.opts.tie_rules != TieRules::None || self.opts.last_tie == LastTie::ClientId
    }

    /// The eligible client to run on `cpu`, by EDF, the tie rules and goodness.
    fn pick_eligible(&mut self, cpu: CpuId) -> Option<ClientId> {
        self.promote();
        let w = self.opts.window;
        let mut cands: Vec<Cand> = Vec::with_capacity(w);
        let mut cursor: Option<Key> = None;
        loop {
            let next = match cursor {
                None => self.eq.first().copied(),
                Some(k) => self.eq.range((Excluded(k), Unbounded)).next().copied(),
            };
            let Some(key) = next else { break };
            if !self.eligible(&self.clients[key.id]) {
                // Eligibility lost without running (Φ grew): back to IQ.
                self.dequeue(key.id);
                self.insert_ineligible(key.id);
                continue;
            }
            if cands.len() >= w {
                // With the tie rules, finish the group sharing the last deadline.
                let c = self.cand(key);
                if c.deadline > cands[cands.len() - 1].deadline {
                    break;
                }
                cands.push(c);
            } else {
                cands.push(self.cand(key));
                if cands.len() >= w && !self.scans_ties() {
                    break;
                }
            }
            // Past the window, the clients after `key` with the same F and φ tie
            // with it on every rule and lose on id: skip them in one step.
            let skip = cands.len() >= w && self.opts.last_tie == LastTie::FinishTag;
            cursor = Some(if skip { Key { id: ClientId(u32::MAX), ..key } } else { key });
        }
        if self.scans_ties() {
            // PD²: deadline, then b-bit 1 first, then larger group deadline, then the last tie.
            let (rule1, rule2) = (self.opts.tie_rules != TieRules::None, self.opts.tie_rules == TieRules::Pd2);
            let by_id = self.opts.last_tie == LastTie::ClientId;
            cands.sort_by(|x, y| {
                x.deadline
                    .cmp(&y.deadline)
                    .then(if rule1 { y.b_bit.cmp(&x.b_bit) } else { std::cmp::Ordering::Equal })
                    .then(if rule2 { y.group.cmp(&x.group) } else { std::cmp::Ordering::Equal })
                    .then(if by_id { x.key.id.cmp(&y.key.id) } else { x.key.cmp(&y.key) })
            });
            cands.truncate(w);
        }
        let (an, ad) = (self.opts.alpha.0 as u128, self.opts.alpha.1 as u128);
        let goodness = |c: &Cand| {
            let away = an > 0 && !self.affinity.ran_last_on(c.key.id, cpu.index());
            U256::mul(c.deadline, ad).saturating_add(U256::from(if away { an } else { 0 }))
        };
        let mut best: Option<(U256, ClientId)> = None;
        for c in &cands {
            let g = goodness(c);
            match best {
                Some((bg, _)) if bg <= g => {}
                _ => best = Some((g, c.key.id)),
            }
        }
        best.map(|(_, c)| c)
    }
}

impl<A: AffinityParts> Policy for DfsPolicy<A> {
    #[inline]
    fn work_conserving(&self) -> bool {
        self.opts.fair_airport
    }

    #[inline]
    fn join(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        let phi = Phi::whole(w.get());
        // Section 3.3: a new client starts at S = v.
        let a = self.a_at_v(phi);
        self.clients.insert(c, Client { a, phi, budget: self.quantum, place: Place::Nowhere });
        self.add_runnable(roster, c, w);
        None
    }

    #[inline]
    fn leave(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight, was: Status) {
        if was.is_runnable() {
            self.remove_runnable(c, w);
        }
        self.clients.remove(c);
        self.affinity.forget(c);
        self.retotal(roster);
    }

    #[inline]
    fn block(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight) {
        self.remove_runnable(c, w);
        self.retotal(roster);
    }

    #[inline]
    fn wake(&mut self, roster: &Roster, _now: Time, c: ClientId, w: Weight) -> Kick {
        // Eq. 4: S = max(S, v).
        let a = self.a_at_v(self.clients[c].phi);
        let k = &mut self.clients[c];
        k.a = k.a.max(a);
        self.add_runnable(roster, c, w);
        None
    }

    #[inline]
    fn set_weight(&mut self, roster: &Roster, _now: Time, c: ClientId, old: Weight, w: Weight, status: Status) {
        if self.opts.readjust && status.is_runnable() {
            self.feasible.remove(c, old);
            self.feasible.insert(c, w);
        }
        self.set_phi(roster, c, Phi::whole(w.get()));
        self.retotal(roster);
    }

    #[inline]
    fn pick(&mut self, _roster: &Roster, _now: Time, cpu: CpuId) -> Option<(ClientId, Time)> {
        let chosen = match self.pick_eligible(cpu) {
            Some(c) => Some(c),
            // Fair airport (section 4.2): GSQ empty, serve the ASQ by start tag;
            // or break a total stall (Gap).
            None if self.opts.fair_airport || (self.opts.stall_breaker && self.running == 0) => {
                self.iq_start.first().map(|k| k.id)
            }
            None => None,
        };
        let c = chosen?;
        self.dequeue(c);
        self.running += 1;
        if self.opts.alpha.0 > 0 {
            self.affinity.ran_on(c, cpu.index());
        }
        Some((c, self.clients[c].budget))
    }

    #[inline]
    fn stopped(
        &mut self,
        roster: &Roster,
        _now: Time,
        _cpu: CpuId,
        c: ClientId,
        w: Weight,
        ran: Time,
        why: StopReason,
    ) {
        self.running -= 1;
        // Eq. 4: S += q/φ, i.e. A += q; q̄ is what is left of the slice.
        let q = self.quantum;
        let k = &mut self.clients[c];
        k.a = k.a.saturating_add(ran as u128);
        k.budget = if ran >= k.budget { q } else { k.budget - ran };
        self.psi = self.psi.saturating_add(ran as u128);
        // Eq. 5's clamp (the client still counts: "start tag on departure").
        self.v_scaled = self.v_scaled.max(self.psi);
        match why {
            StopReason::Expired | StopReason::Preempted => self.enqueue(c),
            StopReason::Blocked => {
                self.remove_runnable(c, w);
                self.retotal(roster);
            }
            StopReason::Left => {
                self.remove_runnable(c, w);
                self.clients.remove(c);
                self.affinity.forget(c);
                self.retotal(roster);
            }
        }
    }

    /// DFS-I1: `running` counts the clients the roster records as running;
    /// DFS-I2: the queues (EQ, and IQ under both keys) hold exactly the
    /// waiting clients, each once, under the key its place records; DFS-I3:
    /// Ψ is the sum of A over the runnable clients (running ones included),
    /// and every client present has a record; DFS-I4: every affinity entry
    /// is in the part the owner map says, at most one per client.
    #[inline]
    fn check_invariants(&self, r: &Roster) -> Result<(), String> {
        if self.running != r.running() {
            return Err(format!("DFS-I1: running {} recorded, {} in the roster", self.running, r.running()));
        }
        let (mut eligible, mut ineligible, mut psi) = (0usize, 0usize, 0u128);
        for (c, k) in self.clients.iter() {
            let status = r.status(c).map_err(|_| format!("DFS-I3: a record for departed {c}"))?;
            if status.is_runnable() {
                psi = psi.saturating_add(k.a);
            }
            let waiting = status == Status::Runnable;
            match k.place {
                Place::Nowhere if waiting => return Err(format!("DFS-I2: waiting {c} is in no queue")),
                Place::Nowhere => {}
                _ if !waiting => return Err(format!("DFS-I2: {c} is queued but {status:?}")),
                Place::Eligible(key) if self.eq.contains(&key) => eligible += 1,
                Place::Ineligible(hat, start) if self.iq_hat.contains(&hat) && self.iq_start.contains(&start) => {
                    ineligible += 1
                }
                _ => return Err(format!("DFS-I2: {c}'s recorded key is not in its queue")),
            }
        }
        if eligible != self.eq.len() || ineligible != self.iq_hat.len() || ineligible != self.iq_start.len() {
            return Err(format!(
                "DFS-I2: EQ holds {}, IQ {} and {}, records say {eligible} and {ineligible}",
                self.eq.len(),
                self.iq_hat.len(),
                self.iq_start.len()
            ));
        }
        if self.clients.iter().count() != r.len() {
            return Err(format!("DFS-I3: {} records for {} clients", self.clients.iter().count(), r.len()));
        }
        if psi != self.psi {
            return Err(format!("DFS-I3: Ψ is {} but the runnable clients' A sum to {psi}", self.psi));
        }
        let affine = self.affinity.check().map_err(|e| format!("DFS-I4: {e}"))?;
        if affine > r.len() {
            return Err(format!("DFS-I4: {affine} affinity entries for {} clients", r.len()));
        }
        Ok(())
    }
}

/// Eq. 6 in exact integer form: a client with weighted service `a` = φ S and
/// share `phi` is eligible iff ⌈a/q⌉ q Φ < φ (V + p q), where `v_scaled` = V = v Φ.
fn eq6(a: u128, phi: Phi, v_scaled: u128, phi_total: Ratio, p: u64, q: Time) -> bool {
    let q = q as u128;
    let quanta = a.div_ceil(q);
    let lhs = U256::mul(quanta.saturating_mul(q).saturating_mul(phi.den as u128), phi_total.num);
    let rhs = U256::mul(
        (phi.num as u128).saturating_mul(phi_total.den),
        v_scaled.saturating_add((p as u128).saturating_mul(q)),
    );
    lhs < rhs
}

/// Eq. 7 and Rule 1: for `f` = φ F, d = ⌈F Φ/(q p)⌉ = ⌈f Φ/(φ q p)⌉, and
/// whether that ratio is not an integer (PD²'s b-bit).
fn eq7(f: u128, phi: Phi, phi_total: Ratio, p: u64, q: Time) -> (u128, bool) {
    let num = U256::mul(f.saturating_mul(phi.den as u128), phi_total.num);
    let den = U256::mul((phi.num as u128).saturating_mul(phi_total.den), (q as u128).saturating_mul(p as u128));
    let (quot, rem) = num.div_rem(den);
    let frac = rem != U256::ZERO;
    (quot.saturating_u128().saturating_add(frac as u128), frac)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::Scheduler;
    use proptest::prelude::*;

    /// ⌈n/d⌉ for the literal evaluation.
    fn ceil_div(n: u128, d: u128) -> u128 {
        n.div_ceil(d)
    }

    proptest! {
        /// T5: Eq. 6 as printed, evaluated literally with exact fractions, agrees
        /// with the integer form. S = a/φ, v = V/Φ, φ = fn/fd, Φ = tn/td:
        /// S φ/q + 1 ≤ ⌈φ (v/q + p/Φ)⌉, where φ(v/q + p/Φ) = φ (V + p q)/(Φ q).
        #[test]
        fn eq6_integer_form_is_the_printed_one(
            a in 0u128..5_000, fnum in 1u64..40, fden in 1u64..4, v in 0u128..5_000,
            tnum in 1u128..200, tden in 1u128..4, p in 1u64..9, q in 1u64..30,
        ) {
            let phi = Phi { num: fnum, den: fden };
            let total = Ratio { num: tnum, den: tden };
            // Left side S φ/q + 1 = a/q + 1 = (a + q)/q; right side
            // ⌈ (fn/fd) (V + p q) td / (tn q) ⌉.
            let rhs = ceil_div(fnum as u128 * (v + p as u128 * q as u128) * tden, fden as u128 * tnum * q as u128);
            let literal = a + q as u128 <= rhs * q as u128;
            prop_assert_eq!(eq6(a, phi, v, total, p, q), literal);
        }

        /// T6: the deadline is monotone in F (so EDF order is F order up to
        /// ties), and the b-bit is exactly "F Φ/(q p) is not an integer".
        #[test]
        fn eq7_monotone_in_finish_tag(
            f1 in 0u128..10_000, f2 in 0u128..10_000, fnum in 1u64..40, gnum in 1u64..40,
            tnum in 1u128..300, p in 1u64..9, q in 1u64..30,
        ) {
            let total = Ratio { num: tnum, den: 1 };
            let (phi, psi) = (Phi::whole(fnum), Phi::whole(gnum));
            let (d1, b1) = eq7(f1, phi, total, p, q);
            let (d2, _) = eq7(f2, psi, total, p, q);
            // F1 = f1/fnum, F2 = f2/gnum.
            if f1 * gnum as u128 <= f2 * fnum as u128 {
                prop_assert!(d1 <= d2);
            } else {
                prop_assert!(d1 >= d2);
            }
            let x_num = f1 * tnum;
            let x_den = fnum as u128 * q as u128 * p as u128;
            prop_assert_eq!(d1, ceil_div(x_num, x_den));
            prop_assert_eq!(b1, x_num % x_den != 0);
        }
    }

    /// Rule 2 as printed (with the q_max repair), run incrementally, against the closed form.
    #[test]
    fn group_deadline_closed_form_matches_the_printed_loop() {
        let q = 10;
        for (p, weights) in
            [(2u64, vec![1u64, 1, 1]), (3, vec![5, 3, 2, 2]), (4, vec![7, 7, 7, 3, 2]), (2, vec![3, 2, 1])]
        {
            let mut s = Dfs::new(SchedConfig::new(p as usize, q));
            for (i, &w) in weights.iter().enumerate() {
                s.join(0, ClientId(i as u32), Weight::new(w).unwrap()).unwrap();
            }
            let phi_sum: u64 = weights.iter().sum();
            for (i, &w) in weights.iter().enumerate() {
                let c = ClientId(i as u32);
                // Exact rationals: G = pφ/(Φ - pφ), step Φ/(Φ - pφ), both over Φ - pφ.
                let heavy = 2 * p * w >= phi_sum;
                let den = (phi_sum - (p * w).min(phi_sum)) as u128;
                let (mut g_num, step) = ((p * w) as u128, phi_sum as u128);
                for slot in 0u128..60 {
                    s.policy_mut().v_scaled = slot * (q as u128) * p as u128 + 3; // v just past slot `slot`
                    let want = if !heavy {
                        0
                    } else if den == 0 {
                        u128::MAX
                    } else {
                        // "whenever v ≥ ⌈G⌉ q p/Φ, G += Φ/(Φ - pφ)", i.e. slot ≥ ⌈G⌉.
                        while slot >= g_num.div_ceil(den) {
                            g_num += step;
                        }
                        g_num.div_ceil(den)
                    };
                    assert_eq!(s.group_of(&s.clients[c]), want, "p {p} weights {weights:?} client {i} slot {slot}");
                }
            }
        }
    }
}
