//! What the fuzz targets share: scratch files for inputs that are read from
//! a path, and the checks every file reader must pass.
//!
//! Scratch files live in a directory of this process under `/dev/shm` when
//! it exists (no disk I/O per iteration), else under the temporary directory.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// This process's scratch directory (created once, removed never: the fuzzer
/// runs until killed; the files are tiny and overwritten each iteration).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("geoflash-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    })
}

/// Writes `bytes` to the scratch file `name` and returns its path.
pub fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch_dir().join(name);
    std::fs::write(&path, bytes).expect("scratch file");
    path
}

/// Removes the scratch file `name` if it exists.
pub fn remove_scratch(name: &str) {
    let _ = std::fs::remove_file(scratch_dir().join(name));
}

/// Splits `data` into `N` parts, each prefixed by a little-endian `u16`
/// length (the last part takes the rest). Short inputs give empty parts.
pub fn split_parts<const N: usize>(mut data: &[u8]) -> [&[u8]; N] {
    let mut parts = [&[][..]; N];
    for (i, part) in parts.iter_mut().enumerate() {
        if i + 1 == N {
            *part = data;
            break;
        }
        if data.len() < 2 {
            *part = data;
            data = &[];
            continue;
        }
        let len = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        *part = &data[2..2 + len];
        data = &data[2 + len..];
    }
    parts
}

/// Reads the dataset file `path` with the workbench's reader. Nothing may
/// panic; a refused file's error must name the file (for a Shapefile, the
/// `.shp` or the sidecar at fault, `.shx` or `.dbf`), and every object read
/// must be a valid geometry (finite, bounded coordinates; not empty).
pub fn check_dataset(path: &Path) {
    match geoflash_bench::import::read_objects(path) {
        Ok(objects) => {
            let mut ids = std::collections::HashSet::new();
            for (id, geometry) in &objects {
                assert!(ids.insert(*id), "{}: id {id} read twice", path.display());
                if let Err(e) = geoflash::objects::geometry::bounding_rect(geometry) {
                    panic!(
                        "{}: object {id} was read but is not valid: {e}",
                        path.display()
                    );
                }
            }
        }
        Err(e) => {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let mut names = vec![name.to_string()];
            if path.extension().is_some_and(|x| x == "shp") {
                for sidecar in ["shx", "dbf"] {
                    names.push(
                        path.with_extension(sidecar)
                            .file_name()
                            .and_then(|n| n.to_str())
                            .unwrap_or_default()
                            .to_string(),
                    );
                }
            }
            let msg = e.to_string();
            assert!(
                names.iter().any(|n| msg.contains(n.as_str())),
                "the error names none of the files {names:?}: {msg}"
            );
        }
    }
}
