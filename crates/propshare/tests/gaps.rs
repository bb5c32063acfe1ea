//! Every `Gap XXX-n:` decision is written once, in a module doc comment
//! under `crates/propshare/src/`, and ends with the test that checks it,
//! `(test: `name`)`, or `(untested)`. This test fails when an id is missing,
//! repeated or out of order, when a named test does not exist, when any
//! `Gap XXX-n` reference (code, tests, docs) names no decision, or when the
//! generated `<!-- gaps XXX -->` blocks of docs/ALGORITHMS.md differ from the
//! doc comments. `PROPSHARE_BLESS=1` rewrites those blocks.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One decision: its id, where it is written, its lines (doc-comment
/// markers stripped) and the tests it names.
struct Gap {
    id: String,
    at: String,
    lines: Vec<String>,
    tests: Vec<String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if !p.ends_with("target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `XXX-n` at the start of `s` (XXX upper-case letters and digits, n a
/// positive number): the id and the rest.
fn parse_id(s: &str) -> Option<(&str, &str)> {
    let dash = s.find('-')?;
    let prefix = &s[..dash];
    let digits = s[dash + 1..].bytes().take_while(u8::is_ascii_digit).count();
    let ok = !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        && prefix.as_bytes()[0].is_ascii_uppercase()
        && digits > 0;
    ok.then(|| s.split_at(dash + 1 + digits))
}

/// The part of a `//!` line after the marker, and whether it starts a gap
/// (`Gap ...` or `* Gap ...`).
fn doc_line(line: &str) -> Option<&str> {
    line.trim_start().strip_prefix("//!").map(|r| r.strip_prefix(' ').unwrap_or(r))
}

fn gap_head(doc: &str) -> Option<&str> {
    let t = doc.trim_start();
    t.strip_prefix("* ").unwrap_or(t).strip_prefix("Gap").filter(|r| r.starts_with([' ', ':', '(']))
}

/// The tests named by `(test: `a`, `b`)`, or `None` for `(untested)`;
/// an error if neither (or both) is there.
fn tags(text: &str) -> Result<Vec<String>, String> {
    let untested = text.matches("(untested)").count();
    let tagged: Vec<&str> = text.match_indices("(test: ").map(|(i, _)| &text[i + 7..]).collect();
    match (untested, tagged.as_slice()) {
        (1, []) => Ok(Vec::new()),
        (0, [rest]) => {
            let inner = &rest[..rest.find(')').ok_or("unclosed (test: ...)")?];
            let names: Vec<String> = inner.split(',').map(|n| n.trim().trim_matches('`').to_string()).collect();
            if names.iter().any(|n| n.is_empty() || !n.chars().all(|c| c.is_alphanumeric() || c == '_')) {
                return Err(format!("bad test list ({inner})"));
            }
            Ok(names)
        }
        _ => Err("needs exactly one `(test: `name`)` or `(untested)`".into()),
    }
}

fn gaps_in(path: &Path, rel: &str, gaps: &mut Vec<Gap>, errors: &mut Vec<String>) {
    let text = fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(rest) = doc_line(lines[i]).and_then(gap_head) else {
            i += 1;
            continue;
        };
        let at = format!("{rel}:{}", i + 1);
        let Some((id, after)) = parse_id(rest.trim_start()).filter(|(_, a)| a.starts_with(':')) else {
            errors.push(format!("{at}: a Gap without an id (write `Gap XXX-n:`)"));
            i += 1;
            continue;
        };
        let head = doc_line(lines[i]).unwrap().trim_start();
        let mut item = vec![format!("* {}", head.strip_prefix("* ").unwrap_or(head))];
        let _ = after;
        i += 1;
        while i < lines.len() {
            let Some(doc) = doc_line(lines[i]) else { break };
            let t = doc.trim_start();
            if t.is_empty() || t.starts_with("* ") || t.starts_with('#') || gap_head(doc).is_some() {
                break;
            }
            item.push(format!("  {t}"));
            i += 1;
        }
        match tags(&item.join(" ")) {
            Ok(tests) => gaps.push(Gap { id: id.to_string(), at, lines: item, tests }),
            Err(e) => errors.push(format!("{at}: Gap {id}: {e}")),
        }
    }
}

/// Names of the `#[test]` functions (proptest's included) under `crates/`.
fn test_names(files: &[PathBuf]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for f in files {
        let text = fs::read_to_string(f).unwrap();
        let mut test_attr = false;
        for line in text.lines() {
            let t = line.trim_start();
            if t.starts_with("#[test]") {
                test_attr = true;
            } else if let Some(rest) = t.strip_prefix("fn ").or_else(|| t.strip_prefix("async fn ")) {
                if test_attr {
                    names.insert(rest.split(['(', '<']).next().unwrap().trim().to_string());
                }
                test_attr = false;
            } else if !(t.starts_with("#[") || t.starts_with("//") || t.is_empty()) {
                test_attr = false;
            }
        }
    }
    names
}

/// Every `Gap XXX-n` mentioned in `text`.
fn references(text: &str) -> Vec<String> {
    text.match_indices("Gap ").filter_map(|(i, _)| parse_id(&text[i + 4..]).map(|(id, _)| id.to_string())).collect()
}

/// docs/ALGORITHMS.md with every `<!-- gaps XXX -->` block regenerated.
fn render_docs(docs: &str, by_prefix: &BTreeMap<String, Vec<&Gap>>, errors: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    let mut lines = docs.lines();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let Some(prefix) = line.strip_prefix("<!-- gaps ").and_then(|r| r.strip_suffix(" -->")) else {
            if line.starts_with("* Gap") {
                errors.push(format!("docs/ALGORITHMS.md: a hand-written gap outside the generated blocks: {line}"));
            }
            continue;
        };
        if !seen.insert(prefix.to_string()) {
            errors.push(format!("docs/ALGORITHMS.md: two blocks for {prefix}"));
        }
        match by_prefix.get(prefix) {
            Some(gaps) => {
                for g in gaps {
                    for l in &g.lines {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
            }
            None => errors.push(format!("docs/ALGORITHMS.md: no gaps with prefix {prefix}")),
        }
        if !lines.by_ref().any(|l| l == "<!-- /gaps -->") {
            errors.push(format!("docs/ALGORITHMS.md: block {prefix} is not closed"));
        }
        out.push_str("<!-- /gaps -->\n");
    }
    for p in by_prefix.keys().filter(|p| !seen.contains(*p)) {
        errors.push(format!("docs/ALGORITHMS.md: no `<!-- gaps {p} -->` block"));
    }
    out
}

#[test]
fn gaps_have_ids_tests_and_one_text() {
    let root = root();
    let mut errors = Vec::new();
    let mut core = Vec::new();
    rust_files(&root.join("crates/propshare/src"), &mut core);
    let mut gaps = Vec::new();
    for f in &core {
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        gaps_in(f, &rel, &mut gaps, &mut errors);
    }
    assert!(gaps.len() > 100, "found only {} gaps: is the parser broken?", gaps.len());

    // Ids: one prefix per file, numbered 1, 2, ... in order, never repeated.
    let mut by_prefix: BTreeMap<String, Vec<&Gap>> = BTreeMap::new();
    for g in &gaps {
        by_prefix.entry(g.id.rsplit_once('-').unwrap().0.to_string()).or_default().push(g);
    }
    for (prefix, list) in &by_prefix {
        let file = list[0].at.split(':').next().unwrap();
        for (k, g) in list.iter().enumerate() {
            if g.id != format!("{prefix}-{}", k + 1) {
                errors.push(format!("{}: Gap {} out of order (expected {prefix}-{})", g.at, g.id, k + 1));
            }
            if !g.at.starts_with(&format!("{file}:")) {
                errors.push(format!("{}: prefix {prefix} is also used in {file}", g.at));
            }
        }
    }

    // Named tests exist.
    let mut all = Vec::new();
    rust_files(&root.join("crates"), &mut all);
    let tests = test_names(&all);
    for g in &gaps {
        for t in g.tests.iter().filter(|t| !tests.contains(*t)) {
            errors.push(format!("{}: Gap {} names test `{t}`, which does not exist", g.at, g.id));
        }
    }

    // References resolve.
    let ids: BTreeSet<&str> = gaps.iter().map(|g| g.id.as_str()).collect();
    let docs_path = root.join("docs/ALGORITHMS.md");
    let docs = fs::read_to_string(&docs_path).unwrap();
    for f in all.iter().chain([&docs_path]) {
        let text = fs::read_to_string(f).unwrap();
        for r in references(&text).into_iter().filter(|r| !ids.contains(r.as_str())) {
            errors.push(format!("{}: reference to unknown Gap {r}", f.display()));
        }
    }

    // The docs' blocks are the doc comments.
    let want = render_docs(&docs, &by_prefix, &mut errors);
    if want != docs {
        if std::env::var_os("PROPSHARE_BLESS").is_some() {
            fs::write(&docs_path, &want).unwrap();
        } else {
            errors.push(
                "docs/ALGORITHMS.md: gap blocks differ from the doc comments \
                 (PROPSHARE_BLESS=1 cargo test -p propshare --test gaps rewrites them)"
                    .into(),
            );
        }
    }
    assert!(errors.is_empty(), "{} problem(s):\n{}", errors.len(), errors.join("\n"));
}

#[test]
fn parser_reads_ids_and_tags() {
    assert_eq!(parse_id("GDQ-7: x"), Some(("GDQ-7", ": x")));
    assert_eq!(parse_id("GR3MP-12 y"), Some(("GR3MP-12", " y")));
    assert_eq!(parse_id("A10"), None);
    assert_eq!(parse_id("gdq-1"), None);
    assert_eq!(tags("a (untested)"), Ok(vec![]));
    assert_eq!(tags("a (test: `x`, `y_2`)"), Ok(vec!["x".to_string(), "y_2".to_string()]));
    assert!(tags("a").is_err());
    assert!(tags("a (untested) (test: `x`)").is_err());
    assert_eq!(references("see Gap DWRR-3 and Gap A3, Gap SFS-10."), vec!["DWRR-3", "SFS-10"]);
    assert_eq!(gap_head("* Gap DFS-1: x"), Some(" DFS-1: x"));
    assert_eq!(gap_head("Gap: x"), Some(": x"));
    assert_eq!(gap_head("Gaps (where...)"), None);
}
