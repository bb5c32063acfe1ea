//! # propshare-proc: schedule real Linux processes by weight, from user space
//!
//! The same scheduler code as the simulator (any name in
//! [`propshare::registry`]) decides, every quantum, which process runs on
//! which CPU; this crate makes Linux obey: the chosen process is pinned to its
//! CPU (every thread) and continued with SIGCONT, the others are stopped with
//! SIGSTOP. CPU time is measured with perf task-clock counters (or, failing
//! that, `/proc/<pid>/task/*/schedstat`) and reported to the scheduler as the
//! real time run. Blocking is inferred from CPU use; exits from pidfds.
//!
//! ```no_run
//! use propshare_proc::{run, JobSpec, RunOptions};
//! let report = run(RunOptions {
//!     jobs: vec![JobSpec::command(3, &["./a"]), JobSpec::command(1, &["./b"])],
//!     duration: Some(10_000_000_000),
//!     ..RunOptions::default()
//! })?;
//! print!("{}", report.to_table());
//! # Ok::<(), propshare_proc::ProcError>(())
//! ```
//!
//! * [`run`]: the controller loop, its guarantees and its rules ([`run()`]).
//! * [`guardian`]: the forked watchdog that resumes everything if we are SIGKILLed.
//! * [`spec`]: the `-w 3 -- ./a ::: -w 1 -p PID` syntax and the TOML jobs file.
//! * [`groups`]: hierarchical weights through the core's shared adapter.
//! * [`control`]: the control socket (add jobs, change weights while running).
//! * [`metrics`]: the fluid reference with readjustment, lag, the JSON Lines trace.
//! * [`baseline`]: Linux's own weighting (nice, cgroup v1 `cpu.shares`) for comparison.
//! * [`cgroup2`]: read a cgroup v2 subtree to enforce it; build one for `--baseline cgroup2`.
//!
//! # Trace schema (JSON Lines, integer ns)
//!
//! ```text
//! {"ev":"meta","scheduler":S,"cpus":P,"quantum_ns":Q,"seed":N,"scenario":NAME}
//! {"ev":"join","t":T,"client":ID,"weight":W}
//! {"ev":"leave","t":T,"client":ID}   {"ev":"block",...}   {"ev":"wake",...}
//! {"ev":"weight","t":T,"client":ID,"weight":W}
//! {"ev":"run","cpu":K,"client":ID,"start":T0,"end":T1}
//! ```
//!
//! `cpu` is the index among the managed CPUs. For real processes a run's
//! `end - start` is the CPU time the process really used in that slot (at
//! most the wall time), so summing runs gives received service.

#![warn(missing_docs)]

pub mod baseline;
pub mod cgroup2;
pub mod control;
pub mod error;
pub mod groups;
pub mod guardian;
pub mod metrics;
pub mod run;
pub mod spec;
pub mod sys;

pub use error::ProcError;
pub use groups::GroupDef;
pub use run::{
    run, Accounting, Charge, ClientReport, Mode, RunOptions, RunReport, DEFAULT_CGROUP2_EVERY, DEFAULT_JSON_EVERY,
    MIN_CGROUP2_EVERY, MIN_JSON_EVERY, MIN_QUANTUM,
};
pub use spec::{parse_job_set, parse_jobs, parse_jobs_toml, read_job_set, read_jobs_file, JobSet, JobSpec, Target};

/// Parse the duration given to the command-line flag `flag` (`10ms`, `2.5s`,
/// `500us`; a unit is required) with the core's parser, the same one the
/// simulator's scenario files use; the error names the flag.
pub fn parse_duration(flag: &str, s: &str) -> Result<u64, ProcError> {
    propshare::parse_duration(s).map_err(|e| ProcError::usage(format!("{flag}: {e}")))
}

/// Check that `path`, given to `flag`, can be written, without creating or
/// changing it: an existing path must be a regular file we may write, a new
/// one needs an existing directory we may write to. The error names both.
pub fn check_output_path(flag: &str, path: &std::path::Path) -> Result<(), ProcError> {
    use std::os::unix::ffi::OsStrExt;
    let bad = |why: String| ProcError::usage(format!("{flag} {}: {why}", path.display()));
    let writable = |p: &std::path::Path, mode: i32| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| bad("contains a NUL byte".into()))?;
        // SAFETY: valid C string.
        if unsafe { libc::access(c.as_ptr(), mode) } == 0 {
            Ok(())
        } else {
            Err(bad(format!("{}", std::io::Error::last_os_error())))
        }
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(bad("is a directory".into())),
        Ok(_) => writable(path, libc::W_OK),
        Err(_) => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            if !dir.is_dir() {
                return Err(bad(format!("directory {} does not exist", dir.display())));
            }
            writable(dir, libc::W_OK | libc::X_OK)
        }
    }
}

/// Parse a CPU list such as `0,1` or `0-3` into CPU numbers.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, ProcError> {
    sys::parse_cpu_list(s).map(|m| m.cpus()).map_err(ProcError::usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_errors_name_the_flag() {
        assert_eq!(parse_duration("--quantum", "10ms").unwrap(), 10_000_000);
        assert_eq!(parse_duration("--quantum", "2.5s").unwrap(), 2_500_000_000);
        let e = parse_duration("--quantum", "3").unwrap_err().to_string();
        assert!(e.contains("--quantum") && e.contains("needs a unit"), "{e}");
        assert!(parse_duration("--duration", "10 parsecs").is_err());
    }
}
