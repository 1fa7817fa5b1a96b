//! The product defaults: what a user of the command line or the Python
//! package gets without options, and the papers' settings they replace.
//!
//! Chosen by the peer benchmark (`make bench-peers`, `benchmarks/peers/`,
//! results in `docs/benchmarks.md`, "Peer benchmark"): at 200,000 uniform
//! rectangles an eFIND index on `file?direct=false` with 64 MiB (the budget
//! then; see [`BUFFER`] for why it is 256 MiB now) answered
//! 100 windows of 0.001 % on a reopened index in 1.5 ms cold and 0.14 ms
//! warm, against 10.5 and 11.4 ms for the papers' 512 KiB on direct I/O
//! (SQLite's R*Tree 5.1 / 3.5 ms, libspatialindex 1.9 / 1.5 ms in the same
//! run), and built by insertion in 9.8 s against 38.5 s. Reading through
//! the OS page cache is what SQLite and libspatialindex do; device writes stay counted
//! and the stores still sync what they acknowledge, so crash safety is the
//! same. The papers' settings remain pinned in the shipped seed workloads
//! (`workloads/*.toml` name their buffer and device) and are available as
//! [`PAPERS_BUFFER`] and [`PAPERS_DEVICE`].

/// Memory budget of a store on disk (`--buffer`, Python `buffer=`): a
/// ceiling, not an allocation (a store holds what it has been given).
///
/// 256 MiB since session 23: building 1,000,000 rectangles by insertion
/// (the command line's `build`, durable when it returns) took 0.46× SQLite
/// R*Tree's wall time on uniform boxes and 0.43× on buildings in session
/// order, against 0.59× and 0.50× with 64 MiB in the same run, and wrote
/// 93 MB instead of 152 MB (uniform): 64 MiB does not hold a million-entry
/// index (56 MB of pages, more decoded), so its build flushes and logs
/// page images (`docs/benchmarks.md`, "The default memory budget").
pub const BUFFER: &str = "256MiB";
/// Device of an index directory: its `pages.dat` read and written through
/// the OS page cache (`--device`, Python `device=`).
pub const DEVICE: &str = "file?direct=false";
/// Store of an index directory: eFIND, crash-safe with its log.
pub const STORE: &str = "efind";
/// Store of an index that lives in one process (Python `Index()` without a
/// path): the memory store, which keeps each node once, decoded, with no
/// device, log or cache (issue 47, item 4). A front end applies it where it
/// applies: on `mem:`, given no budget, buffer policy or placement (the
/// plain store takes those), and not for the FOR-tree or the grid files.
pub const MEMORY_STORE: &str = "memory";
/// Memory budget of an index in one process on the plain store (given a
/// device other than `mem:`, or `store="plain"`): decoded nodes kept up to this.
pub const MEMORY_BUFFER: &str = "1GiB";
/// Device of an index in one process: memory.
pub const MEMORY_DEVICE: &str = "mem:";
/// Checkpoints by time of a store with a log (`--checkpoint-interval`,
/// Python `checkpoint_interval=`): a commit or group commit this long
/// after the index's last checkpoint checkpoints, so that what a crash
/// leaves to replay is bounded by time as well as by the log's capacity
/// (`docs/reliability.md`, "Recovery time"). Five minutes, PostgreSQL's
/// `checkpoint_timeout`: a checkpoint writes every dirty node of the
/// buffer, which at the default budget is at most 256 MiB, a few seconds
/// once per five minutes. The workbench pins it off (the papers have none).
pub const CHECKPOINT_INTERVAL: &str = "5min";
/// The papers' memory budget (eFIND, FAST and the plain baseline: 512 KiB).
pub const PAPERS_BUFFER: &str = "512KiB";
/// The papers' device: the index directory's own file with direct I/O.
pub const PAPERS_DEVICE: &str = "file";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        for s in [BUFFER, MEMORY_BUFFER, PAPERS_BUFFER] {
            assert!(crate::units::parse_size(s).unwrap() >= 512 * 1024, "{s}");
        }
        for d in [DEVICE, PAPERS_DEVICE] {
            assert!(d.starts_with("file"), "{d}");
        }
        assert!(
            crate::units::parse_size(BUFFER).unwrap()
                > crate::units::parse_size(PAPERS_BUFFER).unwrap()
        );
    }
}

/// The README's Rust example, compiled and run as a doctest (the item exists
/// only when doctests are collected). `crates/geoflash-cli/tests/doc_examples.rs`
/// says which test runs each of the documents' other examples.
#[cfg(doctest)]
#[allow(rustdoc::invalid_codeblock_attributes)] // ```sh no-run: not Rust
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;
