//! Test doubles shared by the allocators' tests: a [`Random`] that hands out chosen numbers.
//! Test-only; nothing in production uses it.

use std::collections::VecDeque;

use super::Random;

/// Hands out the queued numbers (mod n), then 0.
pub(crate) struct Seq(VecDeque<u64>);

impl Random for Seq {
    fn below(&mut self, n: u64) -> u64 {
        self.0.pop_front().unwrap_or(0) % n
    }
}

/// A [`Seq`] of `values`.
pub(crate) fn seq(values: &[u64]) -> Seq {
    Seq(values.iter().copied().collect())
}
