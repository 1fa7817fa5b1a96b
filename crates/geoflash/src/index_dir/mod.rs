//! [`Index`]: an R-tree-family index opened from (or created in) an index
//! directory — the manifest, the advisory lock, the device, the node store
//! and the tree put together. This is the type the command line and the
//! Python package use; the layers below know nothing of directories.
//!
//! **The eFIND log.** An eFIND index on a `file` device keeps its log in
//! `log.dat` next to `pages.dat` (same page size and direct-I/O setting, the
//! log's pages from page 0). On every other device (`flashsim:`, `hddsim:`,
//! `mem:`, `hybrid:`) the log is a region of the same device: its last
//! `2 + 2 × ⌈log_capacity / (page_size − 40)⌉` pages, node pages being
//! allocated below it (see [`crate::store::efind`]). Opening an index for
//! writing runs restart (recovery); opening it read-only when its log holds
//! changes to recover is an error saying so. A simulated device's state
//! reaches `device.img` only at checkpoints, so after a killed process a
//! simulated index comes back as of its last checkpoint.
//!
//! An index on a `file` device lives in its directory (`pages.dat`) and can
//! be reopened; one on a `flashsim:` device keeps the simulator's state in
//! `device.img` (saved at every checkpoint), so a later command reopens the
//! same simulated NAND with its contents, mapping and wear (counters count
//! from each opening). One on a `hybrid:` device whose tiers are `file`
//! (`pages.dat` and `pages.fast.dat`) or `flashsim:` (`device.img` and
//! `device.fast.img`) keeps the device's placement map in `tiers.map`
//! (see [`crate::storage::tier_map`]) and reopens with every page on its
//! tier. Indexes on `mem:` and `hddsim:` devices (or hybrids with such a
//! tier) live only in their process; their directory keeps the manifest
//! for the record.
//!
//! The module is divided by concern: `options.rs` holds the options of an
//! index and their checks, `factory.rs` the file names and the opening of
//! the log and the node store, `devices.rs` the device created or reopened
//! from the spec, `images.rs` the simulators' images saved together at
//! checkpoints, `index.rs` the [`Index`] type
//! with its accessors, counters, checkpoint and close, `create.rs` and
//! `open.rs` how an index comes into being and is reopened,
//! `operations.rs` its updates and queries, and `objects.rs` the object
//! heap of exact geometries.
mod batch;
mod checkpoints;
#[cfg(test)]
mod checkpoints_tests;
mod create;
#[cfg(test)]
mod damage_tests;
mod devices;
mod factory;
mod failure;
#[cfg(test)]
mod failure_tests;
mod images;
mod index;
mod inspection;
mod journal;
mod locator;
mod objects;
#[cfg(test)]
mod objects_tests;
mod open;
mod operations;
mod options;
mod records;
#[cfg(test)]
mod records_tests;
#[cfg(test)]
mod records_review_tests;
#[cfg(test)]
mod heap_checkpoint_review_tests;
#[cfg(test)]
mod heap_manifest_tests;
mod spatial;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod update_by_id_tests;
#[cfg(test)]
mod update_review_tests;
mod verify;

pub use batch::{BatchDurability, OpenBatch};
#[cfg(test)]
pub use create::MIN_FILE_LOG_CAPACITY;
#[cfg(test)]
pub use devices::TIER_MAP_FILE;
#[cfg(feature = "internals")]
pub use factory::{LOG_FILE, PAGES_FILE};
#[cfg(test)]
pub use factory::{make_store_with_log, StoreOpen, DEVICE_IMAGE_FILE};
pub use index::Index;
pub use operations::WARM_BATCH;
pub use inspection::Inspection;
pub use options::IndexOptions;
pub use verify::Verified;
