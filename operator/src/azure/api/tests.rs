//! Wire-level tests of the ARM client against a local server.
