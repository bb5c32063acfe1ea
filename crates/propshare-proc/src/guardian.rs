//! The guardian: a forked watchdog that resumes every managed process if the
//! scheduler dies without cleaning up (SIGKILL, abort, OOM kill).
//!
//! The scheduler forks the guardian before it touches any process and keeps
//! the write end of a pipe to it (close-on-exec, so no job inherits it). It
//! tells the guardian about every process before it first stops it (`add`,
//! with the affinity to restore and what to do with it, [`Release`]) and when
//! it lets one go (`remove`). The guardian blocks in `read`; when the pipe
//! reaches end-of-file, that is, when the scheduler is gone, it ends the jobs
//! exactly as a clean exit does: it restores the affinity of every thread of
//! every process still on its list and sends it SIGCONT (SIGSTOP to one the
//! user had stopped before the run), then sends SIGTERM to the process groups
//! of the jobs the scheduler started, in the order they were added, gives
//! them [`TERM_GRACE_NS`], SIGKILLs what is left, and exits. Attached
//! processes keep running. A clean shutdown first sends `disarm` (the
//! scheduler has released everything itself), then closes the pipe and reaps
//! the guardian.
//!
//! # No SIGHUP for stopped jobs
//!
//! Each started job has its own process group, whose only link to the
//! session was its parent, the scheduler. When the scheduler dies, a group
//! left with no member whose parent is in another group of the same session
//! is *orphaned*, and the kernel sends it SIGHUP then SIGCONT if any member is
//! stopped: jobs stopped at that moment would die of SIGHUP. So for every
//! started job the guardian forks an *anchor*, a child that joins the job's
//! group and sleeps: its parent (the guardian) is in the scheduler's group
//! and session, so the group is never orphaned while the guardian lives. An
//! anchor ignores every catchable signal (the group's SIGTERM included), dies
//! with the guardian (`PR_SET_PDEATHSIG`), and is killed and reaped by the
//! guardian when its job is removed, when the guardian is disarmed, and after
//! the jobs have ended.
//!
//! The scheduler watches the guardian's pidfd: a guardian that dies ends the
//! run cleanly (nothing could rescue the jobs any more).
//!
//! The guardian is forked from a possibly multi-threaded process and never
//! calls `exec`, so after `fork` it uses only raw system calls on memory
//! allocated before the fork: no allocation, no locks, no panics. It ignores
//! the terminal's signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP) so that a
//! Ctrl-C that kills the scheduler does not also kill its rescuer, and closes
//! every inherited descriptor but the pipe and stderr.
//!
//! Records are fixed-size (152 bytes, below `PIPE_BUF`), so each write is atomic.

use crate::sys::{CpuMask, Pid};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const OP_ADD: u32 = 1;
const OP_REMOVE: u32 = 2;
const OP_DISARM: u32 = 3;

const FLAG_TERMINATE: u32 = 1;
const FLAG_LEAVE_STOPPED: u32 = 2;

/// How long started jobs get after SIGTERM before SIGKILL (as in a clean exit).
pub const TERM_GRACE_NS: u64 = 1_000_000_000;

#[repr(C)]
#[derive(Clone, Copy)]
struct Record {
    op: u32,
    pid: i32,
    /// Process group to signal as well (0: none); it gets an anchor.
    group: i32,
    flags: u32,
    mask: CpuMask,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    pid: i32,
    group: i32,
    pidfd: i32,
    flags: u32,
    /// The anchor keeping `group` from being orphaned (0: none).
    anchor: i32,
    mask: CpuMask,
}

/// The most processes one guardian can watch.
pub const CAPACITY: usize = 4096;

/// What the guardian does with a process if the scheduler dies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Release {
    /// A job we started: end it (SIGTERM to its group, SIGKILL after the grace).
    pub terminate: bool,
    /// The user had it stopped before the run: leave it stopped (SIGSTOP, not SIGCONT).
    pub leave_stopped: bool,
}

/// Handle to a running guardian.
pub struct Guardian {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    tx: Option<OwnedFd>,
    watched: usize,
}

impl Guardian {
    /// Fork the guardian.
    pub fn spawn() -> io::Result<Guardian> {
        let mut fds = [0i32; 2];
        // SAFETY: valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptors we own.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // The table lives in memory allocated before the fork.
        let mut table: Vec<Entry> = Vec::with_capacity(CAPACITY);
        let table_ptr = table.as_mut_ptr();
        // SAFETY: fork; the child only runs `guardian_main`, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: in the child; never returns.
            unsafe { guardian_main(rx.as_raw_fd(), tx.as_raw_fd(), table_ptr) }
        }
        drop(rx);
        drop(table);
        let pidfd = crate::sys::pidfd_open(pid).ok();
        Ok(Guardian { pid, pidfd, tx: Some(tx), watched: 0 })
    }

    /// The guardian's pid.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Its pidfd (readable once it has exited), to poll.
    pub fn pidfd(&self) -> Option<&OwnedFd> {
        self.pidfd.as_ref()
    }

    /// Whether the guardian has died (it never exits on its own while armed).
    pub fn died(&self) -> bool {
        match &self.pidfd {
            Some(fd) => crate::sys::pidfd_exited(fd),
            None => crate::sys::state(self.pid).is_none_or(|s| s == 'Z' || s == 'X'),
        }
    }

    fn send(&mut self, rec: Record) -> io::Result<()> {
        let Some(tx) = &self.tx else { return Err(io::Error::other("guardian already closed")) };
        let size = std::mem::size_of::<Record>();
        loop {
            // SAFETY: writing a plain-old-data record.
            let n = unsafe { libc::write(tx.as_raw_fd(), &rec as *const Record as *const libc::c_void, size) };
            if n == size as isize {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if n < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(if n < 0 { e } else { io::Error::other("short write to guardian") });
        }
    }

    /// Watch `pid` (and its process group `group`, if any, which gets an
    /// anchor): if the scheduler dies, restore `mask` on all its threads,
    /// SIGCONT it (or SIGSTOP, see [`Release`]) and end it if asked.
    pub fn add(&mut self, pid: Pid, group: Option<Pid>, mask: CpuMask, how: Release) -> io::Result<()> {
        if self.watched >= CAPACITY {
            return Err(io::Error::other(format!("the guardian watches at most {CAPACITY} processes")));
        }
        let flags =
            if how.terminate { FLAG_TERMINATE } else { 0 } | if how.leave_stopped { FLAG_LEAVE_STOPPED } else { 0 };
        self.send(Record { op: OP_ADD, pid, group: group.unwrap_or(0), flags, mask })?;
        self.watched += 1;
        Ok(())
    }

    /// Stop watching `pid`.
    pub fn remove(&mut self, pid: Pid) -> io::Result<()> {
        self.send(Record { op: OP_REMOVE, pid, group: 0, flags: 0, mask: CpuMask::empty() })?;
        self.watched = self.watched.saturating_sub(1);
        Ok(())
    }

    /// Clean shutdown: the scheduler has resumed everything; the guardian exits
    /// without touching any process. Reaps it.
    pub fn disarm(mut self) -> io::Result<()> {
        let r = self.send(Record { op: OP_DISARM, pid: 0, group: 0, flags: 0, mask: CpuMask::empty() });
        self.close_and_reap();
        r
    }

    fn close_and_reap(&mut self) {
        if self.tx.take().is_some() {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }
}

impl Drop for Guardian {
    /// Without `disarm`, closing the pipe makes the guardian resume everything
    /// it still watches (the same as if we had died).
    fn drop(&mut self) {
        self.close_and_reap();
    }
}

/// The guardian process. Async-signal-safe: raw system calls only.
unsafe fn guardian_main(rx: i32, tx: i32, table: *mut Entry) -> ! {
    libc::close(tx);
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGPIPE,
    ] {
        libc::signal(sig, libc::SIG_IGN);
    }
    // Unblock everything we might have inherited blocked (nothing needs it here).
    let name = b"propshare-guard\0";
    libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    // Close every inherited descriptor but the pipe and stderr; stdin/stdout to /dev/null.
    libc::syscall(libc::SYS_close_range, 3u32, (rx - 1) as u32, 0u32);
    libc::syscall(libc::SYS_close_range, (rx + 1) as u32, u32::MAX, 0u32);
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if null >= 0 {
        libc::dup2(null, 0);
        libc::dup2(null, 1);
        if null > 2 && null != rx {
            libc::close(null);
        }
    }
    let mut len = 0usize;
    let mut armed = true;
    let size = std::mem::size_of::<Record>();
    loop {
        let mut rec = std::mem::MaybeUninit::<Record>::zeroed();
        let mut got = 0usize;
        let eof = loop {
            let n = libc::read(rx, (rec.as_mut_ptr() as *mut u8).add(got) as *mut libc::c_void, size - got);
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break true;
            }
            if n == 0 {
                break true;
            }
            got += n as usize;
            if got == size {
                break false;
            }
        };
        if eof {
            break;
        }
        let rec = rec.assume_init();
        match rec.op {
            OP_ADD if len < CAPACITY => {
                let pidfd = libc::syscall(libc::SYS_pidfd_open, rec.pid, 0) as i32;
                let anchor = if rec.group > 0 { spawn_anchor(rec.group) } else { 0 };
                table.add(len).write(Entry {
                    pid: rec.pid,
                    group: rec.group,
                    pidfd,
                    flags: rec.flags,
                    anchor,
                    mask: rec.mask,
                });
                len += 1;
            }
            OP_REMOVE => {
                let mut i = 0;
                while i < len {
                    if (*table.add(i)).pid == rec.pid {
                        let e = *table.add(i);
                        if e.pidfd >= 0 {
                            libc::close(e.pidfd);
                        }
                        end_anchor(e.anchor);
                        len -= 1;
                        *table.add(i) = *table.add(len);
                    } else {
                        i += 1;
                    }
                }
            }
            OP_DISARM => armed = false,
            _ => {}
        }
    }
    if armed {
        release(table, len);
    }
    for i in 0..len {
        end_anchor((*table.add(i)).anchor);
    }
    libc::_exit(0)
}

/// What a clean exit does, for the processes in `table[..len]`: resume (or
/// leave stopped) and unpin every one, then end the started ones in order.
unsafe fn release(table: *mut Entry, len: usize) {
    let signal = |e: &Entry, sig: i32| {
        let sent = e.pidfd >= 0 && libc::syscall(libc::SYS_pidfd_send_signal, e.pidfd, sig, 0usize, 0u32) == 0;
        if !sent && e.pidfd < 0 {
            libc::kill(e.pid, sig);
        }
        if e.group > 0 {
            libc::kill(-e.group, sig);
        }
    };
    for i in 0..len {
        let e = &*table.add(i);
        restore_threads(e.pid, &e.mask);
        signal(e, if e.flags & FLAG_LEAVE_STOPPED != 0 { libc::SIGSTOP } else { libc::SIGCONT });
    }
    let mut any = false;
    for i in 0..len {
        let e = &*table.add(i);
        if e.flags & FLAG_TERMINATE != 0 {
            signal(e, libc::SIGTERM);
            any = true;
        }
    }
    if !any {
        return;
    }
    let deadline = now_ns() + TERM_GRACE_NS;
    loop {
        let mut left = false;
        for i in 0..len {
            let e = &*table.add(i);
            if e.flags & FLAG_TERMINATE != 0 && !exited(e) {
                left = true;
            }
        }
        if !left {
            break;
        }
        if now_ns() > deadline {
            for i in 0..len {
                let e = &*table.add(i);
                if e.flags & FLAG_TERMINATE != 0 && !exited(e) {
                    signal(e, libc::SIGKILL);
                }
            }
            break;
        }
        let ts = libc::timespec { tv_sec: 0, tv_nsec: 2_000_000 };
        libc::nanosleep(&ts, std::ptr::null_mut());
    }
    // What is left of their groups (children that outlived the leader) goes too.
    for i in 0..len {
        let e = &*table.add(i);
        if e.flags & FLAG_TERMINATE != 0 && e.group > 0 {
            libc::kill(-e.group, libc::SIGCONT);
        }
    }
}

unsafe fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether the watched process has exited (it is not our child: its pidfd, or kill(pid, 0)).
unsafe fn exited(e: &Entry) -> bool {
    if e.pidfd >= 0 {
        let mut p = libc::pollfd { fd: e.pidfd, events: libc::POLLIN, revents: 0 };
        return libc::poll(&mut p, 1, 0) > 0;
    }
    libc::kill(e.pid, 0) != 0
}

/// Fork an anchor into process group `group` (see the module doc); its pid, or 0.
unsafe fn spawn_anchor(group: i32) -> i32 {
    let parent = libc::getpid();
    let pid = libc::fork();
    if pid == 0 {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP && sig != libc::SIGCONT && sig != libc::SIGCHLD {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
        let name = b"propshare-anchor\0";
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
        libc::setpgid(0, group);
        loop {
            libc::pause();
        }
    }
    if pid < 0 {
        return 0;
    }
    // Both sides set the group, so it is set before either goes on.
    if libc::setpgid(pid, group) != 0 {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
        return 0;
    }
    pid
}

unsafe fn end_anchor(anchor: i32) {
    if anchor > 0 {
        libc::kill(anchor, libc::SIGKILL);
        libc::waitpid(anchor, std::ptr::null_mut(), 0);
    }
}

/// Write `n` in decimal into `buf` at `at`; returns the new end.
unsafe fn put_num(buf: &mut [u8], mut at: usize, n: i32) -> usize {
    let mut digits = [0u8; 12];
    let mut k = 0;
    let mut v = n.unsigned_abs();
    loop {
        digits[k] = b'0' + (v % 10) as u8;
        k += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while k > 0 {
        k -= 1;
        buf[at] = digits[k];
        at += 1;
    }
    at
}

/// Set `mask` on every thread of `pid`, reading `/proc/<pid>/task` with getdents64.
unsafe fn restore_threads(pid: i32, mask: &CpuMask) {
    let mut path = [0u8; 64];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut at = put_num(&mut path, prefix.len(), pid);
    for &b in b"/task" {
        path[at] = b;
        at += 1;
    }
    path[at] = 0;
    let dir = libc::open(path.as_ptr() as *const libc::c_char, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
    let set = |tid: i32| {
        libc::sched_setaffinity(tid, std::mem::size_of::<CpuMask>(), mask as *const CpuMask as *const libc::cpu_set_t);
    };
    if dir < 0 {
        set(pid);
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
        if n <= 0 {
            break;
        }
        let mut off = 0usize;
        while off < n as usize {
            // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            let mut tid: i32 = 0;
            let mut ok = false;
            let mut p = off + 19;
            while p < off + reclen && buf[p] != 0 {
                let c = buf[p];
                if c.is_ascii_digit() {
                    tid = tid.wrapping_mul(10).wrapping_add((c - b'0') as i32);
                    ok = true;
                } else {
                    ok = false;
                    break;
                }
                p += 1;
            }
            if ok {
                set(tid);
            }
            off += reclen;
        }
    }
    libc::close(dir);
}
