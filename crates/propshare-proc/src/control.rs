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

use crate::error::ProcError;
use crate::spec::split_words;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the controller lets the control socket do.
pub trait Host {
    /// Add a job given in command-line job syntax; returns its name.
    fn add(&mut self, words: &[String]) -> Result<String, ProcError>;
    /// Change a job's weight.
    fn weight(&mut self, name: &str, w: u64) -> Result<(), ProcError>;
    /// One line per job.
    fn list(&mut self) -> Vec<String>;
}

/// A listening control socket (removed when dropped).
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlServer {
    /// Listen on `path` (a stale socket file left by a dead run is replaced).
    pub fn bind(path: &Path) -> Result<ControlServer, ProcError> {
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ProcError::usage(format!("control socket {} is in use by another run", path.display())));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| ProcError::usage(format!("cannot listen on {}: {e}", path.display())))?;
        listener.set_nonblocking(true).map_err(|e| ProcError::io("control socket", e))?;
        Ok(ControlServer { listener, path: path.to_path_buf() })
    }

    /// The listening descriptor (for poll).
    pub fn fd(&self) -> i32 {
        self.listener.as_raw_fd()
    }

    /// Serve every pending connection. Returns true if a client asked to quit.
    pub fn serve(&mut self, host: &mut dyn Host) -> Result<bool, ProcError> {
        let mut quit = false;
        while let Ok((stream, _)) = self.listener.accept() {
            quit |= serve_one(stream, host);
        }
        Ok(quit)
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(stream: UnixStream, host: &mut dyn Host) -> bool {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut out) = stream.try_clone() else { return false };
    let mut quit = false;
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let reply = match execute(&line, host) {
            Ok(Reply::Quit) => {
                quit = true;
                "ok".to_string()
            }
            Ok(Reply::Text(t)) => t,
            Err(e) => format!("error: {e}"),
        };
        if out.write_all(reply.as_bytes()).and_then(|_| out.write_all(b"\n")).is_err() {
            break;
        }
        if quit {
            break;
        }
    }
    quit
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
        _ => Err(ProcError::usage(format!("unknown command {line:?}: use add, weight NAME W, list or quit"))),
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
