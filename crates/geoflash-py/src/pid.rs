//! This process's id without a system call per write.
//!
//! Every write to an index in a directory checks that the calling process
//! is the one that opened it (a child made by `os.fork()` must not write
//! the parent's files: `core::State::check_owner`). `getpid` is a system
//! call on every call since glibc 2.25, about 5 % of an insertion's time in
//! a Python loop, so the id is kept here: read when the module is loaded
//! and again in the child after every fork Python makes (`os.fork`,
//! `multiprocessing`'s fork start method), through `os.register_at_fork`. A fork that bypasses Python's fork hooks
//! (a C library calling `fork()` and then calling back into Python) is not
//! seen; the error message of a refused write reads the id afresh.
use std::sync::atomic::{AtomicU32, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The id of this process as last read (0 before the module is loaded).
static PID: AtomicU32 = AtomicU32::new(0);

/// This process's id (see the module's documentation for when it is read).
pub(crate) fn current() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => refresh(),
        pid => pid,
    }
}

/// Reads the process id afresh and keeps it.
fn refresh() -> u32 {
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
}

/// Python's `os.register_at_fork(after_in_child=...)` hook.
#[pyfunction]
fn _after_fork_in_child() {
    refresh();
}

/// Reads the id and registers the hook that reads it again in a forked
/// child (where the platform has `os.register_at_fork`).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    refresh();
    let hook = wrap_pyfunction!(_after_fork_in_child, m)?;
    let os = m.py().import_bound("os")?;
    if os.hasattr("register_at_fork")? {
        let kwargs = PyDict::new_bound(m.py());
        kwargs.set_item("after_in_child", hook)?;
        os.call_method("register_at_fork", (), Some(&kwargs))?;
    }
    Ok(())
}
