//! cgroup v2 in a run: `--cgroup2 PATH` (the subtree's cgroups become the
//! groups and their processes the jobs, read again every `cgroup2_every`
//! for joins, leaves, moves and weight changes) and `--baseline cgroup2`
//! (the run's groups and jobs as a tree of cgroups under Linux's own
//! `cpu.weight`). The file system side is [`crate::cgroup2`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use propshare::groups::{GroupId, ROOT};
use propshare::{ClientId, Time, Weight};

use super::controller::Controller;
use super::job::St;
use crate::cgroup2::{self, Cgroup2Tree, Subtree};
use crate::error::ProcError;
use crate::groups::HostGroups;
use crate::metrics::GroupChange;
use crate::spec::{self, JobSpec};
use crate::sys::{self, Pid};

/// A subtree being enforced.
pub(super) struct Watch {
    root: PathBuf,
    every: Time,
    next_at: Time,
    /// Each cgroup's group, by its path below the root.
    group_of: HashMap<String, GroupId>,
    /// Each group's weight as last read, by group id.
    weights: Vec<u64>,
}

/// `--baseline cgroup2`: the cgroups made, by group, and the weights' scale.
pub(super) struct Baseline2 {
    tree: Cgroup2Tree,
    /// Each group's cgroup, by group id (the root's is the run's top directory).
    dirs: Vec<PathBuf>,
    /// Each job's leaf cgroup, by `Job::cgroup`.
    leaves: Vec<PathBuf>,
    /// The largest weight at the start: `cpu.weight` is scaled by it.
    wmax: u64,
}

impl Baseline2 {
    fn cpu_weight(&self, w: u64) -> u64 {
        cgroup2::cpu_weights(&[w, self.wmax.max(w)])[0]
    }

    /// Remove every cgroup made (see [`Cgroup2Tree::destroy`]); what is left.
    pub(super) fn destroy(&mut self) -> Vec<PathBuf> {
        self.tree.destroy()
    }
}

impl Controller {
    /// Build the run's cgroups under `dir` for the groups (the jobs' leaves
    /// come with the jobs); `job_weights`: the jobs' weights, for the scale.
    pub(super) fn start_cgroup2_baseline(&mut self, dir: Option<&Path>, job_weights: &[u64]) -> Result<(), ProcError> {
        let parent = cgroup2::delegated_dir(dir)?;
        let tree = Cgroup2Tree::create(&parent)?;
        let mut b = Baseline2 { dirs: vec![tree.top().to_path_buf()], tree, leaves: Vec::new(), wmax: 1 };
        if let Some(g) = &self.groups {
            let t = g.tree();
            b.wmax = (1..t.len())
                .map(|k| t.weight(GroupId(k as u32)).get())
                .chain(job_weights.iter().copied())
                .max()
                .unwrap_or(1);
            for k in 1..t.len() {
                let id = GroupId(k as u32);
                let parent = b.dirs[t.parent(id).0 as usize].clone();
                let w = b.cpu_weight(t.weight(id).get());
                let d = b.tree.add(&parent, &format!("g{k}"), w, true)?;
                b.dirs.push(d);
            }
        } else {
            b.wmax = job_weights.iter().copied().max().unwrap_or(1);
        }
        self.cg2 = Some(b);
        Ok(())
    }

    /// Put job `i` in its own leaf cgroup under its group's.
    pub(super) fn enter_cgroup2(&mut self, i: usize) -> Result<(), ProcError> {
        let g = self.rec.member_of[i] as usize;
        let (pid, w) = (self.jobs[i].pid, self.jobs[i].weight);
        let Some(b) = self.cg2.as_mut() else { return Ok(()) };
        let parent = b.dirs[g].clone();
        let cw = b.cpu_weight(w);
        let leaf = b.tree.add(&parent, &format!("j{i}"), cw, false)?;
        b.tree.enter(&leaf, pid)?;
        b.leaves.push(leaf);
        self.jobs[i].cgroup = Some(b.leaves.len() - 1);
        Ok(())
    }

    /// Job `i`'s leaf gets the `cpu.weight` of its weight.
    pub(super) fn reweigh_cgroup2(&mut self, i: usize) -> Result<(), ProcError> {
        let (Some(b), Some(k)) = (self.cg2.as_ref(), self.jobs[i].cgroup) else { return Ok(()) };
        b.tree.set_weight(&b.leaves[k], b.cpu_weight(self.jobs[i].weight))
    }

    /// Start enforcing the subtree at `root`: its groups, then its processes.
    pub(super) fn start_watch(&mut self, root: &Path, every: Time) -> Result<(), ProcError> {
        let sub = cgroup2::read_subtree(root)?;
        self.groups = Some(HostGroups::new(&[])?);
        self.watch = Some(Watch {
            root: root.to_path_buf(),
            every,
            next_at: 0,
            group_of: HashMap::from([(String::new(), ROOT)]),
            weights: vec![0],
        });
        self.apply_subtree(&sub)?;
        let next = self.now().saturating_add(every);
        if let Some(w) = self.watch.as_mut() {
            w.next_at = next;
        }
        Ok(())
    }

    /// Read the subtree again if it is time; returns when to read next.
    pub(super) fn sync_watch(&mut self) -> Result<Option<Time>, ProcError> {
        let Some(w) = self.watch.as_ref() else { return Ok(None) };
        let now = self.now();
        if now < w.next_at {
            return Ok(Some(w.next_at));
        }
        let (root, every) = (w.root.clone(), w.every);
        match cgroup2::read_subtree(&root) {
            Ok(sub) => self.apply_subtree(&sub)?,
            // A cgroup removed while we walked: read again next time.
            Err(e) => self.note(format!(
                "reading --cgroup2 {}: {e} (tried again in {} ms)",
                root.display(),
                every / 1_000_000
            )),
        }
        let next = self.now().saturating_add(every);
        if let Some(w) = self.watch.as_mut() {
            w.next_at = next;
        }
        Ok(Some(next))
    }

    /// Make the run match `sub`: new groups, weight changes, new processes,
    /// processes moved between its cgroups or gone from it.
    fn apply_subtree(&mut self, sub: &Subtree) -> Result<(), ProcError> {
        let now = self.now();
        let mut ids: Vec<GroupId> = Vec::with_capacity(sub.cgroups.len());
        for c in &sub.cgroups {
            let w = self.watch.as_ref().and_then(|x| x.group_of.get(&c.rel).copied());
            let id = match (w, c.parent) {
                (Some(id), _) => id,
                (None, None) => ROOT,
                (None, Some(p)) => {
                    let groups = self.groups.as_mut().expect("watching has groups");
                    let weight = Weight::new(c.weight).map_err(|e| ProcError::usage(format!("{}: {e}", c.rel)))?;
                    let id = groups.add(&c.rel, ids[p], weight)?;
                    self.rec.add_group(&c.rel, c.weight, ids[p].0);
                    let watch = self.watch.as_mut().expect("watching");
                    watch.group_of.insert(c.rel.clone(), id);
                    watch.weights.push(c.weight);
                    ids.push(id);
                    continue;
                }
            };
            ids.push(id);
            let watch = self.watch.as_mut().expect("watching");
            if id != ROOT && watch.weights[id.0 as usize] != c.weight {
                watch.weights[id.0 as usize] = c.weight;
                let weight = Weight::new(c.weight).map_err(|e| ProcError::usage(format!("{}: {e}", c.rel)))?;
                if let (Some(s), Some(g)) = (self.sched.as_mut(), self.groups.as_mut()) {
                    g.set_group_weight(&mut **s, now, id, weight)?;
                }
                self.rec.group_change(now, GroupChange::Weight { group: id.0, weight: c.weight });
            }
        }
        // Processes: by pid, the live jobs we attached from the subtree.
        let live: HashMap<Pid, usize> =
            (0..self.jobs.len()).filter(|&i| self.jobs[i].st != St::Gone).map(|i| (self.jobs[i].pid, i)).collect();
        let mut seen: Vec<usize> = Vec::new();
        let own = [sys::getpid(), self.guardian.as_ref().map_or(-1, |g| g.pid())];
        for &(pid, k) in &sub.procs {
            let g = ids[k];
            match live.get(&pid) {
                Some(&i) => {
                    seen.push(i);
                    if self.current_group(i) != g.0 {
                        if let (Some(s), Some(gs)) = (self.sched.as_mut(), self.groups.as_mut()) {
                            gs.move_client(&mut **s, now, ClientId(i as u32), g)?;
                        }
                        self.rec.group_change(now, GroupChange::Move { client: i, group: g.0 });
                    }
                }
                None if own.contains(&pid) || self.jobs.iter().any(|j| j.pid == pid) => {}
                None => {
                    let name = self.groups.as_ref().map(|x| x.names()[g.0 as usize].clone()).filter(|n| !n.is_empty());
                    let mut spec = [JobSpec { group: name, ..JobSpec::pid(1, pid) }];
                    let mut taken = self.names.clone();
                    spec::assign_names(&mut spec, &mut taken)?;
                    match self.add_job(&spec[0], None) {
                        Ok(i) => seen.push(i),
                        Err(e) if e.is_usage() => {
                            let cg = &sub.cgroups[k].rel;
                            self.note(format!(
                                "PID {pid} of cgroup {:?} is not managed: {e}",
                                if cg.is_empty() { "." } else { cg }
                            ));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        // Gone from the subtree but alive: released, and it leaves.
        for &i in live.values() {
            if !seen.contains(&i) && !self.exited(i) {
                self.jobs[i].end = Some("left the cgroup subtree".into());
                self.job_left(i, now)?;
                let j = &mut self.jobs[i];
                let _ = sys::set_process_affinity(j.pid, &j.orig_mask);
                j.signal(if j.user_stopped { libc::SIGSTOP } else { libc::SIGCONT });
                j.sigstopped = j.user_stopped;
                j.pinned = None;
            }
        }
        Ok(())
    }

    /// Job `i`'s group now (a group id index).
    fn current_group(&self, i: usize) -> u32 {
        self.groups
            .as_ref()
            .and_then(|g| g.tree().client(ClientId(i as u32)).map(|c| c.0 .0))
            .unwrap_or(self.rec.member_of[i])
    }
}
