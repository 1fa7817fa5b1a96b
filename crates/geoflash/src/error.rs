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

    /// A fault injected by `FaultyDevice` (or a sticky earlier failure).
    #[error("injected fault: {0}")]
    InjectedFault(String),

    /// The device has crashed (`FaultyDevice`): nothing more reaches it until it is recovered.
    #[error("device crashed: {0}")]
    Crashed(String),

    /// Data read from a device does not decode: bad magic, checksum, version or layout.
    #[error("corrupt data in page {page:?}: {reason}")]
    Corrupt {
        /// Page involved, if known.
        page: Option<u64>,
        /// What is wrong.
        reason: String,
    },

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

impl Error {
    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(page: Option<u64>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            page,
            reason: reason.into(),
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
