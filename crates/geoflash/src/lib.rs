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
#![deny(unnameable_types)]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

// The API: the front door, geometry and metrics.
/// `PartialEq`, `Eq`, `PartialOrd` and `Ord` for `$t` from one total order:
/// `ordered_by!(T, |a, b| a.x.cmp(&b.x))` (heap items, sort keys).
macro_rules! ordered_by {
    ($t:ty, |$a:ident, $b:ident| $cmp:expr) => {
        impl PartialEq for $t {
            #[inline]
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == std::cmp::Ordering::Equal
            }
        }
        impl Eq for $t {}
        impl PartialOrd for $t {
            #[inline]
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for $t {
            #[inline]
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                let ($a, $b) = (self, other);
                $cmp
            }
        }
    };
}

/// Adds counters field by field, saturating:
/// `add_counters!(into, Type { a, b } = from)` destructures `from` (a
/// `Type`) and adds each named field to the field of the same name of
/// `into`. Without a trailing `..` every field must be named, so a counter
/// added to `Type` fails to compile until it is summed; with `..` the
/// fields left out are the caller's to combine.
macro_rules! add_counters {
    ($into:expr, $t:ident { $($f:ident),+ $(,)? } = $from:expr) => {{
        let $t { $($f),+ } = $from;
        let into = $into;
        $(into.$f = into.$f.saturating_add($f);)+
    }};
    ($into:expr, $t:ident { $($f:ident),+ , .. } = $from:expr) => {{
        let $t { $($f),+ , .. } = $from;
        let into = $into;
        $(into.$f = into.$f.saturating_add($f);)+
    }};
}

/// Test functions that each run `$run` on one argument:
/// `tests_for!(run: name_a => arg_a, name_b => arg_b)` declares
/// `#[test] fn name_a() { run(arg_a) }` and so on (one test per case, as
/// written by hand, without the copies).
#[cfg(test)]
macro_rules! tests_for {
    ($run:ident: $($name:ident => $arg:expr),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $run($arg);
            }
        )+
    };
}

/// Declares one item (a type, a trait, a function or a method) public with
/// the `internals` feature and visible in the crate only without it: for the
/// layers' items that the crate's integration tests, benches or fuzz targets
/// use but that no front door signature shows, so that nothing a user can
/// reach names a type the user cannot name.
macro_rules! internal {
    ($(#[$meta:meta])* pub $($item:tt)*) => {
        #[cfg(feature = "internals")]
        $(#[$meta])*
        pub $($item)*
        #[cfg(not(feature = "internals"))]
        $(#[$meta])*
        pub(crate) $($item)*
    };
}

pub mod defaults;
pub mod engine;
pub mod geom;
pub mod metrics;
/// Test support shared by the test suites of every geoflash crate (case
/// counts from the environment, missing prerequisites under CI): with the
/// `test-support` feature only, as the crate's own tests and the other
/// crates' test builds turn on; no front end uses it.
#[cfg(any(test, feature = "test-support"))]
pub mod testenv;

// Beneath the front door, private: their public items reach users through
// `engine` and the re-exports below.
mod error;
mod parity;
mod spatial;
#[cfg(test)]
mod spatial_tests;
mod staging;
mod units;

/// Declares the layers beneath the API: private, or public (and hidden
/// from the documentation) with the `internals` feature, which only the
/// crate's own integration tests, benches and fuzz targets turn on to test
/// them one by one. No front end (the command line, the workbench, the
/// Python package) imports them (`tests/front_door.rs` checks). Nothing
/// hides dead code in them: an item only tests use is `#[cfg(test)]`, one
/// the integration tests, benches or fuzz targets use is
/// `#[cfg(feature = "internals")]`.
macro_rules! layers {
    ($($name:ident),+ $(,)?) => {
        $(
            #[cfg(feature = "internals")]
            #[doc(hidden)]
            pub mod $name;
            #[cfg(not(feature = "internals"))]
            mod $name;
        )+
    };
}

layers!(
    cache, config, grid, index, index_dir, manifest, objects, page, page_id, records, storage,
    store,
);

pub use engine::{IndexSpec, KeyStyle, Setting, SpecError};
pub use error::{Error, ErrorKind, Result};
pub use index_dir::{BatchDurability, Index, IndexOptions, WARM_BATCH};
pub use spatial::{Sought, SpatialIndex};
