//! Groups in a run ([`Engine::groups`]): the hierarchical fluid reference
//! ([`crate::hier`]) replaces the flat one, the scheduler sees each client's
//! effective weight from the shared adapter ([`propshare::groups::Flattener`]),
//! and each group's lag (its ideal service minus the service its members
//! received while in it) is sampled beside the clients'.
//!
//! # What the scheduler is told
//!
//! Every event is recorded in the adapter's tree first; the weights that
//! changed are then given to the scheduler with `set_weight`: a waking
//! client's before its `wake` (the scheduler places it at its new weight), a
//! joining client's as its `join` weight, the others' right after the event.
//! Weight-change trace events show the clients' own weights, not these.
//!
//! A group's move (with its subtree) reaches the reference
//! ([`HierFluid::move_group`]), the scheduler (the adapter's new weights, or
//! [`propshare::groups::Hierarchical::move_group`]) and the adapter's tree
//! at the same instant; a group's departure is the departure of every
//! client in it or below it then. A group that has not arrived or has left
//! has no client, so it takes no share: the tree holds every group from the
//! start.
//!
//! A natively hierarchical scheduler ([`Scheduler::hierarchical`], such as
//! `hwf2q`) gets the tree instead: the same groups, each client placed in
//! its group before it joins, group weight changes and moves as they
//! happen, and the clients' own weights. The adapter's tree still keeps the
//! books (group membership for the group lag), but no effective weight is
//! computed.
//!
//! # Group lag
//!
//! A group's lag changes slope whenever a member starts or stops or any
//! rate in the tree changes, so every group is sampled whenever any client
//! is (at every start and stop, wake and departure) and at every arrival,
//! group weight change and move: its extremes are exact. O(G + P · depth)
//! per sample. A client that runs when it (or a group above it) moves has
//! what it ran so far credited to its old path at the move, the rest of the
//! run to its new one.

use propshare::groups::{Flattener, Flattening, GroupId, GroupTree, ROOT};
use propshare::{ClientId, Scheduler, Time, Weight};

use super::{Engine, Reference, SimError};
use crate::fluid::FRAC;
use crate::hier::HierFluid;

/// The prefix of a scheduler name that runs it under lazy flattening
/// ([`Flattening::Lazy`], a model of scx_flatcg): `"lazy:wf2q"`.
pub const LAZY_PREFIX: &str = "lazy:";

/// How scheduler `name` flattens groups, and its name without the prefix.
pub fn flattening_of(name: &str) -> (Flattening, &str) {
    match name.strip_prefix(LAZY_PREFIX) {
        Some(inner) => (Flattening::Lazy, inner),
        None => (Flattening::Exact, name),
    }
}

/// One group of a run: its name, weight, parent (index into the list;
/// `None`: the root) and weight changes.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupSpec {
    /// Name.
    pub name: String,
    /// Weight.
    pub weight: Weight,
    /// Parent group, by index (earlier in the list); `None`: the root.
    pub parent: Option<usize>,
    /// (time, new weight).
    pub weight_changes: Vec<(Time, Weight)>,
    /// (time, new parent by index, `None`: the root): it moves with its subtree.
    pub moves: Vec<(Time, Option<usize>)>,
    /// When it leaves, with every client and group in it then.
    pub depart: Option<Time>,
}

/// The groups of a run and which group each client joins.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupsSpec {
    /// The groups; a parent comes before its children.
    pub groups: Vec<GroupSpec>,
    /// Per client (in the order given to [`Engine::new`]): its group, by
    /// index (`None`: the root). Clients past the end (chain members) join the root.
    pub member_of: Vec<Option<usize>>,
    /// Moves: at time t, client i (an index as in `member_of`) moves to group k.
    pub moves: Vec<(Time, usize, usize)>,
}

/// One group's results.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStats {
    /// Name.
    pub name: String,
    /// Service its members received while in it, against the group's
    /// hierarchical fluid ideal at the horizon.
    pub service: super::ServiceStats,
}

/// The run's group state.
pub(super) struct GroupState {
    adapter: Flattener,
    /// The scheduler schedules the tree itself: no effective weights.
    native: bool,
    /// Group of client i at its arrival.
    member_of: Vec<GroupId>,
    /// Client i joined the adapter's tree before the run (it arrives at the start).
    prejoined: Vec<bool>,
    names: Vec<String>,
    weights: Vec<u64>,
    /// Per group: service received by members while in it, ns.
    received: Vec<Time>,
    /// Per group: lag extremes (fixed point), and whether sampled.
    max_lag: Vec<i128>,
    min_lag: Vec<i128>,
    sampled: Vec<bool>,
    /// Scratch: per group, service of the running members not yet credited.
    running: Vec<Time>,
    /// Per CPU: the run on it was credited to its groups up to here (a
    /// move of its client or of a group above it); runs started later
    /// are credited from their start.
    credited_until: Vec<Time>,
}

impl<S: Scheduler> Engine<S> {
    /// Run with these groups: the clients get the effective weights of the
    /// shared adapter and lag is measured against the hierarchical fluid
    /// reference. Call before [`Engine::run`].
    pub fn groups(&mut self, spec: &GroupsSpec, flattening: Flattening) -> Result<(), SimError> {
        let mut tree = GroupTree::new();
        let mut ids = Vec::with_capacity(spec.groups.len());
        for (k, g) in spec.groups.iter().enumerate() {
            let parent = match g.parent {
                None => ROOT,
                Some(p) if p < k => ids[p],
                Some(p) => {
                    return Err(SimError::Config(format!("group {:?}: parent {p} is not an earlier group", g.name)))
                }
            };
            let id =
                tree.add_group(parent, g.weight).map_err(|e| SimError::Config(format!("group {:?}: {e}", g.name)))?;
            if let Some(h) = self.sched.hierarchical() {
                let own =
                    h.add_group(parent, g.weight).map_err(|e| SimError::Config(format!("group {:?}: {e}", g.name)))?;
                if own != id {
                    return Err(SimError::Config(format!(
                        "group {:?}: the scheduler numbered it {own:?}, not {id:?}",
                        g.name
                    )));
                }
            }
            ids.push(id);
            for &(t, w) in &g.weight_changes {
                self.push(t, super::events::Event::GroupWeight(id.0, w));
            }
        }
        // At one instant: group weight changes, client moves, group moves,
        // then departures (the order of these pushes).
        for &(t, i, k) in &spec.moves {
            let g = *ids.get(k).ok_or_else(|| SimError::Config(format!("move of client {i}: no group {k}")))?;
            self.push(t, super::events::Event::MoveClient(i as u32, g.0));
        }
        for (k, g) in spec.groups.iter().enumerate() {
            for &(t, p) in &g.moves {
                let parent = match p {
                    None => ROOT,
                    Some(p) => *ids
                        .get(p)
                        .ok_or_else(|| SimError::Config(format!("group {:?}: a move to no group {p}", g.name)))?,
                };
                self.push(t, super::events::Event::MoveGroup(ids[k].0, parent.0));
            }
        }
        for (k, g) in spec.groups.iter().enumerate() {
            if let Some(t) = g.depart {
                self.push(t, super::events::Event::GroupDepart(ids[k].0));
            }
        }
        let n = tree.len();
        let member_of: Vec<GroupId> = (0..self.clients.len())
            .map(|i| spec.member_of.get(i).copied().flatten().map_or(ROOT, |k| ids[k]))
            .collect();
        self.fluid = Reference::Hier(Box::new(HierFluid::new(self.cfg.cpus, tree.clone())));
        // The clients that arrive at the start join the adapter's tree now,
        // all at once, so each joins the scheduler at its final weight.
        let first: Vec<u32> = self.queue.fixed_arrivals_at(self.now).collect();
        let mut adapter = Flattener::with_mode(tree, flattening);
        let mut prejoined = vec![false; self.clients.len()];
        for &i in &first {
            let (c, w) = (Self::id(i as usize), self.clients[i as usize].weight);
            adapter
                .tree_mut()
                .join(c, member_of[i as usize], w)
                .map_err(|e| SimError::Config(format!("groups: {e}")))?;
            prejoined[i as usize] = true;
        }
        let native = self.sched.hierarchical().is_some();
        for &i in first.iter().filter(|_| !native) {
            adapter.changes(Some(Self::id(i as usize))).map_err(|e| SimError::Config(format!("groups: {e}")))?;
        }
        self.static_set = false;
        let mut names = vec![String::new()];
        names.extend(spec.groups.iter().map(|g| g.name.clone()));
        let mut weights = vec![1];
        weights.extend(spec.groups.iter().map(|g| g.weight.get()));
        self.groups = Some(Box::new(GroupState {
            adapter,
            native,
            member_of,
            prejoined,
            names,
            weights,
            received: vec![0; n],
            max_lag: vec![0; n],
            min_lag: vec![0; n],
            sampled: vec![false; n],
            running: vec![0; n],
            credited_until: vec![0; self.cfg.cpus],
        }));
        Ok(())
    }

    /// Client i joins group `g` with weight `w`: record it in the adapter
    /// (unless it joined before the run) and return the weight the scheduler
    /// gets, `w` without groups.
    pub(super) fn join_groups(&mut self, i: usize, g: GroupId, w: Weight) -> Result<Weight, SimError> {
        let Some(gs) = self.groups.as_mut() else { return Ok(w) };
        if gs.native {
            if !std::mem::take(&mut gs.prejoined[i]) {
                gs.adapter.tree_mut().join(Self::id(i), g, w).map_err(|e| SimError::Config(format!("groups: {e}")))?;
            }
            let h = self.sched.hierarchical().expect("native");
            h.place(self.now, Self::id(i), g).map_err(|e| SimError::Config(format!("groups: {e}")))?;
            return Ok(w);
        }
        if gs.prejoined.get(i).copied().unwrap_or(false) {
            gs.prejoined[i] = false;
            return Ok(gs.adapter.issued(Self::id(i)).unwrap_or(w));
        }
        let own = self.regroup(Some(i), |t| t.join(Self::id(i), g, w))?;
        Ok(own.or_else(|| self.groups.as_ref()?.adapter.issued(Self::id(i))).unwrap_or(w))
    }

    /// Whether the scheduler schedules the groups itself (it is given the
    /// clients' own weights and every group event).
    pub(super) fn native_groups(&self) -> bool {
        self.groups.as_ref().is_some_and(|g| g.native)
    }

    /// The group client i joins (the root for clients without one).
    pub(super) fn group_of(&self, i: usize) -> GroupId {
        self.groups.as_ref().and_then(|g| g.member_of.get(i).copied()).unwrap_or(ROOT)
    }

    /// Record a change in the adapter's tree and tell the scheduler every
    /// effective weight that changed, except client `skip`'s (returned if
    /// it changed). Without groups: nothing, `None`.
    pub(super) fn regroup(
        &mut self,
        skip: Option<usize>,
        f: impl FnOnce(&mut GroupTree) -> Result<(), propshare::groups::GroupError>,
    ) -> Result<Option<Weight>, SimError> {
        let Some(gs) = self.groups.as_mut() else { return Ok(None) };
        let config = |e: propshare::groups::GroupError| SimError::Config(format!("groups: {e}"));
        f(gs.adapter.tree_mut()).map_err(config)?;
        if gs.native {
            return Ok(None);
        }
        let changes = gs.adapter.changes(skip.map(Self::id)).map_err(config)?;
        let mut own = None;
        for (c, w) in changes {
            if Some(c.index()) == skip {
                own = Some(w);
            } else if self.groups.as_ref().is_some_and(|gs| gs.prejoined.get(c.index()).copied().unwrap_or(false)) {
                // Not joined yet: it joins at the weight issued last.
            } else {
                self.sched.set_weight(self.now, c, w).map_err(|e| self.refused(e))?;
            }
        }
        Ok(own)
    }

    /// Client i left: the adapter forgets the weight it issued.
    pub(super) fn forget_issued(&mut self, i: usize) {
        if let Some(gs) = self.groups.as_mut() {
            gs.adapter.forget(Self::id(i));
        }
    }

    /// Credit the run of client i on `cpu` from `start` to `end` to its
    /// group and their ancestors (the part not credited at a move).
    pub(super) fn credit_groups(&mut self, cpu: usize, i: usize, start: Time, end: Time) {
        if let Some(gs) = self.groups.as_mut() {
            let ran = end.saturating_sub(start.max(gs.credited_until[cpu]));
            if let Some((g, _, _)) = gs.adapter.tree().client(Self::id(i)) {
                for h in gs.adapter.tree().path(g).collect::<Vec<_>>() {
                    gs.received[h.0 as usize] += ran;
                }
            }
        }
    }

    /// Before a move changes the paths of the clients `moving` says: credit
    /// each of them that runs what it ran so far to its old path, so a
    /// group counts what its members received while in it.
    pub(super) fn credit_before_move(&mut self, moving: impl Fn(&GroupTree, ClientId) -> bool) {
        let now = self.now;
        for cpu in 0..self.cpus.len() {
            let Some(r) = self.cpus[cpu] else { continue };
            let moves = self.groups.as_ref().is_some_and(|gs| moving(gs.adapter.tree(), Self::id(r.client)));
            if moves && now > r.start {
                self.credit_groups(cpu, r.client, r.start, now);
                if let Some(gs) = self.groups.as_mut() {
                    gs.credited_until[cpu] = now;
                }
            }
        }
    }

    /// The clients present in group `g` or below it.
    pub(super) fn clients_below(&self, g: GroupId) -> Vec<usize> {
        let Some(gs) = self.groups.as_ref() else { return Vec::new() };
        let t = gs.adapter.tree();
        let mut out = Vec::new();
        let mut stack = vec![g];
        while let Some(h) = stack.pop() {
            out.extend(t.members(h).iter().map(|c| c.index()));
            stack.extend_from_slice(t.children(h));
        }
        out
    }

    /// Sample every group's lag now.
    pub(super) fn sample_groups(&mut self) {
        let now = self.now;
        let Some(gs) = self.groups.as_mut() else { return };
        let Reference::Hier(fluid) = &mut self.fluid else { return };
        gs.running.iter_mut().for_each(|r| *r = 0);
        for (cpu, r) in self.cpus.iter().enumerate() {
            if let Some(r) = r {
                if let Some((g, _, _)) = gs.adapter.tree().client(ClientId(r.client as u32)) {
                    let ran = now.saturating_sub(self.running_start[cpu].max(gs.credited_until[cpu]));
                    for h in gs.adapter.tree().path(g) {
                        gs.running[h.0 as usize] += ran;
                    }
                }
            }
        }
        for k in 1..gs.received.len() {
            let ideal = fluid.group_ideal(now, GroupId(k as u32));
            let lag = ideal as i128 - (((gs.received[k] + gs.running[k]) as i128) << FRAC);
            if gs.sampled[k] {
                gs.max_lag[k] = gs.max_lag[k].max(lag);
                gs.min_lag[k] = gs.min_lag[k].min(lag);
            } else {
                (gs.max_lag[k], gs.min_lag[k], gs.sampled[k]) = (lag, lag, true);
            }
        }
    }
}

/// The groups' results at the horizon.
pub(super) fn group_stats(gs: Option<Box<GroupState>>, fluid: &mut Reference, horizon: Time) -> Vec<GroupStats> {
    let (Some(gs), Reference::Hier(fluid)) = (gs, fluid) else { return Vec::new() };
    (1..gs.received.len())
        .map(|k| GroupStats {
            name: gs.names[k].clone(),
            service: super::ServiceStats {
                weight: gs.weights[k],
                received: gs.received[k],
                ideal: crate::fluid::ns_of_service(fluid.group_ideal(horizon, GroupId(k as u32))),
                max_lag: super::lag::ns_of_fixed(gs.max_lag[k]),
                min_lag: super::lag::ns_of_fixed(gs.min_lag[k]),
            },
        })
        .collect()
}
