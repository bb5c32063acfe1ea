//! The trait contract (see `propshare::contract`) on random event sequences,
//! for every registered scheduler. A new scheduler is covered by adding its
//! name to `contract_tests!` below.

use propshare::contract::{check, Op};
use propshare::{registry, SchedConfig, MS};
use proptest::prelude::*;

fn weight() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 1u64..=64, 1 => 1u64..=(1 << 32) - 1]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => weight().prop_map(Op::Join),
        1 => any::<usize>().prop_map(Op::Leave),
        2 => any::<usize>().prop_map(Op::Block),
        2 => any::<usize>().prop_map(Op::Wake),
        1 => (any::<usize>(), weight()).prop_map(|(i, w)| Op::SetWeight(i, w)),
        10 => Just(Op::Tick),
        3 => (any::<usize>(), 0..15 * MS, 0u8..4).prop_map(|(i, dt, r)| Op::Stop(i, dt, r)),
        1 => any::<u8>().prop_map(Op::Invalid),
    ]
}

fn run(name: &str, cpus: usize, quantum: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut s = registry::build(name, SchedConfig { cpus, quantum, seed: 7 }).expect("registered");
    check(&mut *s, cpus, quantum, ops).map_err(TestCaseError::fail)
}

macro_rules! contract_tests {
    ($($test:ident => $name:expr),* $(,)?) => {$(
        proptest! {
            #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
            #[test]
            fn $test(cpus in 1usize..=6, quantum in prop_oneof![Just(10 * MS), 1..=20 * MS], ops in proptest::collection::vec(op(), 1..300)) {
                run($name, cpus, quantum, &ops)?;
            }
        }
    )*};
}

contract_tests! {
    contract_rr => "rr",
    contract_wfq => "wfq",
    contract_wfq_readjust => "wfq+readjust",
    contract_wf2q => "wf2q",
    contract_wf2q_readjust => "wf2q+readjust",
    contract_hwf2q => "hwf2q",
    contract_hwf2q_paper => "hwf2q(no_capped_credit=false)",
    contract_sfq => "sfq",
    contract_sfq_readjust => "sfq+readjust",
    contract_stride => "stride",
    contract_stride_readjust => "stride+readjust",
    contract_lottery => "lottery",
    contract_lottery_readjust => "lottery+readjust",
    contract_lottery_readjust_dedicate => "lottery+readjust+dedicate",
    contract_wrr => "wrr",
    contract_wrr_readjust => "wrr+readjust",
    contract_wrr_readjust_dedicate => "wrr+readjust+dedicate",
    contract_srr => "srr",
    contract_srr_readjust => "srr+readjust",
    contract_srr_readjust_dedicate => "srr+readjust+dedicate",
    contract_vtrr => "vtrr",
    contract_vtrr_readjust => "vtrr+readjust",
    contract_vtrr_readjust_dedicate => "vtrr+readjust+dedicate",
    contract_cfs => "cfs",
    contract_eevdf => "eevdf",
    contract_cfs_tg => "cfs+tg",
    contract_eevdf_tg => "eevdf+tg",
    contract_cfs_lbfail => "cfs+lbfail",
    contract_eevdf_lbfail => "eevdf+lbfail",
    contract_cfs_readjust => "cfs+readjust",
    contract_eevdf_readjust => "eevdf+readjust",
    contract_gdq => "gdq",
    contract_sfs => "sfs",
    contract_sfs_heuristic => "sfs+heuristic",
    contract_sfs_affinity => "sfs+affinity",
    contract_dfs => "dfs",
    contract_dfs_notiebreak => "dfs-notiebreak",
    contract_dfs_fa => "dfs-fa",
    contract_dfs_fa_affinity => "dfs-fa+affinity",
    contract_dfs_fa_readjust => "dfs-fa+readjust",
    contract_gr3 => "gr3",
    contract_gr3mp => "gr3mp",
    contract_gr3_fairjoin => "gr3+fairjoin",
    contract_gr3mp_fairjoin => "gr3mp+fairjoin",
    contract_gr3_runtime => "gr3(charge=runtime)",
    contract_gr3mp_runtime => "gr3mp(charge=runtime)",
    contract_gr3mp_plus_runtime => "gr3mp+runtime",
    contract_gr3_fairjoin_runtime => "gr3+fairjoin(charge=runtime)",
    contract_gr3mp_fairjoin_runtime => "gr3mp+fairjoin(charge=runtime)",
    contract_dwrr => "dwrr",
    contract_dwrr_carry => "dwrr+carry",
    contract_dwrr_cfs => "dwrr-cfs",
    contract_dwrr_cfs_carry => "dwrr-cfs+carry",
}

/// Every registered scheduler must appear above.
#[test]
fn every_registered_scheduler_is_covered() {
    let src = include_str!("contract.rs");
    for name in registry::names() {
        assert!(src.contains(&format!("=> \"{name}\"")), "{name} has no contract test");
    }
}

#[test]
fn every_registered_scheduler_reports_its_registry_name() {
    for name in registry::names() {
        let s = registry::build(name, SchedConfig::new(2, MS)).unwrap();
        assert_eq!(s.name(), name, "built from registry name {name:?}");
    }
}

/// The harness must catch broken schedulers: these mutants of round robin
/// each break one promise, and each must be caught.
mod mutants {
    use super::*;
    use propshare::algo::rr::RoundRobin;
    use propshare::{ClientId, CpuId, Decision, SchedError, Scheduler, StopReason, Time};

    /// `Idler` claims work conservation but never uses CPU 1; `Starver` never
    /// runs client 0 while anyone else can run.
    struct Mutant {
        inner: RoundRobin,
        idle_cpu1: bool,
    }

    impl Scheduler for Mutant {
        fn name(&self) -> &str {
            "mutant"
        }
        propshare::forward_scheduler!(|s| s.inner; join, leave, block, wake, set_weight, stopped);
        fn pick(&mut self, now: Time, cpu: CpuId) -> Result<Decision, SchedError> {
            if self.idle_cpu1 && cpu == CpuId(1) {
                return Ok(Decision::Idle);
            }
            let d = self.inner.pick(now, cpu)?;
            if let Decision::Run { client: ClientId(0), slice } = d {
                if !self.idle_cpu1 {
                    // Put client 0 back and take the next one, if any.
                    self.inner.stopped(now, cpu, ClientId(0), 0, StopReason::Preempted)?;
                    let next = self.inner.pick(now, cpu)?;
                    if let Decision::Run { client: ClientId(0), .. } = next {
                        return Ok(Decision::Run { client: ClientId(0), slice });
                    }
                    return Ok(next);
                }
            }
            Ok(d)
        }
    }

    fn ops() -> Vec<Op> {
        let mut ops = vec![Op::Join(1), Op::Join(1), Op::Join(1)];
        ops.extend(std::iter::repeat_n(Op::Tick, 10));
        ops
    }

    #[test]
    fn idle_cpu_is_caught() {
        let mut m = Mutant { inner: RoundRobin::new(SchedConfig::new(2, MS)), idle_cpu1: true };
        let err = check(&mut m, 2, MS, &ops()).unwrap_err();
        assert!(err.contains("idle while"), "{err}");
    }

    #[test]
    fn starvation_is_caught() {
        let mut m = Mutant { inner: RoundRobin::new(SchedConfig::new(1, MS)), idle_cpu1: false };
        let err = check(&mut m, 1, MS, &ops()).unwrap_err();
        assert!(err.contains("never ran"), "{err}");
    }
}
