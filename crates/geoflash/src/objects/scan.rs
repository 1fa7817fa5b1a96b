//! Opening a heap: the scan of its records up to the committed mark (see
//! the [module docs](super)), rebuilding the id → offset map.
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;

use super::{
    decode_header, io_err, Committed, Heap, Slot, FILE_HEADER, FILE_MAGIC, HEAP_FORMAT_VERSION,
    KIND_MARK, KIND_OBJECT, MARKED, RECORD_HEADER,
};
use crate::{Error, Result};

/// How the scan of the records stopped.
enum Stop {
    /// At the end of the file.
    End,
    /// In a record the file ends inside of.
    Incomplete,
    /// At a record that does not decode or fails its checksum.
    Bad { offset: u64, reason: String },
}

/// What the scan found: the newest mark taken as committed (its
/// generation and where it ends), how many marks it read and the last
/// one's generation, and the changes to the id map since the kept mark
/// (each id with the slot it replaced).
#[derive(Default)]
struct Found {
    kept: Option<(u64, u64)>,
    marks: u64,
    last_mark: Option<u64>,
    since_kept: Vec<(u64, Option<Slot>)>,
}

impl Heap {
    /// Reads the file's header and records, keeping those `committed`
    /// says; the rest is dropped (truncated when writable).
    pub(super) fn scan(&mut self, committed: Committed) -> Result<()> {
        let file_len = self.file.metadata().map_err(|e| self.io(e))?.len();
        self.read_file_header(file_len)?;
        let mut rdr = BufReader::with_capacity(1 << 16, &self.file);
        let mut skip = [0u8; FILE_HEADER as usize];
        rdr.read_exact(&mut skip)
            .map_err(|e| io_err(&self.path, e))?;
        let mut off = FILE_HEADER;
        let mut found = Found::default();
        let mut body = Vec::new();
        let stop = loop {
            if off >= file_len {
                break Stop::End;
            }
            if file_len - off < RECORD_HEADER as u64 {
                break Stop::Incomplete;
            }
            let mut h = [0u8; RECORD_HEADER];
            rdr.read_exact(&mut h).map_err(|e| io_err(&self.path, e))?;
            let hd = match decode_header(&h) {
                Ok(hd) => hd,
                Err(reason) => break Stop::Bad { offset: off, reason },
            };
            let len = u64::from(hd.payload_len) + u64::from(hd.wkb_len);
            if file_len - off - (RECORD_HEADER as u64) < len {
                break Stop::Incomplete;
            }
            body.clear();
            body.resize(len as usize, 0);
            rdr.read_exact(&mut body)
                .map_err(|e| io_err(&self.path, e))?;
            if crc32c::crc32c(&body) != hd.body_crc {
                break Stop::Bad {
                    offset: off,
                    reason: "checksum mismatch".into(),
                };
            }
            let slot = Slot {
                offset: off,
                payload_len: hd.payload_len,
                wkb_len: hd.wkb_len,
            };
            off += slot.bytes();
            if hd.kind == KIND_MARK {
                found.marks += 1;
                found.last_mark = Some(hd.id);
                // Under `Through(g)` only the mark of `g` ends the committed
                // records (the last one, if a compaction repeated it).
                if matches!(committed, Committed::Through(g) if hd.id != g) {
                    continue;
                }
                found.kept = Some((hd.id, off));
                found.since_kept.clear();
                continue;
            }
            let old = if hd.kind == KIND_OBJECT {
                self.index.insert(hd.id, slot)
            } else {
                self.index.remove(&hd.id)
            };
            found.since_kept.push((hd.id, old));
        };
        let end = self.committed_end(committed, &found, stop, off, file_len)?;
        if self.version >= MARKED || found.marks > 0 {
            for (id, old) in found.since_kept.into_iter().rev() {
                match old {
                    Some(s) => self.index.insert(id, s),
                    None => self.index.remove(&id),
                };
            }
            self.mark = found.kept.map(|(g, _)| g);
        }
        self.base = match committed {
            Committed::Through(g) => g,
            Committed::LastMark | Committed::NotBefore(_) => self.mark.unwrap_or(0),
        };
        self.live_bytes = self.index.values().map(Slot::bytes).sum();
        self.count = self.index.len() as u64;
        self.end = end;
        self.drop_tail(file_len)
    }

    /// Checks the file's header and takes its format version.
    fn read_file_header(&mut self, file_len: u64) -> Result<()> {
        if file_len < FILE_HEADER {
            return Err(Error::corrupt(
                None,
                format!(
                    "object heap {}: file of {file_len} bytes is shorter than its {FILE_HEADER}-byte header",
                    self.path.display()
                ),
            )
            .in_file(&self.path));
        }
        let mut head = [0u8; FILE_HEADER as usize];
        self.file
            .read_exact_at(&mut head, 0)
            .map_err(|e| self.io(e))?;
        if &head[0..8] != FILE_MAGIC {
            return Err(Error::corrupt(
                None,
                format!(
                    "{} is not an object heap (bad magic at offset 0)",
                    self.path.display()
                ),
            )
            .in_file(&self.path));
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        Error::check_version("object heap", version, 1, HEAP_FORMAT_VERSION)
            .map_err(|e| e.in_file(&self.path))?;
        self.version = version;
        Ok(())
    }

    /// Where the committed records end, given how the scan stopped at
    /// `off` (see the module docs); an error for damage before the
    /// committed mark, or a heap without the mark its index names.
    fn committed_end(
        &self,
        committed: Committed,
        found: &Found,
        stop: Stop,
        off: u64,
        file_len: u64,
    ) -> Result<u64> {
        if self.version < MARKED && found.marks == 0 {
            return self.unmarked_end(committed, stop, off, file_len);
        }
        // Every heap of version 2 holds a mark: its creation and a
        // compaction rename a whole file (header, records, mark) to its
        // name. One without (cut inside its first record, or a compacted
        // one cut before its only mark) is damaged, whatever the index
        // names: it used to open empty, every object of its index lost.
        match (committed, found.kept) {
            // No generation to tell a cut commit from damage: damage is an
            // error, wherever it is.
            (Committed::LastMark | Committed::NotBefore(_), kept) => match (stop, kept) {
                (Stop::Bad { offset, reason }, _) => Err(Self::corrupt_at(&self.path, offset, reason)),
                (_, Some((k, end))) => self.not_before(committed, Some(k)).map(|()| end),
                (_, None) => Err(Error::corrupt(
                    None,
                    format!(
                        "object heap {} holds no mark (the file is cut before its first mark's end, at {off} bytes)",
                        self.path.display()
                    ),
                )
                .in_file(&self.path)),
            },
            (Committed::Through(g), Some((k, end))) if k == g => Ok(end),
            (Committed::Through(g), _) => match stop {
                Stop::Bad { offset, reason } => Err(Self::corrupt_at(
                    &self.path,
                    offset,
                    format!("{reason} (before the mark of generation {g}, the index's last checkpoint)"),
                )),
                _ => Err(Error::corrupt(
                    None,
                    format!(
                        "object heap {} holds no mark of generation {g}, which the index's last checkpoint names (its last mark: {}): the heap and the index disagree",
                        self.path.display(),
                        found.last_mark.map_or("none".to_string(), |k| k.to_string())
                    ),
                )
                .in_file(&self.path)),
            },
        }
    }

    /// Under [`Committed::NotBefore`], an error unless the last mark
    /// (generation `last`, or `None` in a file of version 1 without marks)
    /// is of the generation the index's manifest records or a later one.
    fn not_before(&self, committed: Committed, last: Option<u64>) -> Result<()> {
        let Committed::NotBefore(g) = committed else {
            return Ok(());
        };
        if last.is_some_and(|k| k >= g) {
            return Ok(());
        }
        Err(Error::corrupt(
            None,
            format!(
                "object heap {} ends at {}, but the index's manifest records that its last checkpoint \
                 committed the heap's generation {g}: the file was cut back or replaced by an older copy \
                 (the objects of the later commits are missing); restore the file, or rebuild the index",
                self.path.display(),
                last.map_or("no mark (a heap of version 1)".to_string(), |k| format!("the mark of generation {k}")),
            ),
        )
        .in_file(&self.path))
    }

    /// Where the committed records of a file of version 1 without marks
    /// end: every complete record is committed, as its writer made them.
    /// What a crash left of the first commit of this code (an unfinished
    /// upgrade: [`Heap::mark_version_1`], or a file extended with zeros by
    /// a crash of its writer) follows them as zeros and at most the bytes
    /// of the mark it was writing, and is dropped; any other bad record is
    /// damage, an error naming its offset.
    fn unmarked_end(
        &self,
        committed: Committed,
        stop: Stop,
        off: u64,
        file_len: u64,
    ) -> Result<u64> {
        self.not_before(committed, None)?;
        match stop {
            Stop::Bad { offset, reason } => {
                let base = match committed {
                    Committed::Through(g) => g,
                    _ => 0,
                };
                match self.unfinished_upgrade(offset, file_len, base)? {
                    true => Ok(offset),
                    false => Err(Self::corrupt_at(&self.path, offset, reason)),
                }
            }
            _ => Ok(off),
        }
    }

    /// Whether the bytes from `offset` to the end of the file are what a
    /// crash leaves of the upgrade of a file of version 1 opened under
    /// generation `base`: each of the first 32 either zero or the byte of
    /// the mark of `base` there (a torn write of the mark alone, synced
    /// before anything follows it), every later one zero.
    fn unfinished_upgrade(&self, offset: u64, file_len: u64, base: u64) -> Result<bool> {
        let mark = super::encode_record(KIND_MARK, base, &[], &[]);
        let mut buf = vec![0u8; 1 << 16];
        let mut at = offset;
        while at < file_len {
            let n = (file_len - at).min(buf.len() as u64) as usize;
            self.file
                .read_exact_at(&mut buf[..n], at)
                .map_err(|e| self.io(e))?;
            for (i, &b) in buf[..n].iter().enumerate() {
                let expected = usize::try_from(at - offset)
                    .ok()
                    .and_then(|from| mark.get(from + i).copied());
                if b != 0 && Some(b) != expected {
                    return Ok(false);
                }
            }
            at += n as u64;
        }
        Ok(true)
    }

    /// Drops what follows the committed records: truncated when writable
    /// (and synced), ignored when read-only.
    fn drop_tail(&mut self, file_len: u64) -> Result<()> {
        if file_len <= self.end {
            return Ok(());
        }
        self.torn_tail = file_len - self.end;
        tracing::warn!(
            path = %self.path.display(),
            offset = self.end,
            bytes = self.torn_tail,
            "object heap: bytes past the index's last checkpoint (a commit a crash cut short); {}",
            if self.read_only { "ignored" } else { "truncated" }
        );
        if !self.read_only {
            self.file.set_len(self.end).map_err(|e| self.io(e))?;
            self.file.sync_all().map_err(|e| self.io(e))?;
        }
        Ok(())
    }
}
