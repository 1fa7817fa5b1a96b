//! The options of an index ([`IndexOptions`]): its structure
//! ([`StructureSpec`]), page size, node store ([`StoreSpec`]), device,
//! coordinate reference and domain, and their resolution into the verified
//! configuration the factory builds the index from.
use crate::config::{StoreSpec, StructureConfig, StructureSpec};
use crate::geom::Rect;
use crate::manifest::Crs;
use crate::storage::file::IoEngine;
use crate::storage::spec::DeviceSpec;
use crate::Result;

/// Everything needed to create an index. It serialises with the device as
/// its text (the workbench records the options in a configuration's key).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IndexOptions {
    /// The structure and its own parameters.
    pub structure: StructureSpec,
    /// Page (node) size in bytes.
    pub page_size: usize,
    /// The node store, its memory budget and its own parameters (a grid
    /// file and the FOR-tree take the plain store's budget for their own
    /// buffers).
    pub store: StoreSpec,
    /// The device, parsed once (its text form is `DeviceSpec`'s `Display`,
    /// what the manifest records).
    #[serde(serialize_with = "device_text")]
    pub device: DeviceSpec,
    /// Coordinate reference of the data.
    pub crs: Crs,
    /// The extent a Hilbert R-tree maps onto its curve (order 16), fixed at
    /// creation and recorded in the manifest; objects outside it are
    /// clamped to its border cells (correct, less well clustered).
    /// Required to create an empty Hilbert R-tree; a bulk load without it
    /// uses the extent of its items. An xBR+-tree and a grid file take it
    /// as their domain: every point must lie inside.
    pub hilbert_domain: Option<Rect>,
}

/// Serialises a device as its text.
fn device_text<S: serde::Serializer>(d: &DeviceSpec, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(d)
}

impl Default for IndexOptions {
    /// An R*-tree of 4 KiB pages on the plain store with 512 KiB, on the
    /// index directory's file with direct I/O.
    fn default() -> Self {
        IndexOptions {
            structure: StructureSpec::default(),
            page_size: 4096,
            store: StoreSpec::default(),
            // `file`: the index directory's own file, direct I/O.
            device: DeviceSpec::File {
                path: None,
                direct: true,
                engine: IoEngine::Auto,
                capacity: None,
            },
            crs: Crs::default(),
            hilbert_domain: None,
        }
    }
}

impl IndexOptions {
    /// The verified configuration of the structure these options
    /// describe (see [`StructureSpec::resolve`]).
    pub fn resolve(&self) -> Result<StructureConfig> {
        self.structure
            .resolve(self.page_size, self.hilbert_domain, &self.store)
    }

    /// Sets the structure from its name (`rtree`, `rstar`, `hilbert`,
    /// `fortree`, `xbr`, `grid`, `gffm`, `lbgrid`, `hgrid`) with that
    /// kind's defaults, keeping M and m where both kinds have them.
    pub fn set_kind(&mut self, name: &str) -> Result<()> {
        self.structure = self
            .structure
            .with_kind_of(StructureSpec::named(name)?);
        Ok(())
    }

    /// The structure's name as the manifest records it (`rstar`, `fortree`, `xbr`, ...).
    pub fn kind_name(&self) -> &'static str {
        self.structure.kind_name()
    }

    /// True for the structures that need a domain: a Hilbert R-tree (its
    /// curve's), an xBR+-tree and a grid file (every point inside).
    pub fn needs_domain(&self) -> bool {
        self.structure.needs_domain()
    }

    /// These options with, for a structure that needs a domain
    /// ([`needs_domain`](Self::needs_domain)) and has none, the extent of
    /// `items` as its domain (widened where it is flat, so the curve or the
    /// grid has an area to cover).
    pub fn with_domain_of<'a>(&self, items: impl IntoIterator<Item = &'a Rect>) -> IndexOptions {
        let mut o = self.clone();
        if !o.needs_domain() || o.hilbert_domain.is_some() {
            return o;
        }
        o.hilbert_domain = Rect::union_all(items).and_then(|e| e.with_area().ok());
        o
    }
}
