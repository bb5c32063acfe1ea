// SPDX-License-Identifier: GPL-2.0-only
//! The host side of scripts/kernel-vm.sh.
//!
//! ```text
//! scx-harness plan --smp 2 --secs 10 --schedulers gr3mp,dwrr [--safety] [--prun]   # guest plan (sh) on stdout
//! scx-harness report --out DIR [--check full|ci] console-smp2.log console-smp4.log
//! ```
//!
//! The workloads live here, once: `plan` turns them into guest shell commands,
//! `report` parses the guest's `RESULT` lines and compares each phase with the
//! ideal: the fluid multiprocessor reference with weight readjustment of
//! propshare-sim, on the time axis of the CPU time the tasks actually received
//! (so overheads that take CPUs away from every task are not counted as lag).

use propshare::groups::{GroupId, GroupTree, ROOT};
use propshare::model::{ClientId, Weight};
use propshare_sim::fluid::{ns_of_service, Fluid, Service};
use propshare_sim::hier::HierFluid;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

/// Linux's `sched_prio_to_weight` (nice -20..19).
const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501,
    1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

fn nice_weight(nice: i32) -> u64 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// `p->scx.weight` for a nice value: the cgroup-style 1..10000 scale, nice 0 = 100.
fn scx_weight(nice: i32) -> u64 {
    ((nice_weight(nice) * 100 + 512) / 1024).clamp(1, 10000)
}

/// The nice value whose kernel weight, relative to the lightest task at nice 0,
/// is closest to `w / w_min`.
fn nice_for(w: u64, w_min: u64) -> i32 {
    let target = 1024.0 * w as f64 / w_min as f64;
    (-20..=0)
        .min_by(|a, b| {
            let da = (nice_weight(*a) as f64 / target).ln().abs();
            let db = (nice_weight(*b) as f64 / target).ln().abs();
            da.partial_cmp(&db).unwrap()
        })
        .unwrap_or(0)
}

#[derive(Clone, Debug)]
struct TaskDef {
    name: String,
    weight: u64,
    /// Duty cycle (spin ms, sleep ms) for I/O-bound tasks.
    duty: Option<(u32, u32)>,
    /// Renice at this fraction (per mille) of the phase, to this nice.
    renice: Option<(u32, i32)>,
    /// Pinned to this CPU (`sched_setaffinity`).
    pin: Option<u32>,
    /// Runs in this cgroup of the workload's tree (an index into `cgroups`).
    cgroup: Option<usize>,
    /// Switches its policy to SCHED_OTHER and straight back every this many
    /// ms while it runs (`spin -f`).
    flip: Option<u32>,
    /// Moves itself between the cgroups `HOP_CGROUPS` every this many ms
    /// while it runs (`spin -m`).
    hop: Option<u32>,
}

/// How propshare-scx finds the workload's tasks and their weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Jobs with exact weights on its command line.
    Jobs,
    /// The tasks switch themselves to SCHED_EXT (partial mode); kernel weights.
    Ext,
    /// `--all-tasks`: every task of the guest; kernel weights from nice.
    All,
    /// `--cgroups`: SCHED_EXT tasks weighted by the cgroup tree.
    Cgroups,
}

#[derive(Clone, Debug)]
struct Workload {
    id: &'static str,
    smp: usize,
    what: &'static str,
    mode: Mode,
    tasks: Vec<TaskDef>,
    /// Cgroups under the root, `(name, cpu.weight)`, one level (cgroup mode).
    cgroups: Vec<(&'static str, u64)>,
}

fn spinners(ws: &[u64]) -> Vec<TaskDef> {
    ws.iter()
        .enumerate()
        .map(|(i, &w)| TaskDef {
            name: format!("t{}w{w}", i + 1),
            weight: w,
            duty: None,
            renice: None,
            pin: None,
            cgroup: None,
            flip: None,
            hop: None,
        })
        .collect()
}

fn workloads() -> Vec<Workload> {
    let mut mixed = spinners(&[1, 1]);
    for i in 0..2 {
        mixed.push(TaskDef {
            name: format!("io{}", i + 1),
            weight: 1,
            duty: Some((2, 6)),
            renice: None,
            pin: None,
            cgroup: None,
            flip: None,
            hop: None,
        });
    }
    let mut change = spinners(&[1, 1, 1]);
    change[2].renice = Some((500, -5));
    // Property changes of running tasks: t1 leaves sched_ext and comes back,
    // t2 changes cgroup, every 100 ms while they spin.
    let mut flip = spinners(&[1, 1, 1]);
    flip[0].flip = Some(100);
    flip[1].hop = Some(100);
    let mut pinned = spinners(&[1, 1, 1]);
    pinned[0].pin = Some(1);
    // Two cgroups, cpu.weight 100 and 300, with 1 and 8 spinners.
    let mut cg = spinners(&[1; 9]);
    for (i, t) in cg.iter_mut().enumerate() {
        t.cgroup = Some(usize::from(i > 0));
        t.name = if i == 0 { "a1".into() } else { format!("b{i}") };
    }
    vec![
        Workload {
            id: "w123",
            smp: 2,
            what: "weights 1:2:3 on 2 CPUs",
            mode: Mode::Jobs,
            tasks: spinners(&[1, 2, 3]),
            cgroups: Vec::new(),
        },
        Workload {
            id: "inf",
            smp: 2,
            what: "infeasible 10:1:1 on 2 CPUs",
            mode: Mode::Jobs,
            tasks: spinners(&[10, 1, 1]),
            cgroups: Vec::new(),
        },
        Workload {
            id: "mixed",
            smp: 2,
            what: "2 spinners + 2 I/O-bound (2 ms CPU / 6 ms sleep) on 2 CPUs",
            mode: Mode::Jobs,
            tasks: mixed,
            cgroups: Vec::new(),
        },
        Workload {
            id: "change",
            smp: 2,
            what: "3 equal spinners, one reniced 0 -> -5 at half time (kernel weights 100 -> 305)",
            mode: Mode::Ext,
            tasks: change,
            cgroups: Vec::new(),
        },
        Workload {
            id: "flip",
            smp: 2,
            what:
                "3 equal spinners; t1 switches to SCHED_OTHER and back, t2 changes cgroup, every 100 ms while running",
            mode: Mode::Ext,
            tasks: flip,
            cgroups: Vec::new(),
        },
        Workload {
            id: "pin",
            smp: 2,
            what: "3 equal spinners on 2 CPUs, t1 pinned to CPU 1",
            mode: Mode::Jobs,
            tasks: pinned,
            cgroups: Vec::new(),
        },
        Workload {
            id: "all",
            smp: 2,
            what: "weights 1:2:3 as nice 0/-3/-5, every task of the guest scheduled (--all-tasks)",
            mode: Mode::All,
            tasks: spinners(&[1, 2, 3]),
            cgroups: Vec::new(),
        },
        Workload {
            id: "cg",
            smp: 2,
            what: "cgroups a:b = cpu.weight 100:300, 1 spinner in a, 8 in b, on 2 CPUs",
            mode: Mode::Cgroups,
            tasks: cg,
            cgroups: vec![("a", 100), ("b", 300)],
        },
        Workload {
            id: "eq5",
            smp: 4,
            what: "5 equal spinners on 4 CPUs",
            mode: Mode::Jobs,
            tasks: spinners(&[1; 5]),
            cgroups: Vec::new(),
        },
        Workload {
            id: "w16",
            smp: 4,
            what: "16 spinners, weights 1..16, on 4 CPUs",
            mode: Mode::Jobs,
            tasks: spinners(&(1..=16).collect::<Vec<_>>()),
            cgroups: Vec::new(),
        },
    ]
}

const GRID_MS: u64 = 100;
/// Where the guest mounts cgroup v2 (`cgroup_setup` in init.sh).
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const QUANTUM: &str = "4ms";
/// The two cgroups (cpu.weight 100 each) a `hop` task moves between.
const HOP_CGROUPS: [&str; 2] = ["hopx", "hopy"];

/// The guest script for one boot. Each workload's phases (EEVDF,
/// `propshare run`, each scheduler) run `repeat` times in turn, so a
/// comparison is repeated under the same conditions (the report gives the
/// median and range of the repeats).
fn plan(smp: usize, secs: u64, scheds: &[String], only: &[String], safety: bool, prun: bool, repeat: usize) -> String {
    let ms = secs * 1000;
    let mut s = String::new();
    for w in workloads().iter().filter(|w| w.smp == smp && (only.is_empty() || only.iter().any(|o| o == w.id))) {
        let w_min = w.tasks.iter().map(|t| t.weight).min().unwrap_or(1);
        let spin_args = |t: &TaskDef, ext: bool, nice: i32| {
            let mut a = format!("/bin/spin -N {} -n {nice} -S $S -E $E -g {GRID_MS}", t.name);
            if ext {
                a.push_str(" -e");
            }
            if let Some((sp, sl)) = t.duty {
                let _ = write!(a, " -b {sp}:{sl}");
            }
            if let Some((at, n)) = t.renice {
                let _ = write!(a, " -r {}:{n}", ms * at as u64 / 1000);
            }
            if let Some(c) = t.pin {
                let _ = write!(a, " -c {c}");
            }
            if let Some(g) = t.cgroup {
                let _ = write!(a, " -C {CGROUP_ROOT}/{}", w.cgroups[g].0);
            }
            if let Some(f) = t.flip {
                let _ = write!(a, " -f {f}");
            }
            if let Some(h) = t.hop {
                let _ = write!(a, " -m {h}:{CGROUP_ROOT}/{}:{CGROUP_ROOT}/{}", HOP_CGROUPS[0], HOP_CGROUPS[1]);
            }
            a
        };
        let nices: Vec<i32> = w
            .tasks
            .iter()
            .map(|t| if matches!(w.mode, Mode::Ext | Mode::Cgroups) { 0 } else { nice_for(t.weight, w_min) })
            .collect();
        if !w.cgroups.is_empty() {
            let groups: Vec<String> = w.cgroups.iter().map(|(n, wt)| format!("{n}:{wt}")).collect();
            let _ = writeln!(s, "cgroup_setup {}", groups.join(" "));
        }
        if w.tasks.iter().any(|t| t.hop.is_some()) {
            let _ = writeln!(s, "cgroup_setup {}:100 {}:100", HOP_CGROUPS[0], HOP_CGROUPS[1]);
        }
        for _round in 0..repeat.max(1) {
            // EEVDF with weights mapped to nice.
            let _ = writeln!(s, "phase_begin {} eevdf", w.id);
            let _ = writeln!(s, "S=$(( $(/bin/spin now) + 300 )); E=$((S + {ms}))");
            for (t, n) in w.tasks.iter().zip(&nices) {
                let _ = writeln!(s, "{} &", spin_args(t, false, *n));
            }
            let _ = writeln!(s, "wait; phase_end {} eevdf 0", w.id);
            // The jobs as `propshare run` and `propshare-scx` take them.
            let jobs = w
                .tasks
                .iter()
                .map(|t| format!("-w {} -n {} -- {}", t.weight, t.name, spin_args(t, false, 0)))
                .collect::<Vec<_>>()
                .join(" ::: ");
            if prun && w.mode == Mode::Jobs {
                // `propshare run` (user space, SIGSTOP/SIGCONT) in the same guest.
                let _ = writeln!(s, "if [ -x /bin/propshare ]; then phase_begin {} prun-gr3mp", w.id);
                let _ = writeln!(s, "S=$(( $(/bin/spin now) + 1500 )); E=$((S + {ms}))");
                let _ = writeln!(
                s,
                "/bin/propshare run --scheduler gr3mp --quantum 10ms {} > /tmp/prun.out 2>&1; rc=$?; grep -a RESULT /tmp/prun.out; phase_end {} prun-gr3mp $rc; fi",
                jobs,
                w.id
            );
            }
            for sc in scheds {
                // `NAME@stock` runs NAME on the stock scx_rustland_core side,
                // `NAME@exact` on ours with --exact-slices.
                let (name, side) = sc.split_once('@').unwrap_or((sc.as_str(), "own"));
                if side == "stock" && w.mode == Mode::Cgroups {
                    continue;
                }
                let mut scx = match side {
                    "exact" => {
                        format!("/bin/propshare-scx --scheduler {name} --bpf own --exact-slices --quantum {QUANTUM}")
                    }
                    _ => format!("/bin/propshare-scx --scheduler {name} --bpf {side} --quantum {QUANTUM}"),
                };
                match w.mode {
                    Mode::All => scx.push_str(" --all-tasks"),
                    Mode::Cgroups => scx.push_str(" --cgroups"),
                    Mode::Jobs | Mode::Ext => {}
                }
                let _ = writeln!(s, "phase_begin {} {sc}", w.id);
                if w.mode != Mode::Jobs {
                    let _ = writeln!(s, "{scx} --stats 2>/tmp/pscx.err & P=$!");
                    let _ = writeln!(s, "wait_enabled");
                    let _ = writeln!(s, "S=$(( $(/bin/spin now) + 300 )); E=$((S + {ms}))");
                    let mut pids = Vec::new();
                    for (i, t) in w.tasks.iter().enumerate() {
                        let _ = writeln!(s, "{} & Q{i}=$!", spin_args(t, w.mode != Mode::All, nices[i]));
                        pids.push(format!("$Q{i}"));
                    }
                    let _ = writeln!(s, "wait {}; kill -INT $P; wait $P; rc=$?; cat /tmp/pscx.err", pids.join(" "));
                } else {
                    let _ = writeln!(s, "S=$(( $(/bin/spin now) + 2500 )); E=$((S + {ms}))");
                    let _ = writeln!(s, "{scx} {}; rc=$?", jobs);
                }
                let _ = writeln!(s, "phase_end {} {sc} $rc", w.id);
            }
        }
    }
    if safety {
        let sc = scheds.first().map(String::as_str).unwrap_or("gr3mp");
        let sc = sc.strip_suffix("@exact").unwrap_or(sc);
        for how in ["INT", "TERM", "KILL", "panic"] {
            let _ = writeln!(s, "safety {how} {sc}");
        }
    }
    s
}

// ---------------------------------------------------------------- report

#[derive(Clone, Debug, Default)]
struct TaskResult {
    name: String,
    pid: i32,
    nice: i32,
    renice: Option<(u64, i32)>,
    duty: bool,
    cpu_us: u64,
    samples: Vec<u64>,
    flips: u64,
    hops: u64,
}

#[derive(Clone, Debug, Default)]
struct Phase {
    smp: usize,
    workload: String,
    sched: String,
    tasks: Vec<TaskResult>,
    rc: Option<i32>,
    ctxt: u64,
    state_after: String,
    stats: Option<serde_json::Value>,
    ejected: bool,
    wall_ms: u64,
}

fn kv(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace().filter_map(|w| w.split_once('=')).collect()
}

fn parse_log(text: &str, smp_default: usize) -> (Vec<Phase>, Vec<String>, Vec<String>) {
    let mut phases = Vec::new();
    let mut cur: Option<Phase> = None;
    let mut safety = Vec::new();
    let mut problems = Vec::new();
    let mut smp = smp_default;
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some(i) = line.find("GUEST ") {
            if let Some(c) = kv(&line[i..]).get("cpus").and_then(|c| c.parse().ok()) {
                smp = c;
            }
        }
        let ejection = line.contains("sched_ext: BPF scheduler")
            && line.contains("disabled")
            && !line.contains("unregistered from user space");
        if ejection || ["Oops", "Kernel panic", "BUG:", "Call Trace"].iter().any(|b| line.contains(b)) {
            problems.push(format!("console: {}", line.trim()));
        }
        if let Some(i) = line.find("PHASE_BEGIN ") {
            let m = kv(&line[i..]);
            cur = Some(Phase {
                smp,
                workload: m.get("id").unwrap_or(&"?").to_string(),
                sched: m.get("sched").unwrap_or(&"?").to_string(),
                ..Default::default()
            });
        } else if let Some(i) = line.find("RESULT ") {
            let m = kv(&line[i..]);
            let Some(p) = cur.as_mut() else { continue };
            let renice = m.get("renice").and_then(|r| r.split_once(':')).and_then(|(a, b)| {
                let a: i64 = a.parse().ok()?;
                (a >= 0).then_some((a as u64, b.parse().ok()?))
            });
            p.tasks.push(TaskResult {
                name: m.get("name").unwrap_or(&"?").to_string(),
                pid: m.get("pid").and_then(|n| n.parse().ok()).unwrap_or(0),
                nice: m.get("nice").and_then(|n| n.parse().ok()).unwrap_or(0),
                renice,
                duty: m.get("duty").map(|d| !d.starts_with("0:")).unwrap_or(false),
                cpu_us: m.get("cpu_us").and_then(|n| n.parse().ok()).unwrap_or(0),
                samples: m
                    .get("samples")
                    .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
                    .unwrap_or_default(),
                flips: m.get("flips").and_then(|n| n.parse().ok()).unwrap_or(0),
                hops: m.get("hops").and_then(|n| n.parse().ok()).unwrap_or(0),
            });
        } else if let Some(i) = line.find("PSCX_STATS ") {
            if let Some(p) = cur.as_mut() {
                p.stats = serde_json::from_str(line[i + 11..].trim()).ok();
            }
        } else if line.contains("PSCX_EJECTED") {
            if let Some(p) = cur.as_mut() {
                p.ejected = true;
            }
            problems.push(format!("ejected: {}", line.trim()));
        } else if let Some(i) = line.find("PHASE_END ") {
            let m = kv(&line[i..]);
            if let Some(mut p) = cur.take() {
                p.rc = m.get("rc").and_then(|r| r.parse().ok());
                p.ctxt = m.get("ctxt").and_then(|r| r.parse().ok()).unwrap_or(0);
                p.wall_ms = m.get("ms").and_then(|r| r.parse().ok()).unwrap_or(0);
                p.state_after = m.get("state").unwrap_or(&"?").to_string();
                phases.push(p);
            }
        } else if let Some(i) = line.find("SAFETY ") {
            safety.push(line[i..].trim().to_string());
        }
    }
    (phases, safety, problems)
}

#[derive(Clone, Debug, serde::Serialize)]
struct TaskRow {
    name: String,
    /// Own BPF side: decisions of this task that ended in a block.
    blocks: Option<u64>,
    weight: u64,
    io: bool,
    cpu_ms: f64,
    share: f64,
    ideal: Option<f64>,
    max_lag_ms: Option<f64>,
    /// Own BPF side: decisions that ended, and the mean run time of one (ms).
    decisions: Option<u64>,
    ran_per_decision_ms: Option<f64>,
}

/// One cgroup's achieved and ideal share of the spinners' CPU time (%).
#[derive(Clone, Debug, serde::Serialize)]
struct GroupRow {
    name: String,
    weight: u64,
    share: f64,
    ideal: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
struct PhaseRow {
    smp: usize,
    workload: String,
    sched: String,
    tasks: Vec<TaskRow>,
    max_err_pp: f64,
    max_lag_ms: f64,
    /// Cgroup workloads: each group's share, and the largest error (pp).
    groups: Vec<GroupRow>,
    group_err_pp: Option<f64>,
    /// Sample intervals in which a task was charged more CPU time than the
    /// interval lasted: its vCPU was descheduled by the host (stolen time).
    stalls: u64,
    delivered: f64,
    ctxt_per_s: f64,
    sched_cpu_pct: Option<f64>,
    blocks_probed: Option<u64>,
    blocks_late: Option<u64>,
    max_block_detect_ms: Option<f64>,
    /// Own BPF side: blocks reported by `ops.stopping`.
    blocks_reported: Option<u64>,
    /// Own BPF side: mean and longest time a CPU was free in the model until
    /// its next decided task ran (ms).
    gap_mean_ms: Option<f64>,
    gap_max_ms: Option<f64>,
    /// Own BPF side: dropped decisions, safety-net runs, lost messages.
    misses: Option<u64>,
    /// Own BPF side: the dropped decisions by what the BPF side found
    /// (not allowed, gone, running, queued elsewhere, runnable).
    miss_why: Option<[u64; 5]>,
    /// Own BPF side: decisions carried out on another CPU than the core's
    /// (affinity), and picks deferred because no free CPU was allowed.
    remapped: Option<u64>,
    affinity_deferred: Option<u64>,
    fallbacks: Option<u64>,
    lost: Option<u64>,
    /// Own BPF side: property changes (policy, nice, cgroup) of a running
    /// task, those after which it kept its decision, and tasks that entered
    /// sched_ext while running.
    changes: Option<u64>,
    kept: Option<u64>,
    entered_running: Option<u64>,
    /// Policy flips and cgroup hops the tasks made (`flip` workload).
    flips: u64,
    hops: u64,
    rc: Option<i32>,
    ejected: bool,
}

/// Effective weights of a phase's tasks at the start, and the weight after a renice.
fn weights_of(p: &Phase, w: &Workload) -> Vec<(u64, Option<u64>)> {
    let kernel_like = p.sched == "eevdf" || w.mode != Mode::Jobs;
    p.tasks
        .iter()
        .map(|t| {
            let def = w.tasks.iter().find(|d| d.name == t.name);
            if kernel_like {
                let f = if p.sched == "eevdf" { nice_weight } else { scx_weight };
                (f(t.nice), t.renice.map(|(_, n)| f(n)))
            } else {
                (def.map(|d| d.weight).unwrap_or(1), None)
            }
        })
        .collect()
}

/// The ideal: the flat fluid reference, or the hierarchical one for a
/// workload with cgroups (propshare-sim's `hier`).
enum Reference {
    Flat(Fluid),
    Hier(HierFluid, Vec<GroupId>),
}

impl Reference {
    fn new(smp: usize, w: &Workload) -> Option<Reference> {
        if w.cgroups.is_empty() {
            return Some(Reference::Flat(Fluid::new(smp)));
        }
        let mut tree = GroupTree::new();
        let mut ids = Vec::new();
        for (_, wt) in &w.cgroups {
            ids.push(tree.add_group(ROOT, Weight::new(*wt).ok()?).ok()?);
        }
        Some(Reference::Hier(HierFluid::new(smp, tree), ids))
    }

    fn join(&mut self, c: ClientId, group: Option<usize>, w: Weight) -> Option<()> {
        match self {
            Reference::Flat(f) => f.join(0, c, w),
            Reference::Hier(h, ids) => h.join(0, c, group.map_or(ROOT, |g| ids[g]), w).ok()?,
        }
        Some(())
    }

    fn set_weight(&mut self, v: u64, c: ClientId, w: Weight) {
        match self {
            Reference::Flat(f) => f.set_weight(v, c, w),
            Reference::Hier(h, _) => h.set_weight(v, c, w),
        }
    }

    fn ideal(&mut self, v: u64, c: ClientId) -> Service {
        match self {
            Reference::Flat(f) => f.ideal(v, c),
            Reference::Hier(h, _) => h.ideal(v, c),
        }
    }
}

fn analyse(p: &Phase) -> Option<PhaseRow> {
    let wl = workloads().into_iter().find(|w| w.id == p.workload)?;
    if p.tasks.is_empty() {
        return None;
    }
    let order = |name: &str| wl.tasks.iter().position(|t| t.name == name).unwrap_or(usize::MAX);
    let mut p = p.clone();
    p.tasks.sort_by_key(|t| order(&t.name));
    let p = &p;
    let n = p.tasks.len();
    let weights = weights_of(p, &wl);
    let k_max = p.tasks.iter().map(|t| t.samples.len()).min().unwrap_or(0);
    // Intervals in which one task was charged more CPU time than the
    // interval lasted (10 % slack): impossible for one thread, so its vCPU
    // was descheduled by the host while it ran and the guest charged it the
    // stolen time at once (TCG has no steal-time accounting).
    let stalls = p
        .tasks
        .iter()
        .map(|t| t.samples.windows(2).filter(|w| w[1].saturating_sub(w[0]) > GRID_MS * 1100).count() as u64)
        .sum();
    let pool: Vec<usize> = (0..n).filter(|&i| !p.tasks[i].duty).collect();
    let total: f64 = p.tasks.iter().map(|t| t.cpu_us as f64).sum();
    let pool_total: f64 = pool.iter().map(|&i| p.tasks[i].cpu_us as f64).sum();
    let cpus = p.smp.min(pool.len()).max(1);
    // Fluid reference over the pool, on the axis v = (CPU time the pool received) / cpus.
    let group_of = |name: &str| wl.tasks.iter().find(|d| d.name == name).and_then(|d| d.cgroup);
    let mut fluid = Reference::new(p.smp, &wl)?;
    for (j, &i) in pool.iter().enumerate() {
        fluid.join(ClientId(j as u32), group_of(&p.tasks[i].name), Weight::new(weights[i].0).ok()?)?;
    }
    let mut max_lag = vec![0f64; n];
    let mut ideal_end = vec![None; n];
    let mut last_v = 0u64;
    let grid_ms = GRID_MS;
    for k in 0..k_max {
        let r: Vec<f64> = (0..n).map(|i| p.tasks[i].samples[k] as f64 * 1000.0).collect();
        let v = (pool.iter().map(|&i| r[i]).sum::<f64>() / cpus as f64) as u64;
        let v = v.max(last_v);
        for (j, &i) in pool.iter().enumerate() {
            if let (Some((at, _)), Some(w2)) = (p.tasks[i].renice, weights[i].1) {
                if k as u64 * grid_ms >= at && (k as u64 - 1) * grid_ms < at {
                    fluid.set_weight(v, ClientId(j as u32), Weight::new(w2).ok()?);
                }
            }
        }
        last_v = v;
        for (j, &i) in pool.iter().enumerate() {
            let ideal = ns_of_service(fluid.ideal(v, ClientId(j as u32)));
            let lag = (ideal - r[i]).abs() / 1e6;
            max_lag[i] = f64::max(max_lag[i], lag);
            if k + 1 == k_max {
                ideal_end[i] = Some(ideal);
            }
        }
    }
    let ideal_sum: f64 = ideal_end.iter().flatten().sum();
    let st = p.stats.as_ref();
    let per_task = |pid: i32, key: &str| -> Option<f64> {
        st?.get("host")?.get("tasks")?.get(pid.to_string())?.get(key)?.as_f64()
    };
    let mut rows = Vec::new();
    let mut max_err: f64 = 0.0;
    for i in 0..n {
        let t = &p.tasks[i];
        let io = t.duty;
        let share = if io { t.cpu_us as f64 / total * 100.0 } else { t.cpu_us as f64 / pool_total * 100.0 };
        let ideal = if io { None } else { ideal_end[i].map(|x| x / ideal_sum * 100.0) };
        if let Some(id) = ideal {
            max_err = max_err.max((share - id).abs());
        }
        rows.push(TaskRow {
            name: t.name.clone(),
            weight: weights[i].0,
            io,
            cpu_ms: t.cpu_us as f64 / 1000.0,
            share,
            ideal,
            max_lag_ms: (!io).then_some(max_lag[i]),
            decisions: per_task(t.pid, "decisions").map(|x| x as u64),
            blocks: per_task(t.pid, "blocks").map(|x| x as u64),
            ran_per_decision_ms: match (per_task(t.pid, "ran_ns"), per_task(t.pid, "decisions")) {
                (Some(r), Some(d)) if d > 0.0 => Some(r / d / 1e6),
                _ => None,
            },
        });
    }
    let groups: Vec<GroupRow> = wl
        .cgroups
        .iter()
        .enumerate()
        .map(|(g, (name, wt))| {
            let members = rows.iter().filter(|r| group_of(&r.name) == Some(g) && !r.io);
            let (share, ideal) = members.fold((0.0, 0.0), |(s, i), r| (s + r.share, i + r.ideal.unwrap_or(0.0)));
            GroupRow { name: name.to_string(), weight: *wt, share, ideal }
        })
        .collect();
    let group_err_pp =
        (!groups.is_empty()).then(|| groups.iter().map(|g| (g.share - g.ideal).abs()).fold(0.0, f64::max));
    let secs = (k_max.saturating_sub(1)) as f64 * grid_ms as f64 / 1000.0;
    let get = |path: &[&str]| -> Option<f64> {
        let mut v = st?;
        for k in path {
            v = v.get(k)?;
        }
        v.as_f64()
    };
    let sched_cpu_pct = match (get(&["own_cpu_ns"]), get(&["wall_ns"])) {
        (Some(c), Some(w)) if w > 0.0 => Some(c / w * 100.0),
        _ => None,
    };
    Some(PhaseRow {
        smp: p.smp,
        workload: p.workload.clone(),
        sched: p.sched.clone(),
        max_lag_ms: rows.iter().filter_map(|r| r.max_lag_ms).fold(0.0, f64::max),
        tasks: rows,
        max_err_pp: max_err,
        groups,
        group_err_pp,
        stalls,
        delivered: if secs > 0.0 { total / 1e6 / (secs * p.smp as f64) * 100.0 } else { 0.0 },
        ctxt_per_s: if p.wall_ms > 0 { p.ctxt as f64 / (p.wall_ms as f64 / 1000.0) } else { 0.0 },
        sched_cpu_pct,
        blocks_probed: get(&["host", "blocks_probed"]).map(|x| x as u64),
        blocks_late: get(&["host", "blocks_late"]).map(|x| x as u64),
        max_block_detect_ms: get(&["host", "max_block_detect_ns"]).map(|x| x / 1e6),
        blocks_reported: get(&["host", "blocks"]).map(|x| x as u64),
        gap_mean_ms: match (get(&["host", "gap_sum_ns"]), get(&["host", "gaps"])) {
            (Some(s), Some(n)) if n > 0.0 => Some(s / n / 1e6),
            _ => None,
        },
        gap_max_ms: get(&["host", "gap_max_ns"]).map(|x| x / 1e6),
        misses: get(&["bpf", "missed"]).map(|x| x as u64),
        miss_why: get(&["host", "miss_not_allowed"]).map(|_| {
            ["miss_not_allowed", "miss_gone", "miss_running", "miss_queued", "miss_runnable"]
                .map(|k| get(&["host", k]).unwrap_or(0.0) as u64)
        }),
        remapped: get(&["host", "remapped"]).map(|x| x as u64),
        affinity_deferred: get(&["host", "affinity_deferred"]).map(|x| x as u64),
        fallbacks: get(&["bpf", "fallback"]).map(|x| x as u64),
        lost: get(&["bpf", "lost"]).map(|x| x as u64),
        changes: get(&["bpf", "changes"]).map(|x| x as u64),
        kept: get(&["bpf", "kept"]).map(|x| x as u64),
        entered_running: get(&["bpf", "entered_running"]).map(|x| x as u64),
        flips: p.tasks.iter().map(|t| t.flips).sum(),
        hops: p.tasks.iter().map(|t| t.hops).sum(),
        rc: p.rc,
        ejected: p.ejected,
    })
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

impl PhaseRow {
    /// vCPUs, workload and scheduler: what a row of the report's tables starts with.
    fn key(&self) -> (usize, &str, &str) {
        (self.smp, &self.workload, &self.sched)
    }
}

/// A section of the report: `## title` and a table of vCPUs, workload,
/// scheduler and `columns`, a line per `(key, cells)` (see [`PhaseRow::key`]).
fn section<'a>(
    md: &mut String,
    title: &str,
    columns: &[&str],
    lines: impl Iterator<Item = ((usize, &'a str, &'a str), Vec<String>)>,
) {
    let _ = writeln!(md, "## {title}\n");
    let _ = writeln!(md, "| vCPUs | workload | scheduler | {} |", columns.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(3 + columns.len()));
    for ((smp, workload, sched), cells) in lines {
        let _ = writeln!(md, "| {smp} | {workload} | {sched} | {} |", cells.join(" | "));
    }
    let _ = writeln!(md);
}

fn report(out: &str, check: Option<&str>, logs: &[String]) -> ExitCode {
    let mut rows = Vec::new();
    let mut safety = Vec::new();
    let mut problems = Vec::new();
    let mut problems_soft: Vec<String> = Vec::new();
    for l in logs {
        let text = match std::fs::read(l) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                eprintln!("scx-harness: cannot read {l}: {e}");
                return ExitCode::from(2);
            }
        };
        let smp = if l.contains("smp4") { 4 } else { 2 };
        let (phases, s, pr) = parse_log(&text, smp);
        if !text.contains("ALL_DONE") {
            problems.push(format!("{l}: the guest did not finish (no ALL_DONE)"));
        }
        for p in &phases {
            match analyse(p) {
                Some(r) => rows.push(r),
                None if p.sched.starts_with("prun") => problems_soft
                    .push(format!("{l}: `propshare run` phase {} gave no results (rc {:?})", p.workload, p.rc)),
                None => problems.push(format!("{l}: phase {} {} has no results", p.workload, p.sched)),
            }
            if p.sched != "eevdf" && !p.sched.starts_with("prun") && p.state_after != "disabled" {
                problems.push(format!("{l}: sched_ext state after {} {} is {:?}", p.workload, p.sched, p.state_after));
            }
        }
        safety.extend(s);
        problems.extend(pr.into_iter().map(|x| format!("{l}: {x}")));
    }
    let wls = workloads();
    let mut md = String::new();
    let _ = writeln!(md, "# propshare-scx in a VM: measured shares\n");
    let _ = writeln!(
        md,
        "Share: % of the CPU time the spinners received (I/O-bound tasks: % of all). Ideal: fluid GMS with weight \
         readjustment (propshare-sim), on the axis of CPU time received. Max lag: largest |ideal - received| over \
         {GRID_MS} ms samples, in ms. Stalls: sample intervals in which a task was charged more CPU time than the \
         interval lasted (its vCPU was descheduled by the host and the guest charged it the stolen time at once; \
         a lag measured soon after one is the host's). Delivered: CPU time of the tasks / (CPUs x time). EEVDF runs with weights mapped \
         to nice; its ideal uses the nice weights. propshare-scx quantum {QUANTUM}.\n"
    );
    for w in &wls {
        let rs: Vec<&PhaseRow> = rows.iter().filter(|r| r.workload == w.id).collect();
        if rs.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {} ({}, {} vCPUs)\n", w.id, w.what, w.smp);
        let names: Vec<&str> = rs[0].tasks.iter().map(|t| t.name.as_str()).collect();
        let _ = write!(md, "| scheduler | max err (pp) | max lag (ms) | stalls | delivered | ctxt/s | sched CPU |");
        for nm in &names {
            let _ = write!(md, " {nm} |");
        }
        let _ = writeln!(md);
        let _ = writeln!(md, "|{}", "---|".repeat(7 + names.len()));
        for r in &rs {
            let _ = write!(
                md,
                "| {} | {:.2} | {:.1} | {} | {:.1}% | {:.0} | {} |",
                r.sched,
                r.max_err_pp,
                r.max_lag_ms,
                r.stalls,
                r.delivered,
                r.ctxt_per_s,
                r.sched_cpu_pct.map(|x| format!("{x:.1}%")).unwrap_or("-".into())
            );
            for t in &r.tasks {
                match t.ideal {
                    Some(id) => {
                        let _ = write!(md, " {:.1} ({:.1}) lag {:.0} |", t.share, id, t.max_lag_ms.unwrap_or(0.0));
                    }
                    None => {
                        let _ = write!(md, " io {:.1}% |", t.share);
                    }
                }
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md, "\nCells: achieved share (ideal share) and max lag in ms.\n");
        if !w.cgroups.is_empty() {
            let _ = writeln!(md, "Cgroups (share of the spinners' CPU time, ideal: hierarchical fluid):\n");
            let _ = writeln!(md, "| scheduler | max group err (pp) | groups: share (ideal) |\n|---|---|---|");
            for r in &rs {
                let gs: Vec<String> = r
                    .groups
                    .iter()
                    .map(|g| format!("{} w{}: {:.2} ({:.2})", g.name, g.weight, g.share, g.ideal))
                    .collect();
                let _ = writeln!(md, "| {} | {:.2} | {} |", r.sched, r.group_err_pp.unwrap_or(0.0), gs.join("; "));
            }
            let _ = writeln!(md);
        }
        if rs.iter().any(|r| r.tasks.iter().any(|t| t.decisions.is_some())) {
            let _ = writeln!(md, "Decisions per task (own side): decisions / mean run time of one (ms):\n");
            for r in rs.iter().filter(|r| r.tasks.iter().any(|t| t.decisions.is_some())) {
                let cells: Vec<String> = r
                    .tasks
                    .iter()
                    .map(|t| {
                        let blocks = t.blocks.filter(|&b| b > 0).map(|b| format!(" ({b} blocked)")).unwrap_or_default();
                        format!(
                            "{} {} / {:.2}{blocks}",
                            t.name,
                            t.decisions.unwrap_or(0),
                            t.ran_per_decision_ms.unwrap_or(0.0)
                        )
                    })
                    .collect();
                let _ = writeln!(md, "* {}: {}", r.sched, cells.join(", "));
            }
            let _ = writeln!(md);
        }
    }
    // Repeated phases: median and range of each figure.
    let mut keys: Vec<(usize, &str, &str)> = Vec::new();
    for r in &rows {
        let k = r.key();
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let same = |k: &(usize, &str, &str)| -> Vec<&PhaseRow> {
        rows.iter().filter(|r| r.smp == k.0 && r.workload == k.1 && r.sched == k.2).collect()
    };
    if keys.iter().any(|k| same(k).len() > 1) {
        let columns = ["runs", "max err (pp)", "max lag (ms)", "stalls", "delivered (%)"];
        let lines = keys.iter().map(|&k| {
            let rs = same(&k);
            let cell = |f: &dyn Fn(&PhaseRow) -> f64, digits: usize| {
                let v: Vec<f64> = rs.iter().map(|r| f(r)).collect();
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{:.*} ({lo:.*} - {hi:.*})", digits, median(&v).unwrap_or(f64::NAN), digits, digits)
            };
            let cells = [
                rs.len().to_string(),
                cell(&|r| r.max_err_pp, 2),
                cell(&|r| r.max_lag_ms, 1),
                cell(&|r| r.stalls as f64, 0),
                cell(&|r| r.delivered, 1),
            ];
            (k, cells.to_vec())
        });
        section(&mut md, "Repeats: median (min - max)", &columns, lines);
    }
    if rows.iter().any(|r| r.blocks_probed.is_some()) {
        let columns = ["blocks seen by probe", "blocks seen at wake-up", "longest block held in model (ms)"];
        let lines = rows.iter().filter(|r| r.blocks_probed.is_some()).map(|r| {
            let cells = [
                r.blocks_probed.unwrap_or(0).to_string(),
                r.blocks_late.unwrap_or(0).to_string(),
                format!("{:.1}", r.max_block_detect_ms.unwrap_or(0.0)),
            ];
            (r.key(), cells.to_vec())
        });
        section(&mut md, "Block inference (stock rustland_core)", &columns, lines);
    }
    if rows.iter().any(|r| r.blocks_reported.is_some()) {
        let columns = [
            "blocks reported",
            "host read a block after, max (ms)",
            "CPU free to next decided task running: mean / max (ms)",
            "dropped decisions (not allowed / gone / running / queued / runnable)",
            "remapped / deferred (affinity)",
            "safety-net runs",
            "lost messages",
        ];
        let lines = rows.iter().filter(|r| r.blocks_reported.is_some()).map(|r| {
            let why = r.miss_why.map(|w| format!(" ({})", w.map(|x| x.to_string()).join(" / "))).unwrap_or_default();
            let cells = [
                r.blocks_reported.unwrap_or(0).to_string(),
                format!("{:.1}", r.max_block_detect_ms.unwrap_or(0.0)),
                format!("{:.2} / {:.1}", r.gap_mean_ms.unwrap_or(0.0), r.gap_max_ms.unwrap_or(0.0)),
                format!("{}{why}", r.misses.unwrap_or(0)),
                format!("{} / {}", r.remapped.unwrap_or(0), r.affinity_deferred.unwrap_or(0)),
                r.fallbacks.unwrap_or(0).to_string(),
                r.lost.unwrap_or(0).to_string(),
            ];
            (r.key(), cells.to_vec())
        });
        section(&mut md, "Own BPF side: explicit events", &columns, lines);
    }
    if !safety.is_empty() {
        let _ = writeln!(md, "## Safety\n");
        for s in &safety {
            let _ = writeln!(md, "* `{s}`");
        }
        let _ = writeln!(md);
    }
    // Checks.
    let mut failures = problems.clone();
    for s in &safety {
        if !s.contains("ok=1") {
            failures.push(format!("safety: {s}"));
        }
    }
    let scx_rows: Vec<&PhaseRow> = rows.iter().filter(|r| r.sched != "eevdf" && !r.sched.starts_with("prun")).collect();
    for r in &scx_rows {
        if r.ejected {
            failures.push(format!("{} {} smp{}: ejected", r.workload, r.sched, r.smp));
        }
        if r.rc.unwrap_or(1) != 0 {
            failures.push(format!("{} {} smp{}: propshare-scx exit status {:?}", r.workload, r.sched, r.smp, r.rc));
        }
    }
    let bound = |smp: usize| -> f64 {
        match (check, smp) {
            (Some("ci"), _) => 10.0,
            (_, 2) => 1.0,
            _ => 2.0,
        }
    };
    let mut target_lines = Vec::new();
    // `flip` has no share bound: its hopping task sleeps in every cgroup
    // move, so its ideal is not the spinners' (checked below instead).
    for r in scx_rows.iter().filter(|r| r.workload != "flip") {
        let b = bound(r.smp);
        let ok = r.max_err_pp <= b;
        target_lines.push(format!(
            "* {} {} on {} vCPUs: max error {:.2} pp (bound {b}) {}",
            r.workload,
            r.sched,
            r.smp,
            r.max_err_pp,
            if ok { "ok" } else { "MISSED" }
        ));
        if !ok && check.is_some() {
            failures.push(format!("{} {} smp{}: max error {:.2} pp > {b}", r.workload, r.sched, r.smp, r.max_err_pp));
        }
    }
    for r in scx_rows.iter().filter(|r| r.group_err_pp.is_some()) {
        let b = bound(r.smp);
        let e = r.group_err_pp.unwrap_or(0.0);
        let ok = e <= b;
        target_lines.push(format!(
            "* {} {} on {} vCPUs: max cgroup error {e:.2} pp (bound {b}) {}",
            r.workload,
            r.sched,
            r.smp,
            if ok { "ok" } else { "MISSED" }
        ));
        if !ok && check.is_some() {
            failures.push(format!("{} {} smp{}: max cgroup error {e:.2} pp > {b}", r.workload, r.sched, r.smp));
        }
    }
    // Property changes of running tasks (`flip`): the own side must keep
    // every decision (no drop), never need its safety net (no stall), and
    // report no block (the spinners never block: a policy or cgroup change
    // is not one).
    for r in scx_rows.iter().filter(|r| r.workload == "flip" && r.misses.is_some()) {
        // The hopping task really sleeps in each cgroup move (writing
        // cgroup.procs waits for RCU); no task sleeps otherwise while
        // measured, and each blocks at most twice at the end (writing its
        // result line to the console, and exiting). More blocks than that are
        // property changes taken for blocks.
        let (m, f) = (r.misses.unwrap_or(0), r.fallbacks.unwrap_or(0));
        let b = r.blocks_reported.unwrap_or(0).saturating_sub(r.hops + 2 * r.tasks.len() as u64);
        let ok = m == 0 && f == 0 && b == 0;
        target_lines.push(format!(
            "* flip {} on {} vCPUs: {} policy flips and {} cgroup hops of running tasks; {} property changes seen, {} kept \
             their decision, {} entered running; {m} dropped decisions, {f} safety-net runs, {b} blocks beyond one per cgroup hop \
             and two per task at the end {}",
            r.sched,
            r.smp,
            r.flips,
            r.hops,
            r.changes.unwrap_or(0),
            r.kept.unwrap_or(0),
            r.entered_running.unwrap_or(0),
            if ok { "ok" } else { "FAILED" }
        ));
        if !ok {
            failures.push(format!(
                "flip {} smp{}: {m} dropped decision(s), {f} safety-net run(s), {b} block(s) too many while tasks \
                 changed policy and cgroup",
                r.sched, r.smp
            ));
        }
    }
    // Affinity: no decision may be sent for a CPU its task may not use.
    for r in scx_rows.iter().filter(|r| r.miss_why.is_some_and(|w| w[0] > 0)) {
        let n = r.miss_why.map_or(0, |w| w[0]);
        failures
            .push(format!("{} {} smp{}: {n} decision(s) for a CPU the task may not use", r.workload, r.sched, r.smp));
    }
    // Max lag against EEVDF's: the median over the repeats of each phase
    // (one phase when not repeated).
    for wid in ["inf", "eq5"] {
        let lags = |sched: &str| -> Vec<f64> {
            rows.iter().filter(|r| r.workload == wid && r.sched == sched).map(|r| r.max_lag_ms).collect()
        };
        let Some(e) = median(&lags("eevdf")) else { continue };
        let mut seen: Vec<&str> = Vec::new();
        for r in scx_rows.iter().filter(|r| r.workload == wid) {
            if seen.contains(&r.sched.as_str()) {
                continue;
            }
            seen.push(&r.sched);
            let l = lags(&r.sched);
            let m = median(&l).unwrap_or(f64::NAN);
            let n = l.len();
            target_lines.push(format!(
                "* {wid} {}: max lag {m:.1} ms vs EEVDF {e:.1} ms{} {}",
                r.sched,
                if n > 1 { format!(" (medians of {n} repeats)") } else { String::new() },
                if m < e { "lower" } else { "NOT lower" }
            ));
        }
    }
    let _ = writeln!(md, "## Targets\n\n{}\n", target_lines.join("\n"));
    if !problems_soft.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for f in &problems_soft {
            let _ = writeln!(md, "* {f}");
        }
        let _ = writeln!(md);
    }
    if !failures.is_empty() {
        let _ = writeln!(md, "## Failures\n");
        for f in &failures {
            let _ = writeln!(md, "* {f}");
        }
    }
    let json = serde_json::json!({ "phases": rows, "safety": safety, "problems": problems, "failures": failures });
    if let Err(e) =
        std::fs::create_dir_all(out).and_then(|_| std::fs::write(format!("{out}/report.md"), &md)).and_then(|_| {
            std::fs::write(format!("{out}/report.json"), serde_json::to_string_pretty(&json).unwrap_or_default())
        })
    {
        eprintln!("scx-harness: cannot write the report to {out}: {e}");
        return ExitCode::from(1);
    }
    print!("{md}");
    if check.is_some() && !failures.is_empty() {
        eprintln!("scx-harness: {} check(s) failed", failures.len());
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    let list = |k: &str| -> Vec<String> {
        get(k).map(|s| s.split(',').filter(|x| !x.is_empty()).map(String::from).collect()).unwrap_or_default()
    };
    match args.first().map(String::as_str) {
        Some("plan") => {
            let smp = get("--smp").and_then(|s| s.parse().ok()).unwrap_or(2);
            let secs = get("--secs").and_then(|s| s.parse().ok()).unwrap_or(10);
            let mut scheds = list("--schedulers");
            if scheds.is_empty() {
                scheds = vec!["gr3mp".into()];
            }
            for s in &scheds {
                let (name, side) = s.split_once('@').unwrap_or((s.as_str(), "own"));
                if !["own", "stock", "exact"].contains(&side) {
                    eprintln!("scx-harness: unknown BPF side {side:?} in {s:?} (own, stock or exact)");
                    return ExitCode::from(2);
                }
                if propshare::registry::build(name, propshare::scheduler::SchedConfig::new(1, 4_000_000)).is_err() {
                    eprintln!("scx-harness: unknown scheduler {s:?}");
                    return ExitCode::from(2);
                }
            }
            print!(
                "{}",
                plan(
                    smp,
                    secs,
                    &scheds,
                    &list("--workloads"),
                    args.iter().any(|a| a == "--safety"),
                    args.iter().any(|a| a == "--prun"),
                    get("--repeat").and_then(|r| r.parse().ok()).unwrap_or(1),
                )
            );
            ExitCode::SUCCESS
        }
        Some("report") => {
            let out = get("--out").unwrap_or_else(|| "target/kernel-vm/report".into());
            let check = get("--check");
            let mut logs = Vec::new();
            let mut i = 1;
            while i < args.len() {
                if args[i] == "--out" || args[i] == "--check" {
                    i += 2;
                    continue;
                }
                logs.push(args[i].clone());
                i += 1;
            }
            report(&out, check.as_deref(), &logs)
        }
        _ => {
            eprintln!("usage: scx-harness plan --smp N --secs S --schedulers a,b [--workloads w123,inf] [--safety] [--prun] [--repeat N]\n       scx-harness report --out DIR [--check full|ci] LOG...");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_runs_every_phase_of_a_workload_that_many_times() {
        let sc = vec!["gr3mp".to_string()];
        let p = plan(4, 5, &sc, &["eq5".to_string()], false, false, 3);
        assert_eq!(p.matches("phase_begin eq5 eevdf").count(), 3);
        assert_eq!(p.matches("phase_begin eq5 gr3mp").count(), 3);
        assert_eq!(plan(4, 5, &sc, &["eq5".to_string()], false, false, 1).matches("phase_begin").count(), 2);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn flip_plan_changes_policy_and_cgroup_of_running_tasks() {
        let p = plan(2, 5, &["wfq+readjust".to_string()], &["flip".to_string()], false, false, 1);
        assert!(p.contains("cgroup_setup hopx:100 hopy:100"), "{p}");
        assert!(p.contains(" -f 100"), "{p}");
        assert!(p.contains(" -m 100:/sys/fs/cgroup/hopx:/sys/fs/cgroup/hopy"), "{p}");
    }

    #[test]
    fn nice_mapping() {
        assert_eq!(nice_for(1, 1), 0);
        assert_eq!(nice_for(2, 1), -3);
        assert_eq!(nice_for(3, 1), -5);
        assert_eq!(nice_for(10, 1), -10);
        assert_eq!(scx_weight(0), 100);
        assert_eq!(scx_weight(-3), 194);
        assert_eq!(scx_weight(3), 51);
    }

    /// The guest's log of one phase of workload `id` under gr3mp on 2 CPUs:
    /// a `RESULT` line per task, its name and CPU time samples (µs, every
    /// 100 ms; the last is its total).
    fn phase_log(id: &str, tasks: impl IntoIterator<Item = (String, Vec<u64>)>) -> String {
        let mut text = format!("GUEST cpus=2\nPHASE_BEGIN id={id} sched=gr3mp\n");
        for (name, s) in tasks {
            let v: Vec<String> = s.iter().map(u64::to_string).collect();
            text.push_str(&format!(
                "RESULT name={name} pid=1 nice=0 renice=-1:0 duty=0:0 cpu_us={} samples={}\n",
                s[s.len() - 1],
                v.join(",")
            ));
        }
        text.push_str(&format!("PHASE_END id={id} sched=gr3mp rc=0 ctxt=10 ms=1000 state=disabled\n"));
        text
    }

    #[test]
    fn a_section_is_a_titled_markdown_table() {
        let mut md = String::new();
        let columns = ["blocks seen by probe", "blocks seen at wake-up", "longest block held in model (ms)"];
        let lines = [((2, "w1", "gr3mp@stock"), vec!["3".to_string(), "0".into(), "1.5".into()])];
        section(&mut md, "Block inference (stock rustland_core)", &columns, lines.into_iter());
        assert_eq!(
            md,
            "## Block inference (stock rustland_core)\n\n| vCPUs | workload | scheduler | blocks seen by probe | blocks seen \
             at wake-up | longest block held in model (ms) |\n|---|---|---|---|---|---|\n| 2 | w1 | gr3mp@stock | 3 | 0 | \
             1.5 |\n\n"
        );
    }

    #[test]
    fn perfect_phase_has_no_error() {
        // 1:2:3 on 2 CPUs for 1 s, received exactly in proportion.
        let tasks = [1u64, 2, 3]
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("t{}w{w}", i + 1), (0..=10).map(|k| k * 100_000 * 2 * w / 6).collect()));
        let (phases, _, problems) = parse_log(&phase_log("w123", tasks), 2);
        assert!(problems.is_empty());
        let r = analyse(&phases[0]).unwrap();
        assert!(r.max_err_pp < 0.01, "{r:?}");
        assert!(r.max_lag_ms < 0.01, "{r:?}");
    }

    #[test]
    fn a_task_charged_more_than_the_interval_is_a_stall() {
        // Two equal spinners on 2 CPUs; t1's vCPU is descheduled by the host
        // for 300 ms while it runs: its samples jump by 400 ms in one interval.
        let t1: Vec<u64> = (0..=10u64).map(|k| if k < 5 { k * 100_000 } else { (k + 3) * 100_000 }).collect();
        let t2: Vec<u64> = (0..=10u64).map(|k| k * 100_000).collect();
        let (phases, _, _) = parse_log(&phase_log("w123", [("t1w1".into(), t1), ("t2w2".into(), t2)]), 2);
        assert_eq!(analyse(&phases[0]).unwrap().stalls, 1);
    }

    #[test]
    fn infeasible_ideal_is_readjusted() {
        // 10:1:1 on 2 CPUs: ideal 50/25/25.
        let tasks = [(10u64, 3u64), (1, 2), (1, 1)]
            .iter()
            .enumerate()
            .map(|(i, (w, sh))| (format!("t{}w{w}", i + 1), (0..=10).map(|k| k * 100_000 * 2 * sh / 6).collect()));
        let (phases, _, _) = parse_log(&phase_log("inf", tasks), 2);
        let r = analyse(&phases[0]).unwrap();
        assert!((r.tasks[0].ideal.unwrap() - 50.0).abs() < 0.01);
        // Received 3:2:1 (50/33.3/16.7) against 50/25/25.
        assert!((r.max_err_pp - 8.33).abs() < 0.01, "{r:?}");
    }
}
