//! Linux's own weighted sharing, for side-by-side runs: nice values mapped
//! from weights through the kernel's `sched_prio_to_weight` table, and cgroup
//! v1 `cpu.shares` with a `cpuset`.

use crate::error::ProcError;
use crate::sys::{self, CpuMask, Pid};
use std::fs;
use std::path::{Path, PathBuf};

/// Nice values whose kernel weights are as close as possible to proportional
/// to `weights`.
///
/// Every anchor (the heaviest weight at nice −20..=19) is tried; the other
/// weights take the nice value whose table weight is nearest in ratio
/// (|log|) to `1024·w/anchor_weight`-style scaling; the anchor with the
/// smallest worst ratio error wins, ties going to the anchor closest to nice 0.
pub fn nice_for_weights(weights: &[u64]) -> Vec<i32> {
    if weights.is_empty() {
        return Vec::new();
    }
    let wmax = *weights.iter().max().unwrap_or(&1) as f64;
    let table = &sys::PRIO_TO_WEIGHT;
    let mut best: Option<(f64, i32, Vec<i32>)> = None;
    for anchor in 0..40usize {
        let scale = table[anchor] as f64 / wmax;
        let mut worst = 0f64;
        let mut nices = Vec::with_capacity(weights.len());
        for &w in weights {
            let target = w as f64 * scale;
            let (k, err) = (0..40usize)
                .map(|k| (k, (table[k] as f64 / target).ln().abs()))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or((20, 0.0));
            worst = worst.max(err);
            nices.push(k as i32 - 20);
        }
        let dist = (anchor as i32 - 20).abs();
        let better = match &best {
            None => true,
            Some((bw, bd, _)) => worst < *bw - 1e-12 || ((worst - *bw).abs() <= 1e-12 && dist < *bd),
        };
        if better {
            best = Some((worst, dist, nices));
        }
    }
    best.map(|b| b.2).unwrap_or_default()
}

/// `cpu.shares` values proportional to `weights` (1024 per unit of weight
/// when it fits, else scaled down into the kernel's 2..=262144 range).
pub fn shares_for_weights(weights: &[u64]) -> Vec<u64> {
    let wmax = weights.iter().copied().max().unwrap_or(1).max(1);
    weights
        .iter()
        .map(|&w| {
            if wmax.saturating_mul(1024) <= 262_144 {
                w * 1024
            } else {
                ((w as u128 * 262_144) / wmax as u128).max(2) as u64
            }
        })
        .collect()
}

const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";
const CPUSET_ROOT: &str = "/sys/fs/cgroup/cpuset";

/// Whether cgroup v1 `cpu` and `cpuset` controllers are mounted where we look.
pub fn cgroups_available() -> bool {
    Path::new(CPU_ROOT).join("cpu.shares").exists() && Path::new(CPUSET_ROOT).join("cpuset.cpus").exists()
}

/// The cgroups of one baseline run: one `cpu` group per job under
/// `/sys/fs/cgroup/cpu/propshare.<pid>/`, one shared cpuset.
pub struct Cgroups {
    cpu_dir: PathBuf,
    cpuset_dir: PathBuf,
    jobs: Vec<PathBuf>,
    /// Each process we moved, with its original `cpu` and `cpuset` groups.
    moved: Vec<(Pid, Option<String>, Option<String>)>,
}

/// The group of `pid` in the v1 hierarchy that has controller `ctl`.
fn group_of(pid: Pid, ctl: &str) -> Option<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    s.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctls, path) = (f.next()?, f.next()?, f.next()?);
        ctls.split(',').any(|c| c == ctl).then(|| path.to_string())
    })
}

fn write(path: &Path, value: &str) -> Result<(), ProcError> {
    fs::write(path, value).map_err(|e| ProcError::io(format!("writing {value:?} to {}", path.display()), e))
}

impl Cgroups {
    /// Create the parent groups, with the cpuset restricted to `cpus`.
    pub fn create(cpus: &CpuMask) -> Result<Cgroups, ProcError> {
        if !cgroups_available() {
            return Err(ProcError::usage(
                "--baseline shares needs cgroup v1 cpu and cpuset controllers under /sys/fs/cgroup",
            ));
        }
        let tag = format!("propshare.{}", sys::getpid());
        let cpu_dir = Path::new(CPU_ROOT).join(&tag);
        let cpuset_dir = Path::new(CPUSET_ROOT).join(&tag);
        for d in [&cpu_dir, &cpuset_dir] {
            if !d.exists() {
                fs::create_dir(d).map_err(|e| ProcError::io(format!("creating cgroup {}", d.display()), e))?;
            }
        }
        let cg = Cgroups { cpu_dir, cpuset_dir, jobs: Vec::new(), moved: Vec::new() };
        let mems = fs::read_to_string(Path::new(CPUSET_ROOT).join("cpuset.mems")).unwrap_or_else(|_| "0".into());
        write(&cg.cpuset_dir.join("cpuset.mems"), mems.trim())?;
        write(&cg.cpuset_dir.join("cpuset.cpus"), &sys::format_cpu_list(cpus))?;
        Ok(cg)
    }

    /// Put process `pid` (all its threads) in a new `cpu` group with `shares`, and in the cpuset.
    pub fn add(&mut self, pid: Pid, shares: u64) -> Result<usize, ProcError> {
        let k = self.jobs.len();
        let d = self.cpu_dir.join(format!("job{k}"));
        if !d.exists() {
            fs::create_dir(&d).map_err(|e| ProcError::io(format!("creating cgroup {}", d.display()), e))?;
        }
        self.jobs.push(d.clone());
        self.moved.push((pid, group_of(pid, "cpu"), group_of(pid, "cpuset")));
        write(&d.join("cpu.shares"), &shares.to_string())?;
        write(&d.join("cgroup.procs"), &pid.to_string())?;
        write(&self.cpuset_dir.join("cgroup.procs"), &pid.to_string())?;
        Ok(k)
    }

    /// Change the shares of job group `k`.
    pub fn set_shares(&self, k: usize, shares: u64) -> Result<(), ProcError> {
        write(&self.jobs[k].join("cpu.shares"), &shares.to_string())
    }

    /// Move every process back to its own groups (the root groups for any
    /// other process found in ours) and remove ours. Best effort.
    pub fn destroy(&mut self) {
        for (pid, cpu, cpuset) in self.moved.drain(..) {
            for (root, orig) in [(CPU_ROOT, cpu), (CPUSET_ROOT, cpuset)] {
                if let Some(g) = orig {
                    let _ = fs::write(
                        Path::new(root).join(g.trim_start_matches('/')).join("cgroup.procs"),
                        pid.to_string(),
                    );
                }
            }
        }
        let move_all = |from: &Path, root: &str| {
            if let Ok(s) = fs::read_to_string(from.join("cgroup.procs")) {
                for p in s.lines() {
                    let _ = fs::write(Path::new(root).join("cgroup.procs"), p);
                }
            }
        };
        for d in &self.jobs {
            move_all(d, CPU_ROOT);
            let _ = fs::remove_dir(d);
        }
        move_all(&self.cpuset_dir, CPUSET_ROOT);
        let _ = fs::remove_dir(&self.cpu_dir);
        let _ = fs::remove_dir(&self.cpuset_dir);
        self.jobs.clear();
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        self.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_mapping_follows_the_kernel_table() {
        // Equal weights: equal nice values, anchored at 0.
        assert_eq!(nice_for_weights(&[1, 1, 1]), vec![0, 0, 0]);
        // The kernel's weights are about 1.25x apart per nice step, so 1:2:3
        // becomes nice steps of about 3 and 5 below the lightest.
        let n = nice_for_weights(&[1, 2, 3]);
        let w: Vec<f64> = n.iter().map(|&x| sys::PRIO_TO_WEIGHT[(x + 20) as usize] as f64).collect();
        assert!((w[1] / w[0] - 2.0).abs() < 0.2 && (w[2] / w[0] - 3.0).abs() < 0.3, "{n:?} {w:?}");
        let n = nice_for_weights(&[10, 1, 1]);
        assert_eq!(n[1], n[2]);
        let w0 = sys::PRIO_TO_WEIGHT[(n[0] + 20) as usize] as f64;
        let w1 = sys::PRIO_TO_WEIGHT[(n[1] + 20) as usize] as f64;
        assert!((w0 / w1 - 10.0).abs() < 1.0, "{n:?}");
        assert!(nice_for_weights(&[]).is_empty());
    }

    #[test]
    fn shares_are_proportional_and_in_range() {
        assert_eq!(shares_for_weights(&[1, 2, 3]), vec![1024, 2048, 3072]);
        let s = shares_for_weights(&[1_000_000, 1]);
        assert_eq!(s, vec![262_144, 2]);
    }
}
