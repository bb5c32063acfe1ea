//! Groups: hierarchical weights (tenants, then their processes), and the
//! one adapter through which every flat scheduler honours them.
//!
//! # The model
//!
//! A tree of *groups*, each with an integer [`Weight`], under one root;
//! clients are its leaves, each in one group with its own weight. A child
//! (group or client) is *active* while it has a runnable client (a client:
//! while it is runnable). A group's entitlement is divided among its active
//! children in proportion to their weights; the root's is the machine.
//!
//! # Effective weights (the adapter)
//!
//! A flat scheduler sees one weight per client. The client's *static
//! hierarchical share* is the product of the weight fractions on its path:
//!
//! ```text
//!     s_c = Π over the path root → … → g → c of  w_x / A(parent(x))
//! ```
//!
//! where `A(g)` is the sum of the weights of g's active children. It is a
//! rational; [`Flattener`] makes it an exact integer by scaling every runnable
//! client's share by a common *scale* S, a multiple of all their
//! denominators. The first time (or when the last scale no longer fits) S is
//! their least common multiple divided by the greatest common divisor of the
//! results: the smallest integer weights exactly proportional to the shares.
//! Afterwards S is kept, or raised to lcm(S, denominators), while S stays
//! within [`Weight::MAX`]: a client whose share did not change then keeps
//! its weight, so a scheduler is not reweighted for a renormalisation (a
//! reweight moves some algorithms' virtual times). Every step is checked
//! u128 arithmetic, and a result above [`Weight::MAX`] is refused with
//! [`GroupError::TooFine`] (never rounded). Readjustment (no client above one
//! CPU) is left to the scheduler on the flat weights; the hierarchical fluid
//! reference readjusts at every level, so the two differ where a subtree's
//! share exceeds its runnable clients while its siblings' do not (Gap GROUPS-1).
//!
//! # Cost
//!
//! The tree keeps, per group, its runnable-client count and `A(g)`; a join,
//! leave, block, wake, weight change or move updates them along one path:
//! O(depth). Flattening is exact only if every share changes with `A`, so a
//! change of `A(g)` changes the share of every runnable client under g, and a
//! change of the common scale changes them all: [`Flattener::changes`]
//! recomputes every runnable client, O(G + N) per event, and returns only the
//! weights that differ from those last issued. Measured (release build, 10
//! tenants of weights 1..=10, a block, a wake and a tenant weight change per
//! round, on a loaded 2-core machine): 7.7 µs per event at N = 100 (58
//! weights reissued), 116 µs at N = 1000 (699), 1.17 ms at N = 10 000 (4000,
//! unit weights): about 115 ns per runnable client. With unequal tenant sums
//! the exact weights outgrow 2^32 - 1 quickly (1000 clients of weights 1..=3
//! over those 10 tenants already need 1.3 · 10^10): the run stops with
//! [`GroupError::TooFine`] rather than round.
//!
//! # Lazy flattening (a model of scx_flatcg, for comparison)
//!
//! [`Flattening::Lazy`] models flattening as sched_ext's `scx_flatcg` does
//! it: shares in fixed point of [`HWEIGHT_ONE`] (`2^16`, flatcg's
//! `FCG_HWEIGHT_ONE`), rounded down at each level, and refreshed lazily: a
//! client's effective weight is recomputed only at its own events (join,
//! wake, its own weight change, a move); the weights of the others stay as
//! they were. When many children of a light parent wake together, each
//! computes its weight from the active set it saw at its wake (the first as
//! if alone), so together they hold more than the parent's share until
//! they sleep and wake again: the "thundering herd" flatcg's README admits.
//! This is a model of the error, not flatcg's code (which refreshes a
//! cgroup's hweight by generation when next used, and schedules a cgroup's
//! tasks from one queue).
//!
//! Gap GROUPS-1: the adapter's effective weight is the static share (no
//! capping inside the tree); a flat scheduler then readjusts over the flat
//! weights, which differs from readjusting at every level when a group holds
//! a client heavy enough to be capped inside it. The simulator measures
//! against the hierarchical reference, so that difference shows as lag.
//! (test: `flat_readjustment_differs_from_hierarchical`)

use crate::model::{ClientId, Weight};
use crate::roster::ClientTable;

/// A group, by index; [`ROOT`] is the whole machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u32);

/// The root group.
pub const ROOT: GroupId = GroupId(0);

/// The deepest a group may sit (the root's children are at depth 1): it bounds
/// the cost of every event and keeps the shares' denominators small.
pub const MAX_DEPTH: u32 = 8;

/// The most groups a tree may hold, the root included.
pub const MAX_GROUPS: usize = 4096;

/// Why a group operation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// No such group.
    #[error("no group {0:?}")]
    UnknownGroup(GroupId),
    /// No such client in the tree.
    #[error("client {0} is in no group")]
    UnknownClient(ClientId),
    /// The client is already in the tree.
    #[error("client {0} already joined")]
    AlreadyJoined(ClientId),
    /// The root has no weight or parent to change.
    #[error("the root group cannot be changed or moved")]
    Root,
    /// A group would sit deeper than [`MAX_DEPTH`].
    #[error("a group would sit at depth {0}, deeper than {MAX_DEPTH}")]
    TooDeep(u32),
    /// More than [`MAX_GROUPS`] groups.
    #[error("more than {MAX_GROUPS} groups")]
    TooManyGroups,
    /// A group cannot move under itself or its own descendant.
    #[error("group {0:?} cannot move under its own descendant {1:?}")]
    Cycle(GroupId, GroupId),
    /// The scheduler behind a group hook refused what the event asked of it.
    #[error("the scheduler refused: {0}")]
    Refused(String),
    /// The exact effective weights do not fit a [`Weight`].
    #[error("the exact effective weights need integers above 2^32 - 1 ({0}); use fewer levels or smaller weights")]
    TooFine(String),
}

/// A new group at `depth` when `groups` exist (the root included): refused
/// past [`MAX_DEPTH`] or [`MAX_GROUPS`].
pub fn check_new_group(depth: u32, groups: usize) -> Result<(), GroupError> {
    if depth > MAX_DEPTH {
        return Err(GroupError::TooDeep(depth));
    }
    if groups >= MAX_GROUPS {
        return Err(GroupError::TooManyGroups);
    }
    Ok(())
}

/// A scheduler that schedules the tree itself (a natively hierarchical
/// algorithm such as [`crate::algo::hwf2q`]) rather than the flat effective
/// weights of [`Flattener`]: the host builds the same tree in it, places
/// each client in its group before the client joins, and gives it the
/// clients' own weights. Reached through [`crate::Scheduler::hierarchical`].
pub trait Hierarchical {
    /// A new group of weight `weight` under `parent`; groups are numbered in
    /// the order added, the root being [`ROOT`], as in [`GroupTree::add_group`].
    fn add_group(&mut self, parent: GroupId, weight: Weight) -> Result<GroupId, GroupError>;

    /// Group `g`'s weight becomes `weight` at `now`.
    fn set_group_weight(&mut self, now: crate::Time, g: GroupId, weight: Weight) -> Result<(), GroupError>;

    /// Client `c` belongs to group `g` from `now` on: a client not joined
    /// yet joins there (a client never placed joins the root); a joined one
    /// (runnable, running or blocked) moves there.
    fn place(&mut self, now: crate::Time, c: ClientId, g: GroupId) -> Result<(), GroupError>;

    /// Group `g` moves, with its subtree, under `parent` at `now`, as
    /// [`GroupTree::move_group`] (refusing the root, a cycle, too deep a tree).
    fn move_group(&mut self, now: crate::Time, g: GroupId, parent: GroupId) -> Result<(), GroupError>;
}

#[derive(Clone, Debug)]
struct Node {
    weight: Weight,
    parent: GroupId,
    depth: u32,
    /// Runnable clients in the subtree.
    runnable: u64,
    /// A(g): the sum of the weights of the active children.
    active_weight: u64,
    children: Vec<GroupId>,
    members: Vec<ClientId>,
}

#[derive(Clone, Copy, Debug)]
struct Leaf {
    group: GroupId,
    weight: Weight,
    runnable: bool,
    /// Its index in its group's `members`.
    slot: u32,
}

/// The tree of groups and clients, with per-group runnable counts and
/// active weights kept up to date in O(depth) per event.
#[derive(Clone, Debug)]
pub struct GroupTree {
    nodes: Vec<Node>,
    leaves: ClientTable<Leaf>,
}

impl Default for GroupTree {
    fn default() -> Self {
        GroupTree::new()
    }
}

impl GroupTree {
    /// A tree with only the root.
    pub fn new() -> GroupTree {
        let root = Node {
            weight: Weight::ONE,
            parent: ROOT,
            depth: 0,
            runnable: 0,
            active_weight: 0,
            children: Vec::new(),
            members: Vec::new(),
        };
        GroupTree { nodes: vec![root], leaves: ClientTable::new() }
    }

    fn node(&self, g: GroupId) -> Result<&Node, GroupError> {
        self.nodes.get(g.0 as usize).ok_or(GroupError::UnknownGroup(g))
    }

    fn leaf(&self, c: ClientId) -> Result<Leaf, GroupError> {
        self.leaves.get(c).copied().ok_or(GroupError::UnknownClient(c))
    }

    /// A new group of weight `w` under `parent`.
    pub fn add_group(&mut self, parent: GroupId, w: Weight) -> Result<GroupId, GroupError> {
        let depth = self.node(parent)?.depth + 1;
        check_new_group(depth, self.nodes.len())?;
        let g = GroupId(self.nodes.len() as u32);
        self.nodes.push(Node {
            weight: w,
            parent,
            depth,
            runnable: 0,
            active_weight: 0,
            children: Vec::new(),
            members: Vec::new(),
        });
        self.nodes[parent.0 as usize].children.push(g);
        Ok(g)
    }

    /// Add `delta` runnable clients to `g` and its ancestors, keeping each
    /// parent's active weight in step with its children's activity. O(depth).
    fn shift(&mut self, mut g: GroupId, delta: i64) {
        loop {
            let n = &mut self.nodes[g.0 as usize];
            let was = n.runnable > 0;
            n.runnable = n.runnable.checked_add_signed(delta).expect("runnable count stays non-negative");
            let is = n.runnable > 0;
            if g == ROOT {
                return;
            }
            let (w, parent) = (n.weight.get(), n.parent);
            let p = &mut self.nodes[parent.0 as usize];
            if is && !was {
                p.active_weight += w;
            } else if was && !is {
                p.active_weight -= w;
            }
            g = parent;
        }
    }

    /// `g`'s weight becomes `w`.
    pub fn set_group_weight(&mut self, g: GroupId, w: Weight) -> Result<(), GroupError> {
        if g == ROOT {
            return Err(GroupError::Root);
        }
        let n = self.node(g)?;
        let (old, parent, active) = (n.weight.get(), n.parent, n.runnable > 0);
        if active {
            let p = &mut self.nodes[parent.0 as usize];
            p.active_weight = p.active_weight - old + w.get();
        }
        self.nodes[g.0 as usize].weight = w;
        Ok(())
    }

    /// Move `g` (with its subtree) under `parent`.
    pub fn move_group(&mut self, g: GroupId, parent: GroupId) -> Result<(), GroupError> {
        if g == ROOT {
            return Err(GroupError::Root);
        }
        self.node(g)?;
        self.node(parent)?;
        let mut x = parent;
        while x != ROOT {
            if x == g {
                return Err(GroupError::Cycle(g, parent));
            }
            x = self.nodes[x.0 as usize].parent;
        }
        let new_depth = self.nodes[parent.0 as usize].depth + 1;
        let deepest = self.height(g) + new_depth;
        if deepest > MAX_DEPTH {
            return Err(GroupError::TooDeep(deepest));
        }
        let runnable = self.nodes[g.0 as usize].runnable as i64;
        let old = self.nodes[g.0 as usize].parent;
        // Detach: the subtree's clients leave the old path, then join the new one.
        self.shift(g, -runnable);
        self.nodes[old.0 as usize].children.retain(|&x| x != g);
        self.nodes[g.0 as usize].parent = parent;
        self.nodes[parent.0 as usize].children.push(g);
        self.set_depths(g, new_depth);
        self.shift(g, runnable);
        Ok(())
    }

    /// Levels below `g` (0: no child group).
    fn height(&self, g: GroupId) -> u32 {
        self.nodes[g.0 as usize].children.iter().map(|&c| 1 + self.height(c)).max().unwrap_or(0)
    }

    fn set_depths(&mut self, g: GroupId, depth: u32) {
        self.nodes[g.0 as usize].depth = depth;
        for k in 0..self.nodes[g.0 as usize].children.len() {
            let c = self.nodes[g.0 as usize].children[k];
            self.set_depths(c, depth + 1);
        }
    }

    fn attach(&mut self, c: ClientId, g: GroupId, w: Weight, runnable: bool) {
        let members = &mut self.nodes[g.0 as usize].members;
        let slot = members.len() as u32;
        members.push(c);
        self.leaves.insert(c, Leaf { group: g, weight: w, runnable, slot });
        if runnable {
            self.nodes[g.0 as usize].active_weight += w.get();
            self.shift(g, 1);
        }
    }

    fn detach(&mut self, c: ClientId) -> Result<Leaf, GroupError> {
        let l = self.leaf(c)?;
        let members = &mut self.nodes[l.group.0 as usize].members;
        members.swap_remove(l.slot as usize);
        if let Some(&moved) = members.get(l.slot as usize) {
            self.leaves.get_mut(moved).expect("member is a leaf").slot = l.slot;
        }
        self.leaves.remove(c);
        if l.runnable {
            self.nodes[l.group.0 as usize].active_weight -= l.weight.get();
            self.shift(l.group, -1);
        }
        Ok(l)
    }

    /// Client `c` joins group `g`, runnable, with weight `w`.
    pub fn join(&mut self, c: ClientId, g: GroupId, w: Weight) -> Result<(), GroupError> {
        self.node(g)?;
        if self.leaves.get(c).is_some() {
            return Err(GroupError::AlreadyJoined(c));
        }
        self.attach(c, g, w, true);
        Ok(())
    }

    /// Client `c` leaves.
    pub fn leave(&mut self, c: ClientId) -> Result<(), GroupError> {
        self.detach(c).map(|_| ())
    }

    /// Client `c` blocks (`false`) or wakes (`true`).
    pub fn set_runnable(&mut self, c: ClientId, runnable: bool) -> Result<(), GroupError> {
        let l = self.leaf(c)?;
        if l.runnable != runnable {
            self.detach(c)?;
            self.attach(c, l.group, l.weight, runnable);
        }
        Ok(())
    }

    /// Client `c`'s weight becomes `w`.
    pub fn set_weight(&mut self, c: ClientId, w: Weight) -> Result<(), GroupError> {
        let l = self.leaf(c)?;
        self.detach(c)?;
        self.attach(c, l.group, w, l.runnable);
        Ok(())
    }

    /// Client `c` moves to group `g`.
    pub fn move_client(&mut self, c: ClientId, g: GroupId) -> Result<(), GroupError> {
        self.node(g)?;
        let l = self.detach(c)?;
        self.attach(c, g, l.weight, l.runnable);
        Ok(())
    }

    /// Groups, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// `g`, if it is a group of the tree.
    pub fn check_group(&self, g: GroupId) -> Result<GroupId, GroupError> {
        self.node(g).map(|_| g)
    }

    /// Whether the tree is only the root (it never is empty).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `g`'s weight, parent, depth, runnable clients and active weight `A(g)`.
    pub fn weight(&self, g: GroupId) -> Weight {
        self.nodes[g.0 as usize].weight
    }

    /// `g`'s parent (the root's is itself).
    pub fn parent(&self, g: GroupId) -> GroupId {
        self.nodes[g.0 as usize].parent
    }

    /// Runnable clients under `g`.
    pub fn runnable(&self, g: GroupId) -> u64 {
        self.nodes[g.0 as usize].runnable
    }

    /// `A(g)`: the sum of the weights of `g`'s active children.
    pub fn active_weight(&self, g: GroupId) -> u64 {
        self.nodes[g.0 as usize].active_weight
    }

    /// `g`'s child groups.
    pub fn children(&self, g: GroupId) -> &[GroupId] {
        &self.nodes[g.0 as usize].children
    }

    /// The clients directly in `g`.
    pub fn members(&self, g: GroupId) -> &[ClientId] {
        &self.nodes[g.0 as usize].members
    }

    /// Client `c`'s group, weight and whether it is runnable.
    pub fn client(&self, c: ClientId) -> Option<(GroupId, Weight, bool)> {
        self.leaves.get(c).map(|l| (l.group, l.weight, l.runnable))
    }

    /// `g` and its ancestors up to (not including) the root, nearest first.
    pub fn path(&self, g: GroupId) -> impl Iterator<Item = GroupId> + '_ {
        std::iter::successors(Some(g), |&x| Some(self.parent(x))).take_while(|&x| x != ROOT)
    }

    /// The tree's bookkeeping, recounted from scratch: the first mismatch.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (k, n) in self.nodes.iter().enumerate() {
            let direct = n.members.iter().filter(|&&c| self.leaves.get(c).is_some_and(|l| l.runnable));
            let mut count = direct.clone().count() as u64;
            let mut active = direct.map(|&c| self.leaves.get(c).map_or(0, |l| l.weight.get())).sum::<u64>();
            for &ch in &n.children {
                let child = &self.nodes[ch.0 as usize];
                count += child.runnable;
                if child.runnable > 0 {
                    active += child.weight.get();
                }
            }
            if (count, active) != (n.runnable, n.active_weight) {
                return Err(format!(
                    "group {k}: counted {count} runnable, active weight {active}; recorded {}, {}",
                    n.runnable, n.active_weight
                ));
            }
        }
        Ok(())
    }
}

/// lcm(a, b) for a scale `a` (0: none yet, the result is `b`), if it fits.
fn lcm_checked(a: u128, b: u128) -> Option<u128> {
    match a {
        0 => None,
        a => (a / gcd(a, b)).checked_mul(b),
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// How the adapter flattens the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flattening {
    /// Every runnable client's exact share, refreshed at every event.
    #[default]
    Exact,
    /// Fixed-point shares refreshed only at each client's own events (module docs).
    Lazy,
}

/// The fixed-point one of [`Flattening::Lazy`]'s shares (scx_flatcg's `FCG_HWEIGHT_ONE`).
pub const HWEIGHT_ONE: u64 = 1 << 16;

/// An exact share `num / den`, reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Share {
    num: u128,
    den: u128,
}

impl Share {
    /// `self · w / a`, reduced, or why it overflows.
    fn times(self, w: u64, a: u64) -> Result<Share, GroupError> {
        let (w, a) = (w as u128, a as u128);
        let g1 = gcd(self.num, a);
        let g2 = gcd(w, self.den);
        let num = (self.num / g1).checked_mul(w / g2);
        let den = (self.den / g2).checked_mul(a / g1);
        match (num, den) {
            (Some(num), Some(den)) => {
                let g = gcd(num, den).max(1);
                Ok(Share { num: num / g, den: den / g })
            }
            _ => Err(GroupError::TooFine("a share's denominator exceeds 2^128".into())),
        }
    }
}

/// The adapter: a [`GroupTree`] and the effective weight last issued to each
/// runnable client (module docs: the exact scaling and its cost).
#[derive(Clone, Debug, Default)]
pub struct Flattener {
    mode: Flattening,
    tree: GroupTree,
    issued: ClientTable<Weight>,
    /// Scratch: (client, share) of every runnable client.
    shares: Vec<(ClientId, Share)>,
    /// The weight of a share of 1 in the weights last computed (0: none yet).
    scale: u128,
}

impl Flattener {
    /// An adapter over `tree`.
    pub fn new(tree: GroupTree) -> Flattener {
        Flattener::with_mode(tree, Flattening::Exact)
    }

    /// An adapter over `tree` that flattens as `mode` says.
    pub fn with_mode(tree: GroupTree, mode: Flattening) -> Flattener {
        Flattener { mode, tree, issued: ClientTable::new(), shares: Vec::new(), scale: 0 }
    }

    /// `c`'s weight under [`Flattening::Lazy`]: its share in 1/[`HWEIGHT_ONE`],
    /// rounded down level by level, at least 1. A level whose child is
    /// inactive (`c` blocked) counts the child as if it were active.
    fn lazy_weight(&self, c: ClientId) -> Result<Weight, GroupError> {
        let (g, w, runnable) = self.tree.client(c).ok_or(GroupError::UnknownClient(c))?;
        let path: Vec<GroupId> = self.tree.path(g).collect();
        let mut h = HWEIGHT_ONE as u128;
        let active = |x: GroupId| self.tree.runnable(x) > 0;
        for &x in path.iter().rev() {
            let p = self.tree.parent(x);
            let wx = self.tree.weight(x).get() as u128;
            let a = self.tree.active_weight(p) as u128 + if active(x) { 0 } else { wx };
            h = h * wx / a.max(1);
        }
        let a = self.tree.active_weight(g) as u128 + if runnable { 0 } else { w.get() as u128 };
        let e = (h * w.get() as u128 / a.max(1)).clamp(1, Weight::MAX as u128);
        Ok(Weight::new(e as u64).expect("clamped to a weight"))
    }

    /// The tree.
    pub fn tree(&self) -> &GroupTree {
        &self.tree
    }

    /// The tree, to record an event; call [`Flattener::changes`] after.
    pub fn tree_mut(&mut self) -> &mut GroupTree {
        &mut self.tree
    }

    /// The effective weight last issued to `c`.
    pub fn issued(&self, c: ClientId) -> Option<Weight> {
        self.issued.get(c).copied()
    }

    /// Every runnable client's exact effective weight, in the order of a
    /// depth-first walk (module docs). O(G + N).
    pub fn effective(&mut self) -> Result<Vec<(ClientId, Weight)>, GroupError> {
        self.shares.clear();
        let mut stack = vec![(ROOT, Share { num: 1, den: 1 })];
        while let Some((g, s)) = stack.pop() {
            let a = self.tree.active_weight(g);
            for &c in self.tree.members(g) {
                if let Some((_, w, true)) = self.tree.client(c) {
                    self.shares.push((c, s.times(w.get(), a)?));
                }
            }
            for &h in self.tree.children(g) {
                if self.tree.runnable(h) > 0 {
                    stack.push((h, s.times(self.tree.weight(h).get(), a)?));
                }
            }
        }
        let mut lcm: u128 = 1;
        for &(_, s) in &self.shares {
            lcm = (lcm / gcd(lcm, s.den))
                .checked_mul(s.den)
                .ok_or_else(|| GroupError::TooFine("the shares' common denominator exceeds 2^128".into()))?;
        }
        // Keep the scale of the last weights issued when it still makes
        // every share an integer within Weight::MAX: clients whose share did
        // not change then keep their weight (no needless set_weight).
        let sticky = lcm_checked(self.scale, lcm).filter(|&s| s <= Weight::MAX as u128);
        let lcm = sticky.unwrap_or(lcm);
        let mut common: u128 = 0;
        for (_, s) in self.shares.iter_mut() {
            // Reuse num as the scaled integer.
            s.num = s
                .num
                .checked_mul(lcm / s.den)
                .ok_or_else(|| GroupError::TooFine("a scaled share exceeds 2^128".into()))?;
            common = gcd(common, s.num);
        }
        let common = if sticky.is_some() { 1 } else { common.max(1) };
        self.scale = lcm / common;
        self.shares
            .iter()
            .map(|&(c, s)| {
                let w = s.num / common;
                u64::try_from(w)
                    .ok()
                    .and_then(|w| Weight::new(w).ok())
                    .map(|w| (c, w))
                    .ok_or_else(|| GroupError::TooFine(format!("client {c} would need weight {w}")))
            })
            .collect()
    }

    /// After an event recorded in the tree: the runnable clients whose
    /// effective weight differs from the one last issued (or that had none),
    /// now recorded as issued. A client that stopped being runnable keeps
    /// its last weight (a flat scheduler ignores it until it wakes).
    ///
    /// Under [`Flattening::Lazy`] only `own` (the client whose event it
    /// was, if any, and if runnable) is refreshed.
    pub fn changes(&mut self, own: Option<ClientId>) -> Result<Vec<(ClientId, Weight)>, GroupError> {
        let now = match (self.mode, own) {
            (Flattening::Exact, _) => self.effective()?,
            (Flattening::Lazy, Some(c)) if self.tree.client(c).is_some_and(|x| x.2) => vec![(c, self.lazy_weight(c)?)],
            (Flattening::Lazy, _) => Vec::new(),
        };
        let mut out = Vec::new();
        for (c, w) in now {
            if self.issued.get(c) != Some(&w) {
                self.issued.insert(c, w);
                out.push((c, w));
            }
        }
        Ok(out)
    }

    /// Forget `c` (it left).
    pub fn forget(&mut self, c: ClientId) {
        self.issued.remove(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(x: u64) -> Weight {
        Weight::new(x).unwrap()
    }

    /// A (weight `wa`) with clients 0, 1, ... of `a_weights`, and B (weight
    /// 1) with `b_clients` more clients of weight 1, numbered after A's.
    fn two_groups(wa: u64, a_weights: &[u64], b_clients: u32) -> GroupTree {
        let mut t = GroupTree::new();
        let a = t.add_group(ROOT, w(wa)).unwrap();
        let b = t.add_group(ROOT, w(1)).unwrap();
        for (k, &x) in a_weights.iter().enumerate() {
            t.join(ClientId(k as u32), a, w(x)).unwrap();
        }
        let first = a_weights.len() as u32;
        for k in first..first + b_clients {
            t.join(ClientId(k), b, w(1)).unwrap();
        }
        t
    }

    fn eff(f: &mut Flattener) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = f.effective().unwrap().into_iter().map(|(c, w)| (c.0, w.get())).collect();
        v.sort();
        v
    }

    #[test]
    fn one_light_parent_many_children() {
        // A (weight 1) with 1 client; B (weight 1) with 9: shares 1/2 and 1/18 each.
        let t = two_groups(1, &[1], 9);
        let mut f = Flattener::new(t);
        let e = eff(&mut f);
        assert_eq!(e[0], (0, 9));
        assert!(e[1..].iter().all(|&(_, x)| x == 1));
        // Eight of B's block: the ninth gets all of B's half. The scale (18
        // for a share of 1) still fits, so a0 keeps its weight.
        for k in 1..9 {
            f.tree_mut().set_runnable(ClientId(k), false).unwrap();
        }
        assert_eq!(eff(&mut f), vec![(0, 9), (9, 9)]);
        // A fresh adapter gives the smallest integers.
        let mut fresh = Flattener::new(f.tree().clone());
        assert_eq!(eff(&mut fresh), vec![(0, 1), (9, 1)]);
        f.tree().check_invariants().unwrap();
    }

    #[test]
    fn effective_weights_are_exact_products() {
        // root: A(2) {a0 w3, a1 w1}, B(1) {B1(5) {b0 w1}}: shares 2/3·3/4, 2/3·1/4, 1/3.
        let mut t = GroupTree::new();
        let a = t.add_group(ROOT, w(2)).unwrap();
        let b = t.add_group(ROOT, w(1)).unwrap();
        let b1 = t.add_group(b, w(5)).unwrap();
        t.join(ClientId(0), a, w(3)).unwrap();
        t.join(ClientId(1), a, w(1)).unwrap();
        t.join(ClientId(2), b1, w(1)).unwrap();
        let mut f = Flattener::new(t);
        // 1/2, 1/6, 1/3 → 3, 1, 2.
        assert_eq!(eff(&mut f), vec![(0, 3), (1, 1), (2, 2)]);
        assert_eq!(f.changes(None).unwrap().len(), 3);
        assert!(f.changes(None).unwrap().is_empty(), "nothing changed");
        f.tree_mut().set_group_weight(b, w(4)).unwrap();
        // 2/6·3/4, 2/6·1/4, 4/6 → 3, 1, 8.
        assert_eq!(f.changes(None).unwrap(), vec![(ClientId(2), w(8))]);
    }

    #[test]
    fn too_fine_is_an_error_not_a_rounding() {
        let mut t = GroupTree::new();
        let mut g = ROOT;
        for _ in 0..4 {
            let h = t.add_group(g, w(1)).unwrap();
            t.join(ClientId(g.0 * 2 + 100), g, w(Weight::MAX)).unwrap();
            g = h;
        }
        t.join(ClientId(0), g, w(1)).unwrap();
        let mut f = Flattener::new(t);
        assert!(matches!(f.effective(), Err(GroupError::TooFine(_))));
    }

    #[test]
    fn depth_and_cycles_are_refused() {
        let mut t = GroupTree::new();
        let mut g = ROOT;
        for _ in 0..MAX_DEPTH {
            g = t.add_group(g, w(1)).unwrap();
        }
        assert_eq!(t.add_group(g, w(1)), Err(GroupError::TooDeep(MAX_DEPTH + 1)));
        let top = GroupId(1);
        assert_eq!(t.move_group(top, g), Err(GroupError::Cycle(top, g)));
        assert_eq!(t.set_group_weight(ROOT, w(2)), Err(GroupError::Root));
    }

    #[test]
    fn moves_keep_the_books() {
        let mut t = GroupTree::new();
        let a = t.add_group(ROOT, w(1)).unwrap();
        let b = t.add_group(ROOT, w(3)).unwrap();
        let a1 = t.add_group(a, w(2)).unwrap();
        t.join(ClientId(0), a1, w(1)).unwrap();
        t.join(ClientId(1), b, w(1)).unwrap();
        assert_eq!(t.active_weight(ROOT), 4);
        t.move_group(a1, b).unwrap();
        t.check_invariants().unwrap();
        assert_eq!(t.active_weight(ROOT), 3);
        assert_eq!(t.active_weight(b), 3);
        t.move_client(ClientId(0), a).unwrap();
        t.check_invariants().unwrap();
        assert_eq!(t.active_weight(ROOT), 4);
        t.leave(ClientId(0)).unwrap();
        t.check_invariants().unwrap();
        assert_eq!(t.active_weight(ROOT), 3);
    }

    #[test]
    fn lazy_flattening_refreshes_only_the_client_concerned() {
        // A(1) {a0}, B(1) {b0..b3, blocked}: b0..b3 wake one by one; each
        // takes its weight from what it sees, the first as if alone in B.
        let mut t = two_groups(1, &[1], 4);
        for k in 1..5 {
            t.set_runnable(ClientId(k), false).unwrap();
        }
        let mut f = Flattener::with_mode(t, Flattening::Lazy);
        assert_eq!(f.changes(Some(ClientId(0))).unwrap(), vec![(ClientId(0), w(HWEIGHT_ONE))]);
        let mut got = Vec::new();
        for k in 1..5 {
            f.tree_mut().set_runnable(ClientId(k), true).unwrap();
            got.extend(f.changes(Some(ClientId(k))).unwrap());
        }
        let one = HWEIGHT_ONE;
        assert_eq!(
            got,
            vec![
                (ClientId(1), w(one / 2)),
                (ClientId(2), w(one / 4)),
                (ClientId(3), w(one / 6)),
                (ClientId(4), w(one / 8))
            ]
        );
        // a0 was never refreshed: it keeps the whole machine's weight, B's
        // four hold 1/2 + 1/4 + 1/6 + 1/8 of it where the exact sum is 1/2.
        assert_eq!(f.issued(ClientId(0)), Some(w(one)));
    }

    #[test]
    fn flat_readjustment_differs_from_hierarchical() {
        // A(2) {a0 w100, a1 w1}, B(1) {b0, b1, b2}, on 3 CPUs. Hierarchically A
        // gets 2 CPUs (a0 capped at 1, a1 gets 1) and B 1 (1/3 each). The
        // effective weights 600:6:101:101:101 readjusted flat cap a0 and give
        // a1 only 2·6/309 of a CPU.
        let t = two_groups(2, &[100, 1], 3);
        let mut f = Flattener::new(t);
        assert_eq!(eff(&mut f), vec![(0, 600), (1, 6), (2, 101), (3, 101), (4, 101)]);
        let r = crate::readjust::Readjustment::compute([600, 101, 101, 101, 6], 909, 5, 3);
        assert_eq!((r.capped, r.feasible_cpus(), r.feasible_weight), (1, 2, 309));
    }
}
