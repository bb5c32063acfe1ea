//! Weight readjustment against brute-force water-filling on 10,000 random cases.
//!
//! The fluid optimum is characterised without any ordering assumption: a set
//! C of clients is capped at one CPU and the rest share `P' - |C|` CPUs in
//! proportion to weight, with level `c = (P' - |C|) / Σ_{i∉C} w_i`, and the
//! split is valid iff every capped client has `c·w_i ≥ 1` and every other one
//! `c·w_i ≤ 1`. We try every subset C; all valid subsets give the same shares,
//! and those shares must equal `P' φ_i / Σφ` from `readjust_weights`.

use propshare::readjust::readjust_weights;
use proptest::prelude::*;

/// Shares in CPUs as exact fractions (num, den) by brute force over subsets.
fn water_fill(w: &[u64], cpus: usize) -> Vec<(u128, u128)> {
    let n = w.len();
    let p = cpus.min(n) as u128;
    let mut answer: Option<Vec<(u128, u128)>> = None;
    for mask in 0u32..(1 << n) {
        let capped = mask.count_ones() as u128;
        if capped > p {
            continue;
        }
        let rest: u128 = (0..n).filter(|i| mask & (1 << i) == 0).map(|i| w[i] as u128).sum();
        let left = p - capped;
        if rest == 0 {
            if left != 0 {
                continue;
            }
        } else if left == 0 {
            continue;
        }
        // c = left / rest; capped need left·w ≥ rest, others left·w ≤ rest.
        let valid = (0..n).all(|i| {
            let lw = left * w[i] as u128;
            if mask & (1 << i) != 0 {
                lw >= rest
            } else {
                lw <= rest
            }
        });
        if !valid {
            continue;
        }
        let shares: Vec<(u128, u128)> =
            (0..n).map(|i| if mask & (1 << i) != 0 { (1, 1) } else { (left * w[i] as u128, rest) }).collect();
        if let Some(prev) = &answer {
            for (a, b) in prev.iter().zip(&shares) {
                assert_eq!(a.0 * b.1, b.0 * a.1, "two valid water-fillings disagree: {w:?} on {cpus}");
            }
        } else {
            answer = Some(shares);
        }
    }
    answer.expect("a water-filling always exists")
}

fn check(w: &[u64], cpus: usize) -> Result<(), TestCaseError> {
    let phis = readjust_weights(w, cpus);
    let p = cpus.min(w.len()) as u128;
    // Σφ as an exact fraction over the common denominator of the φ's (all capped share one).
    let den = phis.iter().map(|f| f.den as u128).max().unwrap_or(1);
    let total_num: u128 = phis.iter().map(|f| f.num as u128 * den / f.den as u128).sum();
    let expected = water_fill(w, cpus);
    for (i, f) in phis.iter().enumerate() {
        // share_i = P' · φ_i / Σφ = P' · (num_i · den / den_i) / total_num
        let share_num = p * (f.num as u128 * den / f.den as u128);
        let (en, ed) = expected[i];
        prop_assert_eq!(share_num * ed, en * total_num, "client {} of {:?} on {} CPUs", i, w, cpus);
        // No client above one CPU.
        prop_assert!(share_num <= total_num);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn readjustment_equals_water_filling(
        w in proptest::collection::vec(prop_oneof![6 => 1u64..=16, 3 => 1u64..=1000, 1 => 1u64..=(1u64 << 32) - 1], 1..=9),
        cpus in 1usize..=8,
    ) {
        check(&w, cpus)?;
    }
}

#[test]
fn papers_examples_by_water_filling() {
    // SFS §4.2: 1 and 10 on 2 CPUs, then a third weight-1 client.
    assert_eq!(water_fill(&[1, 10], 2), vec![(1, 1), (1, 1)]);
    check(&[1, 10], 2).unwrap();
    check(&[1, 10, 1], 2).unwrap();
    assert_eq!(water_fill(&[1, 10, 1], 2), vec![(1, 2), (1, 1), (1, 2)]);
}
