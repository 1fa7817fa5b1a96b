//! The `Stats` record. Placeholder; being written.
