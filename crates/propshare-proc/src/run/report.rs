//! What a run reports: per process ([`ClientReport`]) and for the run
//! ([`RunReport`]), with its table for people.

use serde::Serialize;

use crate::metrics;
use crate::sys::Pid;

/// One process's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ClientReport {
    /// Its id.
    pub name: String,
    /// Its pid.
    pub pid: Pid,
    /// Its weight at the end.
    pub weight: u64,
    /// Fairness figures.
    #[serde(flatten)]
    pub metrics: metrics::ClientMetrics,
    /// How it ended: `exited 0`, `killed by signal 15`, `running`...
    pub end: String,
}

/// The outcome of a run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// `propshare`, `linux-nice` or `linux-shares`.
    pub mode: String,
    /// The scheduler name (or the baseline's name).
    pub scheduler: String,
    /// The CPU numbers used.
    pub cpus: Vec<usize>,
    /// Quantum, ns.
    pub quantum_ns: u64,
    /// Wall time of the run, ns.
    pub wall_ns: u64,
    /// `perf task-clock` or `schedstat`.
    pub accounting: String,
    /// CPU time the controller itself used during the run, ns.
    pub controller_cpu_ns: u64,
    /// Controller rounds (decisions taken; baselines: samples).
    pub rounds: u64,
    /// Why the run ended.
    pub ended: String,
    /// Per process.
    pub clients: Vec<ClientReport>,
    /// Per group (runs with groups; left out of the JSON otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<metrics::GroupReport>,
    /// Remarks (fallbacks, skipped steps).
    pub notes: Vec<String>,
    /// Output files that could not be written (each naming its path); the
    /// run itself went through.
    pub output_errors: Vec<String>,
}

impl RunReport {
    /// The controller's CPU use as a fraction of one CPU.
    pub fn controller_load(&self) -> f64 {
        self.controller_cpu_ns as f64 / self.wall_ns.max(1) as f64
    }

    /// A human-readable table.
    pub fn to_table(&self) -> String {
        let mut s = format!(
            "{} on CPUs {:?}: quantum {:.1} ms, {:.2} s, accounting {}, controller CPU {:.2}% of one CPU, ended: {}\n",
            self.scheduler,
            self.cpus,
            self.quantum_ns as f64 / 1e6,
            self.wall_ns as f64 / 1e9,
            self.accounting,
            100.0 * self.controller_load(),
            self.ended
        );
        s += &format!(
            "{:<30} | {:<38} | {:<38} |\n",
            "", "share of the managed CPUs", "share of the CPU time the jobs got"
        );
        s += &format!(
            "{:<14} {:>8} {:>6} | {:>7} {:>9} {:>8} {:>10} | {:>7} {:>9} {:>8} {:>10} | {}\n",
            "client",
            "pid",
            "weight",
            "ideal%",
            "achieved%",
            "diff pp",
            "max lag ms",
            "ideal%",
            "achieved%",
            "diff pp",
            "max lag ms",
            "end"
        );
        for c in &self.clients {
            let m = &c.metrics;
            s += &format!(
                "{:<14} {:>8} {:>6} | {:>7.2} {:>9.2} {:>+8.2} {:>10.2} | {:>7.2} {:>9.2} {:>+8.2} {:>10.2} | {}\n",
                c.name,
                c.pid,
                c.weight,
                100.0 * m.ideal_share,
                100.0 * m.achieved_share,
                100.0 * (m.achieved_share - m.ideal_share),
                m.max_lag_ns / 1e6,
                100.0 * m.norm_ideal_share,
                100.0 * m.norm_achieved_share,
                100.0 * (m.norm_achieved_share - m.norm_ideal_share),
                m.norm_max_lag_ns / 1e6,
                c.end
            );
        }
        if !self.groups.is_empty() {
            s += &format!(
                "{:<14} {:>8} {:>6} | {:>7} {:>9} {:>8} {:>10} | {:>7} {:>9} {:>8} {:>10} |\n",
                "group",
                "parent",
                "weight",
                "ideal%",
                "achieved%",
                "diff pp",
                "lag q",
                "ideal%",
                "achieved%",
                "diff pp",
                ""
            );
            let p = self.cpus.len().max(1) as f64;
            for g in &self.groups {
                let m = &g.metrics;
                let lag = if m.service.max_lag.abs() >= m.service.min_lag.abs() {
                    m.service.max_lag
                } else {
                    m.service.min_lag
                };
                s += &format!(
                    "{:<14} {:>8} {:>6} | {:>7.2} {:>9.2} {:>+8.2} {:>+10.2} | {:>7.2} {:>9.2} {:>+8.2} {:>10} |\n",
                    m.group,
                    if g.parent.is_empty() { "-" } else { &g.parent },
                    m.service.weight,
                    100.0 * m.service.ideal_share / p,
                    100.0 * m.service.share / p,
                    100.0 * (m.service.share - m.service.ideal_share) / p,
                    lag,
                    100.0 * g.norm_ideal_share,
                    100.0 * g.norm_achieved_share,
                    100.0 * (g.norm_achieved_share - g.norm_ideal_share),
                    ""
                );
            }
            s += "(groups: shares over the whole run; lag q: the group's largest |ideal - received| in quanta, signed)\n";
        }
        let busy: f64 = self.clients.iter().map(|c| c.metrics.received_ns as f64).sum::<f64>()
            / (self.wall_ns.max(1) as f64 * self.cpus.len() as f64);
        s += &format!("the jobs used {:.1}% of the CPUs (the rest went to other processes or idle)\n", 100.0 * busy);
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }
}
