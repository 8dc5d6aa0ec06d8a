//! Placeholder (filled in by the Azure work).
