//! Fuzz target `crd_decode`: see `weft_fuzz::crd_decode` for the input format and the invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::run("crd_decode", data));
