//! `propshare run` as a user runs it: exit statuses, and signals to the
//! scheduler process (SIGINT, SIGTERM, SIGKILL) never leave a process stopped
//! or pinned. Needs root; skips with a printed reason otherwise.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// These tests need root and run one at a time: the lock, or `None` (with
/// a printed reason) when not root.
fn serial_as_root() -> Option<MutexGuard<'static, ()>> {
    if !is_root() {
        eprintln!("SKIPPED: not root");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// `propshare run --cpus FIRST FLAGS --json DIR/r.json --trace DIR/t.jsonl
/// JOBS` spawned, its output to `out()`, DIR a temporary directory named
/// after `name`, made here: the child, DIR, and the JSON and trace paths.
fn spawn_with_outputs(
    name: &str,
    flags: &[&str],
    jobs: &[&str],
    out: fn() -> Stdio,
) -> (Child, PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("propshare-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, trace) = (dir.join("r.json"), dir.join("t.jsonl"));
    let child = bin()
        .args(["run", "--cpus", &first_cpu()])
        .args(flags)
        .arg("--json")
        .arg(&json)
        .arg("--trace")
        .arg(&trace)
        .args(jobs)
        .stdout(out())
        .stderr(out())
        .spawn()
        .unwrap();
    (child, dir, json, trace)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_propshare"))
}

fn state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].chars().next()
}

/// Cpus_allowed_list of every thread of `pid`.
fn affinities(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let p = e.unwrap().path().join("status");
        let s = std::fs::read_to_string(p).unwrap_or_default();
        if let Some(l) = s.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.push(l.split_whitespace().nth(1).unwrap_or("").to_string());
        }
    }
    out
}

/// The first CPU this process may use (a CI container may not give us CPU 0).
fn first_cpu() -> String {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let list = s
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("0");
    list.split([',', '-']).next().unwrap_or("0").to_string()
}

struct Victim(Child);

impl Victim {
    fn new() -> Victim {
        Victim(Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A busy process to attach to, its CPU affinity, and its pid as an argument.
fn victim() -> (Victim, Vec<String>, String) {
    let v = Victim::new();
    let orig = affinities(v.pid());
    let p = v.pid().to_string();
    (v, orig, p)
}

fn assert_released(v: &[Victim], orig: &[String], what: &str) {
    let t = Instant::now();
    let ok = |v: &Victim| state(v.pid()) != Some('T') && affinities(v.pid()) == orig;
    while !v.iter().all(ok) && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    for x in v {
        assert_ne!(state(x.pid()), Some('T'), "{what}: {} left stopped", x.pid());
        assert_eq!(affinities(x.pid()), orig, "{what}: {} affinity not restored", x.pid());
    }
}

/// `propshare ARGS` is refused: exit status 2, `want` in its message, and the
/// attached victim neither left stopped nor pinned.
fn assert_refused(v: &Victim, orig: &[String], args: &[&str], want: &str) {
    let out = bin().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: wanted {want:?} in: {err}");
    assert_released(std::slice::from_ref(v), orig, &format!("{args:?}"));
}

/// Start `propshare run` on three attached spinners (one CPU) and wait until it has stopped two.
fn start_run(v: &[Victim]) -> Child {
    let mut args: Vec<String> = vec!["run".into(), "--cpus".into(), first_cpu(), "--duration".into(), "60s".into()];
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            args.push(":::".into());
        }
        args.extend(["-w".into(), "1".into(), "-p".into(), x.pid().to_string()]);
    }
    let child = bin().args(&args).stdout(Stdio::null()).spawn().unwrap();
    let t = Instant::now();
    while v.iter().filter(|x| state(x.pid()) == Some('T')).count() < 2 {
        assert!(t.elapsed() < Duration::from_secs(10), "propshare run never took control");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    child
}

fn signal_test(sig: i32, name: &str) {
    let Some(_g) = serial_as_root() else { return };
    let v: Vec<Victim> = (0..3).map(|_| Victim::new()).collect();
    let orig = affinities(v[0].pid());
    let mut child = start_run(&v);
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, sig) };
    let status = child.wait().unwrap();
    if sig != 9 {
        assert_eq!(status.code(), Some(0), "{name}: exit status {status:?}");
    }
    assert_released(&v, &orig, name);
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn sigint_releases_everything() {
    signal_test(2, "SIGINT");
}

#[test]
fn sigterm_releases_everything() {
    signal_test(15, "SIGTERM");
}

#[test]
fn sigkill_releases_everything_through_the_guardian() {
    signal_test(9, "SIGKILL");
}

#[test]
fn bad_input_exits_2() {
    let Some(_g) = serial_as_root() else { return };
    let (v, orig, p) = victim();
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "-w", "1", "-p", &p, ":::", "-w", "1", "--", "/no/such/cmd"],
        vec!["run", "-w", "1", "-p", &p, ":::", "-w", "1", "-p", "999999999"],
        vec!["run", "-w", "0", "-p", &p],
        vec!["run", "--cpus", "4000", "-w", "1", "-p", &p],
        vec!["run", "--scheduler", "nope", "-w", "1", "-p", &p],
        vec!["run", "--quantum", "10 parsecs", "-w", "1", "-p", &p],
        vec!["run", "--quantum", "500us", "-w", "1", "-p", &p],
        vec!["run", "--cpus", "0,0", "-w", "1", "-p", &p],
        vec!["run", "-w", "1", "-p", "1"],
        vec!["run"],
    ];
    for c in cases {
        assert_refused(&v, &orig, &c, "error");
    }
}

/// Bad groups: each refused before anything runs, exit status 2, a message
/// naming where (file, line, field; or the flag), the attached process
/// neither stopped nor pinned.
#[test]
fn bad_groups_exit_2() {
    let Some(_g) = serial_as_root() else { return };
    let (v, orig, p) = victim();
    let dir = std::env::temp_dir().join(format!("propshare-badgroups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jobs.toml");
    std::fs::write(
        &file,
        format!("[[group]]\nname = \"a\"\nweight = 1\n\n[[group]]\nname = \"b\"\nweight = 2\nparent = \"nope\"\n\n[[job]]\npid = {p}\ngroup = \"a\"\n"),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let missing = dir.join("no-such-cgroup");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--jobs", f], "jobs.toml, line 8: group[1].parent: no group named \"nope\""),
        (vec!["run", "--group", "a:0", "-g", "a", "-w", "1", "-p", &p], "--group"),
        (vec!["run", "--group", "a:1:a", "-g", "a", "-p", &p], "cycle"),
        (vec!["run", "-g", "a", "-w", "1", "-p", &p], "no group named \"a\""),
        (vec!["run", "--baseline", "nice", "--group", "a:1", "-g", "a", "-p", &p], "takes no groups"),
        (vec!["run", "--cgroup2", missing.to_str().unwrap()], "not a directory"),
        (vec!["run", "--cgroup2", dir.to_str().unwrap(), "-w", "1", "-p", &p], "give no other jobs"),
    ];
    for (c, want) in cases {
        assert_refused(&v, &orig, &c, want);
    }
    // Where cgroup v2 has no cpu controller (this host binds it to v1), the
    // baseline says what is missing.
    let v2 = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().contains(" - cgroup2 ");
    let root = dir.join("v2");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("cgroup.controllers"), "hugetlb\n").unwrap();
    let out = bin()
        .args(["run", "--baseline", "cgroup2", "--cgroup2-dir", root.to_str().unwrap(), "-w", "1", "-p", &p])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cpu controller is not available on cgroup v2") && err.contains("hugetlb"),
        "{err} (v2 mounted: {v2})"
    );
    assert_released(std::slice::from_ref(&v), &orig, "--baseline cgroup2");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_prints_the_table() {
    let Some(_g) = serial_as_root() else { return };
    let cpu = first_cpu();
    let out = bin()
        .args([
            "run",
            "--cpus",
            &cpu,
            "--duration",
            "0.5s",
            "--report",
            "-w",
            "3",
            "-n",
            "heavy",
            "--",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .args([":::", "-w", "1", "-n", "light", "--", "sh", "-c", "while :; do :; done"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("ideal%") && text.contains("heavy") && text.contains("light"), "{text}");
}

/// A --trace or --json path that cannot be written is refused at once, by
/// name, with nothing started (it used to be found after the whole run).
#[test]
fn bad_output_paths_are_refused_before_the_run() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for flag in ["--trace", "--json"] {
        let bad = "/no/such/dir/out.json";
        let t = Instant::now();
        let out = bin()
            .args(["run", "--duration", "3s", flag, bad, "-w", "1", "--", "sh", "-c", "while :; do :; done"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(flag) && err.contains(bad), "{flag}: the error does not name the path: {err}");
        assert!(t.elapsed() < Duration::from_secs(2), "{flag}: refused only after the run");
    }
}

/// When the JSON report cannot be written at the end (its directory was
/// removed during the run), the --report table is still printed, the error
/// names the path, and the status is 1.
#[test]
fn report_is_printed_when_an_output_file_fails() {
    let Some(_g) = serial_as_root() else { return };
    let spin = ["-w", "1", "-n", "spin", "--", "sh", "-c", "while :; do :; done"];
    let (child, dir, json, _) = spawn_with_outputs("out", &["--duration", "1s", "--report"], &spin, Stdio::piped);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_dir_all(&dir).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("ideal%") && text.contains("spin"), "no table: {text} / {err}");
    assert!(err.contains(&json.display().to_string()), "the JSON error does not name the path: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
}

/// A SIGKILL of the scheduler leaves valid output of the run so far: the
/// JSON report as of its last snapshot (`--json-every`), whole, naming each
/// process as still running, and the trace up to its last flush (every line
/// valid JSON, the meta line first). Before, the JSON was written only at
/// the end, so a killed run left none.
#[test]
fn sigkill_leaves_the_last_json_snapshot_and_a_valid_trace() {
    let Some(_g) = serial_as_root() else { return };
    let jobs = [
        ["-w", "3", "-n", "heavy", "--", "sh", "-c", "while :; do :; done", ":::"].as_slice(),
        &["-w", "1", "-n", "light", "--", "sh", "-c", "while :; do :; done"],
    ]
    .concat();
    let flags = ["--duration", "60s", "--json-every", "200ms"];
    let (mut child, dir, json, trace) = spawn_with_outputs("kill", &flags, &jobs, Stdio::null);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, 9) };
    child.wait().unwrap();
    let text = std::fs::read_to_string(&json).expect("no JSON snapshot after a SIGKILL");
    let r: serde_json::Value = serde_json::from_str(&text).expect("the JSON snapshot is not whole");
    assert!(r["ended"].as_str().unwrap().starts_with("running"), "{r}");
    let clients = r["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 2, "{r}");
    assert!(clients.iter().all(|c| c["end"] == "running" && c["received_ns"].as_u64().unwrap() > 0), "{r}");
    let lines = std::fs::read_to_string(&trace).unwrap();
    let parsed: Vec<serde_json::Value> =
        lines.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    assert_eq!(parsed[0]["ev"], "meta");
    assert!(parsed.iter().any(|v| v["ev"] == "run"), "the trace has no run line after 1 s");
    std::fs::remove_dir_all(&dir).unwrap();
}
