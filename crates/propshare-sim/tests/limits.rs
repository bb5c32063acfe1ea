//! Bounded cost: every scenario shipped under scenarios/ fits the default
//! limits with room to spare, and the estimate grows with what costs.

use std::path::Path;

use propshare_sim::scenario::{scenario_files, Limits, Scenario};

/// The shipped scenarios pass the default limits by a factor of 4 at least.
#[test]
fn shipped_scenarios_fit_the_default_limits() {
    let files = scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")).unwrap();
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
