//! The HTML reports: for each paper and experiment, the paper's claim, our
//! figure, the plots, and whether we match. [`write_report`] writes one
//! page (`propshare compare`); [`write_reproduction`] writes the
//! reproduction (`propshare reproduce`): a front page with one table of
//! claims per paper, the differences first with their reasons, and one
//! page per paper with its experiments, tables and plots.
//!
//! When a page has loaded, a small script counts the plots that loaded and
//! the errors the page raised (scripts, and images or other resources that
//! failed), and writes `data-plots="loaded/total"` and `data-errors="n"` on
//! `<body>` (the headless-browser test reads them).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use crate::metrics::{duration_label, window_lag_of};
use crate::output::write_atomic;
use crate::results::ScenarioResult;
use crate::scenario::{Claim, Expect, Verdict};

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
.note{font-size:13px;color:#555}td.reason{font-size:13px;color:#444;max-width:420px}";

const CHECK_SCRIPT: &str = "<script>var errors=0;window.addEventListener('error',function(){errors++;},true);\
window.addEventListener('load',function(){var i=document.images,n=0;\
for(var k=0;k<i.length;k++){if(i[k].complete&&i[k].naturalWidth>0)n++;}\
document.body.setAttribute('data-plots',n+'/'+i.length);document.body.setAttribute('data-errors',String(errors));});</script>";

/// MATCH or DIFFER, and whether that is the verdict the scenario pins.
fn verdict_word(v: &Verdict) -> &'static str {
    match (v.matches, v.as_pinned()) {
        (true, true) => "MATCH",
        (false, true) => "DIFFER (expected)",
        (true, false) => "MATCH (pinned: differ)",
        (false, false) => "DIFFER (pinned: match)",
    }
}

/// The claim's note, and the reason for an expected difference.
fn note_and_reason(c: &Claim) -> String {
    match (&c.expect, c.note.as_deref()) {
        (Expect::Differ { reason }, Some(n)) => format!("Why we differ: {reason}. Encodes: {n}"),
        (Expect::Differ { reason }, None) => format!("Why we differ: {reason}"),
        (Expect::Match, n) => n.unwrap_or("").to_string(),
    }
}

fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '_' }).collect()
}

/// A claim's subject: metric, and the client or pair it is about.
fn what(c: &Claim) -> String {
    match (&c.client, c.clients.len()) {
        (Some(cl), _) => format!("{} ({})", c.metric.name(), cl),
        (None, 2) => format!("{} ({}/{})", c.metric.name(), c.clients[0], c.clients[1]),
        _ => c.metric.name().to_string(),
    }
}

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
            let what = what(c);
            let paper = c.bounds_text();
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
                verdict_word(v),
                esc(&note_and_reason(c))
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

/// The page of one paper: `<slug>.html`, from its name before any
/// parenthesis (`"DFS (Chandra, ...)"` is `dfs.html`).
fn paper_page(paper: Option<&str>) -> String {
    let name = paper.unwrap_or("other scenarios");
    format!("{}.html", slug(name.split(" (").next().unwrap_or(name).trim()))
}

fn page_head(out: &mut String, title: &str) {
    let _ = writeln!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body>",
        esc(title),
        STYLE
    );
}

/// Write the reproduction into `dir`: `index.html`, a front page with one
/// table of claims per paper (experiment, figure, claim, ours, verdict,
/// link to the experiment; differences first, with their reasons), and one
/// page per paper with every experiment's section. Plot paths in
/// `results` are relative to `dir`.
pub fn write_reproduction(dir: &Path, intro: &str, cost_note: &str, results: &[ScenarioResult]) -> std::io::Result<()> {
    let title = "propshare: the papers reproduced";
    let mut papers: Vec<Option<&str>> = results.iter().map(|r| r.scenario.paper.as_deref()).collect();
    papers.sort_by_key(|p| (p.is_none(), *p));
    papers.dedup();
    let mut front = String::new();
    page_head(&mut front, title);
    let _ = writeln!(front, "<h1>{}</h1><p>{}{}</p>", esc(title), esc(intro), esc(cost_note));
    if dir.join("bench.html").exists() {
        front.push_str(
            "<p><a href=\"bench.html\">Decision cost of every scheduler (ns per decision against N and P)</a></p>\n",
        );
    }
    let all: Vec<&Verdict> = results.iter().flat_map(|r| &r.verdicts).collect();
    let ok = all.iter().filter(|v| v.matches).count();
    let off = all.iter().filter(|v| !v.as_pinned()).count();
    let _ = writeln!(
        front,
        "<p><b>{ok} of {} claims match</b>; {} differ, each for the reason given. {}\
         The claims as data: <a href=\"claims.csv\">claims.csv</a>, <a href=\"claims.json\">claims.json</a>.</p>",
        all.len(),
        all.len() - ok,
        if off == 0 {
            "Every verdict is the one its scenario file pins. ".to_string()
        } else {
            format!("<b class=no>{off} verdicts are not the ones their scenario files pin.</b> ")
        }
    );
    front.push_str("<ul>");
    for p in &papers {
        let n: Vec<&Verdict> =
            results.iter().filter(|r| r.scenario.paper.as_deref() == *p).flat_map(|r| &r.verdicts).collect();
        let _ = write!(
            front,
            "<li><a href=\"#{}\">{}</a>: {} of {} claims match</li>",
            slug(p.unwrap_or("other scenarios")),
            esc(p.unwrap_or("Other scenarios")),
            n.iter().filter(|v| v.matches).count(),
            n.len()
        );
    }
    front.push_str("</ul>\n");
    for p in &papers {
        let page = paper_page(*p);
        let name = p.unwrap_or("Other scenarios");
        let _ = writeln!(
            front,
            "<h2 id=\"{}\">{}</h2><p><a href=\"{}\">Every experiment of this paper, with tables and plots</a></p>",
            slug(name),
            esc(name),
            esc(&page)
        );
        let mut rows: Vec<(&ScenarioResult, &Verdict)> = results
            .iter()
            .filter(|r| r.scenario.paper.as_deref() == *p)
            .flat_map(|r| r.verdicts.iter().map(move |v| (r, v)))
            .collect();
        if rows.is_empty() {
            front.push_str("<p class=note>No claims.</p>\n");
            continue;
        }
        // Differences first (stable: file order within each).
        rows.sort_by_key(|(_, v)| v.matches);
        front.push_str(
            "<table><tr><th class=l>experiment</th><th class=l>figure</th><th class=l>claim</th><th>paper's figure</th>\
             <th>ours</th><th class=l>verdict</th><th class=l>why we differ / what the claim encodes</th></tr>\n",
        );
        for (r, v) in rows {
            let c = &v.claim;
            let _ = writeln!(
                front,
                "<tr><td class=l><a href=\"{}#{}\">{}</a></td><td class=l>{}</td><td class=l>{} {}</td><td>{}</td><td>{}</td><td class=\"l {}\">{}</td><td class=\"l reason\">{}</td></tr>",
                esc(&page),
                esc(&r.scenario.name),
                esc(&r.scenario.name),
                esc(&c.source),
                esc(&c.scheduler),
                esc(&what(c)),
                esc(&c.bounds_text()),
                range(v.ours),
                if v.matches { "ok" } else { "no" },
                verdict_word(v),
                esc(&note_and_reason(c))
            );
        }
        front.push_str("</table>\n");
    }
    front.push_str(CHECK_SCRIPT);
    front.push_str("</body></html>\n");
    write_atomic(&dir.join("index.html"), |w| w.write_all(front.as_bytes()))?;

    for p in &papers {
        let name = p.unwrap_or("Other scenarios");
        let mut out = String::new();
        page_head(&mut out, &format!("propshare: {name}"));
        let _ = writeln!(out, "<p><a href=\"index.html\">All papers</a></p><h1>{}</h1>", esc(name));
        let mine: Vec<&ScenarioResult> = results.iter().filter(|r| r.scenario.paper.as_deref() == *p).collect();
        out.push_str("<ul>");
        for r in &mine {
            let _ = write!(out, "<li><a href=\"#{}\">{}</a></li>", esc(&r.scenario.name), esc(&r.scenario.name));
        }
        out.push_str("</ul>\n");
        for r in mine {
            section(&mut out, r);
        }
        out.push_str(CHECK_SCRIPT);
        out.push_str("</body></html>\n");
        write_atomic(&dir.join(paper_page(*p)), |w| w.write_all(out.as_bytes()))?;
    }
    Ok(())
}
