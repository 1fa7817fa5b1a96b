//! What eFIND and FAST share as stores with a log: made on a device with a
//! log placement, reopened with restart, or opened read-only. Code generic
//! over the two (the index directory's store factory, the stores' shared
//! tests) goes through [`LoggedStore::opened`].
use std::sync::Arc;

use super::log::{LogPlacement, RestartReport};
use super::placement::Placement;
use super::NodeStore;
use crate::storage::PageDevice;
use crate::Result;

/// A device, as the stores take it.
type Dev = Arc<dyn PageDevice>;

/// How a store is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOpen {
    /// Format the device as a new, empty store.
    Create,
    /// Open for writing (stores with a log run restart).
    Write,
    /// Open for reading only (a log with changes to replay is replayed in memory).
    Read,
}

impl StoreOpen {
    /// [`Create`](Self::Create) when `fresh`, else [`Write`](Self::Write).
    #[cfg(test)]
    pub fn create_or_write(fresh: bool) -> Self {
        if fresh {
            StoreOpen::Create
        } else {
            StoreOpen::Write
        }
    }
}

/// A node store with a log (eFIND, FAST).
pub trait LoggedStore: NodeStore + Sized + 'static {
    /// The store's configuration.
    type Config;

    /// Formats `device` as an empty store with its log at `log`.
    fn create(device: Dev, log: LogPlacement, config: Self::Config) -> Result<Self>;

    /// Opens a store for writing, running restart with `placement` in force.
    fn open_with_placement(
        device: Dev,
        log: LogPlacement,
        config: Self::Config,
        placement: Placement,
    ) -> Result<Self>;

    /// Opens a store for reading only (a log with changes to replay is replayed in memory, the files untouched).
    fn open_read_only(device: Dev, log: LogPlacement, config: Self::Config) -> Result<Self>;

    /// What the restart of the last open did (none after a create).
    fn restart_report(&self) -> Option<&RestartReport>;

    /// Hints every node written from now on to the tier `placement` gives
    /// its level.
    fn with_placement(self, placement: Placement) -> Self;

    /// The store as `how` obtains it, with `placement` in force.
    fn opened(
        how: StoreOpen,
        device: Dev,
        log: LogPlacement,
        config: Self::Config,
        placement: Placement,
    ) -> Result<Self> {
        let store = match how {
            StoreOpen::Create => <Self as LoggedStore>::create(device, log, config)?,
            StoreOpen::Write => {
                <Self as LoggedStore>::open_with_placement(device, log, config, placement)?
            }
            StoreOpen::Read => <Self as LoggedStore>::open_read_only(device, log, config)?,
        };
        Ok(<Self as LoggedStore>::with_placement(store, placement))
    }
}

/// Implements [`LoggedStore`] by the store's inherent methods of the same names.
macro_rules! logged_store {
    ($store:ty, $config:ty) => {
        impl LoggedStore for $store {
            type Config = $config;

            fn create(d: Dev, l: LogPlacement, c: $config) -> Result<Self> {
                <$store>::create(d, l, c)
            }

            fn open_with_placement(
                d: Dev,
                l: LogPlacement,
                c: $config,
                p: Placement,
            ) -> Result<Self> {
                <$store>::open_with_placement(d, l, c, p)
            }

            fn open_read_only(d: Dev, l: LogPlacement, c: $config) -> Result<Self> {
                <$store>::open_read_only(d, l, c)
            }

            fn restart_report(&self) -> Option<&RestartReport> {
                <$store>::restart_report(self)
            }

            fn with_placement(self, placement: Placement) -> Self {
                <$store>::with_placement(self, placement)
            }
        }
    };
}

logged_store!(super::efind::EfindStore, super::efind::EfindConfig);
logged_store!(super::fast::FastStore, super::fast::FastConfig);
