//! Saving and loading a simulator's state (`device.img`), so that an index
//! built on `flashsim:` can be queried by a later command.
//!
//! Format (little-endian), version 1:
//! ```text
//! magic "GEOFLASHSIM\0" | u32 version | u32 n + n bytes JSON {config, host_page_size, client_mark}
//! u64 next_plane | u64 seq | u64 wl_cursor
//! u64 blocks, then per block: u8 state | u32 write pointer | u32 erase count | u64 last write
//! u64 logical pages, then per page: u32 physical page (u32::MAX = unmapped)
//! u64 host pages stored, then per page: u64 page id | host_page_size bytes
//! u32 CRC-32C of everything before
//! ```
//! Counters and the simulated clock are not saved: they count from the opening.
//! Loading checks the checksum, every length against the configuration, and
//! every FTL invariant; a damaged file is an [`Error::Corrupt`], never a panic.
#[cfg(test)]
use std::io::Read;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::flashdbsim::Engine;
use super::ftl::FtlImage;
use super::{FlashSim, FlashSimConfig, FlashSimIo};
use crate::storage::Counted;
use crate::{Error, Result};

const MAGIC: &[u8; 12] = b"GEOFLASHSIM\0";
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Header {
    config: FlashSimConfig,
    host_page_size: usize,
    /// The index's object-heap generation the image goes with (absent in
    /// images saved before it, which name none; readers before it ignore
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_mark: Option<u64>,
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::corrupt(None, format!("flashsim image: {}", msg.into()))
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

/// Reads fields from an in-memory image, failing cleanly at its end.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| corrupt("truncated"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of items of `item_bytes` each that must fit in the rest of the image.
    fn count(&mut self, item_bytes: usize) -> Result<usize> {
        let n = self.u64()?;
        let rest = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(item_bytes as u64) > rest {
            return Err(corrupt(format!("count {n} exceeds the image")));
        }
        Ok(n as usize)
    }
}

impl FlashSim {
    /// Loads a simulator saved by `FlashSim::save` (counters start at zero).
    pub fn load(path: &Path) -> Result<FlashSim> {
        let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
        FlashSimIo::decode(&bytes)
            .map(Counted::wrap)
            .map_err(|e| e.in_file(path))
    }

    /// Loads a simulator from a stream written by [`FlashSim::save_to`].
    #[cfg(test)]
    pub fn load_from(input: &mut impl Read) -> Result<FlashSim> {
        let mut bytes = Vec::new();
        input
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(Path::new("<stream>"), e))?;
        FlashSimIo::decode(&bytes).map(Counted::wrap)
    }
}

impl FlashSimIo {
    /// Writes the simulator's state (configuration, FTL tables, contents) to `out`.
    #[cfg(test)]
    pub fn save_to(&self, out: &mut impl Write) -> Result<()> {
        let bytes = self.encode()?;
        out.write_all(&bytes)
            .map_err(|e| io_error(Path::new("<stream>"), e))
    }

    /// Saves the state to `path` atomically (written to a temporary file,
    /// synced, renamed over `path`).
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.encode()?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let mut f = std::fs::File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| io_error(&tmp, e))?;
        f.sync_all().map_err(|e| io_error(&tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                d.sync_all().map_err(|e| io_error(dir, e))?;
            }
        }
        Ok(())
    }

    fn encode(&self) -> Result<Vec<u8>> {
        let inner = self.lock();
        let header = serde_json::to_vec(&Header {
            config: self.config.clone(),
            host_page_size: self.host_page_size,
            client_mark: inner.client_mark,
        })
        .map_err(|e| Error::invalid(format!("flashsim: cannot encode the configuration: {e}")))?;
        let image = inner.ftl.export();
        let mut out = Vec::with_capacity(
            64 + header.len()
                + image.blocks.len() * 17
                + image.l2p.len() * 4
                + inner.data.len() * (8 + self.host_page_size),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&image.next_plane.to_le_bytes());
        out.extend_from_slice(&image.seq.to_le_bytes());
        out.extend_from_slice(&image.wl_cursor.to_le_bytes());
        out.extend_from_slice(&(image.blocks.len() as u64).to_le_bytes());
        for &(state, wp, ec, lw) in &image.blocks {
            out.push(state);
            out.extend_from_slice(&wp.to_le_bytes());
            out.extend_from_slice(&ec.to_le_bytes());
            out.extend_from_slice(&lw.to_le_bytes());
        }
        out.extend_from_slice(&(image.l2p.len() as u64).to_le_bytes());
        for &p in &image.l2p {
            out.extend_from_slice(&p.to_le_bytes());
        }
        let mut pages: Vec<_> = inner.data.iter().collect();
        pages.sort_unstable_by_key(|(&h, _)| h);
        out.extend_from_slice(&(pages.len() as u64).to_le_bytes());
        for (&h, d) in pages {
            out.extend_from_slice(&h.to_le_bytes());
            out.extend_from_slice(d);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<FlashSimIo> {
        let (body, crc) = bytes
            .split_last_chunk::<4>()
            .ok_or_else(|| corrupt("shorter than its checksum"))?;
        let mut c = Cursor { buf: body, pos: 0 };
        if c.take(MAGIC.len())? != MAGIC {
            return Err(corrupt("not a flashsim image (bad magic)"));
        }
        let version = c.u32()?;
        // The checksum first: a damaged version field is damage, not a newer format.
        if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
            return Err(corrupt("checksum mismatch"));
        }
        Error::check_version("flash simulator image", version, VERSION, VERSION)?;
        let header_len = c.u32()? as usize;
        let header: Header = serde_json::from_slice(c.take(header_len)?)
            .map_err(|e| corrupt(format!("bad configuration: {e}")))?;
        // The tables of the configuration must be in the image before anything
        // is allocated for them (a damaged header must not ask for gigabytes).
        header.config.validate()?;
        let table_bytes = header
            .config
            .blocks()
            .saturating_mul(17)
            .saturating_add(header.config.logical_flash_pages().saturating_mul(4));
        if table_bytes > (body.len() - c.pos) as u64 {
            return Err(corrupt(
                "the image is smaller than its configuration's tables",
            ));
        }
        let sim = FlashSimIo::fresh(header.config, header.host_page_size)?;
        let next_plane = c.u64()?;
        let seq = c.u64()?;
        let wl_cursor = c.u64()?;
        let nblocks = c.count(17)?;
        let mut blocks = Vec::with_capacity(nblocks);
        for _ in 0..nblocks {
            blocks.push((c.u8()?, c.u32()?, c.u32()?, c.u64()?));
        }
        let nlogical = c.count(4)?;
        let mut l2p = Vec::with_capacity(nlogical);
        for _ in 0..nlogical {
            l2p.push(c.u32()?);
        }
        let image = FtlImage {
            blocks,
            l2p,
            next_plane,
            seq,
            wl_cursor,
        };
        let ftl = Engine::restore(&sim.config, image)?;
        let npages = c.count(8 + sim.host_page_size)?;
        {
            let mut inner = sim.lock();
            inner.ftl = ftl;
            inner.client_mark = header.client_mark;
            for _ in 0..npages {
                let h = c.u64()?;
                if h >= sim.capacity {
                    return Err(corrupt(format!(
                        "page {h} beyond the capacity {}",
                        sim.capacity
                    )));
                }
                let d = c.take(sim.host_page_size)?;
                inner.data.insert(h, d.into());
            }
        }
        if c.pos != body.len() {
            return Err(corrupt("trailing bytes"));
        }
        sim.check_invariants()?;
        Ok(sim)
    }
}
