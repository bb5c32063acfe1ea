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
//! * `-g GROUP`: the job's group (declared with `propshare run --group
//!   NAME:WEIGHT[:PARENT]` or in the jobs file; default: the root).
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
//!
//! [[group]]           # groups (see crate::groups): a tree of weighted groups
//! name = "tenant-a"
//! weight = 3
//! parent = "top"      # optional: a [[group]] name (default: the root)
//!
//! [[job]]
//! group = "tenant-a"  # optional: the job's group (default: the root)
//! cmd = ["./c"]
//! ```
//!
//! Every error in a jobs file names the file, the line and the field
//! (`jobs.toml, line 7: group[1].parent: no group named "x"`).

use crate::error::ProcError;
use crate::groups::GroupDef;
use crate::sys::Pid;
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

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
    /// Its group, by name (`None`: the root).
    pub group: Option<String>,
}

impl JobSpec {
    /// A job that starts `cmd` with weight `weight`.
    pub fn command(weight: u64, cmd: &[&str]) -> JobSpec {
        JobSpec {
            name: None,
            weight,
            target: Target::Command(cmd.iter().map(|s| s.to_string()).collect()),
            group: None,
        }
    }

    /// A job that attaches to `pid` with weight `weight`.
    pub fn pid(weight: u64, pid: Pid) -> JobSpec {
        JobSpec { name: None, weight, target: Target::Pid(pid), group: None }
    }

    /// Put it in group `group`.
    pub fn in_group(mut self, group: &str) -> JobSpec {
        self.group = Some(group.to_string());
        self
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
    let mut group = None;
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
                return Ok(JobSpec { name, weight, target: Target::Command(cmd), group });
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
            "-g" => {
                let g = value(i, w)?;
                if g.is_empty() || g.chars().any(char::is_whitespace) {
                    return Err(ProcError::usage(format!("group name {g:?} must be non-empty without spaces")));
                }
                group = Some(g.clone());
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
                        "unexpected {w:?} in a job: write `-w WEIGHT [-n NAME] [-g GROUP] -- COMMAND ARGS...` or `-w WEIGHT -p PID`, jobs separated by `:::`"
                    )));
                }
            }
        }
    }
    match pid {
        Some(p) => Ok(JobSpec { name, weight, target: Target::Pid(p), group }),
        None => Err(ProcError::usage("a job needs `-- COMMAND...` or `-p PID`")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsFile {
    #[serde(default)]
    job: Vec<Spanned<FileJob>>,
    #[serde(default)]
    group: Vec<Spanned<FileGroup>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJob {
    name: Option<String>,
    weight: Option<Spanned<u64>>,
    cmd: Option<Vec<String>>,
    pid: Option<Pid>,
    group: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    name: Spanned<String>,
    weight: Spanned<u64>,
    parent: Option<Spanned<String>>,
}

/// The groups and jobs of a jobs file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobSet {
    /// `[[group]]` tables, in file order.
    pub groups: Vec<GroupDef>,
    /// `[[job]]` tables, in file order.
    pub jobs: Vec<JobSpec>,
}

/// An error at byte `at` of the jobs file `file`'s `text`, in field `field`.
fn located(file: &str, text: &str, at: usize, field: &str, why: impl std::fmt::Display) -> ProcError {
    let line = 1 + text.as_bytes()[..at.min(text.len())].iter().filter(|&&b| b == b'\n').count();
    ProcError::usage(format!("{file}, line {line}: {field}: {why}"))
}

/// Parse a TOML jobs file's text (see the module doc); `file` names it in errors.
pub fn parse_job_set(file: &str, text: &str) -> Result<JobSet, ProcError> {
    let f: JobsFile = toml::from_str(text).map_err(|e| ProcError::usage(format!("{file}: {e}")))?;
    let groups: Vec<GroupDef> = f
        .group
        .iter()
        .map(|g| {
            let g = g.get_ref();
            GroupDef {
                name: g.name.get_ref().clone(),
                weight: *g.weight.get_ref(),
                parent: g.parent.as_ref().map(|p| p.get_ref().clone()),
            }
        })
        .collect();
    if let Err(fault) = crate::groups::build_tree(&groups) {
        let g = f.group[fault.index].get_ref();
        let at = match fault.field {
            "name" => g.name.span().start,
            "weight" => g.weight.span().start,
            "parent" => g.parent.as_ref().map_or(f.group[fault.index].span().start, |p| p.span().start),
            _ => f.group[fault.index].span().start,
        };
        return Err(located(file, text, at, &format!("group[{}].{}", fault.index, fault.field), fault.message));
    }
    let mut jobs = Vec::new();
    for (i, sj) in f.job.into_iter().enumerate() {
        let start = sj.span().start;
        let j = sj.into_inner();
        let weight = j.weight.as_ref().map_or(1, |w| *w.get_ref());
        if let Err(e) = propshare::Weight::new(weight) {
            let at = j.weight.as_ref().map_or(start, |w| w.span().start);
            return Err(located(file, text, at, &format!("job[{i}].weight"), e));
        }
        let target = match (j.cmd, j.pid) {
            (Some(c), None) if !c.is_empty() => Target::Command(c),
            (None, Some(p)) if p > 0 => Target::Pid(p),
            _ => {
                return Err(located(
                    file,
                    text,
                    start,
                    &format!("job[{i}]"),
                    "give exactly one of a non-empty `cmd` or a positive `pid`",
                ))
            }
        };
        if let Some(g) = &j.group {
            if !groups.iter().any(|d| &d.name == g.get_ref()) {
                let why = format!("no group named {:?} (declare it with [[group]])", g.get_ref());
                return Err(located(file, text, g.span().start, &format!("job[{i}].group"), why));
            }
        }
        jobs.push(JobSpec { name: j.name, weight, target, group: j.group.map(Spanned::into_inner) });
    }
    Ok(JobSet { groups, jobs })
}

/// Parse a TOML jobs file's text without groups (see [`parse_job_set`]
/// for one with groups): a `[[group]]` or a job's `group` is an error.
pub fn parse_jobs_toml(text: &str) -> Result<Vec<JobSpec>, ProcError> {
    without_groups(parse_job_set("jobs file", text)?)
}

fn without_groups(set: JobSet) -> Result<Vec<JobSpec>, ProcError> {
    if !set.groups.is_empty() || set.jobs.iter().any(|j| j.group.is_some()) {
        return Err(ProcError::usage("this jobs file declares groups, which this host does not take"));
    }
    Ok(set.jobs)
}

/// Read and parse a TOML jobs file with its groups.
pub fn read_job_set(path: &Path) -> Result<JobSet, ProcError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ProcError::usage(format!("cannot read jobs file {}: {e}", path.display())))?;
    parse_job_set(&path.display().to_string(), &text)
}

/// Read and parse a TOML jobs file without groups (see [`parse_jobs_toml`]).
pub fn read_jobs_file(path: &Path) -> Result<Vec<JobSpec>, ProcError> {
    without_groups(read_job_set(path)?)
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
        assert_eq!(j[0], JobSpec { name: None, weight: 3, target: Target::Command(words("./a -w 9")), group: None });
        assert_eq!(
            j[1],
            JobSpec { name: Some("bee".into()), weight: 1, target: Target::Command(words("./b")), group: None }
        );
        assert_eq!(j[2], JobSpec { name: None, weight: 2, target: Target::Pid(77), group: None });
        let g = parse_jobs(&words("-w 2 -g web -- ./a ::: -g db -p 5")).unwrap();
        assert_eq!(g[0], JobSpec::command(2, &["./a"]).in_group("web"));
        assert_eq!(g[1], JobSpec::pid(1, 5).in_group("db"));
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
            "-g -- a",
            "-w 1 -g -p 3",
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
    fn toml_groups_and_located_errors() {
        let text = "[[group]]\nname = 'a'\nweight = 1\n\n[[group]]\nname = 'b'\nweight = 3\nparent = 'a'\n\n[[job]]\ngroup = 'b'\ncmd = ['x']\n";
        let set = parse_job_set("f.toml", text).unwrap();
        assert_eq!(set.groups[1], GroupDef { name: "b".into(), weight: 3, parent: Some("a".into()) });
        assert_eq!(set.jobs[0], JobSpec::command(1, &["x"]).in_group("b"));
        assert!(parse_jobs_toml(text).unwrap_err().to_string().contains("groups"), "the plain reader refuses groups");
        for (bad, want) in [
            (text.replace("parent = 'a'", "parent = 'zz'"), "f.toml, line 8: group[1].parent: no group named \"zz\""),
            (text.replace("weight = 3", "weight = 0"), "f.toml, line 7: group[1].weight:"),
            (text.replace("name = 'b'", "name = 'a'"), "f.toml, line 6: group[1].name: duplicate group name"),
            (
                text.replace("parent = 'a'", "parent = 'b'"),
                "f.toml, line 8: group[1].parent: group \"b\" is its own ancestor",
            ),
            (text.replace("group = 'b'", "group = 'c'"), "f.toml, line 11: job[0].group: no group named \"c\""),
            (text.replace("cmd = ['x']", "cmd = []"), "f.toml, line 10: job[0]:"),
        ] {
            let e = parse_job_set("f.toml", &bad).unwrap_err();
            assert!(e.is_usage() && e.to_string().starts_with(want), "{e}\nwanted {want}");
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
