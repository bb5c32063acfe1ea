//! Bounded cost: every scenario shipped under scenarios/ fits the default
//! limits with room to spare, and the estimate grows with what costs.

use std::path::{Path, PathBuf};

use propshare_sim::scenario::{Limits, Scenario};

fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            scenario_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

/// The shipped scenarios pass the default limits by a factor of 4 at least.
#[test]
fn shipped_scenarios_fit_the_default_limits() {
    let mut files = Vec::new();
    scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios"), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    let d = Limits::default();
    let tight = Limits { memory: d.memory / 4, events: d.events / 4 };
    for f in files {
        let s = Scenario::load(&f).unwrap();
        let c = s.check_cost(&f.display().to_string(), s.schedulers.len(), true, tight);
        let c = c.unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{}: {} runs, {} clients, {} events, {} MiB",
            f.display(),
            c.runs,
            c.clients,
            c.events,
            c.memory >> 20
        );
    }
}
