//! Exact unsigned 256-bit arithmetic for the algorithms that compare or
//! divide products of two `u128`s (GR3's group work × weight, GDQ's virtual
//! times, SFS's surpluses, DFS's tags and deadlines): one implementation,
//! so every algorithm rounds and saturates the same way.
//!
//! Only what those algorithms need: the exact product of two `u128`s,
//! saturating addition, subtraction, comparison, and long division. No
//! operation panics; each documents how it saturates.

use std::cmp::Ordering;

/// An unsigned 256-bit integer (`hi · 2^128 + lo`); `Ord` is numeric order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct U256 {
    hi: u128,
    lo: u128,
}

const LOW: u128 = u64::MAX as u128;

impl U256 {
    /// 0.
    pub const ZERO: U256 = U256 { hi: 0, lo: 0 };
    /// 2^256 − 1.
    pub const MAX: U256 = U256 { hi: u128::MAX, lo: u128::MAX };

    /// `x` widened.
    #[inline]
    pub const fn from(x: u128) -> U256 {
        U256 { hi: 0, lo: x }
    }

    /// `hi · 2^128 + lo`.
    #[inline]
    pub const fn from_parts(hi: u128, lo: u128) -> U256 {
        U256 { hi, lo }
    }

    /// The high and low 128-bit halves.
    #[inline]
    pub const fn parts(self) -> (u128, u128) {
        (self.hi, self.lo)
    }

    /// The exact product `a · b`.
    #[inline]
    pub fn mul(a: u128, b: u128) -> U256 {
        if (a | b) >> 64 == 0 {
            return U256 { hi: 0, lo: a * b };
        }
        let (a1, a0) = (a >> 64, a & LOW);
        let (b1, b0) = (b >> 64, b & LOW);
        let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
        // Each term is < 2^64, so `mid` < 3 · 2^64.
        let mid = (p00 >> 64) + (p01 & LOW) + (p10 & LOW);
        U256 { hi: p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64), lo: (p00 & LOW) | ((mid & LOW) << 64) }
    }

    /// `self + o`, saturating at [`U256::MAX`].
    #[inline]
    pub fn saturating_add(self, o: U256) -> U256 {
        let (lo, carry) = self.lo.overflowing_add(o.lo);
        match self.hi.checked_add(o.hi).and_then(|h| h.checked_add(carry as u128)) {
            Some(hi) => U256 { hi, lo },
            None => U256::MAX,
        }
    }

    /// `self − o` modulo 2^256 (exact when `self ≥ o`).
    #[inline]
    pub fn wrapping_sub(self, o: U256) -> U256 {
        let (lo, borrow) = self.lo.overflowing_sub(o.lo);
        U256 { hi: self.hi.wrapping_sub(o.hi).wrapping_sub(borrow as u128), lo }
    }

    fn bit(self, i: u32) -> bool {
        if i >= 128 {
            (self.hi >> (i - 128)) & 1 == 1
        } else {
            (self.lo >> i) & 1 == 1
        }
    }

    fn bits(self) -> u32 {
        if self.hi != 0 {
            256 - self.hi.leading_zeros()
        } else {
            128 - self.lo.leading_zeros()
        }
    }

    /// `(self / d, self % d)`; division by zero gives `(MAX, 0)` rather than a panic.
    pub fn div_rem(self, d: U256) -> (U256, U256) {
        if d == U256::ZERO {
            return (U256::MAX, U256::ZERO);
        }
        if self.hi == 0 && d.hi == 0 {
            return (U256::from(self.lo / d.lo), U256::from(self.lo % d.lo));
        }
        if self < d {
            return (U256::ZERO, self);
        }
        if d.hi == 0 && self.hi < d.lo {
            let (q, r) = self.div_rem_fitting(d.lo);
            return (U256::from(q), U256::from(r));
        }
        let (mut q, mut r) = (U256::ZERO, U256::ZERO);
        for i in (0..self.bits()).rev() {
            let carry = r.hi >> 127 == 1;
            r = U256 { hi: (r.hi << 1) | (r.lo >> 127), lo: (r.lo << 1) | self.bit(i) as u128 };
            if carry || r >= d {
                r = r.wrapping_sub(d);
                if i >= 128 {
                    q.hi |= 1 << (i - 128);
                } else {
                    q.lo |= 1 << i;
                }
            }
        }
        (q, r)
    }

    /// `(self / d, self % d)` for a `u128` divisor `d > 0`, or `None` when
    /// the quotient does not fit in 128 bits (`hi ≥ d`).
    #[inline]
    pub fn div_rem_u128(self, d: u128) -> Option<(u128, u128)> {
        if self.hi >= d {
            return None;
        }
        if self.hi == 0 {
            return Some((self.lo / d, self.lo % d));
        }
        Some(self.div_rem_fitting(d))
    }

    /// Restoring long division, one bit at a time, for `0 < hi < d`
    /// (the quotient fits in 128 bits; the remainder stays below `d`).
    fn div_rem_fitting(self, d: u128) -> (u128, u128) {
        let (mut rem, mut quotient) = (self.hi, 0u128);
        for bit in (0..128).rev() {
            let carry = rem >> 127;
            rem = (rem << 1) | ((self.lo >> bit) & 1);
            if carry == 1 || rem >= d {
                rem = rem.wrapping_sub(d);
                quotient |= 1 << bit;
            }
        }
        (quotient, rem)
    }

    /// The value as `u128`, saturating.
    #[inline]
    pub fn saturating_u128(self) -> u128 {
        if self.hi != 0 {
            u128::MAX
        } else {
            self.lo
        }
    }

    /// `⌈self / d⌉` as `u128`, saturating (division by zero gives `u128::MAX`).
    pub fn div_ceil_u128(self, d: U256) -> u128 {
        let (quot, rem) = self.div_rem(d);
        quot.saturating_u128().saturating_add((rem != U256::ZERO) as u128)
    }
}

/// `a · b` compared with `c · d`, exactly.
#[inline]
pub fn cmp_products(a: u128, b: u128, c: u128, d: u128) -> Ordering {
    if (a | b | c | d) >> 64 == 0 {
        return (a * b).cmp(&(c * d)); // 64 × 64 bits: no overflow
    }
    U256::mul(a, b).cmp(&U256::mul(c, d))
}

/// `⌊a · b / d⌋` (or `⌈·⌉` with `round_up`), exact through a 256-bit
/// product, saturating at `u128::MAX`; `d = 0` is read as 1.
#[inline]
pub fn mul_div(a: u128, b: u128, d: u128, round_up: bool) -> u128 {
    let d = d.max(1);
    if let Some(p) = a.checked_mul(b) {
        return p / d + u128::from(round_up && p % d != 0);
    }
    match U256::mul(a, b).div_rem_u128(d) {
        Some((q, rem)) => q.saturating_add(u128::from(round_up && rem != 0)),
        None => u128::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `x · y` for a U256 and a u128, assuming no overflow.
    fn mul_by(x: U256, y: u128) -> U256 {
        let lo = U256::mul(x.lo, y);
        let hi = U256::mul(x.hi, y);
        U256 { hi: lo.hi.wrapping_add(hi.lo), lo: lo.lo }
    }

    #[test]
    fn products_carry() {
        let big = u128::MAX;
        assert_eq!(U256::mul(3, 5), U256::from(15));
        assert_eq!(U256::mul(big, 2).parts(), (1, big - 1));
        assert_eq!(U256::mul(big, big).parts(), (big - 1, 1));
        assert_eq!(U256::mul(1 << 64, 1 << 64).parts(), (1, 0));
        let (a, b) = (0x1234_5678_9abc_def0_1122_3344_5566_7788u128, 0xffee_ddcc_bbaa_9988_7766_5544_3322_1100u128);
        assert_eq!(U256::mul(a, b).lo, a.wrapping_mul(b));
        assert_eq!(cmp_products(big, 3, big, 2), Ordering::Greater);
        assert_eq!(cmp_products(6, 4, 3, 8), Ordering::Equal);
        assert_eq!(U256::MAX.saturating_add(U256::from(1)), U256::MAX);
        assert_eq!(U256::from_parts(1, 0).wrapping_sub(U256::from(1)).parts(), (0, big));
        assert_eq!(U256::from_parts(5, 7).wrapping_sub(U256::from_parts(2, 3)).parts(), (3, 4));
    }

    #[test]
    fn mul_div_rounds_and_saturates() {
        let big = 1u128 << 100;
        assert_eq!(mul_div(7, 3, 2, false), 10);
        assert_eq!(mul_div(7, 3, 2, true), 11);
        assert_eq!(mul_div(6, 5, 3, true), 10);
        assert_eq!(mul_div(big, big, big, false), big);
        assert_eq!(mul_div(big, (1 << 90) + 3, 1 << 90, false), big + 3 * (1 << 10));
        assert_eq!(mul_div(big + 1, big, big, true), big + 1);
        assert_eq!(mul_div(1 << 100, 1 << 100, 1 << 120, false), 1 << 80);
        assert_eq!(mul_div((1 << 100) + 1, 1 << 100, 1 << 120, true), (1 << 80) + 1);
        assert_eq!(mul_div(u128::MAX, u128::MAX, 1, false), u128::MAX);
        assert_eq!(mul_div(u128::MAX, u128::MAX, u128::MAX, false), u128::MAX);
        assert_eq!(mul_div(u128::MAX, 3, 6, false), u128::MAX / 2);
    }

    #[test]
    fn division_by_u128_is_exact() {
        assert_eq!(U256::from(17).div_rem_u128(5), Some((3, 2)));
        assert_eq!(U256::from_parts(1, 0).div_rem_u128(2), Some((1 << 127, 0)));
        assert_eq!(U256::from_parts(1, 0).div_rem_u128(1), None);
        let d = u128::MAX - 12345;
        let x = 0xdead_beef_u128 << 90;
        let (q, r) = U256::from_parts(d - 1, x).div_rem_u128(d).unwrap();
        assert_eq!(U256::mul(q, d).saturating_add(U256::from(r)), U256::from_parts(d - 1, x));
        assert!(r < d);
        assert_eq!(U256::from(7).div_ceil_u128(U256::from(2)), 4);
        assert_eq!(U256::from(7).div_ceil_u128(U256::ZERO), u128::MAX);
    }

    proptest! {
        #[test]
        fn mul_div_round_trip(a in any::<u128>(), b in 1..=u128::MAX, c in any::<u64>()) {
            let p = U256::mul(a, b).saturating_add(U256::from(c as u128 % b));
            let (q, r) = p.div_rem(U256::from(b));
            prop_assert_eq!(q, U256::from(a));
            prop_assert_eq!(r, U256::from(c as u128 % b));
            prop_assert_eq!(p.div_rem_u128(b), Some((a, c as u128 % b)));
            let (x, y) = (a >> 64, b >> 64);
            prop_assert_eq!(U256::mul(x, y), U256::from(x * y));
        }

        #[test]
        fn division_by_wide_divisor(a in any::<u128>(), b in any::<u128>(), c in 1..=u128::MAX, d in 1..=u128::MAX) {
            let num = U256::mul(a, b);
            let den = U256::mul(c, d);
            let (q, r) = num.div_rem(den);
            prop_assert!(r < den);
            if q.saturating_u128() != u128::MAX {
                prop_assert_eq!(mul_by(den, q.saturating_u128()).saturating_add(r), num);
            }
        }

        #[test]
        fn mul_div_matches_the_definition(a in any::<u128>(), b in any::<u128>(), d in 1..=u128::MAX, up in any::<bool>()) {
            let (q, r) = U256::mul(a, b).div_rem(U256::from(d));
            let want = q.saturating_u128().saturating_add(u128::from(up && r != U256::ZERO));
            prop_assert_eq!(mul_div(a, b, d, up), want);
        }
    }
}
