//! Device spec strings, the same in the CLI, workload files and Python:
//!
//! | spec | device |
//! |---|---|
//! | `file` | the index directory's own file (the caller supplies the path), direct I/O |
//! | `file:PATH?direct=true\|false&engine=auto\|uring\|psync&capacity=SIZE` | a file; defaults `direct=true`, `engine=auto` |
//! | `file?direct=…&engine=…` | the index directory's own file, with options |
//! | `mem:` or `mem:capacity=SIZE` | [`MemDevice`](super::mem::MemDevice) |
//! | `flashsim:preset=NAME&key=value…` | [`FlashSim`](super::flashsim::FlashSim); keys in [`FlashSimConfig::set`](super::flashsim::FlashSimConfig::set) |
//! | `hddsim:preset=NAME&key=value…` | [`HddSim`](super::hddsim::HddSim); keys in [`HddSimConfig::set`](super::hddsim::HddSimConfig::set) |
//! | `hybrid:fast=(SPEC);slow=(SPEC)[&fast_pages=N]` | [`HybridDevice`](super::hybrid::HybridDevice): two tiers given as specs in parentheses; `fast_pages` caps the pages the fast tier holds |
//!
//! Inside a hybrid spec a plain `file` tier is the index directory's file
//! for the slow tier and the same name with `.fast` before its extension
//! (`pages.fast.dat`) for the fast tier. The thesis' tiers are the presets
//! `flashsim:preset=xpoint` (3D XPoint: read 7 µs, write 18 µs) and
//! `flashsim:preset=p3700` (flash: read 120 µs, write 30 µs), e.g.
//! `hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)&fast_pages=4096`.
//!
//! `SIZE` accepts the forms of [`parse_size`](crate::units::parse_size).
//! A `capacity` is a size in bytes, rounded down to whole pages.
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::file::{FileDevice, FileDeviceOptions, IoEngine};
use super::flashsim::{FlashSim, FlashSimConfig};
use super::hddsim::{HddSim, HddSimConfig};
use super::hybrid::HybridDevice;
use super::mem::MemDevice;
use super::PageDevice;
use crate::units::{check_page_size, parse_size};
use crate::{Error, Result};

/// A parsed device spec string.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceSpec {
    /// A file device.
    File {
        /// Path of the file; `None` for plain `file` (the caller's default path).
        path: Option<PathBuf>,
        /// `O_DIRECT` on or off.
        direct: bool,
        /// I/O engine.
        engine: IoEngine,
        /// Logical capacity in bytes (`None` for the device's default).
        capacity: Option<u64>,
    },
    /// An in-memory device.
    Mem {
        /// Logical capacity in bytes (`None` for the default).
        capacity: Option<u64>,
    },
    /// The NAND flash simulator, with a preset and overrides in the order given.
    FlashSim {
        /// The `key=value` pairs, `preset` included.
        params: Vec<(String, String)>,
    },
    /// The magnetic disk model, with a preset and overrides in the order given.
    HddSim {
        /// The `key=value` pairs, `preset` included.
        params: Vec<(String, String)>,
    },
    /// Two tiers: a fast one and a slow one.
    Hybrid {
        /// The fast tier's spec.
        fast: Box<DeviceSpec>,
        /// The slow tier's spec.
        slow: Box<DeviceSpec>,
        /// Pages the fast tier may hold (`None`: its capacity).
        fast_pages: Option<u64>,
    },
}

/// The text inside the parentheses that open `s`, and what follows the
/// closing one; parentheses nest.
fn take_parenthesized<'a>(spec: &str, key: &str, s: &'a str) -> Result<(&'a str, &'a str)> {
    let err = || {
        Error::invalid(format!(
            "device spec {spec:?}: {key}= must be followed by a spec in parentheses, e.g. {key}=(mem:)"
        ))
    };
    let rest = s.strip_prefix('(').ok_or_else(err)?;
    let mut depth = 1usize;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok((&rest[..i], &rest[i + 1..]));
                }
            }
            _ => {}
        }
    }
    Err(err())
}

/// Parses the part of a hybrid spec after `hybrid:`.
fn parse_hybrid(spec: &str, rest: &str) -> Result<DeviceSpec> {
    let mut fast = None;
    let mut slow = None;
    let mut fast_pages = None;
    let mut s = rest.trim();
    while !s.is_empty() {
        let (key, after) = s.split_once('=').ok_or_else(|| {
            Error::invalid(format!(
                "device spec {spec:?}: expected fast=(SPEC);slow=(SPEC)[&fast_pages=N], found {s:?}"
            ))
        })?;
        let key = key.trim();
        match key {
            "fast" | "slow" => {
                let (inner, tail) = take_parenthesized(spec, key, after.trim_start())?;
                let inner = DeviceSpec::parse(inner).map_err(|e| {
                    Error::invalid(format!("device spec {spec:?}: {key} tier: {e}"))
                })?;
                if matches!(inner, DeviceSpec::Hybrid { .. }) {
                    return Err(Error::invalid(format!(
                        "device spec {spec:?}: a hybrid tier cannot itself be hybrid"
                    )));
                }
                let slot = if key == "fast" { &mut fast } else { &mut slow };
                if slot.replace(Box::new(inner)).is_some() {
                    return Err(Error::invalid(format!(
                        "device spec {spec:?}: {key} given twice"
                    )));
                }
                s = tail.trim_start();
            }
            "fast_pages" => {
                let (v, tail) = match after.find(['&', ';']) {
                    Some(i) => (&after[..i], &after[i..]),
                    None => (after, ""),
                };
                let n: u64 = v.trim().parse().map_err(|_| {
                    Error::invalid(format!(
                        "device spec {spec:?}: fast_pages={v:?} is not a number of pages"
                    ))
                })?;
                fast_pages = Some(n);
                s = tail;
            }
            other => {
                return Err(Error::invalid(format!(
                    "device spec {spec:?}: unknown hybrid parameter {other:?} (valid: fast, slow, fast_pages)"
                )))
            }
        }
        s = s.strip_prefix([';', '&']).unwrap_or(s).trim_start();
    }
    match (fast, slow) {
        (Some(fast), Some(slow)) => Ok(DeviceSpec::Hybrid {
            fast,
            slow,
            fast_pages,
        }),
        _ => Err(Error::invalid(format!(
            "device spec {spec:?}: a hybrid device needs both fast=(SPEC) and slow=(SPEC)"
        ))),
    }
}

/// Splits `a=b&c=d` into pairs; an error for an element without `=` or with an empty key.
fn parse_params(spec: &str, text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for part in text.split('&').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            Error::invalid(format!(
                "device spec {spec:?}: parameter {part:?} is not of the form key=value"
            ))
        })?;
        let k = k.trim();
        if k.is_empty() {
            return Err(Error::invalid(format!(
                "device spec {spec:?}: empty parameter name in {part:?}"
            )));
        }
        out.push((k.to_string(), v.trim().to_string()));
    }
    Ok(out)
}

fn parse_bool(spec: &str, key: &str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::invalid(format!(
            "device spec {spec:?}: {key}={v:?} is not true or false"
        ))),
    }
}

fn parse_engine(spec: &str, v: &str) -> Result<IoEngine> {
    match v.to_ascii_lowercase().as_str() {
        "auto" => Ok(IoEngine::Auto),
        "uring" | "io_uring" => Ok(IoEngine::Uring),
        "psync" => Ok(IoEngine::Psync),
        _ => Err(Error::invalid(format!(
            "device spec {spec:?}: engine={v:?} is not auto, uring or psync"
        ))),
    }
}

impl DeviceSpec {
    /// Parses a spec string (see the module documentation).
    pub fn parse(spec: &str) -> Result<DeviceSpec> {
        let s = spec.trim();
        // `file?opts` is the index directory's own file with options.
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) if !k.contains('?') => (k, r),
            _ => match s.split_once('?') {
                Some((k, r)) => (k, s.get(k.len()..).unwrap_or(r)),
                None => (s, ""),
            },
        };
        match kind.to_ascii_lowercase().as_str() {
            "file" => {
                let (path, query) = match rest.split_once('?') {
                    Some((p, q)) => (p, q),
                    None => (rest, ""),
                };
                let mut direct = true;
                let mut engine = IoEngine::Auto;
                let mut capacity = None;
                for (k, v) in parse_params(spec, query)? {
                    match k.as_str() {
                        "direct" => direct = parse_bool(spec, &k, &v)?,
                        "engine" => engine = parse_engine(spec, &v)?,
                        "capacity" => capacity = Some(parse_size(&v)?),
                        _ => {
                            return Err(Error::invalid(format!(
                                "device spec {spec:?}: unknown file parameter {k:?} (valid: direct, engine, capacity)"
                            )))
                        }
                    }
                }
                let path = (!path.is_empty()).then(|| PathBuf::from(path));
                Ok(DeviceSpec::File { path, direct, engine, capacity })
            }
            "mem" => {
                let mut capacity = None;
                for (k, v) in parse_params(spec, rest)? {
                    match k.as_str() {
                        "capacity" => capacity = Some(parse_size(&v)?),
                        _ => {
                            return Err(Error::invalid(format!(
                                "device spec {spec:?}: unknown mem parameter {k:?} (valid: capacity)"
                            )))
                        }
                    }
                }
                Ok(DeviceSpec::Mem { capacity })
            }
            "flashsim" => Ok(DeviceSpec::FlashSim { params: parse_params(spec, rest)? }),
            "hddsim" => Ok(DeviceSpec::HddSim { params: parse_params(spec, rest)? }),
            "hybrid" => parse_hybrid(spec, rest),
            _ => Err(Error::invalid(format!(
                "unknown device spec {spec:?}: expected file, file:PATH?…, mem:, flashsim:preset=NAME&…, hddsim:preset=NAME&…, hybrid:fast=(SPEC);slow=(SPEC)"
            ))),
        }
    }

    /// The spec with every `file:PATH` (its tiers' too) made absolute
    /// against the current directory: what an index records in its
    /// manifest, so that it opens from any directory. A relative path was
    /// resolved against the directory of each later command.
    pub fn with_absolute_paths(self) -> Result<DeviceSpec> {
        Ok(match self {
            DeviceSpec::File {
                path: Some(p),
                direct,
                engine,
                capacity,
            } => DeviceSpec::File {
                path: Some(std::path::absolute(&p).map_err(|source| Error::Io {
                    path: p.clone(),
                    page: None,
                    source,
                })?),
                direct,
                engine,
                capacity,
            },
            DeviceSpec::Hybrid {
                fast,
                slow,
                fast_pages,
            } => DeviceSpec::Hybrid {
                fast: Box::new(fast.with_absolute_paths()?),
                slow: Box::new(slow.with_absolute_paths()?),
                fast_pages,
            },
            other => other,
        })
    }

    /// Opens the device for pages of `page_size` bytes. `default_path` is the
    /// file used by a plain `file` spec (the index directory's `pages.dat`).
    pub fn open(
        &self,
        page_size: usize,
        default_path: Option<&Path>,
    ) -> Result<Arc<dyn PageDevice>> {
        check_page_size(page_size)?;
        let pages = |bytes: u64| -> Result<u64> {
            let p = bytes / page_size as u64;
            if p == 0 {
                return Err(Error::invalid(format!(
                    "capacity of {bytes} bytes holds no page of {page_size} bytes"
                )));
            }
            Ok(p)
        };
        Ok(match self {
            DeviceSpec::File {
                path,
                direct,
                engine,
                capacity,
            } => {
                let path = path.as_deref().or(default_path).ok_or_else(|| {
                    Error::invalid("device spec \"file\" needs a path here: use file:PATH")
                })?;
                let mut opts = FileDeviceOptions {
                    direct: *direct,
                    engine: *engine,
                    ..FileDeviceOptions::default()
                };
                if let Some(c) = capacity {
                    opts.capacity_pages = pages(*c)?;
                }
                Arc::new(FileDevice::open(path, page_size, opts)?)
            }
            DeviceSpec::Mem { capacity } => {
                let cap = match capacity {
                    Some(c) => pages(*c)?,
                    None => MemDevice::DEFAULT_CAPACITY,
                };
                Arc::new(MemDevice::new(page_size, cap)?)
            }
            DeviceSpec::FlashSim { params } => {
                Arc::new(FlashSim::new(flashsim_config(params)?, page_size)?)
            }
            DeviceSpec::HddSim { params } => {
                Arc::new(HddSim::new(hddsim_config(params)?, page_size)?)
            }
            DeviceSpec::Hybrid {
                fast,
                slow,
                fast_pages,
            } => {
                let fast_path = default_path.map(fast_tier_path);
                let f = fast.open(page_size, fast_path.as_deref())?;
                let s = slow.open(page_size, default_path)?;
                let h = HybridDevice::new(f, s)?;
                Arc::new(match fast_pages {
                    Some(n) => h.with_fast_pages(*n),
                    None => h,
                })
            }
        })
    }
}

/// The fast tier's file beside `p`: `pages.dat` → `pages.fast.dat`.
pub fn fast_tier_path(p: &Path) -> PathBuf {
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("pages");
    let name = match p.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}.fast.{ext}"),
        None => format!("{stem}.fast"),
    };
    p.with_file_name(name)
}

/// Builds a simulator's config from spec parameters: `preset` first (else
/// `default_preset`), then the other keys in order, then validation.
fn sim_config<C>(
    params: &[(String, String)],
    default_preset: &str,
    preset: impl Fn(&str) -> Result<C>,
    set: impl Fn(&mut C, &str, &str) -> Result<()>,
    validate: impl Fn(&C) -> Result<()>,
) -> Result<C> {
    let name = params
        .iter()
        .find(|(k, _)| k == "preset")
        .map_or(default_preset, |(_, v)| v.as_str());
    let mut cfg = preset(name)?;
    for (k, v) in params.iter().filter(|(k, _)| k != "preset") {
        set(&mut cfg, k, v)?;
    }
    validate(&cfg)?;
    Ok(cfg)
}

/// The flash simulator's config (default preset `seed-tc58`).
fn flashsim_config(params: &[(String, String)]) -> Result<FlashSimConfig> {
    sim_config(
        params,
        "seed-tc58",
        FlashSimConfig::preset,
        FlashSimConfig::set,
        FlashSimConfig::validate,
    )
}

/// The disk model's config (default preset `7200rpm`).
fn hddsim_config(params: &[(String, String)]) -> Result<HddSimConfig> {
    sim_config(
        params,
        "7200rpm",
        HddSimConfig::preset,
        HddSimConfig::set,
        HddSimConfig::validate,
    )
}

fn fmt_params(f: &mut fmt::Formatter<'_>, params: &[(String, String)]) -> fmt::Result {
    let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    write!(f, "{}", joined.join("&"))
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::File {
                path,
                direct,
                engine,
                capacity,
            } => {
                write!(f, "file")?;
                if let Some(p) = path {
                    write!(f, ":{}", p.display())?;
                }
                let engine = match engine {
                    IoEngine::Auto => "auto",
                    IoEngine::Uring => "uring",
                    IoEngine::Psync => "psync",
                };
                write!(f, "?direct={direct}&engine={engine}")?;
                if let Some(c) = capacity {
                    write!(f, "&capacity={c}")?;
                }
                Ok(())
            }
            DeviceSpec::Mem { capacity } => match capacity {
                Some(c) => write!(f, "mem:capacity={c}"),
                None => write!(f, "mem:"),
            },
            DeviceSpec::FlashSim { params } => {
                write!(f, "flashsim:")?;
                fmt_params(f, params)
            }
            DeviceSpec::HddSim { params } => {
                write!(f, "hddsim:")?;
                fmt_params(f, params)
            }
            DeviceSpec::Hybrid {
                fast,
                slow,
                fast_pages,
            } => {
                write!(f, "hybrid:fast=({fast});slow=({slow})")?;
                if let Some(n) = fast_pages {
                    write!(f, "&fast_pages={n}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::str::FromStr for DeviceSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        DeviceSpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract_forms() {
        assert_eq!(
            DeviceSpec::parse("file").unwrap(),
            DeviceSpec::File {
                path: None,
                direct: true,
                engine: IoEngine::Auto,
                capacity: None
            }
        );
        assert_eq!(
            DeviceSpec::parse("file:/tmp/x.dat?direct=false&engine=psync&capacity=1MiB").unwrap(),
            DeviceSpec::File {
                path: Some("/tmp/x.dat".into()),
                direct: false,
                engine: IoEngine::Psync,
                capacity: Some(1 << 20)
            }
        );
        assert_eq!(
            DeviceSpec::parse("mem:").unwrap(),
            DeviceSpec::Mem { capacity: None }
        );
        assert_eq!(
            DeviceSpec::parse("flashsim:preset=seed-tc58&gc=greedy").unwrap(),
            DeviceSpec::FlashSim {
                params: vec![
                    ("preset".into(), "seed-tc58".into()),
                    ("gc".into(), "greedy".into())
                ]
            }
        );
    }

    #[test]
    fn relative_file_paths_are_made_absolute_in_every_tier() {
        let cwd = std::env::current_dir().unwrap();
        let spec: DeviceSpec = "hybrid:fast=(file:a/f.dat?direct=false);slow=(file:/abs/s.dat)"
            .parse()
            .unwrap();
        let DeviceSpec::Hybrid { fast, slow, .. } = spec.with_absolute_paths().unwrap() else {
            panic!("not a hybrid");
        };
        assert!(matches!(*fast, DeviceSpec::File { path: Some(ref p), direct: false, .. } if *p == cwd.join("a/f.dat")));
        assert!(matches!(*slow, DeviceSpec::File { path: Some(ref p), .. } if p == Path::new("/abs/s.dat")));
        let plain: DeviceSpec = "file?direct=false".parse().unwrap();
        assert_eq!(plain.clone().with_absolute_paths().unwrap(), plain);
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "file:/a/b?direct=false&engine=uring",
            "mem:",
            "mem:capacity=4096",
            "flashsim:preset=nvme&op=0.1",
            "hddsim:preset=7200rpm",
            "hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700&op=0.1)&fast_pages=64",
            "hybrid:fast=(mem:capacity=8KiB);slow=(file:/x/p.dat?direct=false)",
        ] {
            let spec = DeviceSpec::parse(s).unwrap();
            assert_eq!(DeviceSpec::parse(&spec.to_string()).unwrap(), spec, "{s}");
        }
    }

    #[test]
    fn bad_specs_are_clear_errors() {
        for (s, needle) in [
            ("tape:", "unknown device spec"),
            ("file:/x?direct=maybe", "not true or false"),
            ("file:/x?engine=aio", "engine"),
            ("file:/x?colour=red", "unknown file parameter"),
            ("mem:size=3", "unknown mem parameter"),
            ("flashsim:preset", "key=value"),
            ("hybrid:fast=(mem:)", "both fast"),
            ("hybrid:fast=mem:;slow=(mem:)", "parentheses"),
            ("hybrid:fast=(mem:;slow=(mem:)", "parentheses"),
            ("hybrid:fast=(tape:);slow=(mem:)", "fast tier"),
            (
                "hybrid:fast=(mem:);slow=(mem:)&fast_pages=x",
                "not a number",
            ),
            (
                "hybrid:fast=(mem:);slow=(mem:)&speed=9",
                "unknown hybrid parameter",
            ),
            ("hybrid:fast=(mem:);fast=(mem:);slow=(mem:)", "given twice"),
            (
                "hybrid:fast=(hybrid:fast=(mem:);slow=(mem:));slow=(mem:)",
                "cannot itself be hybrid",
            ),
        ] {
            let e = DeviceSpec::parse(s).unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
    }

    #[test]
    fn hybrid_specs_open_two_tiers_with_a_fast_page_cap() {
        let spec = DeviceSpec::parse(
            "hybrid:fast=(mem:capacity=64KiB);slow=(mem:capacity=1MiB)&fast_pages=3",
        )
        .unwrap();
        let d = spec.open(4096, None).unwrap();
        assert_eq!(d.capacity(), 256);
        assert!(d.describe().contains("fast_pages=3"), "{}", d.describe());
        // The sim presets of the thesis open as tiers.
        let d =
            DeviceSpec::parse("hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)")
                .unwrap()
                .open(4096, None)
                .unwrap();
        d.write(5, &[1u8; 4096]).unwrap();
        assert!(d.stats().sim.unwrap().sim_time_ns > 0);
        // A plain `file` tier is the index's own file, and a `.fast` sibling.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pages.dat");
        let d = DeviceSpec::parse("hybrid:fast=(file?direct=false);slow=(file?direct=false)")
            .unwrap()
            .open(4096, Some(&p))
            .unwrap();
        d.hint_tier(&[1], crate::storage::Tier::Fast).unwrap();
        d.write_batch(&[1, 2], &[7u8; 8192]).unwrap();
        d.sync().unwrap();
        assert!(p.exists() && dir.path().join("pages.fast.dat").exists());
    }

    #[test]
    fn opens_mem_and_rejects_bad_page_sizes() {
        let d = DeviceSpec::parse("mem:capacity=64KiB")
            .unwrap()
            .open(4096, None)
            .unwrap();
        assert_eq!(d.capacity(), 16);
        assert!(DeviceSpec::parse("mem:").unwrap().open(3000, None).is_err());
        assert!(DeviceSpec::parse("mem:capacity=100")
            .unwrap()
            .open(4096, None)
            .is_err());
        assert!(DeviceSpec::parse("file").unwrap().open(4096, None).is_err());
    }
}
