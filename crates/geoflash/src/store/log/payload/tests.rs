//! Tests of the payload codec: round trips in both encodings, the byte
//! layout of the fixed encoding, FAST's layouts before codec version 1, and
//! damaged payloads (errors, never panics).
use proptest::prelude::*;

use super::*;
use crate::store::log::RecordKind;

const FIXED: PayloadCodec = PayloadCodec::new(PayloadEncoding::Fixed);
const VARINT: PayloadCodec = PayloadCodec::new(PayloadEncoding::Varint);
const LEGACY: PayloadCodec = FIXED.reading_legacy_fast(true);

fn rec(kind: RecordKind, payload: Vec<u8>) -> Record {
    Record::new(kind, 1, 9, payload)
}

fn e(k: u64) -> Entry {
    Entry {
        key: k,
        rect: Rect::new(k as f64, -1.5, k as f64 + 1.0, 2.0).unwrap(),
        payload: k * 3,
    }
}

fn meta(root: Option<u64>, height: u16, records: u64, next_page: u64) -> MetaState {
    MetaState {
        meta: TreeMeta {
            root,
            height,
            records,
        },
        next_page,
    }
}

/// Every decoder of `codec` on `payload` under every record kind; none may panic.
fn decode_all(codec: PayloadCodec, payload: &[u8]) -> [bool; 6] {
    let r = rec(RecordKind::Mod, payload.to_vec());
    [
        codec.decode_new(&r).is_ok(),
        codec.decode_mod(&r).is_ok(),
        codec.decode_del(&r).is_ok(),
        codec.decode_meta(&r).is_ok(),
        codec.decode_meta_reused(&r).is_ok(),
        codec.decode_checkpoint(&r).is_ok(),
    ]
}

#[test]
fn the_fixed_encoding_is_the_byte_layout_of_the_earlier_efind_codec() {
    // NEW: level u16, count u32, key u64, 4 x f64, payload u64.
    let mut want = vec![2, 0, 1, 0, 0, 0];
    want.extend_from_slice(&5u64.to_le_bytes());
    for v in [5.0f64, -1.5, 6.0, 2.0] {
        want.extend_from_slice(&v.to_le_bytes());
    }
    want.extend_from_slice(&15u64.to_le_bytes());
    assert_eq!(FIXED.encode_new(2, &[e(5)]), want);
    // MOD: upsert is tag 1, remove tag 0.
    let m = FIXED.encode_mod(1, &[EntryChange::Upsert(e(5)), EntryChange::Remove(8)]);
    assert_eq!(m[6], 1);
    assert_eq!(m[6 + 1 + 48], 0);
    assert_eq!(m.len(), 6 + 49 + 9);
    // META: root (u64::MAX = none), height, records, next page.
    let none = FIXED.encode_meta(&meta(None, 0, 0, 1));
    assert_eq!(&none[..8], &u64::MAX.to_le_bytes());
    assert_eq!(none.len(), 26);
    // CHECKPOINT: last op, META part, u64 count, pages.
    let c = CheckpointState {
        last_op: 7,
        meta: meta(Some(3), 2, 10, 12),
        free: vec![4, 6],
        client_generation: None,
    };
    assert_eq!(FIXED.encode_checkpoint(&c).len(), 42 + 16);
    // A front end's generation follows the free list.
    let g = CheckpointState {
        client_generation: Some(9),
        ..c.clone()
    };
    assert_eq!(FIXED.encode_checkpoint(&g).len(), 42 + 16 + 8);
    let r = rec(RecordKind::Checkpoint, VARINT.encode_checkpoint(&g));
    assert_eq!(VARINT.decode_checkpoint(&r).unwrap(), g);
}

#[test]
fn fast_layouts_before_codec_version_1_are_read() {
    // Only a codec told to read them reads them.
    let mut meta31 = vec![0u8; 31];
    meta31[0] = 1;
    assert!(FIXED
        .decode_meta_reused(&rec(RecordKind::Meta, meta31.clone()))
        .is_err());
    assert!(LEGACY
        .decode_meta_reused(&rec(RecordKind::Meta, meta31))
        .is_ok());
    // META of FAST before the shared codec: root flag, root, height,
    // records, next page, u32 count, reused pages.
    let mut old = vec![1u8];
    old.extend_from_slice(&3u64.to_le_bytes());
    old.extend_from_slice(&2u16.to_le_bytes());
    old.extend_from_slice(&10u64.to_le_bytes());
    old.extend_from_slice(&12u64.to_le_bytes());
    old.extend_from_slice(&2u32.to_le_bytes());
    old.extend_from_slice(&4u64.to_le_bytes());
    old.extend_from_slice(&6u64.to_le_bytes());
    let got = LEGACY
        .decode_meta_reused(&rec(RecordKind::Meta, old.clone()))
        .unwrap();
    assert_eq!(got, (meta(Some(3), 2, 10, 12), vec![4, 6]));
    // CHECKPOINT: last op, then that META with the free list.
    let mut ck = 77u64.to_le_bytes().to_vec();
    ck.extend_from_slice(&old);
    let got = LEGACY
        .decode_checkpoint(&rec(RecordKind::Checkpoint, ck))
        .unwrap();
    assert_eq!(
        got,
        CheckpointState {
            last_op: 77,
            meta: meta(Some(3), 2, 10, 12),
            free: vec![4, 6],
            client_generation: None,
        }
    );
    // No root, no pages.
    let mut old = vec![0u8; 1 + 8];
    old.extend_from_slice(&0u16.to_le_bytes());
    old.extend_from_slice(&0u64.to_le_bytes());
    old.extend_from_slice(&1u64.to_le_bytes());
    old.extend_from_slice(&0u32.to_le_bytes());
    let got = LEGACY
        .decode_meta_reused(&rec(RecordKind::Meta, old))
        .unwrap();
    assert_eq!(got, (meta(None, 0, 0, 1), vec![]));
    // A bad root flag is an error naming it.
    let mut bad = vec![2u8; 31];
    bad[27..31].copy_from_slice(&0u32.to_le_bytes());
    let err = LEGACY
        .decode_meta_reused(&rec(RecordKind::Meta, bad))
        .unwrap_err();
    assert!(err.to_string().contains("root flag 2"), "{err}");
}

#[test]
fn damage_is_an_error_naming_the_record() {
    let mut bad = FIXED.encode_mod(0, &[EntryChange::Remove(1)]);
    bad[6] = 7;
    let err = FIXED
        .decode_mod(&rec(RecordKind::Mod, bad))
        .unwrap_err()
        .to_string();
    assert!(err.contains("tag 7") && err.contains("log record"), "{err}");
    let desc = FIXED.encode_new(0, &[e(7)]);
    let mut two = desc.clone();
    two[2] = 2;
    two.extend_from_slice(&desc[6..]);
    let err = FIXED.decode_new(&rec(RecordKind::New, two)).unwrap_err();
    assert!(err.to_string().contains("ascending"), "{err}");
    // A count far beyond the bytes is refused before allocating.
    for codec in [FIXED, VARINT] {
        let mut b = codec.encode_new(0, &[]);
        b.truncate(b.len() - 1);
        b.extend_from_slice(&[0xff, 0xff, 0xff, 0x0f]);
        assert!(codec.decode_new(&rec(RecordKind::New, b)).is_err());
    }
    // A varint longer than 64 bits.
    let over = vec![0xffu8; 11];
    assert!(VARINT.decode_del(&rec(RecordKind::Del, over)).is_err());
    // A level beyond 16 bits.
    let big = VARINT.encode_checkpoint(&CheckpointState {
        last_op: 70_000,
        ..CheckpointState::default()
    });
    assert!(VARINT.decode_del(&rec(RecordKind::Del, big)).is_err());
}

#[test]
fn varint_payloads_are_smaller() {
    let entries: Vec<Entry> = (1..50).map(e).collect();
    assert!(VARINT.encode_new(0, &entries).len() < FIXED.encode_new(0, &entries).len());
    let m = meta(Some(5), 3, 1000, 77);
    assert!(VARINT.encode_meta(&m).len() < 10);
}

fn arb_entry() -> impl Strategy<Value = Entry> {
    (
        any::<u64>(),
        -1e9f64..1e9,
        -1e9f64..1e9,
        0f64..1e6,
        0f64..1e6,
        any::<u64>(),
    )
        .prop_map(|(key, x, y, w, h, payload)| Entry {
            key,
            rect: Rect::new(x, y, x + w, y + h).unwrap(),
            payload,
        })
}

fn arb_entries() -> impl Strategy<Value = Vec<Entry>> {
    prop::collection::vec(arb_entry(), 0..20).prop_map(|mut v| {
        v.sort_by_key(|e| e.key);
        v.dedup_by_key(|e| e.key);
        v
    })
}

fn arb_change() -> impl Strategy<Value = EntryChange> {
    prop_oneof![
        arb_entry().prop_map(EntryChange::Upsert),
        any::<u64>().prop_map(EntryChange::Remove),
    ]
}

fn arb_meta() -> impl Strategy<Value = MetaState> {
    (
        prop::option::of(any::<u64>()),
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(root, h, r, n)| {
            // u64::MAX stands for "no root" in the fixed encoding.
            meta(root.filter(|&r| r != u64::MAX), h, r, n)
        })
}

fn arb_codec() -> impl Strategy<Value = PayloadCodec> {
    prop_oneof![Just(FIXED), Just(VARINT)]
}

/// What the payloads of every record kind are made of.
#[derive(Debug, Clone)]
struct Parts {
    codec: PayloadCodec,
    level: u16,
    entries: Vec<Entry>,
    changes: Vec<EntryChange>,
    m: MetaState,
    pages: Vec<u64>,
}

/// [`Parts`] in either codec, with `changes` changes and `pages` page numbers.
fn arb_parts(
    changes: std::ops::Range<usize>,
    pages: std::ops::Range<usize>,
) -> impl Strategy<Value = Parts> {
    (
        arb_codec(),
        any::<u16>(),
        arb_entries(),
        prop::collection::vec(arb_change(), changes),
        arb_meta(),
        prop::collection::vec(any::<u64>(), pages),
    )
        .prop_map(|(codec, level, entries, changes, m, pages)| Parts {
            codec,
            level,
            entries,
            changes,
            m,
            pages,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn payloads_round_trip(parts in arb_parts(0..20, 0..20), last_op in any::<u64>()) {
        let Parts { codec, level, entries, changes, m, pages } = parts;
        let r = rec(RecordKind::New, codec.encode_new(level, &entries));
        prop_assert_eq!(codec.decode_new(&r).unwrap(), (level, entries));
        let r = rec(RecordKind::Mod, codec.encode_mod(level, &changes));
        prop_assert_eq!(codec.decode_mod(&r).unwrap(), (level, changes));
        let r = rec(RecordKind::Del, codec.encode_del(level));
        prop_assert_eq!(codec.decode_del(&r).unwrap(), level);
        let r = rec(RecordKind::Meta, codec.encode_meta(&m));
        prop_assert_eq!(codec.decode_meta(&r).unwrap(), m.clone());
        let r = rec(RecordKind::Meta, codec.encode_meta_reused(&m, &pages));
        prop_assert_eq!(codec.decode_meta_reused(&r).unwrap(), (m.clone(), pages.clone()));
        let client_generation = (last_op % 3 != 0).then_some(last_op / 3 + 1);
        let c = CheckpointState { last_op, meta: m, free: pages, client_generation };
        let r = rec(RecordKind::Checkpoint, codec.encode_checkpoint(&c));
        prop_assert_eq!(codec.decode_checkpoint(&r).unwrap(), c);
    }

    #[test]
    fn truncated_payloads_are_errors(parts in arb_parts(1..6, 0..6)) {
        let Parts { codec, level, entries, changes, m, pages } = parts;
        let c = CheckpointState { last_op: 3, meta: m.clone(), free: pages.clone(), client_generation: None };
        type Dec = fn(PayloadCodec, &Record) -> bool;
        let cases: [(Vec<u8>, Dec); 6] = [
            (codec.encode_new(level, &entries), |c, r| c.decode_new(r).is_ok()),
            (codec.encode_mod(level, &changes), |c, r| c.decode_mod(r).is_ok()),
            (codec.encode_del(level), |c, r| c.decode_del(r).is_ok()),
            (codec.encode_meta(&m), |c, r| c.decode_meta(r).is_ok()),
            (codec.encode_meta_reused(&m, &pages), |c, r| c.decode_meta_reused(r).is_ok()),
            (codec.encode_checkpoint(&c), |c, r| c.decode_checkpoint(r).is_ok()),
        ];
        for (payload, ok) in cases {
            for cut in 0..payload.len() {
                let r = rec(RecordKind::Mod, payload[..cut].to_vec());
                prop_assert!(!ok(codec, &r), "a prefix of {} bytes of {} decoded", cut, payload.len());
            }
            let mut long = payload.clone();
            long.push(0);
            prop_assert!(!ok(codec, &rec(RecordKind::Mod, long)));
        }
    }

    #[test]
    fn garbage_never_panics(b in prop::collection::vec(any::<u8>(), 0..200)) {
        for codec in [FIXED, VARINT, LEGACY] {
            let _ = decode_all(codec, &b);
        }
    }
}
