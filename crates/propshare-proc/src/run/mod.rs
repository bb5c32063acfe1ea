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
//!    at its next stop) (the thresholds: `blocking`);
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
//!
//! # Modules
//!
//! Along the data path: `options` (what to run, checked before anything
//! starts), `spawn` (start or attach a job), `clock` (its CPU time),
//! `controller` (the rounds), `blocking` (when a job counts as blocked or
//! awake), `baselines` (Linux's own weighting instead), `cgroup2` (a
//! cgroup v2 subtree enforced, or built for `--baseline cgroup2`), `release` (nothing
//! left stopped) and `report` (the outcome).

mod baselines;
mod blocking;
mod cgroup2;
mod clock;
mod controller;
mod descendants;
mod job;
mod options;
mod release;
mod report;
mod spawn;

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use propshare::{registry, SchedConfig, Time};
use std::io::Write;

use crate::baseline::{self, Cgroups};
use crate::control::ControlServer;
use crate::error::ProcError;
use crate::groups::HostGroups;
use crate::guardian::Guardian;
use crate::metrics::{self, Record, TraceFile, TraceMeta};
use crate::sys::{self, CpuMask};
use controller::Controller;
use job::St;

pub use options::{
    validate, Accounting, Charge, Mode, RunOptions, DEFAULT_CGROUP2_EVERY, DEFAULT_JSON_EVERY, MIN_CGROUP2_EVERY,
    MIN_JSON_EVERY, MIN_QUANTUM,
};
pub use report::{ClientReport, RunReport};
pub use spawn::resolve_program;

/// How often the trace file is appended to while the run goes (ns).
const TRACE_FLUSH_NS: u64 = 1_000_000_000;

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
        baseline => baseline.name().into(),
    };
    let cpu_mask = CpuMask::of(&cpus);
    // Outputs are opened before anything starts: a bad path is an immediate error.
    let meta = TraceMeta {
        ev: "meta",
        scheduler: &sched_name,
        cpus: p,
        quantum_ns: opts.quantum,
        seed: opts.seed,
        scenario: &opts.scenario,
    };
    let mut trace = match &opts.trace {
        Some(path) => Some(TraceFile::create(path, &meta).map_err(ProcError::usage)?),
        None => None,
    };
    let mut output_errors = Vec::new();
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
        groups: None,
        watch: None,
        cg2: None,
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
    if !opts.groups.is_empty() {
        let g = HostGroups::new(&opts.groups)?;
        for k in 1..g.tree().len() {
            let id = propshare::groups::GroupId(k as u32);
            ctl.rec.add_group(&g.names()[k], g.tree().weight(id).get(), g.tree().parent(id).0);
        }
        ctl.groups = Some(g);
    }
    if opts.mode == Mode::BaselineCgroup2 {
        let ws: Vec<u64> = jobs.iter().map(|j| j.weight).collect();
        ctl.start_cgroup2_baseline(opts.cgroup2_dir.as_deref(), &ws)?;
    }
    let mut rounds = 0u64;
    let head = ReportHead { mode: opts.mode, scheduler: sched_name.clone(), cpus: cpus.clone(), quantum: opts.quantum };
    let mut json_ok = opts.json.is_some();
    let result = (|| -> Result<(String, u64, u64), ProcError> {
        let nices = if opts.mode == Mode::BaselineNice {
            baseline::nice_for_weights(&jobs.iter().map(|j| j.weight).collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        for (k, j) in jobs.iter().enumerate() {
            ctl.add_job(j, nices.get(k).copied())?;
        }
        if let Some(root) = &opts.cgroup2 {
            ctl.start_watch(root, opts.cgroup2_every)?;
        }
        if opts.fifo {
            set_fifo()?;
        }
        let cpu0 = sys::self_cpu_ns();
        let w0 = sys::monotonic_ns();
        let mut flushed = w0;
        let mut snapshot_at = w0;
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
            if ctl.guardian.as_ref().is_some_and(|g| g.died()) {
                break "the guardian died (stopped cleanly: nothing could release the jobs if the scheduler died)"
                    .into();
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
            let watched = ctl.sync_watch()?;
            if ctl.jobs.iter().all(|j| j.st == St::Gone) && control.is_none() && watched.is_none() {
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
            if let Some(w) = watched {
                next = next.min(w);
            }
            let mut fds: Vec<libc::pollfd> = Vec::new();
            if let Some(rx) = &sig_rx {
                fds.push(libc::pollfd { fd: rx.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            }
            if let Some(cs) = &control {
                fds.extend(cs.poll_fds());
            }
            if let Some(fd) = ctl.guardian.as_ref().and_then(|g| g.pidfd()) {
                fds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
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
            if json_ok && sys::monotonic_ns().saturating_sub(snapshot_at) >= opts.json_every {
                snapshot_at = sys::monotonic_ns();
                let wall = snapshot_at - w0;
                let r = head.report(
                    &ctl,
                    rounds,
                    format!("running ({:.1} s so far)", wall as f64 / 1e9),
                    sys::self_cpu_ns() - cpu0,
                    wall,
                    Vec::new(),
                );
                if let Err(e) = write_json(opts.json.as_deref(), &r) {
                    output_errors.push(e);
                    json_ok = false;
                }
            }
            if trace.is_some() && sys::monotonic_ns().saturating_sub(flushed) >= TRACE_FLUSH_NS {
                flushed = sys::monotonic_ns();
                if let Err(e) = trace.as_mut().map_or(Ok(()), |t| t.flush(&ctl.rec)) {
                    output_errors.push(e);
                    trace = None;
                }
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
    if let Some(Err(e)) = trace.as_mut().map(|t| t.flush(&ctl.rec)) {
        output_errors.push(e);
    }
    let mut report = head.report(&ctl, rounds, ended, own_cpu, wall, output_errors);
    if let Err(e) = write_json(opts.json.as_deref(), &report) {
        report.output_errors.push(e);
    }
    Ok(report)
}

/// What every report of a run (each snapshot and the last) says of the run itself.
struct ReportHead {
    mode: Mode,
    scheduler: String,
    cpus: Vec<usize>,
    quantum: Time,
}

impl ReportHead {
    /// The report of the run so far: every process measured up to now.
    fn report(
        &self,
        ctl: &Controller,
        rounds: u64,
        ended: String,
        controller_cpu_ns: u64,
        wall_ns: u64,
        output_errors: Vec<String>,
    ) -> RunReport {
        let m = metrics::measure_all(&ctl.rec, self.cpus.len(), self.quantum, ctl.now());
        let clients = ctl
            .jobs
            .iter()
            .zip(m.clients)
            .map(|(j, metrics)| ClientReport {
                name: j.name.clone(),
                pid: j.pid,
                weight: j.weight,
                metrics,
                end: j.end.clone().unwrap_or_else(|| "running".into()),
            })
            .collect();
        RunReport {
            mode: self.mode.name().into(),
            scheduler: self.scheduler.clone(),
            cpus: self.cpus.clone(),
            quantum_ns: self.quantum,
            wall_ns,
            accounting: match ctl.accounting {
                Accounting::Schedstat => "schedstat".into(),
                _ => "perf task-clock".into(),
            },
            controller_cpu_ns,
            rounds,
            ended,
            clients,
            groups: m.groups,
            notes: ctl.notes.clone(),
            output_errors,
        }
    }
}

/// Write `report` as pretty JSON to `path` whole (a temporary file beside
/// it, created exclusively, renamed into place): a reader, or a run killed
/// mid-write, never sees half a file. The error names the path.
fn write_json(path: Option<&std::path::Path>, report: &RunReport) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    propshare_sim::output::write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, report)?;
        w.write_all(b"\n")
    })
    .map_err(|e| format!("--json {}: {e}", path.display()))
}
