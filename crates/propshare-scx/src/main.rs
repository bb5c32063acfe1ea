// SPDX-License-Identifier: GPL-2.0-only
//! propshare-scx: a propshare scheduler as a real Linux kernel scheduler,
//! through sched_ext. The default BPF side is our own (`src/pscx`, driven by
//! `own.rs` and `own_host.rs`); `--bpf stock` uses scx_rustland_core's, with
//! the inference of `host.rs` and the loop in this file.
//!
//! ```text
//! propshare-scx --scheduler gr3mp --quantum 4ms -w 3 -- ./a ::: -w 1 -- ./b
//! propshare-scx --scheduler gr3mp --jobs jobs.toml
//! propshare-scx --scheduler dwrr            # every SCHED_EXT task, kernel weights
//! propshare-scx --scheduler dwrr --all-tasks # every task, kernel weights
//! ```

mod bpf_skel;
pub use bpf_skel::*;
// Generated from scx_rustland_core at build time (not ours; not linted).
#[allow(dead_code, clippy::all)]
#[rustfmt::skip]
mod bpf;
pub mod bpf_intf;
mod host;
mod own;
mod own_host;
#[allow(dead_code, clippy::all)]
#[rustfmt::skip]
mod pscx_skel;
#[allow(dead_code, clippy::all)]
mod pscx_intf;

use bpf::{BpfScheduler, DispatchedTask, QueuedTask};
use host::{Host, Msg, Probe, Weights};
use propshare_proc::spec::{assign_names, parse_jobs, read_jobs_file, JobSpec, Target};
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::path::Path;
use std::process::ExitCode;

const SCHED_EXT: i32 = 7;

/// Tests: report a panic without a backtrace. scx_rustland_core installs its
/// own global allocator (a fixed arena), and capturing a backtrace during a
/// failing test's panic exhausted it and hung the test instead of failing it.
#[cfg(test)]
pub(crate) fn plain_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|info| eprintln!("{info}"))));
}
/// Wake this long before the earliest slice end in the model.
const SLEEP_MARGIN: u64 = 500_000;
/// Never sleep less than this between loops.
const MIN_SLEEP: u64 = 100_000;
/// Period of the kicker thread.
const KICK_PERIOD: u64 = 50_000_000;

const USAGE: &str = "\
usage: propshare-scx [OPTIONS] [JOB ::: JOB ...]

Schedule tasks in the Linux kernel with a propshare scheduler (sched_ext).

Jobs (same syntax and jobs file as `propshare run`):
  -w W [-n NAME] -- CMD ARGS      start CMD with weight W (SCHED_EXT policy)
  --jobs FILE                     jobs from a TOML file
With no jobs, every task switched to SCHED_EXT is scheduled with the kernel's
weight (p->scx.weight: nice 0 = 100, or the cgroup's cpu.weight).

Options:
  --scheduler NAME   registry scheduler (default gr3mp); an unknown name lists them
  --quantum DUR      quantum, e.g. 4ms (default 4ms; HZ=250 kernels tick every 4ms)
  --all-tasks        schedule every task, not only SCHED_EXT ones (no jobs)
  --cgroups          weight tasks by the cgroup tree: each cgroup's cpu.weight
                     divides its parent's share among its children, a task's
                     own weight (nice) its share within its cgroup (no jobs)
  --exact-slices     end every slice on time with a per-CPU BPF timer (the
                     kernel otherwise ends slices at ticks: 4 ms at HZ=250)
  --duration DUR     stop after DUR
  --bpf SIDE         own (default): our BPF side, which reports every run, stop,
                     block, exit and weight change; stock: scx_rustland_core's,
                     with blocks and exits inferred from /proc
  --stats            print a JSON stats line on exit (always printed with jobs)
  -h, --help         this help

Exit status: 0 done, 1 runtime failure (kernel without sched_ext, BPF load
failure, ejected by the kernel), 2 bad input.";

/// Which BPF side runs in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// Ours (src/pscx/main.bpf.c, own.rs).
    Own,
    /// scx_rustland_core's, with inference in host.rs.
    Stock,
}

struct Opts {
    scheduler: String,
    side: Side,
    quantum: u64,
    all_tasks: bool,
    cgroups: bool,
    exact_slices: bool,
    duration: Option<u64>,
    stats: bool,
    panic_after: Option<u64>,
    jobs: Vec<JobSpec>,
}

fn usage_err(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("propshare-scx: error: {msg}");
    eprintln!("try: propshare-scx --help");
    ExitCode::from(2)
}

fn parse_args(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        scheduler: "gr3mp".into(),
        side: Side::Own,
        quantum: 4_000_000,
        all_tasks: false,
        cgroups: false,
        exact_slices: false,
        duration: None,
        stats: false,
        panic_after: None,
        jobs: Vec::new(),
    };
    let mut jobs_file = None;
    let mut i = 0;
    let dur = |s: Option<&String>, what: &str| -> Result<u64, String> {
        let s = s.ok_or_else(|| format!("{what} needs a value"))?;
        propshare_proc::parse_duration(what, s).map_err(|e| e.to_string())
    };
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--scheduler" | "-s" => {
                o.scheduler = args.get(i + 1).ok_or("--scheduler needs a name")?.clone();
                i += 2;
            }
            "--quantum" | "-q" => {
                o.quantum = dur(args.get(i + 1), "--quantum")?;
                if o.quantum == 0 {
                    return Err("--quantum must be positive".into());
                }
                i += 2;
            }
            "--bpf" => {
                o.side = match args.get(i + 1).map(String::as_str) {
                    Some("own") => Side::Own,
                    Some("stock") => Side::Stock,
                    Some(x) => return Err(format!("--bpf takes own or stock, not {x:?}")),
                    None => return Err("--bpf needs own or stock".into()),
                };
                i += 2;
            }
            "--duration" => {
                o.duration = Some(dur(args.get(i + 1), "--duration")?);
                i += 2;
            }
            "--panic-after" => {
                o.panic_after = Some(dur(args.get(i + 1), "--panic-after")?);
                i += 2;
            }
            "--jobs" => {
                jobs_file = Some(args.get(i + 1).ok_or("--jobs needs a file")?.clone());
                i += 2;
            }
            "--all-tasks" => {
                o.all_tasks = true;
                i += 1;
            }
            "--stats" => {
                o.stats = true;
                i += 1;
            }
            "--cgroups" => {
                o.cgroups = true;
                i += 1;
            }
            "--exact-slices" => {
                o.exact_slices = true;
                i += 1;
            }
            _ if a.starts_with("--") && a != "--" && a != "--weight" && a != "--name" && a != "--pid" => {
                return Err(format!("unknown option {a:?}"));
            }
            _ => {
                o.jobs = parse_jobs(&args[i..]).map_err(|e| e.to_string())?;
                break;
            }
        }
    }
    if let Some(f) = jobs_file {
        if !o.jobs.is_empty() {
            return Err("give jobs either on the command line or with --jobs, not both".into());
        }
        o.jobs = read_jobs_file(Path::new(&f)).map_err(|e| e.to_string())?;
        if o.jobs.is_empty() {
            return Err(format!("{f}: no jobs"));
        }
    }
    if o.cgroups && (!o.jobs.is_empty() || o.side == Side::Stock) {
        return Err("--cgroups weights tasks by their cgroups' cpu.weight: it takes no jobs and needs --bpf own".into());
    }
    if o.exact_slices && o.side == Side::Stock {
        return Err("--exact-slices needs --bpf own".into());
    }
    if o.all_tasks && !o.jobs.is_empty() {
        return Err("--all-tasks schedules every task with kernel weights; it takes no jobs".into());
    }
    if o.jobs.iter().any(|j| matches!(j.target, Target::Pid(_))) {
        return Err(
            "-p PID is not supported by propshare-scx: switch the task to SCHED_EXT and run with no jobs".into()
        );
    }
    check_jobs(&o.jobs)?;
    let mut taken = Vec::new();
    assign_names(&mut o.jobs, &mut taken).map_err(|e| e.to_string())?;
    if let Err(e) = propshare::registry::build(&o.scheduler, propshare::scheduler::SchedConfig::new(1, o.quantum)) {
        return Err(e.to_string());
    }
    Ok(Some(o))
}

/// Why this kernel cannot run us, if it cannot.
fn kernel_check() -> Result<(), String> {
    if !Path::new("/sys/kernel/sched_ext").exists() {
        return Err("this kernel has no sched_ext: /sys/kernel/sched_ext is missing \
                    (needs Linux >= 6.12 built with CONFIG_SCHED_CLASS_EXT=y)"
            .into());
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err("this kernel has no BTF: /sys/kernel/btf/vmlinux is missing (needs CONFIG_DEBUG_INFO_BTF=y)".into());
    }
    let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap_or_default();
    if state.trim() != "disabled" {
        let ops = std::fs::read_to_string("/sys/kernel/sched_ext/root/ops").unwrap_or_default();
        return Err(format!(
            "sched_ext is busy (state {:?}, ops {:?}): another BPF scheduler is loaded",
            state.trim(),
            ops.trim()
        ));
    }
    if unsafe { libc::geteuid() } != 0 {
        return Err("loading a BPF scheduler needs root (CAP_BPF and CAP_SYS_ADMIN)".into());
    }
    Ok(())
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Read a small /proc file into a stack buffer (no allocation, no mmap).
fn read_small(path: &str, buf: &mut [u8]) -> Option<usize> {
    let mut p = [0u8; 64];
    let b = path.as_bytes();
    if b.len() >= p.len() {
        return None;
    }
    p[..b.len()].copy_from_slice(b);
    unsafe {
        let fd = libc::open(p.as_ptr() as *const libc::c_char, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        libc::close(fd);
        if n < 0 {
            None
        } else {
            Some(n as usize)
        }
    }
}

/// Field 1 of /proc/PID/schedstat: ns on the CPU.
fn sum_exec(pid: i32) -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = read_small(&format!("/proc/{pid}/schedstat"), &mut buf)?;
    let s = std::str::from_utf8(&buf[..n]).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The state letter of /proc/PID/stat, or None if the pid is gone.
fn proc_state(pid: i32) -> Option<u8> {
    let mut buf = [0u8; 512];
    let n = read_small(&format!("/proc/{pid}/stat"), &mut buf)?;
    let s = &buf[..n];
    let close = s.iter().rposition(|&c| c == b')')?;
    s.get(close + 2).copied()
}

/// Tgid and PPid of a task, from /proc/PID/status.
fn tgid_ppid(pid: i32) -> Option<(i32, i32)> {
    let mut buf = [0u8; 1024];
    let n = read_small(&format!("/proc/{pid}/status"), &mut buf)?;
    let s = std::str::from_utf8(&buf[..n]).ok()?;
    let field = |name: &str| -> Option<i32> {
        s.lines().find(|l| l.starts_with(name)).and_then(|l| l[name.len()..].trim().parse().ok())
    };
    Some((field("Tgid:")?, field("PPid:")?))
}

fn own_cpu_ns() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

/// This process's system CPU time (ns).
fn own_sys_ns() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_stime.tv_sec as u64 * 1_000_000 + ru.ru_stime.tv_usec as u64) * 1000
}

struct Job {
    name: String,
    weight: u64,
    pid: i32,
    done: bool,
    cpu_ns: u64,
    status: i32,
}

/// Whether `prog` names an executable file (directly or through PATH).
fn executable(prog: &str) -> bool {
    let ok = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map(|c| p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
            .unwrap_or(false)
    };
    if prog.contains('/') {
        return ok(Path::new(prog));
    }
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| ok(&d.join(prog)))).unwrap_or(false)
}

/// Check every job's command before anything starts (bad input: exit 2).
fn check_jobs(specs: &[JobSpec]) -> Result<(), String> {
    for j in specs {
        if let Target::Command(cmd) = &j.target {
            let Some(prog) = cmd.first() else { return Err("a job has an empty command".into()) };
            if cmd.iter().any(|a| a.contains('\0')) {
                return Err(format!("job {prog:?}: an argument contains a NUL byte"));
            }
            if !executable(prog) {
                return Err(format!("job command {prog:?} is not an executable file (or not on PATH)"));
            }
        }
    }
    Ok(())
}

/// Start every job held at a pipe, with the SCHED_EXT policy; they exec
/// their command once the scheduler is attached and the pipe is closed.
/// (`std::process::Command` cannot be used: `spawn` waits for the exec.)
fn spawn_jobs(specs: &[JobSpec]) -> Result<(Vec<Job>, i32), String> {
    let mut fds = [0i32; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    let (rd, wr) = (fds[0], fds[1]);
    let mut jobs: Vec<Job> = Vec::new();
    for j in specs {
        let Target::Command(cmd) = &j.target else { continue };
        let cargs: Vec<std::ffi::CString> =
            cmd.iter().map(|a| std::ffi::CString::new(a.as_str()).unwrap_or_default()).collect();
        let mut argv: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        argv.push(std::ptr::null());
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            for j in &jobs {
                unsafe { libc::kill(j.pid, libc::SIGKILL) };
            }
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // The child: only async-signal-safe calls from here on.
            unsafe {
                libc::close(wr);
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, SCHED_EXT, &param);
                let mut b = [0u8; 1];
                loop {
                    let n = libc::read(rd, b.as_mut_ptr() as *mut libc::c_void, 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                libc::execvp(argv[0], argv.as_ptr());
                let msg = b"propshare-scx: cannot execute a job's command\n";
                libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len());
                libc::_exit(127);
            }
        }
        jobs.push(Job {
            name: j.name.clone().unwrap_or_default(),
            weight: j.weight,
            pid,
            done: false,
            cpu_ns: 0,
            status: 0,
        });
    }
    unsafe { libc::close(rd) };
    Ok((jobs, wr))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => return usage_err(e),
    };
    if let Err(e) = kernel_check() {
        eprintln!("propshare-scx: error: {e}");
        return ExitCode::from(1);
    }
    let r = match opts.side {
        Side::Own => own::run(opts),
        Side::Stock => run(opts),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("propshare-scx: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(opts: Opts) -> anyhow::Result<ExitCode> {
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let sched = propshare::registry::build(&opts.scheduler, propshare::scheduler::SchedConfig::new(cpus, opts.quantum))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let job_mode = !opts.jobs.is_empty();
    let mut host = Host::new(sched, cpus, if job_mode { Weights::Fixed } else { Weights::Kernel });
    let (mut jobs, release_fd) =
        if job_mode { spawn_jobs(&opts.jobs).map_err(anyhow::Error::msg)? } else { (Vec::new(), -1) };
    let job_weight: HashMap<i32, u64> = jobs.iter().map(|j| (j.pid, j.weight)).collect();
    // Everything that allocates a lot or starts threads happens before init,
    // which locks memory and forbids mmap.
    let mut latest: HashMap<i32, QueuedTask> = HashMap::with_capacity(4096);
    // The kicker: a normal-class (EEVDF) thread, started before init, that
    // wakes every 50 ms. When our timer wakes this (SCHED_EXT) process, the
    // stock BPF side queues it without waking an idle CPU, so with every CPU
    // idle nothing ran it (or drained our decisions) until the 1 s heartbeat,
    // and the watchdog once ejected us at start-up. Any scheduling event on an
    // idle CPU makes it call ops.dispatch, which drains our decisions and runs
    // us; the kicker's wake-ups are those events. It stays on the fair class:
    // partial mode switches only the calling thread to SCHED_EXT. 50 ms keeps
    // such a stall far below the 5 s watchdog; a 2 ms period cost up to 20
    // points of fairness (each wake-up preempts a running task).
    // Only needed with the stock BPF side.
    let kicker_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kicker = {
        let stop = kicker_stop.clone();
        std::thread::Builder::new()
            .name("pscx-kicker".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let ts = libc::timespec { tv_sec: 0, tv_nsec: KICK_PERIOD as libc::c_long };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
                }
            })
            .map_err(|e| anyhow::anyhow!("cannot start the kicker thread: {e}"))?
    };
    let mut open_object = MaybeUninit::uninit();
    let t_attach = mono_ns();
    let partial = !opts.all_tasks;
    let mut bpf =
        match BpfScheduler::init(&mut open_object, None, 0, partial, false, false, false, opts.quantum, "propshare") {
            Ok(b) => b,
            Err(e) => {
                for j in &jobs {
                    unsafe { libc::kill(j.pid, libc::SIGKILL) };
                }
                return Err(e.context("cannot load the sched_ext BPF scheduler"));
            }
        };
    let attached = mono_ns();
    eprintln!(
        "propshare-scx: {} attached in {} ms on {cpus} CPUs, quantum {} us, {} (t={} ms)",
        opts.scheduler,
        (attached - t_attach) / 1_000_000,
        opts.quantum / 1000,
        if job_mode {
            "jobs"
        } else if partial {
            "every SCHED_EXT task, kernel weights"
        } else {
            "every task, kernel weights"
        },
        attached / 1_000_000
    );
    if release_fd >= 0 {
        unsafe { libc::close(release_fd) };
    }
    let start = mono_ns();
    let cpu0 = own_cpu_ns();
    let mut seq: u64 = 0;
    let mut last_sweep = start;
    let mut error: Option<String> = None;
    let mut loops: u64 = 0;

    while !bpf.exited() {
        loops += 1;
        let now = mono_ns();
        if let Some(d) = opts.duration {
            if now - start >= d {
                break;
            }
        }
        if let Some(p) = opts.panic_after {
            if now - start >= p {
                panic!("propshare-scx: panic requested by --panic-after (a test of the hand-back)");
            }
        }
        loop {
            match bpf.dequeue_task() {
                Ok(Some(t)) => {
                    let m = Msg {
                        pid: t.pid,
                        flags: t.flags,
                        start_ts: t.start_ts,
                        stop_ts: t.stop_ts,
                        exec_runtime: t.exec_runtime,
                        weight: t.weight,
                    };
                    let r = host.on_msg(now, &m, |pid| {
                        let mut p = pid;
                        for _ in 0..8 {
                            if let Some(w) = job_weight.get(&p) {
                                return *w;
                            }
                            match tgid_ppid(p) {
                                Some((tg, _)) if tg != p && job_weight.contains_key(&tg) => return job_weight[&tg],
                                Some((_, pp)) if pp > 1 => p = pp,
                                _ => break,
                            }
                        }
                        // Not ours: a SCHED_EXT task of someone else; nice 0 = weight 1.
                        (t.weight / 100).max(1)
                    });
                    if let Err(e) = r {
                        error = Some(format!("scheduler refused an event: {e}"));
                    }
                    latest.insert(t.pid, t);
                }
                Ok(None) => break,
                Err(e) => {
                    error = Some(format!("reading the BPF ring buffer failed: {e}"));
                    break;
                }
            }
        }
        if error.is_some() {
            break;
        }
        // Probe decided tasks that may have blocked or exited.
        // Probe eagerly only when fewer tasks run in the kernel than the model
        // has decided (one blocked, exited, or has not started yet).
        let occupied = host.slots().iter().flatten().count() as u64;
        let eager = *bpf.nr_running_mut() < occupied;
        for (k, pid) in host.due_probes(now, eager) {
            let base = host.slots()[k].and_then(|s| s.sum_at_dispatch);
            let since = host.slots()[k].map(|s| s.since).unwrap_or(now);
            let p = match proc_state(pid) {
                None | Some(b'Z') | Some(b'X') => Probe::Gone { ran: (now - since).min(opts.quantum) },
                Some(b'R') => Probe::Runnable,
                Some(_) => {
                    let ran = match (base, sum_exec(pid)) {
                        (Some(b), Some(s)) => s.saturating_sub(b),
                        _ => (now - since).min(opts.quantum),
                    };
                    Probe::Sleeping { ran }
                }
            };
            if let Err(e) = host.on_probe(now, k, pid, p) {
                error = Some(format!("scheduler refused an event: {e}"));
            }
        }
        // Reap jobs.
        if job_mode {
            loop {
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let r =
                    unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
                let pid = unsafe { info.si_pid() };
                if r != 0 || pid == 0 {
                    break;
                }
                let cpu = sum_exec(pid).unwrap_or(0);
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
                let ran = host
                    .slots()
                    .iter()
                    .flatten()
                    .find(|s| s.pid == pid)
                    .and_then(|s| s.sum_at_dispatch)
                    .map(|b| cpu.saturating_sub(b))
                    .unwrap_or(0);
                if let Err(e) = host.on_exit(now, pid, ran) {
                    error = Some(format!("scheduler refused an event: {e}"));
                }
                latest.remove(&pid);
                if let Some(j) = jobs.iter_mut().find(|j| j.pid == pid) {
                    j.done = true;
                    j.cpu_ns = cpu;
                    j.status = status;
                }
            }
            if jobs.iter().all(|j| j.done) {
                break;
            }
        }
        // Sweep blocked tasks that exited without telling us.
        if now - last_sweep >= 1_000_000_000 {
            last_sweep = now;
            for pid in host.blocked() {
                if matches!(proc_state(pid), None | Some(b'Z') | Some(b'X'))
                    && !jobs.iter().any(|j| j.pid == pid && !j.done)
                {
                    let _ = host.on_exit(now, pid, 0);
                    latest.remove(&pid);
                }
            }
        }
        // One decided task per free CPU.
        match host.fill(now, sum_exec) {
            Ok(ds) => {
                for (k, pid, slice) in ds {
                    let Some(t) = latest.get(&pid) else { continue };
                    let mut d = DispatchedTask::new(t);
                    d.cpu = k as i32;
                    d.slice_ns = slice;
                    seq += 1;
                    d.vtime = seq;
                    if bpf.dispatch_task(&d).is_err() {
                        let _ = host.undo_dispatch(now, k, pid);
                    }
                }
            }
            Err(e) => error = Some(format!("scheduler refused an event: {e}")),
        }
        if error.is_some() {
            break;
        }
        // Tell the BPF side how many tasks wait for a CPU, then sleep (never
        // `sched_yield`, which would put this process back in the BPF side's
        // queue ahead of the task just decided for this CPU) until shortly
        // before the earliest slice in the model ends. While we sleep, CPUs
        // run their decided tasks; once we wake we are queued, and the BPF side
        // runs us at the next slice end (with a non-zero count), so the expired
        // task is enqueued to us instead of having its slice refilled.
        let pending = host.pending();
        // Never 0: when our timer wakes us we are queued in the BPF side, and
        // only a non-zero count makes it run us (a 0 would leave us queued
        // while CPUs refill their tasks' slices or idle).
        *bpf.nr_scheduled_mut() = pending.max(1);
        let now2 = mono_ns();
        let free = host.slots().iter().any(|s| s.is_none());
        let sleep = match host.slots().iter().flatten().map(|s| s.since + s.slice).min() {
            _ if free && pending > 0 => 1_000_000,
            Some(end) => end.saturating_sub(now2).saturating_sub(SLEEP_MARGIN),
            None => opts.quantum,
        }
        .clamp(MIN_SLEEP, opts.quantum);
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }

    kicker_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let wall = mono_ns() - start;
    let own = own_cpu_ns().saturating_sub(cpu0);
    let kernel_counters = (
        *bpf.nr_user_dispatches_mut(),
        *bpf.nr_kernel_dispatches_mut(),
        *bpf.nr_cancel_dispatches_mut(),
        *bpf.nr_bounce_dispatches_mut(),
        *bpf.nr_failed_dispatches_mut(),
        *bpf.nr_sched_congested_mut(),
    );
    let exit = bpf.shutdown_and_report();
    let mut code = ExitCode::SUCCESS;
    let mut ejected = None;
    // An exit kind above UNREG_KERN (an error, a stall caught by the watchdog)
    // is an ejection; our own unload on a signal or at the end is not.
    if let Err(e) = exit.and_then(|info| info.report()) {
        eprintln!("propshare-scx: PSCX_EJECTED: the kernel ejected the scheduler: {e:#}");
        ejected = Some(format!("{e:#}"));
        code = ExitCode::from(1);
    }
    if let Some(e) = &error {
        eprintln!("propshare-scx: error: {e}");
        code = ExitCode::from(1);
    }
    if opts.stats || job_mode {
        let s = serde_json::json!({
            "scheduler": opts.scheduler,
            "cpus": cpus,
            "quantum_ns": opts.quantum,
            "wall_ns": wall,
            "ejected": ejected,
            "own_cpu_ns": own,
            "loops": loops,
            "host": host.stats,
            "bpf": {
                "user_dispatches": kernel_counters.0,
                "kernel_dispatches": kernel_counters.1,
                "cancel_dispatches": kernel_counters.2,
                "bounce_dispatches": kernel_counters.3,
                "failed_dispatches": kernel_counters.4,
                "congested": kernel_counters.5,
            },
            "jobs": jobs.iter().map(|j| serde_json::json!({"name": j.name, "pid": j.pid, "weight": j.weight, "cpu_ns": j.cpu_ns, "done": j.done})).collect::<Vec<_>>(),
        });
        eprintln!("PSCX_STATS {s}");
    }
    let _ = kicker.join();
    if job_mode && error.is_none() && ejected.is_none() {
        // Like a shell: the first failing job's status.
        if let Some(j) = jobs.iter().find(|j| j.done && j.status != 0) {
            let st = j.status;
            let c = if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { 128 + libc::WTERMSIG(st) };
            code = ExitCode::from(c.clamp(1, 255) as u8);
        }
    }
    Ok(code)
}
