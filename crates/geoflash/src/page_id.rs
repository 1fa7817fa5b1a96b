//! The page identifier every layer shares: devices address pages by it,
//! stores hand it out for nodes, and index algorithms keep it in their
//! entries without knowing which device is below (DESIGN.md's layering).

/// Number of a page on a device (page 0 is the first).
pub type PageId = u64;
