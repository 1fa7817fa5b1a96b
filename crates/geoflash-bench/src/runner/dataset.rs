//! Datasets for the runner: read once per run (a generator's output, a
//! file, a PostGIS table), then put in each configuration's insertion order.
use std::collections::HashMap;

use geoflash::geom::Rect;
use geoflash::{Error, Result};

use crate::generate;
use crate::workload::{DatasetConfig, DatasetSource};

/// Datasets read so far, by name, in their source's order.
pub(super) type DatasetCache = HashMap<String, std::sync::Arc<Vec<(u64, Rect)>>>;

/// The records of a dataset in its insertion order.
pub(super) fn load_dataset(
    d: &DatasetConfig,
    cache: &mut DatasetCache,
) -> Result<Vec<(u64, Rect)>> {
    let base = source_records(d, cache)?;
    let rects: Vec<Rect> = base.iter().map(|(_, r)| *r).collect();
    let perm = generate::order(&rects, d.order, d.seed)?;
    Ok(perm.iter().filter_map(|&i| base.get(i).copied()).collect())
}

/// The records of a dataset in its source's order (read once, then cached).
pub(super) fn source_records(
    d: &DatasetConfig,
    cache: &mut DatasetCache,
) -> Result<std::sync::Arc<Vec<(u64, Rect)>>> {
    Ok(match cache.get(&d.name) {
        Some(b) => b.clone(),
        None => {
            let recs: Vec<(u64, Rect)> = match &d.source {
                DatasetSource::Generator(p) => generate::generate(p)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| (i as u64, r))
                    .collect(),
                DatasetSource::File(path) => crate::import::read_rects(path)?,
                DatasetSource::Layer { file, layer } => {
                    let opts = crate::import::ReadOptions {
                        layer: Some(layer.clone()),
                        ..Default::default()
                    };
                    crate::import::read_rects_with(file, &opts)?
                }
                #[cfg(feature = "postgres")]
                DatasetSource::Postgis(src) => crate::postgis::read_rects(src)?,
                #[cfg(not(feature = "postgres"))]
                DatasetSource::Postgis(src) => return Err(crate::pg::unsupported(&src.url)),
            };
            if recs.is_empty() {
                return Err(Error::invalid(format!("dataset {:?} is empty", d.name)));
            }
            let arc = std::sync::Arc::new(recs);
            cache.insert(d.name.clone(), arc.clone());
            arc
        }
    })
}

/// The name of a dataset's insertion order, as workload files write it.
pub(super) fn order_name(d: &DatasetConfig) -> String {
    serde_json::to_value(d.order)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}
