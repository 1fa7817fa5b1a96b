//! Tests of [`IndexSpec`]: defaults, every refused combination with the key
//! it blames, the text form, and random settings read back from their text.
use proptest::prelude::*;

use super::{IndexSpec, KeyStyle};
use crate::config::{StoreKind, StoreSpec, StructureSpec, TreeSpec};
use crate::index::{IndexKind, SplitKind};
use crate::store::log::{Durability, LogFormat};
use crate::store::placement::Placement;

/// The tree of options `o` (a test of a tree's settings).
fn tree(o: &crate::IndexOptions) -> TreeSpec {
    match o.structure {
        StructureSpec::Tree(t) => t,
        other => panic!("not a tree: {other:?}"),
    }
}

fn spec(pairs: &[(&str, &str)]) -> IndexSpec {
    let mut s = IndexSpec::new(KeyStyle::Key);
    for (k, v) in pairs {
        s.set(k, v).unwrap();
    }
    s
}

/// The error of `pairs` (set, then lowered): its key and message.
fn refusal(style: KeyStyle, pairs: &[(&str, &str)]) -> (Option<&'static str>, String) {
    let mut s = IndexSpec::new(style);
    for (k, v) in pairs {
        if let Err(e) = s.set(k, v) {
            return (e.key, e.to_string());
        }
    }
    let e = s.options().expect_err("refused");
    (e.key, e.to_string())
}

#[test]
fn an_empty_spec_gives_the_product_defaults() {
    let o = IndexSpec::new(KeyStyle::Key).options().unwrap();
    assert_eq!(tree(&o).kind, IndexKind::RStar);
    assert_eq!(tree(&o).split, SplitKind::Quadratic);
    assert_eq!(o.page_size, 4096);
    assert_eq!(o.store.kind(), StoreKind::Efind);
    assert_eq!(
        o.store.buffer_bytes() as u64,
        crate::defaults::buffer_bytes()
    );
    assert_eq!(o.device, crate::defaults::DEVICE.parse().unwrap());
    assert!(
        matches!(o.store, StoreSpec::Efind(e) if e.efind == crate::store::efind::EfindConfig {
            read_buffer_mode: crate::defaults::READ_BUFFER_MODE,
            ..crate::store::efind::EfindConfig::default()
        })
    );
    // The paper's read buffer stays the store's own default.
    assert_ne!(
        crate::defaults::READ_BUFFER_MODE,
        crate::store::efind::EfindConfig::default().read_buffer_mode
    );
    // The product's forced reinsertion; the paper's stays the tree's own
    // default (the workbench pins it).
    assert_eq!(tree(&o).reinsert_percent, crate::defaults::REINSERT_PERCENT);
    assert_ne!(
        crate::defaults::REINSERT_PERCENT,
        TreeSpec::new(IndexKind::RStar).reinsert_percent
    );
    // The FOR-tree runs on the plain store unless told otherwise.
    let f = spec(&[("kind", "fortree")]).options().unwrap();
    assert_eq!(f.store.kind(), StoreKind::Plain);
    assert!(matches!(f.structure, StructureSpec::Fortree(_)));
}

#[test]
fn settings_reach_the_options() {
    let o = spec(&[
        ("kind", "hilbert"),
        ("split", "linear"),
        ("page_size", "8KiB"),
        ("reinsert", "20"),
        ("hilbert_domain", "0,0,10,10"),
        ("store", "efind"),
        ("buffer", "1048576"),
        ("buffer_policy", "lru"),
        ("device", "mem:"),
        ("flush_percent", "20"),
        ("flush_policy", "mhao"),
        ("temporal_control", "off"),
        ("log_capacity", "1MiB"),
        ("log_format", "compact"),
        ("group_commit", "64,10"),
        ("crs", "EPSG:4326"),
        ("units", "degree"),
    ])
    .options()
    .unwrap();
    assert_eq!(tree(&o).kind, IndexKind::Hilbert);
    assert_eq!(tree(&o).split, SplitKind::Linear);
    assert_eq!(o.page_size, 8192);
    assert_eq!(tree(&o).reinsert_percent, 20);
    assert_eq!(o.store.buffer_bytes(), 1 << 20);
    assert_eq!(o.device, "mem:".parse().unwrap());
    assert_eq!(o.crs.name, "EPSG:4326");
    assert_eq!(o.crs.units, "degree");
    let StoreSpec::Efind(e) = o.store else {
        panic!("not eFIND: {:?}", o.store)
    };
    assert_eq!(e.policy, crate::cache::PolicyKind::Lru);
    let e = e.efind;
    assert_eq!(e.flush_percent, 20);
    assert!(e.temporal_control.is_none());
    assert_eq!(e.log_capacity, 1 << 20);
    assert_eq!(e.log_format, LogFormat::parse("compact").unwrap());
    assert_eq!(
        e.durability,
        Durability::Group {
            ops: 64,
            millis: 10
        }
    );
    let f = spec(&[
        ("store", "fast"),
        ("policy", "flush-all"),
        ("seed", "9"),
        ("durability", "sync"),
    ])
    .options()
    .unwrap()
    .store;
    let StoreSpec::Fast(f) = f else {
        panic!("not FAST: {f:?}")
    };
    let f = f.fast;
    assert_eq!(f.seed, 9);
    assert_eq!(f.durability, Durability::Sync);
}

#[test]
fn the_checkpoint_interval_defaults_to_the_products_and_parses_units() {
    let interval =
        |pairs: &[(&str, &str)]| spec(pairs).options().unwrap().store.checkpoint_interval();
    let five_min = Some(std::time::Duration::from_secs(300));
    assert_eq!(crate::defaults::CHECKPOINT_INTERVAL, "5min");
    assert_eq!(interval(&[]), five_min);
    assert_eq!(interval(&[("store", "fast")]), five_min);
    assert_eq!(interval(&[("store", "plain")]), None);
    for (text, ms) in [
        ("90", 90_000),
        ("250ms", 250),
        ("1.5s", 1_500),
        ("2min", 120_000),
        ("1h", 3_600_000),
    ] {
        let got = interval(&[("checkpoint_interval", text)]);
        assert_eq!(got, Some(std::time::Duration::from_millis(ms)), "{text}");
    }
    assert_eq!(interval(&[("checkpoint_interval", "off")]), None);
    assert_eq!(interval(&[("checkpoint_interval", "0")]), None);
    // A front end's default (the workbench pins it off) stands until set.
    let mut pinned = IndexSpec::new(KeyStyle::Key);
    pinned.set_default("checkpoint_interval", "off").unwrap();
    assert_eq!(pinned.options().unwrap().store.checkpoint_interval(), None);
    let (k, msg) = refusal(KeyStyle::Flag, &[("checkpoint_interval", "soon")]);
    assert_eq!(k, Some("checkpoint_interval"));
    assert!(
        msg.contains("--checkpoint-interval") && msg.contains("soon"),
        "{msg}"
    );
    let (k, _) = refusal(
        KeyStyle::Key,
        &[("store", "plain"), ("checkpoint_interval", "1min")],
    );
    assert_eq!(k, Some("checkpoint_interval"));
}

/// Settings, the key their refusal blames, and words its message holds.
type Refusal = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static [&'static str],
);

#[test]
fn refused_combinations_name_the_key_in_the_front_ends_spelling() {
    let cases: &[Refusal] = &[
        (
            &[("store", "plain"), ("flush_percent", "10")],
            "flush_percent",
            &[
                "flush_percent applies to store \"efind\"",
                "store \"plain\"",
            ],
        ),
        (
            &[
                ("store", "plain"),
                ("flush_percent", "10"),
                ("flush_policy", "mh"),
            ],
            "flush_percent",
            &["flush_percent, flush_policy apply to store \"efind\""],
        ),
        (
            &[("store", "plain"), ("durability", "sync")],
            "durability",
            &["\"efind\" or \"fast\""],
        ),
        (
            &[("store", "efind"), ("fast_policy", "fast")],
            "fast_policy",
            &["\"fast\""],
        ),
        (
            &[("fortree_write_read_ratio", "3")],
            "fortree_write_read_ratio",
            &["kind fortree"],
        ),
        (
            &[("store", "fast"), ("buffer_policy", "lru")],
            "buffer_policy",
            &["keeps no such buffer"],
        ),
        (&[("buffer", "0")], "buffer", &["no memory"]),
        (
            &[("kind", "fortree"), ("store", "efind")],
            "store",
            &["plain store"],
        ),
        (
            &[("kind", "shrtree"), ("device", "mem:")],
            "device",
            &["hybrid"],
        ),
        (
            &[("durability", "sync"), ("group_commit", "5,5")],
            "group_commit",
            &["goes with"],
        ),
        (&[("max_entries", "5000")], "max_entries", &["does not fit"]),
        (
            &[("min_fill", "0.4"), ("min_entries", "3")],
            "min_fill",
            &["not both"],
        ),
        (
            &[("read_buffer_percent", "100")],
            "read_buffer_percent",
            &["exceeds 99"],
        ),
        (&[("page_size", "3000")], "page_size", &["power of two"]),
        (&[("store", "tape")], "store", &["unknown store"]),
        (&[("kind", "quadtree")], "kind", &["unknown index kind"]),
        (&[("device", "tape:")], "device", &["unknown device"]),
        (
            &[("flush_policy", "lifo")],
            "flush_policy",
            &["flush policy"],
        ),
    ];
    for (pairs, key, wants) in cases {
        let (k, msg) = refusal(KeyStyle::Key, pairs);
        assert_eq!(k, Some(*key), "{pairs:?}: {msg}");
        for w in *wants {
            assert!(msg.contains(w), "{pairs:?}: {msg} (wanted {w})");
        }
    }
    // The command line's spelling.
    let (_, msg) = refusal(
        KeyStyle::Flag,
        &[("store", "plain"), ("log_capacity", "1MiB")],
    );
    assert!(
        msg.contains("--log-capacity") && msg.contains("--store"),
        "{msg}"
    );
    // An unknown key lists the keys.
    let (k, msg) = refusal(KeyStyle::Key, &[("colour", "red")]);
    assert_eq!(k, None);
    assert!(
        msg.contains("unknown index option") && msg.contains("flush_percent"),
        "{msg}"
    );
}

#[test]
fn the_sh_rtree_and_the_min_fill() {
    let o = spec(&[
        ("kind", "shrtree"),
        ("device", "hybrid:fast=(mem:);slow=(mem:)"),
    ])
    .options()
    .unwrap();
    assert_eq!(tree(&o).kind, IndexKind::RStar);
    assert_eq!(o.store.placement(), Placement::SHR_TREE);
    let o = spec(&[("max_entries", "50"), ("min_fill", "0.4")])
        .options()
        .unwrap();
    assert_eq!(tree(&o).min_entries, Some(20));
    let o = spec(&[("min_fill", "0.4")]).options().unwrap();
    let crate::config::StructureConfig::Tree(p) = o.resolve().unwrap() else {
        panic!("not a tree")
    };
    let max = p.max_entries;
    assert_eq!(
        tree(&o).min_entries,
        Some(((0.4 * max as f64).ceil() as usize).max(2))
    );
}

#[test]
fn grid_files_take_their_own_keys_and_refuse_the_trees() {
    use crate::grid::{GridKind, GridSettings};
    let o = spec(&[("kind", "lbgrid"), ("buffer", "1MiB")])
        .options()
        .unwrap();
    assert_eq!(
        o.structure,
        StructureSpec::Grid(GridSettings::new(GridKind::LbGrid))
    );
    assert_eq!(
        o.store.kind(),
        StoreKind::Plain,
        "a grid file has no node store"
    );
    assert_eq!(o.kind_name(), "lbgrid");
    let o = spec(&[
        ("kind", "hgrid"),
        ("device", "hybrid:fast=(mem:);slow=(mem:)"),
        ("grid_queries", "plain"),
        ("grid_dir_share", "0.5"),
        ("grid_cold_pages", "4"),
        ("grid_s", "2"),
        ("grid_special", "on"),
    ])
    .options()
    .unwrap();
    let StructureSpec::Grid(g) = o.structure else {
        panic!("not a grid file: {:?}", o.structure)
    };
    assert_eq!(g.kind, GridKind::HGrid);
    assert!(!g.batched);
    assert_eq!(
        (g.dir_share, g.cold_pages, g.s, g.special),
        (0.5, Some(4), Some(2.0), Some(true))
    );
    for (pairs, key, says) in [
        (
            vec![("kind", "gffm"), ("store", "efind")],
            "store",
            "grid file keeps its own buffers",
        ),
        (
            vec![("kind", "gffm"), ("split", "linear")],
            "split",
            "trees",
        ),
        (
            vec![("kind", "grid"), ("durability", "sync")],
            "durability",
            "trees",
        ),
        (
            vec![("kind", "rstar"), ("grid_queries", "plain")],
            "grid_queries",
            "grid files",
        ),
        (
            vec![("kind", "gffm"), ("grid_s", "2")],
            "grid_s",
            "hgrid only",
        ),
        (
            vec![("kind", "gffm"), ("grid_dir_share", "1.5")],
            "grid_dir_share",
            "(0, 1)",
        ),
        (
            vec![("kind", "gffm"), ("buffer", "8KiB")],
            "buffer",
            "too small",
        ),
        (vec![("kind", "hgrid")], "device", "hybrid device"),
        (
            vec![("kind", "gffm"), ("grid_queries", "sometimes")],
            "grid_queries",
            "plain or batched",
        ),
    ] {
        let (k, msg) = refusal(KeyStyle::Key, &pairs);
        assert_eq!(k, Some(key), "{pairs:?}: {msg}");
        assert!(msg.contains(says), "{pairs:?}: {msg}");
    }
}

/// A front end's defaults stand for the keys it leaves unset, where they
/// apply: a default store leaves the FOR-tree and a grid file on the plain
/// store, a default buffer policy is no setting of the FAST store, a key
/// given wins, and a default is no setting of the text form.
#[test]
fn front_end_defaults_apply_where_their_key_does() {
    let with = |pairs: &[(&str, &str)]| {
        let mut s = spec(pairs);
        for (k, v) in [
            ("store", "plain"),
            ("buffer", "64KiB"),
            ("device", "mem:"),
            ("buffer_policy", "lru"),
        ] {
            s.set_default(k, v).unwrap();
        }
        s
    };
    let o = with(&[]).options().unwrap();
    assert_eq!(o.store.kind(), StoreKind::Plain);
    assert_eq!(o.store.buffer_bytes(), 64 * 1024);
    assert_eq!(o.device, "mem:".parse().unwrap());
    assert!(matches!(o.store, StoreSpec::Plain(p) if p.policy == crate::cache::PolicyKind::Lru));
    assert_eq!(with(&[]).to_string(), "");
    assert_eq!(with(&[]).get("store"), None);
    // given keys win; the FAST store takes no buffer policy, and the
    // default one is not refused
    let o = with(&[("store", "fast"), ("buffer", "1MiB")])
        .options()
        .unwrap();
    assert_eq!(
        (o.store.kind(), o.store.buffer_bytes()),
        (StoreKind::Fast, 1 << 20)
    );
    // a default eFIND store leaves the FOR-tree and the grid files on the plain store
    let mut s = spec(&[("kind", "fortree")]);
    s.set_default("store", "efind").unwrap();
    assert_eq!(s.options().unwrap().store.kind(), StoreKind::Plain);
    let mut s = spec(&[("kind", "gffm"), ("hilbert_domain", "0,0,1,1")]);
    s.set_default("store", "efind").unwrap();
    s.set_default("split", "linear").unwrap();
    assert!(matches!(
        s.options().unwrap().structure,
        StructureSpec::Grid(_)
    ));
    // ... while the default reaches the trees
    let mut s = spec(&[("kind", "rtree")]);
    s.set_default("store", "fast").unwrap();
    s.set_default("split", "linear").unwrap();
    let o = s.options().unwrap();
    assert_eq!(
        (o.store.kind(), tree(&o).split),
        (StoreKind::Fast, SplitKind::Linear)
    );
    // defaults are checked as settings are
    let e = IndexSpec::new(KeyStyle::Key)
        .set_default("store", "tape")
        .unwrap_err();
    assert_eq!(e.key, Some("store"));
    assert!(IndexSpec::new(KeyStyle::Key)
        .set_default("colour", "red")
        .is_err());
}

/// The memory store: given, it takes no budget, buffer policy, placement
/// or log setting and only the `mem:` device; as a front end's default (an
/// index in memory) it applies on `mem:` given none of those, and the
/// plain store takes the others.
#[test]
fn the_memory_store_and_where_its_default_applies() {
    let memory = |pairs: &[(&str, &str)]| {
        let mut s = spec(pairs);
        for (k, v) in [("store", "memory"), ("buffer", "1GiB"), ("device", "mem:")] {
            s.set_default(k, v).unwrap();
        }
        s.options()
    };
    let o = memory(&[]).unwrap();
    assert_eq!(
        (o.store.kind(), o.store.buffer_bytes()),
        (StoreKind::Memory, 0)
    );
    assert_eq!(o.device, "mem:".parse().unwrap());
    for kind in ["rtree", "rstar", "xbr"] {
        assert_eq!(
            memory(&[("kind", kind)]).unwrap().store.kind(),
            StoreKind::Memory,
            "{kind}"
        );
    }
    // the default leaves to the plain store what only a store with a device does
    for given in [
        ("buffer", "64KiB"),
        ("buffer_policy", "lru"),
        ("device", "flashsim:preset=seed-tc58"),
        ("kind", "fortree"),
    ] {
        assert_eq!(
            memory(&[given]).unwrap().store.kind(),
            StoreKind::Plain,
            "{given:?}"
        );
    }
    assert_eq!(
        memory(&[("buffer", "64KiB")]).unwrap().store.buffer_bytes(),
        64 * 1024
    );
    // given, it refuses them, naming the key
    for (given, key) in [
        (("buffer", "64KiB"), "buffer"),
        (("buffer_policy", "lru"), "buffer_policy"),
        (("durability", "sync"), "durability"),
        (("device", "file"), "device"),
    ] {
        let e = spec(&[("store", "memory"), ("device", "mem:"), given]).options();
        let e = e.unwrap_err();
        assert_eq!(e.key, Some(key), "{given:?}: {e}");
        assert!(e.to_string().contains("memory"), "{given:?}: {e}");
    }
    let e = spec(&[("store", "memory")]).options().unwrap_err();
    assert_eq!(e.key, Some("device"), "the default device is a file: {e}");
    assert!(
        spec(&[("store", "memory"), ("kind", "gffm"), ("device", "mem:")])
            .options()
            .is_err()
    );
    assert_eq!("memory".parse::<StoreKind>().unwrap(), StoreKind::Memory);
    assert!(IndexSpec::store_keys(StoreKind::Memory).is_empty());
}

/// The names the `kind` key takes and the key groups a front end asks for.
#[test]
fn kinds_and_key_groups() {
    let kinds = IndexSpec::kinds();
    for k in &kinds {
        spec(&[("kind", k)]);
    }
    assert!(
        kinds.contains(&"shrtree") && kinds.contains(&"hgrid"),
        "{kinds:?}"
    );
    assert_eq!(kinds.len(), crate::config::KIND_NAMES.len() + 1);
    let e = refusal(KeyStyle::Key, &[("kind", "quadtree")]).1;
    assert!(e.contains(&kinds.join(", ")), "{e}");
    assert!(IndexSpec::store_keys(StoreKind::Plain).is_empty());
    for (store, own, other) in [
        (StoreKind::Efind, "flush_policy", "fast_policy"),
        (StoreKind::Fast, "fast_policy", "flush_policy"),
    ] {
        let keys = IndexSpec::store_keys(store);
        assert!(keys.contains(&own) && keys.contains(&"durability") && !keys.contains(&other));
    }
    assert_eq!(IndexSpec::key("reinsert"), Some("reinsert_percent"));
    assert_eq!(IndexSpec::key("policy"), Some("fast_policy"));
    assert_eq!(IndexSpec::key("colour"), None);
    assert!(IndexSpec::GRID_KEYS.iter().all(|k| k.starts_with("grid_")));
}

#[test]
fn text_form_reads_back() {
    let text = "kind=hilbert,hilbert_domain=0,0,1,1,store=fast,buffer=64KiB,fast_policy=flush-all";
    let s: IndexSpec = text.parse().unwrap();
    assert_eq!(s.get("hilbert_domain"), Some("0,0,1,1"));
    assert_eq!(s.get("policy"), Some("flush-all"));
    let again: IndexSpec = s.to_string().parse().unwrap();
    assert_eq!(again.options().unwrap(), s.options().unwrap());
    assert_eq!(again.to_string(), s.to_string());
    assert!("".parse::<IndexSpec>().unwrap().options().is_ok());
    assert!("store".parse::<IndexSpec>().is_err());
    assert!("colour=red".parse::<IndexSpec>().is_err());
}

fn setting() -> impl Strategy<Value = (&'static str, String)> {
    prop_oneof![
        prop::sample::select(vec!["rtree", "rstar", "hilbert"])
            .prop_map(|v| ("kind", v.to_string())),
        prop::sample::select(vec!["linear", "quadratic", "exponential"])
            .prop_map(|v| ("split", v.to_string())),
        prop::sample::select(vec!["1KiB", "2048", "4KiB", "8KiB"])
            .prop_map(|v| ("page_size", v.to_string())),
        (0u8..60).prop_map(|v| ("reinsert_percent", v.to_string())),
        prop::sample::select(vec!["plain", "efind", "fast"]).prop_map(|v| ("store", v.to_string())),
        prop::sample::select(vec!["64KiB", "512KiB", "8MiB"])
            .prop_map(|v| ("buffer", v.to_string())),
        prop::sample::select(vec!["mem:", "file", "file?direct=false"])
            .prop_map(|v| ("device", v.to_string())),
        (1u8..=100).prop_map(|v| ("flush_percent", v.to_string())),
        prop::sample::select(vec!["sync", "none", "group", "group:8,5"])
            .prop_map(|v| ("durability", v.to_string())),
        prop::sample::select(vec!["on", "off"]).prop_map(|v| ("temporal_control", v.to_string())),
        (0usize..3).prop_map(|v| ("temporal_queues", v.to_string())),
        (0u64..1000).prop_map(|v| ("seed", v.to_string())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Any settings: the text form reads back to the same settings, and
    /// either both lower to the same options or both are refused for the
    /// same key.
    #[test]
    fn random_settings_read_back(settings in prop::collection::vec(setting(), 0..8)) {
        let mut s = IndexSpec::new(KeyStyle::Key);
        for (k, v) in &settings {
            s.set(k, v).unwrap();
        }
        let again: IndexSpec = s.to_string().parse().unwrap();
        prop_assert_eq!(again.to_string(), s.to_string());
        match (s.options(), again.options()) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.key, b.key),
            (a, b) => prop_assert!(false, "{:?} vs {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }
}

/// Every setting of the table is parsed by `set` (a value that is no value
/// of it is refused, naming its key and, in the message, its flag), so a row added to
/// `SETTINGS` without its parse fails here rather than being ignored.
#[test]
fn every_setting_of_the_table_is_parsed_by_set() {
    for s in IndexSpec::SETTINGS {
        if matches!(s.key, "crs" | "units") {
            continue; // free text
        }
        let (key, msg) = refusal(KeyStyle::Flag, &[(s.key, "%%")]);
        assert_eq!(key, Some(s.key), "{}: {msg}", s.key);
        let flag = KeyStyle::Flag.spell(s.key);
        assert!(msg.contains(&flag), "the message names {flag}: {msg}");
        for alias in s.aliases {
            let (key, _) = refusal(KeyStyle::Key, &[(alias, "%%")]);
            assert_eq!(key, Some(s.key), "alias {alias}");
        }
    }
}

/// `temporal_queues` sets the length of both of temporal control's queues,
/// and is refused where it means nothing: 0, temporal control off, a store
/// other than eFIND.
#[test]
fn temporal_queues_sets_both_queues_of_temporal_control() {
    let o = spec(&[("store", "efind"), ("temporal_queues", "16")])
        .options()
        .unwrap();
    let StoreSpec::Efind(e) = o.store else {
        panic!("not eFIND: {:?}", o.store)
    };
    let tc = e
        .efind
        .temporal_control
        .expect("temporal control is on by default");
    assert_eq!((tc.rq_capacity, tc.wq_capacity), (16, 16));
    let on = crate::store::efind::TemporalControl::default();
    assert_eq!(
        (on.seq_distance, on.stride_distance),
        (tc.seq_distance, tc.stride_distance)
    );
    for (pairs, says) in [
        (&[("temporal_queues", "0")][..], "--temporal-queues 0"),
        (
            &[("temporal_control", "off"), ("temporal_queues", "8")][..],
            "drop --temporal-control off",
        ),
        (
            &[("store", "fast"), ("temporal_queues", "8")][..],
            "--temporal-queues",
        ),
    ] {
        let (key, msg) = refusal(KeyStyle::Flag, pairs);
        assert_eq!(key, Some("temporal_queues"), "{msg}");
        assert!(msg.contains(says), "{msg}");
    }
}

/// A device not given is named in messages as the product default is
/// written (`file?direct=false`), not as its parsed form prints.
#[test]
fn a_device_not_given_is_named_as_the_default_is_written() {
    let (key, msg) = refusal(KeyStyle::Flag, &[("kind", "hgrid")]);
    assert_eq!(key, Some("device"), "{msg}");
    let named = format!("device {:?} has one tier", crate::defaults::DEVICE);
    assert!(msg.contains(&named), "{msg}");
}
