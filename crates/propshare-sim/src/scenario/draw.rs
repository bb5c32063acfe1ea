//! Each run's clients, drawn from the scenario: explicit clients, then the
//! members of classes, then Poisson arrivals, deterministically from the
//! run's seed.

use propshare::{Time, Weight};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::raw::WeightDist;
use super::Scenario;
use crate::engine::{Behavior, ClientSpec, Dist, GroupsSpec};

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Behave {
    Cpu,
    Phases(Dist, Dist),
}

impl Behave {
    pub(super) fn behavior(&self) -> Behavior {
        match *self {
            Behave::Cpu => Behavior::CpuBound,
            Behave::Phases(run, sleep) => Behavior::Phases { run, sleep },
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Class {
    pub(super) prefix: String,
    pub(super) count: usize,
    pub(super) weight: WeightDist,
    pub(super) behave: Behave,
    pub(super) arrive: Time,
    /// Its members' group, by index into the scenario's groups.
    pub(super) group: Option<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Poisson {
    pub(super) prefix: String,
    pub(super) mean_interarrival: Time,
    pub(super) lifetime: Dist,
    pub(super) weight: WeightDist,
    pub(super) start: Time,
    pub(super) stop: Time,
    pub(super) behave: Behave,
}

impl Scenario {
    /// The clients of run `k`: explicit clients, then classes, then Poisson
    /// arrivals, all drawn deterministically from the run's seed.
    pub fn clients(&self, k: u32) -> Vec<ClientSpec> {
        let mut rng = Pcg64Mcg::seed_from_u64(self.seed.wrapping_add(k as u64) ^ 0x5eed_c1a5);
        let mut out = self.clients.clone();
        for c in &self.classes {
            let weights = draw_weights(&c.weight, c.count, &mut rng);
            for (j, w) in weights.into_iter().enumerate() {
                out.push(ClientSpec {
                    name: format!("{}{}", c.prefix, j),
                    weight: w,
                    arrive: c.arrive,
                    depart: None,
                    behavior: c.behave.behavior(),
                    weight_changes: Vec::new(),
                    work: None,
                });
            }
        }
        for p in &self.poisson {
            let mut t = p.start;
            let mut j = 0;
            let gap = Dist::Exponential(p.mean_interarrival);
            loop {
                t = t.saturating_add(gap.sample(&mut rng));
                if t >= p.stop || out.len() >= propshare::MAX_CLIENT_ID as usize {
                    break;
                }
                let w = draw_weights(&p.weight, 1, &mut rng)[0];
                let life = p.lifetime.sample(&mut rng).max(1);
                out.push(ClientSpec {
                    name: format!("{}{}", p.prefix, j),
                    weight: w,
                    arrive: t,
                    depart: Some(t + life),
                    behavior: p.behave.behavior(),
                    weight_changes: Vec::new(),
                    work: None,
                });
                j += 1;
            }
        }
        out
    }

    /// The groups of run `k` and the group of each client of
    /// [`Scenario::clients`] (Poisson arrivals and chain members: the root),
    /// or `None` when the scenario has no groups.
    pub fn groups(&self) -> Option<GroupsSpec> {
        if self.groups.is_empty() {
            return None;
        }
        let mut member_of = self.client_groups.clone();
        for c in &self.classes {
            member_of.extend(std::iter::repeat_n(c.group, c.count));
        }
        let moves =
            self.client_moves.iter().enumerate().flat_map(|(i, m)| m.iter().map(move |&(t, g)| (t, i, g))).collect();
        Some(GroupsSpec { groups: self.groups.clone(), member_of, moves })
    }
}

/// Draw `n` weights (validated distributions only).
fn draw_weights(d: &WeightDist, n: usize, rng: &mut Pcg64Mcg) -> Vec<Weight> {
    let w = |x: u64| Weight::new(x.clamp(1, Weight::MAX)).expect("clamped");
    match *d {
        WeightDist::Constant { value } => vec![w(value as u64); n],
        WeightDist::Uniform { min, max } => (0..n).map(|_| w(rng.random_range(min as u64..=max as u64))).collect(),
        WeightDist::LogUniform { min, max } => {
            let (lo, hi) = ((min as f64).ln(), (max as f64 + 1.0).ln());
            (0..n).map(|_| w((rng.random_range(lo..hi).exp().floor() as u64).clamp(min as u64, max as u64))).collect()
        }
        WeightDist::Heavy { percent, total } => {
            if n == 1 {
                return vec![w(total as u64)];
            }
            let total = total as u64;
            let heavy = ((total as f64 * percent / 100.0).round() as u64).clamp(1, total - (n as u64 - 1));
            let rest = total - heavy;
            // A uniformly random composition of `rest` into n-1 positive parts:
            // n-2 distinct cut points in 1..rest.
            let mut cuts = rand::seq::index::sample(rng, (rest - 1) as usize, n - 2).into_vec();
            cuts.iter_mut().for_each(|c| *c += 1);
            cuts.sort_unstable();
            let mut out = vec![w(heavy)];
            let mut prev = 0;
            for c in cuts.into_iter().chain(std::iter::once(rest as usize)) {
                out.push(w((c - prev) as u64));
                prev = c;
            }
            out
        }
    }
}
