//! Exact geometries of an [`Index`]: its object heap (`objects.dat`),
//! opened with the index or created on first use; objects inserted and
//! deleted with their MBRs; range queries refined on the geometries.
use std::path::Path;

use super::options::IndexOptions;
use super::Index;
use crate::geom::Rect;
use crate::index::query::{Predicate, QueryResult};
use crate::index::BulkMethod;
use crate::manifest::Access;
use crate::metrics::Phase;
use crate::{Error, Result};

/// The object heap of the index in `dir`, if it has one.
pub(super) fn open_objects(dir: &Path, access: Access) -> Result<Option<crate::objects::Heap>> {
    let path = dir.join(crate::objects::OBJECTS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    crate::objects::Heap::open(&path, access == Access::Read).map(Some)
}

/// Exact geometries: the object heap and refined queries.
impl Index {
    /// A new index in `dir` holding `objects`: their MBRs bulk-loaded into
    /// the tree as [`Index::bulk_load`] does, their geometries in the heap.
    pub fn bulk_load_objects(
        dir: &Path,
        opts: &IndexOptions,
        objects: &[(u64, crate::objects::Geometry)],
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        let items = objects
            .iter()
            .map(|(id, g)| {
                crate::objects::geometry::bounding_rect(g)
                    .map(|r| (*id, r))
                    .map_err(|e| Error::invalid(format!("object {id}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        opts.structure.check_bulk_load()?;
        Index::staged(dir, opts, |staging| {
            let mut index = Index::bulk_load_at(Some(staging), None, opts, items, method, fill)?;
            let heap = index.objects_mut()?;
            for (id, g) in objects {
                heap.put(*id, &[], g)?;
            }
            Ok((index, ()))
        })
        .map(|(index, ())| index)
    }

    /// The object heap, if the index has one.
    pub fn objects(&self) -> Option<&crate::objects::Heap> {
        self.objects.as_ref()
    }

    /// The object heap, created in the index directory when missing. An
    /// opened index already holds its heap if it has one, so a heap file
    /// found here is a leftover (none in a new staging directory): it is
    /// replaced.
    fn objects_mut(&mut self) -> Result<&mut crate::objects::Heap> {
        self.writable_by_key()?;
        let heap = match self.objects.take() {
            Some(h) => h,
            None => {
                let dir = self.dir.as_deref().ok_or_else(|| {
                    Error::invalid("an object heap needs an index directory; this index has none")
                })?;
                let path = dir.join(crate::objects::OBJECTS_FILE);
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|source| Error::Io {
                        path: path.clone(),
                        page: None,
                        source,
                    })?;
                }
                crate::objects::Heap::create(&path)?
            }
        };
        Ok(self.objects.insert(heap))
    }

    /// Inserts object `id` with its exact geometry: the WKB goes to the
    /// object heap (created on first use), the MBR into the tree. An error
    /// if `id` is already in the heap; nothing changes on an error.
    pub fn insert_object(&mut self, id: u64, geometry: &crate::objects::Geometry) -> Result<()> {
        let rect = crate::objects::geometry::bounding_rect(geometry)
            .map_err(|e| Error::invalid(format!("object {id}: {e}")))?;
        if self.objects_mut()?.contains(id) {
            return Err(Error::invalid(format!(
                "object {id} is already in the object heap; delete it first"
            )));
        }
        let watch = self.watch();
        let done = self.tree.insert(id, rect);
        self.note(watch, Phase::Index);
        self.locator.track(&done, |m| {
            m.insert(id, rect);
        });
        done?;
        if let Err(e) = self.objects_mut().and_then(|h| h.put(id, &[], geometry)) {
            let _ = self.tree.delete(id, rect);
            self.locator.forget();
            return Err(e);
        }
        Ok(())
    }

    /// Deletes object `id` from the tree and the object heap.
    pub fn delete_object(&mut self, id: u64) -> Result<()> {
        let heap = self.objects_mut()?;
        let g = heap
            .get(id)?
            .ok_or_else(|| Error::invalid(format!("object {id} is not in the object heap")))?;
        let rect = crate::objects::geometry::bounding_rect(&g)?;
        let watch = self.watch();
        let done = self.tree.delete(id, rect);
        self.note(watch, Phase::Index);
        self.locator.track(&done, |m| {
            m.remove(&id);
        });
        done?;
        self.objects_mut()?.delete(id)
    }

    /// Range query with refinement: the filter step on MBRs, then the exact
    /// geometries from the object heap (`crate::index::refine::refine`).
    /// `stats.candidates` counts the filter step's answers, `stats.results`
    /// the refined ones. An error if the index has no object heap.
    pub fn query_refined(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let heap = self.objects.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "the index{} has no object heap ({}): build it from a file with geometries (GeoJSON) to use refinement",
                self.dir.as_deref().map(|d| format!(" in {}", d.display())).unwrap_or_default(),
                crate::objects::OBJECTS_FILE
            ))
        })?;
        let filtered = self.query(window, predicate)?;
        let watch = self.watch();
        let refined = crate::index::refine::refine(filtered, heap, window, predicate);
        self.note(watch, Phase::Refinement);
        refined
    }
}
