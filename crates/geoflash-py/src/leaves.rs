//! The leaf nodes of the tree, for `rtree`'s `Index.leaves()`: each leaf's
//! page id, the record keys of its entries and its MBR (the union of its
//! entries' rectangles). A depth-first walk from the root through
//! [`NodeStore::get`], children in the order the node lists them, so the
//! leaves come out left to right; every node is read once.
use geoflash_engine::geom::Rect;
use geoflash_engine::store::NodeStore;
use geoflash_engine::Result;

/// One leaf: page id, record keys of its entries, MBR.
pub type Leaf = (u64, Vec<u64>, Rect);

/// Every leaf of the tree in `store` (none for an empty tree).
pub fn leaves<S: NodeStore + ?Sized>(store: &S) -> Result<Vec<Leaf>> {
    let mut out = Vec::new();
    let Some(root) = store.meta().root else {
        return Ok(out);
    };
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        let node = store.get(id)?;
        if node.level == 0 {
            // An empty root leaf (every entry deleted) has no MBR and no children.
            if let Some(mbr) = Rect::union_all(node.entries.iter().map(|e| &e.rect)) {
                out.push((id, node.entries.iter().map(|e| e.key).collect(), mbr));
            }
        } else {
            // Reversed, so that the first child is popped first.
            stack.extend(node.entries.iter().rev().map(|e| e.key));
        }
    }
    Ok(out)
}
