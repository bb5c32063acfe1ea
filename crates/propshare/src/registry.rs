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
