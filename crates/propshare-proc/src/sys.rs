//! Thin wrappers over the Linux calls the host needs: signals, per-thread
//! affinity, `/proc/<pid>/stat`, pidfds, `perf_event_open` task-clock counters,
//! nice values and the monotonic clock. Nothing here decides anything.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A process id.
pub type Pid = i32;

/// A CPU mask of up to 1024 CPUs, laid out exactly like the kernel's `cpu_set_t`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CpuMask(pub [u64; 16]);

impl CpuMask {
    /// Largest CPU number + 1 a mask can hold.
    pub const CAPACITY: usize = 1024;

    /// The empty mask.
    pub const fn empty() -> CpuMask {
        CpuMask([0; 16])
    }

    /// A mask holding exactly `cpus` (numbers below [`CpuMask::CAPACITY`]).
    pub fn of(cpus: &[usize]) -> CpuMask {
        let mut m = CpuMask::empty();
        for &c in cpus {
            m.set(c);
        }
        m
    }

    /// Add CPU `c`.
    pub fn set(&mut self, c: usize) {
        if c < Self::CAPACITY {
            self.0[c / 64] |= 1 << (c % 64);
        }
    }

    /// Whether CPU `c` is in the mask.
    pub fn has(&self, c: usize) -> bool {
        c < Self::CAPACITY && self.0[c / 64] & (1 << (c % 64)) != 0
    }

    /// The CPUs in the mask, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        (0..Self::CAPACITY).filter(|&c| self.has(c)).collect()
    }

    /// Whether no CPU is set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

fn errno() -> io::Error {
    io::Error::last_os_error()
}

/// Send `sig` to process `pid` (or to process group `-pid` if `pid` is negative).
pub fn kill(pid: Pid, sig: i32) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Our own pid.
pub fn getpid() -> Pid {
    // SAFETY: always safe.
    unsafe { libc::getpid() }
}

/// Our real uid.
pub fn getuid() -> u32 {
    // SAFETY: always safe.
    unsafe { libc::getuid() }
}

/// Our effective uid.
pub fn geteuid() -> u32 {
    // SAFETY: always safe.
    unsafe { libc::geteuid() }
}

/// The affinity mask of thread `tid` (0: the caller).
pub fn get_affinity(tid: Pid) -> io::Result<CpuMask> {
    let mut m = CpuMask::empty();
    // SAFETY: CpuMask has the size and layout of cpu_set_t.
    let r = unsafe {
        libc::sched_getaffinity(tid, std::mem::size_of::<CpuMask>(), &mut m as *mut CpuMask as *mut libc::cpu_set_t)
    };
    if r == 0 {
        Ok(m)
    } else {
        Err(errno())
    }
}

/// Set the affinity mask of thread `tid`.
pub fn set_affinity(tid: Pid, m: &CpuMask) -> io::Result<()> {
    // SAFETY: CpuMask has the size and layout of cpu_set_t.
    let r = unsafe {
        libc::sched_setaffinity(tid, std::mem::size_of::<CpuMask>(), m as *const CpuMask as *const libc::cpu_set_t)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// The thread ids of process `pid` (from `/proc/<pid>/task`).
pub fn threads(pid: Pid) -> io::Result<Vec<Pid>> {
    let mut out = Vec::new();
    for e in fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(t) = e?.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(t);
        }
    }
    Ok(out)
}

/// The children of process `pid`, of every thread (`/proc/<pid>/task/*/children`).
pub fn children(pid: Pid) -> Vec<Pid> {
    let mut out = Vec::new();
    for t in threads(pid).unwrap_or_default() {
        let s = fs::read_to_string(format!("/proc/{pid}/task/{t}/children")).unwrap_or_default();
        out.extend(s.split_whitespace().filter_map(|w| w.parse::<Pid>().ok()));
    }
    out
}

/// The processes in process group `pgrp` (a scan of `/proc`).
pub fn group_members(pgrp: Pid) -> Vec<Pid> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<Pid>().ok())
        .filter(|&p| proc_stat(p).is_ok_and(|s| s.pgrp == pgrp))
        .collect()
}

/// Send `sig` to the process behind a pidfd (never to a recycled PID).
pub fn pidfd_signal(fd: &OwnedFd, sig: i32) -> io::Result<()> {
    // SAFETY: a valid pidfd; no info struct.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), sig, 0usize, 0u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Set the affinity of every thread of `pid`. Threads that vanish meanwhile are
/// ignored; the call fails only if the process itself is gone or refuses.
pub fn set_process_affinity(pid: Pid, m: &CpuMask) -> io::Result<()> {
    let tids = threads(pid)?;
    let mut first_err = None;
    for t in tids {
        if let Err(e) = set_affinity(t, m) {
            if e.raw_os_error() != Some(libc::ESRCH) && first_err.is_none() {
                first_err = Some(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The fields of `/proc/<pid>/stat` the host uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// The state letter: R running, S sleeping, D disk sleep, T stopped, Z zombie...
    pub state: char,
    /// The parent's pid.
    pub ppid: Pid,
    /// The process group.
    pub pgrp: Pid,
    /// Kernel flags (PF_KTHREAD = 0x00200000).
    pub flags: u64,
    /// The CPU it last ran on.
    pub processor: usize,
}

/// Parse `/proc/<pid>/stat` (the process's main thread).
pub fn proc_stat(pid: Pid) -> io::Result<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

fn parse_stat(s: &str) -> io::Result<ProcStat> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc stat line");
    let rest = &s[s.rfind(')').ok_or_else(bad)? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state), so field n is f[n - 3].
    if f.len() < 37 {
        return Err(bad());
    }
    Ok(ProcStat {
        state: f[0].chars().next().ok_or_else(bad)?,
        ppid: f[1].parse().map_err(|_| bad())?,
        pgrp: f[2].parse().map_err(|_| bad())?,
        flags: f[6].parse().map_err(|_| bad())?,
        processor: f[36].parse().map_err(|_| bad())?,
    })
}

/// The state letter of `pid`, or `None` if it is gone.
pub fn state(pid: Pid) -> Option<char> {
    proc_stat(pid).ok().map(|s| s.state)
}

/// Whether any thread of `pid` is in state R (running or runnable). Looks at
/// the main thread first (one file), and at the others only if it is not R.
pub fn any_thread_runnable(pid: Pid) -> bool {
    if state(pid) == Some('R') {
        return true;
    }
    match threads(pid) {
        Ok(tids) => tids.iter().filter(|&&t| t != pid).any(|t| {
            fs::read_to_string(format!("/proc/{pid}/task/{t}/stat"))
                .ok()
                .and_then(|s| parse_stat(&s).ok())
                .is_some_and(|s| s.state == 'R')
        }),
        Err(_) => false,
    }
}

/// A pidfd for `pid` (readable once the process has exited).
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; on success the kernel returns a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        Err(errno())
    } else {
        // SAFETY: fd is a fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

/// Whether a pidfd reports that its process exited (non-blocking).
pub fn pidfd_exited(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

/// Monotonic clock in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (user + system) of this process so far, in ns.
pub fn self_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPUs that are online (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> io::Result<CpuMask> {
    let s = fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(s.trim()).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Parse a CPU list such as `0-3,6`; a CPU given twice is an error.
pub fn parse_cpu_list(s: &str) -> Result<CpuMask, String> {
    let mut m = CpuMask::empty();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |x: &str| x.trim().parse::<usize>().map_err(|_| format!("bad CPU number {x:?} in {s:?}"));
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if a > b || b >= CpuMask::CAPACITY {
            return Err(format!("bad CPU range {part:?}"));
        }
        for c in a..=b {
            if m.has(c) {
                return Err(format!("CPU {c} is listed twice in {s:?}"));
            }
            m.set(c);
        }
    }
    if m.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    Ok(m)
}

/// Format a mask as a CPU list (`0-1,3`).
pub fn format_cpu_list(m: &CpuMask) -> String {
    let cpus = m.cpus();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

// ---------------------------------------------------------------- perf

/// `struct perf_event_attr`, first version (64 bytes), enough for a task clock.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// attr.flags bit 1: counts threads and children created after opening.
const ATTR_INHERIT: u64 = 1 << 1;

/// A task-clock counter (ns of CPU time) on one thread, inherited by the
/// threads and children it creates afterwards.
pub fn perf_task_clock(tid: Pid) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        flags: ATTR_INHERIT,
        ..Default::default()
    };
    // SAFETY: attr is a valid perf_event_attr of the size it declares.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC)
    };
    if fd < 0 {
        Err(errno())
    } else {
        // SAFETY: fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

/// Read a counter opened by [`perf_task_clock`].
pub fn perf_read(fd: &OwnedFd) -> io::Result<u64> {
    let mut v: u64 = 0;
    // SAFETY: reading 8 bytes into a u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    if n == 8 {
        Ok(v)
    } else if n < 0 {
        Err(errno())
    } else {
        Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short perf read"))
    }
}

/// Sum of the first field (ns on CPU) of `/proc/<pid>/task/*/schedstat`.
pub fn schedstat_ns(pid: Pid) -> io::Result<u64> {
    let mut sum = 0u64;
    for t in threads(pid)? {
        if let Ok(s) = fs::read_to_string(format!("/proc/{pid}/task/{t}/schedstat")) {
            sum += s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    Ok(sum)
}

// ---------------------------------------------------------------- nice

/// The kernel's `sched_prio_to_weight` table (kernel/sched/core.c), nice -20..=19.
pub const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501,
    1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

/// The nice value of thread `tid`.
pub fn get_nice(tid: Pid) -> io::Result<i32> {
    // SAFETY: clearing errno then calling getpriority, as its manual asks.
    unsafe {
        *libc::__errno_location() = 0;
        let v = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        if v == -1 && *libc::__errno_location() != 0 {
            return Err(errno());
        }
        Ok(v)
    }
}

/// Set the nice value of thread `tid`.
pub fn set_nice(tid: Pid, nice: i32) -> io::Result<()> {
    // SAFETY: no memory involved.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        let m = parse_cpu_list("0-2,5").unwrap();
        assert_eq!(m.cpus(), vec![0, 1, 2, 5]);
        assert_eq!(format_cpu_list(&m), "0-2,5");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("5000").is_err());
    }

    #[test]
    fn stat_line_with_spaces_in_name() {
        let line =
            "42 (a b) c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 5 1 1 1 1 1 1 1 1 1 1 1 1 1 0 0 17 1 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.ppid, s.pgrp, s.processor), ('S', 1, 42, 1));
    }

    #[test]
    fn our_own_stat_and_affinity() {
        let s = proc_stat(getpid()).unwrap();
        assert!(s.state == 'R' || s.state == 'S');
        assert!(!get_affinity(0).unwrap().is_empty());
        assert!(!threads(getpid()).unwrap().is_empty());
    }
}
