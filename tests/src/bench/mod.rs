//! Benchmarks behind `cargo xtask bench <target>`. Each prints its numbers next to a baseline
//! measured in the same run, as ratios; none asserts on time.

pub mod alloc;
pub mod ipam;
pub mod masq;
pub mod net;
pub mod prog;
pub mod runtime;
