//! The front door: what the command line, the workbench and the Python
//! package go through to describe an index, so that a setting means the
//! same, and is refused with the same message, wherever it is given.
//!
//! [`IndexSpec`] takes an index's settings as `key = value` text (a flag, a
//! workload key, a keyword argument), checks every combination in one
//! place and lowers them to the [`IndexOptions`](crate::IndexOptions) an
//! [`Index`](crate::Index) is created from.
mod spec;
#[cfg(test)]
mod spec_tests;

pub use spec::{IndexSpec, KeyStyle, SpecError};
