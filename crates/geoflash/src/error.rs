//! The library's error type. One umbrella enum; every variant names the
//! problem precisely enough that a user can act on it, and belongs to one
//! [`ErrorKind`]: what its caller can do about it (fix the input, recover
//! or restore the index, look at the device or the results database, run
//! again), from which the command line takes its exit code.
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// Result alias used throughout geoflash.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error geoflash returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input that a user supplied is invalid (bad coordinates, bad parameter, bad spec string).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A page id outside the device's logical capacity.
    #[error("page {page} is beyond the device's capacity of {capacity} pages")]
    PageOutOfRange {
        /// The offending page id.
        page: u64,
        /// The device's capacity in pages.
        capacity: u64,
    },

    /// A buffer handed to a device has the wrong length.
    #[error("buffer of {got} bytes where {expected} bytes (whole pages) were expected")]
    BufferSize {
        /// Expected length in bytes.
        expected: usize,
        /// Actual length in bytes.
        got: usize,
    },

    /// A buffer used for direct I/O is not aligned as the device requires.
    #[error("buffer at address {addr:#x} is not aligned to {align} bytes, as O_DIRECT requires")]
    MisalignedBuffer {
        /// Address of the buffer.
        addr: usize,
        /// Required alignment.
        align: usize,
    },

    /// An I/O error from the operating system, with the file and page involved.
    #[error("I/O error on {}{}: {source}", path.display(), page.map(|p| format!(" (page {p})")).unwrap_or_default())]
    Io {
        /// File involved.
        path: PathBuf,
        /// Page involved, if any.
        page: Option<u64>,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// The device has no room left (no free pages, or every block worn out).
    #[error("device full: {0}")]
    DeviceFull(String),

    /// A fault injected by `FaultyDevice`.
    #[error("injected fault: {0}")]
    InjectedFault(String),

    /// A store (eFIND, FAST, plain) or a log refuses a change after an
    /// earlier failure of its device or log: what reached the device is
    /// uncertain, so it takes nothing more until reopened (which recovers).
    #[error("store failed earlier: {0}")]
    StoreFailed(String),

    /// The device has crashed (`FaultyDevice`): nothing more reaches it until it is recovered.
    #[error("device crashed: {0}")]
    Crashed(String),

    /// Data read from a device does not decode: bad magic, checksum, version or layout.
    #[error("corrupt data{}: {reason}", where_(file.as_deref(), *page))]
    Corrupt {
        /// File involved, if known (the index layer fills it in with [`Error::in_file`]).
        file: Option<PathBuf>,
        /// Page involved, if known.
        page: Option<u64>,
        /// What is wrong.
        reason: String,
    },

    /// A read-only open of an index whose log holds committed changes not
    /// yet in its pages (a writer stopped before its checkpoint): a writer
    /// must open it first (`geoflash recover`). Not bad input: exit code 1.
    #[error("{0}")]
    NeedsRecovery(String),

    /// The work was stopped on request (Ctrl-C in the command line: see
    /// [`crate::engine::request_stop`]); the message says what it left.
    #[error("interrupted: {0}")]
    Interrupted(String),

    /// The workbench's results database (an SQLite file or a PostgreSQL
    /// server) failed: not a database, a schema newer than this build, a
    /// statement or transaction it refused. Not bad input: exit code 1.
    #[error("results store{}: {reason}", location.as_deref().map(|l| format!(" {l}")).unwrap_or_default())]
    ResultsStore {
        /// The file, or the URL without its password, if known (the store
        /// fills it in with [`Error::in_results_store`]).
        location: Option<String>,
        /// What failed.
        reason: String,
    },

    /// A file of a format version this build does not read: written by a
    /// newer geoflash, or a version no build of this line wrote. Checked
    /// after the file's checksum where it has one, so a damaged version
    /// field is [`Error::Corrupt`] instead. Not bad input and not damage to
    /// repair: open the file with the geoflash that wrote it. Exit code 1
    /// ([`ErrorKind::Damaged`]).
    #[error(
        "{}{what} format version {found} is not one this build of geoflash reads ({}): open it with the geoflash that wrote it",
        file.as_deref().map(|f| format!("{}: ", f.display())).unwrap_or_default(),
        versions(supported)
    )]
    UnsupportedVersion {
        /// The file, if known (the layer that opened it fills it in with
        /// [`Error::in_file`]).
        file: Option<PathBuf>,
        /// What carries the version ("page", "manifest", "log superblock", ...).
        what: &'static str,
        /// The version found.
        found: u64,
        /// The versions this build reads.
        supported: RangeInclusive<u64>,
    },
}

/// What kind of failure an [`Error`] is ([`Error::kind`]): what its caller
/// can do about it. The command line's exit code follows it (see
/// `docs/architecture.md`, "Errors and exit codes"): 2 for
/// [`ErrorKind::InvalidInput`], 130 for [`ErrorKind::Interrupted`], 1 for
/// the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Bad input: a setting, a flag, a spec string, input data, or a request
    /// the index or device refuses (a duplicate id, a page beyond the
    /// device). Nothing was damaged; fix the input and run again.
    InvalidInput,
    /// The index's files cannot be read as they are: their data does not
    /// decode (checksum, magic, layout: recover with `geoflash recover` or
    /// restore the index), needs a writer's recovery first, or is of a
    /// format version this build does not read (open it with the geoflash
    /// that wrote it). Not the user's typo: exit code 1.
    Damaged,
    /// An I/O or device failure: an operating-system error, a full or
    /// crashed device, an injected fault, a store refusing changes after an
    /// earlier failure. The index is as its last commit left it.
    Io,
    /// The workbench's results database failed ([`Error::ResultsStore`]).
    ResultsStore,
    /// Stopped on request (Ctrl-C).
    Interrupted,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 5] = [
        ErrorKind::InvalidInput,
        ErrorKind::Damaged,
        ErrorKind::Io,
        ErrorKind::ResultsStore,
        ErrorKind::Interrupted,
    ];
}

/// "version 3" or "versions 1 to 3".
fn versions(r: &RangeInclusive<u64>) -> String {
    if r.start() == r.end() {
        format!("version {}", r.start())
    } else {
        format!("versions {} to {}", r.start(), r.end())
    }
}

/// " in FILE, page N" with the parts that are known.
fn where_(file: Option<&std::path::Path>, page: Option<u64>) -> String {
    match (file, page) {
        (Some(f), Some(p)) => format!(" in {}, page {p}", f.display()),
        (Some(f), None) => format!(" in {}", f.display()),
        (None, Some(p)) => format!(" in page {p}"),
        (None, None) => String::new(),
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(page: Option<u64>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            file: None,
            page,
            reason: reason.into(),
        }
    }

    /// Shorthand for an [`Error::UnsupportedVersion`] whose file is not yet
    /// named: `what` carries version `found`, this build reads `oldest` to
    /// `newest`.
    pub fn unsupported_version(
        what: &'static str,
        found: impl Into<u64>,
        oldest: impl Into<u64>,
        newest: impl Into<u64>,
    ) -> Self {
        Error::UnsupportedVersion {
            file: None,
            what,
            found: found.into(),
            supported: oldest.into()..=newest.into(),
        }
    }

    /// Checks that `found` is a version this build reads, `oldest` to
    /// `newest`: [`Error::unsupported_version`] of `what` otherwise (name
    /// the file with [`in_file`](Self::in_file)).
    pub fn check_version<V: Into<u64>>(
        what: &'static str,
        found: V,
        oldest: V,
        newest: V,
    ) -> Result<(), Error> {
        let (found, oldest, newest) = (found.into(), oldest.into(), newest.into());
        if (oldest..=newest).contains(&found) {
            Ok(())
        } else {
            Err(Error::unsupported_version(what, found, oldest, newest))
        }
    }

    /// Names `path` as the file of a [`Error::Corrupt`] or an
    /// [`Error::UnsupportedVersion`] that names none yet (other errors are
    /// returned as they are: an [`Error::Io`] names its file).
    pub fn in_file(self, path: impl Into<PathBuf>) -> Self {
        match self {
            Error::Corrupt {
                file: None,
                page,
                reason,
            } => Error::Corrupt {
                file: Some(path.into()),
                page,
                reason,
            },
            Error::UnsupportedVersion {
                file: None,
                what,
                found,
                supported,
            } => Error::UnsupportedVersion {
                file: Some(path.into()),
                what,
                found,
                supported,
            },
            other => other,
        }
    }

    /// This error with every file in directory `from` named in directory
    /// `to` instead, in its path fields and in the text of its message (an
    /// index built in a staging directory and then published by renaming
    /// it: its devices keep naming the directory they were opened in).
    pub fn moved_dir(self, from: &Path, to: &Path) -> Self {
        let path = |p: PathBuf| match p.strip_prefix(from) {
            Ok(rest) => to.join(rest),
            Err(_) => p,
        };
        let (old, new) = (from.display().to_string(), to.display().to_string());
        let text = |s: String| {
            if old.is_empty() {
                s
            } else {
                s.replace(&old, &new)
            }
        };
        match self {
            Error::Io {
                path: p,
                page,
                source,
            } => Error::Io {
                path: path(p),
                page,
                source,
            },
            Error::Corrupt { file, page, reason } => Error::Corrupt {
                file: file.map(path),
                page,
                reason: text(reason),
            },
            Error::UnsupportedVersion {
                file,
                what,
                found,
                supported,
            } => Error::UnsupportedVersion {
                file: file.map(path),
                what,
                found,
                supported,
            },
            Error::InvalidInput(s) => Error::InvalidInput(text(s)),
            Error::DeviceFull(s) => Error::DeviceFull(text(s)),
            Error::InjectedFault(s) => Error::InjectedFault(text(s)),
            Error::StoreFailed(s) => Error::StoreFailed(text(s)),
            Error::Crashed(s) => Error::Crashed(text(s)),
            Error::NeedsRecovery(s) => Error::NeedsRecovery(text(s)),
            Error::Interrupted(s) => Error::Interrupted(text(s)),
            other => other,
        }
    }

    /// Shorthand for an [`Error::ResultsStore`] whose location is not yet named.
    pub fn results_store(reason: impl Into<String>) -> Self {
        Error::ResultsStore {
            location: None,
            reason: reason.into(),
        }
    }

    /// Names `location` as the results store of an [`Error::ResultsStore`]
    /// that names none yet (other errors are returned as they are).
    pub fn in_results_store(self, location: &str) -> Self {
        match self {
            Error::ResultsStore {
                location: None,
                reason,
            } => Error::ResultsStore {
                location: Some(location.to_string()),
                reason,
            },
            other => other,
        }
    }

    /// The kind of this error: what its caller can do about it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_)
            | Error::PageOutOfRange { .. }
            | Error::BufferSize { .. }
            | Error::MisalignedBuffer { .. } => ErrorKind::InvalidInput,
            Error::Corrupt { .. } | Error::NeedsRecovery(_) | Error::UnsupportedVersion { .. } => {
                ErrorKind::Damaged
            }
            Error::Io { .. }
            | Error::DeviceFull(_)
            | Error::InjectedFault(_)
            | Error::StoreFailed(_)
            | Error::Crashed(_) => ErrorKind::Io,
            Error::ResultsStore { .. } => ErrorKind::ResultsStore,
            Error::Interrupted(_) => ErrorKind::Interrupted,
        }
    }

    /// True for errors caused by bad user input ([`ErrorKind::InvalidInput`]:
    /// exit code 2 in the CLI).
    pub fn is_user_error(&self) -> bool {
        self.kind() == ErrorKind::InvalidInput
    }
}

/// Passes `r` through, keeping the message of an error other than bad input
/// ([`Error::InvalidInput`]) in `failed`: the sticky failure of a store or
/// log whose view of the device is uncertain after such an error.
pub(crate) fn keep_failure<T>(failed: &mut Option<String>, r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        if !matches!(e, Error::InvalidInput(_)) {
            *failed = Some(e.to_string());
        }
    }
    r
}

/// Refuses every change after a sticky failure kept by [`keep_failure`]:
/// [`Error::StoreFailed`] with `refusal` and the failure's message.
pub(crate) fn refuse_after_failure(failed: &Option<String>, refusal: &str) -> Result<()> {
    match failed {
        Some(why) => Err(Error::StoreFailed(format!("{refusal}: {why}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_store_is_not_a_user_error() {
        let e = Error::StoreFailed("the log failed earlier".into());
        assert!(!e.is_user_error());
        assert_eq!(
            e.to_string(),
            "store failed earlier: the log failed earlier"
        );
    }

    #[test]
    fn every_variant_has_its_kind() {
        let io = || std::io::Error::other("x");
        let cases = [
            (Error::invalid("x"), ErrorKind::InvalidInput),
            (
                Error::PageOutOfRange {
                    page: 9,
                    capacity: 8,
                },
                ErrorKind::InvalidInput,
            ),
            (Error::corrupt(Some(1), "checksum"), ErrorKind::Damaged),
            (Error::NeedsRecovery("log".into()), ErrorKind::Damaged),
            (
                Error::unsupported_version("page", 9u16, 1u16, 3u16),
                ErrorKind::Damaged,
            ),
            (
                Error::Io {
                    path: "/f".into(),
                    page: None,
                    source: io(),
                },
                ErrorKind::Io,
            ),
            (Error::DeviceFull("x".into()), ErrorKind::Io),
            (Error::StoreFailed("x".into()), ErrorKind::Io),
            (Error::results_store("locked"), ErrorKind::ResultsStore),
            (Error::Interrupted("x".into()), ErrorKind::Interrupted),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
            assert_eq!(e.is_user_error(), kind == ErrorKind::InvalidInput, "{e}");
        }
    }

    #[test]
    fn results_store_errors_name_their_store_once() {
        let e = Error::results_store("file is not a database");
        assert_eq!(e.to_string(), "results store: file is not a database");
        let e = e.in_results_store("/r.sqlite").in_results_store("/other");
        assert_eq!(
            e.to_string(),
            "results store /r.sqlite: file is not a database"
        );
        assert_eq!(e.kind(), ErrorKind::ResultsStore);
    }

    #[test]
    fn corrupt_errors_name_the_file_and_page_they_know() {
        let e = Error::corrupt(Some(0), "bad magic");
        assert_eq!(e.to_string(), "corrupt data in page 0: bad magic");
        let e = e.in_file("/i/pages.dat");
        assert_eq!(
            e.to_string(),
            "corrupt data in /i/pages.dat, page 0: bad magic"
        );
        // The first file named stays.
        let e = e.in_file("/elsewhere");
        assert!(e.to_string().contains("/i/pages.dat"));
        let e = Error::corrupt(None, "no magic").in_file("/i/log.dat");
        assert_eq!(e.to_string(), "corrupt data in /i/log.dat: no magic");
        assert_eq!(Error::corrupt(None, "x").to_string(), "corrupt data: x");
        assert!(!Error::invalid("x").in_file("/f").to_string().contains("/f"));
    }

    #[test]
    fn unsupported_versions_name_the_file_the_version_and_what_is_read() {
        let e = Error::unsupported_version("manifest", 9u64, 1u16, 2u16);
        assert_eq!(
            e.to_string(),
            "manifest format version 9 is not one this build of geoflash reads \
             (versions 1 to 2): open it with the geoflash that wrote it"
        );
        let e = e.in_file("/i/manifest.json").in_file("/elsewhere");
        assert!(
            e.to_string()
                .starts_with("/i/manifest.json: manifest format version 9 "),
            "{e}"
        );
        let e = Error::unsupported_version("trace", 0u16, 1u16, 1u16);
        assert!(e.to_string().contains("(version 1)"), "{e}");
    }
}
