//! The controller: one loop that asks the scheduler what runs where, and
//! makes Linux do it with affinity and SIGSTOP/SIGCONT.
//!
//! # One round
//!
//! The loop sleeps in `ppoll` until the earliest slice deadline (at most one
//! quantum), a process exit (pidfds), a control connection or a signal. Then:
//!
//! 1. exits: a job whose pidfd fired leaves (`stopped(.., Left)` if it was
//!    running, else `leave`);
//! 2. every running job is charged the CPU time it really used since it was
//!    last charged (perf task-clock, or schedstat); at its deadline it stops
//!    with `Expired`, or `Blocked` if it used under a quarter of the wall time
//!    and none of its threads is runnable; between deadlines a job that used
//!    under an eighth of the last ≥1 ms and sleeps stops early as `Blocked`;
//! 3. blocked jobs are left resumed (a sleeping process costs nothing) and
//!    probed every round: once one has used ≥100 µs of CPU since it blocked,
//!    it `wake`s (and is stopped until picked; that CPU time is charged to it
//!    at its next stop);
//! 4. every idle CPU asks `pick`; then jobs no longer chosen get SIGSTOP, and
//!    chosen ones are pinned to their CPU (every thread) and get SIGCONT. A
//!    job picked again on the same CPU is left alone (no system call).
//!
//! # Nothing left stopped
//!
//! The guardian (see [`crate::guardian`]) is told about each process before it
//! is first stopped. Every way out of [`run`] (end of the jobs, `--duration`,
//! SIGINT/SIGTERM/SIGHUP/SIGQUIT, `quit` on the control socket, an error, a
//! panic) goes through [`Controller::release_all`], from `Drop` if need be:
//! affinity restored on every thread, SIGCONT, then the jobs we started are
//! sent SIGTERM (or the signal we received) and reaped; attached processes
//! are left running.

use crate::baseline::{self, Cgroups};
use crate::control::ControlServer;
use crate::error::ProcError;
use crate::guardian::Guardian;
use crate::metrics::{self, Change, Record, TraceMeta};
use crate::spec::{self, JobSpec, Target};
use crate::sys::{self, CpuMask, Pid};
use propshare::{registry, ClientId, CpuId, Decision, SchedConfig, Scheduler, StopReason, Time, Weight};
use serde::Serialize;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Who shares the CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// Our scheduler decides (the default).
    Propshare,
    /// Linux CFS with nice values mapped from the weights, affinity to the CPU set.
    BaselineNice,
    /// Linux CFS with cgroup v1 cpu.shares proportional to the weights, in a cpuset.
    BaselineShares,
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
    /// Why the run ended.
    pub ended: String,
    /// Per process.
    pub clients: Vec<ClientReport>,
    /// Remarks (fallbacks, skipped steps).
    pub notes: Vec<String>,
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
        let busy: f64 = self.clients.iter().map(|c| c.metrics.received_ns as f64).sum::<f64>()
            / (self.wall_ns.max(1) as f64 * self.cpus.len() as f64);
        s += &format!("the jobs used {:.1}% of the CPUs (the rest went to other processes or idle)\n", 100.0 * busy);
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }
}

// ---------------------------------------------------------------- jobs

enum Clock {
    Perf(Vec<OwnedFd>),
    Schedstat { pid: Pid, base: u64, last: u64 },
}

impl Clock {
    fn read(&mut self) -> u64 {
        match self {
            Clock::Perf(fds) => fds.iter().map(|fd| sys::perf_read(fd).unwrap_or(0)).sum(),
            Clock::Schedstat { pid, base, last } => {
                if let Ok(v) = sys::schedstat_ns(*pid) {
                    *last = (*last).max(v.saturating_sub(*base));
                }
                *last
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Runnable,
    Running { cpu: usize, start: Time, deadline: Time, start_cpu: u64, check_t: Time, check_cpu: u64 },
    Blocked { cpu_at: u64 },
    Gone,
}

struct Job {
    name: String,
    pid: Pid,
    /// Process group we created (spawned jobs): signals go to the whole group.
    group: Option<Pid>,
    spawned: bool,
    weight: u64,
    orig_mask: CpuMask,
    orig_nice: Vec<(Pid, i32)>,
    pidfd: Option<OwnedFd>,
    clock: Clock,
    /// CPU ns reported to the scheduler so far.
    charged: u64,
    st: St,
    sigstopped: bool,
    pinned: Option<usize>,
    cgroup: Option<usize>,
    end: Option<String>,
    /// Baseline: CPU at the last sample and whether it was inferred blocked.
    last_sample: (Time, u64),
}

impl Job {
    fn signal(&self, sig: i32) {
        let _ = sys::kill(self.pid, sig);
        if let Some(g) = self.group {
            let _ = sys::kill(-g, sig);
        }
    }
}

fn exit_text(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        "exited".into()
    }
}

/// Find `prog` the way `execvp` would; a clear usage error if it cannot run.
pub fn resolve_program(prog: &str) -> Result<PathBuf, ProcError> {
    let runnable = |p: &Path| -> bool {
        let Ok(c) = CString::new(p.as_os_str().as_bytes()) else { return false };
        // SAFETY: valid C string.
        p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
    };
    if prog.is_empty() {
        return Err(ProcError::usage("empty command"));
    }
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return if runnable(&p) {
            Ok(p)
        } else {
            Err(ProcError::usage(format!("command {prog:?} does not exist or is not executable")))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(prog);
        if runnable(&p) {
            return Ok(p);
        }
    }
    Err(ProcError::usage(format!("command {prog:?} not found in PATH")))
}

/// Fork a child that puts itself in its own process group, sets `nice`,
/// stops itself, and (once continued) execs `argv`. Returns its pid, stopped.
fn spawn_stopped(prog: &Path, argv: &[String], nice: Option<i32>, guardian: &mut Guardian) -> Result<Pid, ProcError> {
    let cstr = |s: &[u8]| CString::new(s).map_err(|_| ProcError::usage("a command word contains a NUL byte"));
    let path = cstr(prog.as_os_str().as_bytes())?;
    let args: Vec<CString> = argv.iter().map(|a| cstr(a.as_bytes())).collect::<Result<_, _>>()?;
    let mut argp: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut b = k.as_bytes().to_vec();
            b.push(b'=');
            b.extend_from_slice(v.as_bytes());
            CString::new(b).ok()
        })
        .collect();
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mask = sys::get_affinity(0).map_err(|e| ProcError::io("reading our affinity", e))?;
    // SAFETY: the child only makes async-signal-safe system calls, then execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(ProcError::io("fork", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: child side, raw system calls only.
        unsafe {
            libc::setpgid(0, 0);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            for sig in [libc::SIGPIPE, libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let param = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if null >= 0 {
                libc::dup2(null, 0);
                if null > 2 {
                    libc::close(null);
                }
            }
            if let Some(n) = nice {
                libc::setpriority(libc::PRIO_PROCESS, 0, n);
            }
            libc::kill(libc::getpid(), libc::SIGSTOP);
            libc::execve(path.as_ptr(), argp.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    // SAFETY: both sides set the group, so it is set before either proceeds.
    unsafe { libc::setpgid(pid, pid) };
    guardian.add(pid, Some(pid), mask).map_err(|e| ProcError::io("telling the guardian", e))?;
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
    if r != pid || !libc::WIFSTOPPED(status) {
        let _ = guardian.remove(pid);
        return Err(ProcError::io(
            format!("starting {:?}", argv[0]),
            std::io::Error::other("the child did not stop before exec"),
        ));
    }
    Ok(pid)
}

/// Why `pid` cannot be managed, if it cannot.
fn check_attachable(pid: Pid, guardian_pid: Pid, managed: &[Pid]) -> Result<sys::ProcStat, ProcError> {
    let me = sys::getpid();
    let st = sys::proc_stat(pid).map_err(|_| ProcError::usage(format!("there is no process with PID {pid}")))?;
    if pid == me || pid == guardian_pid {
        return Err(ProcError::usage(format!("PID {pid} is the scheduler itself")));
    }
    if pid == 1 {
        return Err(ProcError::usage("PID 1 (init) cannot be managed"));
    }
    if st.flags & 0x0020_0000 != 0 {
        return Err(ProcError::usage(format!("PID {pid} is a kernel thread")));
    }
    if st.state == 'Z' || st.state == 'X' {
        return Err(ProcError::usage(format!("PID {pid} has already exited")));
    }
    if managed.contains(&pid) {
        return Err(ProcError::usage(format!("PID {pid} is already managed")));
    }
    // Stopping an ancestor (our shell) would hang the terminal.
    let mut p = sys::proc_stat(me).map(|s| s.ppid).unwrap_or(0);
    let mut hops = 0;
    while p > 1 && hops < 4096 {
        if p == pid {
            return Err(ProcError::usage(format!(
                "PID {pid} is an ancestor of the scheduler (stopping it could hang your terminal)"
            )));
        }
        p = sys::proc_stat(p).map(|s| s.ppid).unwrap_or(0);
        hops += 1;
    }
    if let Err(e) = sys::kill(pid, 0) {
        return Err(ProcError::usage(if e.raw_os_error() == Some(libc::EPERM) {
            format!("PID {pid} is not ours: permission denied")
        } else {
            format!("there is no process with PID {pid}")
        }));
    }
    Ok(st)
}

// ---------------------------------------------------------------- controller

struct Controller {
    mode: Mode,
    cpus: Vec<usize>,
    cpu_mask: CpuMask,
    quantum: Time,
    sched: Option<Box<dyn Scheduler>>,
    jobs: Vec<Job>,
    running: Vec<Option<usize>>,
    guardian: Option<Guardian>,
    cgroups: Option<Cgroups>,
    rec: Record,
    t0: u64,
    accounting: Accounting,
    charge: Charge,
    notes: Vec<String>,
    released: bool,
    verbose: bool,
    names: Vec<String>,
}

/// Minimum CPU a blocked job must use to count as awake again.
const WAKE_CPU_NS: u64 = 100_000;
/// Early block checks look at windows of at least this length.
const BLOCK_WINDOW_NS: Time = 1_000_000;

impl Controller {
    fn now(&self) -> Time {
        sys::monotonic_ns().saturating_sub(self.t0)
    }

    fn note(&mut self, n: String) {
        if self.verbose {
            eprintln!("propshare run: {n}");
        }
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    fn managed_pids(&self) -> Vec<Pid> {
        self.jobs.iter().filter(|j| j.st != St::Gone).map(|j| j.pid).collect()
    }

    fn open_clock(&mut self, pid: Pid, tids: &[Pid]) -> Result<Clock, ProcError> {
        if self.accounting != Accounting::Schedstat {
            let mut fds = Vec::new();
            let mut err = None;
            for &t in tids {
                match sys::perf_task_clock(t) {
                    Ok(fd) => fds.push(fd),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            match err {
                None if !fds.is_empty() => {
                    self.accounting = Accounting::Perf;
                    return Ok(Clock::Perf(fds));
                }
                Some(e) if self.accounting == Accounting::Perf => {
                    return Err(ProcError::io(format!("perf_event_open(task-clock) on PID {pid}"), e))
                }
                e => {
                    self.note(format!(
                        "perf task-clock unavailable ({}); CPU time from /proc/<pid>/task/*/schedstat, refreshed only at ticks and context switches",
                        e.map_or("no thread".to_string(), |e| e.to_string())
                    ));
                    self.accounting = Accounting::Schedstat;
                }
            }
        }
        let base = sys::schedstat_ns(pid).unwrap_or(0);
        Ok(Clock::Schedstat { pid, base, last: 0 })
    }

    /// Start or attach one job; it ends stopped (our scheduler) or running (baselines).
    fn add_job(&mut self, spec: &JobSpec, nice_hint: Option<i32>) -> Result<usize, ProcError> {
        let name = spec.name.clone().unwrap_or_else(|| spec.default_name());
        let weight = Weight::new(spec.weight).map_err(|e| ProcError::usage(format!("job {name}: {e}")))?;
        let guardian = self.guardian.as_mut().ok_or_else(|| ProcError::usage("run already ended"))?;
        let (pid, group, spawned, orig_mask, tids) = match &spec.target {
            Target::Command(argv) => {
                let prog = resolve_program(&argv[0])?;
                let pid = spawn_stopped(&prog, argv, nice_hint, guardian)?;
                let mask = sys::get_affinity(pid).map_err(|e| ProcError::io("reading affinity", e))?;
                (pid, Some(pid), true, mask, vec![pid])
            }
            &Target::Pid(pid) => {
                let gpid = guardian.pid();
                let managed = self.managed_pids();
                check_attachable(pid, gpid, &managed)?;
                let mask = sys::get_affinity(pid)
                    .map_err(|e| ProcError::usage(format!("PID {pid}: cannot read its affinity: {e}")))?;
                let guardian = self.guardian.as_mut().ok_or_else(|| ProcError::usage("run already ended"))?;
                guardian.add(pid, None, mask).map_err(|e| ProcError::io("telling the guardian", e))?;
                if self.mode == Mode::Propshare {
                    sys::kill(pid, libc::SIGSTOP)
                        .map_err(|e| ProcError::usage(format!("PID {pid}: cannot stop it: {e}")))?;
                    // Wait (briefly) until it is stopped, so its thread list is final.
                    for _ in 0..200 {
                        if sys::state(pid).is_none_or(|s| s == 'T') {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_micros(500));
                    }
                }
                let tids = sys::threads(pid).unwrap_or_else(|_| vec![pid]);
                (pid, None, false, mask, tids)
            }
        };
        let clock = match self.open_clock(pid, &tids) {
            Ok(c) => c,
            Err(e) => {
                // Undo: resume and forget it.
                let _ = sys::kill(pid, libc::SIGCONT);
                if spawned {
                    let _ = sys::kill(-pid, libc::SIGKILL);
                    let mut st = 0;
                    // SAFETY: reaping our own child.
                    unsafe { libc::waitpid(pid, &mut st, 0) };
                }
                if let Some(g) = self.guardian.as_mut() {
                    let _ = g.remove(pid);
                }
                return Err(e);
            }
        };
        let pidfd = sys::pidfd_open(pid).ok();
        let idx = self.jobs.len();
        self.jobs.push(Job {
            name: name.clone(),
            pid,
            group,
            spawned,
            weight: weight.get(),
            orig_mask,
            orig_nice: Vec::new(),
            pidfd,
            clock,
            charged: 0,
            st: St::Runnable,
            sigstopped: self.mode == Mode::Propshare || spawned,
            pinned: None,
            cgroup: None,
            end: None,
            last_sample: (0, 0),
        });
        self.names.push(name.clone());
        let now = self.now();
        let ci = self.rec.add_client(&name);
        debug_assert_eq!(ci, idx);
        self.rec.change(now, idx, Change::Join(weight.get()));
        self.rec.sample(now, idx, 0);
        match self.mode {
            Mode::Propshare => {
                if let Some(s) = self.sched.as_mut() {
                    s.join(now, ClientId(idx as u32), weight)?;
                }
            }
            Mode::BaselineNice | Mode::BaselineShares => self.start_baseline_job(idx)?,
        }
        Ok(idx)
    }

    fn start_baseline_job(&mut self, idx: usize) -> Result<(), ProcError> {
        let mask = self.cpu_mask;
        let j = &mut self.jobs[idx];
        if self.mode == Mode::BaselineShares {
            let shares = baseline::shares_for_weights(&[j.weight])[0];
            if let Some(cg) = self.cgroups.as_mut() {
                j.cgroup = Some(cg.add(j.pid, shares)?);
            }
        } else {
            sys::set_process_affinity(j.pid, &mask)
                .map_err(|e| ProcError::io(format!("setting the affinity of {}", j.name), e))?;
        }
        let now = sys::monotonic_ns().saturating_sub(self.t0);
        j.last_sample = (now, j.clock.read());
        if j.sigstopped {
            j.signal(libc::SIGCONT);
            j.sigstopped = false;
        }
        self.apply_baseline_weights()
    }

    /// Re-derive nice values / shares for the whole live set (nice is relative).
    fn apply_baseline_weights(&mut self) -> Result<(), ProcError> {
        let live: Vec<usize> = (0..self.jobs.len()).filter(|&i| self.jobs[i].st != St::Gone).collect();
        let ws: Vec<u64> = live.iter().map(|&i| self.jobs[i].weight).collect();
        match self.mode {
            Mode::BaselineNice => {
                let nices = baseline::nice_for_weights(&ws);
                for (k, &i) in live.iter().enumerate() {
                    let j = &mut self.jobs[i];
                    for t in sys::threads(j.pid).unwrap_or_default() {
                        if !j.orig_nice.iter().any(|&(x, _)| x == t) {
                            if let Ok(n) = sys::get_nice(t) {
                                j.orig_nice.push((t, n));
                            }
                        }
                        let _ = sys::set_nice(t, nices[k]);
                    }
                }
            }
            Mode::BaselineShares => {
                let shares = baseline::shares_for_weights(&ws);
                for (k, &i) in live.iter().enumerate() {
                    if let (Some(cg), Some(g)) = (self.cgroups.as_ref(), self.jobs[i].cgroup) {
                        cg.set_shares(g, shares[k])?;
                    }
                }
            }
            Mode::Propshare => {}
        }
        Ok(())
    }

    fn set_weight(&mut self, name: &str, w: u64) -> Result<(), ProcError> {
        let weight = Weight::new(w).map_err(|e| ProcError::usage(e.to_string()))?;
        let idx = self
            .jobs
            .iter()
            .position(|j| j.name == name && j.st != St::Gone)
            .ok_or_else(|| ProcError::usage(format!("no job named {name:?}")))?;
        let now = self.now();
        self.jobs[idx].weight = w;
        self.rec.change(now, idx, Change::Weight(w));
        match self.mode {
            Mode::Propshare => {
                if let Some(s) = self.sched.as_mut() {
                    s.set_weight(now, ClientId(idx as u32), weight)?;
                }
                Ok(())
            }
            _ => self.apply_baseline_weights(),
        }
    }

    /// Whether job `i` has exited; reaps it if it is our child.
    fn exited(&mut self, i: usize) -> bool {
        let j = &mut self.jobs[i];
        let dead = match &j.pidfd {
            Some(fd) => sys::pidfd_exited(fd),
            None => sys::state(j.pid).is_none_or(|s| s == 'Z' || s == 'X'),
        };
        if dead && j.spawned && j.end.is_none() {
            let mut status = 0;
            // SAFETY: reaping our own child.
            let r = unsafe { libc::waitpid(j.pid, &mut status, libc::WNOHANG) };
            if r == j.pid {
                j.end = Some(exit_text(status));
            } else {
                return false; // not reapable yet: look again next round
            }
        }
        dead
    }

    /// Job `i` has gone: tell the scheduler, the guardian and the record.
    fn job_left(&mut self, i: usize, now: Time) -> Result<(), ProcError> {
        let cpu_now = self.jobs[i].clock.read();
        let st = self.jobs[i].st;
        if let St::Running { cpu, start, start_cpu, .. } = st {
            self.finish_run(i, cpu, start, start_cpu, cpu_now, now, StopReason::Left)?;
        } else if self.mode == Mode::Propshare {
            if let Some(s) = self.sched.as_mut() {
                s.leave(now, ClientId(i as u32))?;
            }
        }
        if self.mode != Mode::Propshare {
            self.rec.sample(now, i, cpu_now);
        }
        let j = &mut self.jobs[i];
        j.st = St::Gone;
        j.end.get_or_insert_with(|| "exited".into());
        // Its group may still hold stopped descendants.
        if let Some(g) = j.group {
            let _ = sys::kill(-g, libc::SIGCONT);
        }
        let pid = j.pid;
        if let Some(g) = self.guardian.as_mut() {
            let _ = g.remove(pid);
        }
        self.rec.change(now, i, Change::Leave);
        Ok(())
    }

    /// Close the run of job `i` on CPU `cpu`: charge it and report the stop.
    #[allow(clippy::too_many_arguments)]
    fn finish_run(
        &mut self,
        i: usize,
        cpu: usize,
        start: Time,
        start_cpu: u64,
        cpu_now: u64,
        now: Time,
        why: StopReason,
    ) -> Result<(), ProcError> {
        let j = &mut self.jobs[i];
        let mut ran = cpu_now.saturating_sub(j.charged);
        j.charged = j.charged.max(cpu_now);
        if self.charge == Charge::Slot && why.still_runnable() {
            ran = now.saturating_sub(start).max(1);
        }
        let used = cpu_now.saturating_sub(start_cpu).min(now.saturating_sub(start));
        self.rec.run(cpu, i, start, start + used);
        self.rec.sample(now, i, cpu_now);
        self.running[cpu] = None;
        j.st = match why {
            StopReason::Blocked => St::Blocked { cpu_at: cpu_now },
            StopReason::Left => St::Gone,
            _ => St::Runnable,
        };
        if why == StopReason::Blocked {
            self.rec.change(now, i, Change::Block);
        }
        if let Some(s) = self.sched.as_mut() {
            s.stopped(now, CpuId(cpu as u32), ClientId(i as u32), ran, why)?;
        }
        Ok(())
    }

    /// One round of our scheduler (steps 1-4 of the module doc). Returns the next wake-up time.
    fn round(&mut self) -> Result<Time, ProcError> {
        let now = self.now();
        // 1. exits
        for i in 0..self.jobs.len() {
            if self.jobs[i].st != St::Gone && self.exited(i) {
                self.job_left(i, now)?;
            }
        }
        // 2. running jobs
        for cpu in 0..self.cpus.len() {
            let Some(i) = self.running[cpu] else { continue };
            let St::Running { start, deadline, start_cpu, check_t, check_cpu, .. } = self.jobs[i].st else { continue };
            let c = self.jobs[i].clock.read();
            let wall = now.saturating_sub(start);
            if now + 50_000 >= deadline {
                let idle =
                    c.saturating_sub(start_cpu).saturating_mul(4) < wall && !sys::any_thread_runnable(self.jobs[i].pid);
                let why = if idle { StopReason::Blocked } else { StopReason::Expired };
                self.finish_run(i, cpu, start, start_cpu, c, now, why)?;
            } else if now.saturating_sub(check_t) >= BLOCK_WINDOW_NS {
                let window = now - check_t;
                if c.saturating_sub(check_cpu).saturating_mul(8) < window && !sys::any_thread_runnable(self.jobs[i].pid)
                {
                    self.finish_run(i, cpu, start, start_cpu, c, now, StopReason::Blocked)?;
                } else if let St::Running { check_t, check_cpu, .. } = &mut self.jobs[i].st {
                    *check_t = now;
                    *check_cpu = c;
                }
            }
        }
        // 3. blocked jobs: awake again once they use CPU
        for i in 0..self.jobs.len() {
            let St::Blocked { cpu_at } = self.jobs[i].st else { continue };
            let c = self.jobs[i].clock.read();
            if c.saturating_sub(cpu_at) >= WAKE_CPU_NS {
                self.jobs[i].st = St::Runnable;
                self.rec.change(now, i, Change::Wake);
                self.rec.sample(now, i, c);
                if let Some(s) = self.sched.as_mut() {
                    s.wake(now, ClientId(i as u32))?;
                }
            }
        }
        // 4. picks
        let q = self.quantum;
        for cpu in 0..self.cpus.len() {
            if self.running[cpu].is_some() {
                continue;
            }
            let Some(s) = self.sched.as_mut() else { break };
            if let Decision::Run { client, slice } = s.pick(now, CpuId(cpu as u32))? {
                let i = client.index();
                let j = self.jobs.get_mut(i).ok_or(ProcError::Sched(propshare::SchedError::UnknownClient(client)))?;
                let c = j.clock.read();
                j.st = St::Running {
                    cpu,
                    start: now,
                    deadline: now + slice.max(1),
                    start_cpu: c,
                    check_t: now,
                    check_cpu: c,
                };
                self.running[cpu] = Some(i);
                self.rec.sample(now, i, c);
            }
        }
        let _ = q;
        // Apply: stop first, then pin and continue.
        for j in self.jobs.iter_mut() {
            if j.st == St::Runnable && !j.sigstopped {
                j.signal(libc::SIGSTOP);
                j.sigstopped = true;
            }
        }
        for cpu in 0..self.cpus.len() {
            let Some(i) = self.running[cpu] else { continue };
            let j = &mut self.jobs[i];
            if j.pinned != Some(cpu) {
                let m = CpuMask::of(&[self.cpus[cpu]]);
                match sys::set_process_affinity(j.pid, &m) {
                    Ok(()) => j.pinned = Some(cpu),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) || e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(ProcError::io(format!("pinning {} to CPU {}", j.name, self.cpus[cpu]), e)),
                }
            }
            if j.sigstopped {
                j.signal(libc::SIGCONT);
                j.sigstopped = false;
            }
        }
        let mut next = now + self.quantum;
        for j in &self.jobs {
            if let St::Running { deadline, .. } = j.st {
                next = next.min(deadline);
            }
        }
        Ok(next)
    }

    /// One sampling round of a Linux baseline. Returns the next wake-up time.
    fn baseline_round(&mut self) -> Result<Time, ProcError> {
        let now = self.now();
        for i in 0..self.jobs.len() {
            if self.jobs[i].st == St::Gone {
                continue;
            }
            if self.exited(i) {
                self.job_left(i, now)?;
                continue;
            }
            let c = self.jobs[i].clock.read();
            let (t_prev, c_prev) = self.jobs[i].last_sample;
            let used = c.saturating_sub(c_prev);
            let wall = now.saturating_sub(t_prev);
            if wall == 0 {
                continue;
            }
            let cpu = sys::proc_stat(self.jobs[i].pid).map(|s| s.processor).unwrap_or(0);
            let cpu_idx = self.cpus.iter().position(|&x| x == cpu).unwrap_or(0);
            if used > 0 {
                self.rec.run(cpu_idx, i, t_prev, t_prev + used.min(wall));
            }
            self.rec.sample(now, i, c);
            self.jobs[i].last_sample = (now, c);
            // Inferred blocking, for the ideal: asleep now and used under half a CPU.
            let asleep = used.saturating_mul(2) < wall && !sys::any_thread_runnable(self.jobs[i].pid);
            match (self.jobs[i].st, asleep) {
                (St::Runnable, true) => {
                    self.jobs[i].st = St::Blocked { cpu_at: c };
                    self.rec.change(now, i, Change::Block);
                }
                (St::Blocked { .. }, false) => {
                    self.jobs[i].st = St::Runnable;
                    self.rec.change(now, i, Change::Wake);
                }
                _ => {}
            }
        }
        Ok(now + self.quantum)
    }

    /// Resume everything, restore affinity and nice, leave the cgroups, then
    /// end the jobs we started with `term` (attached ones keep running).
    fn release_all(&mut self, term: i32) {
        if self.released {
            return;
        }
        self.released = true;
        let now = self.now();
        for i in 0..self.jobs.len() {
            if let St::Running { cpu, start, start_cpu, .. } = self.jobs[i].st {
                let c = self.jobs[i].clock.read();
                let used = c.saturating_sub(start_cpu).min(now.saturating_sub(start));
                self.rec.run(cpu, i, start, start + used);
                self.rec.sample(now, i, c);
                self.running[cpu] = None;
                self.jobs[i].st = St::Runnable;
            }
        }
        for j in self.jobs.iter_mut() {
            if j.st == St::Gone {
                continue;
            }
            let _ = sys::set_process_affinity(j.pid, &j.orig_mask);
            for &(t, n) in &j.orig_nice {
                let _ = sys::set_nice(t, n);
            }
            j.signal(libc::SIGCONT);
            j.sigstopped = false;
            j.pinned = None;
        }
        if let Some(mut cg) = self.cgroups.take() {
            cg.destroy();
        }
        // Our own children: ask them to end, then make sure.
        let children: Vec<usize> =
            (0..self.jobs.len()).filter(|&i| self.jobs[i].spawned && self.jobs[i].st != St::Gone).collect();
        for &i in &children {
            self.jobs[i].signal(term);
        }
        let deadline = sys::monotonic_ns() + 1_000_000_000;
        let mut left: Vec<usize> = children;
        while !left.is_empty() {
            left.retain(|&i| {
                let j = &mut self.jobs[i];
                let mut status = 0;
                // SAFETY: reaping our own child.
                let r = unsafe { libc::waitpid(j.pid, &mut status, libc::WNOHANG) };
                if r == j.pid || r < 0 {
                    if r == j.pid {
                        j.end = Some(exit_text(status));
                    }
                    if let Some(g) = j.group {
                        let _ = sys::kill(-g, libc::SIGCONT);
                    }
                    j.st = St::Gone;
                    false
                } else {
                    true
                }
            });
            if sys::monotonic_ns() > deadline {
                for &i in &left {
                    self.jobs[i].signal(libc::SIGKILL);
                }
                for &i in &left {
                    let mut status = 0;
                    // SAFETY: reaping our own child (SIGKILL cannot be refused).
                    unsafe { libc::waitpid(self.jobs[i].pid, &mut status, 0) };
                    self.jobs[i].end = Some(exit_text(status));
                    self.jobs[i].st = St::Gone;
                }
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        for j in self.jobs.iter_mut() {
            if j.end.is_none() {
                j.end = Some("running (released)".into());
            }
        }
        if let Some(g) = self.guardian.take() {
            let _ = g.disarm();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.release_all(libc::SIGTERM);
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
    if opts.quantum == 0 {
        return Err(ProcError::usage("the quantum must be positive"));
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
    let mut jobs = opts.jobs.clone();
    if jobs.is_empty() && opts.control.is_none() {
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

fn set_fifo() -> Result<(), ProcError> {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain syscall on ourselves.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) } != 0 {
        return Err(ProcError::io("setting SCHED_FIFO (needs root or CAP_SYS_NICE)", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn ppoll(fds: &mut [libc::pollfd], timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: valid pollfd slice and timespec.
    unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
}

/// Run the jobs under `opts` until they end, the duration passes, a signal or
/// `quit` arrives, or `opts.stop` is set. Every managed process is resumed
/// (and its affinity restored) before this returns, whatever happens.
pub fn run(opts: RunOptions) -> Result<RunReport, ProcError> {
    let (cpus, jobs) = validate(&opts)?;
    let p = cpus.len();
    let sched = match opts.mode {
        Mode::Propshare => Some(
            registry::build(&opts.scheduler, SchedConfig { cpus: p, quantum: opts.quantum, seed: opts.seed })
                .map_err(|e| ProcError::usage(e.to_string()))?,
        ),
        _ => None,
    };
    let sched_name = match opts.mode {
        Mode::Propshare => opts.scheduler.clone(),
        Mode::BaselineNice => "linux-nice".into(),
        Mode::BaselineShares => "linux-shares".into(),
    };
    let cpu_mask = CpuMask::of(&cpus);
    let mut control = match &opts.control {
        Some(path) => Some(ControlServer::bind(path)?),
        None => None,
    };
    // Signals: a flag per signal, and a self-pipe that wakes ppoll.
    let last_signal = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let mut sig_ids = Vec::new();
    let mut sig_flags = Vec::new();
    let mut sig_rx = None;
    if opts.handle_signals {
        let (rx, tx) = std::os::unix::net::UnixStream::pair().map_err(|e| ProcError::io("socketpair", e))?;
        rx.set_nonblocking(true).map_err(|e| ProcError::io("socketpair", e))?;
        tx.set_nonblocking(true).map_err(|e| ProcError::io("socketpair", e))?;
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            let flag = Arc::new(AtomicBool::new(false));
            let io = |e| ProcError::io("installing signal handlers", e);
            sig_ids.push(signal_hook::flag::register(sig, flag.clone()).map_err(io)?);
            let tx = tx.try_clone().map_err(|e| ProcError::io("socketpair", e))?;
            sig_ids.push(signal_hook::low_level::pipe::register(sig, tx).map_err(io)?);
            sig_flags.push((sig, flag));
        }
        sig_rx = Some(rx);
    }

    let guardian = Guardian::spawn().map_err(|e| ProcError::io("starting the guardian", e))?;
    let mut ctl = Controller {
        mode: opts.mode,
        cpus: cpus.clone(),
        cpu_mask,
        quantum: opts.quantum,
        sched,
        jobs: Vec::new(),
        running: vec![None; p],
        guardian: Some(guardian),
        cgroups: None,
        rec: Record::default(),
        t0: sys::monotonic_ns(),
        accounting: opts.accounting,
        charge: opts.charge,
        notes: Vec::new(),
        released: false,
        verbose: opts.verbose,
        names: Vec::new(),
    };
    if opts.mode == Mode::BaselineShares {
        ctl.cgroups = Some(Cgroups::create(&cpu_mask)?);
    }
    let result = (|| -> Result<(String, u64, u64), ProcError> {
        let nices = if opts.mode == Mode::BaselineNice {
            baseline::nice_for_weights(&jobs.iter().map(|j| j.weight).collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        for (k, j) in jobs.iter().enumerate() {
            ctl.add_job(j, nices.get(k).copied())?;
        }
        if opts.fifo {
            set_fifo()?;
        }
        let cpu0 = sys::self_cpu_ns();
        let w0 = sys::monotonic_ns();
        let mut rounds = 0u64;
        let ended = loop {
            rounds += 1;
            if opts.panic_after_rounds.is_some_and(|n| rounds > n) {
                panic!("propshare-proc test panic after {} rounds", rounds - 1);
            }
            if opts.fail_after_rounds.is_some_and(|n| rounds > n) {
                return Err(ProcError::io("test failure", std::io::Error::other("injected")));
            }
            if let Some((sig, _)) = sig_flags.iter().find(|(_, f)| f.load(Ordering::Relaxed)) {
                last_signal.store(*sig, Ordering::Relaxed);
                break format!("signal {sig}");
            }
            if opts.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                break "stopped by the caller".into();
            }
            if let Some(d) = opts.duration {
                if ctl.now() >= d {
                    break "duration reached".into();
                }
            }
            if let Some(cs) = control.as_mut() {
                if cs.serve(&mut ctl)? {
                    break "quit on the control socket".into();
                }
            }
            if ctl.jobs.iter().all(|j| j.st == St::Gone) && control.is_none() {
                break "every job exited".into();
            }
            let next = match opts.mode {
                Mode::Propshare => ctl.round()?,
                _ => ctl.baseline_round()?,
            };
            let mut next = next;
            if let Some(d) = opts.duration {
                next = next.min(d);
            }
            let mut fds: Vec<libc::pollfd> = Vec::new();
            if let Some(rx) = &sig_rx {
                fds.push(libc::pollfd { fd: rx.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            }
            if let Some(cs) = &control {
                fds.push(libc::pollfd { fd: cs.fd(), events: libc::POLLIN, revents: 0 });
            }
            for j in &ctl.jobs {
                if let (Some(fd), true) = (&j.pidfd, j.st != St::Gone) {
                    fds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                }
            }
            let now = ctl.now();
            if next > now {
                ppoll(&mut fds, next - now);
            }
            if let Some(rx) = &sig_rx {
                let mut buf = [0u8; 64];
                let _ = std::io::Read::read(&mut &*rx, &mut buf);
            }
        };
        Ok((ended, sys::self_cpu_ns() - cpu0, sys::monotonic_ns() - w0))
    })();
    let term = match last_signal.load(Ordering::Relaxed) {
        0 => libc::SIGTERM,
        s => s,
    };
    ctl.release_all(term);
    for id in sig_ids {
        signal_hook::low_level::unregister(id);
    }
    drop(control);
    let (ended, own_cpu, wall) = result?;
    let end_t = ctl.now();
    let m = metrics::measure(&ctl.rec, p, end_t);
    if let Some(path) = &opts.trace {
        let meta = TraceMeta {
            scheduler: sched_name.clone(),
            cpus: p,
            quantum_ns: opts.quantum,
            seed: opts.seed,
            scenario: opts.scenario.clone(),
        };
        let f = std::fs::File::create(path).map_err(|e| ProcError::io(format!("creating {}", path.display()), e))?;
        let mut w = std::io::BufWriter::new(f);
        ctl.rec.write_trace(&mut w, &meta).map_err(|e| ProcError::io(format!("writing {}", path.display()), e))?;
    }
    let clients = ctl
        .jobs
        .iter()
        .zip(m)
        .map(|(j, metrics)| ClientReport {
            name: j.name.clone(),
            pid: j.pid,
            weight: j.weight,
            metrics,
            end: j.end.clone().unwrap_or_default(),
        })
        .collect();
    Ok(RunReport {
        mode: match opts.mode {
            Mode::Propshare => "propshare",
            Mode::BaselineNice => "linux-nice",
            Mode::BaselineShares => "linux-shares",
        }
        .into(),
        scheduler: sched_name,
        cpus,
        quantum_ns: opts.quantum,
        wall_ns: wall,
        accounting: match ctl.accounting {
            Accounting::Schedstat => "schedstat".into(),
            _ => "perf task-clock".into(),
        },
        controller_cpu_ns: own_cpu,
        ended,
        clients,
        notes: std::mem::take(&mut ctl.notes),
    })
}

// ---------------------------------------------------------------- control hooks

impl crate::control::Host for Controller {
    fn add(&mut self, words: &[String]) -> Result<String, ProcError> {
        let mut spec = spec::parse_job(words)?;
        let mut taken = self.names.clone();
        let mut one = [spec.clone()];
        spec::assign_names(&mut one, &mut taken)?;
        spec = one[0].clone();
        if let Target::Command(argv) = &spec.target {
            resolve_program(&argv[0])?;
        }
        let nice = if self.mode == Mode::BaselineNice { Some(0) } else { None };
        let i = self.add_job(&spec, nice)?;
        Ok(self.jobs[i].name.clone())
    }

    fn weight(&mut self, name: &str, w: u64) -> Result<(), ProcError> {
        self.set_weight(name, w)
    }

    fn list(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for j in self.jobs.iter_mut() {
            let st = match j.st {
                St::Runnable => "runnable".to_string(),
                St::Running { cpu, .. } => format!("running:{}", self.cpus[cpu]),
                St::Blocked { .. } => "blocked".into(),
                St::Gone => "gone".into(),
            };
            let c = if j.st == St::Gone { 0 } else { j.clock.read() };
            out.push(format!("{} pid={} weight={} state={} cpu_ms={:.1}", j.name, j.pid, j.weight, st, c as f64 / 1e6));
        }
        out
    }
}
