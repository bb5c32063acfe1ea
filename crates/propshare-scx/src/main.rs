// SPDX-License-Identifier: GPL-2.0-only
//! propshare-scx: a propshare scheduler as a real Linux kernel scheduler,
//! through sched_ext. The default BPF side is our own (`src/pscx`, driven by
//! `own.rs` and `own_host.rs`); `--bpf stock` uses scx_rustland_core's, with
//! the inference of `host.rs` and the loop in `stock.rs`. Both hosts share
//! `clients.rs` (pids and client ids, picks) and `jobs.rs` (jobs); this file
//! holds the command line and the small `/proc` and clock helpers.
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
mod clients;
mod host;
mod jobs;
mod own;
mod own_host;
#[allow(dead_code, clippy::all)]
#[rustfmt::skip]
mod pscx_skel;
#[allow(dead_code, clippy::all)]
mod pscx_intf;
mod stock;

use propshare_proc::spec::{assign_names, parse_jobs, read_jobs_file, JobSpec, Target};
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

impl Opts {
    /// The start-up line, once the BPF side is attached: `side` names a
    /// BPF side other than the default; with `clock`, the attach time
    /// `attached` (CLOCK_MONOTONIC) ends the line.
    fn say_attached(&self, cpus: usize, t_attach: u64, attached: u64, side: &str, clock: bool) {
        let at = if clock { format!(" (t={} ms)", attached / 1_000_000) } else { String::new() };
        eprintln!(
            "propshare-scx: {} attached{side} in {} ms on {cpus} CPUs, quantum {} us, {}{at}",
            self.scheduler,
            (attached - t_attach) / 1_000_000,
            self.quantum / 1000,
            self.mode(),
        );
    }

    /// What the scheduler takes charge of, for the start-up message: the
    /// given jobs, or every task (with `--all-tasks`) or every SCHED_EXT
    /// task, weighed by the kernel.
    fn mode(&self) -> &'static str {
        if !self.jobs.is_empty() {
            "jobs"
        } else if self.all_tasks {
            "every task, kernel weights"
        } else {
            "every SCHED_EXT task, kernel weights"
        }
    }
}

/// How a run ends: an ejection by the kernel (`report`, the BPF side's exit
/// info: an error for an exit kind above UNREG_KERN) and an error of the host
/// (`error`) are reported and each makes it exit 1. Returns the exit code and
/// the ejection, for the stats line.
fn ending(report: anyhow::Result<()>, error: &Option<String>) -> (ExitCode, Option<String>) {
    let mut code = ExitCode::SUCCESS;
    let mut ejected = None;
    if let Err(e) = report {
        eprintln!("propshare-scx: PSCX_EJECTED: the kernel ejected the scheduler: {e:#}");
        ejected = Some(format!("{e:#}"));
        code = ExitCode::from(1);
    }
    if let Some(e) = error {
        eprintln!("propshare-scx: error: {e}");
        code = ExitCode::from(1);
    }
    (code, ejected)
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
            "--all-tasks" | "--stats" | "--cgroups" | "--exact-slices" => {
                let flag = match a {
                    "--all-tasks" => &mut o.all_tasks,
                    "--stats" => &mut o.stats,
                    "--cgroups" => &mut o.cgroups,
                    _ => &mut o.exact_slices,
                };
                *flag = true;
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
    jobs::check_jobs(&o.jobs)?;
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
        Side::Stock => stock::run(opts),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("propshare-scx: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
