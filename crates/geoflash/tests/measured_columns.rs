//! Every metric the results schema documents for this issue is measured: a
//! small workload (an R*-tree on eFIND over the flash simulator, built by
//! insertion, half deleted, queried with refinement, reopened) makes each of
//! them non-zero. A column that is documented but never set fails here.
use geoflash::engine::{StoreSpec, StructureSpec, TreeSpec};
use geoflash::index::IndexKind;
use geoflash::manifest::Access;
use geoflash::metrics::{BatchClock, Stats};
use geoflash::store::efind::EfindConfig;
use geoflash::store::log::Durability;
use geoflash::{Index, IndexOptions};

/// Pseudo-random small boxes in [0, 1000)², deterministic.
fn boxes(n: u64) -> Vec<(u64, [f64; 4])> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1_000_000) as f64 / 1000.0
    };
    (0..n)
        .map(|id| {
            let (a, b) = (next(), next());
            (
                id,
                [a, b, a + 1.0 + next() / 200.0, b + 1.0 + next() / 200.0],
            )
        })
        .collect()
}

fn polygon(r: &[f64; 4]) -> geoflash::objects::Geometry {
    geo::Geometry::Polygon(geo::Polygon::new(
        geo::LineString::from(vec![
            (r[0], r[1]),
            (r[2], r[1]),
            (r[2], r[3]),
            (r[0], r[3]),
            (r[0], r[1]),
        ]),
        vec![],
    ))
}

#[test]
fn every_documented_column_is_measured_on_a_workload_that_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idx");
    let page_size = 1024;
    let efind = EfindConfig {
        durability: Durability::Group { ops: 8, millis: 50 },
        ..EfindConfig::default()
    };
    // The smallest log the store accepts, so that it compacts.
    let efind = EfindConfig {
        log_capacity: efind.min_log_capacity(page_size),
        ..efind
    };
    let opts = IndexOptions {
        structure: StructureSpec::Tree(TreeSpec {
            max_entries: Some(8),
            ..TreeSpec::new(IndexKind::RStar)
        }),
        page_size,
        device: "flashsim:preset=seed-tc58".parse().unwrap(),
        store: StoreSpec::efind(8 * 1024, efind),
        ..IndexOptions::default()
    };
    let data = boxes(600);
    let mut total = Stats::new("all");

    // Build by insertion (splits, forced reinsertions, flushes, log, compaction).
    let clock = BatchClock::start();
    let mut index = Index::create(&path, &opts).unwrap();
    for (id, r) in &data {
        index.insert_object(*id, &polygon(r)).unwrap();
    }
    // Deletes (CondenseTree: merges and reinsertions).
    for (id, _) in data.iter().step_by(2).take(250) {
        index.delete_object(*id).unwrap();
    }
    // Queries with refinement (filter and refinement steps).
    for w in 0..20 {
        let x = w as f64 * 45.0;
        let window = geoflash::geom::Rect::new(x, x, x + 120.0, x + 120.0).unwrap();
        index
            .query_refined(window, geoflash::index::query::Predicate::Intersects)
            .unwrap();
    }
    index.checkpoint().unwrap();
    let mut s = index.stats("work");
    clock.finish(&mut s);
    total.merge(&s);
    index.close().unwrap();

    // Reopening for writing runs the store's restart (recovery), which
    // reads the log on the simulated device.
    let reopened = Index::open(&path, Access::Write).unwrap();
    assert!(reopened.restart_report().is_some());
    total.merge(&reopened.stats("recover"));
    drop(reopened);

    let cols = total.to_columns();
    let value = |name: &str| {
        cols.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{name} is not a column"))
    };
    let phases = [
        "index",
        "filter",
        "refinement",
        "read",
        "write",
        "flush",
        "log",
        "compaction",
        "recovery",
    ];
    let mut must: Vec<String> = vec![
        "cpu_time_ns".into(),
        "splits".into(),
        "reinsertions".into(),
        "merges".into(),
        "node_reads".into(),
        "node_writes".into(),
    ];
    for p in phases {
        must.push(format!("wall_{p}_ns"));
        must.push(format!("cpu_{p}_ns"));
        // Refinement reads the object heap, a file: no simulated time.
        if p != "refinement" {
            must.push(format!("sim_{p}_ns"));
        }
    }
    let zero: Vec<&String> = must
        .iter()
        .filter(|c| value(c).as_u64().unwrap_or(0) == 0)
        .collect();
    assert!(zero.is_empty(), "documented but zero: {zero:?}");
    // No phase column the schema would not document.
    assert!(cols.iter().all(|(k, _)| *k != "sim_refinement_ns"));
    // Per-level counts: leaves and at least one internal level, summing to the totals.
    for (levels, sum) in [
        (&total.node_reads_by_level, total.node_reads),
        (&total.node_writes_by_level, total.node_writes),
    ] {
        assert!(levels.len() >= 2, "{levels:?}");
        assert!(levels.iter().take(2).all(|&n| n > 0), "{levels:?}");
        assert_eq!(levels.iter().sum::<u64>(), sum);
    }
}
