//! Durations written by people: `"10ms"`, `"1.5s"`, `"250us"`, `"100ns"`,
//! `"2min"`, parsed exactly into integer nanoseconds.
//!
//! One parser for every host (scenario files, the command line, job files),
//! so a duration means the same everywhere. The rules:
//!
//! * a number (digits, optionally one `.` and more digits) followed by a unit
//!   `ns`, `us` (or `µs`), `ms`, `s` or `min`, with optional spaces between;
//! * a number without a unit is an error (`3` could mean 3 ns or 3 s), except
//!   `0`, which means the same in every unit;
//! * the value must be a whole number of nanoseconds (`1.5ns` is an error,
//!   never rounded) and fit in a `u64`; a sign is an error.

use crate::Time;

/// Why a duration did not parse. Messages quote the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Empty or only spaces.
    #[error("empty duration: write a number and a unit, e.g. \"10ms\"")]
    Empty,
    /// Starts with `-` (or `+`).
    #[error("duration {0:?} must not be negative or signed: write e.g. \"5ms\"")]
    Signed(String),
    /// A number with no unit, other than 0.
    #[error("duration {0:?} needs a unit (ns, us, ms, s, min), e.g. \"{0}ms\"")]
    NoUnit(String),
    /// A unit this parser does not know.
    #[error("unknown time unit {unit:?} in {input:?} (use ns, us, ms, s, min)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// No digits, or a malformed number.
    #[error("bad number in duration {0:?}: write e.g. \"10ms\" or \"2.5s\"")]
    BadNumber(String),
    /// Digits below one nanosecond.
    #[error("duration {0:?} is finer than 1 ns")]
    SubNanosecond(String),
    /// More than `u64::MAX` ns (about 584 years).
    #[error("duration {0:?} is too long (at most about 584 years)")]
    TooLong(String),
}

/// Parse a duration with a unit into ns (module docs give the rules).
pub fn parse_duration(input: &str) -> Result<Time, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s.starts_with(['-', '+']) {
        return Err(DurationError::Signed(s.to_string()));
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    let scale: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "" if num.bytes().all(|b| b == b'0' || b == b'.') && num.contains('0') => return Ok(0),
        "" => return Err(DurationError::NoUnit(s.to_string())),
        u => return Err(DurationError::UnknownUnit { unit: u.to_string(), input: s.to_string() }),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(DurationError::BadNumber(s.to_string()));
    }
    let too_long = || DurationError::TooLong(s.to_string());
    let int: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| too_long())? };
    let mut ns = int.checked_mul(scale).ok_or_else(too_long)?;
    let mut place = scale;
    for d in frac.bytes().map(|b| u64::from(b - b'0')) {
        if place == 1 {
            if d != 0 {
                return Err(DurationError::SubNanosecond(s.to_string()));
            }
            continue;
        }
        place /= 10;
        ns = ns.checked_add(d * place).ok_or_else(too_long)?;
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_fractions_are_exact() {
        assert_eq!(parse_duration("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration(" 2.5s "), Ok(2_500_000_000));
        assert_eq!(parse_duration("250 us"), Ok(250_000));
        assert_eq!(parse_duration("250µs"), Ok(250_000));
        assert_eq!(parse_duration("100ns"), Ok(100));
        assert_eq!(parse_duration("2min"), Ok(120_000_000_000));
        assert_eq!(parse_duration(".5ms"), Ok(500_000));
        assert_eq!(parse_duration("1.000000000s"), Ok(1_000_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("0.0"), Ok(0));
        assert_eq!(parse_duration("18446744073709551615ns"), Ok(u64::MAX));
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert_eq!(parse_duration("3"), Err(DurationError::NoUnit("3".into())));
        assert_eq!(parse_duration("-5ms"), Err(DurationError::Signed("-5ms".into())));
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(parse_duration("10 parsecs"), Err(DurationError::UnknownUnit { .. })));
        assert!(matches!(parse_duration("ms"), Err(DurationError::BadNumber(_))));
        assert!(matches!(parse_duration("1.2.3ms"), Err(DurationError::BadNumber(_))));
        assert_eq!(parse_duration("1.5ns"), Err(DurationError::SubNanosecond("1.5ns".into())));
        assert_eq!(
            parse_duration("18446744073709551616ns"),
            Err(DurationError::TooLong("18446744073709551616ns".into()))
        );
        assert!(matches!(parse_duration("1000000000000min"), Err(DurationError::TooLong(_))));
        let msg = parse_duration("3").unwrap_err().to_string();
        assert!(msg.contains("needs a unit") && msg.contains("\"3ms\""), "{msg}");
    }
}
