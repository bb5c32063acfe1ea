//! The HTML report: for each paper and experiment, the paper's claim, our
//! figure, the plots, and whether we match. One self-contained directory:
//! `index.html` plus the SVG plots next to it.
//!
//! When the page has loaded, a small script counts the plots that loaded
//! and writes `data-plots="loaded/total"` on `<body>` (the headless-browser
//! test reads it).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use crate::metrics::{duration_label, window_lag_of};
use crate::output::write_atomic;
use crate::results::ScenarioResult;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn num(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn range(r: Option<(f64, f64)>) -> String {
    match r {
        Some((lo, hi)) if (hi - lo).abs() < 1e-12 => num(lo),
        Some((lo, hi)) => format!("{} to {}", num(lo), num(hi)),
        None => "n/a".into(),
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}.ok{color:#070;font-weight:bold}.no{color:#b00;font-weight:bold}\
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}figure{margin:1em 0}figcaption{font-size:13px;color:#555}\
.note{font-size:13px;color:#555}";

const CHECK_SCRIPT: &str = "<script>window.addEventListener('load',function(){var i=document.images,n=0;\
for(var k=0;k<i.length;k++){if(i[k].complete&&i[k].naturalWidth>0)n++;}\
document.body.setAttribute('data-plots',n+'/'+i.length);});</script>";

/// Render one scenario's section.
fn section(out: &mut String, r: &ScenarioResult) {
    let s = &r.scenario;
    let _ = writeln!(out, "<h3 id=\"{}\">{}</h3>", esc(&s.name), esc(&s.name));
    if !s.description.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", esc(&s.description));
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">P = {} CPUs, quantum {} ms, horizon {} s, {} run(s) per scheduler (seeds {}..{}).</p>",
        s.machine.cpus,
        s.machine.quantum as f64 / 1e6,
        s.machine.horizon as f64 / 1e9,
        s.repeat,
        s.seed,
        s.seed + s.repeat as u64 - 1
    );
    if !r.verdicts.is_empty() {
        out.push_str("<table><tr><th class=l>paper</th><th class=l>where</th><th class=l>scheduler</th><th class=l>metric</th><th>paper's figure</th><th>ours</th><th>match</th><th class=l>note</th></tr>\n");
        for v in &r.verdicts {
            let c = &v.claim;
            let what = match (&c.client, c.clients.len()) {
                (Some(cl), _) => format!("{} ({})", c.metric.name(), cl),
                (None, 2) => format!("{} ({}/{})", c.metric.name(), c.clients[0], c.clients[1]),
                _ => c.metric.name().to_string(),
            };
            let paper = match (c.min, c.max) {
                (Some(a), Some(b)) => format!("{} to {}", num(a), num(b)),
                (Some(a), None) => format!("≥ {}", num(a)),
                (None, Some(b)) => format!("≤ {}", num(b)),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                out,
                "<tr><td class=l>{}</td><td class=l>{}</td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td class=l>{}</td></tr>",
                esc(&c.paper),
                esc(&c.source),
                esc(&c.scheduler),
                esc(&what),
                paper,
                range(v.ours),
                if v.matches { "ok" } else { "no" },
                if v.matches { "yes" } else { "no" },
                esc(c.note.as_deref().unwrap_or(""))
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("<table><tr><th class=l>scheduler</th><th>lag min</th><th>lag max</th><th>service error</th><th>idle while waiting</th><th>decisions</th><th>migrations</th><th>migrations/s</th><th>ns/decision (median, p99)</th></tr>\n");
    let mut names: Vec<&str> = r.runs.iter().map(|m| m.scheduler.as_str()).collect();
    names.dedup();
    for name in names {
        let runs: Vec<_> = r.runs.iter().filter(|m| m.scheduler == name).collect();
        let lo = runs.iter().map(|m| m.min_lag).fold(f64::INFINITY, f64::min);
        let hi = runs.iter().map(|m| m.max_lag).fold(f64::NEG_INFINITY, f64::max);
        let se: Vec<f64> = runs
            .iter()
            .flat_map(|m| m.clients.iter().flat_map(|c| [c.service_error_min, c.service_error_max]))
            .flatten()
            .collect();
        let se = (!se.is_empty()).then(|| {
            (se.iter().copied().fold(f64::INFINITY, f64::min), se.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        });
        let idle = runs.iter().map(|m| m.idle_fraction).fold(0.0, f64::max);
        let cost = r
            .costs
            .iter()
            .find(|c| c.0 == name)
            .map(|c| format!("{}, {}", c.1, c.2))
            .unwrap_or_else(|| "not measured".into());
        let _ = writeln!(
            out,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}%</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
            esc(name),
            num(lo),
            num(hi),
            range(se),
            100.0 * idle,
            runs.iter().map(|m| m.decisions).sum::<u64>(),
            runs.iter().map(|m| m.migrations).sum::<u64>(),
            runs.iter().map(|m| m.migrations).sum::<u64>() as f64
                / runs.iter().map(|m| m.horizon_ns as f64 / 1e9).sum::<f64>().max(1e-9),
            cost
        );
    }
    out.push_str("</table><p class=\"note\">Lag and service error in quanta; ranges over all clients and runs.</p>\n");
    window_lag_table(out, r);
    for (file, caption) in &r.plots {
        let _ = writeln!(
            out,
            "<figure><img src=\"{}\" alt=\"{}\"><figcaption>{}</figcaption></figure>",
            esc(file),
            esc(caption),
            esc(caption)
        );
    }
}

/// The windowed lag (DWRR paper, Fig. 5): per scheduler and window length,
/// the largest |lag| over every client and window in ms, and the largest
/// relative error.
fn window_lag_table(out: &mut String, r: &ScenarioResult) {
    let lengths = &r.scenario.report.lag_windows;
    if lengths.is_empty() {
        return;
    }
    out.push_str("<table><tr><th class=l>scheduler</th>");
    for &t in lengths {
        let _ = write!(out, "<th>{} windows</th>", esc(&duration_label(t)));
    }
    out.push_str("</tr>\n");
    let mut names: Vec<&str> = r.runs.iter().map(|m| m.scheduler.as_str()).collect();
    names.dedup();
    for name in names {
        let q = r.runs.iter().find(|m| m.scheduler == name).map_or(0, |m| m.quantum_ns) as f64;
        let _ = write!(out, "<tr><td class=l>{}</td>", esc(name));
        for &t in lengths {
            let cell = match window_lag_of(&r.runs, name, t) {
                Some(m) => format!(
                    "{:.1} ms ({})",
                    m.max_abs_lag() * q / 1e6,
                    m.max_rel_error.map_or("n/a".into(), |e| format!("{:.2}%", 100.0 * e))
                ),
                None => "n/a".into(),
            };
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str(
        "</table><p class=\"note\">Windowed lag: the run is cut into windows of each length; in each, a client's \
         lag is its ideal service minus the service it received there. Largest |lag| over every client and \
         window, and in brackets the largest relative error (lag / ideal service in the window).</p>\n",
    );
}

/// Write `dir/index.html` for `results`, grouped by paper, under `title`.
/// `cost_note` is a sentence about decision cost; a link to `bench.html` is
/// added when that page exists beside the report.
pub fn write_report(
    dir: &Path,
    title: &str,
    intro: &str,
    cost_note: &str,
    results: &[ScenarioResult],
) -> std::io::Result<()> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body>",
        esc(title),
        STYLE
    );
    let _ = writeln!(out, "<h1>{}</h1><p>{}{}</p>", esc(title), esc(intro), esc(cost_note));
    if dir.join("bench.html").exists() {
        out.push_str(
            "<p><a href=\"bench.html\">Decision cost of every scheduler (ns per decision against N and P)</a></p>\n",
        );
    }
    let claims: Vec<_> = results.iter().flat_map(|r| &r.verdicts).collect();
    if !claims.is_empty() {
        let ok = claims.iter().filter(|v| v.matches).count();
        let _ = writeln!(out, "<p><b>{ok} of {} claims match.</b></p>", claims.len());
    }
    let mut papers: Vec<Option<&str>> = results.iter().map(|r| r.scenario.paper.as_deref()).collect();
    papers.sort();
    papers.dedup();
    out.push_str("<ul>");
    for r in results {
        let _ = write!(out, "<li><a href=\"#{}\">{}</a></li>", esc(&r.scenario.name), esc(&r.scenario.name));
    }
    out.push_str("</ul>\n");
    for p in papers {
        let _ = writeln!(out, "<h2>{}</h2>", esc(p.unwrap_or("Other scenarios")));
        for r in results.iter().filter(|r| r.scenario.paper.as_deref() == p) {
            section(&mut out, r);
        }
    }
    out.push_str(CHECK_SCRIPT);
    out.push_str("</body></html>\n");
    write_atomic(&dir.join("index.html"), |w| w.write_all(out.as_bytes()))
}
