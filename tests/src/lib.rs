//! weft integration test harness.
