//! Finite work and chains of clients (the SFS paper's short tasks, section
//! 4.3): members run one at a time, the fluid reference sees the same joins
//! and departures as the scheduler, and the two readings of "a task runs
//! 300 ms" (CPU time, wall-clock time) behave as they should.

use propshare::{registry, SchedConfig, Time, Weight, MS};
use propshare_sim::engine::{ChainSpec, ClientSpec, Engine, MemberLeaves, SimConfig, SimReport, TraceEvent};
use propshare_sim::scenario::Scenario;

/// Join and leave times of every client, by name, in the order they happen.
#[derive(Default)]
struct Life {
    joins: Vec<(String, Time)>,
    leaves: Vec<(String, Time)>,
}

fn run(name: &str, cfg: SimConfig, clients: Vec<ClientSpec>, chains: &[ChainSpec]) -> (SimReport, Life) {
    let sched = registry::build(name, SchedConfig::new(cfg.cpus, cfg.quantum)).unwrap();
    let mut engine = Engine::new(sched, cfg, clients).unwrap();
    engine.chains(chains).unwrap();
    let mut life = Life::default();
    let report = engine
        .run(&mut |e| match e {
            TraceEvent::Join { t, client, .. } => life.joins.push((client.to_string(), t)),
            TraceEvent::Leave { t, client } => life.leaves.push((client.to_string(), t)),
            _ => {}
        })
        .unwrap();
    (report, life)
}

fn chain(leaves: MemberLeaves, weight: u64) -> ChainSpec {
    ChainSpec {
        prefix: "short".into(),
        weight: Weight::new(weight).unwrap(),
        start: 0,
        leaves,
        count: None,
        until: None,
    }
}

fn member<'a>(r: &'a SimReport, name: &str) -> &'a propshare_sim::engine::ClientStats {
    r.clients.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no client {name}"))
}

/// Alone on one CPU, every member gets exactly its work, and the next one
/// starts the instant it is done: member k lives [300k, 300(k+1)) ms, with
/// a 200 ms quantum cutting each into a 200 ms and a 100 ms run. Its fluid
/// ideal is the same 300 ms (it is alone). `count` stops the chain.
#[test]
fn a_chain_alone_runs_its_members_back_to_back_each_for_exactly_its_work() {
    let q = 200 * MS;
    for sched in ["wfq", "sfq", "sfs"] {
        let spec = ChainSpec { count: Some(5), ..chain(MemberLeaves::AfterWork(300 * MS), 5) };
        let (r, life) = run(sched, SimConfig::new(1, q, 2000 * MS), Vec::new(), &[spec]);
        assert_eq!(r.clients.len(), 5, "{sched}");
        for k in 0..5u64 {
            let name = format!("short{k}");
            assert_eq!(life.joins[k as usize], (name.clone(), 300 * MS * k), "{sched}");
            assert_eq!(life.leaves[k as usize], (name.clone(), 300 * MS * (k + 1)), "{sched}");
            let c = member(&r, &name);
            assert_eq!(c.service.received, 300 * MS, "{sched} {name}");
            assert!((c.service.ideal - (300 * MS) as f64).abs() < 1e-3, "{sched} {name}: ideal {}", c.service.ideal);
            assert_eq!(c.runs, 2, "{sched} {name}: 200 ms + 100 ms");
        }
        assert_eq!(r.busy, 1500 * MS, "{sched}: idle after the fifth member");
    }
}

/// Chain members are created after the per-client measurements are set
/// up (claim windows, the lag band, windowed lag); each gets its own slots.
#[test]
fn members_get_every_per_client_measurement() {
    let q = 10 * MS;
    let sched = registry::build("wfq", SchedConfig::new(1, q)).unwrap();
    let clients = vec![ClientSpec::cpu_bound("A", Weight::ONE)];
    let mut engine = Engine::new(sched, SimConfig::new(1, q, 1000 * MS), clients).unwrap();
    engine.windows(&[(0, 500 * MS)]);
    engine.lag_band(q, q);
    engine.lag_windows(&[100 * MS]);
    engine.chains(&[chain(MemberLeaves::AfterLifetime(200 * MS), 1)]).unwrap();
    let r = engine.run(&mut |_| {}).unwrap();
    assert_eq!(r.clients.len(), 1 + 6, "A and members joining at 0, 200, ..., 1000 ms");
    for c in &r.clients[1..] {
        assert_eq!(c.window_received.len(), 1, "{}", c.name);
        assert_eq!(c.window_lags.len(), 1, "{}", c.name);
    }
    // Members present in [0, 500 ms) got CPU there; later ones did not.
    assert!(member(&r, "short0").window_received[0] > 0);
    assert_eq!(member(&r, "short3").window_received[0], 0);
    assert!(member(&r, "short1").within_band.is_some());
}

/// A member that would stay 0 ns is refused, not run.
#[test]
fn a_zero_length_member_is_refused() {
    for leaves in [MemberLeaves::AfterWork(0), MemberLeaves::AfterLifetime(0)] {
        let sched = registry::build("wfq", SchedConfig::new(1, MS)).unwrap();
        let mut engine = Engine::new(sched, SimConfig::new(1, MS, 10 * MS), Vec::new()).unwrap();
        assert!(engine.chains(&[chain(leaves, 1)]).is_err(), "{leaves:?}");
    }
}

/// `until` stops the chain too: no member joins at or after it.
#[test]
fn until_stops_the_chain() {
    let spec = ChainSpec { until: Some(1000 * MS), ..chain(MemberLeaves::AfterWork(300 * MS), 1) };
    let (r, life) = run("wfq", SimConfig::new(1, 10 * MS, 3000 * MS), Vec::new(), &[spec]);
    let joined: Vec<Time> = life.joins.iter().map(|j| j.1).collect();
    assert_eq!(joined, [0, 300 * MS, 600 * MS, 900 * MS]);
    assert_eq!(r.busy, 1200 * MS);
}

/// The hand case of section 4.3 with wall-clock members: on 2 CPUs, T1
/// (w = 20), twenty clients of weight 1 and a chain of weight 5 whose
/// members live 300 ms each. The weights stay feasible (20/45 < 1/2), so
/// the fluid rate of a member is 2 · 5/45 = 2/9 CPU and its ideal service
/// is 300 ms · 2/9 = 66.67 ms exactly; T1's is 3 s · 8/9.
#[test]
fn the_fluid_ideal_of_each_member_is_its_weight_share_over_its_lifetime() {
    let mut clients = vec![ClientSpec::cpu_bound("T1", Weight::new(20).unwrap())];
    clients.extend((0..20).map(|i| ClientSpec::cpu_bound(format!("one{i}"), Weight::ONE)));
    let horizon = 3000 * MS;
    let (r, life) = run(
        "sfs",
        SimConfig::new(2, 200 * MS, horizon),
        clients.clone(),
        &[chain(MemberLeaves::AfterLifetime(300 * MS), 5)],
    );
    for k in 0..10 {
        let c = member(&r, &format!("short{k}"));
        let want = (300 * MS) as f64 * 2.0 / 9.0;
        assert!((c.service.ideal - want).abs() < 1e-3, "short{k}: ideal {} want {want}", c.service.ideal);
    }
    assert!((member(&r, "T1").service.ideal - horizon as f64 * 8.0 / 9.0).abs() < 1e-3);
    assert_eq!(life.leaves.len(), 10, "ten members left by 3 s");

    // With CPU-time members the lifetimes are the scheduler's doing, known
    // only at run time; the fluid still gives each member 2/9 CPU over
    // exactly the interval it was present.
    let (r, life) =
        run("sfs", SimConfig::new(2, 200 * MS, horizon), clients, &[chain(MemberLeaves::AfterWork(300 * MS), 5)]);
    assert!(life.leaves.len() >= 2, "too few members finished to test");
    for (name, left) in &life.leaves {
        let joined = life.joins.iter().find(|j| &j.0 == name).unwrap().1;
        let want = (left - joined) as f64 * 2.0 / 9.0;
        let c = member(&r, name);
        assert!((c.service.ideal - want).abs() < 1e-3, "{name}: ideal {} want {want}", c.service.ideal);
        assert_eq!(c.service.received, 300 * MS, "{name}");
    }
}

/// The two readings of "each task runs 300 ms", on one CPU beside a
/// CPU-bound client of equal weight under WFQ (10 ms quanta): with work,
/// each member receives exactly 100 ms and, getting half the CPU, lives
/// about 200 ms; with a lifetime, each member lives exactly 100 ms and
/// receives only about half of it.
#[test]
fn cpu_time_and_wall_clock_readings_differ_as_they_should() {
    let q = 10 * MS;
    let cfg = SimConfig::new(1, q, 2000 * MS);
    let other = || vec![ClientSpec::cpu_bound("A", Weight::ONE)];
    let (work, wl) = run("wfq", cfg.clone(), other(), &[chain(MemberLeaves::AfterWork(100 * MS), 1)]);
    let (wall, ll) = run("wfq", cfg, other(), &[chain(MemberLeaves::AfterLifetime(100 * MS), 1)]);
    for (name, left) in &wl.leaves {
        let joined = wl.joins.iter().find(|j| &j.0 == name).unwrap().1;
        assert_eq!(member(&work, name).service.received, 100 * MS, "{name}");
        assert!((190 * MS..=210 * MS).contains(&(left - joined)), "{name} lived {} ms", (left - joined) / MS);
    }
    for (name, left) in &ll.leaves {
        let joined = ll.joins.iter().find(|j| &j.0 == name).unwrap().1;
        assert_eq!(left - joined, 100 * MS, "{name}");
        let got = member(&wall, name).service.received;
        assert!((40 * MS..=60 * MS).contains(&got), "{name} received {} ms", got / MS);
    }
    assert!((9..=10).contains(&wl.leaves.len()), "{} work members finished", wl.leaves.len());
    assert_eq!(ll.leaves.len(), 20);
}

/// A client with `work` leaves when it is done: its runs are cut to the
/// work left (35 ms is no multiple of the 10 ms quantum) and a preemption
/// mid-quantum counts what it ran, so its runs add up to exactly its work.
#[test]
fn a_client_with_work_leaves_when_done_even_when_preempted() {
    use propshare::algo::sfs::{Sfs, SfsOptions};
    let q = 10 * MS;
    let job = ClientSpec { work: Some(35 * MS), ..ClientSpec::cpu_bound("job", Weight::new(3).unwrap()) };
    let (r, life) =
        run("wfq", SimConfig::new(1, q, 1000 * MS), vec![ClientSpec::cpu_bound("A", Weight::ONE), job.clone()], &[]);
    assert_eq!(member(&r, "job").service.received, 35 * MS);
    assert_eq!(life.leaves.len(), 1);
    // Weights 1:3: the job gets 3/4 of the CPU, so it is done near 35/0.75 ≈ 47 ms.
    assert!((40 * MS..=55 * MS).contains(&life.leaves[0].1), "left at {} ms", life.leaves[0].1 / MS);

    // SFS with preemption on arrival, on 2 CPUs beside two weight-1 clients:
    // a heavy client arriving at some instant kicks the job off its CPU
    // mid-quantum. Whenever it does, the job still gets exactly its work.
    let mut preempted = 0;
    for arrive in (1..80).map(|ms| ms * MS) {
        let sfs = Sfs::with_options(SchedConfig::new(2, q), SfsOptions { preempt: true, ..SfsOptions::EXACT });
        let heavy = ClientSpec { arrive, ..ClientSpec::cpu_bound("B", Weight::new(100).unwrap()) };
        let others = [ClientSpec::cpu_bound("A", Weight::ONE), ClientSpec::cpu_bound("C", Weight::ONE)];
        let clients = [vec![job.clone()], others.to_vec(), vec![heavy]].concat();
        let engine = Engine::new(sfs, SimConfig::new(2, q, 1000 * MS), clients).unwrap();
        let mut job_runs = Vec::new();
        let r = engine
            .run(&mut |e| {
                if let TraceEvent::Run { client: "job", start, end, .. } = e {
                    job_runs.push((start, end));
                }
            })
            .unwrap();
        let total: Time = job_runs.iter().map(|(a, b)| b - a).sum();
        preempted += usize::from(job_runs.iter().any(|&(_, end)| end == arrive && total != end));
        assert_eq!(member(&r, "job").service.received, 35 * MS, "B at {arrive}");
        assert_eq!(total, 35 * MS, "B at {arrive}");
    }
    assert!(preempted > 0, "no arrival preempted the job: the test shows nothing");
}

const BASE: &str = r#"
schedulers = ["wfq"]
[machine]
cpus = 2
quantum = "10ms"
horizon = "1s"
[[chain]]
prefix = "short"
weight = 5
work = "300ms"
"#;

/// Each case `(from, to, want)`: [`BASE`] with `from` replaced by `to` is
/// refused with an error that starts `f.toml:{want}`.
fn assert_located(cases: &[(&str, &str, &str)]) {
    for (from, to, want) in cases {
        let text = BASE.replacen(from, to, 1);
        let err = Scenario::parse("f.toml", &text, "f").expect_err(to).to_string();
        assert!(err.starts_with(&format!("f.toml:{want}")), "{to}: {err}");
    }
}

/// Bad chain fields are refused with file, line, column and field (a
/// missing or doubled field is located at the start of its `[[chain]]`).
#[test]
fn bad_chain_fields_are_located() {
    assert_located(&[
        ("work = \"300ms\"", "work = \"300ms\"\nlifetime = \"1s\"", "7:1: chain[0]: give exactly one of"),
        ("work = \"300ms\"", "count = 3", "7:1: chain[0]: give exactly one of"),
        ("work = \"300ms\"", "work = \"0ms\"", "10:8: chain[0].work: must be at least 1 ns"),
        ("work = \"300ms\"", "lifetime = 0", "10:12: chain[0].lifetime: must be at least 1 ns"),
        ("weight = 5", "weight = 0", "9:10: chain[0].weight: weight must be a positive integer"),
        ("work = \"300ms\"", "work = \"300ms\"\ncount = 0", "11:9: chain[0].count: must be at least 1"),
        (
            "work = \"300ms\"",
            "work = \"300ms\"\nstart = \"2s\"\nuntil = \"1s\"",
            "12:9: chain[0].until: times out of order",
        ),
        ("work = \"300ms\"", "work = \"300ms\"\ncolour = 1", "11:1: chain[0].colour: unknown field"),
    ]);
    let ok = Scenario::parse("f.toml", BASE, "f").unwrap();
    assert_eq!(ok.chains().len(), 1);
    assert_eq!(ok.chains()[0].leaves, MemberLeaves::AfterWork(300 * MS));
}

/// Durations in scenario files go through the core's one parser: a bare
/// number other than 0 and a signed string are located errors, not 3 ns or
/// "an unknown unit".
#[test]
fn durations_need_units_and_refuse_signs() {
    assert_located(&[
        ("quantum = \"10ms\"", "quantum = 3", "5:11: machine.quantum: duration 3 needs a unit"),
        ("quantum = \"10ms\"", "quantum = \"-5ms\"", "5:11: machine.quantum: duration \"-5ms\" must not be negative"),
        ("quantum = \"10ms\"", "quantum = \"5\"", "5:11: machine.quantum: duration \"5\" needs a unit"),
        ("quantum = \"10ms\"", "quantum = \"1.5ns\"", "5:11: machine.quantum: duration \"1.5ns\" is finer than 1 ns"),
    ]);
}
