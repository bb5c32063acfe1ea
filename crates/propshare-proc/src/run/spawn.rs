//! Starting and attaching jobs: find and fork a command stopped before its
//! exec ([`spawn_stopped`]), or check that a running process may be managed
//! ([`check_attachable`]); then [`Controller::add_job`] makes it a job.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use propshare::{ClientId, Weight};

use super::controller::Controller;
use super::job::{Job, St};
use super::Mode;
use crate::error::ProcError;
use crate::guardian::{Guardian, Release};
use crate::metrics::Change;
use crate::spec::{JobSpec, Target};
use crate::sys::{self, Pid};

/// `PF_KTHREAD` in `/proc/<pid>/stat`'s flags: a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;
/// How far up the parent chain an attached PID is looked for (a cycle guard).
const MAX_ANCESTORS: u32 = 4096;
/// After SIGSTOP, an attached process is polled this many times, this far
/// apart, until it shows as stopped (so its thread list is final).
const ATTACH_STOP_POLLS: u32 = 200;
const ATTACH_STOP_POLL: std::time::Duration = std::time::Duration::from_micros(500);

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
pub(super) fn spawn_stopped(
    prog: &Path,
    argv: &[String],
    nice: Option<i32>,
    guardian: &mut Guardian,
) -> Result<Pid, ProcError> {
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
    let how = Release { terminate: true, leave_stopped: false };
    guardian.add(pid, Some(pid), mask, how).map_err(|e| ProcError::io("telling the guardian", e))?;
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
pub(super) fn check_attachable(pid: Pid, guardian_pid: Pid, managed: &[Pid]) -> Result<sys::ProcStat, ProcError> {
    let me = sys::getpid();
    let st = sys::proc_stat(pid).map_err(|_| ProcError::usage(format!("there is no process with PID {pid}")))?;
    if pid == me || pid == guardian_pid {
        return Err(ProcError::usage(format!("PID {pid} is the scheduler itself")));
    }
    if pid == 1 {
        return Err(ProcError::usage("PID 1 (init) cannot be managed"));
    }
    if st.flags & PF_KTHREAD != 0 {
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
    while p > 1 && hops < MAX_ANCESTORS {
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

impl Controller {
    /// Start or attach one job; it ends stopped (our scheduler) or running (baselines).
    pub(super) fn add_job(&mut self, spec: &JobSpec, nice_hint: Option<i32>) -> Result<usize, ProcError> {
        let name = spec.name.clone().unwrap_or_else(|| spec.default_name());
        let weight = Weight::new(spec.weight).map_err(|e| ProcError::usage(format!("job {name}: {e}")))?;
        let in_group = match (&self.groups, &spec.group) {
            (Some(g), name) => g.id(name.as_deref())?,
            (None, None) => propshare::groups::ROOT,
            (None, Some(g)) => {
                return Err(ProcError::usage(format!("job {name}: group {g:?}, but this run has no groups")))
            }
        };
        let guardian = self.guardian.as_mut().ok_or_else(|| ProcError::usage("run already ended"))?;
        let mut user_stopped = false;
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
                let st = check_attachable(pid, gpid, &managed)?;
                // Stopped by its user before the run: it stays stopped after it.
                user_stopped = st.state == 'T';
                let mask = sys::get_affinity(pid)
                    .map_err(|e| ProcError::usage(format!("PID {pid}: cannot read its affinity: {e}")))?;
                let guardian = self.guardian.as_mut().ok_or_else(|| ProcError::usage("run already ended"))?;
                let how = Release { terminate: false, leave_stopped: user_stopped };
                guardian.add(pid, None, mask, how).map_err(|e| ProcError::io("telling the guardian", e))?;
                if self.mode == Mode::Propshare {
                    sys::kill(pid, libc::SIGSTOP)
                        .map_err(|e| ProcError::usage(format!("PID {pid}: cannot stop it: {e}")))?;
                    // Wait (briefly) until it is stopped, so its thread list is final.
                    for _ in 0..ATTACH_STOP_POLLS {
                        if sys::state(pid).is_none_or(|s| s == 'T') {
                            break;
                        }
                        std::thread::sleep(ATTACH_STOP_POLL);
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
            user_stopped,
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
            kids: Vec::new(),
        });
        self.names.push(name.clone());
        let now = self.now();
        let ci = self.rec.add_client_in(&name, in_group.0);
        debug_assert_eq!(ci, idx);
        self.rec.change(now, idx, Change::Join(weight.get()));
        self.rec.sample(now, idx, 0);
        match self.mode {
            Mode::Propshare => {
                let c = ClientId(idx as u32);
                match (self.sched.as_mut(), self.groups.as_mut()) {
                    (Some(s), Some(g)) => {
                        let effective = g.join(&mut **s, now, c, in_group, weight)?;
                        s.join(now, c, effective)?;
                    }
                    (Some(s), None) => {
                        s.join(now, c, weight)?;
                    }
                    _ => {}
                }
            }
            Mode::BaselineNice | Mode::BaselineShares | Mode::BaselineCgroup2 => self.start_baseline_job(idx)?,
        }
        Ok(idx)
    }
}
