//! Warnings a scenario gets before it runs (issue 16, item 3): a DWRR round
//! slice longer than a tenth of the horizon, where a raised weight waits for
//! the next round.

use propshare_sim::scenario::Scenario;

fn scenario(schedulers: &str, table: &str, weight_change: bool) -> Scenario {
    let change = if weight_change { r#"weight_changes = [{ at = "1s", weight = 1000 }]"# } else { "" };
    let text = format!(
        r#"
name = "w"
schedulers = [{schedulers}]
{table}
[machine]
cpus = 2
quantum = "10ms"
horizon = "6s"

[[client]]
name = "A"
weight = {w}
{change}

[[client]]
name = "B"
weight = 1
"#,
        w = if weight_change { 1 } else { 1000 }
    );
    Scenario::parse("w.toml", &text, "w").unwrap()
}

#[test]
fn long_dwrr_rounds_are_warned_about() {
    // Weight 1000, B = 3 × 10 ms, U = 1: a 30 s round in a 6 s run.
    let w = scenario(r#""dwrr", "dwrr-cfs", "sfs""#, "", false).warnings(None);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].starts_with("dwrr: the round slice of weight 1000 is 30000 ms"), "{w:?}");
    assert!(w[1].starts_with("dwrr-cfs:"), "{w:?}");
    // The heaviest weight may come from a weight change.
    assert_eq!(scenario(r#""dwrr""#, "", true).warnings(None).len(), 1);
    // Shorter rounds (U = 1000: 30 ms), given in the scenario or as a spec: no warning.
    assert!(scenario(r#""dwrr""#, "[scheduler.dwrr]\nunit = 1000", false).warnings(None).is_empty());
    let only = vec!["dwrr(unit=1000)".to_string()];
    assert!(scenario(r#""dwrr""#, "", false).warnings(Some(&only)).is_empty());
    // A round of exactly a tenth of the horizon (unit = 50: 600 ms) is not warned about.
    assert!(scenario(r#""dwrr""#, "[scheduler.dwrr]\nunit = 50", false).warnings(None).is_empty());
}
