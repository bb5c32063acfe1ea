//! What a simulation is given: the clients ([`ClientSpec`], with their
//! [`Behavior`] and the lengths it draws, [`Dist`]), chains of short-lived
//! clients ([`ChainSpec`]) and the machine ([`SimConfig`]).

use propshare::{Time, Weight};
use rand::Rng;
use rand_distr::{Distribution, Exp};
use rand_pcg::Pcg64Mcg;

/// A length drawn per phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Always this many ns.
    Constant(Time),
    /// Uniform in `[lo, hi]` ns.
    Uniform(Time, Time),
    /// Exponential with this mean, in ns (at least 1).
    Exponential(Time),
}

impl Dist {
    /// Draw one length.
    pub fn sample(&self, rng: &mut Pcg64Mcg) -> Time {
        match *self {
            Dist::Constant(t) => t,
            Dist::Uniform(lo, hi) => rng.random_range(lo..=hi.max(lo)),
            Dist::Exponential(mean) => {
                let exp = Exp::new(1.0 / mean.max(1) as f64).expect("positive rate");
                (exp.sample(rng).round() as Time).max(1)
            }
        }
    }
}

/// How a client uses the CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Behavior {
    /// Always runnable.
    CpuBound,
    /// Alternates a run phase (CPU time needed) and a sleep phase (blocked).
    Phases {
        /// CPU time per run phase.
        run: Dist,
        /// Blocked time per sleep phase.
        sleep: Dist,
    },
}

/// One client of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientSpec {
    /// Its name in reports and traces.
    pub name: String,
    /// Its weight at arrival.
    pub weight: Weight,
    /// Arrival time.
    pub arrive: Time,
    /// Departure time, if it leaves.
    pub depart: Option<Time>,
    /// How it uses the CPU.
    pub behavior: Behavior,
    /// Weight changes, at increasing times.
    pub weight_changes: Vec<(Time, Weight)>,
    /// CPU time it needs: it leaves the moment it has received this much
    /// (`None`: it never finishes). At least 1 ns.
    pub work: Option<Time>,
}

impl ClientSpec {
    /// A CPU-bound client present from time 0.
    pub fn cpu_bound(name: impl Into<String>, weight: Weight) -> ClientSpec {
        ClientSpec {
            name: name.into(),
            weight,
            arrive: 0,
            depart: None,
            behavior: Behavior::CpuBound,
            weight_changes: Vec::new(),
            work: None,
        }
    }
}

/// When a member of a chain leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberLeaves {
    /// Once it has received this much CPU time (ns, ≥ 1): "it ran 300 ms"
    /// read as CPU time.
    AfterWork(Time),
    /// This long after it joined (ns, ≥ 1), whatever it received: "it ran
    /// 300 ms" read as wall-clock time.
    AfterLifetime(Time),
}

/// A chain of CPU-bound clients present one at a time (the SFS paper's
/// short tasks, section 4.3): the first member joins at `start`; each
/// member leaves as `leaves` says and the next joins at that very instant,
/// until `count` members have joined or the time reaches `until`. Members
/// are named `prefix0`, `prefix1`, ... and get the client ids after every
/// [`ClientSpec`], in the order they join.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainSpec {
    /// Name prefix of the members.
    pub prefix: String,
    /// Weight of every member.
    pub weight: Weight,
    /// When the first member joins, ns.
    pub start: Time,
    /// When a member leaves.
    pub leaves: MemberLeaves,
    /// At most this many members (`None`: no limit).
    pub count: Option<u64>,
    /// No member joins at or after this time, ns (`None`: no limit).
    pub until: Option<Time>,
}

/// Machine settings of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// P.
    pub cpus: usize,
    /// Quantum, ns.
    pub quantum: Time,
    /// Simulated time to run, ns.
    pub horizon: Time,
    /// Per-CPU start offsets (asynchronous quanta); missing entries are 0.
    pub cpu_offsets: Vec<Time>,
    /// CPU time lost when a CPU switches to a different client, ns.
    pub switch_cost: Time,
    /// Extra CPU time lost when the client last ran on another CPU, ns.
    pub migration_cost: Time,
    /// Seed for workload randomness (and the scheduler's, if it draws any).
    pub seed: u64,
}

impl SimConfig {
    /// P CPUs, quantum Q, horizon H, everything else zero.
    pub fn new(cpus: usize, quantum: Time, horizon: Time) -> SimConfig {
        SimConfig { cpus, quantum, horizon, cpu_offsets: Vec::new(), switch_cost: 0, migration_cost: 0, seed: 0 }
    }
}
