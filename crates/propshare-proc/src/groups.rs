//! Groups of real processes: hierarchical weights (tenants, then their
//! processes) enforced by any registry scheduler through the core's shared
//! adapter ([`propshare::groups::Flattener`]).
//!
//! A run's groups come from `[[group]]` tables of the jobs file, `--group
//! NAME:WEIGHT[:PARENT]` flags, or a cgroup v2 subtree ([`crate::cgroup2`]).
//! [`build_tree`] checks them (names unique and without spaces, weights
//! positive integers, parents declared, no cycle, at most
//! [`propshare::groups::MAX_DEPTH`] levels) and makes the core's
//! [`GroupTree`]. [`HostGroups`] then keeps the adapter beside the
//! scheduler: every join, leave, block, wake and weight change is recorded in
//! the adapter's tree first, and every effective weight that changed is
//! given to the scheduler (`set_weight`; a joining client's as its `join`
//! weight, a waking client's before its `wake`), as the simulator does
//! (`propshare_sim::engine`'s groups). The scheduler never sees the tree.

use propshare::groups::{Flattener, GroupError, GroupId, GroupTree, ROOT};
use propshare::{ClientId, Scheduler, Time, Weight};

use crate::error::ProcError;

/// One group as declared: name, weight, parent (a group name; `None`: the root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDef {
    /// Its name (unique, no spaces).
    pub name: String,
    /// Its weight, a positive integer.
    pub weight: u64,
    /// Its parent's name (`None`: the root).
    pub parent: Option<String>,
}

impl GroupDef {
    /// Parse `NAME:WEIGHT[:PARENT]` (the `--group` flag).
    pub fn parse(s: &str) -> Result<GroupDef, ProcError> {
        let bad =
            |why: &str| ProcError::usage(format!("--group {s:?}: {why} (write NAME:WEIGHT or NAME:WEIGHT:PARENT)"));
        let mut f = s.split(':');
        let name = f.next().unwrap_or_default().to_string();
        let weight = f.next().ok_or_else(|| bad("no weight"))?;
        let weight = weight.parse::<u64>().map_err(|_| bad(&format!("weight {weight:?} is not a positive integer")))?;
        Weight::new(weight).map_err(|e| bad(&e.to_string()))?;
        let parent = f.next().map(str::to_string);
        if f.next().is_some() {
            return Err(bad("too many fields"));
        }
        Ok(GroupDef { name, weight, parent })
    }
}

/// Why [`build_tree`] refused a group: its index, the field and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFault {
    /// The group's index in the list given.
    pub index: usize,
    /// `name`, `weight` or `parent`.
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

/// The tree of `defs` (any order: a parent may come after its child), and
/// each def's group id.
pub fn build_tree(defs: &[GroupDef]) -> Result<(GroupTree, Vec<GroupId>), GroupFault> {
    let fault = |index: usize, field: &'static str, message: String| GroupFault { index, field, message };
    for (i, d) in defs.iter().enumerate() {
        if d.name.is_empty() || d.name.chars().any(char::is_whitespace) {
            return Err(fault(i, "name", format!("group name {:?} must be non-empty without spaces", d.name)));
        }
        if defs[..i].iter().any(|e| e.name == d.name) {
            return Err(fault(i, "name", format!("duplicate group name {:?}", d.name)));
        }
        Weight::new(d.weight).map_err(|e| fault(i, "weight", e.to_string()))?;
    }
    let mut parent = Vec::with_capacity(defs.len());
    for (i, d) in defs.iter().enumerate() {
        parent.push(match &d.parent {
            None => None,
            Some(p) => Some(defs.iter().position(|e| &e.name == p).ok_or_else(|| {
                fault(i, "parent", format!("no group named {p:?} (parents are group names; omit it for the root)"))
            })?),
        });
    }
    // Add every group whose parent is in the tree, until none is left; what
    // cannot be added sits on a cycle.
    let mut ids: Vec<Option<GroupId>> = vec![None; defs.len()];
    let mut tree = GroupTree::new();
    loop {
        let mut added = false;
        for i in 0..defs.len() {
            if ids[i].is_some() {
                continue;
            }
            let under = match parent[i] {
                None => ROOT,
                Some(p) => match ids[p] {
                    Some(g) => g,
                    None => continue,
                },
            };
            let w = Weight::new(defs[i].weight).expect("checked above");
            let g = tree.add_group(under, w).map_err(|e| match e {
                GroupError::TooDeep(d) => fault(
                    i,
                    "parent",
                    format!("the group would sit at depth {d}, deeper than {}", propshare::groups::MAX_DEPTH),
                ),
                e => fault(i, "name", e.to_string()),
            })?;
            ids[i] = Some(g);
            added = true;
        }
        if !added {
            break;
        }
    }
    if let Some(i) = ids.iter().position(Option::is_none) {
        return Err(fault(i, "parent", format!("group {:?} is its own ancestor (a cycle)", defs[i].name)));
    }
    Ok((tree, ids.into_iter().map(|g| g.expect("every group added")).collect()))
}

/// The adapter beside a run's scheduler, and the run's group names.
pub(crate) struct HostGroups {
    adapter: Flattener,
    /// Group names by [`GroupId`] index (the root's is empty).
    names: Vec<String>,
}

impl HostGroups {
    /// Groups from checked defs (see [`build_tree`]).
    pub(crate) fn new(defs: &[GroupDef]) -> Result<HostGroups, ProcError> {
        let (tree, ids) = build_tree(defs)
            .map_err(|f| ProcError::usage(format!("group {:?}: {}: {}", defs[f.index].name, f.field, f.message)))?;
        let mut names = vec![String::new(); tree.len()];
        for (d, g) in defs.iter().zip(ids) {
            names[g.0 as usize] = d.name.clone();
        }
        Ok(HostGroups { adapter: Flattener::new(tree), names })
    }

    /// The group named `name` (`None`: the root).
    pub(crate) fn id(&self, name: Option<&str>) -> Result<GroupId, ProcError> {
        match name {
            None => Ok(ROOT),
            Some(n) => self
                .names
                .iter()
                .position(|x| x == n)
                .filter(|&k| k > 0)
                .map(|k| GroupId(k as u32))
                .ok_or_else(|| ProcError::usage(format!("no group named {n:?}"))),
        }
    }

    /// A new group `name` of weight `w` under `parent` (cgroup v2 subtrees grow).
    pub(crate) fn add(&mut self, name: &str, parent: GroupId, w: Weight) -> Result<GroupId, ProcError> {
        let g = self
            .adapter
            .tree_mut()
            .add_group(parent, w)
            .map_err(|e| ProcError::usage(format!("group {name:?}: {e}")))?;
        self.names.push(name.to_string());
        debug_assert_eq!(self.names.len(), g.0 as usize + 1);
        Ok(g)
    }

    /// Every group's name, by id (the root's is empty).
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The tree.
    pub(crate) fn tree(&self) -> &GroupTree {
        self.adapter.tree()
    }

    /// Record a change in the tree and give the scheduler every effective
    /// weight that changed, except `own`'s, which is returned if it changed
    /// (the caller gives it with the client's own event). `own` must be a
    /// client the scheduler knows, or `None`.
    fn apply(
        &mut self,
        sched: &mut dyn Scheduler,
        now: Time,
        own: Option<ClientId>,
        f: impl FnOnce(&mut GroupTree) -> Result<(), GroupError>,
    ) -> Result<Option<Weight>, ProcError> {
        f(self.adapter.tree_mut())?;
        let mut mine = None;
        for (c, w) in self.adapter.changes(own)? {
            if Some(c) == own {
                mine = Some(w);
            } else {
                sched.set_weight(now, c, w)?;
            }
        }
        Ok(mine)
    }

    /// [`apply`](Self::apply) for a change to client `c`, which the scheduler
    /// then also gets `c`'s new effective weight for, if it changed.
    fn apply_own(
        &mut self,
        sched: &mut dyn Scheduler,
        now: Time,
        c: ClientId,
        f: impl FnOnce(&mut GroupTree) -> Result<(), GroupError>,
    ) -> Result<(), ProcError> {
        if let Some(w) = self.apply(sched, now, Some(c), f)? {
            sched.set_weight(now, c, w)?;
        }
        Ok(())
    }

    /// Client `c` joins group `g` with its own weight `w`: the weight the
    /// scheduler's `join` gets.
    pub(crate) fn join(
        &mut self,
        sched: &mut dyn Scheduler,
        now: Time,
        c: ClientId,
        g: GroupId,
        w: Weight,
    ) -> Result<Weight, ProcError> {
        let own = self.apply(sched, now, Some(c), |t| t.join(c, g, w))?;
        Ok(own.or(self.adapter.issued(c)).unwrap_or(w))
    }

    /// Client `c` has left (the scheduler was told).
    pub(crate) fn leave(&mut self, sched: &mut dyn Scheduler, now: Time, c: ClientId) -> Result<(), ProcError> {
        self.adapter.forget(c);
        self.apply(sched, now, None, |t| t.leave(c)).map(|_| ())
    }

    /// Client `c` has blocked (the scheduler was told).
    pub(crate) fn block(&mut self, sched: &mut dyn Scheduler, now: Time, c: ClientId) -> Result<(), ProcError> {
        self.apply(sched, now, None, |t| t.set_runnable(c, false)).map(|_| ())
    }

    /// Client `c` wakes: its new effective weight is given before the caller's `wake`.
    pub(crate) fn wake(&mut self, sched: &mut dyn Scheduler, now: Time, c: ClientId) -> Result<(), ProcError> {
        self.apply_own(sched, now, c, |t| t.set_runnable(c, true))
    }

    /// Client `c`'s own weight becomes `w`.
    pub(crate) fn set_weight(
        &mut self,
        sched: &mut dyn Scheduler,
        now: Time,
        c: ClientId,
        w: Weight,
    ) -> Result<(), ProcError> {
        self.apply_own(sched, now, c, |t| t.set_weight(c, w))
    }

    /// Group `g`'s weight becomes `w`.
    pub(crate) fn set_group_weight(
        &mut self,
        sched: &mut dyn Scheduler,
        now: Time,
        g: GroupId,
        w: Weight,
    ) -> Result<(), ProcError> {
        self.apply(sched, now, None, |t| t.set_group_weight(g, w)).map(|_| ())
    }

    /// Client `c` moves to group `g`.
    pub(crate) fn move_client(
        &mut self,
        sched: &mut dyn Scheduler,
        now: Time,
        c: ClientId,
        g: GroupId,
    ) -> Result<(), ProcError> {
        self.apply_own(sched, now, c, |t| t.move_client(c, g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, weight: u64, parent: Option<&str>) -> GroupDef {
        GroupDef { name: name.into(), weight, parent: parent.map(String::from) }
    }

    #[test]
    fn trees_are_built_parents_first_and_faults_are_located() {
        // A child declared before its parent.
        let (t, ids) = build_tree(&[def("a1", 2, Some("a")), def("a", 1, None), def("b", 3, None)]).unwrap();
        assert_eq!(t.parent(ids[0]), ids[1]);
        assert_eq!(t.parent(ids[1]), ROOT);
        assert_eq!(t.weight(ids[2]).get(), 3);
        let f = |defs: &[GroupDef]| build_tree(defs).unwrap_err();
        assert_eq!(f(&[def("a", 1, None), def("a", 2, None)]).field, "name");
        assert_eq!(f(&[def("a", 0, None)]).field, "weight");
        assert_eq!(f(&[def("a b", 1, None)]).field, "name");
        let unknown = f(&[def("a", 1, None), def("b", 1, Some("x"))]);
        assert_eq!((unknown.index, unknown.field), (1, "parent"));
        let cycle = f(&[def("a", 1, Some("b")), def("b", 1, Some("a"))]);
        assert!(cycle.message.contains("cycle"), "{cycle:?}");
        let mut deep = vec![def("g0", 1, None)];
        for k in 1..=propshare::groups::MAX_DEPTH {
            deep.push(def(&format!("g{k}"), 1, Some(&format!("g{}", k - 1))));
        }
        let d = f(&deep);
        assert_eq!((d.index, d.field), (propshare::groups::MAX_DEPTH as usize, "parent"));
    }

    /// A scheduler that only remembers the weight it was last given, and the calls.
    #[derive(Default)]
    struct Weights {
        now: std::collections::BTreeMap<u32, u64>,
        calls: Vec<String>,
    }

    impl Scheduler for Weights {
        fn name(&self) -> &str {
            "weights"
        }
        fn join(&mut self, _: Time, c: ClientId, w: Weight) -> Result<propshare::Kick, propshare::SchedError> {
            self.now.insert(c.0, w.get());
            self.calls.push(format!("join {} {}", c.0, w.get()));
            Ok(None)
        }
        fn leave(&mut self, _: Time, c: ClientId) -> Result<(), propshare::SchedError> {
            self.now.remove(&c.0);
            Ok(())
        }
        fn block(&mut self, _: Time, _: ClientId) -> Result<(), propshare::SchedError> {
            Ok(())
        }
        fn wake(&mut self, _: Time, c: ClientId) -> Result<propshare::Kick, propshare::SchedError> {
            self.calls.push(format!("wake {}", c.0));
            Ok(None)
        }
        fn set_weight(&mut self, _: Time, c: ClientId, w: Weight) -> Result<(), propshare::SchedError> {
            self.now.insert(c.0, w.get());
            self.calls.push(format!("weight {} {}", c.0, w.get()));
            Ok(())
        }
        fn pick(&mut self, _: Time, _: propshare::CpuId) -> Result<propshare::Decision, propshare::SchedError> {
            Ok(propshare::Decision::Idle)
        }
        fn stopped(
            &mut self,
            _: Time,
            _: propshare::CpuId,
            _: ClientId,
            _: Time,
            _: propshare::StopReason,
        ) -> Result<(), propshare::SchedError> {
            Ok(())
        }
    }

    /// The scheduler always holds weights proportional to the hierarchical
    /// shares of the runnable clients: the tree, A (1) with a0 and
    /// B (3) with b0..b7, then a0 blocks and wakes and B is reweighed.
    #[test]
    fn the_scheduler_sees_the_effective_weights() {
        let mut g = HostGroups::new(&[def("A", 1, None), def("B", 3, None)]).unwrap();
        let mut s = Weights::default();
        let (a, b) = (g.id(Some("A")).unwrap(), g.id(Some("B")).unwrap());
        for k in 0..9u32 {
            let c = ClientId(k);
            let w = g.join(&mut s, 0, c, if k == 0 { a } else { b }, Weight::ONE).unwrap();
            s.join(0, c, w).unwrap();
        }
        // a0: 1/4, each b: 3/32 → 8 : 3.
        let ratio = |s: &Weights, x: u32, y: u32| s.now[&x] as f64 / s.now[&y] as f64;
        assert!((ratio(&s, 0, 1) - 8.0 / 3.0).abs() < 1e-12, "{:?}", s.now);
        assert!((1..9).all(|k| s.now[&k] == s.now[&1]));
        // a0 blocks: the b's share B's 3/4 alone, unchanged among themselves.
        g.block(&mut s, 1, ClientId(0)).unwrap();
        s.calls.clear();
        // a0 wakes: its weight is given before its wake.
        g.wake(&mut s, 2, ClientId(0)).unwrap();
        s.wake(2, ClientId(0)).unwrap();
        if let Some(k) = s.calls.iter().position(|c| c.starts_with("weight 0 ")) {
            assert!(k < s.calls.iter().position(|c| c == "wake 0").unwrap(), "{:?}", s.calls);
        }
        assert!((ratio(&s, 0, 1) - 8.0 / 3.0).abs() < 1e-12, "{:?}", s.now);
        // B weighs 1 like A: a0 1/2, each b 1/16 → 8 : 1.
        g.set_group_weight(&mut s, 3, b, Weight::ONE).unwrap();
        assert!((ratio(&s, 0, 1) - 8.0).abs() < 1e-12, "{:?}", s.now);
        // b0 moves to A: a0 and b0 1/4 each, the seven left 1/14 → 7 : 2.
        g.move_client(&mut s, 4, ClientId(1), a).unwrap();
        assert_eq!(s.now[&0], s.now[&1]);
        assert!((ratio(&s, 0, 2) - 3.5).abs() < 1e-12, "{:?}", s.now);
        g.leave(&mut s, 5, ClientId(1)).unwrap();
        g.tree().check_invariants().unwrap();
    }

    #[test]
    fn group_flags() {
        assert_eq!(GroupDef::parse("web:3").unwrap(), def("web", 3, None));
        assert_eq!(GroupDef::parse("w1:2:web").unwrap(), def("w1", 2, Some("web")));
        for bad in ["web", "web:x", "web:-1", "web:0", "a:1:b:c"] {
            assert!(GroupDef::parse(bad).unwrap_err().is_usage(), "{bad}");
        }
    }
}
