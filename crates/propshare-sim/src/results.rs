//! What running a scenario produced ([`ScenarioResult`]): the metrics of
//! every run, the claims' verdicts and the plots, as the report and the
//! command line read them.

use propshare::Time;

use crate::metrics::RunMetrics;
use crate::scenario::{Claim, Scenario, Verdict};

/// Everything one scenario produced.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// The scenario.
    pub scenario: Scenario,
    /// Metrics of every run (scheduler × repeat).
    pub runs: Vec<RunMetrics>,
    /// Claim verdicts, of the claims on the schedulers that ran.
    pub verdicts: Vec<Verdict>,
    /// Claims on schedulers this run left out (not judged).
    pub unjudged: Vec<Claim>,
    /// Plot files written, relative to the output directory, with captions.
    pub plots: Vec<(String, String)>,
    /// Wall-clock median and p99 ns per decision, per scheduler (when measured).
    pub costs: Vec<(String, u64, u64)>,
    /// Lag over time of the plotted clients, in the first repeat of each
    /// scheduler (with [`crate::run::RunOptions::plots`], written or not).
    pub lag: Vec<LagSeries>,
}

/// One client's lag (ideal − received) over time in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct LagSeries {
    /// Scheduler.
    pub scheduler: String,
    /// Seed of the run.
    pub seed: u64,
    /// Client name.
    pub client: String,
    /// (time, lag), both ns: on the sampling grid and at the client's own events.
    pub points: Vec<(Time, f64)>,
}
