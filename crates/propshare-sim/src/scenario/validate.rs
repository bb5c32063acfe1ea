//! Validation: from the raw file ([`super::raw`]) to a [`Scenario`]. Every
//! error names the file, the line and column, and the field.

use std::ops::Range;

use propshare::{Time, Weight};
use toml::Spanned;

use super::claims::{names_client, Claim, ClaimMetric};
use super::draw::{Behave, Class, Poisson};
use super::raw::{Dur, RawGroup, RawOffsets, RawScenario, RawTimeDist, RawTimeDistTable, RawWeightDist, WeightDist};
use super::{ReportSpec, Scenario, ScenarioError};
use crate::engine::{ChainSpec, ClientSpec, Dist, GroupSpec, MemberLeaves, SimConfig};

/// The most windows one length of `[report] lag_windows` may cut the horizon
/// into (each window edge costs O(N)).
pub const MAX_WINDOWS: u64 = 100_000;

/// The client names a scenario can produce: the explicit clients' names,
/// and numbered members `prefix0`, `prefix1`, ... of classes (fixed at
/// load, `count` of them) and of Poisson arrivals and chains (numbered at
/// run time, no known bound).
struct KnownNames {
    explicit: Vec<String>,
    /// Prefix and, for classes, the member count.
    numbered: Vec<(String, Option<usize>)>,
}

impl KnownNames {
    /// Whether `digits` is a member number (decimal, no leading zero) below `count`.
    fn member_number(digits: &str, count: Option<usize>) -> bool {
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        canonical
            && match count {
                None => true,
                Some(n) => digits.parse::<usize>().is_ok_and(|v| v < n),
            }
    }

    /// Two numbered groups that can name the same client: (first, second,
    /// a shared name). Group q's members are p_q followed by a member
    /// number; if p_b = p_a + d, the smallest name of b that a could also
    /// make is p_b + "0", i.e. a's member number d·10, so they clash iff that
    /// is one of a's numbers (equal prefixes: d empty, "0").
    fn clashing_groups(&self) -> Option<(usize, usize, String)> {
        for (b, (pb, nb)) in self.numbered.iter().enumerate() {
            if nb == &Some(0) {
                continue;
            }
            for (a, (pa, na)) in self.numbered.iter().enumerate() {
                if a == b || (pa == pb && a > b) {
                    continue;
                }
                let first = format!("{pb}0");
                if first.strip_prefix(pa.as_str()).is_some_and(|d| Self::member_number(d, *na)) {
                    return Some((a, b, first));
                }
            }
        }
        None
    }

    /// Whether `name` is a client present from the start (a lag plot can follow it).
    fn is_static(&self, name: &str) -> bool {
        self.explicit.iter().any(|n| n == name)
            || self.numbered.iter().any(|(p, count)| {
                count.is_some() && name.strip_prefix(p.as_str()).is_some_and(|d| Self::member_number(d, *count))
            })
    }

    /// Whether `pattern` ([`names_client`]) can name at least one client.
    fn can_name(&self, pattern: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(group) => {
                self.explicit.iter().any(|n| n.starts_with(group))
                    || self.numbered.iter().any(|(p, count)| {
                        count != &Some(0)
                            && (p.starts_with(group)
                                || group.strip_prefix(p.as_str()).is_some_and(|d| Self::member_number(d, *count)))
                    })
            }
            None => {
                self.explicit.iter().any(|n| n == pattern)
                    || self.numbered.iter().any(|(p, count)| {
                        pattern.strip_prefix(p.as_str()).is_some_and(|d| Self::member_number(d, *count))
                    })
            }
        }
    }
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ScenarioError {
        let upto = &self.text[..span.start.min(self.text.len())];
        let line = upto.matches('\n').count() + 1;
        let column = upto.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ScenarioError { file: self.file.to_string(), line, column, field: field.to_string(), message: message.into() }
    }

    /// A TOML or type error, with the dotted path of the field at fault:
    /// the table the offending line is in (`client[2]` for the third
    /// `[[client]]`) and the key written on that line.
    fn toml_err(&self, e: &toml::de::Error) -> ScenarioError {
        let text = self.text;
        let span = e.span().unwrap_or(0..0);
        let start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
        let line = text[start..].lines().next().unwrap_or("").trim();
        let mut message = e.message().trim().to_string();
        // The table: the last header at or above the line, numbered if it is an array of tables.
        let header = |l: &str| -> Option<(String, bool)> {
            let l = l.split('#').next().unwrap_or("").trim();
            let array = l.starts_with("[[") && l.ends_with("]]");
            let name = l.strip_prefix('[')?.strip_suffix(']')?.trim_matches(|c| c == '[' || c == ']').trim();
            Some((name.to_string(), array))
        };
        let upto = &text[..(start + line.len()).min(text.len())];
        let mut table = String::new();
        if let Some((name, array)) = upto.lines().rev().find_map(header) {
            table = name.clone();
            if array {
                let k = upto.lines().filter(|l| header(l) == Some((name.clone(), true))).count();
                table = format!("{name}[{}]", k.saturating_sub(1));
            }
            if !array && message.contains("expected a sequence") {
                message = format!("{message}: write [[{name}]], one such table per entry");
            }
        }
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim())
            .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-.\"".contains(c)));
        let missing = message.strip_prefix("missing field `").and_then(|m| m.split('`').next()).map(str::to_string);
        let is_header = header(line).is_some();
        let field = match (missing, key) {
            // A missing field belongs to the table the error points at; `machine`
            // is the only one required at the top level.
            (Some(f), _) if f == "machine" => {
                message = "missing table [machine] (cpus, quantum and horizon are required)".into();
                f
            }
            (Some(f), _) if !is_header => f,
            (Some(f), _) => format!("{table}.{f}"),
            (None, Some(k)) if !table.is_empty() => format!("{table}.{k}"),
            (None, Some(k)) => k.to_string(),
            (None, None) => table,
        };
        self.err(span, &field, message)
    }

    fn weight(&self, v: &Spanned<i64>, field: &str) -> Result<Weight, ScenarioError> {
        let w = *v.get_ref();
        if w <= 0 {
            return Err(self.err(v.span(), field, format!("weight must be a positive integer, got {w}")));
        }
        Weight::new(w as u64).map_err(|e| self.err(v.span(), field, e.to_string()))
    }

    /// The departure `{at}.depart`, if any: after the arrival `arrive`.
    fn depart(&self, d: &Option<Spanned<Dur>>, arrive: Time, at: &str) -> Result<Option<Time>, ScenarioError> {
        match d {
            Some(d) if d.get_ref().0 <= arrive => Err(self.err(
                d.span(),
                &format!("{at}.depart"),
                format!("departure ({} ns) must come after arrival ({arrive} ns)", d.get_ref().0),
            )),
            d => Ok(d.as_ref().map(|d| d.get_ref().0)),
        }
    }

    /// The time `t` of entry `f` (an `at` field) in a list kept in time
    /// order: not before `last` (`since` says what `last` is, if anything).
    fn in_order(&self, span: Range<usize>, f: &str, t: Time, last: Time, since: &str) -> Result<(), ScenarioError> {
        if t < last {
            return Err(self.err(
                span,
                &format!("{f}.at"),
                format!("times out of order: {t} ns comes before {last} ns{since}"),
            ));
        }
        Ok(())
    }

    /// Weight changes in time order, from `from` on.
    fn weight_changes(
        &self,
        changes: &[Spanned<super::raw::RawWeightChange>],
        from: Time,
        at: &str,
    ) -> Result<Vec<(Time, Weight)>, ScenarioError> {
        let mut last = from;
        let mut out = Vec::new();
        for (k, wc) in changes.iter().enumerate() {
            let f = format!("{at}.weight_changes[{k}]");
            let t = wc.get_ref().at.0;
            self.in_order(wc.span(), &f, t, last, "")?;
            last = t;
            out.push((t, self.weight(&wc.get_ref().weight, &format!("{f}.weight"))?));
        }
        Ok(out)
    }

    /// The `[[group]]` tables as a tree: names unique, parents known, no
    /// cycle, at most [`propshare::groups::MAX_DEPTH`] levels and
    /// [`MAX_GROUPS`] groups, and their arrivals, moves and departures
    /// consistent ([`Ctx::group_timeline`]). Returns the groups with every
    /// parent before its children, and each one's lifetime in that order.
    fn groups(&self, raw: &[Spanned<RawGroup>]) -> Result<(Vec<GroupSpec>, Vec<Lifetime>), ScenarioError> {
        use std::collections::HashMap;
        if raw.len() > MAX_GROUPS {
            return Err(self.err(raw[MAX_GROUPS].span(), "group", format!("more than {MAX_GROUPS} groups")));
        }
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, g) in raw.iter().enumerate() {
            let name = g.get_ref().name.get_ref();
            if by_name.insert(name, i).is_some() {
                return Err(self.err(
                    g.get_ref().name.span(),
                    &format!("group[{i}].name"),
                    format!("duplicate group name {name:?}"),
                ));
            }
        }
        let mut parent = Vec::with_capacity(raw.len());
        for (i, g) in raw.iter().enumerate() {
            parent.push(match &g.get_ref().parent {
                None => None,
                Some(p) => match by_name.get(p.get_ref().as_str()) {
                    Some(&k) => Some(k),
                    None => {
                        return Err(self.err(
                            p.span(),
                            &format!("group[{i}].parent"),
                            format!(
                                "no group named {:?} (parents are [[group]] names; omit parent for the root)",
                                p.get_ref()
                            ),
                        ))
                    }
                },
            });
        }
        // Depth of each group, refusing cycles: walk up at most MAX_DEPTH steps.
        let max_depth = propshare::groups::MAX_DEPTH as usize;
        let mut depth = vec![0usize; raw.len()];
        for i in 0..raw.len() {
            let (mut x, mut d) = (i, 1);
            while let Some(p) = parent[x] {
                if p == i {
                    return Err(self.err(
                        raw[i].get_ref().parent.as_ref().expect("has a parent").span(),
                        &format!("group[{i}].parent"),
                        format!("group {:?} is its own ancestor (a cycle)", raw[i].get_ref().name.get_ref()),
                    ));
                }
                (x, d) = (p, d + 1);
                if d > max_depth {
                    return Err(self.err(
                        raw[i].span(),
                        &format!("group[{i}]"),
                        format!("deeper than {max_depth} levels, or in a cycle"),
                    ));
                }
            }
            depth[i] = d;
        }
        // Parents first: by depth, then file order.
        let mut order: Vec<usize> = (0..raw.len()).collect();
        order.sort_by_key(|&i| (depth[i], i));
        let mut index = vec![0; raw.len()];
        for (k, &i) in order.iter().enumerate() {
            index[i] = k;
        }
        let (lifetimes, moves) = self.group_timeline(raw, &by_name, &parent, &order, &index)?;
        let mut out = Vec::with_capacity(raw.len());
        for &i in &order {
            let g = raw[i].get_ref();
            let at = format!("group[{i}]");
            out.push(GroupSpec {
                name: g.name.get_ref().clone(),
                weight: self.weight(&g.weight, &format!("{at}.weight"))?,
                parent: parent[i].map(|p| index[p]),
                weight_changes: self.weight_changes(&g.weight_changes, lifetimes[index[i]].arrive, &at)?,
                moves: moves[i].iter().map(|&(t, p)| (t, p.map(|p| index[p]))).collect(),
                depart: g.depart.as_ref().map(|d| d.get_ref().0),
            });
        }
        Ok((out, lifetimes))
    }

    /// The groups' arrivals, moves and departures (file positions; `parent`
    /// the initial tree, `order` parents first, `index` the position of
    /// each in that order). A group arrives with its parent unless it says
    /// later; it departs at `depart` with everything in it then, or earlier
    /// with an ancestor. Replays the moves and departures in the engine's
    /// order (at one instant: moves, by `order`, then departures) and
    /// refuses a move of a group that has left, under a group not arrived
    /// or already left, into a cycle or deeper than
    /// [`propshare::groups::MAX_DEPTH`]. Returns each group's lifetime (by
    /// `index`) and its moves (time, new parent by file position).
    #[allow(clippy::type_complexity)]
    fn group_timeline(
        &self,
        raw: &[Spanned<RawGroup>],
        by_name: &std::collections::HashMap<&str, usize>,
        parent: &[Option<usize>],
        order: &[usize],
        index: &[usize],
    ) -> Result<(Vec<Lifetime>, Vec<Vec<(Time, Option<usize>)>>), ScenarioError> {
        let name = |i: usize| raw[i].get_ref().name.get_ref().as_str();
        let mut arrive = vec![0; raw.len()];
        for &i in order {
            let g = raw[i].get_ref();
            let inherited = parent[i].map_or(0, |p| arrive[p]);
            arrive[i] = match &g.arrive {
                Some(a) if a.get_ref().0 < inherited => {
                    return Err(self.err(
                        a.span(),
                        &format!("group[{i}].arrive"),
                        format!(
                            "{} ns is before its parent {:?} arrives ({inherited} ns)",
                            a.get_ref().0,
                            name(parent[i].expect("inherits from a parent"))
                        ),
                    ))
                }
                Some(a) => a.get_ref().0,
                None => inherited,
            };
            self.depart(&g.depart, arrive[i], &format!("group[{i}]"))?;
        }
        // Moves, checked for order and names; (time, order position, move number, group, new parent).
        let mut moves = vec![Vec::new(); raw.len()];
        let mut timeline = Vec::new();
        for (i, g) in raw.iter().enumerate() {
            let mut last = arrive[i];
            for (k, m) in g.get_ref().moves.iter().enumerate() {
                let f = format!("group[{i}].moves[{k}]");
                let t = m.get_ref().at.0;
                self.in_order(m.span(), &f, t, last, " (its arrival or last move)")?;
                if let Some(d) = g.get_ref().depart.as_ref().filter(|d| t >= d.get_ref().0) {
                    return Err(self.err(
                        m.span(),
                        &format!("{f}.at"),
                        format!("{t} ns is not before its departure ({} ns)", d.get_ref().0),
                    ));
                }
                last = t;
                let to = match &m.get_ref().parent {
                    None => None,
                    Some(p) => Some(*by_name.get(p.get_ref().as_str()).ok_or_else(|| {
                        self.err(
                            p.span(),
                            &format!("{f}.parent"),
                            format!("no group named {:?} (omit parent to move to the root)", p.get_ref()),
                        )
                    })?),
                };
                moves[i].push((t, to));
                timeline.push((t, index[i], k, i, to));
            }
        }
        timeline.sort();
        let mut departs: Vec<(Time, usize)> =
            raw.iter().enumerate().filter_map(|(i, g)| Some((g.get_ref().depart.as_ref()?.get_ref().0, i))).collect();
        departs.sort();
        let mut departs = departs.into_iter().peekable();
        let mut up = parent.to_vec();
        let mut closes: Vec<Option<Time>> = vec![None; raw.len()];
        let below = |up: &[Option<usize>], mut x: usize, g: usize| loop {
            if x == g {
                return true;
            }
            match up[x] {
                Some(p) => x = p,
                None => return false,
            }
        };
        let depth = |up: &[Option<usize>], mut x: usize| {
            let mut d = 1;
            while let Some(p) = up[x] {
                (x, d) = (p, d + 1);
            }
            d
        };
        // Group j departs at d: it and every group in it then close.
        let close = |closes: &mut [Option<Time>], up: &[Option<usize>], j: usize, d: Time| {
            for (x, c) in closes.iter_mut().enumerate() {
                if c.is_none() && below(up, x, j) {
                    *c = Some(d);
                }
            }
        };
        let max_depth = propshare::groups::MAX_DEPTH as usize;
        for (t, _, k, i, to) in timeline {
            while let Some((d, j)) = departs.next_if(|&(d, _)| d < t) {
                close(&mut closes, &up, j, d);
            }
            let m = &raw[i].get_ref().moves[k];
            let f = format!("group[{i}].moves[{k}]");
            if let Some(c) = closes[i] {
                return Err(self.err(m.span(), &f, format!("{:?} has left at {c} ns, before this move", name(i))));
            }
            let Some(p) = to else {
                up[i] = None;
                continue;
            };
            let span = m.get_ref().parent.as_ref().expect("named").span();
            let bad = |why: String| Err(self.err(span.clone(), &format!("{f}.parent"), why));
            if t < arrive[p] {
                return bad(format!("{:?} arrives at {} ns, after this move ({t} ns)", name(p), arrive[p]));
            }
            if let Some(c) = closes[p] {
                return bad(format!("{:?} has left at {c} ns, before this move ({t} ns)", name(p)));
            }
            if below(&up, p, i) {
                return bad(format!("{:?} is in {:?} at {t} ns: the move would make a cycle", name(p), name(i)));
            }
            let height = (0..raw.len()).filter(|&x| below(&up, x, i)).map(|x| depth(&up, x) - depth(&up, i)).max();
            let deepest = depth(&up, p) + 1 + height.unwrap_or(0);
            if deepest > max_depth {
                return bad(format!("at {t} ns the tree would be {deepest} levels deep, more than {max_depth}"));
            }
            up[i] = Some(p);
        }
        for (d, j) in departs {
            close(&mut closes, &up, j, d);
        }
        let mut lifetimes = vec![Lifetime { arrive: 0, closes: None }; raw.len()];
        for i in 0..raw.len() {
            lifetimes[index[i]] = Lifetime { arrive: arrive[i], closes: closes[i] };
        }
        Ok((lifetimes, moves))
    }

    /// The arrival of a client (or class) `at` in `group` (by order index):
    /// as written (`arrive`: the time and its place), not before the group
    /// arrives and not after it has left; none written, with its group (an
    /// error then points at `group_span`, the `group` field).
    fn arrival(
        &self,
        groups: &[GroupSpec],
        lifetimes: &[Lifetime],
        group: Option<usize>,
        arrive: Option<(Time, Range<usize>)>,
        group_span: Range<usize>,
        at: &str,
    ) -> Result<Time, ScenarioError> {
        let Some(k) = group else { return Ok(arrive.map_or(0, |(t, _)| t)) };
        let l = lifetimes[k];
        let (arrive, span, field) = match arrive {
            Some((t, span)) => (t, span, format!("{at}.arrive")),
            None => (l.arrive, group_span, format!("{at}.group")),
        };
        if arrive < l.arrive {
            return Err(self.err(
                span,
                &field,
                format!("{arrive} ns is before its group {:?} arrives ({} ns)", groups[k].name, l.arrive),
            ));
        }
        match l.closes {
            Some(c) if arrive >= c => Err(self.err(
                span,
                &field,
                format!("{arrive} ns is not before its group {:?} leaves ({c} ns)", groups[k].name),
            )),
            _ => Ok(arrive),
        }
    }

    /// The group a client or class names, by index into the ordered groups.
    fn member_of(
        &self,
        g: &Option<Spanned<String>>,
        groups: &[GroupSpec],
        at: &str,
    ) -> Result<Option<usize>, ScenarioError> {
        let Some(g) = g else { return Ok(None) };
        match groups.iter().position(|x| &x.name == g.get_ref()) {
            Some(k) => Ok(Some(k)),
            None => Err(self.err(
                g.span(),
                &format!("{at}.group"),
                format!("no group named {:?} (declare it with [[group]])", g.get_ref()),
            )),
        }
    }

    fn weight_dist(&self, v: &Spanned<RawWeightDist>, field: &str, count: usize) -> Result<WeightDist, ScenarioError> {
        let bad = |m: String| self.err(v.span(), field, m);
        let ok = |w: i64| w > 0 && (w as u64) <= Weight::MAX;
        let d = match v.get_ref() {
            RawWeightDist::Fixed(w) => WeightDist::Constant { value: *w },
            RawWeightDist::Dist(d) => d.clone(),
        };
        match &d {
            WeightDist::Constant { value } if !ok(*value) => {
                return Err(bad(format!("weight must be a positive integer up to {}, got {value}", Weight::MAX)))
            }
            WeightDist::Uniform { min, max } | WeightDist::LogUniform { min, max }
                if !(ok(*min) && ok(*max) && min <= max) =>
            {
                return Err(bad(format!("weights need 1 <= min <= max <= {}, got min {min}, max {max}", Weight::MAX)))
            }
            WeightDist::Heavy { percent, total } => {
                if !(*percent > 0.0 && *percent < 100.0) {
                    return Err(bad(format!("percent must be strictly between 0 and 100, got {percent}")));
                }
                if count < 2 || *total < count as i64 + 1 || !ok(*total) {
                    return Err(bad(format!(
                        "a heavy class needs count >= 2 and total >= count + 1, got count {count}, total {total}"
                    )));
                }
            }
            _ => {}
        }
        Ok(d)
    }

    /// `[report] lag_windows`: distinct lengths, each at least 1 ns, at most
    /// the horizon, and at most [`MAX_WINDOWS`] windows in the horizon.
    fn lag_windows(&self, lengths: &[Spanned<Dur>], horizon: Time) -> Result<Vec<Time>, ScenarioError> {
        let mut out = Vec::new();
        for (k, l) in lengths.iter().enumerate() {
            let field = format!("report.lag_windows[{k}]");
            let t = l.get_ref().0;
            let bad = |m: String| Err(self.err(l.span(), &field, m));
            if t == 0 {
                return bad("a window length must be at least 1 ns".into());
            }
            if t > horizon {
                return bad(format!("{t} ns is longer than the horizon ({horizon} ns): no complete window"));
            }
            if horizon / t > MAX_WINDOWS {
                return bad(format!("{t} ns cuts the horizon into more than {MAX_WINDOWS} windows"));
            }
            if out.contains(&t) {
                return bad(format!("duplicate window length {t} ns"));
            }
            out.push(t);
        }
        Ok(out)
    }

    /// A `[start, end]` window of the run: `start < end`, `start` before the horizon.
    fn time_window(
        &self,
        w: Option<&Spanned<[Dur; 2]>>,
        field: &str,
        horizon: Time,
    ) -> Result<Option<(Time, Time)>, ScenarioError> {
        let Some(w) = w else { return Ok(None) };
        let [Dur(start), Dur(end)] = *w.get_ref();
        if start >= end {
            return Err(self.err(w.span(), field, format!("start ({start} ns) must be before end ({end} ns)")));
        }
        if start >= horizon {
            return Err(self.err(w.span(), field, format!("starts at {start} ns, after the horizon ({horizon} ns)")));
        }
        Ok(Some((start, end)))
    }

    fn time_dist(&self, d: &RawTimeDist, span: Range<usize>, field: &str) -> Result<Dist, ScenarioError> {
        Ok(match d {
            RawTimeDist::Fixed(Dur(t)) | RawTimeDist::Dist(RawTimeDistTable::Constant { value: Dur(t) }) => {
                Dist::Constant(*t)
            }
            RawTimeDist::Dist(RawTimeDistTable::Uniform { min, max }) => {
                if min > max {
                    return Err(self.err(span, field, "uniform needs min <= max"));
                }
                Dist::Uniform(min.0, max.0)
            }
            RawTimeDist::Dist(RawTimeDistTable::Exponential { mean }) => {
                if mean.0 == 0 {
                    return Err(self.err(span, field, "exponential needs a positive mean"));
                }
                Dist::Exponential(mean.0)
            }
        })
    }

    /// A count from 1 to `max`.
    fn one_to(&self, v: &Spanned<i64>, max: i64, field: &str) -> Result<usize, ScenarioError> {
        let n = *v.get_ref();
        if n <= 0 || n > max {
            return Err(self.err(v.span(), field, format!("must be between 1 and {max}, got {n}")));
        }
        Ok(n as usize)
    }

    /// An optional duration that must be at least 1 ns.
    fn positive(&self, d: &Option<Spanned<Dur>>, field: &str) -> Result<Option<Time>, ScenarioError> {
        match d {
            Some(v) if v.get_ref().0 == 0 => Err(self.err(v.span(), field, "must be at least 1 ns")),
            v => Ok(v.as_ref().map(|v| v.get_ref().0)),
        }
    }

    fn behave(
        &self,
        run: &Option<RawTimeDist>,
        sleep: &Option<RawTimeDist>,
        span: Range<usize>,
        at: &str,
    ) -> Result<Behave, ScenarioError> {
        match (run, sleep) {
            (None, None) => Ok(Behave::Cpu),
            (Some(r), Some(s)) => {
                let run = self.time_dist(r, span.clone(), &format!("{at}.run"))?;
                if run == Dist::Constant(0) {
                    return Err(self.err(span, &format!("{at}.run"), "a run phase must be at least 1 ns"));
                }
                Ok(Behave::Phases(run, self.time_dist(s, span, &format!("{at}.sleep"))?))
            }
            _ => Err(self.err(span, at, "give both `run` and `sleep` for a client that sleeps, or neither")),
        }
    }
}

/// When a group is there: from `arrive` (ns) until `closes`, when it or an
/// ancestor it is in then departs (`None`: to the end).
#[derive(Clone, Copy, Debug)]
struct Lifetime {
    arrive: Time,
    closes: Option<Time>,
}

/// The most `[[group]]` tables a scenario may have.
pub const MAX_GROUPS: usize = propshare::groups::MAX_GROUPS - 1;

/// The most clients (explicit and class members) a scenario with groups may
/// have: the hierarchical reference settles every client at every event.
pub const MAX_GROUPED_CLIENTS: usize = 20_000;

impl Scenario {
    /// Parse and validate scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str, default_name: &str) -> Result<Scenario, ScenarioError> {
        let cx = Ctx { file, text };
        let raw: RawScenario = toml::from_str(text).map_err(|e| cx.toml_err(&e))?;
        let m = raw.machine.get_ref();
        let cpus = cx.one_to(&m.cpus, 1 << 16, "machine.cpus")?;
        let quantum = m.quantum.get_ref().0;
        if quantum == 0 {
            return Err(cx.err(m.quantum.span(), "machine.quantum", "must be at least 1 ns"));
        }
        let horizon = m.horizon.get_ref().0;
        if horizon == 0 || horizon >= 1 << 50 {
            return Err(cx.err(m.horizon.span(), "machine.horizon", "must be between 1 ns and 2^50 ns (13 days)"));
        }
        let offsets = match &m.offsets {
            None => Vec::new(),
            Some(o) => match o.get_ref() {
                RawOffsets::List(l) if l.len() != cpus => {
                    return Err(cx.err(
                        o.span(),
                        "machine.offsets",
                        format!("{} offsets for {cpus} CPUs: give one per CPU, or \"staggered\"", l.len()),
                    ))
                }
                RawOffsets::List(l) => l.iter().map(|d| d.0).collect(),
                RawOffsets::Named(n) if n == "staggered" => {
                    // k·Q/P < Q, in 128 bits: k·Q may not fit in 64.
                    (0..cpus as u128).map(|k| (k * quantum as u128 / cpus as u128) as Time).collect()
                }
                RawOffsets::Named(n) => {
                    return Err(cx.err(
                        o.span(),
                        "machine.offsets",
                        format!("expected a list of durations or \"staggered\", got {n:?}"),
                    ))
                }
            },
        };
        if let (Some(o), Some((k, t))) = (&m.offsets, offsets.iter().enumerate().find(|(_, &t)| t >= horizon)) {
            return Err(cx.err(
                o.span(),
                &format!("machine.offsets[{k}]"),
                format!("CPU {k} would start at {t} ns, not before the horizon ({horizon} ns): it would never run"),
            ));
        }
        let machine = SimConfig {
            cpus,
            quantum,
            horizon,
            cpu_offsets: offsets,
            switch_cost: match &m.switch_cost {
                Some(c) if c.get_ref().0 >= quantum => {
                    return Err(cx.err(
                        c.span(),
                        "machine.switch_cost",
                        format!(
                            "{} ns is not below the quantum ({quantum} ns): every run would be mostly switch cost",
                            c.get_ref().0
                        ),
                    ))
                }
                c => c.as_ref().map_or(0, |c| c.get_ref().0),
            },
            migration_cost: m.migration_cost.map_or(0, |d| d.0),
            seed: 0,
        };

        let (groups, lifetimes) = cx.groups(&raw.groups)?;
        let mut client_groups = Vec::new();
        let mut client_moves = Vec::new();
        let mut names = std::collections::HashSet::new();
        let mut clients = Vec::new();
        for (i, rc) in raw.clients.iter().enumerate() {
            let at = format!("client[{i}]");
            let c = rc.get_ref();
            let name = c.name.get_ref().clone();
            if !names.insert(name.clone()) {
                return Err(cx.err(c.name.span(), &format!("{at}.name"), format!("duplicate client name {name:?}")));
            }
            let weight = cx.weight(&c.weight, &format!("{at}.weight"))?;
            let group = cx.member_of(&c.group, &groups, &at)?;
            // A client of a group that arrives later arrives with it.
            let written = c.arrive.as_ref().map(|a| (a.get_ref().0, a.span()));
            let group_span = c.group.as_ref().map_or(rc.span(), |g| g.span());
            let arrive = cx.arrival(&groups, &lifetimes, group, written, group_span, &at)?;
            let depart = cx.depart(&c.depart, arrive, &at)?;
            let weight_changes = cx.weight_changes(&c.weight_changes, arrive, &at)?;
            client_groups.push(group);
            let mut last = arrive;
            let mut moves = Vec::new();
            for (k, m) in c.moves.iter().enumerate() {
                let f = format!("{at}.moves[{k}]");
                let t = m.get_ref().at.0;
                cx.in_order(m.span(), &f, t, last, "")?;
                last = t;
                let g = cx.member_of(&Some(m.get_ref().group.clone()), &groups, &f)?.expect("named");
                let l = lifetimes[g];
                if t < l.arrive || l.closes.is_some_and(|c| t >= c) {
                    return Err(cx.err(
                        m.get_ref().group.span(),
                        &format!("{f}.group"),
                        format!(
                            "{:?} is not there at {t} ns (it arrives at {} ns{})",
                            groups[g].name,
                            l.arrive,
                            match l.closes {
                                Some(c) => format!(" and leaves at {c} ns"),
                                None => String::new(),
                            }
                        ),
                    ));
                }
                moves.push((t, g));
            }
            client_moves.push(moves);
            let behave = cx.behave(&c.run, &c.sleep, rc.span(), &at)?;
            let work = cx.positive(&c.work, &format!("{at}.work"))?;
            clients.push(ClientSpec {
                name,
                weight,
                arrive,
                depart,
                behavior: behave.behavior(),
                weight_changes,
                work,
            });
        }

        let mut classes = Vec::new();
        for (i, rc) in raw.classes.iter().enumerate() {
            let at = format!("class[{i}]");
            let c = rc.get_ref();
            let count = cx.one_to(&c.count, propshare::MAX_CLIENT_ID.into(), &format!("{at}.count"))?;
            let group = cx.member_of(&c.group, &groups, &at)?;
            // Members of a group that arrives later arrive with it.
            let arrive = cx.arrival(&groups, &lifetimes, group, c.arrive.map(|a| (a.0, rc.span())), rc.span(), &at)?;
            classes.push(Class {
                prefix: c.prefix.get_ref().clone(),
                count,
                weight: cx.weight_dist(&c.weight, &format!("{at}.weight"), count)?,
                behave: cx.behave(&c.run, &c.sleep, rc.span(), &at)?,
                arrive,
                group,
            });
        }

        let mut poisson = Vec::new();
        for (i, rp) in raw.poisson.iter().enumerate() {
            let at = format!("poisson[{i}]");
            let p = rp.get_ref();
            let start = p.start.as_ref().map_or(0, |s| s.get_ref().0);
            let stop = p.stop.get_ref().0;
            if stop <= start {
                return Err(cx.err(
                    p.stop.span(),
                    &format!("{at}.stop"),
                    "times out of order: stop must come after start",
                ));
            }
            let mean = p.mean_interarrival.get_ref().0;
            if mean == 0 {
                return Err(cx.err(p.mean_interarrival.span(), &format!("{at}.mean_interarrival"), "must be positive"));
            }
            poisson.push(Poisson {
                prefix: p.prefix.get_ref().clone(),
                mean_interarrival: mean,
                lifetime: cx.time_dist(&p.lifetime, rp.span(), &format!("{at}.lifetime"))?,
                weight: cx.weight_dist(&p.weight, &format!("{at}.weight"), 2)?,
                start,
                stop,
                behave: cx.behave(&p.run, &p.sleep, rp.span(), &at)?,
            });
        }

        let mut chains = Vec::new();
        for (i, rc) in raw.chains.iter().enumerate() {
            let at = format!("chain[{i}]");
            let c = rc.get_ref();
            let leaves = match (cx.positive(&c.work, &format!("{at}.work"))?, cx.positive(&c.lifetime, &format!("{at}.lifetime"))?) {
                (Some(w), None) => MemberLeaves::AfterWork(w),
                (None, Some(l)) => MemberLeaves::AfterLifetime(l),
                _ => {
                    return Err(cx.err(
                        rc.span(),
                        &at,
                        "give exactly one of `work` (CPU time each member needs) and `lifetime` (wall-clock time each member stays)",
                    ))
                }
            };
            let count = match &c.count {
                Some(n) if *n.get_ref() <= 0 => {
                    return Err(cx.err(
                        n.span(),
                        &format!("{at}.count"),
                        format!("must be at least 1, got {}", n.get_ref()),
                    ))
                }
                n => n.as_ref().map(|n| *n.get_ref() as u64),
            };
            let start = c.start.map_or(0, |d| d.0);
            let until = match &c.until {
                Some(u) if u.get_ref().0 <= start => {
                    return Err(cx.err(
                        u.span(),
                        &format!("{at}.until"),
                        format!("times out of order: until ({} ns) must come after start ({start} ns)", u.get_ref().0),
                    ))
                }
                u => u.as_ref().map(|u| u.get_ref().0),
            };
            chains.push(ChainSpec {
                prefix: c.prefix.get_ref().clone(),
                weight: cx.weight(&c.weight, &format!("{at}.weight"))?,
                start,
                leaves,
                count,
                until,
            });
        }

        let schedulers: Vec<String> = match &raw.schedulers {
            None => propshare::registry::names().map(String::from).collect(),
            Some(list) if list.get_ref().is_empty() => {
                return Err(cx.err(
                    list.span(),
                    "schedulers",
                    "an empty list runs nothing: name at least one, or leave `schedulers` out to run every registered scheduler",
                ))
            }
            Some(list) => {
                let list = list.get_ref();
                for s in list {
                    let (_, inner) = crate::engine::flattening_of(s.get_ref());
                    if inner != s.get_ref() && groups.is_empty() {
                        return Err(cx.err(
                            s.span(),
                            "schedulers",
                            format!("{:?}: lazy flattening needs [[group]]s, and this scenario has none", s.get_ref()),
                        ));
                    }
                    if let Err(e) = propshare::registry::check(inner) {
                        return Err(cx.err(s.span(), "schedulers", e.to_string()));
                    }
                }
                list.iter().map(|s| s.get_ref().clone()).collect()
            }
        };
        let mut scheduler_params = std::collections::BTreeMap::new();
        for (name, table) in &raw.scheduler_params {
            let at = format!("scheduler.{name}");
            let entry = propshare::registry::find(name).map_err(|e| cx.err(table.span(), &at, e.to_string()))?;
            if !schedulers.contains(name) {
                return Err(cx.err(table.span(), &at, format!("{name:?} is not in this scenario's schedulers")));
            }
            let mut given = Vec::new();
            for (k, v) in table.get_ref() {
                let text = match v {
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    // A name only for a parameter that is a choice of names.
                    toml::Value::String(name)
                        if entry
                            .params
                            .iter()
                            .any(|p| p.name == k && matches!(p.kind, propshare::registry::ParamKind::Choice(_))) =>
                    {
                        name.clone()
                    }
                    other => {
                        let why = format!(
                            "a parameter is a whole number, true/false or (for a choice) a name, not {}",
                            other.type_str()
                        );
                        return Err(cx.err(table.span(), &format!("{at}.{k}"), why));
                    }
                };
                given.push((k.clone(), text));
            }
            if let Err(e) = propshare::registry::resolve(entry, &given) {
                return Err(cx.err(table.span(), &at, e.to_string()));
            }
            scheduler_params.insert(name.clone(), given);
        }

        let known = KnownNames {
            explicit: clients.iter().map(|c| c.name.clone()).collect(),
            numbered: classes
                .iter()
                .map(|c| (c.prefix.clone(), Some(c.count)))
                .chain(poisson.iter().map(|p| (p.prefix.clone(), None)))
                .chain(chains.iter().map(|c| (c.prefix.clone(), None)))
                .collect(),
        };
        let group_spans = raw
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("class[{i}]"), c.get_ref().prefix.span()))
            .chain(raw.poisson.iter().enumerate().map(|(i, p)| (format!("poisson[{i}]"), p.get_ref().prefix.span())))
            .chain(raw.chains.iter().enumerate().map(|(i, c)| (format!("chain[{i}]"), c.get_ref().prefix.span())));
        let group_spans: Vec<(String, Range<usize>)> = group_spans.collect();
        for (i, c) in raw.clients.iter().enumerate() {
            let name = c.get_ref().name.get_ref();
            if let Some(g) = known
                .numbered
                .iter()
                .position(|(p, n)| name.strip_prefix(p.as_str()).is_some_and(|d| KnownNames::member_number(d, *n)))
            {
                return Err(cx.err(
                    c.get_ref().name.span(),
                    &format!("client[{i}].name"),
                    format!(
                        "{name:?} is also the name of a member of {} (prefix {:?})",
                        group_spans[g].0, known.numbered[g].0
                    ),
                ));
            }
        }
        if let Some((a, b, example)) = known.clashing_groups() {
            return Err(cx.err(
                group_spans[b].1.clone(),
                &format!("{}.prefix", group_spans[b].0),
                format!(
                    "{:?} names members that {} (prefix {:?}) names too, e.g. {example:?}",
                    known.numbered[b].0, group_spans[a].0, known.numbered[a].0
                ),
            ));
        }
        if let Some(r) = &raw.report {
            if let Some((k, n)) = r.lag_clients.iter().enumerate().find(|(_, n)| !known.is_static(n.get_ref())) {
                return Err(cx.err(
                    n.span(),
                    &format!("report.lag_clients[{k}]"),
                    format!("no client is named {:?} (lag plots need a [[client]] or [[class]] member)", n.get_ref()),
                ));
            }
        }
        let report = match raw.report {
            None => ReportSpec::default(),
            Some(r) => ReportSpec {
                sample_every: r.sample_every.map(|d| d.0).filter(|&d| d > 0),
                lag_windows: cx.lag_windows(&r.lag_windows, horizon)?,
                lag_clients: r.lag_clients.iter().map(|n| n.get_ref().clone()).collect(),
                gantt: cx.time_window(r.gantt.as_ref(), "report.gantt", horizon)?,
                trace: cx.time_window(r.trace.as_ref(), "report.trace", horizon)?,
            },
        };

        let mut claims = Vec::new();
        for (i, rc) in raw.claims.iter().enumerate() {
            let at = format!("claim[{i}]");
            let c = rc.get_ref();
            let metric = ClaimMetric::parse(c.metric.get_ref()).ok_or_else(|| {
                cx.err(
                    c.metric.span(),
                    &format!("{at}.metric"),
                    format!("unknown metric {:?}; known: {}", c.metric.get_ref(), ClaimMetric::NAMES),
                )
            })?;
            if let Err(e) = propshare::registry::check(crate::engine::flattening_of(c.scheduler.get_ref()).1) {
                return Err(cx.err(c.scheduler.span(), &format!("{at}.scheduler"), e.to_string()));
            }
            if metric == ClaimMetric::ShareRatio && c.clients.len() != 2 {
                return Err(cx.err(rc.span(), &format!("{at}.clients"), "share_ratio needs exactly two clients"));
            }
            if metric == ClaimMetric::Share && c.client.is_none() {
                return Err(cx.err(rc.span(), &format!("{at}.client"), "share needs a client"));
            }
            let window = match &c.window {
                Some(w) if w.get_ref()[0] >= w.get_ref()[1] => {
                    return Err(cx.err(
                        w.span(),
                        &format!("{at}.window"),
                        "times out of order: the window must end after it starts",
                    ))
                }
                Some(w) if !matches!(metric, ClaimMetric::Share | ClaimMetric::ShareRatio) => {
                    return Err(cx.err(
                        w.span(),
                        &format!("{at}.window"),
                        "a window applies only to share and share_ratio",
                    ))
                }
                w => w.as_ref().map(|w| (w.get_ref()[0].0, w.get_ref()[1].0)),
            };
            if metric.windowed() && report.lag_windows.is_empty() {
                return Err(cx.err(
                    c.metric.span(),
                    &format!("{at}.metric"),
                    format!("{} needs window lengths in [report] lag_windows", metric.name()),
                ));
            }
            if metric == ClaimMetric::WindowLagGrowth && report.lag_windows.len() < 2 {
                return Err(cx.err(
                    c.metric.span(),
                    &format!("{at}.metric"),
                    "window_lag_growth needs at least two lengths in [report] lag_windows",
                ));
            }
            let window_length = match &c.window_length {
                Some(l) if !metric.takes_window_length() => {
                    return Err(cx.err(
                        l.span(),
                        &format!("{at}.window_length"),
                        "window_length applies only to window_lag, window_max_abs_lag and window_rel_error",
                    ))
                }
                Some(l) if !report.lag_windows.contains(&l.get_ref().0) => {
                    return Err(cx.err(
                        l.span(),
                        &format!("{at}.window_length"),
                        format!("{} ns is not one of the lengths in [report] lag_windows", l.get_ref().0),
                    ))
                }
                l => l.as_ref().map(|l| l.get_ref().0),
            };
            let bounds = super::claims::check_bounds(c, metric, rc.span()).map_err(|(span, field, why)| {
                cx.err(span, &if field.is_empty() { at.clone() } else { format!("{at}.{field}") }, why)
            })?;
            if !schedulers.contains(c.scheduler.get_ref()) {
                return Err(cx.err(
                    c.scheduler.span(),
                    &format!("{at}.scheduler"),
                    format!(
                        "{:?} is not in this scenario's schedulers, so the claim could never be judged",
                        c.scheduler.get_ref()
                    ),
                ));
            }
            let named = c.client.iter().map(|n| (n, format!("{at}.client")));
            let named = named.chain(c.clients.iter().enumerate().map(|(k, n)| (n, format!("{at}.clients[{k}]"))));
            for (n, field) in named {
                if metric == ClaimMetric::GroupLag {
                    if !groups.iter().any(|g| names_client(n, &g.name)) {
                        return Err(cx.err(rc.span(), &field, format!("no group is named {n:?}")));
                    }
                } else if !known.can_name(n) {
                    return Err(cx.err(rc.span(), &field, format!("no client is named {n:?}")));
                }
            }
            claims.push(Claim {
                paper: c.paper.clone(),
                source: c.source.clone(),
                scheduler: c.scheduler.get_ref().clone(),
                metric,
                client: c.client.clone(),
                clients: c.clients.clone(),
                min: bounds.min,
                max: bounds.max,
                reach: bounds.reach,
                expect: bounds.expect,
                note: c.note.clone(),
                at: format!("{}:{}", cx.file, cx.err(rc.span(), "", "").line),
                window,
                window_length,
            });
        }

        let repeat = match &raw.repeat {
            Some(r) if *r.get_ref() == 0 => return Err(cx.err(r.span(), "repeat", "must be at least 1")),
            Some(r) => *r.get_ref(),
            None => 1,
        };
        let grouped = clients.len() + classes.iter().map(|c| c.count).sum::<usize>();
        if !groups.is_empty() && grouped > MAX_GROUPED_CLIENTS {
            return Err(cx.err(
                0..0,
                "group",
                format!(
                    "{grouped} clients with groups, more than {MAX_GROUPED_CLIENTS}: the hierarchical reference \
                     costs O(N) per event"
                ),
            ));
        }
        if clients.is_empty() && classes.is_empty() && poisson.is_empty() && chains.is_empty() {
            return Err(cx.err(
                0..0,
                "client",
                "the scenario has no clients (add [[client]], [[class]], [[poisson]] or [[chain]])",
            ));
        }
        Ok(Scenario {
            name: match raw.name {
                Some(n) if n.get_ref().trim().is_empty() => {
                    return Err(cx.err(n.span(), "name", "must not be empty: it names the output files"))
                }
                Some(n) => n.into_inner(),
                None => default_name.to_string(),
            },
            description: raw.description.unwrap_or_default(),
            paper: raw.paper,
            schedulers,
            scheduler_params,
            seed: raw.seed.unwrap_or(1),
            repeat,
            machine,
            clients,
            client_groups,
            client_moves,
            groups,
            classes,
            poisson,
            chains,
            claims,
            report,
        })
    }
}

#[cfg(test)]
mod known_names_tests {
    use super::KnownNames;

    #[test]
    fn names_that_can_exist() {
        let k = KnownNames {
            explicit: vec!["T1".into()],
            numbered: vec![("one".into(), Some(12)), ("short".into(), None), ("none".into(), Some(0))],
        };
        for ok in ["T1", "one0", "one11", "short0", "short123", "T*", "one*", "one1*", "on*", "short4*"] {
            assert!(k.can_name(ok), "{ok}");
        }
        for bad in ["T2", "one12", "one01", "one", "short", "shortx", "one12*", "none0", "none*", "x*"] {
            assert!(!k.can_name(bad), "{bad}");
        }
        assert!(k.is_static("one11") && k.is_static("T1"));
        assert!(!k.is_static("short0") && !k.is_static("one12"));
    }
}
