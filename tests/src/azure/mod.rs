//! Placeholder: the ARM + IMDS emulator.
