//! Tests of entry references: what a writer encodes with its memo, a scan
//! resolves to the plain payloads, bit for bit; damage is an error.
use proptest::prelude::*;

use super::*;
use crate::geom::Rect;
use crate::store::log::{PayloadEncoding, RecordKind};
use crate::store::EntryChange;

const VARINT: PayloadCodec = PayloadCodec::new(PayloadEncoding::Varint);

fn entry(key: u64, x: f64, y: f64, w: f64, payload: u64) -> Entry {
    Entry {
        key,
        rect: Rect::new(x, y, x + w, y + w).unwrap(),
        payload,
    }
}

/// One record a writer logs: NEW (entries) or MOD (changes), at a level.
#[derive(Debug, Clone)]
enum Logged {
    New(u16, Vec<Entry>),
    Mod(u16, Vec<EntryChange>),
}

/// Encodes `logged` with a memo of `memo_entries` entries, as the store
/// does; returns the records with references and the plain ones.
fn encode(logged: &[Logged], memo_entries: usize) -> (Vec<Record>, Vec<Record>) {
    let mut memo = EntryMemo::with_max_entries(memo_entries);
    memo.for_epoch(1);
    let mut refs = Vec::new();
    let mut plain = Vec::new();
    for (i, l) in logged.iter().enumerate() {
        let page = i as u64 + 1;
        let (kind, with, without) = match l {
            Logged::New(level, es) => (
                RecordKind::New,
                VARINT.encode_new_refs(*level, es, Some(&mut memo)),
                VARINT.encode_new(*level, es),
            ),
            Logged::Mod(level, cs) => (
                RecordKind::Mod,
                VARINT.encode_mod_refs(*level, cs, Some(&mut memo)),
                VARINT.encode_mod(*level, cs),
            ),
        };
        refs.push(Record::new(kind, 7, page, with));
        plain.push(Record::new(kind, 7, page, without));
    }
    (refs, plain)
}

#[test]
fn a_moved_entry_is_named_by_its_key_and_resolved_to_its_content() {
    let a = entry(1000, 0.25, 0.5, 0.001, 0);
    let b = entry(1001, 0.75, 0.5, 0.0, 0);
    let logged = [
        Logged::Mod(0, vec![EntryChange::Upsert(a), EntryChange::Upsert(b)]),
        // A reinsertion: removed from one leaf, the same content in another.
        Logged::Mod(0, vec![EntryChange::Remove(1000)]),
        Logged::New(0, vec![a, b]),
    ];
    let (refs, plain) = encode(&logged, 100);
    // The NEW names both entries by key: level, count and two heads.
    assert!(refs[2].payload.len() <= 6, "{}", refs[2].payload.len());
    assert!(plain[2].payload.len() > 70);
    let mut resolved = refs.clone();
    resolve(&mut resolved, VARINT).unwrap();
    assert_eq!(resolved, plain);
}

#[test]
fn content_is_compared_bit_for_bit() {
    // Points at (±0, 1): they differ in the sign of min_x only
    // (-0.0 + 0.0 is +0.0, so max_x is +0.0 in both).
    let pos = entry(5, 0.0, 1.0, 0.0, 0);
    let neg = entry(5, -0.0, 1.0, 0.0, 0);
    assert!(neg.rect.min_x().is_sign_negative() && neg.rect.max_x().is_sign_positive());
    let logged = [Logged::New(0, vec![pos]), Logged::New(0, vec![neg])];
    let (refs, plain) = encode(&logged, 100);
    let mut resolved = refs;
    resolve(&mut resolved, VARINT).unwrap();
    assert_eq!(resolved, plain);
    let (_, got) = VARINT.decode_new(&resolved[1]).unwrap();
    assert!(got[0].rect.min_x().is_sign_negative());
}

#[test]
fn a_reference_without_its_entry_is_damage_naming_the_record() {
    let a = entry(3, 1.0, 2.0, 0.5, 9);
    let logged = [Logged::New(0, vec![a]), Logged::New(0, vec![a])];
    let (refs, _) = encode(&logged, 100);
    // The second record alone: its reference names nothing earlier.
    let mut tail = vec![refs[1].clone()];
    let err = resolve(&mut tail, VARINT).unwrap_err().to_string();
    assert!(err.contains("names entry 3 of level 0"), "{err}");
    assert!(err.contains("log record"), "{err}");
    // Another level is another dictionary.
    let logged = [Logged::New(1, vec![a]), Logged::New(0, vec![a])];
    let (refs, _) = encode(&logged, 100);
    let mut all = refs;
    resolve(&mut all, VARINT).unwrap();
}

#[test]
fn a_full_memo_starts_again_without_naming_forgotten_entries() {
    let es: Vec<Entry> = (0..50).map(|k| entry(k, k as f64, 0.0, 1.0, 0)).collect();
    let logged = [Logged::New(0, es.clone()), Logged::New(0, es)];
    let (refs, plain) = encode(&logged, 10);
    let mut resolved = refs.clone();
    resolve(&mut resolved, VARINT).unwrap();
    assert_eq!(resolved, plain);
    // The memo holding 10 entries could name at most 10 of the second record's.
    let full = VARINT.encode_new(0, &[entry(1, 1.0, 0.0, 1.0, 0)]).len() - 3;
    assert!(refs[1].payload.len() > 40 * full, "{}", refs[1].payload.len());
}

#[test]
fn a_memo_is_cleared_for_another_epoch() {
    let mut memo = EntryMemo::with_capacity_bytes(1 << 20);
    memo.for_epoch(1);
    assert!(!memo.note(0, &entry(1, 0.0, 0.0, 1.0, 0)));
    assert!(memo.note(0, &entry(1, 0.0, 0.0, 1.0, 0)));
    assert_eq!(memo.len(), 1);
    memo.for_epoch(1);
    assert_eq!(memo.len(), 1);
    memo.for_epoch(2);
    assert!(memo.is_empty());
    assert!(!memo.note(0, &entry(1, 0.0, 0.0, 1.0, 0)));
}

fn arb_entry(keys: u64) -> impl Strategy<Value = Entry> {
    (0..keys, 0usize..4, 0usize..3).prop_map(|(key, shape, payload)| {
        // Few shapes per key, so that contents repeat: a point, a small and
        // a large box, and one on a signed zero.
        let x = key as f64 * 0.37 - 5.0;
        let rect = match shape {
            0 => Rect::new(x, 0.5, x, 0.5),
            1 => Rect::new(x, 0.5, x + 1e-4, 0.5 + 2e-4),
            2 => Rect::new(-x, -1e6, 3e7, 1e140),
            _ => Rect::new(-0.0, 0.0, 0.0, 0.0),
        }
        .unwrap();
        Entry {
            key,
            rect,
            payload: payload as u64 * 1_000_000_007,
        }
    })
}

fn arb_logged() -> impl Strategy<Value = Logged> {
    let keys = 40u64;
    prop_oneof![
        (0u16..3, prop::collection::vec(arb_entry(keys), 0..12)).prop_map(|(l, mut es)| {
            es.sort_by_key(|e| e.key);
            es.dedup_by_key(|e| e.key);
            Logged::New(l, es)
        }),
        (
            0u16..3,
            prop::collection::vec(
                prop_oneof![
                    arb_entry(keys).prop_map(EntryChange::Upsert),
                    (0..keys).prop_map(EntryChange::Remove),
                ],
                0..12
            )
        )
            .prop_map(|(l, cs)| Logged::Mod(l, cs)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn resolving_gives_the_plain_payloads(
        logged in prop::collection::vec(arb_logged(), 0..30),
        memo_entries in 1usize..60,
    ) {
        let (refs, plain) = encode(&logged, memo_entries);
        let mut resolved = refs;
        resolve(&mut resolved, VARINT).unwrap();
        prop_assert_eq!(&resolved, &plain);
    }

    #[test]
    fn truncated_or_garbage_payloads_are_errors_not_panics(
        logged in prop::collection::vec(arb_logged(), 1..6),
        garbage in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        let (refs, _) = encode(&logged, 100);
        for r in &refs {
            for cut in 0..r.payload.len() {
                let mut short = refs.clone();
                if let Some(x) = short.iter_mut().find(|x| x.page == r.page) {
                    x.payload.truncate(cut);
                }
                prop_assert!(resolve(&mut short, VARINT).is_err());
            }
        }
        for kind in [RecordKind::New, RecordKind::Mod] {
            let _ = resolve(&mut [Record::new(kind, 1, 1, garbage.clone())], VARINT);
        }
    }
}

/// A compact log with entry references on a memory device.
fn refs_log(entry_refs: bool) -> (std::sync::Arc<crate::storage::mem::MemDevice>, crate::store::log::LogConfig) {
    let dev = std::sync::Arc::new(crate::storage::mem::MemDevice::new(1024, 2 + 2 * 96).unwrap());
    let config = crate::store::log::LogConfig::new(42)
        .with_format(crate::store::log::LogFormat::Compact)
        .with_entry_refs(entry_refs);
    (dev, config)
}

#[test]
fn references_survive_restart_and_compaction_and_only_logs_asking_for_them_hold_them() {
    use crate::store::log::Log;
    let a = entry(10, 0.5, 0.5, 0.01, 0);
    let b = entry(11, 0.6, 0.5, 0.0, 0);
    let logged = [
        Logged::New(0, vec![a, b]),
        Logged::Mod(0, vec![EntryChange::Remove(10)]),
        Logged::New(0, vec![a]),
        Logged::Mod(0, vec![EntryChange::Upsert(b)]),
    ];
    let (refs, plain) = encode(&logged, 100);
    let (dev, config) = refs_log(true);
    let mut log = Log::create(dev.clone(), 0, 2 + 2 * 96, config).unwrap();
    assert!(log.entry_refs());
    for r in refs {
        log.append(r).unwrap();
    }
    log.commit(7).unwrap();
    log.sync().unwrap();
    drop(log);
    let payloads = |recs: &[Record]| -> Vec<Vec<u8>> {
        recs.iter()
            .filter(|r| matches!(r.kind, RecordKind::New | RecordKind::Mod))
            .map(|r| r.payload.clone())
            .collect()
    };
    let want: Vec<Vec<u8>> = plain.iter().map(|r| r.payload.clone()).collect();
    // Restart resolves them, writes the survivors to a fresh region with
    // references of their own, and a second restart reads those the same.
    for _ in 0..2 {
        let (mut log, rec) = Log::open(dev.clone(), 0, 2 + 2 * 96, config).unwrap();
        assert!(log.entry_refs());
        assert_eq!(payloads(&rec.records.all()), want);
        log.compact().unwrap();
    }
    // A log created without them (FAST's) is of version 4 and stays so.
    let (dev, config) = refs_log(false);
    let log = Log::create(dev.clone(), 0, 2 + 2 * 96, config).unwrap();
    assert!(!log.entry_refs());
    drop(log);
    let (log, _) = Log::open(dev, 0, 2 + 2 * 96, config.with_entry_refs(true)).unwrap();
    assert!(!log.entry_refs());
}

#[test]
fn a_varint_flush_list_reads_back_and_refuses_damage() {
    let pages = [3u64, 4, 9, 2, u64::MAX, 0, 100_000];
    let f = Record::flush_varint(&pages);
    assert_eq!(f.flushed_pages().unwrap(), pages);
    // Ascending pages take about a byte each.
    let asc: Vec<u64> = (1000..1100).collect();
    assert!(Record::flush_varint(&asc).payload.len() < 4 + 3 + 100 + 3);
    assert_eq!(Record::flush_varint(&[]).flushed_pages().unwrap(), Vec::<u64>::new());
    for cut in 4..f.payload.len() {
        let mut short = f.clone();
        short.payload.truncate(cut);
        assert!(short.flushed_pages().is_err(), "cut at {cut}");
    }
    let mut long = f.clone();
    long.payload.push(0);
    assert!(long.flushed_pages().is_err());
    // A count larger than the bytes left is refused before allocating.
    let mut huge = crate::store::log::record::FLUSH_VARINT.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(Record::new(RecordKind::Flush, 0, 0, huge).flushed_pages().is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn varint_flush_lists_round_trip(pages in prop::collection::vec(any::<u64>(), 0..40)) {
        prop_assert_eq!(Record::flush_varint(&pages).flushed_pages().unwrap(), pages);
    }

    #[test]
    fn flush_payload_garbage_never_panics(b in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut p = crate::store::log::record::FLUSH_VARINT.to_le_bytes().to_vec();
        p.extend_from_slice(&b);
        let _ = Record::new(RecordKind::Flush, 0, 0, p).flushed_pages();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Version 5 writes each header as differences to the previous one;
    /// decoding the stream in order restores every field.
    #[test]
    fn header_deltas_restore_every_field(
        steps in prop::collection::vec((1u64..1_000_000, any::<u64>(), any::<u64>(), 0usize..40), 1..40),
    ) {
        use crate::store::log::record::{decode_framed, Decoded, Framing, HeaderDeltas};
        let mut lsn = 0u64;
        let mut recs = Vec::new();
        for (step, op, page, len) in steps {
            lsn += step;
            let mut r = Record::new(RecordKind::Mod, op, page, vec![7; len]);
            r.lsn = lsn;
            recs.push(r);
        }
        let mut w = HeaderDeltas::default();
        let mut stream = Vec::new();
        for r in &recs {
            let wire = w.encode_next(r);
            let before = stream.len();
            r.encode_compact_as(wire, &mut stream).unwrap();
            prop_assert_eq!(stream.len() - before, r.compact_len_as(wire));
        }
        let mut d = HeaderDeltas::default();
        let mut off = 0;
        for r in &recs {
            match decode_framed(&stream[off..], Framing::Compact) {
                Decoded::Record(mut got, len) => {
                    d.decode_next(&mut got);
                    prop_assert_eq!(&got, r);
                    off += len;
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
        prop_assert_eq!(off, stream.len());
    }
}

/// A memo of `bytes` stops at as many entries as a hash map of slots
/// taking at most `bytes` holds: the map a full memo grows into is that
/// one, never the next size up.
#[test]
fn a_memo_holds_the_entries_a_map_within_its_bytes_holds() {
    for bytes in [0, 100, 4 << 10, 1 << 20, 4 << 20, 16 << 20, 256 << 20] {
        let n = super::entries_within(bytes);
        assert!(n >= 1);
        if n == 1 {
            continue;
        }
        let map: crate::page_id::IdMap<super::Content> =
            crate::page_id::IdMap::with_capacity_and_hasher(n, Default::default());
        // hashbrown fills its power-of-two slots to 7/8.
        let slots = map.capacity() / 7 * 8;
        assert_eq!(map.capacity(), n, "{bytes} bytes");
        assert!(slots * super::SLOT_BYTES <= bytes, "{bytes} bytes: {slots} slots");
        assert!(2 * slots * super::SLOT_BYTES > bytes, "{bytes} bytes: the next size would not fit");
    }
}
