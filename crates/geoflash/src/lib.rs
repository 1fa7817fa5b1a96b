//! # geoflash
//!
//! A flash-aware spatial indexing engine. The crate is layered as described in
//! `docs/architecture.md`:
//!
//! | layer | module |
//! |---|---|
//! | the front door: an index's settings, checked once | [`engine`] |
//! | geometry | [`geom`] |
//! | devices and the flash simulator | [`storage`] |
//! | page codec | [`page`] |
//! | metrics | [`metrics`] |
//!
//! Every fallible function returns [`Result`]; nothing that a user or a device
//! can feed makes the library panic.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cache;
pub mod defaults;
pub mod engine;
pub mod error;
pub mod geom;
pub mod grid;
pub mod index;
pub mod index_dir;
pub mod manifest;
pub mod metrics;
pub mod objects;
pub mod page;
pub mod page_id;
pub mod reserve;
pub mod spatial;
#[cfg(test)]
mod spatial_tests;
pub mod staging;
pub mod storage;
pub mod store;
pub mod testenv;
pub mod units;

pub use engine::{IndexSpec, KeyStyle, SpecError};
pub use error::{Error, Result};
pub use index_dir::{BatchDurability, Index, IndexOptions};
pub use spatial::SpatialIndex;
