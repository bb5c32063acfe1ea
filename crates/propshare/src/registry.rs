//! Schedulers by name, for hosts, scenario files and the command line.
//!
//! A name is an algorithm's registry name (`"wfq"`), optionally followed by
//! `+readjust` where the algorithm offers a readjusted variant.

use crate::algo;
use crate::scheduler::{SchedConfig, Scheduler};

/// One registered scheduler.
pub struct Entry {
    /// Its name on the command line and in scenario files.
    pub name: &'static str,
    /// One line: what it is and where it comes from.
    pub summary: &'static str,
    /// Build one.
    pub build: fn(SchedConfig) -> Box<dyn Scheduler>,
}

/// Every scheduler, in the order reports list them.
pub const SCHEDULERS: &[Entry] = &[
    Entry {
        name: "rr",
        summary: "round robin, weights ignored (reference)",
        build: |c| Box::new(algo::rr::RoundRobin::new(c)),
    },
    Entry {
        name: "wfq",
        summary: "weighted fair queueing, global finish-tag queue (Demers et al. 1989)",
        build: |c| Box::new(algo::wfq::Wfq::new(c)),
    },
    Entry {
        name: "wfq+readjust",
        summary: "WFQ over readjusted weights (SFS paper section 2.2)",
        build: |c| Box::new(algo::wfq::Wfq::with_readjustment(c)),
    },
    Entry {
        name: "wf2q",
        summary: "WF2Q+, eligible smallest finish tag, global queue (Bennett and Zhang 1996)",
        build: |c| Box::new(algo::wf2q::Wf2q::new(c)),
    },
    Entry {
        name: "wf2q+readjust",
        summary: "WF2Q+ over readjusted weights (SFS paper section 2.2)",
        build: |c| Box::new(algo::wf2q::Wf2q::with_readjustment(c)),
    },
    Entry {
        name: "sfq",
        summary: "start-time fair queueing, global queue (Goyal, Vin, Cheng 1996)",
        build: |c| Box::new(algo::sfq::Sfq::new(c)),
    },
    Entry {
        name: "sfq+readjust",
        summary: "SFQ over readjusted weights, the SFS paper's \"SFQ with readjustment\"",
        build: |c| Box::new(algo::sfq::Sfq::with_readjustment(c)),
    },
    Entry {
        name: "stride",
        summary: "stride scheduling, global pass (Waldspurger and Weihl 1995)",
        build: |c| Box::new(algo::stride::Stride::new(c)),
    },
    Entry {
        name: "stride+readjust",
        summary: "stride scheduling over readjusted weights (SFS paper section 2.9)",
        build: |c| Box::new(algo::stride::Stride::with_readjustment(c)),
    },
    Entry {
        name: "lottery",
        summary: "lottery scheduling, seeded, compensation tickets (Waldspurger and Weihl 1994)",
        build: |c| Box::new(algo::lottery::Lottery::new(c)),
    },
    Entry {
        name: "lottery+readjust",
        summary: "lottery with tickets in proportion to readjusted weights, one exact draw (SFS paper section 2.9)",
        build: |c| Box::new(algo::lottery::Lottery::with_readjustment(c)),
    },
    Entry {
        name: "lottery+readjust+dedicate",
        summary: "lottery over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        build: |c| Box::new(algo::lottery::Lottery::with_dedicated_cpus(c)),
    },
    Entry {
        name: "wrr",
        summary: "weighted round robin, w consecutive quanta per round (as in the GR3 paper)",
        build: |c| Box::new(algo::wrr::WeightedRoundRobin::new(c)),
    },
    Entry {
        name: "wrr+readjust",
        summary: "WRR with turns of phi*Q ns over readjusted weights, rational phi paid exactly over turns (SFS paper section 2.9)",
        build: |c| Box::new(algo::wrr::WeightedRoundRobin::with_readjustment(c)),
    },
    Entry {
        name: "wrr+readjust+dedicate",
        summary: "WRR over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        build: |c| Box::new(algo::wrr::WeightedRoundRobin::with_dedicated_cpus(c)),
    },
    Entry {
        name: "srr",
        summary: "smoothed round robin, weight matrix and weight spread sequence (Guo 2001)",
        build: |c| Box::new(algo::srr::SmoothedRoundRobin::new(c)),
    },
    Entry {
        name: "srr+readjust",
        summary: "SRR over readjusted weights, a capped client's rational phi paid exactly over passes (SFS paper section 2.9)",
        build: |c| Box::new(algo::srr::SmoothedRoundRobin::with_readjustment(c)),
    },
    Entry {
        name: "srr+readjust+dedicate",
        summary: "SRR over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        build: |c| Box::new(algo::srr::SmoothedRoundRobin::with_dedicated_cpus(c)),
    },
    Entry {
        name: "vtrr",
        summary: "virtual-time round robin (Nieh, Vaill, Zhong 2001)",
        build: |c| Box::new(algo::vtrr::Vtrr::new(c)),
    },
    Entry {
        name: "vtrr+readjust",
        summary: "VTRR over readjusted weights: exact virtual times, counters paid exactly over cycles (SFS paper section 2.9)",
        build: |c| Box::new(algo::vtrr::Vtrr::with_readjustment(c)),
    },
    Entry {
        name: "vtrr+readjust+dedicate",
        summary: "VTRR over readjusted weights, a waiting capped client runs first (its share is exactly one CPU)",
        build: |c| Box::new(algo::vtrr::Vtrr::with_dedicated_cpus(c)),
    },
    Entry {
        name: "cfs",
        summary: "Linux CFS (<= 6.5): per-CPU vruntime runqueues, load balancing of weighted load (kernel/sched/fair.c)",
        build: |c| Box::new(algo::cfs::Cfs::new(c)),
    },
    Entry {
        name: "eevdf",
        summary: "Linux EEVDF (>= 6.6): per-CPU eligible earliest virtual deadline first with lag placement, load balancing (kernel/sched/fair.c)",
        build: |c| Box::new(algo::eevdf::Eevdf::new(c)),
    },
    Entry {
        name: "cfs+lbfail",
        summary: "CFS with the kernel's nr_balance_failed relaxation: too-heavy tasks move after failed balance passes",
        build: |c| Box::new(algo::cfs::Cfs::with_balance_failed_relax(c)),
    },
    Entry {
        name: "eevdf+lbfail",
        summary: "EEVDF with the kernel's nr_balance_failed relaxation: too-heavy tasks move after failed balance passes",
        build: |c| Box::new(algo::eevdf::Eevdf::with_balance_failed_relax(c)),
    },
    Entry {
        name: "cfs+readjust",
        summary: "CFS over readjusted weights (global readjustment, phi rounded to an integer load weight; SFS paper section 2.9)",
        build: |c| Box::new(algo::cfs::Cfs::with_readjustment(c)),
    },
    Entry {
        name: "eevdf+readjust",
        summary: "EEVDF over readjusted weights (global readjustment, phi rounded to an integer load weight; SFS paper section 2.9)",
        build: |c| Box::new(algo::eevdf::Eevdf::with_readjustment(c)),
    },
    Entry {
        name: "gdq",
        summary: "grouped distributed queues, delta = 4, T = 20 quanta (Caprita, Nieh, Stein 2006)",
        build: |c| Box::new(algo::gdq::Gdq::new(c)),
    },
    Entry {
        name: "sfs",
        summary: "surplus fair scheduling, exact least-surplus pick over readjusted weights (Chandra et al. 2000)",
        build: |c| Box::new(algo::sfs::Sfs::new(c)),
    },
    Entry {
        name: "sfs+heuristic",
        summary: "SFS examining only the first 20 clients of each queue (SFS paper section 3.2)",
        build: |c| Box::new(algo::sfs::Sfs::with_heuristic(c)),
    },
    Entry {
        name: "sfs+affinity",
        summary: "SFS preferring the client that last ran on the CPU among the 4 least surpluses, within one quantum of surplus (section 2.4)",
        build: |c| Box::new(algo::sfs::Sfs::with_affinity(c)),
    },
    Entry {
        name: "dfs",
        summary: "deadline fair scheduling with PD2 tie rules, P-fair, not work-conserving (Chandra et al. RTAS 2001)",
        build: |c| Box::new(algo::dfs::Dfs::new(c)),
    },
    Entry {
        name: "dfs-notiebreak",
        summary: "DFS without the PD2 tie rules, as in the paper's simulations (RTAS 2001 section 4.1)",
        build: |c| Box::new(algo::dfs::Dfs::no_tie_break(c)),
    },
    Entry {
        name: "dfs-fa",
        summary: "DFS-FA: DFS plus the fair-airport start-tag queue, work-conserving (RTAS 2001 section 4.2)",
        build: |c| Box::new(algo::dfs::Dfs::fair_airport(c)),
    },
    Entry {
        name: "dfs-fa+affinity",
        summary: "DFS-FA with the goodness affinity rule, W = P, alpha = 2 slots (RTAS 2001 section 5)",
        build: |c| Box::new(algo::dfs::Dfs::fair_airport_affinity(c)),
    },
    Entry {
        name: "dfs-fa+readjust",
        summary: "DFS-FA over readjusted weights (SFS paper section 2.2); fixes DFS-FA starvation",
        build: |c| Box::new(algo::dfs::Dfs::fair_airport_readjusted(c)),
    },
    Entry {
        name: "gr3",
        summary: "group ratio round robin, O(1) (Caprita et al. 2005 section 2); on P > 1 CPUs it is gr3mp",
        build: |c| Box::new(algo::gr3mp::Gr3Mp::new(c, "gr3", algo::gr3::RescaleRule::Paper)),
    },
    Entry {
        name: "gr3mp",
        summary: "GR3 on P CPUs: central queue, frontlogs, readjustment through groups (Caprita et al. 2005 section 3)",
        build: |c| Box::new(algo::gr3mp::Gr3Mp::new(c, "gr3mp", algo::gr3::RescaleRule::Paper)),
    },
    Entry {
        name: "gr3+fairjoin",
        summary: "GR3 with the join/leave work rescale tied to the heavier neighbour (fixes starvation after churn)",
        build: |c| Box::new(algo::gr3mp::Gr3Mp::new(c, "gr3+fairjoin", algo::gr3::RescaleRule::Predecessor)),
    },
    Entry {
        name: "gr3mp+fairjoin",
        summary: "GR3MP with the join/leave work rescale tied to the heavier neighbour",
        build: |c| Box::new(algo::gr3mp::Gr3Mp::new(c, "gr3mp+fairjoin", algo::gr3::RescaleRule::Predecessor)),
    },
    Entry {
        name: "dwrr",
        summary: "distributed weighted round-robin over per-CPU round-robin queues (Li et al. PPoPP 2009)",
        build: |c| Box::new(algo::dwrr::DwrrRr::registered(c, false)),
    },
    Entry {
        name: "dwrr+carry",
        summary: "DWRR, slice overrun carried into the next round",
        build: |c| Box::new(algo::dwrr::DwrrRr::registered(c, true)),
    },
    Entry {
        name: "dwrr-cfs",
        summary: "DWRR over per-CPU CFS-like vruntime queues (the paper's Linux 2.6.24 port)",
        build: |c| Box::new(algo::dwrr::DwrrCfs::registered(c, false)),
    },
    Entry {
        name: "dwrr-cfs+carry",
        summary: "DWRR over CFS-like queues, slice overrun carried into the next round",
        build: |c| Box::new(algo::dwrr::DwrrCfs::registered(c, true)),
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
    /// P = 0.
    #[error("the number of CPUs must be at least 1")]
    NoCpus,
    /// Quantum 0.
    #[error("the quantum must be at least 1 ns")]
    ZeroQuantum,
}

/// The registered names.
pub fn names() -> impl Iterator<Item = &'static str> {
    SCHEDULERS.iter().map(|e| e.name)
}

/// Look a scheduler up by name.
pub fn find(name: &str) -> Result<&'static Entry, UnknownScheduler> {
    SCHEDULERS
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| UnknownScheduler { name: name.to_string(), known: names().collect::<Vec<_>>().join(", ") })
}

/// Build the scheduler called `name` for `cfg`.
pub fn build(name: &str, cfg: SchedConfig) -> Result<Box<dyn Scheduler>, BuildError> {
    let entry = find(name)?;
    if cfg.cpus == 0 {
        return Err(BuildError::NoCpus);
    }
    if cfg.quantum == 0 {
        return Err(BuildError::ZeroQuantum);
    }
    Ok((entry.build)(cfg))
}
