//! cgroup v2, both ways: read a subtree to enforce its `cpu.weight`s with our
//! scheduler ([`read_subtree`], `propshare run --cgroup2 PATH`), and build a
//! tree of cgroups to run jobs under Linux's own `cpu.weight`
//! ([`Cgroup2Tree`], `--baseline cgroup2`).
//!
//! # Reading a subtree
//!
//! Every directory under PATH (PATH itself included) is a cgroup: its
//! `cgroup.procs` lists its processes, which become clients of weight 1 in
//! its group; every directory below PATH is a group of weight `cpu.weight`
//! (PATH's own weight does not matter: it is the root of the tree).
//! [`read_subtree`] takes any root path, so a directory of plain files with
//! those names serves as a fake cgroupfs in tests. Directories are walked in
//! name order, parents first; a group deeper than
//! [`propshare::groups::MAX_DEPTH`] below PATH is an error.
//!
//! Gap: a process's own weight inside its cgroup is 1 (Linux
//! weighs the threads of a cgroup by their nice values; the processes given
//! to us are scheduled whole, so equal shares inside a cgroup is the
//! reading that keeps the cgroup's weight exact).
//!
//! # Building a tree (the baseline)
//!
//! Under a delegated directory D (`--cgroup2-dir`, default the cgroup v2
//! mount point) the run makes `D/propshare.<pid>` (mode 0700), one cgroup
//! per group inside it (`g.NAME`, nested as the groups are) and one leaf per
//! job (`j.NAME`, under its group) so that jobs and groups are siblings only
//! through leaves (cgroup v2 allows no process in a cgroup whose children
//! have controllers). `+cpu` is written to every `cgroup.subtree_control` on
//! the way. Each cgroup's `cpu.weight` is its weight scaled into the
//! kernel's 1..=10000 ([`cpu_weights`]). At the end, processes still inside
//! (attached ones) go back to the cgroups they came from, and every
//! directory made is removed, deepest first: on every way out of a run that
//! releases the jobs (end, signal, error). Gap: a SIGKILL of the
//! scheduler leaves the (empty once the jobs end) directories behind.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::ProcError;
use crate::sys::Pid;

/// The default `cpu.weight` (the kernel's, for a file we cannot read in a fake tree).
pub const DEFAULT_WEIGHT: u64 = 100;
/// The largest `cpu.weight` the kernel takes.
pub const MAX_CPU_WEIGHT: u64 = 10_000;

/// One cgroup of a subtree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// Its path below the root (`a/b`); empty for the root.
    pub rel: String,
    /// Its `cpu.weight`.
    pub weight: u64,
    /// Its parent, an index into [`Subtree::cgroups`] (`None`: the root itself).
    pub parent: Option<usize>,
}

/// A subtree as read: its cgroups (the root first, parents before children)
/// and its processes with the index of their cgroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subtree {
    /// The cgroups; `cgroups[0]` is the root.
    pub cgroups: Vec<Cgroup>,
    /// Every process, with its cgroup.
    pub procs: Vec<(Pid, usize)>,
}

fn read_weight(dir: &Path) -> Result<u64, ProcError> {
    let f = dir.join("cpu.weight");
    let text = fs::read_to_string(&f).map_err(|e| {
        ProcError::usage(format!(
            "{}: {e} (the cpu controller is not enabled for this cgroup: write +cpu to its parent's cgroup.subtree_control)",
            f.display()
        ))
    })?;
    let w: u64 = text
        .trim()
        .parse()
        .map_err(|_| ProcError::usage(format!("{}: {:?} is not a weight", f.display(), text.trim())))?;
    propshare::Weight::new(w).map_err(|e| ProcError::usage(format!("{}: {e}", f.display())))?;
    Ok(w)
}

fn read_procs(dir: &Path) -> Result<Vec<Pid>, ProcError> {
    let f = dir.join("cgroup.procs");
    let text = fs::read_to_string(&f)
        .map_err(|e| ProcError::usage(format!("{}: {e} (not a cgroup v2 directory?)", f.display())))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse::<Pid>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| ProcError::usage(format!("{}: {l:?} is not a PID", f.display())))
        })
        .collect()
}

/// Read the subtree at `root` (module docs).
pub fn read_subtree(root: &Path) -> Result<Subtree, ProcError> {
    if !root.is_dir() {
        return Err(ProcError::usage(format!("--cgroup2 {}: not a directory", root.display())));
    }
    let mut out = Subtree::default();
    out.cgroups.push(Cgroup { rel: String::new(), weight: DEFAULT_WEIGHT, parent: None });
    // (directory, its index, its depth below root)
    let mut stack = vec![(root.to_path_buf(), 0usize, 0u32)];
    while let Some((dir, k, depth)) = stack.pop() {
        for p in read_procs(&dir)? {
            out.procs.push((p, k));
        }
        let mut subdirs: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(|e| ProcError::usage(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        subdirs.sort();
        let mut below = Vec::with_capacity(subdirs.len());
        for d in subdirs {
            if depth + 1 > propshare::groups::MAX_DEPTH {
                return Err(ProcError::usage(format!(
                    "{}: deeper than {} levels below {}",
                    d.display(),
                    propshare::groups::MAX_DEPTH,
                    root.display()
                )));
            }
            let rel = d.strip_prefix(root).unwrap_or(&d).to_string_lossy().into_owned();
            let weight = read_weight(&d)?;
            out.cgroups.push(Cgroup { rel, weight, parent: Some(k) });
            below.push((d, out.cgroups.len() - 1, depth + 1));
        }
        stack.extend(below.into_iter().rev());
    }
    // Parents before children: the walk pushes a child after its parent.
    Ok(out)
}

/// `cpu.weight` values for `weights`: 100 per unit when the largest fits
/// (`100·w ≤ 10000`), else scaled down into 1..=10000 (rounded to nearest).
pub fn cpu_weights(weights: &[u64]) -> Vec<u64> {
    let wmax = weights.iter().copied().max().unwrap_or(1).max(1);
    weights
        .iter()
        .map(|&w| {
            if wmax.saturating_mul(DEFAULT_WEIGHT) <= MAX_CPU_WEIGHT {
                w * DEFAULT_WEIGHT
            } else {
                ((w as u128 * MAX_CPU_WEIGHT as u128 + wmax as u128 / 2) / wmax as u128).max(1) as u64
            }
        })
        .collect()
}

/// Where cgroup v2 is mounted (from `/proc/self/mountinfo`), if it is.
pub fn mount_point() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let at = pre.split_whitespace().nth(4)?;
        (post.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(at))
    })
}

/// Where cgroup v1 binds the `cpu` controller, if it does.
fn v1_cpu_mount() -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut f = post.split_whitespace();
        let (fstype, _, opts) = (f.next()?, f.next()?, f.next()?);
        (fstype == "cgroup" && opts.split(',').any(|o| o == "cpu"))
            .then(|| pre.split_whitespace().nth(4).map(String::from))?
    })
}

/// Our own cgroup v2 path (from `/proc/self/cgroup`'s `0::` line), below the mount point.
fn own_cgroup(pid: Pid) -> Option<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("0::").map(String::from))
}

/// Check that `dir` is a cgroup v2 directory whose children can have the
/// `cpu` controller; the error names what is missing.
pub fn check_cpu_controller(dir: &Path) -> Result<(), ProcError> {
    let f = dir.join("cgroup.controllers");
    let have = fs::read_to_string(&f).map_err(|e| {
        ProcError::usage(format!("--baseline cgroup2: {}: {e} (not a cgroup v2 directory)", f.display()))
    })?;
    if have.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    let v1 = match v1_cpu_mount() {
        Some(m) => format!("; this host binds cpu to cgroup v1 at {m}, so cgroup v2 cannot have it"),
        None => String::new(),
    };
    Err(ProcError::usage(format!(
        "--baseline cgroup2: the cpu controller is not available on cgroup v2 at {} (its cgroup.controllers: {:?}){v1}",
        dir.display(),
        have.trim()
    )))
}

/// The delegated directory to build under: `dir`, or the cgroup v2 mount
/// point; checked to offer the cpu controller.
pub fn delegated_dir(dir: Option<&Path>) -> Result<PathBuf, ProcError> {
    let d = match dir {
        Some(d) => d.to_path_buf(),
        None => mount_point().ok_or_else(|| {
            ProcError::usage("--baseline cgroup2: no cgroup v2 hierarchy is mounted (mount -t cgroup2 none DIR, then --cgroup2-dir DIR)")
        })?,
    };
    check_cpu_controller(&d)?;
    Ok(d)
}

fn write(path: &Path, value: &str) -> Result<(), ProcError> {
    fs::write(path, value).map_err(|e| ProcError::io(format!("writing {value:?} to {}", path.display()), e))
}

/// The cgroups one baseline run made (module docs), removed when dropped.
pub struct Cgroup2Tree {
    top: PathBuf,
    mount: Option<PathBuf>,
    /// Every directory made, parents first.
    made: Vec<PathBuf>,
    /// Processes moved in, with the cgroup (below the mount) they came from.
    moved: Vec<(Pid, Option<String>)>,
}

impl Cgroup2Tree {
    /// Make `parent/propshare.<pid>` (mode 0700) with `+cpu` for its children.
    pub fn create(parent: &Path) -> Result<Cgroup2Tree, ProcError> {
        let top = parent.join(format!("propshare.{}", crate::sys::getpid()));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&top)
            .map_err(|e| ProcError::io(format!("creating cgroup {}", top.display()), e))?;
        // cgroupfs may ignore the mode given to mkdir: set it.
        let _ = fs::set_permissions(&top, fs::Permissions::from_mode(0o700));
        let mut t = Cgroup2Tree { made: vec![top.clone()], top, mount: mount_point(), moved: Vec::new() };
        t.enable_cpu(parent)?;
        t.enable_cpu(&t.top.clone())?;
        Ok(t)
    }

    /// The directory all of this run's cgroups are in.
    pub fn top(&self) -> &Path {
        &self.top
    }

    fn enable_cpu(&mut self, dir: &Path) -> Result<(), ProcError> {
        let f = dir.join("cgroup.subtree_control");
        let on = fs::read_to_string(&f).unwrap_or_default();
        if on.split_whitespace().any(|c| c == "cpu") {
            return Ok(());
        }
        write(&f, "+cpu")
    }

    /// Make cgroup `name` under `parent` (this run's top, or a cgroup made
    /// before) with `cpu.weight` = `weight`; `inner`: it will have children.
    pub fn add(&mut self, parent: &Path, name: &str, weight: u64, inner: bool) -> Result<PathBuf, ProcError> {
        let d = parent.join(name);
        fs::create_dir(&d).map_err(|e| ProcError::io(format!("creating cgroup {}", d.display()), e))?;
        self.made.push(d.clone());
        write(&d.join("cpu.weight"), &weight.to_string())?;
        if inner {
            self.enable_cpu(&d)?;
        }
        Ok(d)
    }

    /// Set the `cpu.weight` of cgroup `dir`.
    pub fn set_weight(&self, dir: &Path, weight: u64) -> Result<(), ProcError> {
        write(&dir.join("cpu.weight"), &weight.to_string())
    }

    /// Move process `pid` (all its threads) into cgroup `dir`.
    pub fn enter(&mut self, dir: &Path, pid: Pid) -> Result<(), ProcError> {
        self.moved.push((pid, own_cgroup(pid)));
        write(&dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Move every process still inside back where it came from (or to our
    /// own cgroup), then remove every directory made, deepest first. Best
    /// effort; returns what could not be removed.
    pub fn destroy(&mut self) -> Vec<PathBuf> {
        let ours = own_cgroup(crate::sys::getpid());
        let back = |cg: &Option<String>| -> Option<PathBuf> {
            Some(self.mount.as_ref()?.join(cg.as_ref()?.trim_start_matches('/')).join("cgroup.procs"))
        };
        for (pid, from) in self.moved.drain(..).collect::<Vec<_>>() {
            let inside = own_cgroup(pid).is_some_and(|c| {
                self.mount.as_ref().is_some_and(|m| m.join(c.trim_start_matches('/')).starts_with(&self.top))
            });
            if inside {
                if let Some(f) = back(&from) {
                    let _ = fs::write(f, pid.to_string());
                }
            }
        }
        let mut left = Vec::new();
        for d in self.made.drain(..).rev() {
            // Anything still inside (a process we never saw) goes to our cgroup.
            if let (Ok(s), Some(f)) = (fs::read_to_string(d.join("cgroup.procs")), back(&ours)) {
                for p in s.lines() {
                    let _ = fs::write(&f, p);
                }
            }
            if fs::remove_dir(&d).is_err() && d.exists() {
                left.push(d);
            }
        }
        left
    }
}

impl Drop for Cgroup2Tree {
    fn drop(&mut self) {
        self.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake cgroupfs: directories with `cgroup.procs` and `cpu.weight`.
    pub(crate) fn fake(root: &Path, cgroups: &[(&str, u64, &[Pid])]) {
        for (rel, w, procs) in cgroups {
            let d = root.join(rel);
            fs::create_dir_all(&d).unwrap();
            let list: String = procs.iter().map(|p| format!("{p}\n")).collect();
            fs::write(d.join("cgroup.procs"), list).unwrap();
            if !rel.is_empty() {
                fs::write(d.join("cpu.weight"), format!("{w}\n")).unwrap();
            }
        }
    }

    #[test]
    fn a_fake_subtree_is_read_parents_first() {
        let dir = std::env::temp_dir().join(format!("propshare-cg2-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fake(&dir, &[("", 0, &[7]), ("b", 300, &[]), ("b/x", 100, &[11, 12]), ("a", 100, &[10])]);
        let t = read_subtree(&dir).unwrap();
        let rels: Vec<&str> = t.cgroups.iter().map(|c| c.rel.as_str()).collect();
        assert_eq!(rels, ["", "a", "b", "b/x"]);
        assert_eq!(t.cgroups[3], Cgroup { rel: "b/x".into(), weight: 100, parent: Some(2) });
        assert_eq!(t.cgroups[2].weight, 300);
        let mut procs = t.procs.clone();
        procs.sort();
        assert_eq!(procs, [(7, 0), (10, 1), (11, 3), (12, 3)]);
        // A missing cpu.weight names the file and the cause; a bad PID too.
        fs::remove_file(dir.join("b/x/cpu.weight")).unwrap();
        let e = read_subtree(&dir).unwrap_err().to_string();
        assert!(e.contains("b/x/cpu.weight") && e.contains("subtree_control"), "{e}");
        fs::write(dir.join("b/x/cpu.weight"), "0").unwrap();
        assert!(read_subtree(&dir).unwrap_err().is_usage());
        fs::write(dir.join("b/x/cpu.weight"), "100").unwrap();
        fs::write(dir.join("a/cgroup.procs"), "10\nx\n").unwrap();
        assert!(read_subtree(&dir).unwrap_err().to_string().contains("a/cgroup.procs"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cpu_weights_are_proportional_and_in_range() {
        assert_eq!(cpu_weights(&[1, 3]), [100, 300]);
        assert_eq!(cpu_weights(&[1, 1000]), [10, 10_000]);
        assert_eq!(cpu_weights(&[1, 1_000_000]), [1, 10_000]);
    }

    #[test]
    fn a_missing_cpu_controller_is_named() {
        let dir = std::env::temp_dir().join(format!("propshare-cg2c-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("cgroup.controllers"), "hugetlb\n").unwrap();
        let e = check_cpu_controller(&dir).unwrap_err().to_string();
        assert!(e.contains("cpu controller is not available") && e.contains("hugetlb"), "{e}");
        fs::write(dir.join("cgroup.controllers"), "cpuset cpu io\n").unwrap();
        check_cpu_controller(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
