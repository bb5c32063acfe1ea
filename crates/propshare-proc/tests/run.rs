//! Integration tests on real processes. They need root (affinity and signals
//! on any process, perf counters); without it each test prints why it skips.
//! Runs are short (under 2 s) and bounds generous, but each weight test fails
//! if weights are ignored. Tests are serialised: they share the CPUs.

use propshare_proc::{run, sys, Accounting, GroupDef, JobSpec, Mode, ProcError, RunOptions, RunReport};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why this machine cannot run these tests, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: managing other processes needs root".into());
    }
    if !std::path::Path::new("/proc/self/task").exists() {
        return Some("no /proc".into());
    }
    None
}

/// Skips the test, saying why, where it cannot run; else holds the lock that
/// serialises the tests until the test ends.
macro_rules! serial_as_root {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("SKIPPED: {r}");
            return;
        }
        let _serial = serial();
    };
}

const SPIN: &[&str] = &["sh", "-c", "while :; do :; done"];
const MS: u64 = 1_000_000;

fn spinner() -> Child {
    Command::new(SPIN[0]).args(&SPIN[1..]).spawn().expect("spawn sh")
}

/// A spinner we start ourselves (to attach to), killed when dropped.
struct Victim(Child);

impl Victim {
    fn new() -> Victim {
        Victim(spinner())
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
    fn state(&self) -> char {
        sys::state(self.pid()).unwrap_or('?')
    }
    /// Not stopped, and every thread back on its original CPUs.
    fn assert_released(&self, orig: &sys::CpuMask, what: &str) {
        // Release (ours or the guardian's) may still be under way: allow 2 s.
        let released = || {
            self.state() != 'T'
                && sys::threads(self.pid())
                    .unwrap_or_default()
                    .iter()
                    .all(|&t| sys::get_affinity(t).ok().as_ref() == Some(orig))
        };
        let t = Instant::now();
        while !released() && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_ne!(self.state(), 'T', "{what}: PID {} left stopped", self.pid());
        for tid in sys::threads(self.pid()).unwrap() {
            assert_eq!(&sys::get_affinity(tid).unwrap(), orig, "{what}: affinity of {tid} not restored");
        }
    }
}

/// Two victims and the affinity they started with.
struct Victims {
    a: Victim,
    b: Victim,
    orig: sys::CpuMask,
}

impl Victims {
    fn new() -> Victims {
        let (a, b) = (Victim::new(), Victim::new());
        let orig = sys::get_affinity(a.pid()).unwrap();
        Victims { a, b, orig }
    }
    /// Attach to `a` with weight 1 and to `b` with weight `wb`.
    fn jobs(&self, wb: u64) -> Vec<JobSpec> {
        vec![JobSpec::pid(1, self.a.pid()), JobSpec::pid(wb, self.b.pid())]
    }
    /// Both released (see [`Victim::assert_released`]).
    fn assert_released(&self, what: &str) {
        self.a.assert_released(&self.orig, what);
        self.b.assert_released(&self.orig, what);
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first CPU we may use stands for "CPU 0" in these tests, the second for "CPU 1"
/// (a CI container may not give us CPU 0).
fn real_cpus(cpus: &[usize]) -> Vec<usize> {
    let allowed = sys::get_affinity(0).map(|m| m.cpus()).unwrap_or_default();
    cpus.iter().map(|&c| allowed.get(c).copied().unwrap_or(c + 100_000)).collect()
}

fn opts(jobs: Vec<JobSpec>, cpus: &[usize], secs: f64) -> RunOptions {
    RunOptions {
        jobs,
        cpus: Some(real_cpus(cpus)),
        duration: Some((secs * 1e9) as u64),
        quantum: 10 * MS,
        ..RunOptions::default()
    }
}

fn received(r: &RunReport, name: &str) -> f64 {
    r.clients
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.metrics.received_ns as f64)
        .unwrap_or_else(|| panic!("no client {name}"))
}

fn assert_children_gone(r: &RunReport) {
    for c in &r.clients {
        let st = sys::state(c.pid);
        assert!(st.is_none() || st == Some('Z'), "{} (PID {}) still there in state {st:?}", c.name, c.pid);
    }
}

fn heavy_fraction(r: &RunReport, heavy: &str, light: &str) -> f64 {
    let (h, l) = (received(r, heavy), received(r, light));
    h / (h + l)
}

/// Weights 1:3 on one CPU: the heavy spinner gets about 3/4 of the CPU. Fails
/// if weights are ignored (that gives 1/2).
#[test]
fn weights_one_to_three_on_one_cpu() {
    serial_as_root!();
    let jobs = vec![JobSpec::command(1, SPIN).named("light"), JobSpec::command(3, SPIN).named("heavy")];
    let r = run(opts(jobs, &[0], 1.5)).unwrap();
    eprint!("{}", r.to_table());
    let f = heavy_fraction(&r, "heavy", "light");
    assert!(f > 0.65 && f < 0.85, "heavy got {f:.3} of the CPU time, ideal 0.75");
    let ideal = r.clients.iter().find(|c| c.name == "heavy").unwrap().metrics.ideal_share;
    assert!((ideal - 0.75).abs() < 1e-9, "ideal {ideal}");
    assert_children_gone(&r);
}

/// The same with the schedstat fallback instead of perf counters.
#[test]
fn schedstat_accounting_also_enforces_weights() {
    serial_as_root!();
    let jobs = vec![JobSpec::command(1, SPIN).named("light"), JobSpec::command(3, SPIN).named("heavy")];
    let r = run(RunOptions { accounting: Accounting::Schedstat, ..opts(jobs, &[0], 1.5) }).unwrap();
    assert_eq!(r.accounting, "schedstat");
    let f = heavy_fraction(&r, "heavy", "light");
    assert!(f > 0.65 && f < 0.85, "heavy got {f:.3}, ideal 0.75");
}

/// Weights 2:1:1:1 on two CPUs (feasible): the scheduler gives the heavy
/// spinner about twice the CPU slots of each light one (the same number if
/// weights were ignored), or about twice the CPU time.
///
/// Slots or CPU time, because either can read low when other load shares
/// the CPUs: CFS gives a process continued at the start of a slot (placed
/// afresh on wake-up) about twice the CPU per slot of one that runs through
/// consecutive slots, so the heavy job (most slots back to back) gets less CPU
/// per slot; and under heavy load the slot counts themselves drift (seen at
/// 1.59 times while CPU time was 2.04 times). scripts/compare-linux.sh
/// measures the CPU-time shares; see docs/PROC.md.
#[test]
fn two_cpus_weights() {
    serial_as_root!();
    if sys::get_affinity(0).map(|m| m.cpus().len()).unwrap_or(1) < 2 {
        eprintln!("SKIPPED: needs 2 CPUs");
        return;
    }
    let dir = tempdir();
    let trace = dir.join("w2.jsonl");
    let jobs = vec![
        JobSpec::command(2, SPIN).named("heavy"),
        JobSpec::command(1, SPIN).named("a"),
        JobSpec::command(1, SPIN).named("b"),
        JobSpec::command(1, SPIN).named("c"),
    ];
    let r = run(RunOptions { trace: Some(trace.clone()), ..opts(jobs, &[0, 1], 1.5) }).unwrap();
    eprint!("{}", r.to_table());
    let text = std::fs::read_to_string(&trace).unwrap();
    let slots = |name: &str| {
        text.lines().filter(|l| l.contains("\"ev\":\"run\"") && l.contains(&format!("\"client\":\"{name}\""))).count()
            as f64
    };
    let light = (slots("a") + slots("b") + slots("c")) / 3.0;
    let got = |name: &str| r.clients.iter().find(|c| c.name == name).unwrap().metrics.received_ns as f64;
    let light_ns = (got("a") + got("b") + got("c")) / 3.0;
    // Weights ignored would put both ratios near 1.
    let (by_slots, by_time) = (slots("heavy") / light, got("heavy") / light_ns);
    assert!(
        by_slots > 1.6 || by_time > 1.6,
        "heavy had {by_slots:.2} times a light job's slots and {by_time:.2} times its CPU time"
    );
    let ideal = r.clients.iter().find(|c| c.name == "heavy").unwrap().metrics.ideal_share;
    assert!((ideal - 0.4).abs() < 0.01, "ideal {ideal}");
}

/// Attached processes are resumed and their affinity restored when the run
/// ends; they keep running (we did not start them).
#[test]
fn attached_processes_are_released_at_the_end() {
    serial_as_root!();
    let v = Victims::new();
    let r = run(opts(v.jobs(2), &[0], 0.6)).unwrap();
    v.assert_released("end of run");
    assert!(r.clients.iter().all(|c| c.end.starts_with("running")));
    // Both really ran under us, in proportion.
    let f = heavy_fraction(&r, &format!("pid{}", v.b.pid()), &format!("pid{}", v.a.pid()));
    assert!(f > 0.55, "weight-2 process got {f:.3}");
}

/// A caller's stop request (what SIGINT/SIGTERM do in the CLI) ends the run
/// with everything released.
#[test]
fn stop_request_releases_everything() {
    serial_as_root!();
    let a = Victim::new();
    let orig = sys::get_affinity(a.pid()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let jobs = vec![JobSpec::pid(1, a.pid()), JobSpec::command(1, SPIN).named("spawned")];
    let t = std::thread::spawn(move || run(RunOptions { stop: Some(s2), ..opts(jobs, &[0], 30.0) }));
    std::thread::sleep(Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    let r = t.join().unwrap().unwrap();
    assert_eq!(r.ended, "stopped by the caller");
    a.assert_released(&orig, "stop request");
    // The job we started was continued, then terminated and reaped.
    let spawned = r.clients.iter().find(|c| c.name == "spawned").unwrap();
    assert!(spawned.end.contains("signal 15"), "{}", spawned.end);
    assert!(sys::state(spawned.pid).is_none());
}

/// A panic inside the loop still resumes and restores every process.
#[test]
fn panic_releases_everything() {
    serial_as_root!();
    let v = Victims::new();
    let o = RunOptions { panic_after_rounds: Some(20), ..opts(v.jobs(1), &[0], 30.0) };
    let res = std::thread::spawn(move || run(o)).join();
    assert!(res.is_err(), "the injected panic should propagate");
    v.assert_released("panic");
}

/// An error inside the loop resumes and restores every process.
#[test]
fn error_releases_everything() {
    serial_as_root!();
    let v = Victims::new();
    let e = run(RunOptions { fail_after_rounds: Some(20), ..opts(v.jobs(3), &[0], 30.0) }).unwrap_err();
    assert!(!e.is_usage());
    v.assert_released("error");
}

/// Bad input: a clear usage error (exit status 2 in the CLI), and nothing
/// stopped, even when good jobs come first.
#[test]
fn bad_input_is_refused_and_nothing_is_left_stopped() {
    serial_as_root!();
    let a = Victim::new();
    let orig = sys::get_affinity(a.pid()).unwrap();
    let me = std::process::id() as i32;
    let cases: Vec<(&str, RunOptions)> = vec![
        (
            "missing command",
            opts(vec![JobSpec::pid(1, a.pid()), JobSpec::command(1, &["/no/such/program"])], &[0], 1.0),
        ),
        (
            "command not in PATH",
            opts(vec![JobSpec::pid(1, a.pid()), JobSpec::command(1, &["no-such-program-xyz"])], &[0], 1.0),
        ),
        ("missing pid", opts(vec![JobSpec::pid(1, a.pid()), JobSpec::pid(1, 999_999_999)], &[0], 1.0)),
        ("our own pid", opts(vec![JobSpec::pid(1, a.pid()), JobSpec::pid(1, me)], &[0], 1.0)),
        ("pid 1", opts(vec![JobSpec::pid(1, 1)], &[0], 1.0)),
        ("kernel thread", opts(vec![JobSpec::pid(1, 2)], &[0], 1.0)),
        ("zero weight", opts(vec![JobSpec::pid(1, a.pid()), JobSpec::command(0, SPIN)], &[0], 1.0)),
        ("no such cpu", opts(vec![JobSpec::pid(1, a.pid())], &[0, 4000], 1.0)),
        ("cpu twice", opts(vec![JobSpec::pid(1, a.pid())], &[0, 0], 1.0)),
        ("same pid twice", opts(vec![JobSpec::pid(1, a.pid()), JobSpec::pid(2, a.pid())], &[0], 1.0)),
        (
            "unknown scheduler",
            RunOptions { scheduler: "nope".into(), ..opts(vec![JobSpec::pid(1, a.pid())], &[0], 1.0) },
        ),
        ("zero quantum", RunOptions { quantum: 0, ..opts(vec![JobSpec::pid(1, a.pid())], &[0], 1.0) }),
        ("quantum below 1ms", RunOptions { quantum: 999_999, ..opts(vec![JobSpec::pid(1, a.pid())], &[0], 1.0) }),
        ("no jobs", opts(vec![], &[0], 1.0)),
    ];
    for (what, o) in cases {
        let e = run(o).expect_err(what);
        assert!(e.is_usage(), "{what}: not a usage error: {e}");
        assert_eq!(e.exit_code(), 2);
        eprintln!("{what}: {e}");
        a.assert_released(&orig, what);
    }
}

/// Processes that sleep are reported blocked, and woken when they use CPU
/// again; a spinner next to one gets the CPU while it sleeps.
#[test]
fn sleepers_block_and_wake() {
    serial_as_root!();
    let dir = tempdir();
    let trace = dir.join("trace.jsonl");
    let sleeper = ["sh", "-c", "while :; do i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; sleep 0.03; done"];
    let jobs = vec![JobSpec::command(1, SPIN).named("spin"), JobSpec::command(1, &sleeper).named("io")];
    let r = run(RunOptions { trace: Some(trace.clone()), ..opts(jobs, &[0], 1.5) }).unwrap();
    eprint!("{}", r.to_table());
    let text = std::fs::read_to_string(&trace).unwrap();
    let count = |ev: &str| {
        text.lines().filter(|l| l.contains(&format!("\"ev\":\"{ev}\"")) && l.contains("\"client\":\"io\"")).count()
    };
    assert!(count("block") >= 3, "io blocked {} times", count("block"));
    assert!(count("wake") >= 2, "io woke {} times", count("wake"));
    // The spinner gets the CPU while the other sleeps. (Absolute shares are
    // not asserted: other load on the machine takes its part of CPU 0.)
    assert!(received(&r, "spin") > 3.0 * received(&r, "io"), "{}", r.to_table());
    let io = r.clients.iter().find(|c| c.name == "io").unwrap();
    assert!(io.metrics.ideal_share < 0.5, "blocking should lower the sleeper's ideal");
}

/// The trace has the fixed schema: a meta line first, then joins and runs
/// naming clients by string id.
#[test]
fn trace_file_schema() {
    serial_as_root!();
    let dir = tempdir();
    let trace = dir.join("t.jsonl");
    let jobs = vec![JobSpec::command(2, SPIN).named("x"), JobSpec::command(1, &["sleep", "0.2"])];
    let r = run(RunOptions { trace: Some(trace.clone()), scenario: "unit".into(), seed: 7, ..opts(jobs, &[0], 0.6) })
        .unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["ev"], "meta");
    assert_eq!(lines[0]["scheduler"], "wfq+readjust");
    assert_eq!(lines[0]["cpus"], 1);
    assert_eq!(lines[0]["quantum_ns"], 10_000_000);
    assert_eq!(lines[0]["seed"], 7);
    assert_eq!(lines[0]["scenario"], "unit");
    assert!(lines.iter().any(|l| l["ev"] == "join" && l["client"] == "x" && l["weight"] == 2));
    assert!(lines.iter().any(|l| l["ev"] == "leave" && l["client"] == "sleep"));
    let runs: Vec<_> = lines.iter().filter(|l| l["ev"] == "run").collect();
    assert!(runs.len() > 10);
    for l in &runs {
        assert!(l["start"].as_u64().unwrap() <= l["end"].as_u64().unwrap());
        assert_eq!(l["cpu"], 0);
    }
    assert_eq!(r.clients.iter().find(|c| c.name == "sleep").unwrap().end, "exited 0");
}

/// The control socket adds jobs and changes weights while running.
#[test]
fn control_socket_adds_and_reweights() {
    serial_as_root!();
    let dir = tempdir();
    let sock = dir.join("ctl.sock");
    let s2 = sock.clone();
    let t = std::thread::spawn(move || {
        run(RunOptions { control: Some(s2), ..opts(vec![JobSpec::command(1, SPIN).named("a")], &[0], 20.0) })
    });
    let req = |line: &str| {
        let t0 = Instant::now();
        loop {
            match propshare_proc::control::request(&sock, line) {
                Ok(r) => return r,
                Err(_) if t0.elapsed() < Duration::from_secs(5) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("control socket: {e}"),
            }
        }
    };
    assert_eq!(req("add -w 1 -n b -- sh -c 'while :; do :; done'").trim(), "ok b");
    assert!(req("add -w 1 -- /no/such/thing").starts_with("error:"));
    assert!(req("weight nobody 3").starts_with("error:"));
    assert!(req("weight b 0").starts_with("error:"));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(req("weight b 4").trim(), "ok");
    std::thread::sleep(Duration::from_millis(1200));
    let list = req("list");
    assert!(list.contains("b pid=") && list.contains("weight=4"), "{list}");
    assert_eq!(req("quit").trim(), "ok");
    let r = t.join().unwrap().unwrap();
    assert_eq!(r.ended, "quit on the control socket");
    assert_children_gone(&r);
    let b = r.clients.iter().find(|c| c.name == "b").unwrap();
    assert_eq!(b.weight, 4);
    // Over the last 1.2 s b had weight 4 against 1: well over half.
    assert!(received(&r, "b") > received(&r, "a") * 1.3, "{}", r.to_table());
}

/// A job that exits leaves; the run ends when every job has.
#[test]
fn run_ends_when_jobs_exit() {
    serial_as_root!();
    let jobs = vec![JobSpec::command(1, &["sleep", "0.1"]), JobSpec::command(1, &["sh", "-c", "exit 3"])];
    let r = run(RunOptions { duration: None, ..opts(jobs, &[0], 0.0) }).unwrap();
    assert_eq!(r.ended, "every job exited");
    assert_eq!(r.clients[1].end, "exited 3");
    assert!(r.wall_ns < 5_000_000_000);
}

/// Linux baselines run the same jobs and report the same figures.
#[test]
fn baselines_run_and_measure() {
    serial_as_root!();
    let jobs = vec![JobSpec::command(1, SPIN).named("light"), JobSpec::command(3, SPIN).named("heavy")];
    let r = run(RunOptions { mode: Mode::BaselineNice, ..opts(jobs.clone(), &[0], 1.0) }).unwrap();
    eprint!("{}", r.to_table());
    assert_eq!(r.scheduler, "linux-nice");
    let f = heavy_fraction(&r, "heavy", "light");
    assert!(f > 0.6, "nice baseline: heavy got {f:.3}");
    assert_children_gone(&r);
    if !propshare_proc::baseline::cgroups_available() {
        eprintln!("SKIPPED shares baseline: no cgroup v1 cpu/cpuset");
        return;
    }
    let r = run(RunOptions { mode: Mode::BaselineShares, ..opts(jobs, &[0], 1.0) }).unwrap();
    eprint!("{}", r.to_table());
    let f = heavy_fraction(&r, "heavy", "light");
    assert!(f > 0.6, "shares baseline: heavy got {f:.3}");
    assert_children_gone(&r);
    let tag = format!("/sys/fs/cgroup/cpu/propshare.{}", std::process::id());
    assert!(!std::path::Path::new(&tag).exists(), "cgroup {tag} left behind");
}

/// The guardian alone: closing its pipe without disarming resumes what it watches.
#[test]
fn guardian_resumes_on_parent_loss() {
    serial_as_root!();
    let a = Victim::new();
    let orig = sys::get_affinity(a.pid()).unwrap();
    let mut g = propshare_proc::guardian::Guardian::spawn().unwrap();
    g.add(a.pid(), None, orig, Default::default()).unwrap();
    sys::set_process_affinity(a.pid(), &sys::CpuMask::of(&real_cpus(&[0]))).unwrap();
    sys::kill(a.pid(), libc::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(a.state(), 'T');
    drop(g);
    a.assert_released(&orig, "guardian");
}

/// SIGKILL of the scheduler: the guardian resumes every managed process and
/// restores its affinity. The scheduler runs in a child process (this test
/// binary re-executed on `sigkill_helper`).
#[test]
fn sigkill_of_the_scheduler_resumes_everything() {
    serial_as_root!();
    let victims: Vec<Victim> = (0..3).map(|_| Victim::new()).collect();
    let orig = sys::get_affinity(victims[0].pid()).unwrap();
    let pids: Vec<String> = victims.iter().map(|v| v.pid().to_string()).collect();
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sigkill_helper", "--nocapture", "--test-threads=1"])
        .env("PROPSHARE_SIGKILL_HELPER", pids.join(","))
        .spawn()
        .unwrap();
    // Wait until the scheduler has stopped at least two of the three (one CPU).
    let t = Instant::now();
    loop {
        let stopped = victims.iter().filter(|v| v.state() == 'T').count();
        if stopped >= 2 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the helper never took control");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    helper.kill().unwrap(); // SIGKILL
    helper.wait().unwrap();
    for v in &victims {
        v.assert_released(&orig, "SIGKILL");
    }
}

/// Not a test on its own: the scheduler process that the test above kills.
#[test]
fn sigkill_helper() {
    let Ok(pids) = std::env::var("PROPSHARE_SIGKILL_HELPER") else { return };
    let jobs = pids.split(',').map(|p| JobSpec::pid(1, p.parse().unwrap())).collect();
    let _ = run(opts(jobs, &[0], 60.0));
    // If we get here the parent failed to kill us; the processes are released anyway.
}

/// The children of `pid` (every thread's), from `/proc/<pid>/task/*/children`.
fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for t in sys::threads(pid).unwrap_or_default() {
        let s = std::fs::read_to_string(format!("/proc/{pid}/task/{t}/children")).unwrap_or_default();
        out.extend(s.split_whitespace().filter_map(|w| w.parse::<i32>().ok()));
    }
    out
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

/// A spinner that writes how it ended into `file`: `term` on SIGTERM, `hup` on SIGHUP.
fn trapping_spinner(file: &std::path::Path) -> Vec<String> {
    let f = file.display();
    let script =
        format!("trap 'echo term > \"{f}\"; exit 0' TERM; trap 'echo hup > \"{f}\"; exit 0' HUP; while :; do :; done");
    vec!["sh".into(), "-c".into(), script]
}

/// SIGKILL of the scheduler while started jobs are stopped: they are not
/// killed by the orphaned process group's SIGHUP (they used to be: each job's
/// group lost its only link to the session with its parent), and none is left
/// behind: the guardian resumes them and ends them with SIGTERM, as a clean
/// exit does.
#[test]
fn sigkill_of_the_scheduler_ends_started_jobs_without_sighup() {
    serial_as_root!();
    let dir = tempdir();
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sigkill_spawn_helper", "--nocapture", "--test-threads=1"])
        .env("PROPSHARE_SIGKILL_SPAWN_HELPER", &dir)
        .spawn()
        .unwrap();
    let hpid = helper.id() as i32;
    // The jobs: the helper's children that are not the guardian.
    let t = Instant::now();
    let jobs = loop {
        let jobs: Vec<i32> = children_of(hpid).into_iter().filter(|&p| comm(p) == "sh").collect();
        if jobs.len() == 3 && jobs.iter().filter(|&&p| sys::state(p) == Some('T')).count() >= 2 {
            break jobs;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the helper never took control");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(50));
    helper.kill().unwrap(); // SIGKILL
    helper.wait().unwrap();
    let t = Instant::now();
    while jobs.iter().any(|&p| sys::state(p).is_some_and(|s| s != 'Z')) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    for (k, &p) in jobs.iter().enumerate() {
        let st = sys::state(p);
        assert!(st.is_none() || st == Some('Z'), "job {k} (PID {p}) left behind in state {st:?}");
    }
    for k in 0..3 {
        let how = std::fs::read_to_string(dir.join(format!("j{k}"))).unwrap_or_default();
        assert_eq!(how.trim(), "term", "job {k} ended by {how:?}, not by the SIGTERM of a clean exit");
    }
}

/// Not a test on its own: the scheduler process that the test above kills.
#[test]
fn sigkill_spawn_helper() {
    let Ok(dir) = std::env::var("PROPSHARE_SIGKILL_SPAWN_HELPER") else { return };
    let dir = std::path::PathBuf::from(dir);
    let jobs = (0..3)
        .map(|k| {
            let argv = trapping_spinner(&dir.join(format!("j{k}")));
            JobSpec::command(1, &argv.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let _ = run(opts(jobs, &[0], 60.0));
}

/// A guardian that dies is noticed: the run stops cleanly at once (it used to
/// go on, with nothing left to release the jobs if the scheduler died).
#[test]
fn guardian_death_stops_the_run() {
    serial_as_root!();
    let t = std::thread::spawn(|| run(opts(vec![JobSpec::command(1, SPIN), JobSpec::command(1, SPIN)], &[0], 20.0)));
    let me = sys::getpid();
    let t0 = Instant::now();
    let guardian = loop {
        if let Some(g) = children_of(me).into_iter().find(|&p| comm(p) == "propshare-guard") {
            break g;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "no guardian found");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(200));
    sys::kill(guardian, libc::SIGKILL).unwrap();
    let killed = Instant::now();
    let r = t.join().unwrap().unwrap();
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "the run went on {:?} after the guardian died",
        killed.elapsed()
    );
    assert!(r.ended.contains("guardian died"), "{}", r.ended);
    assert_children_gone(&r);
}

/// A process its user had stopped before the run is stopped after it, both
/// after a clean exit and after the guardian releases it (it used to be resumed).
#[test]
fn user_stopped_process_stays_stopped() {
    serial_as_root!();
    let a = Victim::new();
    let orig = sys::get_affinity(a.pid()).unwrap();
    sys::kill(a.pid(), libc::SIGSTOP).unwrap();
    while a.state() != 'T' {
        std::thread::sleep(Duration::from_millis(2));
    }
    let r = run(opts(vec![JobSpec::pid(1, a.pid()), JobSpec::command(1, SPIN)], &[0], 0.5)).unwrap();
    assert!(sys::state(r.clients[1].pid).is_none_or(|s| s == 'Z'), "the started job is still there");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(a.state(), 'T', "the user's stopped process was resumed by the run");
    for tid in sys::threads(a.pid()).unwrap() {
        assert_eq!(sys::get_affinity(tid).unwrap(), orig, "affinity of {tid} not restored");
    }
    // The guardian's release (the scheduler died): the same.
    let mut g = propshare_proc::guardian::Guardian::spawn().unwrap();
    let how = propshare_proc::guardian::Release { terminate: false, leave_stopped: true };
    g.add(a.pid(), None, orig, how).unwrap();
    sys::set_process_affinity(a.pid(), &sys::CpuMask::of(&real_cpus(&[0]))).unwrap();
    sys::kill(a.pid(), libc::SIGCONT).unwrap();
    drop(g);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(a.state(), 'T', "the guardian resumed the user's stopped process");
    assert_eq!(sys::get_affinity(a.pid()).unwrap(), orig);
}

/// The trace is written as the run goes: half-way through it already holds
/// the meta line, the joins and runs, every line whole JSON (it used to be
/// written only at the end, so a SIGKILL left nothing).
#[test]
fn trace_is_written_as_the_run_goes() {
    serial_as_root!();
    let path = tempdir().join("live.jsonl");
    let p2 = path.clone();
    let t = std::thread::spawn(move || {
        run(RunOptions {
            trace: Some(p2),
            ..opts(vec![JobSpec::command(1, SPIN), JobSpec::command(1, SPIN)], &[0], 3.0)
        })
    });
    std::thread::sleep(Duration::from_millis(2000));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let r = t.join().unwrap().unwrap();
    assert!(r.output_errors.is_empty(), "{:?}", r.output_errors);
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}"))).collect();
    assert_eq!(lines.first().map(|l| l["ev"].clone()), Some("meta".into()), "{text}");
    assert_eq!(lines.iter().filter(|l| l["ev"] == "join").count(), 2, "{text}");
    assert!(lines.iter().filter(|l| l["ev"] == "run").count() >= 10, "{text}");
    let full = std::fs::read_to_string(&path).unwrap();
    assert!(full.starts_with(&text) && full.len() > text.len(), "the end of the run appends to the trace");
}

/// Every descendant of `pid`, walking `/proc/*/task/*/children`.
fn descendants_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for c in children_of(p) {
            out.push(c);
            frontier.push(c);
        }
    }
    out
}

/// Read the PID a job's descendant wrote to `file` (waiting for it).
fn pid_in(file: &std::path::Path) -> i32 {
    let t = Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return p;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{} never written", file.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `kid` has ended (gone, or a zombie) within 2 s.
fn assert_ended(kid: i32, what: &str) {
    let t = Instant::now();
    while sys::state(kid).is_some_and(|s| s != 'Z') && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = sys::state(kid);
    assert!(st.is_none() || st == Some('Z'), "{what} (PID {kid}) outlived the run in state {st:?}");
}

/// Kills `pid` when dropped (a test's leftover, if the code under test failed).
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = sys::kill(self.0, libc::SIGKILL);
    }
}

/// An attached process that forks during the run: its children (forked
/// while it was pinned, so pinned too) are unpinned and running after the
/// run (they used to stay pinned to one CPU forever).
#[test]
fn forked_children_are_released_with_their_job() {
    serial_as_root!();
    let script = "sleep 0.3; (while :; do :; done) & (while :; do :; done) & wait";
    let a = Victim(Command::new("sh").args(["-c", script]).spawn().unwrap());
    let orig = sys::get_affinity(a.pid()).unwrap();
    let r = run(opts(vec![JobSpec::pid(1, a.pid()), JobSpec::command(1, SPIN)], &[0], 1.5)).unwrap();
    assert!(sys::state(r.clients[1].pid).is_none_or(|s| s == 'Z'));
    let kids: Vec<i32> = descendants_of(a.pid());
    let _cleanup: Vec<KillOnDrop> = kids.iter().map(|&k| KillOnDrop(k)).collect();
    assert!(kids.len() >= 2, "the job did not fork: {kids:?}");
    std::thread::sleep(Duration::from_millis(50));
    for k in kids {
        assert_ne!(sys::state(k), Some('T'), "child {k} left stopped");
        assert_eq!(sys::get_affinity(k).unwrap(), orig, "child {k} left pinned");
    }
}

/// A started job's child that calls `setsid` (leaving the job's process
/// group) is ended with its job at the end of the run (it used to keep
/// running, pinned, after the run).
#[test]
fn setsid_child_is_released_with_its_job() {
    serial_as_root!();
    let f = tempdir().join("setsid.pid");
    let script = format!("setsid sh -c 'echo $$ > \"{}\"; while :; do :; done' & wait", f.display());
    let jobs = vec![JobSpec::command(1, &["sh", "-c", &script]), JobSpec::command(1, SPIN)];
    let r = run(opts(jobs, &[0], 1.5)).unwrap();
    let kid = pid_in(&f);
    let _cleanup = KillOnDrop(kid);
    assert_children_gone(&r);
    assert_ended(kid, "the setsid child");
}

/// A started job whose main process exits and leaves a child behind: the
/// child is ended at the end of the run like the job (it used to be left
/// running, pinned).
#[test]
fn child_left_behind_is_released() {
    serial_as_root!();
    let f = tempdir().join("orphan.pid");
    let script = format!("sh -c 'echo $$ > \"{}\"; while :; do :; done' & sleep 0.2; exit 0", f.display());
    let jobs = vec![JobSpec::command(1, &["sh", "-c", &script]).named("parent"), JobSpec::command(1, SPIN)];
    let r = run(opts(jobs, &[0], 3.0)).unwrap();
    let kid = pid_in(&f);
    let _cleanup = KillOnDrop(kid);
    assert_eq!(r.clients[0].end, "exited 0", "the main process should have exited on its own");
    assert_ended(kid, "the child left behind");
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "propshare-proc-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[allow(dead_code)]
fn _usage(e: ProcError) -> bool {
    e.is_usage()
}

/// Start `run` with a control socket at `sock` on a thread; returns once the socket answers.
fn run_with_control(
    jobs: Vec<JobSpec>,
    sock: &std::path::Path,
    secs: f64,
) -> std::thread::JoinHandle<Result<RunReport, ProcError>> {
    let s2 = sock.to_path_buf();
    let t = std::thread::spawn(move || run(RunOptions { control: Some(s2), ..opts(jobs, &[0], secs) }));
    let t0 = Instant::now();
    while propshare_proc::control::request(sock, "list").is_err() {
        assert!(t0.elapsed() < Duration::from_secs(5), "the control socket never answered");
        std::thread::sleep(Duration::from_millis(10));
    }
    t
}

/// Under `umask 000` the control socket is still mode 0600 (it was 0777, so
/// any user could add `sh -c ...` jobs that ran as root).
#[test]
fn control_socket_is_private_under_umask_000() {
    serial_as_root!();
    let dir = tempdir();
    let sock = dir.join("ctl.sock");
    // SAFETY: umask has no preconditions; restored below.
    let old = unsafe { libc::umask(0) };
    let t = run_with_control(vec![JobSpec::command(1, SPIN).named("a")], &sock, 20.0);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(propshare_proc::control::request(&sock, "quit").unwrap().trim(), "ok");
    let r = t.join().unwrap().unwrap();
    assert_children_gone(&r);
    assert_eq!(mode & 0o777, 0o600, "control socket mode {:o}", mode & 0o777);
    assert!(!sock.exists(), "the socket is removed at the end");
}

/// `--control PATH` where PATH is an existing file: refused, naming the path,
/// and the file is left untouched (it used to be deleted).
#[test]
fn control_socket_never_replaces_an_existing_file() {
    serial_as_root!();
    let dir = tempdir();
    let path = dir.join("precious.txt");
    std::fs::write(&path, "keep me\n").unwrap();
    let e = run(RunOptions { control: Some(path.clone()), ..opts(vec![JobSpec::command(1, SPIN)], &[0], 1.0) })
        .unwrap_err();
    assert!(e.is_usage(), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "the error names the path: {e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me\n");
}

/// Another user reaching the socket (its mode loosened by hand) is refused
/// after `SO_PEERCRED`; the command it sent is not run.
#[test]
fn control_socket_refuses_other_users() {
    serial_as_root!();
    let dir = tempdir();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.join("ctl.sock");
    let marker = dir.join("ran-as-nobody");
    let t = run_with_control(vec![JobSpec::command(1, SPIN).named("a")], &sock, 20.0);
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let line = format!("add -w 1 -n intruder -- sh -c \"id > '{}'\"\n", marker.display());
    let (status, reply) = as_nobody_request(&sock, &line);
    let list = propshare_proc::control::request(&sock, "list").unwrap();
    assert_eq!(propshare_proc::control::request(&sock, "quit").unwrap().trim(), "ok");
    let r = t.join().unwrap().unwrap();
    assert_children_gone(&r);
    assert_eq!(status, 0, "the child as uid 65534 could not connect (status {status})");
    assert!(reply.starts_with("error: permission denied"), "reply to uid 65534: {reply:?}");
    assert!(!list.contains("intruder") && !marker.exists(), "the intruder's job ran: {list}");
}

/// Fork a child that becomes uid/gid 65534, connects to `sock`, sends `line`
/// and returns what it read (the child uses only raw system calls).
fn as_nobody_request(sock: &std::path::Path, line: &str) -> (i32, String) {
    use std::os::unix::ffi::OsStrExt;
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(sock.as_os_str().as_bytes()) {
        *d = *s as libc::c_char;
    }
    let mut fds = [0i32; 2];
    // SAFETY: valid array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let msg = line.as_bytes().to_vec();
    // SAFETY: the child makes raw system calls only, then _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            libc::close(fds[0]);
            let gid = 65534;
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(gid) != 0 || libc::setuid(65534) != 0 {
                libc::_exit(3);
            }
            let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(s, &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) != 0 {
                libc::_exit(2);
            }
            libc::write(s, msg.as_ptr() as *const libc::c_void, msg.len());
            let mut buf = [0u8; 512];
            loop {
                let n = libc::read(s, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
                if n <= 0 {
                    break;
                }
                libc::write(fds[1], buf.as_ptr() as *const libc::c_void, n as usize);
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the write end.
    unsafe { libc::close(fds[1]) };
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let mut out = String::new();
    // SAFETY: the read end is ours.
    let mut f = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let _ = f.read_to_string(&mut out);
    let mut status = 0;
    // SAFETY: reaping our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    (libc::WEXITSTATUS(status), out)
}

/// A client sending one byte every 100 ms, a 4 MiB line without a newline
/// and 30 idle connections do not stall decisions: the controller keeps its
/// rounds (at least one per two quanta) and the 1:3 weights hold; the long
/// line gets a short error, not an echo. They used
/// to freeze every decision while one job kept its CPU.
#[test]
fn slow_and_idle_clients_do_not_stall_decisions() {
    serial_as_root!();
    let dir = tempdir();
    let sock = dir.join("ctl.sock");
    let jobs = vec![JobSpec::command(1, SPIN).named("light"), JobSpec::command(3, SPIN).named("heavy")];
    let t = run_with_control(jobs, &sock, 20.0);
    use std::io::Write;
    let slow_sock = sock.clone();
    let slow = std::thread::spawn(move || {
        let mut s = std::os::unix::net::UnixStream::connect(&slow_sock).unwrap();
        s.set_write_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut sent = 0;
        for b in b"list list list list list list list list".iter().cycle().take(25) {
            if s.write_all(&[*b]).is_err() {
                break;
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut huge = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let idle: Vec<_> = (0..30).filter_map(|_| std::os::unix::net::UnixStream::connect(&sock).ok()).collect();
    huge.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..64 {
        if huge.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut answer = Vec::new();
    huge.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = std::io::Read::read_to_end(&mut huge, &mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert_eq!(slow.join().unwrap(), 25, "the slow client was cut off");
    drop(idle);
    let t0 = Instant::now();
    let r = loop {
        let r = propshare_proc::control::request(&sock, "quit").unwrap();
        if r.trim() == "ok" || t0.elapsed() > Duration::from_secs(5) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(r.trim(), "ok");
    assert!(answer.starts_with("error: command longer than 4096 bytes") && answer.len() < 200, "{answer:?}");
    let r = t.join().unwrap().unwrap();
    eprint!("{}", r.to_table());
    assert_children_gone(&r);
    let quanta = r.wall_ns / (10 * MS);
    // One round per quantum on an idle machine; half of that under the load of a shared one.
    assert!(r.rounds >= quanta / 2, "{} rounds in {} quanta: decisions stalled", r.rounds, quanta);
    let f = heavy_fraction(&r, "heavy", "light");
    assert!((0.6..0.9).contains(&f), "heavy got {f:.3} of the CPU (ideal 0.75)");
}

fn group<'a>(r: &'a RunReport, name: &str) -> &'a propshare_proc::metrics::GroupReport {
    r.groups.iter().find(|g| g.metrics.group == name).unwrap_or_else(|| panic!("no group {name}"))
}

/// Groups A (1) with one spinner and B (1) with three, on one CPU: A's
/// spinner gets half the CPU (flat weights would give it a quarter), and
/// the report gives each group's ideal from the hierarchical reference.
#[test]
fn groups_split_the_cpu_by_the_tree() {
    serial_as_root!();
    let mut jobs = vec![JobSpec::command(1, SPIN).named("a0").in_group("A")];
    for k in 0..3 {
        jobs.push(JobSpec::command(1, SPIN).named(&format!("b{k}")).in_group("B"));
    }
    let mut o = opts(jobs, &[0], 1.5);
    o.groups = vec![
        GroupDef { name: "A".into(), weight: 1, parent: None },
        GroupDef { name: "B".into(), weight: 1, parent: None },
    ];
    let r = run(o).unwrap();
    eprint!("{}", r.to_table());
    let a = group(&r, "A");
    assert!((a.norm_ideal_share - 0.5).abs() < 0.01, "A's ideal: {:?}", a);
    assert!(
        a.norm_achieved_share > 0.4 && a.norm_achieved_share < 0.6,
        "A got {:.3} of the jobs' CPU, ideal 0.5 (flat: 0.25)",
        a.norm_achieved_share
    );
    assert_eq!(a.metrics.service.received_ns, r.clients[0].metrics.received_ns);
    let b = group(&r, "B");
    assert!(
        (b.metrics.service.received_ns as f64 - (1..4).map(|k| r.clients[k].metrics.received_ns as f64).sum::<f64>())
            .abs()
            < 2.0
    );
    assert_children_gone(&r);
}

/// `--cgroup2` on a fake cgroupfs: the subtree's processes are attached in
/// their groups; a process written into a cgroup while the run goes joins,
/// one removed from it leaves (and is released at once), a `cpu.weight`
/// change reweighs its group. At the end every process is released.
#[test]
fn cgroup2_subtree_is_enforced_and_followed() {
    serial_as_root!();
    let root = std::env::temp_dir().join(format!("propshare-fakecg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let v: Vec<Victim> = (0..4).map(|_| Victim::new()).collect();
    let orig = sys::get_affinity(v[0].pid()).unwrap();
    let write = |rel: &str, file: &str, text: String| {
        std::fs::create_dir_all(root.join(rel)).unwrap();
        std::fs::write(root.join(rel).join(file), text).unwrap();
    };
    write("", "cgroup.procs", String::new());
    write("A", "cpu.weight", "100\n".into());
    write("A", "cgroup.procs", format!("{}\n", v[0].pid()));
    write("B", "cpu.weight", "100\n".into());
    write("B", "cgroup.procs", format!("{}\n{}\n", v[1].pid(), v[2].pid()));
    let mut o = opts(Vec::new(), &[0], 1.6);
    o.cgroup2 = Some(root.clone());
    o.cgroup2_every = 50 * MS;
    // Slot charging: on a loaded machine WFQ with CPU charging lets a
    // newcomer wait long behind spinners charged little (docs/PROC.md).
    o.charge = propshare_proc::Charge::Slot;
    let changed = std::thread::scope(|s| {
        let t = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(400));
            // v3 joins B, v1 leaves it, A becomes 3 times as heavy as B.
            write("B", "cgroup.procs", format!("{}\n{}\n", v[2].pid(), v[3].pid()));
            write("A", "cpu.weight", "300\n".into());
            std::thread::sleep(Duration::from_millis(300));
            // v1 left: it runs again, on its own CPUs, while the run goes on.
            (v[1].state(), sys::get_affinity(v[1].pid()).unwrap())
        });
        let r = run(o).unwrap();
        (r, t.join().unwrap())
    });
    let (r, (left_state, left_mask)) = changed;
    eprint!("{}", r.to_table());
    assert_ne!(left_state, 'T', "the process that left the subtree was left stopped");
    assert_eq!(left_mask, orig, "the process that left the subtree was left pinned");
    let c =
        |k: usize| r.clients.iter().find(|c| c.pid == v[k].pid()).unwrap_or_else(|| panic!("victim {k} not managed"));
    assert_eq!(c(1).end, "left the cgroup subtree");
    assert!(c(3).metrics.received_ns > 0, "the process that joined never ran");
    assert_eq!((group(&r, "A").metrics.service.weight, group(&r, "B").metrics.service.weight), (100, 100));
    // After the change A's one process is entitled to 3/4 of the CPU.
    assert!(received(&r, &c(0).name) > received(&r, &c(2).name), "{}", r.to_table());
    for (k, x) in v.iter().enumerate() {
        x.assert_released(&orig, &format!("victim {k}"));
    }
    std::fs::remove_dir_all(&root).unwrap();
}
