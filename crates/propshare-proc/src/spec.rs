//! What to run: jobs from the command line (`-w 3 -- ./a ::: -w 1 -p 1234`),
//! from a TOML jobs file, or from a control-socket line.
//!
//! # Command-line syntax
//!
//! Jobs are separated by a word `:::`. Each job is a list of options followed
//! either by `--` and the command with its arguments, or by `-p PID`:
//!
//! ```text
//! -w 3 -- ./a --its-own-flags ::: -w 1 -n bee -- ./b ::: -w 2 -p 1234
//! ```
//!
//! * `-w N`, `--weight N`: the weight, a positive integer (default 1).
//! * `-n NAME`, `--name NAME`: the job's id in reports and traces (default:
//!   the command's file name, or `pid<N>`; duplicates get `.2`, `.3`...).
//! * `-p PID`, `--pid PID`: attach to a running process instead of starting one.
//!
//! A command word cannot be `:::`.
//!
//! # Jobs file (TOML)
//!
//! ```toml
//! [[job]]
//! name = "a"          # optional
//! weight = 3          # optional, default 1
//! cmd = ["./a", "x"]  # a command and its arguments ...
//!
//! [[job]]
//! weight = 1
//! pid = 1234          # ... or a running process
//! ```

use crate::error::ProcError;
use crate::sys::Pid;
use serde::Deserialize;
use std::path::Path;

/// A process to manage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Start this command (program and arguments).
    Command(Vec<String>),
    /// Attach to this running process.
    Pid(Pid),
}

/// One job: what to run and its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    /// Its id in reports and traces (filled in by [`assign_names`] if `None`).
    pub name: Option<String>,
    /// Its weight (validated to be positive by the parsers).
    pub weight: u64,
    /// The process.
    pub target: Target,
}

impl JobSpec {
    /// A job that starts `cmd` with weight `weight`.
    pub fn command(weight: u64, cmd: &[&str]) -> JobSpec {
        JobSpec { name: None, weight, target: Target::Command(cmd.iter().map(|s| s.to_string()).collect()) }
    }

    /// A job that attaches to `pid` with weight `weight`.
    pub fn pid(weight: u64, pid: Pid) -> JobSpec {
        JobSpec { name: None, weight, target: Target::Pid(pid) }
    }

    /// Give it a name.
    pub fn named(mut self, name: &str) -> JobSpec {
        self.name = Some(name.to_string());
        self
    }

    /// The name it gets if none is given.
    pub fn default_name(&self) -> String {
        match &self.target {
            Target::Command(c) => {
                let prog = c.first().map(String::as_str).unwrap_or("job");
                Path::new(prog).file_name().and_then(|s| s.to_str()).unwrap_or(prog).to_string()
            }
            Target::Pid(p) => format!("pid{p}"),
        }
    }
}

fn parse_weight(s: &str) -> Result<u64, ProcError> {
    let w: u64 = s.parse().map_err(|_| ProcError::usage(format!("weight {s:?} is not a positive integer")))?;
    propshare::Weight::new(w).map_err(|e| ProcError::usage(format!("bad weight {s:?}: {e}")))?;
    Ok(w)
}

/// Parse the jobs of a command line (see the module doc).
pub fn parse_jobs(args: &[String]) -> Result<Vec<JobSpec>, ProcError> {
    let mut jobs = Vec::new();
    if args.is_empty() {
        return Ok(jobs);
    }
    for group in args.split(|a| a == ":::") {
        jobs.push(parse_job(group)?);
    }
    Ok(jobs)
}

/// Parse one job (`-w 3 -n a -- cmd args` or `-w 3 -p PID`).
pub fn parse_job(words: &[String]) -> Result<JobSpec, ProcError> {
    let mut weight = 1u64;
    let mut name = None;
    let mut pid = None;
    let mut i = 0;
    let value = |i: usize, flag: &str| -> Result<&String, ProcError> {
        words.get(i + 1).ok_or_else(|| ProcError::usage(format!("{flag} needs a value")))
    };
    while i < words.len() {
        let w = words[i].as_str();
        match w {
            "--" => {
                let cmd: Vec<String> = words[i + 1..].to_vec();
                if cmd.is_empty() {
                    return Err(ProcError::usage("a job has `--` but no command after it"));
                }
                if pid.is_some() {
                    return Err(ProcError::usage("a job cannot have both -p PID and a command"));
                }
                return Ok(JobSpec { name, weight, target: Target::Command(cmd) });
            }
            "-w" | "--weight" => {
                weight = parse_weight(value(i, w)?)?;
                i += 2;
            }
            "-n" | "--name" => {
                let n = value(i, w)?;
                if n.is_empty() || n.chars().any(char::is_whitespace) {
                    return Err(ProcError::usage(format!("job name {n:?} must be non-empty without spaces")));
                }
                name = Some(n.clone());
                i += 2;
            }
            "-p" | "--pid" => {
                let p = value(i, w)?;
                let v: Pid = p
                    .parse()
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| ProcError::usage(format!("pid {p:?} is not a positive integer")))?;
                pid = Some(v);
                i += 2;
            }
            _ => {
                if let Some(v) = w.strip_prefix("-w").filter(|v| !v.is_empty()) {
                    weight = parse_weight(v)?;
                    i += 1;
                } else {
                    return Err(ProcError::usage(format!(
                        "unexpected {w:?} in a job: write `-w WEIGHT [-n NAME] -- COMMAND ARGS...` or `-w WEIGHT -p PID`, jobs separated by `:::`"
                    )));
                }
            }
        }
    }
    match pid {
        Some(p) => Ok(JobSpec { name, weight, target: Target::Pid(p) }),
        None => Err(ProcError::usage("a job needs `-- COMMAND...` or `-p PID`")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsFile {
    #[serde(default)]
    job: Vec<FileJob>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJob {
    name: Option<String>,
    weight: Option<u64>,
    cmd: Option<Vec<String>>,
    pid: Option<Pid>,
}

/// Parse a TOML jobs file's text (see the module doc).
pub fn parse_jobs_toml(text: &str) -> Result<Vec<JobSpec>, ProcError> {
    let f: JobsFile = toml::from_str(text).map_err(|e| ProcError::usage(format!("jobs file: {e}")))?;
    let mut out = Vec::new();
    for (i, j) in f.job.into_iter().enumerate() {
        let weight = j.weight.unwrap_or(1);
        propshare::Weight::new(weight).map_err(|e| ProcError::usage(format!("jobs file, job {}: {e}", i + 1)))?;
        let target = match (j.cmd, j.pid) {
            (Some(c), None) if !c.is_empty() => Target::Command(c),
            (None, Some(p)) if p > 0 => Target::Pid(p),
            _ => {
                return Err(ProcError::usage(format!(
                    "jobs file, job {}: give exactly one of a non-empty `cmd` or a positive `pid`",
                    i + 1
                )))
            }
        };
        out.push(JobSpec { name: j.name, weight, target });
    }
    Ok(out)
}

/// Read and parse a TOML jobs file.
pub fn read_jobs_file(path: &Path) -> Result<Vec<JobSpec>, ProcError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ProcError::usage(format!("cannot read jobs file {}: {e}", path.display())))?;
    parse_jobs_toml(&text)
}

/// Give every job a unique name: its own, or its default with `.2`, `.3`... on clashes.
/// `taken` are names already in use. Explicit duplicate names are an error.
pub fn assign_names(jobs: &mut [JobSpec], taken: &mut Vec<String>) -> Result<(), ProcError> {
    for j in jobs.iter() {
        if let Some(n) = &j.name {
            if taken.contains(n) {
                return Err(ProcError::usage(format!("two jobs are named {n:?}")));
            }
            taken.push(n.clone());
        }
    }
    for j in jobs.iter_mut().filter(|j| j.name.is_none()) {
        let base = j.default_name();
        let mut n = base.clone();
        let mut k = 2;
        while taken.contains(&n) {
            n = format!("{base}.{k}");
            k += 1;
        }
        taken.push(n.clone());
        j.name = Some(n);
    }
    Ok(())
}

/// Split a control line into words: whitespace separates, '…' and "…" quote.
pub fn split_words(line: &str) -> Result<Vec<String>, ProcError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut quote: Option<char> = None;
    for ch in line.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(ch);
                has = true;
            }
            (None, c) if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => {
                cur.push(c);
                has = true;
            }
        }
    }
    if quote.is_some() {
        return Err(ProcError::usage("unterminated quote"));
    }
    if has {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn command_line_jobs() {
        let j = parse_jobs(&words("-w 3 -- ./a -w 9 ::: -w1 -n bee -- ./b ::: --weight 2 -p 77")).unwrap();
        assert_eq!(j.len(), 3);
        assert_eq!(j[0], JobSpec { name: None, weight: 3, target: Target::Command(words("./a -w 9")) });
        assert_eq!(j[1], JobSpec { name: Some("bee".into()), weight: 1, target: Target::Command(words("./b")) });
        assert_eq!(j[2], JobSpec { name: None, weight: 2, target: Target::Pid(77) });
        assert!(parse_jobs(&[]).unwrap().is_empty());
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        for bad in [
            "-w 0 -- a",
            "-w x -- a",
            "-w -- a",
            "-w 3",
            "-w 3 --",
            "-w 3 -p 0",
            "-w 3 -p 5 -- a",
            "-q -- a",
            "-w 99999999999 -- a",
        ] {
            let e = parse_jobs(&words(bad)).unwrap_err();
            assert!(e.is_usage(), "{bad}: {e}");
        }
    }

    #[test]
    fn toml_jobs() {
        let j = parse_jobs_toml("[[job]]\nname='a'\nweight=3\ncmd=['sleep','1']\n[[job]]\npid=5\n").unwrap();
        assert_eq!(j[0], JobSpec::command(3, &["sleep", "1"]).named("a"));
        assert_eq!(j[1], JobSpec::pid(1, 5));
        for bad in [
            "[[job]]\nweight=0\ncmd=['a']",
            "[[job]]\ncmd=['a']\npid=3",
            "[[job]]\nweight=1",
            "[[job]]\ncmd=[]",
            "[[job]]\ncmd=['a']\nwieght=2",
        ] {
            assert!(parse_jobs_toml(bad).unwrap_err().is_usage(), "{bad}");
        }
    }

    #[test]
    fn names_are_unique() {
        let mut j = vec![
            JobSpec::command(1, &["/bin/sh"]),
            JobSpec::command(1, &["sh"]),
            JobSpec::command(1, &["x"]).named("sh.2"),
            JobSpec::pid(1, 4),
        ];
        assign_names(&mut j, &mut Vec::new()).unwrap();
        let names: Vec<_> = j.iter().map(|j| j.name.clone().unwrap()).collect();
        assert_eq!(names, ["sh", "sh.3", "sh.2", "pid4"]);
        let mut d = vec![JobSpec::command(1, &["a"]).named("x"), JobSpec::command(1, &["b"]).named("x")];
        assert!(assign_names(&mut d, &mut Vec::new()).is_err());
    }

    #[test]
    fn control_words() {
        assert_eq!(
            split_words(r#"add -w 2 -- sh -c 'while :; do :; done'"#).unwrap(),
            ["add", "-w", "2", "--", "sh", "-c", "while :; do :; done"]
        );
        assert_eq!(split_words("  a  \"\" b").unwrap(), ["a", "", "b"]);
        assert!(split_words("a 'b").is_err());
    }
}
