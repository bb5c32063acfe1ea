//! `propshare run`: schedule real Linux processes by weight (see the
//! `propshare-proc` crate). Kept apart from the other subcommands: it only
//! turns flags into [`propshare_proc::RunOptions`] and prints the report.

use clap::{Args, ValueEnum};
use propshare_proc::{Accounting, Charge, Mode, ProcError, RunOptions};
use std::path::PathBuf;

/// Linux's own weighting, for side-by-side runs.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Baseline {
    /// CFS with nice values mapped from the weights (kernel sched_prio_to_weight).
    Nice,
    /// cgroup v1 cpu.shares proportional to the weights, in a cpuset of --cpus.
    Shares,
    /// cgroup v2 cpu.weight: the groups and jobs as cgroups (under --cgroup2-dir), affinity to --cpus.
    Cgroup2,
}

/// CPU-time accounting.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Acct {
    /// perf task-clock, else schedstat.
    Auto,
    /// perf task-clock only.
    Perf,
    /// /proc/<pid>/task/*/schedstat.
    Schedstat,
}

/// What a full slice is charged.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ChargeArg {
    /// The CPU time really used.
    Cpu,
    /// The wall time the CPU was held (robust when other load shares the CPUs).
    Slot,
}

/// Options of `propshare run`.
#[derive(Args, Debug)]
#[command(
    after_help = "JOBS: `-w WEIGHT [-n NAME] [-g GROUP] -- COMMAND ARGS...` or `-w WEIGHT [-n NAME] [-g GROUP] -p PID`, separated by `:::`.\n\
Groups: propshare run --cpus 0,1 --group a:1 --group b:3 --report -g a -- ./x ::: -g b -- ./y ::: -g b -- ./z\n\
Example: propshare run --cpus 0,1 --quantum 10ms --report -w 3 -- ./a ::: -w 1 -- ./b\n\
Exit status: 0 done, 1 failure, 2 bad input. Every managed process is resumed and its affinity restored on exit,\n\
on SIGINT/SIGTERM, on errors, and (through a guardian process) if the scheduler is SIGKILLed."
)]
pub struct RunArgs {
    /// CPUs to schedule on, e.g. `0,1` or `0-3` (default: all we may use).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Quantum, e.g. `10ms`.
    #[arg(long, default_value = "10ms")]
    quantum: String,
    /// Scheduler (a registry name; see `propshare list`).
    #[arg(long, default_value = "wfq+readjust")]
    scheduler: String,
    /// Seed for randomised schedulers.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop after this long (e.g. `10s`); default: when every job has exited.
    #[arg(long)]
    duration: Option<String>,
    /// Run under Linux's own weighting instead of our scheduler.
    #[arg(long, value_enum)]
    baseline: Option<Baseline>,
    /// TOML jobs file (`[[job]]` with `weight`, `name`, `group`, and `cmd = [...]` or `pid`;
    /// `[[group]]` with `name`, `weight`, `parent`).
    #[arg(long, value_name = "FILE")]
    jobs: Option<PathBuf>,
    /// A group for the jobs' `-g GROUP` (repeat for more): weight, and parent
    /// (another --group; default: the root).
    #[arg(long = "group", value_name = "NAME:WEIGHT[:PARENT]")]
    groups: Vec<String>,
    /// Enforce this cgroup v2 subtree with our scheduler: its cgroups' cpu.weight
    /// are the groups, their processes the jobs (read again every --cgroup2-every).
    #[arg(long, value_name = "PATH")]
    cgroup2: Option<PathBuf>,
    /// How often --cgroup2's subtree is read again (joins, leaves, moves, weight changes).
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    cgroup2_every: String,
    /// --baseline cgroup2: the delegated cgroup v2 directory to create the run's
    /// cgroups in (default: the cgroup v2 mount point); they are removed afterwards.
    #[arg(long, value_name = "DIR")]
    cgroup2_dir: Option<PathBuf>,
    /// Listen for `add`, `weight NAME W`, `list`, `quit` on this Unix socket.
    #[arg(long, value_name = "SOCKET")]
    control: Option<PathBuf>,
    /// Write a JSON Lines trace (same schema as the simulator's).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print per process: weight, ideal share, achieved share, max lag.
    #[arg(long)]
    report: bool,
    /// Write the report as JSON: rewritten whole every --json-every while the
    /// run goes (a killed run leaves the last snapshot), and at the end.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// How often --json is rewritten while the run goes (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    json_every: String,
    /// Scenario name for the trace.
    #[arg(long, default_value = "run")]
    scenario: String,
    /// Run the controller at SCHED_FIFO priority 1 (default: normal priority).
    #[arg(long)]
    fifo: bool,
    /// CPU-time accounting.
    #[arg(long, value_enum, default_value = "auto")]
    accounting: Acct,
    /// What a run that used its whole slice is charged.
    #[arg(long, value_enum, default_value = "cpu")]
    charge: ChargeArg,
    /// The jobs (see below).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "JOBS")]
    job: Vec<String>,
}

fn options(a: RunArgs) -> Result<(RunOptions, bool), ProcError> {
    // Output paths first: a bad one is found before anything runs.
    if let Some(p) = &a.trace {
        propshare_proc::check_output_path("--trace", p)?;
    }
    if let Some(p) = &a.json {
        propshare_proc::check_output_path("--json", p)?;
    }
    let set = match &a.jobs {
        Some(f) => propshare_proc::read_job_set(f)?,
        None => propshare_proc::JobSet::default(),
    };
    let (mut groups, mut jobs) = (set.groups, set.jobs);
    for g in &a.groups {
        groups.push(propshare_proc::GroupDef::parse(g)?);
    }
    jobs.extend(propshare_proc::parse_jobs(&a.job)?);
    let opts = RunOptions {
        jobs,
        groups,
        cgroup2: a.cgroup2,
        cgroup2_every: propshare_proc::parse_duration("--cgroup2-every", &a.cgroup2_every)?,
        cgroup2_dir: a.cgroup2_dir,
        cpus: a.cpus.as_deref().map(propshare_proc::parse_cpus).transpose()?,
        quantum: propshare_proc::parse_duration("--quantum", &a.quantum)?,
        scheduler: a.scheduler,
        seed: a.seed,
        duration: a.duration.as_deref().map(|d| propshare_proc::parse_duration("--duration", d)).transpose()?,
        mode: match a.baseline {
            None => Mode::Propshare,
            Some(Baseline::Nice) => Mode::BaselineNice,
            Some(Baseline::Shares) => Mode::BaselineShares,
            Some(Baseline::Cgroup2) => Mode::BaselineCgroup2,
        },
        accounting: match a.accounting {
            Acct::Auto => Accounting::Auto,
            Acct::Perf => Accounting::Perf,
            Acct::Schedstat => Accounting::Schedstat,
        },
        charge: match a.charge {
            ChargeArg::Cpu => Charge::Cpu,
            ChargeArg::Slot => Charge::Slot,
        },
        control: a.control,
        trace: a.trace,
        json: a.json,
        json_every: propshare_proc::parse_duration("--json-every", &a.json_every)?,
        scenario: a.scenario,
        fifo: a.fifo,
        handle_signals: true,
        verbose: true,
        ..RunOptions::default()
    };
    Ok((opts, a.report))
}

/// Run and exit: status 0 done, 1 failure (the report is still printed when
/// only an output file failed), 2 bad input.
pub fn main(a: RunArgs) -> ! {
    let code = match options(a).and_then(|(o, report)| Ok((propshare_proc::run(o)?, report))) {
        Ok((r, report)) => {
            if report {
                print!("{}", r.to_table());
            } else {
                eprintln!(
                    "propshare run: {} ({} processes, {:.2} s)",
                    r.ended,
                    r.clients.len(),
                    r.wall_ns as f64 / 1e9
                );
            }
            for e in &r.output_errors {
                eprintln!("propshare run: error: {e}");
            }
            i32::from(!r.output_errors.is_empty())
        }
        Err(e) => {
            eprintln!("propshare run: error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code)
}
