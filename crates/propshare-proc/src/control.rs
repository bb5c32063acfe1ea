//! The control socket: add processes and change weights while a run goes on.
//!
//! `propshare run --control SOCKET` listens on a Unix stream socket. Each
//! line a client sends is one command; each gets one reply line starting with
//! `ok` or `error:` (`list` sends one line per job first). Words are split on
//! whitespace, with '…' and "…" quoting.
//!
//! ```text
//! add -w 2 -n web -- sh -c 'while :; do :; done'   -> ok web
//! add -w 1 -p 1234                                 -> ok pid1234
//! weight web 5                                     -> ok
//! list                                             -> web pid=… weight=5 state=running:1 cpu_ms=…  then ok
//! quit                                             -> ok   (ends the run cleanly)
//! ```
//!
//! From a shell: `echo 'weight web 5' | socat - UNIX-CONNECT:SOCKET` (or `nc -U`),
//! or from Rust with [`request`].
//!
//! # Who may connect, and what one client can cost
//!
//! * The socket is made with mode 0600 whatever the umask: it is bound in a
//!   private directory (mode 0700) beside SOCKET, set to 0600 and checked, then
//!   moved to SOCKET with `renameat2(RENAME_NOREPLACE)` (or `link`, where the
//!   file system has no such rename), so an existing file at SOCKET is never
//!   replaced: the run is refused, naming the path.
//! * Each connection's peer is checked with `SO_PEERCRED`: only root and the
//!   user who started the run (real or effective uid) are served; anyone else
//!   gets one `error:` line and is closed (the mode may have been loosened by
//!   hand, or the directory may be shared).
//! * Connections never block a decision: they are non-blocking and served a
//!   little each round (at most [`MAX_LINE`] bytes read per connection). A line
//!   longer than [`MAX_LINE`] gets an error and the connection is closed
//!   (nothing of it is echoed); at most [`MAX_CONNECTIONS`] are open at once
//!   (more are told so and closed); one idle for [`IDLE_TIMEOUT_NS`] is
//!   closed; a reply is cut at [`MAX_REPLY`] bytes, and a client that does not
//!   read its replies is closed once [`MAX_REPLY`] bytes wait for it.

use crate::error::ProcError;
use crate::spec::split_words;
use crate::sys;
use std::ffi::CString;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest command line a client may send (bytes, newline excluded).
pub const MAX_LINE: usize = 4096;
/// The most client connections open at once.
pub const MAX_CONNECTIONS: usize = 16;
/// A connection that sends nothing and has nothing to read for this long is closed (ns).
pub const IDLE_TIMEOUT_NS: u64 = 10_000_000_000;
/// The longest reply (bytes); also the most output kept for a client that does not read.
pub const MAX_REPLY: usize = 64 * 1024;
/// The longest piece of a client's command quoted back in an error.
const MAX_ECHO: usize = 80;

/// What the controller lets the control socket do.
pub trait Host {
    /// Add a job given in command-line job syntax; returns its name.
    fn add(&mut self, words: &[String]) -> Result<String, ProcError>;
    /// Change a job's weight.
    fn weight(&mut self, name: &str, w: u64) -> Result<(), ProcError>;
    /// One line per job.
    fn list(&mut self) -> Vec<String>;
}

/// One client connection: what it sent that is not yet a whole line, and
/// what is still to be written to it.
struct Conn {
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    last_active: u64,
    /// Close once `output` is written (an error ended it, or `quit`).
    closing: bool,
}

/// A listening control socket (removed when dropped, if it is still ours).
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the socket file we made, so that Drop removes only it.
    ident: (u64, u64),
    /// Users allowed besides root: the real and effective uid of the run.
    uids: [u32; 2],
    conns: Vec<Conn>,
}

fn located(path: &Path, what: impl std::fmt::Display) -> ProcError {
    ProcError::usage(format!("control socket {}: {what}", path.display()))
}

/// Move `from` to `to` unless `to` exists (atomically).
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    let c =
        |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(ErrorKind::InvalidInput));
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: valid C strings; renameat2 only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::ENOSYS) {
        // No RENAME_NOREPLACE here: link refuses an existing target too.
        std::fs::hard_link(from, to)?;
        return std::fs::remove_file(from);
    }
    Err(e)
}

impl ControlServer {
    /// Listen on `path`, mode 0600 whatever the umask; refused if anything
    /// exists at `path` (it is never replaced).
    pub fn bind(path: &Path) -> Result<ControlServer, ProcError> {
        if path.symlink_metadata().is_ok() {
            return Err(located(path, "already exists (remove it if it is a stale socket of a run that died)"));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let file = path.file_name().ok_or_else(|| located(path, "is not a file name"))?;
        let private = parent.join(format!(".{}.{}.tmp", file.to_string_lossy(), std::process::id()));
        std::fs::create_dir(&private)
            .map_err(|e| located(path, format!("cannot create {}: {e}", private.display())))?;
        let made = (|| {
            std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| located(path, format!("chmod {}: {e}", private.display())))?;
            let tmp = private.join("s");
            let listener = UnixListener::bind(&tmp).map_err(|e| located(path, format!("cannot listen: {e}")))?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| located(path, format!("chmod: {e}")))?;
            let meta = tmp.symlink_metadata().map_err(|e| located(path, e))?;
            if meta.mode() & 0o777 != 0o600 || meta.uid() != sys::geteuid() {
                return Err(located(path, format!("mode {:o} after chmod 0600", meta.mode() & 0o777)));
            }
            rename_noreplace(&tmp, path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                if e.kind() == ErrorKind::AlreadyExists {
                    located(path, "already exists (remove it if it is a stale socket of a run that died)")
                } else {
                    located(path, e)
                }
            })?;
            Ok((listener, (meta.dev(), meta.ino())))
        })();
        let _ = std::fs::remove_dir(&private);
        let (listener, ident) = made?;
        listener.set_nonblocking(true).map_err(|e| located(path, e))?;
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
            ident,
            uids: [sys::getuid(), sys::geteuid()],
            conns: Vec::new(),
        })
    }

    /// Every descriptor to poll: the listener, then each connection (for
    /// reading, and for writing while a reply waits).
    pub fn poll_fds(&self) -> Vec<libc::pollfd> {
        let mut v = vec![libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        for c in &self.conns {
            let events = if c.output.is_empty() { libc::POLLIN } else { libc::POLLIN | libc::POLLOUT };
            v.push(libc::pollfd { fd: c.stream.as_raw_fd(), events, revents: 0 });
        }
        v
    }

    /// How many client connections are open.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Serve what is pending without ever waiting: accept new connections,
    /// read what has arrived, run whole lines, write what can be written,
    /// close idle or finished connections. Returns true if a client asked to quit.
    pub fn serve(&mut self, host: &mut dyn Host) -> Result<bool, ProcError> {
        let now = sys::monotonic_ns();
        // Those already open first, so that closed ones free their places.
        let mut quit = false;
        for c in self.conns.iter_mut() {
            quit |= c.step(host, now);
        }
        self.conns.retain(|c| !c.done(now));
        let first_new = self.conns.len();
        // Bounded per round, so a flood of connections cannot hold a decision.
        for _ in 0..2 * MAX_CONNECTIONS {
            let Ok((stream, _)) = self.listener.accept() else { break };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let mut conn = Conn { stream, input: Vec::new(), output: Vec::new(), last_active: now, closing: false };
            match peer_uid(conn.stream.as_raw_fd()) {
                Some(uid) if uid == 0 || self.uids.contains(&uid) => {}
                who => {
                    let who = who.map_or("an unknown user".to_string(), |u| format!("uid {u}"));
                    let only = self.uids[0];
                    conn.refuse(&format!(
                        "permission denied: {who} may not control this run (only root and uid {only})"
                    ));
                }
            }
            if !conn.closing && self.conns.len() >= MAX_CONNECTIONS {
                conn.refuse(&format!("too many connections (at most {MAX_CONNECTIONS})"));
            }
            if conn.closing {
                conn.flush(); // best effort; it is dropped either way
                continue;
            }
            self.conns.push(conn);
        }
        for c in self.conns[first_new..].iter_mut() {
            quit |= c.step(host, now);
        }
        self.conns.retain(|c| !c.done(now));
        Ok(quit)
    }
}

impl Conn {
    fn reply(&mut self, text: &str) {
        let room = MAX_REPLY.saturating_sub(self.output.len());
        if text.len() < room {
            self.output.extend_from_slice(text.as_bytes());
            self.output.push(b'\n');
            return;
        }
        let note = format!("error: reply cut at {MAX_REPLY} bytes\n");
        let keep = room.saturating_sub(note.len());
        let cut = text[..floor_char_boundary(text, keep)].rfind('\n').map_or(0, |k| k + 1);
        self.output.extend_from_slice(&text.as_bytes()[..cut]);
        self.output.extend_from_slice(note.as_bytes());
    }

    fn refuse(&mut self, why: &str) {
        self.reply(&format!("error: {why}"));
        self.closing = true;
    }

    /// Write what the socket takes now.
    fn flush(&mut self) {
        while !self.output.is_empty() {
            match self.stream.write(&self.output) {
                Ok(0) => {
                    self.output.clear();
                    self.closing = true;
                }
                Ok(n) => {
                    self.output.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.output.clear();
                    self.closing = true;
                }
            }
        }
    }

    /// Read what has arrived (at most one line's worth), run whole lines.
    fn step(&mut self, host: &mut dyn Host, now: u64) -> bool {
        let mut quit = false;
        self.flush();
        // A client that does not read its replies is not read from either.
        if !self.closing && self.output.is_empty() {
            let mut buf = [0u8; MAX_LINE + 1];
            match self.stream.read(&mut buf) {
                Ok(0) => self.closing = true,
                Ok(n) => {
                    self.last_active = now;
                    self.input.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.closing = true,
            }
            while let Some(k) = self.input.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.input.drain(..=k).collect();
                let line = String::from_utf8_lossy(&line[..k]).into_owned();
                let reply = match execute(&line, host) {
                    Ok(Reply::Quit) => {
                        quit = true;
                        self.closing = true;
                        "ok".to_string()
                    }
                    Ok(Reply::Text(t)) => t,
                    Err(e) => format!("error: {e}"),
                };
                self.reply(&reply);
                if quit {
                    break;
                }
            }
            if !quit && self.input.len() > MAX_LINE {
                self.input.clear();
                self.refuse(&format!("command longer than {MAX_LINE} bytes"));
            }
            self.flush();
        }
        quit
    }

    fn done(&self, now: u64) -> bool {
        (self.closing && self.output.is_empty())
            || self.output.len() >= MAX_REPLY
            || now.saturating_sub(self.last_active) >= IDLE_TIMEOUT_NS
    }
}

fn floor_char_boundary(s: &str, mut k: usize) -> usize {
    k = k.min(s.len());
    while !s.is_char_boundary(k) {
        k -= 1;
    }
    k
}

/// The uid of the process at the other end of a Unix socket (`SO_PEERCRED`).
fn peer_uid(fd: RawFd) -> Option<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a valid ucred and `len` its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0 && len as usize == std::mem::size_of::<libc::ucred>()).then_some(cred.uid)
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        // Remove the socket only if it is still the one we made.
        if let Ok(m) = self.path.symlink_metadata() {
            if (m.dev(), m.ino()) == self.ident {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

enum Reply {
    Text(String),
    Quit,
}

fn execute(line: &str, host: &mut dyn Host) -> Result<Reply, ProcError> {
    let words = split_words(line)?;
    let Some(cmd) = words.first() else { return Ok(Reply::Text("error: empty command".into())) };
    match (cmd.as_str(), &words[1..]) {
        ("add", rest) => Ok(Reply::Text(format!("ok {}", host.add(rest)?))),
        ("weight", [name, w]) => {
            let w: u64 = w.parse().map_err(|_| ProcError::usage(format!("weight {w:?} is not a positive integer")))?;
            host.weight(name, w)?;
            Ok(Reply::Text("ok".into()))
        }
        ("list", []) => {
            let mut s = host.list().join("\n");
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str("ok");
            Ok(Reply::Text(s))
        }
        ("quit", []) => Ok(Reply::Quit),
        _ => {
            let mut shown = line[..floor_char_boundary(line, MAX_ECHO)].to_string();
            if shown.len() < line.len() {
                shown.push('…');
            }
            Err(ProcError::usage(format!("unknown command {shown:?}: use add, weight NAME W, list or quit")))
        }
    }
}

/// Send one command line to a run's control socket and return its reply
/// (every line up to and including the one that starts with `ok`/`error:`).
pub fn request(path: &Path, line: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(line.trim_end().as_bytes())?;
    s.write_all(b"\n")?;
    let mut reply = String::new();
    for l in BufReader::new(s).lines() {
        let l = l?;
        let done = l.starts_with("ok") || l.starts_with("error:");
        reply.push_str(&l);
        reply.push('\n');
        if done {
            break;
        }
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Many(usize);

    impl Host for Many {
        fn add(&mut self, _: &[String]) -> Result<String, ProcError> {
            Ok("x".into())
        }
        fn weight(&mut self, _: &str, _: u64) -> Result<(), ProcError> {
            Ok(())
        }
        fn list(&mut self) -> Vec<String> {
            (0..self.0).map(|i| format!("job{i} pid={i} weight=1 state=runnable cpu_ms=0.0")).collect()
        }
    }

    fn exchange(line: &[u8], host: &mut dyn Host) -> String {
        let (client, server) = UnixStream::pair().unwrap();
        server.set_nonblocking(true).unwrap();
        let mut conn = Conn { stream: server, input: Vec::new(), output: Vec::new(), last_active: 0, closing: false };
        (&client).write_all(line).unwrap();
        conn.step(host, 0);
        drop(conn);
        let mut out = String::new();
        (&client).read_to_string(&mut out).unwrap();
        out
    }

    /// A `list` of 5000 jobs is cut at MAX_REPLY bytes, on a line boundary, and says so.
    #[test]
    fn replies_are_bounded() {
        let out = exchange(b"list\n", &mut Many(5000));
        assert!(out.len() <= MAX_REPLY, "{} bytes", out.len());
        assert!(out.ends_with(&format!("error: reply cut at {MAX_REPLY} bytes\n")), "{}", &out[out.len() - 80..]);
        assert!(out.lines().rev().nth(1).unwrap().ends_with("cpu_ms=0.0"), "cut inside a line");
        let small = exchange(b"list\n", &mut Many(2));
        assert!(small.ends_with("cpu_ms=0.0\nok\n"), "{small}");
    }

    /// An unknown command is quoted back at most MAX_ECHO characters long.
    #[test]
    fn errors_do_not_echo_long_lines() {
        let mut line = vec![b'z'; MAX_LINE - 1];
        line.push(b'\n');
        let out = exchange(&line, &mut Many(0));
        assert!(out.starts_with("error: unknown command") && out.len() < MAX_ECHO + 100, "{} bytes", out.len());
    }
}
