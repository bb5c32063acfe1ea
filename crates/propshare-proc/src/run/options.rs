//! What a run is asked to do ([`RunOptions`]: who decides, how CPU time is
//! measured and charged), and the checks made before anything starts
//! ([`validate`]).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use propshare::{registry, SchedConfig, Time, Weight};
use serde::Serialize;

use super::spawn::{check_attachable, resolve_program};
use crate::error::ProcError;
use crate::groups::{self, GroupDef};
use crate::spec::{self, JobSpec, Target};
use crate::sys::{self, CpuMask, Pid};
use crate::{baseline, guardian};

/// The shortest quantum accepted (1 ms). Below it the controller's own cost
/// grows past a few percent of a CPU (a 1 ns quantum cost 36% of one; see
/// docs/PROC.md for the measured cost per quantum) and sleeps overshoot by
/// ~75 µs at normal priority, so shorter slices would not be honoured.
pub const MIN_QUANTUM: Time = propshare::MS;

/// How often a `--cgroup2` subtree is read again, by default: 1 s.
pub const DEFAULT_CGROUP2_EVERY: Time = 1_000 * propshare::MS;
/// The shortest interval between two reads of a `--cgroup2` subtree: 10 ms.
pub const MIN_CGROUP2_EVERY: Time = 10 * propshare::MS;

/// How often `--json` is rewritten while the run goes, by default: 5 s.
pub const DEFAULT_JSON_EVERY: Time = 5_000 * propshare::MS;
/// The shortest interval between two JSON snapshots: 100 ms (each one
/// measures the whole run so far).
pub const MIN_JSON_EVERY: Time = 100 * propshare::MS;

/// Who shares the CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// Our scheduler decides (the default).
    Propshare,
    /// Linux CFS with nice values mapped from the weights, affinity to the CPU set.
    BaselineNice,
    /// Linux CFS with cgroup v1 cpu.shares proportional to the weights, in a cpuset.
    BaselineShares,
    /// Linux's cgroup v2 `cpu.weight`: the groups and jobs as a tree of
    /// cgroups ([`crate::cgroup2::Cgroup2Tree`]), affinity to the CPU set.
    BaselineCgroup2,
}

impl Mode {
    /// Its name in reports: `propshare`, `linux-nice`, `linux-shares` or `linux-cgroup2`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Propshare => "propshare",
            Mode::BaselineNice => "linux-nice",
            Mode::BaselineShares => "linux-shares",
            Mode::BaselineCgroup2 => "linux-cgroup2",
        }
    }
}

/// How CPU time is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accounting {
    /// perf task-clock if it works, else schedstat (and say so).
    Auto,
    /// perf task-clock only.
    Perf,
    /// `/proc/<pid>/task/*/schedstat` only.
    Schedstat,
}

/// What the host reports to the scheduler as `ran` when a slice ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// The CPU time the process really used (the default). On a machine
    /// where other processes compete for the managed CPUs, a process gets
    /// less CPU than wall time, while schedulers whose virtual time follows
    /// the wall clock (WFQ) keep advancing it: a waking client may then
    /// wait long behind spinners that were charged little.
    Cpu,
    /// The wall time the process held its CPU (CPU time for runs that end
    /// in a block or an exit): fairness in CPU slots, immune to that drift.
    Slot,
}

/// Everything `run` needs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The jobs to start or attach to.
    pub jobs: Vec<JobSpec>,
    /// The groups the jobs name (see [`crate::groups`]); none: no groups.
    pub groups: Vec<GroupDef>,
    /// Enforce this cgroup v2 subtree with our scheduler: its cgroups are
    /// the groups, their processes the jobs (see [`crate::cgroup2`]).
    pub cgroup2: Option<PathBuf>,
    /// How often the subtree is read again for joins, leaves, moves and weight changes (ns).
    pub cgroup2_every: Time,
    /// `--baseline cgroup2`: the delegated cgroup v2 directory to build the
    /// run's cgroups under (`None`: the cgroup v2 mount point).
    pub cgroup2_dir: Option<PathBuf>,
    /// CPU numbers to schedule on (`None`: every CPU we may use).
    pub cpus: Option<Vec<usize>>,
    /// Quantum, ns.
    pub quantum: Time,
    /// Scheduler registry name.
    pub scheduler: String,
    /// Seed for randomised schedulers.
    pub seed: u64,
    /// Stop after this long (ns); `None`: when every job has exited.
    pub duration: Option<Time>,
    /// Our scheduler or a Linux baseline.
    pub mode: Mode,
    /// CPU-time accounting.
    pub accounting: Accounting,
    /// What a run that used its whole slice is charged (see [`Charge`]).
    pub charge: Charge,
    /// Unix socket for control commands (see [`crate::control`]).
    pub control: Option<PathBuf>,
    /// Write the JSON Lines trace here.
    pub trace: Option<PathBuf>,
    /// Write the run's report as JSON here: every few seconds while the run
    /// goes (each time whole, replacing the last), and at the end.
    pub json: Option<PathBuf>,
    /// How often the JSON report is rewritten while the run goes (ns): each
    /// snapshot measures the whole record so far.
    pub json_every: Time,
    /// Scenario name for the trace's meta line.
    pub scenario: String,
    /// Run the controller at SCHED_FIFO priority 1.
    pub fifo: bool,
    /// Handle SIGINT, SIGTERM, SIGHUP and SIGQUIT (end the run cleanly).
    pub handle_signals: bool,
    /// Set to true from another thread to end the run cleanly.
    pub stop: Option<Arc<AtomicBool>>,
    /// Print notes (fallbacks) to stderr.
    pub verbose: bool,
    /// Testing aid: panic inside the loop after this many rounds.
    #[doc(hidden)]
    pub panic_after_rounds: Option<u64>,
    /// Testing aid: fail with an error inside the loop after this many rounds.
    #[doc(hidden)]
    pub fail_after_rounds: Option<u64>,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            jobs: Vec::new(),
            groups: Vec::new(),
            cgroup2: None,
            cgroup2_every: DEFAULT_CGROUP2_EVERY,
            cgroup2_dir: None,
            cpus: None,
            quantum: 10 * propshare::MS,
            scheduler: "wfq+readjust".into(),
            seed: 0,
            duration: None,
            mode: Mode::Propshare,
            accounting: Accounting::Auto,
            charge: Charge::Cpu,
            control: None,
            trace: None,
            json: None,
            json_every: DEFAULT_JSON_EVERY,
            scenario: "run".into(),
            fifo: false,
            handle_signals: false,
            stop: None,
            verbose: false,
            panic_after_rounds: None,
            fail_after_rounds: None,
        }
    }
}

fn validate_cpus(req: &Option<Vec<usize>>) -> Result<Vec<usize>, ProcError> {
    let allowed = sys::get_affinity(0).map_err(|e| ProcError::io("reading our affinity", e))?;
    let online = sys::online_cpus().unwrap_or(allowed);
    match req {
        None => {
            let v: Vec<usize> = allowed.cpus().into_iter().filter(|&c| online.has(c)).collect();
            if v.is_empty() {
                return Err(ProcError::usage("no usable CPU"));
            }
            Ok(v)
        }
        Some(list) => {
            if list.is_empty() {
                return Err(ProcError::usage("--cpus is empty"));
            }
            let mut seen = Vec::new();
            for &c in list {
                if c >= CpuMask::CAPACITY || !online.has(c) {
                    return Err(ProcError::usage(format!(
                        "CPU {c} does not exist (online CPUs: {})",
                        sys::format_cpu_list(&online)
                    )));
                }
                if !allowed.has(c) {
                    return Err(ProcError::usage(format!(
                        "CPU {c} is not in our affinity mask ({})",
                        sys::format_cpu_list(&allowed)
                    )));
                }
                if seen.contains(&c) {
                    return Err(ProcError::usage(format!("CPU {c} is listed twice")));
                }
                seen.push(c);
            }
            Ok(seen)
        }
    }
}

/// Check everything that does not need a process: CPUs, quantum, scheduler,
/// weights, names, commands. Nothing is started if this fails.
pub fn validate(opts: &RunOptions) -> Result<(Vec<usize>, Vec<JobSpec>), ProcError> {
    let cpus = validate_cpus(&opts.cpus)?;
    if opts.quantum < MIN_QUANTUM {
        return Err(ProcError::usage(format!(
            "the quantum {} ns is below the minimum of 1ms: shorter quanta cost the controller \
             a large part of a CPU and are not honoured by the kernel's timers",
            opts.quantum
        )));
    }
    if opts.json.is_some() && opts.json_every < MIN_JSON_EVERY {
        return Err(ProcError::usage(format!(
            "--json-every {} ns is below the minimum of 100ms: each snapshot measures the whole run so far",
            opts.json_every
        )));
    }
    if opts.jobs.len() > guardian::CAPACITY {
        return Err(ProcError::usage(format!(
            "{} jobs: at most {} processes can be managed in one run (the guardian's table)",
            opts.jobs.len(),
            guardian::CAPACITY
        )));
    }
    if opts.mode == Mode::Propshare {
        registry::build(&opts.scheduler, SchedConfig { cpus: cpus.len(), quantum: opts.quantum, seed: opts.seed })
            .map_err(|e| ProcError::usage(e.to_string()))?;
    }
    if opts.mode == Mode::BaselineShares && !baseline::cgroups_available() {
        return Err(ProcError::usage(
            "--baseline shares needs cgroup v1 cpu and cpuset controllers under /sys/fs/cgroup",
        ));
    }
    if let Err(f) = groups::build_tree(&opts.groups) {
        return Err(ProcError::usage(format!("group {:?}: {}: {}", opts.groups[f.index].name, f.field, f.message)));
    }
    if let Some(root) = &opts.cgroup2 {
        if opts.mode != Mode::Propshare {
            return Err(ProcError::usage(
                "--cgroup2 enforces a subtree with our scheduler; to see Linux's own cpu.weight, \
                 run the same tree as jobs and groups with --baseline cgroup2",
            ));
        }
        if !opts.jobs.is_empty() || !opts.groups.is_empty() {
            return Err(ProcError::usage(format!(
                "--cgroup2 {}: the subtree's processes are the jobs and its cgroups the groups; give no other jobs or groups",
                root.display()
            )));
        }
        if opts.cgroup2_every < MIN_CGROUP2_EVERY {
            return Err(ProcError::usage("--cgroup2-every is below the minimum of 10ms"));
        }
        crate::cgroup2::read_subtree(root)?;
    }
    if opts.mode == Mode::BaselineCgroup2 {
        crate::cgroup2::delegated_dir(opts.cgroup2_dir.as_deref())?;
    }
    let grouped = !opts.groups.is_empty();
    if grouped && matches!(opts.mode, Mode::BaselineNice | Mode::BaselineShares) {
        return Err(ProcError::usage(format!(
            "--baseline {} takes no groups (groups run under our scheduler or --baseline cgroup2)",
            if opts.mode == Mode::BaselineNice { "nice" } else { "shares" }
        )));
    }
    for j in &opts.jobs {
        if let Some(g) = &j.group {
            if !opts.groups.iter().any(|d| &d.name == g) {
                return Err(ProcError::usage(format!(
                    "job {}: no group named {g:?} (declare it with --group NAME:WEIGHT[:PARENT] or [[group]])",
                    j.name.clone().unwrap_or_else(|| j.default_name())
                )));
            }
        }
    }
    let mut jobs = opts.jobs.clone();
    if jobs.is_empty() && opts.control.is_none() && opts.cgroup2.is_none() {
        return Err(ProcError::usage(
            "no jobs: give `-w W -- COMMAND` or `-w W -p PID` (or --jobs FILE, or --control SOCKET)",
        ));
    }
    for j in &jobs {
        Weight::new(j.weight).map_err(|e| {
            ProcError::usage(format!("job {}: {e}", j.name.clone().unwrap_or_else(|| j.default_name())))
        })?;
        match &j.target {
            Target::Command(argv) if argv.is_empty() => return Err(ProcError::usage("empty command")),
            Target::Command(argv) => {
                resolve_program(&argv[0])?;
            }
            Target::Pid(p) => {
                check_attachable(*p, -1, &[])?;
            }
        }
    }
    let mut pids: Vec<Pid> =
        jobs.iter().filter_map(|j| if let Target::Pid(p) = j.target { Some(p) } else { None }).collect();
    pids.sort_unstable();
    if pids.windows(2).any(|w| w[0] == w[1]) {
        return Err(ProcError::usage("the same PID is given twice"));
    }
    spec::assign_names(&mut jobs, &mut Vec::new())?;
    Ok((cpus, jobs))
}
