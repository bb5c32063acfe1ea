// SPDX-License-Identifier: GPL-2.0-only
//! Jobs, for both BPF sides' loops (`own.rs`, `stock.rs`): checking and
//! starting them (held at a pipe until the scheduler is attached), the
//! weight of any task of a job (a thread or child has its job's weight),
//! reaping them, and their share of the exit status and statistics.

use crate::{sum_exec, tgid_ppid};
use propshare_proc::spec::{JobSpec, Target};
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

/// One started job.
pub struct Job {
    /// Its name (`-n`, or derived from its command).
    pub name: String,
    /// Its weight.
    pub weight: u64,
    /// Its pid.
    pub pid: i32,
    /// Reaped.
    pub done: bool,
    /// Its CPU time when it was reaped (ns).
    pub cpu_ns: u64,
    /// Its wait status.
    pub status: i32,
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
pub fn check_jobs(specs: &[JobSpec]) -> Result<(), String> {
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
pub fn spawn_jobs(specs: &[JobSpec]) -> Result<(Vec<Job>, i32), String> {
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
                libc::sched_setscheduler(0, crate::SCHED_EXT, &param);
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

/// Kill every job (the scheduler could not start, or failed).
pub fn kill_all(jobs: &[Job]) {
    for j in jobs {
        unsafe { libc::kill(j.pid, libc::SIGKILL) };
    }
}

/// Reap every job that has finished: record its CPU time (read before it is
/// reaped) and status, and tell the host through `exited(pid, cpu_ns)`.
/// Stops at the first error `exited` returns.
pub fn reap<E>(jobs: &mut [Job], mut exited: impl FnMut(i32, u64) -> Result<(), E>) -> Result<(), E> {
    loop {
        // WNOWAIT: the job's /proc entry stays until its CPU time is read.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
        let pid = unsafe { info.si_pid() };
        if r != 0 || pid == 0 {
            return Ok(());
        }
        let cpu = sum_exec(pid).unwrap_or(0);
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if let Some(j) = jobs.iter_mut().find(|j| j.pid == pid) {
            j.done = true;
            j.cpu_ns = cpu;
            j.status = status;
        }
        exited(pid, cpu)?;
    }
}

/// Whether every job has been reaped.
pub fn all_done(jobs: &[Job]) -> bool {
    jobs.iter().all(|j| j.done)
}

/// The weight of each task by its job: a job's own pid, or a thread or
/// descendant of it.
pub struct JobWeights(HashMap<i32, u64>);

impl JobWeights {
    /// The weights of `jobs`.
    pub fn new(jobs: &[Job]) -> JobWeights {
        JobWeights(jobs.iter().map(|j| (j.pid, j.weight)).collect())
    }

    /// The weight of task `pid`: its job's, found through its thread group
    /// and up to 8 parents (`/proc/PID/status`); a SCHED_EXT task that is no
    /// job's gets its kernel weight scaled to nice 0 = 1.
    pub fn of(&self, pid: i32, kernel_weight: u64) -> u64 {
        let mut p = pid;
        for _ in 0..8 {
            if let Some(w) = self.0.get(&p) {
                return *w;
            }
            match tgid_ppid(p) {
                Some((tg, _)) if tg != p && self.0.contains_key(&tg) => return self.0[&tg],
                Some((_, pp)) if pp > 1 => p = pp,
                _ => break,
            }
        }
        (kernel_weight / 100).max(1)
    }
}

/// The jobs for the stats line.
pub fn json(jobs: &[Job]) -> Vec<serde_json::Value> {
    jobs.iter()
        .map(|j| serde_json::json!({"name": j.name, "pid": j.pid, "weight": j.weight, "cpu_ns": j.cpu_ns, "done": j.done}))
        .collect()
}

/// Like a shell: the first failing job's status, if any failed.
pub fn failed_status(jobs: &[Job]) -> Option<ExitCode> {
    let st = jobs.iter().find(|j| j.done && j.status != 0)?.status;
    let c = if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { 128 + libc::WTERMSIG(st) };
    Some(ExitCode::from(c.clamp(1, 255) as u8))
}
