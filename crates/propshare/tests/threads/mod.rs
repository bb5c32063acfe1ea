//! What the threaded test hosts (`*_threaded.rs`) share: a thread body
//! that cannot leave the others waiting at a barrier, and seeded random
//! streams, one per thread.
#![allow(dead_code)] // each host uses its own part of it

use std::io::Write;

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Run `f`; if it panics, say why on the real stderr (the harness captures
/// the panic message, and would lose it) and abort the process: the other
/// threads would wait at the barrier for ever.
pub fn or_abort(f: impl FnOnce()) {
    if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let why = e.downcast_ref::<String>().map(String::as_str).or(e.downcast_ref::<&str>().copied());
        let _ = writeln!(std::io::stderr(), "a thread panicked: {}", why.unwrap_or("?"));
        std::process::abort();
    }
}

/// Random stream `stream` of run `seed`.
pub fn rng(seed: u64, stream: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&stream.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// A number below `n`.
pub fn below(r: &mut TestRng, n: u64) -> u64 {
    r.next_u64() % n
}
