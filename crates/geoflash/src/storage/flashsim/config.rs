//! Configuration of the flash simulator: NAND geometry, FTL parameters,
//! latencies, the presets and the `key=value` overrides of device specs.
//!
//! A device spec `flashsim:preset=seed-tc58&gc=cost-benefit&op=0.07` starts
//! from the preset and applies the other keys in order
//! ([`FlashSimConfig::from_params`]). Keys ([`CONFIG_KEYS`]):
//!
//! | key (aliases) | value |
//! |---|---|
//! | `preset` | `seed-tc58`, `fast-paper`, `nvme`, `p3700`, `xpoint` |
//! | `capacity` | raw physical capacity, a size (`512MiB`) |
//! | `blocks` | physical blocks; sets `capacity` from the page size and pages per block given before it |
//! | `page_size` (`flash_page_size`) | flash page, a size (`2KiB`) |
//! | `pages_per_block` (`ppb`) | pages per block |
//! | `channels`, `dies` (`dies_per_channel`), `planes` (`planes_per_die`) | parallel units |
//! | `op` (`over_provisioning`) | fraction of physical pages hidden, `[0, 1)` |
//! | `gc` (`gc_policy`) | `greedy` or `cost-benefit` |
//! | `gc_threshold` | free blocks per plane below which GC runs (≥ 2) |
//! | `wl_threshold` (`wear_leveling_threshold`) | erase-count spread triggering static wear levelling; 0 = off |
//! | `erase_limit` | erases per block before retirement |
//! | `read_us`, `program_us`, `erase_us` | latencies in µs (decimals allowed) |
//! | `read_ns`, `program_ns`, `erase_ns` | the same in ns |
//! | `transfer_ns_per_byte` | channel transfer time, ns per byte |
//! | `ftl` | `page` (the default page-mapping FTL) or `flashdbsim` (the Flash-DBSim compatibility mode, see `flashdbsim`) |
use serde::{Deserialize, Serialize};

use crate::units::parse_size;
use crate::{Error, Result};

/// How garbage collection picks the block to reclaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// The full block with the most invalid pages (fewest valid pages to copy).
    Greedy,
    /// The full block maximising `(1 − u) / 2u × age` (Rosenblum and Ousterhout's
    /// LFS cleaner; Kawaguchi et al. for flash), where `u` is the fraction of
    /// valid pages and `age` the number of page programs since the block was
    /// last written to.
    CostBenefit,
}

impl GcPolicy {
    /// The name used in device specs (`greedy`, `cost-benefit`).
    pub fn name(self) -> &'static str {
        match self {
            GcPolicy::Greedy => "greedy",
            GcPolicy::CostBenefit => "cost-benefit",
        }
    }
}

/// Which flash translation layer the simulator runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FtlMode {
    /// The page-mapping FTL with over-provisioning, GC below a free-block
    /// threshold, static wear levelling and parallel timing (module `ftl`).
    #[default]
    Page,
    /// The Flash-DBSim compatibility mode (FTL01 and its NAND device): one
    /// reserved block, GC only when no free page is left, latencies summed
    /// without parallelism (module `flashdbsim`). Ignores `op`, `gc`,
    /// `gc_threshold` and the parallel geometry.
    FlashDbSim,
}

impl FtlMode {
    /// The name used in device specs (`page`, `flashdbsim`).
    pub fn name(self) -> &'static str {
        match self {
            FtlMode::Page => "page",
            FtlMode::FlashDbSim => "flashdbsim",
        }
    }
}

/// Every parameter of a simulated NAND device.
///
/// Physical layout: `capacity / (flash_page_size × pages_per_block)` blocks,
/// spread over `channels × dies_per_channel × planes_per_die` parallel units
/// (planes). Block `b` lives on plane `b mod planes`; plane `u` hangs off
/// channel `u mod channels`, so consecutive planes sit on different channels.
///
/// Logical (host-visible) space: `floor(physical pages × (1 − over_provisioning))`
/// flash pages, the rest is spare space for garbage collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlashSimConfig {
    /// Name of the preset this configuration started from (informative only).
    pub preset: String,
    /// Raw physical capacity in bytes, spare area included; rounded down to whole blocks.
    pub capacity: u64,
    /// Flash page size in bytes (the NAND read/program unit): a power of two from 512 to 65536.
    pub flash_page_size: usize,
    /// Flash pages per erase block (count, ≥ 2).
    pub pages_per_block: u32,
    /// Independent channels (buses) between controller and NAND (count, ≥ 1).
    pub channels: u32,
    /// Dies (chips) per channel (count, ≥ 1). Dies of a channel share its bus.
    pub dies_per_channel: u32,
    /// Planes per die (count, ≥ 1). Modelled as independent array units
    /// (an idealised multi-plane operation).
    pub planes_per_die: u32,
    /// Fraction of the physical pages hidden from the host (spare area), in `[0, 1)`.
    pub over_provisioning: f64,
    /// Victim selection of the garbage collector.
    pub gc_policy: GcPolicy,
    /// Garbage collection runs in a plane when its free blocks fall below this
    /// count (blocks, ≥ 2; one free block per plane is always kept for GC itself).
    pub gc_threshold: u32,
    /// Static wear levelling: when the highest and lowest erase counts of the
    /// good blocks differ by more than this many erases, the data of a least-worn
    /// block is migrated so that the block returns to use. 0 disables it.
    pub wear_leveling_threshold: u32,
    /// Erases a block endures (count, ≥ 1); a block reaching it is retired.
    pub erase_limit: u32,
    /// Array read latency of one flash page, in nanoseconds.
    pub read_ns: u64,
    /// Array program latency of one flash page, in nanoseconds.
    pub program_ns: u64,
    /// Erase latency of one block, in nanoseconds.
    pub erase_ns: u64,
    /// Channel transfer time in nanoseconds per byte (0 = not modelled). In
    /// `ftl=flashdbsim` mode, Flash-DBSim's serial access time per byte of a read.
    pub transfer_ns_per_byte: f64,
    /// The flash translation layer (`page` unless the spec says `ftl=flashdbsim`).
    #[serde(default)]
    pub ftl: FtlMode,
}

/// The keys accepted by [`FlashSimConfig::set`], with what each sets.
pub const CONFIG_KEYS: &[(&str, &str)] = &[
    ("preset", "start from a preset: seed-tc58, fast-paper, nvme, p3700, xpoint (replaces every field)"),
    ("capacity", "raw physical capacity, a size such as 512MiB"),
    ("blocks", "number of physical blocks (sets capacity from the current page size and pages per block)"),
    ("page_size", "flash page size, a size such as 2KiB (alias flash_page_size)"),
    ("pages_per_block", "flash pages per block (alias ppb)"),
    ("channels", "number of channels"),
    ("dies", "dies per channel (alias dies_per_channel)"),
    ("planes", "planes per die (alias planes_per_die)"),
    ("op", "over-provisioning fraction in [0, 1), e.g. 0.07 (alias over_provisioning)"),
    ("gc", "garbage collection policy: greedy or cost-benefit (alias gc_policy)"),
    ("gc_threshold", "free blocks per plane below which GC runs"),
    ("wl_threshold", "erase-count spread that triggers static wear levelling, 0 = off (alias wear_leveling_threshold)"),
    ("erase_limit", "erases a block endures before it is retired"),
    ("read_us", "page read latency in microseconds (or read_ns in nanoseconds)"),
    ("program_us", "page program latency in microseconds (or program_ns)"),
    ("erase_us", "block erase latency in microseconds (or erase_ns)"),
    ("transfer_ns_per_byte", "channel transfer time in nanoseconds per byte"),
    ("ftl", "flash translation layer: page (default) or flashdbsim (Flash-DBSim compatibility)"),
];

/// Names of the presets.
pub const PRESETS: &[&str] = &["seed-tc58", "fast-paper", "nvme", "p3700", "xpoint"];

/// The largest latency of one operation, in nanoseconds (10^12 µs, the
/// bound of the `_us` keys; the `_ns` keys and the transfer time share it).
pub const MAX_LATENCY_NS: u64 = 1_000_000_000_000_000;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

impl Default for FlashSimConfig {
    /// The `seed-tc58` preset.
    fn default() -> Self {
        Self::seed_tc58()
    }
}

impl FlashSimConfig {
    /// The device of the flash-simulator paper (Carniel et al., *Analyzing the
    /// Performance of Spatial Indices on Flash Memories using a Flash
    /// Simulator*, Table 2, values from the Toshiba TC58NYG2S3ETA00 SLC NAND
    /// datasheet): 512 MiB, 2 KiB pages, 64 pages per block (128 KiB blocks),
    /// read 30 µs, program 300 µs, erase 2,500 µs. One channel, one die, one
    /// plane and no transfer time, like Flash-DBSim, which charges only these
    /// three latencies. The paper did not report FTL settings; ours: 7%
    /// over-provisioning (the usual consumer-SSD spare, also MQSim's default),
    /// greedy GC below 2 free blocks, static wear levelling at a spread of 100
    /// erases (MQSim's default), erase limit 10^5 (SLC endurance per the FAST
    /// paper and the NVM thesis).
    fn seed_tc58() -> Self {
        FlashSimConfig {
            preset: "seed-tc58".into(),
            capacity: 512 * MIB,
            flash_page_size: 2048,
            pages_per_block: 64,
            channels: 1,
            dies_per_channel: 1,
            planes_per_die: 1,
            over_provisioning: 0.07,
            gc_policy: GcPolicy::Greedy,
            gc_threshold: 2,
            wear_leveling_threshold: 100,
            erase_limit: 100_000,
            read_ns: 30_000,
            program_ns: 300_000,
            erase_ns: 2_500_000,
            transfer_ns_per_byte: 0.0,
            ftl: FtlMode::Page,
        }
    }

    /// The flash model of the FAST paper (Sarwat et al., GeoInformatica 2012,
    /// "Flash model"): read 25 µs, program 200 µs, erase 1,500 µs, 64 pages per
    /// block, endurance 10^5 erases. Page size and capacity are not given there:
    /// 2 KiB pages (the common SLC page of that generation) and 512 MiB, single
    /// die, no transfer time, as `seed-tc58`.
    fn fast_paper() -> Self {
        FlashSimConfig {
            preset: "fast-paper".into(),
            read_ns: 25_000,
            program_ns: 200_000,
            erase_ns: 1_500_000,
            ..Self::seed_tc58()
        }
    }

    /// A modern multi-channel NVMe-like TLC SSD. Organisation after MQSim's
    /// default configuration (Tavakkol et al., *MQSim*, FAST 2018: 8 channels ×
    /// 4 chips, 2 planes per die, 256 pages per block, 7% over-provisioning,
    /// static wear-levelling threshold 100); 16 KiB pages and 4 MiB blocks;
    /// latencies are typical published 3D TLC values (read ≈ 60 µs, program
    /// ≈ 600 µs, erase ≈ 3 ms; the NVM thesis cites > 70 µs NAND access
    /// latencies for NVMe flash SSDs), channel 800 MT/s × 8 bit (ONFI 4.0,
    /// 1.25 ns per byte), erase limit 3,000 (the thesis gives ~10^3 P/E cycles
    /// for TLC). Capacity 16 GiB, so that the mapping tables stay small in
    /// memory (8 MiB).
    fn nvme() -> Self {
        FlashSimConfig {
            preset: "nvme".into(),
            capacity: 16 * GIB,
            flash_page_size: 16384,
            pages_per_block: 256,
            channels: 8,
            dies_per_channel: 4,
            planes_per_die: 2,
            over_provisioning: 0.07,
            gc_policy: GcPolicy::Greedy,
            gc_threshold: 2,
            wear_leveling_threshold: 100,
            erase_limit: 3_000,
            read_ns: 60_000,
            program_ns: 600_000,
            erase_ns: 3_000_000,
            transfer_ns_per_byte: 1.25,
            ftl: FtlMode::Page,
        }
    }

    /// The flash tier of the NVM thesis' hybrid experiments (Fevgas, Table
    /// 4.1: Intel DC P3700): the datasheet's device-level latencies, read
    /// 120 µs and write 30 µs (the drive's DRAM cache absorbs writes, so
    /// the sustained program rate of its NAND is not modelled), on the
    /// `nvme` preset's organisation of 64 parallel units (450K random-read
    /// IOPS at 120 µs need about 54 requests in flight). 4 KiB flash pages
    /// (the host page of the experiments), 256 pages per block, erase 3 ms,
    /// 4 GiB (so that its mapping tables stay small in memory).
    fn p3700() -> Self {
        FlashSimConfig {
            preset: "p3700".into(),
            capacity: 4 * GIB,
            flash_page_size: 4096,
            read_ns: 120_000,
            program_ns: 30_000,
            ..Self::nvme()
        }
    }

    /// A 3D XPoint tier (Fevgas, Table 4.1: Intel Optane Memory series):
    /// read 7 µs, write 18 µs. Two parallel units (240K random-read IOPS at
    /// 7 µs are about 1.7 requests in flight: 3D XPoint reaches its speed at
    /// low queue depths), 4 KiB pages written in place in the medium, which
    /// the page-mapping FTL approximates with 64-page blocks, a 1 µs erase
    /// and 10 % spare; endurance 10^6 writes per cell; 4 GiB.
    fn xpoint() -> Self {
        FlashSimConfig {
            preset: "xpoint".into(),
            capacity: 4 * GIB,
            flash_page_size: 4096,
            pages_per_block: 64,
            channels: 2,
            dies_per_channel: 1,
            planes_per_die: 1,
            over_provisioning: 0.1,
            gc_policy: GcPolicy::Greedy,
            gc_threshold: 2,
            wear_leveling_threshold: 100,
            erase_limit: 1_000_000,
            read_ns: 7_000,
            program_ns: 18_000,
            erase_ns: 1_000,
            transfer_ns_per_byte: 0.0,
            ftl: FtlMode::Page,
        }
    }

    /// A preset by name. Every preset but `xpoint` (10 %) uses 7%
    /// over-provisioning (the usual consumer-SSD spare, also MQSim's
    /// default), greedy GC below 2 free blocks
    /// per plane and static wear levelling at a spread of 100 erases (MQSim's
    /// default); the seed papers did not report FTL settings.
    ///
    /// - `seed-tc58`: the device of the flash-simulator paper (Carniel et al.,
    ///   Table 2, from the Toshiba TC58NYG2S3ETA00 SLC datasheet): 512 MiB,
    ///   2 KiB pages, 64 pages per block (128 KiB blocks), read 30 µs, program
    ///   300 µs, erase 2,500 µs; one channel, die and plane and no transfer
    ///   time, like Flash-DBSim; erase limit 10^5 (SLC endurance, FAST paper
    ///   and NVM thesis).
    /// - `fast-paper`: the FAST paper's flash model (Sarwat et al. 2012): read
    ///   25 µs, program 200 µs, erase 1,500 µs, 64 pages per block, 10^5
    ///   erases; page size and capacity as `seed-tc58` (not given there).
    /// - `nvme`: a modern NVMe TLC SSD: 8 channels × 4 dies × 2 planes, 16 KiB
    ///   pages, 256 pages per block, organisation after MQSim's default
    ///   configuration (Tavakkol et al., FAST 2018); typical published 3D TLC
    ///   latencies (read 60 µs, program 600 µs, erase 3 ms; the NVM thesis cites
    ///   more than 70 µs NAND latency for NVMe SSDs); ONFI 4.0 channel at 800 MT/s
    ///   (1.25 ns per byte); erase limit 3,000 (~10^3 for TLC per the thesis);
    ///   16 GiB so the mapping tables stay at 8 MiB.
    /// - `p3700`: the flash tier of the NVM thesis' hybrid experiments (Intel
    ///   DC P3700, Table 4.1): read 120 µs, write 30 µs, `nvme`'s 64 parallel
    ///   units, 4 KiB flash pages, 4 GiB.
    /// - `xpoint`: its 3D XPoint tier (Optane Memory, Table 4.1): read 7 µs,
    ///   write 18 µs, two parallel units, 4 KiB pages, 4 GiB.
    pub fn preset(name: &str) -> Result<FlashSimConfig> {
        match name.trim() {
            "seed-tc58" => Ok(Self::seed_tc58()),
            "fast-paper" => Ok(Self::fast_paper()),
            "nvme" => Ok(Self::nvme()),
            "p3700" => Ok(Self::p3700()),
            "xpoint" => Ok(Self::xpoint()),
            other => Err(Error::invalid(format!(
                "unknown flashsim preset {other:?} (valid presets: {})",
                PRESETS.join(", ")
            ))),
        }
    }

    /// Parses the parameter part of a `flashsim:` device spec, e.g.
    /// `preset=seed-tc58&gc=cost-benefit&op=0.07`: starts from the preset (if
    /// any, wherever it appears; `seed-tc58` otherwise) and applies the other
    /// keys in order with [`FlashSimConfig::set`]. An empty string gives the default.
    pub fn from_params(params: &str) -> Result<FlashSimConfig> {
        let mut pairs = Vec::new();
        for part in params.split('&').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                Error::invalid(format!(
                    "flashsim parameter {part:?} is not of the form key=value"
                ))
            })?;
            pairs.push((k.trim(), v.trim()));
        }
        let mut cfg = FlashSimConfig::default();
        if let Some((_, name)) = pairs.iter().find(|(k, _)| *k == "preset") {
            cfg = Self::preset(name)?;
        }
        for (k, v) in pairs.iter().filter(|(k, _)| *k != "preset") {
            cfg.set(k, v)?;
        }
        Ok(cfg)
    }

    /// Sets one parameter from a `key=value` pair (see `CONFIG_KEYS`): sizes
    /// accept units (`2KiB`), latencies are in microseconds for the `_us` keys
    /// and nanoseconds for the `_ns` keys. `preset` replaces the whole
    /// configuration. An unknown key is an error listing the valid keys.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        match key.trim() {
            "preset" => *self = Self::preset(value)?,
            "capacity" => self.capacity = parse_size(value)?,
            "blocks" => {
                let blocks = parse_int(key, value)?;
                let block_bytes = (self.flash_page_size as u64)
                    .checked_mul(u64::from(self.pages_per_block))
                    .ok_or_else(|| Error::invalid("flashsim block size overflows"))?;
                self.capacity = blocks.checked_mul(block_bytes).ok_or_else(|| {
                    Error::invalid(format!("flashsim blocks={blocks} overflows the capacity"))
                })?;
            }
            "page_size" | "flash_page_size" => {
                self.flash_page_size = usize::try_from(parse_size(value)?).map_err(|_| {
                    Error::invalid(format!("flashsim page_size {value:?} is too large"))
                })?
            }
            "pages_per_block" | "ppb" => self.pages_per_block = parse_u32(key, value)?,
            "channels" => self.channels = parse_u32(key, value)?,
            "dies" | "dies_per_channel" => self.dies_per_channel = parse_u32(key, value)?,
            "planes" | "planes_per_die" => self.planes_per_die = parse_u32(key, value)?,
            "op" | "over_provisioning" => self.over_provisioning = parse_f64(key, value)?,
            "gc" | "gc_policy" => {
                self.gc_policy = match value {
                    "greedy" => GcPolicy::Greedy,
                    "cost-benefit" | "cost_benefit" | "costbenefit" => GcPolicy::CostBenefit,
                    other => {
                        return Err(Error::invalid(format!(
                            "unknown flashsim gc policy {other:?} (valid: greedy, cost-benefit)"
                        )))
                    }
                }
            }
            "gc_threshold" => self.gc_threshold = parse_u32(key, value)?,
            "wl_threshold" | "wear_leveling_threshold" => {
                self.wear_leveling_threshold = parse_u32(key, value)?
            }
            "erase_limit" => self.erase_limit = parse_u32(key, value)?,
            "read_us" => self.read_ns = micros_to_ns(key, value)?,
            "program_us" => self.program_ns = micros_to_ns(key, value)?,
            "erase_us" => self.erase_ns = micros_to_ns(key, value)?,
            "read_ns" => self.read_ns = parse_int(key, value)?,
            "program_ns" => self.program_ns = parse_int(key, value)?,
            "erase_ns" => self.erase_ns = parse_int(key, value)?,
            "transfer_ns_per_byte" => self.transfer_ns_per_byte = parse_f64(key, value)?,
            "ftl" => {
                self.ftl = match value {
                    "page" => FtlMode::Page,
                    "flashdbsim" | "flash-dbsim" | "flash_dbsim" => FtlMode::FlashDbSim,
                    other => {
                        return Err(Error::invalid(format!(
                            "unknown flashsim ftl {other:?} (valid: page, flashdbsim)"
                        )))
                    }
                }
            }
            other => {
                let keys: Vec<&str> = CONFIG_KEYS.iter().map(|(k, _)| *k).collect();
                return Err(Error::invalid(format!(
                    "unknown flashsim key {other:?} (valid keys: {})",
                    keys.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Number of physical blocks (capacity rounded down to whole blocks).
    pub fn blocks(&self) -> u64 {
        let block_bytes =
            (self.flash_page_size as u64).saturating_mul(u64::from(self.pages_per_block));
        self.capacity.checked_div(block_bytes).unwrap_or(0)
    }

    /// Number of parallel units (planes) = channels × dies per channel × planes per die.
    /// Saturates (a product beyond `u64` is refused by [`validate`](Self::validate)
    /// as more planes than blocks, never an overflow).
    pub fn planes(&self) -> u64 {
        u64::from(self.channels)
            .saturating_mul(u64::from(self.dies_per_channel))
            .saturating_mul(u64::from(self.planes_per_die))
    }

    /// Number of physical flash pages.
    pub fn physical_pages(&self) -> u64 {
        self.blocks()
            .saturating_mul(u64::from(self.pages_per_block))
    }

    /// Number of logical (host-visible) flash pages: physical × (1 − op),
    /// rounded down; in `ftl=flashdbsim` mode every page but those of the one
    /// reserved block (the pages the host never allocates are the only spare).
    pub fn logical_flash_pages(&self) -> u64 {
        match self.ftl {
            FtlMode::Page => {
                (self.physical_pages() as f64 * (1.0 - self.over_provisioning)).floor() as u64
            }
            FtlMode::FlashDbSim => self
                .blocks()
                .saturating_sub(1)
                .saturating_mul(u64::from(self.pages_per_block)),
        }
    }

    /// Blocks that must stay out of the logical space: per plane the GC
    /// threshold's free blocks plus the open write block.
    pub fn reserved_blocks(&self) -> u64 {
        self.planes()
            .saturating_mul(u64::from(self.gc_threshold).saturating_add(1))
    }

    /// Checks every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::invalid(format!("flashsim: {msg}")));
        if !(512..=65536).contains(&self.flash_page_size) || !self.flash_page_size.is_power_of_two()
        {
            return bad(format!(
                "flash page size {} must be a power of two from 512 to 65536 bytes",
                self.flash_page_size
            ));
        }
        if self.pages_per_block < 2 {
            return bad(format!(
                "pages per block is {}, it must be at least 2",
                self.pages_per_block
            ));
        }
        if self.channels == 0 || self.dies_per_channel == 0 || self.planes_per_die == 0 {
            return bad(format!(
                "channels ({}), dies per channel ({}) and planes per die ({}) must all be at least 1",
                self.channels, self.dies_per_channel, self.planes_per_die
            ));
        }
        if self.capacity == 0 {
            return bad("capacity is zero: a simulator needs at least one block".into());
        }
        let blocks = self.blocks();
        if blocks == 0 {
            return bad(format!(
                "capacity {} bytes is smaller than one block ({} pages of {} bytes)",
                self.capacity, self.pages_per_block, self.flash_page_size
            ));
        }
        if self.physical_pages() >= u64::from(u32::MAX) {
            return bad(format!(
                "{} physical pages is too many (at most {} per simulator)",
                self.physical_pages(),
                u32::MAX - 1
            ));
        }
        if !(0.0..1.0).contains(&self.over_provisioning) {
            return bad(format!(
                "over-provisioning {} must be a fraction in [0, 1)",
                self.over_provisioning
            ));
        }
        if self.gc_threshold < 2 {
            return bad(format!(
                "gc_threshold {} must be at least 2 free blocks per plane",
                self.gc_threshold
            ));
        }
        if self.erase_limit == 0 {
            return bad("erase_limit must be at least 1".into());
        }
        if !self.transfer_ns_per_byte.is_finite() || self.transfer_ns_per_byte < 0.0 {
            return bad(format!(
                "transfer_ns_per_byte {} must be a finite number >= 0",
                self.transfer_ns_per_byte
            ));
        }
        self.validate_latencies()?;
        if self.ftl == FtlMode::FlashDbSim {
            if blocks < 2 {
                return bad(format!(
                    "ftl=flashdbsim needs at least 2 blocks (one is the reserved block), got {blocks}"
                ));
            }
            return Ok(());
        }
        let planes = self.planes();
        if blocks < planes {
            return bad(format!(
                "{blocks} blocks cannot populate {planes} planes (at least one block per plane)"
            ));
        }
        let logical = self.logical_flash_pages();
        if logical == 0 {
            return bad(
                "the logical capacity is zero pages (capacity too small or op too large)".into(),
            );
        }
        let ppb = u64::from(self.pages_per_block);
        let needed = logical.div_ceil(ppb) + self.reserved_blocks();
        if blocks < needed {
            return bad(format!(
                "over-provisioning too small: {blocks} blocks hold {logical} logical pages \
                 ({} blocks) but garbage collection also needs {} reserved blocks \
                 ({planes} planes × (gc_threshold {} + 1 open block)); raise op or capacity",
                logical.div_ceil(ppb),
                self.reserved_blocks(),
                self.gc_threshold
            ));
        }
        Ok(())
    }

    /// Every latency at most [`MAX_LATENCY_NS`] (the bound of the `_us`
    /// keys), the transfer of one flash page included: the simulated clock
    /// then saturates instead of wrapping (see `timing`).
    fn validate_latencies(&self) -> Result<()> {
        for (key, ns) in [
            ("read", self.read_ns),
            ("program", self.program_ns),
            ("erase", self.erase_ns),
        ] {
            if ns > MAX_LATENCY_NS {
                return Err(Error::invalid(format!(
                    "flashsim: {key} latency {ns} ns exceeds the limit of {MAX_LATENCY_NS} ns (10^12 microseconds)"
                )));
            }
        }
        let transfer = self.transfer_ns_per_byte * self.flash_page_size as f64;
        if transfer > MAX_LATENCY_NS as f64 {
            return Err(Error::invalid(format!(
                "flashsim: transfer_ns_per_byte {} gives {transfer} ns per flash page, beyond the limit of {MAX_LATENCY_NS} ns",
                self.transfer_ns_per_byte
            )));
        }
        Ok(())
    }

    /// Time to move one flash page over a channel, in nanoseconds.
    pub fn transfer_ns_per_page(&self) -> u64 {
        (self.transfer_ns_per_byte * self.flash_page_size as f64).round() as u64
    }
}

fn parse_int(key: &str, value: &str) -> Result<u64> {
    value.parse::<u64>().map_err(|_| {
        Error::invalid(format!(
            "flashsim {key}={value:?}: expected a non-negative integer"
        ))
    })
}

fn parse_u32(key: &str, value: &str) -> Result<u32> {
    let n = parse_int(key, value)?;
    u32::try_from(n).map_err(|_| {
        Error::invalid(format!(
            "flashsim {key}={value}: too large (at most {})",
            u32::MAX
        ))
    })
}

fn parse_f64(key: &str, value: &str) -> Result<f64> {
    match value.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(Error::invalid(format!(
            "flashsim {key}={value:?}: expected a finite number"
        ))),
    }
}

fn micros_to_ns(key: &str, value: &str) -> Result<u64> {
    let us = parse_f64(key, value)?;
    if !(0.0..=MAX_LATENCY_NS as f64 / 1000.0).contains(&us) {
        return Err(Error::invalid(format!(
            "flashsim {key}={value}: latency must be between 0 and 10^12 microseconds"
        )));
    }
    Ok((us * 1000.0).round() as u64)
}
