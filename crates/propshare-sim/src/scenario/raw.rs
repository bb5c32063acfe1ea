//! The file format as written: serde structs that mirror the TOML
//! (`docs/SCENARIOS.md`), with spans for error messages, and durations with
//! units ([`Dur`]). Nothing here is checked beyond its type; [`super::validate`]
//! turns a [`RawScenario`] into a [`super::Scenario`].

use propshare::Time;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// A duration: a string with a unit (`"10ms"`, `"1.5s"`, `"250us"`,
/// `"100ns"`), parsed by [`propshare::parse_duration`]; a bare number is an
/// error except `0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Time);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration with a unit, like \"10ms\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("duration must not be negative, got {v}"))),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                match v {
                    0 => Ok(Dur(0)),
                    v => Err(E::custom(format!("duration {v} needs a unit: write \"{v}ns\", \"{v}ms\" or \"{v}s\""))),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                propshare::parse_duration(v).map(Dur).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: Option<Spanned<String>>,
    pub(super) description: Option<String>,
    pub(super) paper: Option<String>,
    pub(super) schedulers: Option<Spanned<Vec<Spanned<String>>>>,
    /// `[scheduler.NAME]` tables: parameters of the scheduler NAME.
    #[serde(default, rename = "scheduler")]
    pub(super) scheduler_params: std::collections::BTreeMap<String, Spanned<toml::Table>>,
    pub(super) seed: Option<u64>,
    pub(super) repeat: Option<Spanned<u32>>,
    pub(super) machine: Spanned<RawMachine>,
    #[serde(default, rename = "group")]
    pub(super) groups: Vec<Spanned<RawGroup>>,
    #[serde(default, rename = "client")]
    pub(super) clients: Vec<Spanned<RawClient>>,
    #[serde(default, rename = "class")]
    pub(super) classes: Vec<Spanned<RawClass>>,
    #[serde(default)]
    pub(super) poisson: Vec<Spanned<RawPoisson>>,
    #[serde(default, rename = "chain")]
    pub(super) chains: Vec<Spanned<RawChain>>,
    #[serde(default, rename = "claim")]
    pub(super) claims: Vec<Spanned<RawClaim>>,
    pub(super) report: Option<RawReport>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMachine {
    pub(super) cpus: Spanned<i64>,
    pub(super) quantum: Spanned<Dur>,
    pub(super) horizon: Spanned<Dur>,
    #[serde(default)]
    pub(super) offsets: Option<Spanned<RawOffsets>>,
    #[serde(default)]
    pub(super) switch_cost: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) migration_cost: Option<Dur>,
}

pub(super) enum RawOffsets {
    List(Vec<Dur>),
    Named(String),
}

/// An error naming the forms a field accepts, for a value of none of them
/// (serde's untagged enums say only "did not match any variant").
fn expected<E: de::Error>(what: &str, got: &toml::Value) -> E {
    E::custom(format!("expected {what}, got {} {got}", got.type_str()))
}

/// The message of an error from deserializing a value, without its decoration.
fn inner<E: de::Error>(e: toml::de::Error) -> E {
    E::custom(e.message().trim())
}

impl<'de> Deserialize<'de> for RawOffsets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawOffsets, D::Error> {
        match toml::Value::deserialize(d)? {
            v @ toml::Value::Array(_) => Vec::<Dur>::deserialize(v).map(RawOffsets::List).map_err(inner),
            toml::Value::String(s) => Ok(RawOffsets::Named(s)),
            v => Err(expected("a list of durations, one per CPU (e.g. [\"0ms\", \"5ms\"]), or \"staggered\"", &v)),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    pub(super) name: Spanned<String>,
    pub(super) weight: Spanned<i64>,
    #[serde(default)]
    pub(super) arrive: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) depart: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) run: Option<RawTimeDist>,
    #[serde(default)]
    pub(super) sleep: Option<RawTimeDist>,
    #[serde(default)]
    pub(super) weight_changes: Vec<Spanned<RawWeightChange>>,
    #[serde(default)]
    pub(super) work: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) group: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) moves: Vec<Spanned<RawMove>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMove {
    pub(super) at: Dur,
    pub(super) group: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) name: Spanned<String>,
    pub(super) weight: Spanned<i64>,
    #[serde(default)]
    pub(super) parent: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) weight_changes: Vec<Spanned<RawWeightChange>>,
    #[serde(default)]
    pub(super) arrive: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) depart: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) moves: Vec<Spanned<RawGroupMove>>,
}

/// `{ at, parent }`: a group moves under `parent` (omitted: the root).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroupMove {
    pub(super) at: Dur,
    #[serde(default)]
    pub(super) parent: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChain {
    pub(super) prefix: Spanned<String>,
    pub(super) weight: Spanned<i64>,
    #[serde(default)]
    pub(super) work: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) lifetime: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) start: Option<Dur>,
    #[serde(default)]
    pub(super) count: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) until: Option<Spanned<Dur>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWeightChange {
    pub(super) at: Dur,
    pub(super) weight: Spanned<i64>,
}

pub(super) enum RawTimeDist {
    Fixed(Dur),
    Dist(RawTimeDistTable),
}

impl<'de> Deserialize<'de> for RawTimeDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawTimeDist, D::Error> {
        match toml::Value::deserialize(d)? {
            v @ (toml::Value::String(_) | toml::Value::Integer(_)) => {
                Dur::deserialize(v).map(RawTimeDist::Fixed).map_err(inner)
            }
            v @ toml::Value::Table(_) => RawTimeDistTable::deserialize(v).map(RawTimeDist::Dist).map_err(inner),
            v => Err(expected(
                "a duration (e.g. \"10ms\") or a table { dist = \"constant\", value = D }, \
                 { dist = \"uniform\", min = D, max = D } or { dist = \"exponential\", mean = D }",
                &v,
            )),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, tag = "dist", rename_all = "kebab-case")]
pub(super) enum RawTimeDistTable {
    Constant { value: Dur },
    Uniform { min: Dur, max: Dur },
    Exponential { mean: Dur },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClass {
    pub(super) prefix: Spanned<String>,
    pub(super) count: Spanned<i64>,
    pub(super) weight: Spanned<RawWeightDist>,
    #[serde(default)]
    pub(super) run: Option<RawTimeDist>,
    #[serde(default)]
    pub(super) sleep: Option<RawTimeDist>,
    #[serde(default)]
    pub(super) arrive: Option<Dur>,
    #[serde(default)]
    pub(super) group: Option<Spanned<String>>,
}

/// How the weights of a class of clients are drawn.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, tag = "dist", rename_all = "kebab-case")]
pub enum WeightDist {
    /// Every client has this weight.
    Constant {
        /// The weight.
        value: i64,
    },
    /// Uniform integers in `[min, max]`.
    Uniform {
        /// Smallest.
        min: i64,
        /// Largest.
        max: i64,
    },
    /// Log-uniform integers in `[min, max]`.
    LogUniform {
        /// Smallest.
        min: i64,
        /// Largest.
        max: i64,
    },
    /// The first client holds `percent`% of `total`; the rest split the remainder at random (each ≥ 1).
    Heavy {
        /// Share of the heavy client, in percent of the total weight.
        percent: f64,
        /// Total weight of the class.
        total: i64,
    },
}

pub(super) enum RawWeightDist {
    Fixed(i64),
    Dist(WeightDist),
}

impl<'de> Deserialize<'de> for RawWeightDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawWeightDist, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::Integer(w) => Ok(RawWeightDist::Fixed(w)),
            v @ toml::Value::Table(_) => WeightDist::deserialize(v).map(RawWeightDist::Dist).map_err(inner),
            v => Err(expected(
                "a weight (a positive integer) or a table { dist = \"constant\", value = W }, \
                 { dist = \"uniform\" or \"log-uniform\", min = A, max = B } or { dist = \"heavy\", percent = X, total = T }",
                &v,
            )),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPoisson {
    pub(super) prefix: Spanned<String>,
    pub(super) mean_interarrival: Spanned<Dur>,
    pub(super) lifetime: RawTimeDist,
    pub(super) weight: Spanned<RawWeightDist>,
    #[serde(default)]
    pub(super) start: Option<Spanned<Dur>>,
    pub(super) stop: Spanned<Dur>,
    #[serde(default)]
    pub(super) run: Option<RawTimeDist>,
    #[serde(default)]
    pub(super) sleep: Option<RawTimeDist>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClaim {
    pub(super) paper: String,
    pub(super) source: String,
    pub(super) scheduler: Spanned<String>,
    pub(super) metric: Spanned<String>,
    #[serde(default)]
    pub(super) client: Option<String>,
    #[serde(default)]
    pub(super) clients: Vec<String>,
    #[serde(default)]
    pub(super) min: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) max: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) reach: Option<Spanned<RawReach>>,
    #[serde(default)]
    pub(super) expect: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) reason: Option<String>,
    #[serde(default)]
    pub(super) note: Option<String>,
    #[serde(default)]
    pub(super) window: Option<Spanned<[Dur; 2]>>,
    #[serde(default)]
    pub(super) window_length: Option<Spanned<Dur>>,
}

/// `reach = 800` or `reach = [-3, 800]`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawReach {
    One(f64),
    Many(Vec<f64>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReport {
    #[serde(default)]
    pub(super) sample_every: Option<Dur>,
    #[serde(default)]
    pub(super) lag_clients: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) gantt: Option<Spanned<[Dur; 2]>>,
    #[serde(default)]
    pub(super) lag_windows: Vec<Spanned<Dur>>,
    #[serde(default)]
    pub(super) trace: Option<Spanned<[Dur; 2]>>,
}
