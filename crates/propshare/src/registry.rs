//! Schedulers by name, for hosts, scenario files and the command line.
//!
//! A name is an algorithm's registry name (`"wfq"`), optionally followed by
//! `+readjust` where the algorithm offers a readjusted variant. Variants are
//! named parameter sets of one algorithm.
//!
//! # Typed parameters
//!
//! An algorithm with tunable parameters declares them ([`Param`]: a name,
//! an integer (with its range), boolean or choice-of-names kind, a default,
//! one line of doc).
//! A *scheduler spec* gives some of them: `gdq(delta=8,t=40)`. Parameters
//! not given keep their defaults, so `gdq` and `gdq()` are the registered
//! `gdq` exactly. [`parse_spec`] and [`resolve`] refuse an unknown name or
//! parameter, a malformed value or one out of range with an error naming
//! it; [`build`] accepts a plain name or a spec. Scenario files give the
//! same parameters in a table (`[scheduler.gdq] delta = 8`), and
//! `propshare list --params` lists them all.

use std::borrow::Cow;

use crate::algo;
use crate::model::Time;
use crate::scheduler::{ConfigError, SchedConfig, Scheduler};

/// One registered scheduler.
pub struct Entry {
    /// Its name on the command line and in scenario files.
    pub name: &'static str,
    /// One line: what it is and where it comes from.
    pub summary: &'static str,
    /// Its tunable parameters (empty for most).
    pub params: &'static [Param],
    /// Build one with resolved parameters.
    pub build: fn(SchedConfig, &Params) -> Box<dyn Scheduler + Send>,
}

/// The kind and range of a parameter's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// An integer in `min..=max`.
    Int {
        /// Smallest value accepted.
        min: u64,
        /// Largest value accepted.
        max: u64,
    },
    /// `true` or `false`.
    Bool,
    /// One of these names; the value is its index.
    Choice(&'static [&'static str]),
}

/// One tunable parameter of an algorithm.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// Its name in specs and scenario files.
    pub name: &'static str,
    /// Integer or boolean, with its range.
    pub kind: ParamKind,
    /// The value the registered scheduler uses (booleans: 0 or 1; choices:
    /// the index of the name).
    pub default: u64,
    /// One line: what it is, with its unit and paper section.
    pub doc: &'static str,
}

/// The parameters of one build, every declared one present (given or default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params {
    values: Vec<(&'static str, u64)>,
}

impl Params {
    /// The value of integer parameter `name`. Panics if the entry did not
    /// declare it (a registry bug, caught by the registry's own tests).
    pub fn int(&self, name: &str) -> u64 {
        self.values.iter().find(|(n, _)| *n == name).map(|&(_, v)| v).expect("declared parameter")
    }

    /// The value of boolean parameter `name`.
    pub fn flag(&self, name: &str) -> bool {
        self.int(name) != 0
    }
}

/// A parsed scheduler spec: `name` or `name(param=value,...)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedSpec {
    /// The registry name.
    pub name: String,
    /// The parameters given, in the order given, as text.
    pub given: Vec<(String, String)>,
}

const NO_PARAMS: &[Param] = &[];

const GR3_PARAMS: &[Param] = &[Param {
    name: "charge",
    kind: ParamKind::Choice(&["quantum", "runtime"]),
    default: 0,
    doc: "what a selection costs: one quantum (§2.2.3, the paper) or the time the client ran (Gaps GR3-13..17)",
}];

/// A GR3MP called `name` with rescale `rule` and the `charge` of `p`.
fn gr3mp(cfg: SchedConfig, p: &Params, name: &'static str, rule: algo::gr3::RescaleRule) -> Box<dyn Scheduler + Send> {
    let charge = if p.int("charge") == 1 { algo::gr3::Charge::Runtime } else { algo::gr3::Charge::Quantum };
    Box::new(algo::gr3mp::Gr3Mp::new(cfg, name, rule, charge))
}

const GDQ_PARAMS: &[Param] = &[
    Param {
        name: "delta",
        kind: ParamKind::Int { min: 0, max: 1 << 20 },
        default: 4,
        doc: "δ: rounds a queue may run ahead of its group's slowest queue before it steals",
    },
    Param {
        name: "t",
        kind: ParamKind::Int { min: 1, max: 1 << 30 },
        default: 20,
        doc: "T: the inter-group interval, in quanta (each CPU runs MFQ once per T)",
    },
];

const DWRR_PARAMS: &[Param] = &[
    Param {
        name: "round",
        kind: ParamKind::Int { min: 1, max: 1 << 30 },
        default: 3,
        doc: "B: the round slice unit, in quanta (a client of weight w gets w·B/U per round)",
    },
    Param {
        name: "unit",
        kind: ParamKind::Int { min: 1, max: u32::MAX as u64 },
        default: 1,
        doc: "U: the weight unit of the round slice w·B/U",
    },
];

const SFS_HEURISTIC_PARAMS: &[Param] = &[
    Param {
        name: "k",
        kind: ParamKind::Int { min: 1, max: 1 << 20 },
        default: algo::sfs::DEFAULT_HEURISTIC_K as u64,
        doc: "k: waiting clients examined at the head of each of the three queues (section 3.2)",
    },
    Param {
        name: "resort",
        kind: ParamKind::Int { min: 1, max: 1 << 40 },
        default: algo::sfs::DEFAULT_RESORT_EVERY,
        doc: "picks between two re-sorts of the surplus queue",
    },
];

const SFS_AFFINITY_PARAMS: &[Param] = &[Param {
    name: "bias",
    kind: ParamKind::Int { min: 1, max: 1 << 20 },
    default: algo::sfs::DEFAULT_AFFINITY_BIAS as u64,
    doc: "B: prefer a client that last ran here among the B least surpluses (section 2.4)",
}];

const READJUST_PARAMS: &[Param] = &[Param {
    name: "readjust",
    kind: ParamKind::Bool,
    default: 0,
    doc: "run over readjusted weights (SFS paper section 2.9); `NAME+readjust` is this",
}];

const VARIANT_PARAMS: &[Param] = &[
    READJUST_PARAMS[0],
    Param {
        name: "dedicate",
        kind: ParamKind::Bool,
        default: 0,
        doc: "readjusted, and a waiting capped client runs first (implies readjust); `NAME+readjust+dedicate`",
    },
];

const HWF2Q_PARAMS: &[Param] = &[Param {
    name: "no_capped_credit",
    kind: ParamKind::Bool,
    default: 0,
    doc:
        "hold a child more than a quantum behind its group's V as capped, out of V's rate (Gap HWF2Q-2; measured worse)",
}];

const SRR_PARAMS: &[Param] = &[
    VARIANT_PARAMS[0],
    VARIANT_PARAMS[1],
    Param {
        name: "repay",
        kind: ParamKind::Bool,
        default: 0,
        doc: "a turn skipped while the client runs on another CPU is owed and given back when it waits (Gap SRR-2)",
    },
];

const LINUX_PARAMS: &[Param] = &[
    READJUST_PARAMS[0],
    Param {
        name: "lbfail",
        kind: ParamKind::Bool,
        default: 0,
        doc: "the kernel's nr_balance_failed relaxation: too-heavy tasks move after failed passes; `NAME+lbfail`",
    },
];

const CFS_PARAMS: &[Param] = &[
    LINUX_PARAMS[0],
    LINUX_PARAMS[1],
    Param {
        name: "keeplag",
        kind: ParamKind::Bool,
        default: 0,
        doc: "a weight change keeps the lag v - min_vruntime in service (scaled by w_old/w_new); the kernel keeps v (Gap CFS-6)",
    },
];

/// A one-queue tag scheduler, plain or over readjusted weights.
fn tagged<R>(cfg: SchedConfig, p: &Params) -> Box<dyn Scheduler + Send>
where
    R: algo::one_queue::TagRules + Send + 'static,
    R::Tags: Send,
{
    type S<R> = crate::shell::Shell<algo::one_queue::OneQueue<R>>;
    if p.flag("readjust") {
        Box::new(S::<R>::with_readjustment(cfg))
    } else {
        Box::new(S::<R>::new(cfg))
    }
}

/// The variant of a baseline its parameters name (`dedicate` implies `readjust`).
fn variant<P: crate::shell::Variants>(cfg: SchedConfig, p: &Params) -> crate::shell::Shell<P> {
    type S<P> = crate::shell::Shell<P>;
    match (p.flag("readjust"), p.flag("dedicate")) {
        (_, true) => S::<P>::with_dedicated_cpus(cfg),
        (true, false) => S::<P>::with_readjustment(cfg),
        (false, false) => S::<P>::new(cfg),
    }
}

/// A baseline in its three variants.
fn variants<P: crate::shell::Variants + Send + 'static>(cfg: SchedConfig, p: &Params) -> Box<dyn Scheduler + Send> {
    Box::new(variant::<P>(cfg, p))
}

/// SRR in its three variants, with or without `repay`.
fn srr(cfg: SchedConfig, p: &Params) -> Box<dyn Scheduler + Send> {
    let mut s = variant::<algo::srr::Srr>(cfg, p);
    s.policy_mut().set_repay(p.flag("repay"));
    Box::new(s)
}

/// CFS or EEVDF with the readjustment and balance-relaxation options (and
/// CFS's `keeplag`).
fn linux<R: algo::linux::FairRq + Send + 'static>(
    cfg: SchedConfig,
    p: &Params,
    keep_lag: bool,
) -> Box<dyn Scheduler + Send> {
    Box::new(linux_sched::<R>(cfg, p, keep_lag))
}

/// The Linux-like scheduler `p` describes (`cfs`, `eevdf` and their `+tg` forms).
fn linux_sched<R: algo::linux::FairRq>(cfg: SchedConfig, p: &Params, keep_lag: bool) -> algo::linux::LinuxSched<R> {
    let tun = algo::linux::Tunables {
        balance_failed_relax: p.flag("lbfail"),
        reweight_keeps_lag: keep_lag,
        ..algo::linux::Tunables::for_quantum(cfg.quantum)
    };
    algo::linux::LinuxSched::<R>::with_options(cfg, tun, p.flag("readjust"))
}

/// DWRR's options from its parameters: B = round·Q, U = unit.
/// DWRR's options from resolved registry parameters (`round`, `unit`) on
/// `cfg`, with the overrun carried if `carry`: what the `dwrr*` entries
/// build with, for hosts that drive DWRR's per-CPU parts themselves.
pub fn dwrr_options(cfg: SchedConfig, p: &Params, carry: bool) -> algo::dwrr::DwrrOptions {
    let opts = algo::dwrr::DwrrOptions {
        round_unit: cfg.quantum.saturating_mul(p.int("round")).max(1),
        weight_unit: p.int("unit"),
        carry_overrun: false,
    };
    if carry {
        opts.with_carry()
    } else {
        opts
    }
}

/// Every scheduler, in the order reports list them.
pub const SCHEDULERS: &[Entry] = &[
    Entry {
        name: "rr",
        summary: "round robin, weights ignored (reference)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::rr::RoundRobin::new(c)),
    },
    Entry {
        name: "wfq",
        summary: "weighted fair queueing, global finish-tag queue (Demers et al. 1989)",
        params: READJUST_PARAMS,
        build: |c, p| tagged::<algo::wfq::WfqRules>(c, p),
    },
    Entry {
        name: "wfq+readjust",
        summary: "WFQ over readjusted weights (SFS paper section 2.2)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::wfq::Wfq::with_readjustment(c)),
    },
    Entry {
        name: "wf2q",
        summary: "WF2Q+, eligible smallest finish tag, global queue (Bennett and Zhang 1996)",
        params: READJUST_PARAMS,
        build: |c, p| tagged::<algo::wf2q::Wf2qRules>(c, p),
    },
    Entry {
        name: "wf2q+readjust",
        summary: "WF2Q+ over readjusted weights (SFS paper section 2.2)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::wf2q::Wf2q::with_readjustment(c)),
    },
    Entry {
        name: "hwf2q",
        summary: "H-WF2Q+: WF2Q+ per group of the tree, natively hierarchical, on P CPUs (Bennett and Zhang 1997)",
        params: HWF2Q_PARAMS,
        build: |c, p| {
            let params = algo::hwf2q::Hwf2qParams { no_capped_credit: p.flag("no_capped_credit") };
            Box::new(algo::hwf2q::Hwf2q::with_params(c, params))
        },
    },
    Entry {
        name: "sfq",
        summary: "start-time fair queueing, global queue (Goyal, Vin, Cheng 1996)",
        params: READJUST_PARAMS,
        build: |c, p| tagged::<algo::sfq::SfqRules>(c, p),
    },
    Entry {
        name: "sfq+readjust",
        summary: "SFQ over readjusted weights, the SFS paper's \"SFQ with readjustment\"",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::sfq::Sfq::with_readjustment(c)),
    },
    Entry {
        name: "stride",
        summary: "stride scheduling, global pass (Waldspurger and Weihl 1995)",
        params: READJUST_PARAMS,
        build: |c, p| tagged::<algo::stride::StrideRules>(c, p),
    },
    Entry {
        name: "stride+readjust",
        summary: "stride scheduling over readjusted weights (SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::stride::Stride::with_readjustment(c)),
    },
    Entry {
        name: "lottery",
        summary: "lottery scheduling, seeded, compensation tickets (Waldspurger and Weihl 1994)",
        params: VARIANT_PARAMS,
        build: |c, p| variants::<algo::lottery::LotteryPolicy>(c, p),
    },
    Entry {
        name: "lottery+readjust",
        summary: "lottery with tickets in proportion to readjusted weights, one exact draw (SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::lottery::Lottery::with_readjustment(c)),
    },
    Entry {
        name: "lottery+readjust+dedicate",
        summary: "lottery over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::lottery::Lottery::with_dedicated_cpus(c)),
    },
    Entry {
        name: "wrr",
        summary: "weighted round robin, w consecutive quanta per round (as in the GR3 paper)",
        params: VARIANT_PARAMS,
        build: |c, p| variants::<algo::wrr::Wrr>(c, p),
    },
    Entry {
        name: "wrr+readjust",
        summary: "WRR with turns of phi*Q ns over readjusted weights, rational phi paid exactly over turns (SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::wrr::WeightedRoundRobin::with_readjustment(c)),
    },
    Entry {
        name: "wrr+readjust+dedicate",
        summary: "WRR over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::wrr::WeightedRoundRobin::with_dedicated_cpus(c)),
    },
    Entry {
        name: "srr",
        summary: "smoothed round robin, weight matrix and weight spread sequence (Guo 2001)",
        params: SRR_PARAMS,
        build: srr,
    },
    Entry {
        name: "srr+readjust",
        summary: "SRR over readjusted weights, a capped client's rational phi paid exactly over passes (SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::srr::SmoothedRoundRobin::with_readjustment(c)),
    },
    Entry {
        name: "srr+readjust+dedicate",
        summary: "SRR over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::srr::SmoothedRoundRobin::with_dedicated_cpus(c)),
    },
    Entry {
        name: "vtrr",
        summary: "virtual-time round robin (Nieh, Vaill, Zhong 2001)",
        params: VARIANT_PARAMS,
        build: |c, p| variants::<algo::vtrr::VtrrPolicy>(c, p),
    },
    Entry {
        name: "vtrr+readjust",
        summary: "VTRR over readjusted weights: exact virtual times, counters paid exactly over cycles (SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::vtrr::Vtrr::with_readjustment(c)),
    },
    Entry {
        name: "vtrr+readjust+dedicate",
        summary: "VTRR over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::vtrr::Vtrr::with_dedicated_cpus(c)),
    },
    Entry {
        name: "cfs",
        summary: "Linux CFS (<= 6.5): per-CPU vruntime runqueues, load balancing of weighted load (kernel/sched/fair.c)",
        params: CFS_PARAMS,
        build: |c, p| linux::<algo::cfs::CfsRq>(c, p, p.flag("keeplag")),
    },
    Entry {
        name: "eevdf",
        summary: "Linux EEVDF (>= 6.6): per-CPU eligible earliest virtual deadline first with lag placement, load balancing (kernel/sched/fair.c)",
        params: LINUX_PARAMS,
        build: |c, p| linux::<algo::eevdf::EevdfRq>(c, p, false),
    },
    Entry {
        name: "cfs+tg",
        summary: "CFS with Linux group scheduling's per-CPU group shares (calc_group_shares, kernel/sched/fair.c): a group's weight split per CPU by its runnable load there",
        params: CFS_PARAMS,
        build: |c, p| {
            Box::new(algo::linux_groups::LinuxGroups::new(linux_sched::<algo::cfs::CfsRq>(c, p, p.flag("keeplag"))))
        },
    },
    Entry {
        name: "eevdf+tg",
        summary: "EEVDF with Linux group scheduling's per-CPU group shares (calc_group_shares, kernel/sched/fair.c): a group's weight split per CPU by its runnable load there",
        params: LINUX_PARAMS,
        build: |c, p| Box::new(algo::linux_groups::LinuxGroups::new(linux_sched::<algo::eevdf::EevdfRq>(c, p, false))),
    },
    Entry {
        name: "cfs+lbfail",
        summary: "CFS with the kernel's nr_balance_failed relaxation: too-heavy tasks move after failed balance passes",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::cfs::Cfs::with_balance_failed_relax(c)),
    },
    Entry {
        name: "eevdf+lbfail",
        summary: "EEVDF with the kernel's nr_balance_failed relaxation: too-heavy tasks move after failed balance passes",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::eevdf::Eevdf::with_balance_failed_relax(c)),
    },
    Entry {
        name: "cfs+readjust",
        summary: "CFS over readjusted weights (global readjustment, phi rounded to an integer load weight; SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::cfs::Cfs::with_readjustment(c)),
    },
    Entry {
        name: "eevdf+readjust",
        summary: "EEVDF over readjusted weights (global readjustment, phi rounded to an integer load weight; SFS paper section 2.9)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::eevdf::Eevdf::with_readjustment(c)),
    },
    Entry {
        name: "gdq",
        summary: "grouped distributed queues, delta = 4, T = 20 quanta (Caprita, Nieh, Stein 2006)",
        params: GDQ_PARAMS,
        build: |c, p| Box::new(algo::gdq::Gdq::with_params(c, algo::gdq::GdqParams { delta: p.int("delta"), interval: p.int("t") })),
    },
    Entry {
        name: "sfs",
        summary: "surplus fair scheduling, exact least-surplus pick over readjusted weights (Chandra et al. 2000)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::sfs::Sfs::new(c)),
    },
    Entry {
        name: "sfs+heuristic",
        summary: "SFS examining only the first 20 clients of each queue (SFS paper section 3.2)",
        params: SFS_HEURISTIC_PARAMS,
        build: |c, p| {
            let h = algo::sfs::Heuristic { per_queue: p.int("k") as usize, resort_every: p.int("resort") };
            Box::new(algo::sfs::Sfs::with_options(c, algo::sfs::SfsOptions { heuristic: Some(h), ..algo::sfs::SfsOptions::EXACT }))
        },
    },
    Entry {
        name: "sfs+affinity",
        summary: "SFS preferring the client that last ran on the CPU among the 4 least surpluses, within one quantum of surplus (section 2.4)",
        params: SFS_AFFINITY_PARAMS,
        build: |c, p| {
            let bias = p.int("bias") as usize;
            let opts = algo::sfs::SfsOptions { affinity_bias: bias, affinity_slack: Some(c.quantum), ..algo::sfs::SfsOptions::EXACT };
            Box::new(algo::sfs::Sfs::with_options(c, opts))
        },
    },
    Entry {
        name: "dfs",
        summary: "deadline fair scheduling with PD2 tie rules, P-fair, not work-conserving (Chandra et al. RTAS 2001)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::dfs::Dfs::new(c)),
    },
    Entry {
        name: "dfs-notiebreak",
        summary: "DFS without the PD2 tie rules, as in the paper's simulations (RTAS 2001 section 4.1)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::dfs::Dfs::no_tie_break(c)),
    },
    Entry {
        name: "dfs-fa",
        summary: "DFS-FA: DFS plus the fair-airport start-tag queue, work-conserving (RTAS 2001 section 4.2)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::dfs::Dfs::fair_airport(c)),
    },
    Entry {
        name: "dfs-fa+affinity",
        summary: "DFS-FA with the goodness affinity rule, W = P, alpha = 2 slots (RTAS 2001 section 5)",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::dfs::Dfs::fair_airport_affinity(c)),
    },
    Entry {
        name: "dfs-fa+readjust",
        summary: "DFS-FA over readjusted weights (SFS paper section 2.2); fixes DFS-FA starvation",
        params: NO_PARAMS,
        build: |c, _| Box::new(algo::dfs::Dfs::fair_airport_readjusted(c)),
    },
    Entry {
        name: "gr3",
        summary: "group ratio round robin, O(1) (Caprita et al. 2005 section 2); on P > 1 CPUs it is gr3mp",
        params: GR3_PARAMS,
        build: |c, p| gr3mp(c, p, "gr3", algo::gr3::RescaleRule::Paper),
    },
    Entry {
        name: "gr3mp",
        summary: "GR3 on P CPUs: central queue, frontlogs, readjustment through groups (Caprita et al. 2005 section 3)",
        params: GR3_PARAMS,
        build: |c, p| gr3mp(c, p, "gr3mp", algo::gr3::RescaleRule::Paper),
    },
    Entry {
        name: "gr3mp+runtime",
        summary: "GR3MP charged by the time each client really ran: gr3mp(charge=runtime) under a name without parentheses",
        params: NO_PARAMS,
        build: |c, _| {
            let name = "gr3mp+runtime";
            Box::new(algo::gr3mp::Gr3Mp::new(c, name, algo::gr3::RescaleRule::Paper, algo::gr3::Charge::Runtime))
        },
    },
    Entry {
        name: "gr3+fairjoin",
        summary: "GR3 with the join/leave work rescale tied to the heavier neighbour (fixes starvation after churn)",
        params: GR3_PARAMS,
        build: |c, p| gr3mp(c, p, "gr3+fairjoin", algo::gr3::RescaleRule::Predecessor),
    },
    Entry {
        name: "gr3mp+fairjoin",
        summary: "GR3MP with the join/leave work rescale tied to the heavier neighbour",
        params: GR3_PARAMS,
        build: |c, p| gr3mp(c, p, "gr3mp+fairjoin", algo::gr3::RescaleRule::Predecessor),
    },
    Entry {
        name: "dwrr",
        summary: "distributed weighted round-robin over per-CPU round-robin queues (Li et al. PPoPP 2009)",
        params: DWRR_PARAMS,
        build: |c, p| Box::new(algo::dwrr::DwrrRr::new(c, dwrr_options(c, p, false))),
    },
    Entry {
        name: "dwrr+carry",
        summary: "DWRR, slice overrun carried into the next round",
        params: DWRR_PARAMS,
        build: |c, p| Box::new(algo::dwrr::DwrrRr::new(c, dwrr_options(c, p, true))),
    },
    Entry {
        name: "dwrr-cfs",
        summary: "DWRR over per-CPU CFS-like vruntime queues (the paper's Linux 2.6.24 port)",
        params: DWRR_PARAMS,
        build: |c, p| Box::new(algo::dwrr::DwrrCfs::new(c, dwrr_options(c, p, false))),
    },
    Entry {
        name: "dwrr-cfs+carry",
        summary: "DWRR over CFS-like queues, slice overrun carried into the next round",
        params: DWRR_PARAMS,
        build: |c, p| Box::new(algo::dwrr::DwrrCfs::new(c, dwrr_options(c, p, true))),
    },
];

/// A scheduler name that is not registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler {name:?}; known schedulers: {known}")]
pub struct UnknownScheduler {
    /// The name asked for.
    pub name: String,
    /// The registered names, comma-separated.
    pub known: String,
}

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// See [`UnknownScheduler`].
    #[error(transparent)]
    Unknown(#[from] UnknownScheduler),
    /// A spec that is not `name` or `name(param=value,...)`.
    #[error("scheduler spec {spec:?}: {why}")]
    Syntax {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// A parameter the scheduler does not have.
    #[error("scheduler {scheduler:?} has no parameter {param:?}; its parameters: {known}")]
    UnknownParam {
        /// The scheduler.
        scheduler: String,
        /// The parameter asked for.
        param: String,
        /// Its parameters, comma-separated (or "none").
        known: String,
    },
    /// A parameter value of the wrong kind or out of range.
    #[error("scheduler {scheduler:?}, parameter {param:?}: {why}")]
    BadValue {
        /// The scheduler.
        scheduler: String,
        /// The parameter.
        param: String,
        /// What is wrong with the value.
        why: String,
    },
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The registered names.
pub fn names() -> impl Iterator<Item = &'static str> {
    SCHEDULERS.iter().map(|e| e.name)
}

/// Look a scheduler up by its registry name (no parameters).
pub fn find(name: &str) -> Result<&'static Entry, UnknownScheduler> {
    SCHEDULERS
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| UnknownScheduler { name: name.to_string(), known: names().collect::<Vec<_>>().join(", ") })
}

/// Parse `name` or `name(param=value,...)` (spaces around items allowed).
pub fn parse_spec(spec: &str) -> Result<SchedSpec, BuildError> {
    let syntax = |why: &str| BuildError::Syntax { spec: spec.to_string(), why: why.to_string() };
    let spec_t = spec.trim();
    let Some(open) = spec_t.find('(') else {
        if spec_t.contains(')') {
            return Err(syntax("a ')' without '('"));
        }
        return Ok(SchedSpec { name: spec_t.to_string(), given: Vec::new() });
    };
    let name = spec_t[..open].trim();
    let Some(inner) = spec_t[open + 1..].strip_suffix(')') else {
        return Err(syntax("the parameter list must end with ')'"));
    };
    if name.is_empty() {
        return Err(syntax("no scheduler name before '('"));
    }
    let mut given: Vec<(String, String)> = Vec::new();
    for item in inner.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(syntax(&format!("{item:?} is not param=value")));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || v.is_empty() || v.contains(['(', ')', '=']) {
            return Err(syntax(&format!("{item:?} is not param=value")));
        }
        if given.iter().any(|(g, _)| g == k) {
            return Err(syntax(&format!("parameter {k:?} given twice")));
        }
        given.push((k.to_string(), v.to_string()));
    }
    Ok(SchedSpec { name: name.to_string(), given })
}

/// Split a comma-separated list of specs at the commas outside parentheses:
/// `"rr,gdq(delta=8,t=40)"` is `["rr", "gdq(delta=8,t=40)"]`.
pub fn split_specs(list: &str) -> Vec<String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, ch) in list.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(list[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(list[start..].trim().to_string());
    out.retain(|s| !s.is_empty());
    out
}

/// Check `given` against `entry`'s parameters; every declared parameter
/// comes back, given or default.
pub fn resolve(entry: &Entry, given: &[(String, String)]) -> Result<Params, BuildError> {
    for (k, _) in given {
        if !entry.params.iter().any(|p| p.name == k) {
            let known: Vec<&str> = entry.params.iter().map(|p| p.name).collect();
            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            return Err(BuildError::UnknownParam { scheduler: entry.name.into(), param: k.clone(), known });
        }
    }
    let mut values = Vec::with_capacity(entry.params.len());
    for p in entry.params {
        let v = match given.iter().find(|(k, _)| k == p.name) {
            None => p.default,
            Some((_, text)) => parse_value(p, text).map_err(|why| BuildError::BadValue {
                scheduler: entry.name.into(),
                param: p.name.into(),
                why,
            })?,
        };
        values.push((p.name, v));
    }
    Ok(Params { values })
}

fn parse_value(p: &Param, text: &str) -> Result<u64, String> {
    match p.kind {
        ParamKind::Bool => match text {
            "true" => Ok(1),
            "false" => Ok(0),
            _ => Err(format!("{text:?} is not true or false")),
        },
        ParamKind::Choice(names) => names
            .iter()
            .position(|&n| n == text)
            .map(|i| i as u64)
            .ok_or_else(|| format!("{text:?} is not one of {}", names.join(", "))),
        ParamKind::Int { min, max } => {
            let v: u64 = text.replace('_', "").parse().map_err(|_| format!("{text:?} is not a whole number"))?;
            if v < min || v > max {
                return Err(format!("{v} is outside {min}..={max}"));
            }
            Ok(v)
        }
    }
}

/// Build the scheduler `spec` (a name, or `name(param=value,...)`) for `cfg`.
/// With parameters given, the scheduler is named by the spec as written
/// (trimmed), so that runs with different parameters are told apart.
pub fn build(spec: &str, cfg: SchedConfig) -> Result<Box<dyn Scheduler>, BuildError> {
    Ok(build_send(spec, cfg)?)
}

/// [`build`], typed `Send` (every registered scheduler is plain owned
/// data), for a threaded host that keeps it behind a lock.
pub fn build_send(spec: &str, cfg: SchedConfig) -> Result<Box<dyn Scheduler + Send>, BuildError> {
    let parsed = parse_spec(spec)?;
    let name = if parsed.given.is_empty() { None } else { Some(spec.trim().to_string()) };
    build_parsed(&parsed, name, cfg)
}

/// Build `spec` for `cfg` and call it `display` (a scenario names a
/// scheduler and gives its parameters in a table).
pub fn build_as(display: &str, spec: &SchedSpec, cfg: SchedConfig) -> Result<Box<dyn Scheduler>, BuildError> {
    Ok(build_parsed(spec, Some(display.to_string()), cfg)?)
}

/// The round slice of `spec` on `cfg` for a client of weight `w`, for the
/// schedulers that pay weights per round (the DWRR family: `w·B/U`; see
/// `DwrrOptions::round_slice`), `None` for the others. Hosts warn when it
/// is long next to the run: a raised weight is paid from the next round.
pub fn round_slice(spec: &SchedSpec, cfg: SchedConfig, w: u64) -> Result<Option<Time>, BuildError> {
    let entry = find(&spec.name)?;
    if !entry.name.starts_with("dwrr") {
        return Ok(None);
    }
    let params = resolve(entry, &spec.given)?;
    Ok(Some(dwrr_options(cfg, &params, false).round_slice(w)))
}

/// Check a spec without building it (for validating input up front).
pub fn check(spec: &str) -> Result<(), BuildError> {
    let parsed = parse_spec(spec)?;
    resolve(find(&parsed.name)?, &parsed.given).map(drop)
}

fn build_parsed(
    spec: &SchedSpec,
    name: Option<String>,
    cfg: SchedConfig,
) -> Result<Box<dyn Scheduler + Send>, BuildError> {
    let entry = find(&spec.name)?;
    let params = resolve(entry, &spec.given)?;
    cfg.validate()?;
    let sched = (entry.build)(cfg, &params);
    Ok(match name {
        Some(n) if n != sched.name() => Box::new(Named { name: n.into(), inner: sched }),
        _ => sched,
    })
}

/// A scheduler under another name (a spec with parameters, or a scenario's
/// name for it); every call passes through.
struct Named {
    name: Cow<'static, str>,
    inner: Box<dyn Scheduler + Send>,
}

impl Scheduler for Named {
    fn name(&self) -> &str {
        &self.name
    }
    crate::forward_scheduler!(|s| s.inner; work_conserving, join, leave, block, wake, set_weight, pick, stopped,
                              check_invariants, hierarchical);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClientId, CpuId, StopReason, Weight, MS};
    use crate::scheduler::Decision;

    #[test]
    fn every_default_is_in_range_and_builds() {
        for e in SCHEDULERS {
            let params = resolve(e, &[]).unwrap();
            for p in e.params {
                match p.kind {
                    ParamKind::Int { min, max } => {
                        assert!(min <= p.default && p.default <= max, "{} {}", e.name, p.name)
                    }
                    ParamKind::Bool => assert!(p.default <= 1, "{} {}", e.name, p.name),
                    ParamKind::Choice(names) => assert!((p.default as usize) < names.len(), "{} {}", e.name, p.name),
                }
                let _ = params.int(p.name);
            }
            let s = build(e.name, SchedConfig::new(2, MS)).unwrap();
            assert_eq!(s.name(), e.name);
            let spec = format!("{}()", e.name);
            assert_eq!(build(&spec, SchedConfig::new(2, MS)).unwrap().name(), e.name, "{spec}: no parameters given");
        }
    }

    #[test]
    fn specs_parse_and_bad_ones_name_what_is_wrong() {
        let s = parse_spec(" gdq( delta = 8 , t=40 ) ").unwrap();
        assert_eq!(s.name, "gdq");
        assert_eq!(s.given, [("delta".into(), "8".into()), ("t".into(), "40".into())]);
        let cfg = SchedConfig::new(4, MS);
        assert_eq!(build("gdq(delta=8,t=40)", cfg).unwrap().name(), "gdq(delta=8,t=40)");
        let err = |spec: &str| build(spec, cfg).err().expect(spec).to_string();
        assert!(err("gdq(delta=8").contains("must end with ')'"));
        assert!(err("gdq(delta)").contains("not param=value"));
        assert!(err("gdq(delta=1,delta=2)").contains("given twice"));
        assert!(err("gdq(k=3)").contains("no parameter \"k\"") && err("gdq(k=3)").contains("delta, t"));
        assert!(err("rr(k=3)").contains("its parameters: none"));
        assert!(err("wfq(readjust=yes)").contains("not true or false"));
        assert!(err("gdq(t=0)").contains("\"t\": 0 is outside 1..="));
        assert!(err("gdq(t=x)").contains("not a whole number"));
        assert!(err("gr3mp(charge=ns)").contains("\"ns\" is not one of quantum, runtime"));
        assert_eq!(build("gr3mp(charge=runtime)", cfg).unwrap().name(), "gr3mp(charge=runtime)");
        assert!(err("nope(t=1)").contains("unknown scheduler \"nope\""));
        assert!(err("(t=1)").contains("no scheduler name"));
        assert!(check("sfs+heuristic(k=5,resort=10)").is_ok());
        assert_eq!(split_specs("rr, gdq(delta=8,t=40),wfq"), ["rr", "gdq(delta=8,t=40)", "wfq"]);
    }

    #[test]
    fn parameters_change_decisions_and_defaults_do_not() {
        // DWRR with a round of 1 quantum instead of 3 changes when a
        // client's round slice runs out: the pick sequences differ, and the
        // spec with the default values picks exactly like the plain name.
        let run = |spec: &str| -> Vec<u32> {
            let mut s = build(spec, SchedConfig::new(1, MS)).unwrap();
            for (c, w) in [(0u32, 1u64), (1, 3)] {
                s.join(0, ClientId(c), Weight::new(w).unwrap()).unwrap();
            }
            let mut now = 0;
            let mut order = Vec::new();
            for _ in 0..12 {
                match s.pick(now, CpuId(0)).unwrap() {
                    Decision::Run { client, slice } => {
                        now += slice;
                        order.push(client.0);
                        s.stopped(now, CpuId(0), client, slice, StopReason::Expired).unwrap();
                    }
                    Decision::Idle => now += MS,
                }
            }
            order
        };
        assert_eq!(run("dwrr"), run("dwrr(round=3,unit=1)"));
        assert_ne!(run("dwrr"), run("dwrr(round=1)"));
        // Options are parameters; the variant names are aliases of them.
        for (alias, spec) in [
            ("wfq+readjust", "wfq(readjust=true)"),
            ("lottery+readjust+dedicate", "lottery(dedicate=true)"),
            ("vtrr+readjust", "vtrr(readjust=true)"),
            ("cfs+lbfail", "cfs(lbfail=true)"),
            ("eevdf+readjust", "eevdf(readjust=true)"),
            ("gr3mp", "gr3mp(charge=quantum)"),
            ("gr3mp+runtime", "gr3mp(charge=runtime)"),
        ] {
            let on = |s: &str| {
                let mut x = build(s, SchedConfig::new(2, MS)).unwrap();
                let mut order = Vec::new();
                for (c, w) in [(0u32, 9u64), (1, 1), (2, 1)] {
                    x.join(0, ClientId(c), Weight::new(w).unwrap()).unwrap();
                }
                let mut now = 0;
                for _ in 0..40 {
                    for k in 0..2 {
                        if let Decision::Run { client, slice } = x.pick(now, CpuId(k)).unwrap() {
                            order.push(client.0);
                            x.stopped(now + slice, CpuId(k), client, slice, StopReason::Expired).unwrap();
                        }
                    }
                    now += MS;
                }
                order
            };
            assert_eq!(on(alias), on(spec), "{alias} = {spec}");
        }
    }
}
