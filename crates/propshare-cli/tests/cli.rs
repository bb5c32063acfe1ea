//! The `propshare` binary end to end: bad input, determinism, the report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn propshare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_propshare"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs")
}

/// The error `out` printed, checked: bad input exits 2 with a message that
/// contains each of `says` (`case` names the case in a failure).
fn refused(out: &Output, case: &str, says: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{case}: {err}");
    for s in says {
        assert!(err.contains(s), "{case}: no {s:?} in {err}");
    }
    err
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("propshare-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const GOOD: &str = r#"
name = "t"
schedulers = ["wfq"]
[machine]
cpus = 2
quantum = "10ms"
horizon = "1s"
[[client]]
name = "a"
weight = 1
[[client]]
name = "b"
weight = 3
run = "3ms"
sleep = { dist = "exponential", mean = "10ms" }
"#;

/// GOOD with `from` replaced by `to`, simulated from `dir/NAME.toml`: that
/// file and the error it was refused with (exit 2, its path in the message).
fn refused_edit(dir: &Path, name: &str, from: &str, to: &str) -> (PathBuf, String) {
    assert!(GOOD.contains(from), "{name}: test text");
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, GOOD.replacen(from, to, 1)).unwrap();
    let out = propshare(&["simulate", file.to_str().unwrap(), "--quiet", "--out", dir.join("o").to_str().unwrap()]);
    let err = refused(&out, name, &[&format!("{}:", file.display())]);
    (file, err)
}

/// Each bad input exits 2 with `file:line:column: field: message`, never a panic.
#[test]
fn bad_scenarios_exit_2_with_file_line_and_field() {
    let dir = tmp("bad");
    const SLEEP: &str = "sleep = { dist = \"exponential\", mean = \"10ms\" }";
    const CLAIM: &str = "[[claim]]\npaper = \"p\"\nsource = \"s\"\nscheduler = \"wfq\"\n";
    let cases: &[(&str, &str, &str)] = &[
        ("unknown", "weight = 1", "weight = 1\ncolour = \"red\""),
        ("wrongtype", "cpus = 2", "cpus = \"two\""),
        ("zeroweight", "name = \"a\"\nweight = 1", "name = \"a\"\nweight = 0"),
        ("negweight", "name = \"a\"\nweight = 1", "name = \"a\"\nweight = -4"),
        ("zerocpus", "cpus = 2", "cpus = 0"),
        ("unknownsched", "[\"wfq\"]", "[\"wfq\", \"nosuch\"]"),
        ("order", "name = \"a\"\nweight = 1", "name = \"a\"\nweight = 1\narrive = \"2s\"\ndepart = \"1s\""),
        (
            "wcorder",
            "name = \"a\"\nweight = 1",
            "name = \"a\"\nweight = 1\nweight_changes = [{ at = \"2s\", weight = 2 }, { at = \"1s\", weight = 3 }]",
        ),
        ("badunit", "horizon = \"1s\"", "horizon = \"1 parsec\""),
        ("window0", SLEEP, &format!("{SLEEP}\n[report]\nlag_windows = [\"0s\"]")),
        ("windowlong", SLEEP, &format!("{SLEEP}\n[report]\nlag_windows = [\"100ms\", \"2s\"]")),
        ("windowdup", SLEEP, &format!("{SLEEP}\n[report]\nlag_windows = [\"100ms\", \"100ms\"]")),
        ("windowmany", SLEEP, &format!("{SLEEP}\n[report]\nlag_windows = [\"1us\"]")),
        ("windowunit", SLEEP, &format!("{SLEEP}\n[report]\nlag_windows = [\"5 parsecs\"]")),
        ("windowclaim", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"window_lag\"\nmax = 1.0")),
        (
            "windowlen",
            SLEEP,
            &format!("{SLEEP}\n[report]\nlag_windows = [\"100ms\"]\n{CLAIM}metric = \"window_lag\"\nwindow_length = \"200ms\"\nmax = 1.0"),
        ),
        (
            "windowlenlag",
            SLEEP,
            &format!("{SLEEP}\n[report]\nlag_windows = [\"100ms\"]\n{CLAIM}metric = \"lag\"\nwindow_length = \"100ms\"\nmax = 1.0"),
        ),
        ("claimclient", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"share\"\nclient = \"zed\"\nmax = 1.0")),
        ("claimgroup", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"share_ratio\"\nclients = [\"a\", \"z*\"]\nmax = 1.0")),
        ("lagclient", SLEEP, &format!("{SLEEP}\n[report]\nlag_clients = [\"a\", \"zed\"]")),
        ("tracebackwards", SLEEP, &format!("{SLEEP}\n[report]\ntrace = [\"200ms\", \"100ms\"]")),
        ("ganttlate", SLEEP, &format!("{SLEEP}\n[report]\ngantt = [\"5s\", \"6s\"]")),
        (
            "growthone",
            SLEEP,
            &format!("{SLEEP}\n[report]\nlag_windows = [\"100ms\"]\n{CLAIM}metric = \"window_lag_growth\"\nmax = 1.0"),
        ),
        ("minmax", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nmin = 2.0\nmax = 1.0")),
        ("minnan", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nmin = nan\nmax = 1.0")),
        ("maxinf", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nmax = inf")),
        ("reachout", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nmin = -1.0\nmax = 1.0\nreach = 3.0")),
        ("reachscalar", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"idle_fraction\"\nreach = 0.5")),
        ("nobounds", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nnote = \"no bound\"")),
        ("notrun", SLEEP, &format!("{SLEEP}\n[[claim]]\npaper = \"p\"\nsource = \"s\"\nscheduler = \"sfq\"\nmetric = \"lag\"\nmax = 1.0")),
        ("differnoreason", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nmax = 1.0\nexpect = \"differ\"")),
        ("expectword", SLEEP, &format!("{SLEEP}\n{CLAIM}metric = \"lag\"\nmax = 1.0\nexpect = \"maybe\"")),
    ];
    let expect_field = [
        "colour",
        "cpus",
        "client[0].weight",
        "client[0].weight",
        "machine.cpus",
        "schedulers",
        "client[0].depart",
        "weight_changes[1].at",
        "horizon",
        "report.lag_windows[0]",
        "report.lag_windows[1]",
        "report.lag_windows[1]",
        "report.lag_windows[0]",
        "lag_windows",
        "claim[0].metric",
        "claim[0].window_length",
        "claim[0].window_length",
        "claim[0].client",
        "claim[0].clients[1]",
        "report.lag_clients[1]",
        "report.trace",
        "report.gantt",
        "claim[0].metric",
        "claim[0].min",
        "claim[0].min",
        "claim[0].max",
        "claim[0].reach",
        "claim[0].reach",
        "claim[0]",
        "claim[0].scheduler",
        "claim[0].reason",
        "claim[0].expect",
    ];
    assert_eq!(cases.len(), expect_field.len());
    for ((name, from, to), field) in cases.iter().zip(expect_field) {
        let (file, err) = refused_edit(&dir, name, from, to);
        assert!(err.contains(field), "{name}: no field {field:?} in {err}");
        let line_col = err.split(&format!("{}:", file.display())).nth(1).unwrap_or("");
        let line: usize = line_col.split(':').next().unwrap_or("").parse().unwrap_or(0);
        assert!(line >= 2, "{name}: no line number in {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    // A missing file and an unknown --scheduler are bad input too.
    let out = propshare(&["simulate", "/nonexistent.toml", "--quiet"]);
    assert_eq!(out.status.code(), Some(2));
    let good = dir.join("good.toml");
    std::fs::write(&good, GOOD).unwrap();
    let out = propshare(&["simulate", good.to_str().unwrap(), "--scheduler", "nosuch", "--quiet"]);
    refused(&out, "--scheduler nosuch", &["unknown scheduler"]);
}

/// Typed parameters: from the command line (`name(param=value,...)`) and
/// from a scenario's `[scheduler.NAME]` table; bad ones exit 2 naming the
/// parameter (and, in a file, its line).
#[test]
fn scheduler_parameters_from_the_command_line_and_scenario_tables() {
    let dir = tmp("params");
    let good = dir.join("good.toml");
    std::fs::write(&good, GOOD).unwrap();
    let o = dir.join("o");
    let args = |sched: &str| -> Output {
        propshare(&["simulate", good.to_str().unwrap(), "--scheduler", sched, "--quiet", "--out", o.to_str().unwrap()])
    };
    let ok = args("wfq,gdq(delta=8,t=40)");
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("gdq(delta=8,t=40)"));
    for (spec, says) in [
        ("gdq(delta=8", "must end with ')'"),
        ("gdq(tee=3)", "no parameter \"tee\""),
        ("gdq(t=0)", "outside 1..="),
        ("rr(k=1)", "its parameters: none"),
        ("wfq(readjust=1)", "not true or false"),
    ] {
        refused(&args(spec), spec, &[says]);
    }
    // A table in the scenario (which runs wfq and `also`): the scheduler keeps its name.
    let with_table = |also: &str, table: &str| {
        let f = dir.join("table.toml");
        let scenario = GOOD.replacen("[\"wfq\"]", &format!("[\"wfq\", \"{also}\"]"), 1);
        std::fs::write(&f, format!("{scenario}\n{table}\n")).unwrap();
        propshare(&["simulate", f.to_str().unwrap(), "--quiet", "--out", o.to_str().unwrap()])
    };
    let with = |table: &str| with_table("gdq", table);
    let ok = with("[scheduler.gdq]\ndelta = 8\nt = 40");
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    // A choice parameter takes a name (gr3mp's charge).
    let ok = with_table("gr3mp", "[scheduler.gr3mp]\ncharge = \"runtime\"");
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    let bad = with_table("gr3mp", "[scheduler.gr3mp]\ncharge = \"ns\"");
    refused(&bad, "charge", &["\"ns\" is not one of quantum, runtime"]);
    for (table, says) in [
        ("[scheduler.gdq]\ndelta = 99999999999", "\"delta\": 99999999999 is outside"),
        ("[scheduler.gdq]\ntee = 1", "no parameter \"tee\""),
        ("[scheduler.gdq]\ndelta = \"8\"", "scheduler.gdq.delta"),
        ("[scheduler.wfq]\nreadjust = \"true\"", "scheduler.wfq.readjust"),
        ("[scheduler.sfs]\nk = 3", "not in this scenario's schedulers"),
        ("[scheduler.nosuch]\nk = 3", "unknown scheduler"),
    ] {
        refused(&with(table), table, &[says, "table.toml:"]);
    }
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_string_lossy().ends_with(".json")
                || p.to_string_lossy().ends_with(".jsonl")
                || p.to_string_lossy().ends_with(".csv")
        })
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

/// Same scenario, schedulers and seed: byte-identical metrics, CSV and traces.
#[test]
fn runs_are_byte_identical() {
    let dir = tmp("det");
    let (a, b) = (dir.join("a"), dir.join("b"));
    for out in [&a, &b] {
        let o =
            propshare(&["simulate", "../../scenarios/examples/mixed.toml", "--quiet", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (fa, fb) = (files(&a), files(&b));
    assert!(fa.len() >= 5, "outputs: {:?}", fa.iter().map(|f| &f.0).collect::<Vec<_>>());
    assert_eq!(fa.iter().map(|f| &f.0).collect::<Vec<_>>(), fb.iter().map(|f| &f.0).collect::<Vec<_>>());
    for (x, y) in fa.iter().zip(&fb) {
        assert!(x.1 == y.1, "{} differs between runs", x.0);
    }
    // A different seed changes the random workload.
    let c = dir.join("c");
    let o = propshare(&[
        "simulate",
        "../../scenarios/examples/mixed.toml",
        "--quiet",
        "--seed",
        "5",
        "--out",
        c.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_ne!(
        files(&c).iter().find(|f| f.0.ends_with("metrics.csv")).unwrap().1,
        fa.iter().find(|f| f.0.ends_with("metrics.csv")).unwrap().1
    );
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|c| {
        Command::new("which")
            .arg(c)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    })
}

/// Load `page` in headless Chromium; its DOM after load and Chromium's log.
fn render(browser: &Path, page: &Path, profile: &Path) -> (String, String) {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--allow-file-access-from-files",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The page rendered with every image loaded and no error (script errors,
/// resources that failed, console errors); returns its DOM.
fn renders_clean(browser: &Path, page: &Path, profile: &Path, min_images: u32) -> String {
    let (dom, log) = render(browser, page, profile);
    let attr =
        |name: &str| dom.split(&format!("{name}=\"")).nth(1).and_then(|s| s.split('"').next()).map(str::to_string);
    let plots = attr("data-plots").unwrap_or_else(|| panic!("{}: no data-plots marker; log: {log}", page.display()));
    let (loaded, total) = plots.split_once('/').unwrap();
    assert!(total.parse::<u32>().unwrap() >= min_images, "{}: {plots}", page.display());
    assert_eq!(loaded, total, "{}: images that failed to load: {plots}", page.display());
    assert_eq!(attr("data-errors").as_deref(), Some("0"), "{}: errors on the page; log: {log}", page.display());
    for bad in ["Uncaught", "CONSOLE(", "Failed to load resource"] {
        let console: Vec<&str> = log.lines().filter(|l| l.contains(bad) && !l.contains("Fontconfig")).collect();
        assert!(console.is_empty(), "{}: console: {console:?}", page.display());
    }
    dom
}

/// Every local link (`href`, `src`) of the HTML pages in `dir` names a file
/// that exists, and every `#anchor` an `id` on its page.
fn links_resolve(dir: &Path) {
    let pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    assert!(!pages.is_empty());
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        for attr in ["href=\"", "src=\""] {
            for link in html.split(attr).skip(1).filter_map(|s| s.split('"').next()) {
                if link.starts_with("http://") || link.starts_with("https://") {
                    continue;
                }
                let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
                let target = if file.is_empty() { page.clone() } else { dir.join(file.replace("&amp;", "&")) };
                assert!(target.is_file(), "{}: broken link {link:?}", page.display());
                if !anchor.is_empty() {
                    let text = std::fs::read_to_string(&target).unwrap();
                    assert!(text.contains(&format!("id=\"{anchor}\"")), "{}: no anchor for {link:?}", page.display());
                }
            }
        }
    }
}

/// `compare` writes a report that opens in headless Chromium with every plot
/// loaded: a paper scenario, and the example with windowed lag (its bar chart
/// and table). `reproduce` writes a front page and one page per paper that
/// all render with every image loaded, no error, and no broken link.
#[test]
fn report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("PROPSHARE_REQUIRE_BROWSER").is_none(),
            "PROPSHARE_REQUIRE_BROWSER is set but no Chromium found"
        );
        eprintln!("skipped: no chromium on PATH (CI installs it and sets PROPSHARE_REQUIRE_BROWSER)");
        return;
    };
    for (name, scenario) in [
        ("html", "../../scenarios/papers/sfs/readjust-4.2.toml"),
        ("html-windows", "../../scenarios/examples/mixed.toml"),
    ] {
        let dir = tmp(name);
        let o = propshare(&["compare", scenario, "--quiet", "--out", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dom = renders_clean(&browser, &dir.join("index.html"), &dir.join("profile"), 5);
        if name == "html-windows" {
            assert!(dom.contains("window_lag.svg") && dom.contains("500 ms windows"), "no windowed lag in the report");
        }
        links_resolve(&dir);
    }
    // The reproduction, on one small experiment of each paper.
    let dir = tmp("html-reproduce");
    let scenarios = dir.join("scenarios");
    for (paper, file) in [
        ("dfs", "starvation-t18.toml"),
        ("dwrr", "top-10-on-8.toml"),
        ("gdq", "n512-p1.toml"),
        ("gr3", "s1-n32-w16384.toml"),
        ("sfs", "readjust-4.2.toml"),
    ] {
        std::fs::create_dir_all(scenarios.join(paper)).unwrap();
        std::fs::copy(format!("../../scenarios/papers/{paper}/{file}"), scenarios.join(paper).join(file)).unwrap();
    }
    let report = dir.join("report");
    let o = propshare(&[
        "reproduce",
        "--check",
        "--quiet",
        "--scenarios",
        scenarios.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let front = renders_clean(&browser, &report.join("index.html"), &dir.join("profile"), 0);
    for page in ["dfs.html", "dwrr.html", "gdq.html", "gr3_and_gr3mp.html", "sfs.html"] {
        assert!(front.contains(&format!("href=\"{page}")), "front page does not link {page}");
        renders_clean(&browser, &report.join(page), &dir.join("profile"), 3);
    }
    assert!(front.contains("claims.csv") && front.contains("DIFFER (expected)"), "front page: no claims table");
    links_resolve(&report);
}

/// `[report] trace` keeps exactly the events inside the window (runs that
/// overlap it); `--no-traces` writes no trace at all.
#[test]
fn trace_window_and_no_traces() {
    let dir = tmp("trace");
    let file = dir.join("t.toml");
    std::fs::write(&file, format!("{GOOD}\n[report]\ntrace = [\"300ms\", \"400ms\"]\n")).unwrap();
    let out_dir = dir.join("o");
    let out = propshare(&["simulate", file.to_str().unwrap(), "--quiet", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace = std::fs::read_to_string(out_dir.join("t__wfq.trace.jsonl")).unwrap();
    let (mut runs, mut others) = (0, 0);
    for line in trace.lines().skip(1) {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        let ms = |k: &str| e[k].as_u64().unwrap() as f64 / 1e6;
        if e["ev"] == "run" {
            assert!(ms("start") < 400.0 && ms("end") > 300.0, "run outside the window: {line}");
            runs += 1;
        } else {
            assert!((300.0..400.0).contains(&ms("t")), "event outside the window: {line}");
            others += 1;
        }
    }
    // a runs all 100 ms at a 10 ms quantum; b runs 3 ms bursts between sleeps.
    assert!(runs >= 15 && others >= 5, "{runs} runs, {others} other events");

    let quiet_dir = dir.join("q");
    let out = propshare(&[
        "simulate",
        file.to_str().unwrap(),
        "--quiet",
        "--no-traces",
        "--out",
        quiet_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(quiet_dir.join("t.metrics.json").exists());
    assert!(!quiet_dir.join("t__wfq.trace.jsonl").exists() && !quiet_dir.join("t__wfq.perfetto.json").exists());
}

/// `reproduce --check` exits 0 when every verdict is as its scenario pins
/// and 1 when one is not, naming the claim's file and line; the claims are
/// written as data (claims.csv, claims.json); verdict lines print bounds as
/// numbers, never `Some(..)`; a claim on a scheduler left out of the run is
/// a warning with its line, not a verdict.
#[test]
fn reproduce_check_fails_on_a_claim_off_its_pin() {
    let dir = tmp("check");
    let scenarios = dir.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    // wfq on a and b (1:3, both CPU-bound part of the time): b's share of 2 CPUs is near 1.
    const CLAIMS: &str = "\n[[claim]]\npaper = \"p\"\nsource = \"s\"\nscheduler = \"wfq\"\nmetric = \"share\"\nclient = \"a\"\nmin = 0.5\nmax = 1.0\n";
    let file = scenarios.join("t.toml");
    std::fs::write(&file, format!("{GOOD}{CLAIMS}")).unwrap();
    let out_dir = dir.join("report");
    let run = || {
        propshare(&[
            "reproduce",
            "--check",
            "--quiet",
            "--scenarios",
            scenarios.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
    };
    let ok = run();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&ok.stderr));
    assert!(stdout.contains("MATCH") && stdout.contains("paper 0.5 to 1") && !stdout.contains("Some("), "{stdout}");
    let csv = std::fs::read_to_string(out_dir.join("claims.csv")).unwrap();
    assert!(csv.starts_with("paper,source,scenario,scheduler,metric,"), "{csv}");
    assert!(csv.lines().nth(1).unwrap().contains(",share,a,0.5,1,,"), "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("claims.json")).unwrap()).unwrap();
    assert_eq!(json[0]["verdict"], "match");
    // The same claim pinned as a difference: the check fails and names the line.
    let pinned = CLAIMS.replace("max = 1.0\n", "max = 1.0\nexpect = \"differ\"\nreason = \"r\"\n");
    std::fs::write(&file, format!("{GOOD}{pinned}")).unwrap();
    let line = format!("{GOOD}{CLAIMS}").lines().position(|l| l == "[[claim]]").unwrap() + 1;
    let bad = run();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}:{line}: wfq share", file.display())), "{err}");
    assert!(err.contains("pinned DIFFER, got MATCH") && err.contains("1 of 1 claims"), "{err}");
    // A claim whose figure moved out of its bounds fails too.
    std::fs::write(&file, format!("{GOOD}{}", CLAIMS.replace("max = 1.0", "max = 0.6"))).unwrap();
    let moved = run();
    assert_eq!(moved.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&moved.stderr).contains("pinned MATCH, got DIFFER"));
    // simulate --scheduler without the claim's scheduler: a warning, no verdict.
    std::fs::write(&file, format!("{}{CLAIMS}", GOOD.replacen("[\"wfq\"]", "[\"wfq\", \"sfq\"]", 1))).unwrap();
    let o = dir.join("o");
    let only =
        propshare(&["simulate", file.to_str().unwrap(), "--scheduler", "sfq", "--quiet", "--out", o.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&only.stderr);
    assert_eq!(only.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("warning: {}:{line}: claim on wfq", file.display())), "{err}");
    assert!(!String::from_utf8_lossy(&only.stdout).contains("MATCH"));
}

/// Run `propshare` with a watchdog: a child still running after `secs` is
/// killed and the test fails (on code that does the work first, these cases
/// ran for minutes and tens of GB).
fn propshare_watched(args: &[&str], secs: u64) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_propshare"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let id = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let killer = std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(id as i32, libc::SIGKILL) };
        true
    });
    let out = child.wait_with_output().expect("waits");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(!killer.join().unwrap(), "propshare {args:?} still ran after {secs} s: the cost was not refused up front");
    out
}

/// Inputs whose cost grows without bound are refused before any work, with
/// an exit code of 2 and how much they would need; a FIFO, a device, a
/// directory or an oversized file is not read as a scenario.
#[test]
fn unbounded_inputs_are_refused_before_work() {
    let dir = tmp("limits");
    let o = dir.join("o");
    let cases: &[(&str, &str, &str)] = &[
        ("sample", "[report]\nsample_every = \"1ns\"", "report.sample_every"),
        (
            "flood",
            "[[poisson]]\nprefix = \"p\"\nmean_interarrival = \"1ns\"\nlifetime = \"1s\"\nweight = 1\nstop = \"1s\"",
            "poisson[0].mean_interarrival",
        ),
        ("chain", "[[chain]]\nprefix = \"s\"\nweight = 1\nlifetime = \"1ns\"", "chain[0].lifetime"),
    ];
    for (name, extra, field) in cases {
        let f = dir.join(format!("{name}.toml"));
        std::fs::write(&f, format!("{}\n{extra}\n", GOOD.replace("\"1s\"", "\"60s\""))).unwrap();
        let out = propshare_watched(&["simulate", f.to_str().unwrap(), "--quiet", "--out", o.to_str().unwrap()], 60);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("{}: {field}: ", f.display())) && err.contains("would need about"),
            "{name}: {err}"
        );
    }
    let f = dir.join("repeat.toml");
    std::fs::write(&f, format!("repeat = 1000000000\n{GOOD}")).unwrap();
    let out = propshare_watched(&["simulate", f.to_str().unwrap(), "--quiet", "--out", o.to_str().unwrap()], 60);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("repeat: ") && err.contains("GiB"), "{err}");

    // Not files, or too long: refused without reading.
    let fifo = dir.join("fifo.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = dir.join("big.toml");
    std::fs::write(&big, format!("{GOOD}\n{}", "# padding\n".repeat(200_000))).unwrap();
    for (path, says) in [
        ("/dev/urandom", "not a scenario file"),
        ("/dev/zero", "not a scenario file"),
        (fifo.to_str().unwrap(), "not a scenario file"),
        (dir.to_str().unwrap(), "is a directory"),
        (big.to_str().unwrap(), "more than a scenario file may have"),
    ] {
        let out = propshare_watched(&["simulate", path, "--quiet", "--out", o.to_str().unwrap()], 60);
        refused(&out, path, &[path, says]);
    }

    // Sizes on the command line.
    for (args, says) in [
        (&["bench", "--clients", "18446744073709551615", "--cpus", "1"][..], "would need about"),
        (&["bench-sim", "--clients", "100000000000", "--cpus", "1", "--quanta", "1"][..], "would need about"),
        (
            &["bench-insns", "--scheduler", "rr", "--clients", "100000000000", "--decisions", "1"][..],
            "would need about",
        ),
        (&["demo", "--cpus", "4294967295"][..], "between 1 and 65536"),
    ] {
        refused(&propshare_watched(args, 60), &format!("{args:?}"), &[says]);
    }
}

/// `--max-memory` sets the limit: a scenario refused under 1 MiB runs under the default.
#[test]
fn max_memory_raises_or_lowers_the_limit() {
    let dir = tmp("maxmem");
    let f = dir.join("s.toml");
    std::fs::write(&f, format!("{GOOD}\n[report]\nsample_every = \"10us\"\n")).unwrap();
    let o = dir.join("o");
    let low =
        propshare(&["simulate", f.to_str().unwrap(), "--quiet", "--max-memory", "1MiB", "--out", o.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&low.stderr);
    assert!(low.status.code() == Some(2) && err.contains("report.sample_every") && err.contains("1.0 MiB"), "{err}");
    let ok = propshare(&["simulate", f.to_str().unwrap(), "--out", o.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    // Not a terminal and no --progress: no progress output at all.
    assert!(ok.stderr.is_empty(), "{}", String::from_utf8_lossy(&ok.stderr));
}

/// Every file in `dir` (hidden ones included): none is a temporary file,
/// and each is complete (JSON parses, JSON Lines parse line by line, SVGs close).
fn assert_only_complete_files(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "temporary file left behind: {name}");
        let text = std::fs::read_to_string(&p).unwrap();
        if name.ends_with(".jsonl") {
            for line in text.lines() {
                serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
            }
        } else if name.ends_with(".json") {
            serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else if name.ends_with(".svg") {
            assert!(text.trim_end().ends_with("</svg>"), "{name} is cut short");
        }
        names.push(name);
    }
    names
}

/// A write error part way (a file size limit: writes past 64 KiB fail with
/// EFBIG, as on a full disk) leaves no temporary file, only complete files,
/// and says which file failed and what was kept.
#[test]
fn a_write_error_leaves_no_partial_file() {
    use std::os::unix::process::CommandExt;
    let dir = tmp("efbig");
    let f = dir.join("t.toml");
    std::fs::write(&f, GOOD.replace("\"1s\"", "\"30s\"").replace("[\"wfq\"]", "[\"wfq\", \"rr\"]")).unwrap();
    let o = dir.join("o");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_propshare"));
    cmd.args(["simulate", f.to_str().unwrap(), "--quiet", "--out", o.to_str().unwrap()]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 64 << 10, rlim_max: 64 << 10 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("t__wfq.trace.jsonl") && err.contains("File too large"), "{err}");
    assert!(err.contains("no output file was complete"), "{err}");
    assert!(err.matches("os error").count() == 1, "OS error printed twice: {err}");
    let names = assert_only_complete_files(&o);
    assert!(names.is_empty(), "{names:?}");
}

/// SIGINT part way keeps the files that were complete, removes the one
/// being written, lists what was kept and exits 130; SIGTERM exits 143.
#[test]
fn an_interrupted_run_keeps_what_finished() {
    let dir = tmp("sigint");
    let f = dir.join("t.toml");
    let scn =
        "name = \"t\"\nschedulers = [\"wfq\", \"rr\"]\n[machine]\ncpus = 8\nquantum = \"100us\"\nhorizon = \"100s\"\n\
               [[class]]\nprefix = \"c\"\ncount = 20\nweight = 3\n[report]\ntrace = [\"0s\", \"100ms\"]\n";
    std::fs::write(&f, scn).unwrap();
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let o = dir.join(format!("o{sig}"));
        let child = Command::new(env!("CARGO_BIN_EXE_propshare"))
            .args(["simulate", f.to_str().unwrap(), "--quiet", "--out", o.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let finished = o.join("t__wfq.trace.jsonl");
        let started = std::time::Instant::now();
        if sig == libc::SIGINT {
            // Wait for the first scheduler's files, then interrupt the second's run.
            while !finished.exists() {
                assert!(started.elapsed().as_secs() < 120, "the first run never finished");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        } else {
            // The output directory is made once the signal handlers are in place.
            while !o.exists() {
                assert!(started.elapsed().as_secs() < 120, "the run never started");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.contains("interrupted"), "{err}");
        let names = assert_only_complete_files(&o);
        assert!(!names.iter().any(|n| n.contains("metrics") || n.contains("__rr.trace")), "{names:?}");
        if sig == libc::SIGINT {
            assert!(names.contains(&"t__wfq.trace.jsonl".to_string()), "{names:?}");
            assert!(err.contains("t__wfq.trace.jsonl") && err.contains("kept"), "{err}");
        }
    }
}

/// Validation gaps and messages that named the wrong thing: each is a
/// located error naming the field, with a message saying what is accepted.
#[test]
fn validation_gaps_are_located_errors() {
    let dir = tmp("gaps");
    const AB: &str = "[[client]]\nname = \"a\"\nweight = 1\n[[client]]\nname = \"b\"\nweight = 3\nrun = \"3ms\"\nsleep = { dist = \"exponential\", mean = \"10ms\" }";
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (
            "member",
            "name = \"a\"",
            "name = \"c0\"\nweight = 1\n[[class]]\nprefix = \"c\"\ncount = 2\nweight = 1\n[[client]]\nname = \"a\"",
            "client[0].name",
            "member of class[0]",
        ),
        ("emptysched", "[\"wfq\"]", "[]", "schedulers", "leave `schedulers` out"),
        ("emptyname", "name = \"t\"", "name = \"\"", "name", "must not be empty"),
        ("fewoffsets", "cpus = 2", "cpus = 2\noffsets = [\"5ms\"]", "machine.offsets", "1 offsets for 2 CPUs"),
        ("lateoffset", "cpus = 2", "cpus = 2\noffsets = [\"0\", \"2s\"]", "machine.offsets[1]", "never run"),
        ("badoffset", "cpus = 2", "cpus = 2\noffsets = 5", "machine.offsets", "\"staggered\""),
        ("switch", "cpus = 2", "cpus = 2\nswitch_cost = \"10ms\"", "machine.switch_cost", "not below the quantum"),
        (
            "staggerbig",
            "quantum = \"10ms\"",
            "quantum = \"18446744073709551615ns\"\noffsets = \"staggered\"",
            "machine.offsets[1]",
            "never run",
        ),
        ("nomachine", "[machine]\ncpus = 2\nquantum = \"10ms\"\nhorizon = \"1s\"\n", "", "machine", "missing table [machine]"),
        ("nohorizon", "horizon = \"1s\"\n", "", "machine.horizon", "missing field"),
        ("gamma", "\"exponential\"", "\"gamma\"", "client[1].sleep", "expected one of `constant`, `uniform`, `exponential`"),
        ("runtype", "run = \"3ms\"", "run = true", "client[1].run", "{ dist = \"exponential\", mean = D }"),
        ("weighttype", "weight = 3", "weight = \"3\"", "client[1].weight", "expected i64"),
        ("single", AB, "[client]\nname = \"a\"\nweight = 1", "client", "write [[client]]"),
        ("quantumunit", "quantum = \"10ms\"", "quantum = \"10\"", "machine.quantum", "needs a unit"),
        (
            "clash",
            "name = \"a\"",
            "name = \"a\"\nweight = 1\n[[class]]\nprefix = \"x\"\ncount = 20\nweight = 1\n[[class]]\nprefix = \"x1\"\ncount = 2\nweight = 1\n[[client]]\nname = \"a2\"",
            "class[1].prefix",
            "e.g. \"x10\"",
        ),
    ];
    for (name, from, to, field, says) in cases {
        let (file, err) = refused_edit(&dir, name, from, to);
        let at = format!("{}:", file.display());
        let rest = err.split(&at).nth(1).unwrap_or_else(|| panic!("{name}: no file in {err}"));
        let mut parts = rest.splitn(4, ':');
        let (line, col) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        assert!(line.parse::<usize>().is_ok() && col.parse::<usize>().is_ok(), "{name}: no line:col in {err}");
        assert_eq!(parts.next().map(str::trim), Some(*field), "{name}: {err}");
        assert!(err.contains(says), "{name}: {says:?} not in {err}");
        assert!(!err.contains("untagged"), "{name}: {err}");
    }
    // OS errors once, with the path: --out naming a file.
    let file = dir.join("plain");
    std::fs::write(&file, "x").unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, GOOD).unwrap();
    let out = propshare(&["simulate", good.to_str().unwrap(), "--quiet", "--out", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains(file.to_str().unwrap()), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
    let out = propshare(&["bench", "--quick", "--scheduler", "rr", "--quiet", "--out", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains(file.to_str().unwrap()), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}
