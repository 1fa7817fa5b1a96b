//! The product defaults: what a user of the command line or the Python
//! package gets without options, and the papers' settings they replace.
//!
//! Chosen by the peer benchmark (`make bench-peers`, `benchmarks/peers/`,
//! results in `docs/benchmarks.md`, "Peer benchmark"): at 200,000 uniform
//! rectangles an eFIND index on `file?direct=false` with 64 MiB (the budget
//! then; see [`buffer`] for what it is now) answered
//! 100 windows of 0.001 % on a reopened index in 1.5 ms cold and 0.14 ms
//! warm, against 10.5 and 11.4 ms for the papers' 512 KiB on direct I/O
//! (SQLite's R*Tree 5.1 / 3.5 ms, libspatialindex 1.9 / 1.5 ms in the same
//! run), and built by insertion in 9.8 s against 38.5 s. Reading through
//! the OS page cache is what SQLite and libspatialindex do; device writes stay counted
//! and the stores still sync what they acknowledge, so crash safety is the
//! same. The papers' settings remain pinned in the shipped seed workloads
//! (`workloads/*.toml` name their buffer and device) and are available as
//! [`PAPERS_BUFFER`] and [`PAPERS_DEVICE`].

/// How eFIND's read buffer is sized by default: adaptive, taking the part
/// of the memory budget the write buffer and its decoded views leave, and
/// answering a page with buffered modifications from its decoded view
/// without reading the stored version. The paper's fixed 20 % share, which
/// reads the stored version under every modified page, stays pinned in the
/// workbench's defaults (`read_buffer_mode = "fixed"`).
///
/// With the fixed share, commits of 1,000 moves into 10,000,000 boxes (a
/// 410 MB index, a 1 GiB budget) read 0.58 leaves a move from the device,
/// since a fifth of the budget does not hold the index; the adaptive read
/// buffer reads none and halves the commit's time there
/// (`docs/benchmarks.md`, "Per-commit cost as the index grows").
pub const READ_BUFFER_MODE: crate::store::efind::ReadBufferMode =
    crate::store::efind::ReadBufferMode::Adaptive;

/// The R*-tree's forced-reinsertion percentage for the front ends (the
/// command line, the Python package, [`IndexSpec`](crate::IndexSpec)):
/// 10 % of M, where Beckmann et al. use 30 %. The paper's 30 % stays the
/// library's [`TreeSpec`](crate::engine::TreeSpec) default and is pinned in the workbench's
/// defaults, so the seed workloads keep the papers' settings.
///
/// Forced reinsertion sends the removed entries back through ChooseSubtree
/// from the root, and at 30 % that is most of a build's work: 1,000,000
/// uniform boxes built by insertion in 3.67 s with 30 %, 2.30 s with 10 %
/// and 1.51 s with none (buildings: 3.81, 2.88 and 2.26 s). The tree 10 %
/// builds answers 1,000 windows of 0.001 %, 0.01 % and 0.1 % reading 1.8–3.1 %
/// more nodes than 30 %'s on uniform boxes and −1.0 to +3.4 % on
/// buildings, and 1,000 kNN (k = 10) 4.7 % and 9.8 % more
/// (`docs/benchmarks.md`, "Forced reinsertion: the product default").
pub const REINSERT_PERCENT: u8 = 10;

/// The smallest default memory budget of a store on disk: 256 MiB, the
/// default from session 23 to issue 47, whatever the machine.
///
/// At 256 MiB, building 1,000,000 rectangles by insertion (the command
/// line's `build`, durable when it returns) took 0.46× SQLite R*Tree's wall
/// time on uniform boxes and 0.43× on buildings in session order, against
/// 0.59× and 0.50× with 64 MiB in the same run, and wrote 93 MB instead of
/// 152 MB (uniform): 64 MiB does not hold a million-entry index (56 MB of
/// pages, more decoded), so its build flushes and logs page images
/// (`docs/benchmarks.md`, "The default memory budget").
pub const BUFFER_FLOOR: u64 = 256 << 20;
/// The largest default memory budget: 1 GiB (see [`buffer_for_ram`]).
///
/// The log of a store follows its budget (four times it per region, two
/// regions, `crate::store::log::auto_log_capacity`) in a sparse
/// `log.dat` of at most 16 GiB, which holds the log of a budget below
/// 2 GiB; and 1 GiB holds an index of about 4,000,000 rectangles built by
/// insertion without a flush (`docs/benchmarks.md`, "The default memory
/// budget follows the machine's memory").
pub const BUFFER_CAP: u64 = 1 << 30;
/// The default memory budget is this fraction of the machine's memory
/// (`1 / BUFFER_RAM_DIVISOR`), between [`BUFFER_FLOOR`] and [`BUFFER_CAP`].
pub const BUFFER_RAM_DIVISOR: u64 = 8;

/// The default memory budget of a store on disk for a machine with
/// `memory` bytes (`None`: not known): an eighth of it in whole MiB, at
/// least [`BUFFER_FLOOR`] and at most [`BUFFER_CAP`]; the floor when the
/// memory is not known. A machine of 2 GiB or less gets 256 MiB, one of
/// 8 GiB or more 1 GiB.
///
/// The budget is a ceiling, not an allocation: a store holds what it has
/// been given, so an index that fits in the floor behaves the same on
/// every machine, and the process stays within the budget plus a constant
/// (`docs/architecture.md`, "The memory budget bounds the process").
pub fn buffer_for_ram(memory: Option<u64>) -> u64 {
    match memory {
        None => BUFFER_FLOOR,
        Some(m) => (m / BUFFER_RAM_DIVISOR / MIB * MIB).clamp(BUFFER_FLOOR, BUFFER_CAP),
    }
}

const MIB: u64 = 1 << 20;

/// The memory this process may use, in bytes, if known: the machine's
/// `MemTotal` (`/proc/meminfo`), or the memory limit of the process's
/// control group when that is lower (`memory.max` of cgroup v2,
/// `memory.limit_in_bytes` of cgroup v1: a container sees the host's
/// `MemTotal`). `None` where neither can be read (not Linux).
pub fn machine_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text));
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .find_map(|text| text.trim().parse::<u64>().ok());
    match (total, limit) {
        (Some(t), Some(l)) => Some(t.min(l)),
        (t, l) => t.or(l),
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// A whole number of bytes as the size syntax the front ends parse: `GiB`
/// or `MiB` when exact, else bytes.
fn size_text(bytes: u64) -> String {
    match bytes {
        b if b > 0 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b > 0 && b % MIB == 0 => format!("{}MiB", b >> 20),
        b => b.to_string(),
    }
}

/// The default memory budget of a store on disk on this machine (`--buffer`,
/// Python `buffer=` for an index with a path): [`buffer_for_ram`] of
/// [`machine_memory`], read once per process, in the size syntax
/// (`1GiB`, `384MiB`).
pub fn buffer() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| size_text(buffer_bytes()))
}

/// [`buffer`] in bytes.
pub fn buffer_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| buffer_for_ram(machine_memory()))
}

/// The threads a front end shares a divisible batch among (windows, kNN
/// points, geometry decodes, a bulk load's pipeline): the processors this
/// process may use (`std::thread::available_parallelism`, which follows
/// the affinity mask and the control group's CPU quota), read once per
/// process, since the standard library reads the control group's files
/// at every call (about 20 system calls, 30 µs on Linux: more than a
/// small batch of windows costs); 1 where unknown.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

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
        for s in [buffer(), MEMORY_BUFFER, PAPERS_BUFFER] {
            assert!(crate::units::parse_size(s).unwrap() >= 512 * 1024, "{s}");
        }
        for d in [DEVICE, PAPERS_DEVICE] {
            assert!(d.starts_with("file"), "{d}");
        }
        assert_eq!(crate::units::parse_size(buffer()).unwrap(), buffer_bytes());
        assert!(buffer_bytes() > crate::units::parse_size(PAPERS_BUFFER).unwrap());
    }

    #[test]
    fn the_default_budget_is_an_eighth_of_the_memory_between_floor_and_cap() {
        const GIB: u64 = 1 << 30;
        for (memory, budget) in [
            (None, BUFFER_FLOOR),
            (Some(0), BUFFER_FLOOR),
            (Some(512 * MIB), BUFFER_FLOOR),
            (Some(2 * GIB), 256 * MIB),
            (Some(3 * GIB), 384 * MIB),
            // Whole MiB, rounded down.
            (Some(3 * GIB + 7 * MIB), 384 * MIB),
            (Some(6 * GIB), 768 * MIB),
            (Some(8 * GIB), GIB),
            (Some(24 * GIB), GIB),
            (Some(u64::MAX), BUFFER_CAP),
        ] {
            assert_eq!(buffer_for_ram(memory), budget, "{memory:?}");
            assert_eq!(
                crate::units::parse_size(&size_text(budget)).unwrap(),
                budget,
                "{memory:?}"
            );
        }
        assert_eq!(size_text(384 * MIB), "384MiB");
        assert_eq!(size_text(GIB), "1GiB");
        // The log that follows the largest budget fits a log file.
        let log = crate::store::log::auto_log_capacity(
            crate::store::log::LogFormat::default(),
            BUFFER_CAP as usize,
        );
        assert!(
            2 * log < crate::storage::file::DEFAULT_CAPACITY_BYTES,
            "{log}"
        );
    }

    #[test]
    fn mem_total_reads_meminfo() {
        let text = "MemTotal:       24525284 kB\nMemFree:        21000000 kB\n";
        assert_eq!(mem_total(text), Some(24_525_284 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(mem_total("MemTotal: 5 MB\n"), None);
    }
}

/// The README's Rust example, compiled and run as a doctest (the item exists
/// only when doctests are collected). `crates/geoflash-cli/tests/doc_examples.rs`
/// says which test runs each of the documents' other examples.
#[cfg(doctest)]
#[allow(rustdoc::invalid_codeblock_attributes)] // ```sh no-run: not Rust
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;
