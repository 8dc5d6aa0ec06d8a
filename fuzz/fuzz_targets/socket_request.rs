//! Fuzz target `socket_request`: see `weft_fuzz::socket_request` for the input format and the invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::run("socket_request", data));
