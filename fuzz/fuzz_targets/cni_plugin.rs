//! Fuzz target `cni_plugin`: see `weft_fuzz::cni_plugin` for the input format and the invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::run("cni_plugin", data));
