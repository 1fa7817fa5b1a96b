//! # geoflash
//!
//! A flash-aware spatial indexing engine. Its API is three modules and the
//! names re-exported here:
//!
//! | | module |
//! |---|---|
//! | the front door: an index's settings checked once ([`IndexSpec`]), the [`Index`] and every structure behind [`SpatialIndex`], queries, devices | [`engine`] |
//! | geometry: points, rectangles, the Hilbert curve | [`geom`] |
//! | the counters every operation and device reports | [`metrics`] |
//! | the product defaults | [`defaults`] |
//!
//! The layers beneath (devices and the flash simulator, page codec, node
//! stores, trees, grid files; `docs/architecture.md` draws them) are the
//! crate's own and reach users only through these.
//!
//! Every fallible function returns [`Result`]; nothing that a user or a device
//! can feed makes the library panic.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

// The API: the front door, geometry and metrics.
pub mod defaults;
pub mod engine;
pub mod geom;
pub mod metrics;

// Beneath the front door, private: their public items reach users through
// `engine` and the re-exports below.
mod error;
mod page_id;
mod spatial;
#[cfg(test)]
mod spatial_tests;
mod staging;
mod units;

// The layers beneath, public only for the crate's own integration tests,
// benches, fuzz targets and doc examples, which test them one by one; not
// part of the API (hidden from the documentation), and no front end (the
// command line, the workbench, the Python package) imports them
// (`tests/front_door.rs` checks).
#[doc(hidden)]
pub mod cache;
#[doc(hidden)]
pub mod grid;
#[doc(hidden)]
pub mod index;
#[doc(hidden)]
pub mod index_dir;
#[doc(hidden)]
pub mod manifest;
#[doc(hidden)]
pub mod objects;
#[doc(hidden)]
pub mod page;
#[doc(hidden)]
pub mod reserve;
#[doc(hidden)]
pub mod storage;
#[doc(hidden)]
pub mod store;
#[doc(hidden)]
pub mod testenv;

pub use engine::{IndexSpec, KeyStyle, SpecError};
pub use error::{Error, Result};
pub use index_dir::{BatchDurability, Index, IndexOptions};
pub use spatial::SpatialIndex;
