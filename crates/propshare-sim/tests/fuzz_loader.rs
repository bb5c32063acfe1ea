//! Fuzzing the scenario loader: generated scenario text (mutations of every
//! file under scenarios/, and scenarios built from the format's grammar with
//! extreme values) goes through parsing, validation and the pre-run cost
//! estimate. No case may panic, and no case may allocate more than
//! [`CASE_CAP`] bytes at its peak (a counting global allocator measures it):
//! whatever a file says, loading it and estimating its cost is cheap.
//!
//! The normal test suite runs [`CI_CASES`] cases (a few seconds). For a long
//! run: `FUZZ_SECS=600 cargo test -p propshare-sim --test fuzz_loader --
//! --nocapture` runs batches of cases until the time is up and prints the
//! cases run and the largest peak seen; `PROPTEST_CASES` sets the batch size.

use std::path::Path;
use std::time::{Duration, Instant};

use propshare_sim::alloc::{peak, reset_peak, CountingAlloc};
use propshare_sim::scenario::{scenario_files, Limits, Scenario};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The most one case may allocate at its peak.
const CASE_CAP: usize = 64 << 20;
/// Cases in a normal test run.
const CI_CASES: u32 = 20_000;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Parse, validate and estimate one text: the bytes it allocated at its
/// peak, and whether it was a valid scenario.
fn load(text: &str) -> (usize, bool) {
    let before = reset_peak();
    let parsed = Scenario::parse("f.toml", text, "f");
    let valid = parsed.is_ok();
    if let Ok(s) = parsed {
        let cost = s.cost(s.schedulers.len(), true);
        let _ = s.check_cost("f.toml", s.schedulers.len(), true, Limits::default());
        assert!(cost.runs >= 1);
        let _ = s.windows();
    }
    (peak().saturating_sub(before), valid)
}

fn seeds() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut out: Vec<String> =
        scenario_files(&dir).unwrap().iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    out.sort();
    assert!(out.len() >= 10);
    out
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "65536",
    "65537",
    "67108863",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "nan",
    "inf",
    "0.5",
    "100.0",
];
const DURATIONS: &[&str] = &[
    "\"1ns\"",
    "\"0\"",
    "0",
    "\"1us\"",
    "\"10ms\"",
    "\"1s\"",
    "\"60s\"",
    "\"13d\"",
    "\"18446744073709551615ns\"",
    "\"18446744073709551616ns\"",
    "\"-1s\"",
    "\"1.5ns\"",
    "\"999999999min\"",
    "\"\"",
    "\"1 min\"",
    "\"1125899906842623ns\"",
    "\"0.000000001s\"",
];
const LINES: &[&str] = &[
    "repeat = 4294967295",
    "repeat = 0",
    "seed = 18446744073709551615",
    "schedulers = []",
    "schedulers = [\"gdq(delta=8,t=40)\", \"nosuch\"]",
    "name = \"\"",
    "[report]",
    "sample_every = \"1ns\"",
    "lag_windows = [\"1ns\", \"1s\"]",
    "lag_clients = [\"c0\", \"zz\"]",
    "trace = [\"0s\", \"1s\"]",
    "[[class]]",
    "prefix = \"c\"",
    "count = 67108863",
    "weight = { dist = \"heavy\", percent = 99.9, total = 4294967295 }",
    "weight = { dist = \"log-uniform\", min = 1, max = 4294967295 }",
    "[[poisson]]",
    "mean_interarrival = \"1ns\"",
    "lifetime = { dist = \"exponential\", mean = \"1ns\" }",
    "stop = \"13d\"",
    "[[chain]]",
    "lifetime = \"1ns\"",
    "work = \"1ns\"",
    "[[client]]",
    "[client]",
    "name = \"c0\"",
    "run = { dist = \"gamma\", mean = \"1ms\" }",
    "sleep = { dist = \"uniform\", min = \"1s\", max = \"1ns\" }",
    "weight_changes = [{ at = \"1s\", weight = 0 }]",
    "[machine]",
    "cpus = 65536",
    "offsets = \"staggered\"",
    "offsets = [\"1ns\"]",
    "switch_cost = \"1s\"",
    "[[claim]]",
    "metric = \"within_quantum\"",
    "min = nan",
    "[scheduler.gdq]",
    "delta = 99999999999",
];

/// Apply one mutation, chosen by `op`, at positions drawn from `a` and `b`.
fn mutate(text: &str, op: u8, a: usize, b: usize) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let n = lines.len().max(1);
    match op % 8 {
        0 if !lines.is_empty() => {
            lines.remove(a % n);
        }
        1 if !lines.is_empty() => {
            let l = lines[a % n].clone();
            lines.insert(b % n, l);
        }
        2 if !lines.is_empty() => lines.swap(a % n, b % n),
        3 => {
            // A number on some line becomes an extreme one.
            let k = a % n;
            if let Some(l) = lines.get_mut(k) {
                if let Some(i) = l.find(|c: char| c.is_ascii_digit()) {
                    let j = l[i..].find(|c: char| !c.is_ascii_digit() && c != '.').map_or(l.len(), |j| i + j);
                    l.replace_range(i..j, NUMBERS[b % NUMBERS.len()]);
                }
            }
        }
        4 => {
            // A duration (a quoted value with a unit) becomes another.
            let k = a % n;
            if let Some(l) = lines.get_mut(k) {
                if let Some((key, _)) = l.split_once('=') {
                    *l = format!("{key}= {}", DURATIONS[b % DURATIONS.len()]);
                }
            }
        }
        5 => lines.insert(a % (lines.len() + 1), LINES[b % LINES.len()].to_string()),
        6 => {
            let joined = lines.join("\n");
            let mut cut = a % (joined.len() + 1);
            while !joined.is_char_boundary(cut) {
                cut -= 1;
            }
            return joined[..cut].to_string();
        }
        _ => {
            let joined = lines.join("\n");
            let mut at = a % (joined.len() + 1);
            while !joined.is_char_boundary(at) {
                at -= 1;
            }
            let ch = ['[', ']', '"', '=', '{', '}', ',', '\n', '#', '\\', '\u{0}', 'é'][b % 12];
            return format!("{}{ch}{}", &joined[..at], &joined[at..]);
        }
    }
    lines.join("\n")
}

/// A scenario built from the format's grammar, every choice read from `c`.
fn generate(c: &[u32]) -> String {
    let mut k = 0;
    let mut pick = |n: usize| {
        let v = c.get(k).copied().unwrap_or(0) as usize % n.max(1);
        k += 1;
        v
    };
    // Fifteen choices in sixteen are ordinary values, so that many cases get
    // past the first check; the sixteenth is from the extreme lists.
    let dur = |i: usize| match i % 16 {
        0 => DURATIONS[i / 16 % DURATIONS.len()],
        _ => ["\"10ms\"", "\"1ms\"", "\"2ms\"", "\"100ms\"", "\"50ms\""][i / 16 % 5],
    };
    let long = |i: usize| match i % 16 {
        0 => DURATIONS[i / 16 % DURATIONS.len()],
        _ => ["\"1s\"", "\"2s\"", "\"5s\""][i / 16 % 3],
    };
    let num = |i: usize| match i % 16 {
        0 => NUMBERS[i / 16 % NUMBERS.len()],
        _ => ["1", "2", "3", "8", "100"][i / 16 % 5],
    };
    let mut s = String::new();
    if pick(2) == 0 {
        s += &format!("repeat = {}\n", num(pick(4096)));
    }
    if pick(2) == 0 {
        s += [
            "schedulers = [\"wfq\", \"sfs\"]\n",
            "schedulers = [\"wfq\"]\n",
            "schedulers = [\"gdq\"]\n",
            "schedulers = []\n",
        ][pick(4)];
    }
    s += &format!(
        "[machine]\ncpus = {}\nquantum = {}\nhorizon = {}\n",
        num(pick(4096)),
        dur(pick(4096)),
        long(pick(4096))
    );
    if pick(3) == 0 {
        s += &match pick(4) {
            0 => format!("offsets = [{}, {}]\n", dur(pick(4096)), dur(pick(4096))),
            _ => "offsets = \"staggered\"\n".to_string(),
        };
    }
    if pick(3) == 0 {
        s += &format!("switch_cost = {}\nmigration_cost = {}\n", dur(pick(4096)), dur(pick(4096)));
    }
    let dist = |i: usize, a: &str, b: &str| match i % 4 {
        0 => a.to_string(),
        1 => format!("{{ dist = \"uniform\", min = {a}, max = {b} }}"),
        2 => format!("{{ dist = \"exponential\", mean = {a} }}"),
        _ => format!("{{ dist = \"constant\", value = {b} }}"),
    };
    for i in 0..pick(4) {
        s += &format!("[[client]]\nname = \"{}\"\nweight = {}\n", ["a", "b", "d", "c0"][i.min(3)], num(pick(4096)));
        if pick(2) == 0 {
            s += &format!("run = {}\nsleep = {}\n", dist(pick(4), dur(pick(4096)), long(pick(4096))), dur(pick(4096)));
        }
        if pick(3) == 0 {
            s += &format!("arrive = {}\ndepart = {}\nwork = {}\n", dur(pick(4096)), long(pick(4096)), dur(pick(4096)));
        }
        if pick(3) == 0 {
            s += &format!("weight_changes = [{{ at = {}, weight = {} }}]\n", dur(pick(4096)), num(i + pick(4096)));
        }
    }
    for i in 0..pick(3) {
        s += &format!("[[class]]\nprefix = \"{}\"\ncount = {}\n", ["c", "x", "c1"][i], num(pick(4096)));
        s += [
            "weight = 3\n",
            "weight = { dist = \"heavy\", percent = 50.0, total = 4294967295 }\n",
            "weight = { dist = \"log-uniform\", min = 1, max = 4294967295 }\n",
            "weight = { dist = \"uniform\", min = 1, max = 10 }\n",
            "weight = 2\n",
            "weight = { dist = \"zipf\" }\n",
        ][pick(6)];
    }
    for i in 0..pick(3) {
        s += &format!(
            "[[poisson]]\nprefix = \"p{}_\"\nmean_interarrival = {}\nlifetime = {}\nweight = {}\nstop = {}\n",
            i,
            dur(pick(4096)),
            dist(pick(4), dur(pick(4096)), long(pick(4096))),
            num(pick(4096)),
            long(pick(4096))
        );
    }
    for i in 0..pick(3) {
        s += &format!(
            "[[chain]]\nprefix = \"s{i}_\"\nweight = 1\n{} = {}\ncount = {}\n",
            ["work", "lifetime"][pick(2)],
            dur(pick(4096)),
            num(pick(4096))
        );
    }
    if pick(2) == 0 {
        s += &format!(
            "[report]\nsample_every = {}\nlag_windows = [{}]\ntrace = [\"0s\", {}]\n",
            dur(pick(4096)),
            dur(pick(4096)),
            dur(pick(4096))
        );
    }
    for _ in 0..pick(3) {
        s += &format!(
            "[[claim]]\npaper = \"p\"\nsource = \"s\"\nscheduler = \"wfq\"\nmetric = \"{}\"\nclient = \"a\"\nclients = [\"a\", \"c*\"]\nmin = {}\n",
            ["lag", "share", "lag", "within_quantum", "window_lag", "bogus"][pick(6)],
            num(pick(4096))
        );
    }
    s
}

fn case() -> impl Strategy<Value = String> {
    let seeds = seeds();
    let count = seeds.len();
    let mutated = (0..count, prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..4))
        .prop_map(move |(k, ops)| ops.iter().fold(seeds[k].clone(), |t, &(op, a, b)| mutate(&t, op, a, b)));
    let generated = prop::collection::vec(any::<u32>(), 80).prop_map(|c| generate(&c));
    prop_oneof![mutated, generated]
}

/// Run `cases` cases; (cases run, valid scenarios among them, largest peak).
fn batch(cases: u32) -> (u64, u64, usize) {
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let peak = std::cell::Cell::new(0usize);
    let run = std::cell::Cell::new(0u64);
    let valid = std::cell::Cell::new(0u64);
    let result = runner.run(&case(), |text| {
        let (bytes, ok) = load(&text);
        run.set(run.get() + 1);
        valid.set(valid.get() + u64::from(ok));
        peak.set(peak.get().max(bytes));
        if bytes > CASE_CAP {
            return Err(TestCaseError::fail(format!("{bytes} bytes allocated (cap {CASE_CAP}) for:\n{text}")));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (run.get(), valid.get(), peak.get())
}

#[test]
fn loader_never_panics_nor_allocates_much() {
    let batch_cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CI_CASES);
    let budget = std::env::var("FUZZ_SECS").ok().and_then(|v| v.parse().ok()).map(Duration::from_secs);
    let started = Instant::now();
    let (mut cases, mut valid, mut peak) = batch(batch_cases);
    while budget.is_some_and(|b| started.elapsed() < b) {
        let (c, v, p) = batch(batch_cases);
        cases += c;
        valid += v;
        peak = peak.max(p);
    }
    // Most cases must get past the TOML syntax for the fuzz to test validation.
    assert!(valid * 10 >= cases, "only {valid} of {cases} cases were valid scenarios");
    eprintln!(
        "fuzz_loader: {cases} cases ({valid} valid scenarios) in {:.1} s, largest peak allocation {} bytes (cap {CASE_CAP})",
        started.elapsed().as_secs_f64(),
        peak
    );
}
