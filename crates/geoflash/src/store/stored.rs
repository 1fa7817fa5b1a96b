//! Node pages as the device holds them, read by the logged stores (eFIND
//! and FAST): decoding with the checks both make, and restart's check of
//! the pages a recovered log names against its [`LsnHorizon`].
use std::collections::BTreeSet;

use crate::page::{self, Node};
use crate::storage::{PageDevice, PageId};
use crate::store::log::{LsnHorizon, RecordKind, Recovered};
use crate::{Error, Result};

/// Pages read per device batch by [`check_named_pages`].
const CHECK_BATCH: usize = 256;

/// Decodes node page `id` as read from the device: an error for a blank
/// page (never written), one that does not decode, or one stamped with an
/// LSN within `horizon` (it holds changes of records the log lost).
pub(crate) fn decode_stored(buf: &[u8], id: PageId, horizon: &LsnHorizon) -> Result<Node> {
    if page::is_blank(buf) {
        return Err(Error::corrupt(
            Some(id),
            "node page is blank (never written)",
        ));
    }
    let (header, node) = page::decode_node(buf, Some(id))?;
    horizon.check(id, header.lsn)?;
    Ok(node)
}

/// Restart's check, made before the log is rewritten: reads, in device
/// batches, the node pages below `capacity` that the surviving NEW, MOD,
/// DEL and PAGE_IMAGE records of `rec` name, and checks their LSNs against
/// `horizon`. A page that is blank or does not decode carries no LSN to
/// trust and passes: restart writes an image or a NEW record over it, or
/// reading it later fails.
pub(crate) fn check_named_pages(
    device: &dyn PageDevice,
    rec: &Recovered,
    horizon: &LsnHorizon,
    capacity: u64,
) -> Result<()> {
    if *horizon == LsnHorizon::none() {
        return Ok(());
    }
    let named: BTreeSet<PageId> = rec
        .records
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                RecordKind::New | RecordKind::Mod | RecordKind::Del | RecordKind::PageImage
            )
        })
        .map(|r| r.page)
        .filter(|&p| p > 0 && p < capacity)
        .collect();
    let named: Vec<PageId> = named.into_iter().collect();
    let ps = device.page_size();
    let mut buf = vec![0u8; CHECK_BATCH.min(named.len()) * ps];
    for ids in named.chunks(CHECK_BATCH) {
        let buf = &mut buf[..ids.len() * ps];
        device.read_batch(ids, buf)?;
        for (&id, bytes) in ids.iter().zip(buf.chunks_exact(ps)) {
            if let Ok(header) = page::decode_header(bytes, Some(id)) {
                horizon.check(id, header.lsn)?;
            }
        }
    }
    Ok(())
}
