//! Panics of third-party decoders, contained: some readers we rely on
//! (`parquet`, `osmpbf`) panic on some malformed files instead of returning
//! an error. [`contained`] runs such a reader so that its panic becomes the
//! caller's error for the file, silently: the panic hook is not called for
//! it, so a user sees the error naming the file and no "thread panicked"
//! message and backtrace before it.
//!
//! The hook is wrapped once per process: a panic on a thread inside
//! [`contained`] is not reported; every other panic goes to the hook that
//! was installed before (the default one, or a fuzzer's, which turns every
//! panic that escapes a reader into a crash).
use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// Whether this thread runs inside [`contained`].
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

static WRAP_HOOK: Once = Once::new();

/// Runs `f`; a panic inside it is returned as `Err` with its message
/// instead of unwinding further, and is not reported by the panic hook.
pub(crate) fn contained<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    WRAP_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !INSIDE.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let outer = INSIDE.with(|i| i.replace(true));
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    INSIDE.with(|i| i.set(outer));
    run.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}

/// Runs a reader of `path` [`contained`]: a panic inside it becomes the
/// error "`path`: `what` (the panic's message)".
pub(crate) fn contained_reader<T>(
    path: &std::path::Path,
    what: &str,
    f: impl FnOnce() -> geoflash::Result<T>,
) -> geoflash::Result<T> {
    contained(f).unwrap_or_else(|msg| Err(super::bad(path, format!("{what} ({msg})"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_becomes_an_error_with_its_message() {
        assert_eq!(contained(|| 7), Ok(7));
        let r: std::result::Result<(), String> = contained(|| panic!("bad page {}", 3));
        assert_eq!(r, Err("bad page 3".to_string()));
        let r: std::result::Result<(), String> = contained(|| panic!("static"));
        assert_eq!(r, Err("static".to_string()));
        // Nested: the inner panic is the inner call's error; the outer call
        // goes on.
        let r = contained(|| contained(|| -> () { panic!("inner") }));
        assert_eq!(r, Ok(Err("inner".to_string())));
        // Outside, panics unwind as before.
        assert!(std::panic::catch_unwind(|| panic!("outside")).is_err());
    }
}
