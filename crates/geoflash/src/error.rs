//! The library's error type. One umbrella enum; every variant names the
//! problem precisely enough that a user can act on it.
use std::path::PathBuf;

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

    /// A format version newer than this code understands.
    #[error(
        "format version {found} is newer than the newest this build understands ({supported})"
    )]
    UnsupportedVersion {
        /// Version found.
        found: u16,
        /// Newest version supported.
        supported: u16,
    },
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

    /// Names `path` as the file of a [`Error::Corrupt`] that names none yet
    /// (other errors are returned as they are: an [`Error::Io`] names its file).
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
            other => other,
        }
    }

    /// True for errors caused by bad user input (exit code 2 in the CLI).
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            Error::InvalidInput(_)
                | Error::PageOutOfRange { .. }
                | Error::BufferSize { .. }
                | Error::MisalignedBuffer { .. }
        )
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
}
