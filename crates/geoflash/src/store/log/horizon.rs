//! The LSN horizon of a recovered log: which node-page LSNs prove that the
//! log lost records it had made durable.
//!
//! Every logged store stamps a node page with the log's newest LSN when it
//! writes the page, and makes the log durable up to that LSN first
//! (write-ahead). So after a crash every node page carries an LSN no newer
//! than the log's durable end. Restart cannot always tell damage to the
//! last pages the log wrote from a torn tail: both end the scan at an
//! invalid page with nothing valid after it. If the damaged pages had been
//! synced and nodes written after them, replaying the surviving prefix onto
//! those nodes would apply changes twice (or miss the ones the nodes lost),
//! silently. The node pages are the evidence: one stamped above the
//! recovered end was written after records the log no longer holds.
//!
//! Within one epoch of the log, records take consecutive LSNs from the
//! epoch's floor, and each takes at least [`Framing::min_record_len`] bytes
//! of the region, so no record of the recovered epoch has an LSN above
//! `floor + region bytes / min record length`. [`Log::open`](super::Log::open)
//! resumes one above that (the horizon's `resume`, the log's newest LSN
//! after restart): pages written after the restart carry `resume` or more,
//! and a node page stamped in `(end, resume)` can only come from records
//! the log lost.
use super::record::Framing;
use super::Lsn;
use crate::storage::PageId;
use crate::{Error, Result};

/// LSNs that a node page must not carry after a restart (see the
/// [module docs](self)): those in `(end, resume)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LsnHorizon {
    /// The recovered log's durable end: the largest LSN it holds or had
    /// assigned before its live region (its floor).
    end: Lsn,
    /// The log's newest LSN after restart: one above the largest LSN a
    /// record of the recovered epoch can have had.
    resume: Lsn,
}

impl LsnHorizon {
    /// No horizon: every stamp passes (a log just created, or a store
    /// opened with [`RecoveryMode::TolerateCorruptTail`](super::RecoveryMode),
    /// which accepts that nodes may hold changes of dropped records).
    pub fn none() -> LsnHorizon {
        LsnHorizon::default()
    }

    /// The horizon of an epoch whose floor is `floor`, whose newest
    /// surviving record is `last_lsn` (0 for none), in a region of
    /// `region_bytes` bytes framed as `framing`.
    pub fn of_epoch(floor: Lsn, last_lsn: Lsn, region_bytes: u64, framing: Framing) -> LsnHorizon {
        let end = floor.max(last_lsn);
        let most_records = region_bytes / framing.min_record_len() as u64;
        LsnHorizon {
            end,
            resume: end
                .max(floor.saturating_add(most_records))
                .saturating_add(1),
        }
    }

    /// The recovered end: node pages may carry LSNs up to it.
    #[cfg(test)]
    pub fn end(&self) -> Lsn {
        self.end
    }

    /// The log's newest LSN after restart (no record carries it): one
    /// above the largest LSN the recovered epoch can have assigned. Pages
    /// written after the restart carry it or more; the next record gets
    /// the one after.
    pub fn resume(&self) -> Lsn {
        self.resume
    }

    /// Checks the LSN `stamp` of node page `page` as read from the device:
    /// an [`Error::Corrupt`] naming the page and both LSNs when it lies
    /// beyond the recovered end and below [`resume`](Self::resume).
    pub fn check(&self, page: PageId, stamp: Lsn) -> Result<()> {
        if stamp > self.end && stamp < self.resume {
            return Err(Error::corrupt(
                Some(page),
                format!(
                    "node page {page} carries LSN {stamp}, newer than the recovered log's end (LSN {}): the log lost records it had made durable (its last pages are damaged), so replaying it would corrupt the tree; restore the index from a backup, or open it with the tolerate-corrupt-tail recovery mode and check it",
                    self.end
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_between_the_end_and_the_resumption_are_refused() {
        // floor 100, records up to 140, 330 bytes of fixed framing: at
        // most 10 records (LSNs 101..=110 of the epoch), so 141.
        let h = LsnHorizon::of_epoch(100, 140, 330, Framing::Fixed);
        assert_eq!((h.end(), h.resume()), (140, 141));
        // a wider region: floor + region / 33 + 1
        let h = LsnHorizon::of_epoch(100, 120, 33 * 50, Framing::Fixed);
        assert_eq!((h.end(), h.resume()), (120, 151));
        for ok in [0, 100, 120, 151, 152, u64::MAX] {
            assert!(h.check(7, ok).is_ok(), "{ok}");
        }
        for bad in [121, 135, 150] {
            let e = h.check(7, bad).unwrap_err();
            assert!(
                matches!(&e, Error::Corrupt { page: Some(7), reason, .. } if reason.contains(&format!("LSN {bad}")) && reason.contains("LSN 120")),
                "{e}"
            );
        }
        // compact framing: at least 5 bytes a record
        let h = LsnHorizon::of_epoch(0, 0, 50, Framing::Compact);
        assert_eq!(h.resume(), 11);
        assert!(LsnHorizon::none().check(1, 5).is_ok());
    }
}
