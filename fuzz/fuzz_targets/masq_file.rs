//! Fuzz target `masq_file`: see `weft_fuzz::masq_file` for the input format and the invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::run("masq_file", data));
