//! The failed state of an [`Index`]: after a change, commit or checkpoint
//! of a writable index in a directory fails otherwise than on bad input
//! or an interruption (a device error, a full file system, damage found
//! part-way, a refused sync), the structure in memory may hold a part of
//! the failed operation, or changes the files do not (the log or the
//! pages could not take them). Answering from it could give what no
//! reopen gives (an object the failed move removed and had not put
//! back), and a later checkpoint could make the part durable. So the
//! index refuses every later call, queries included, until it is opened
//! again: the open recovers what is durable (the logged stores replay
//! their log, the rollback journal restores the last checkpoint). The
//! Python package has kept this promise since issue 44; here every front
//! end keeps it.
use super::Index;
use crate::error::ErrorKind;
use crate::manifest::Access;
use crate::{Error, Result};

impl Index {
    /// Why this index refuses every call, when a change, commit or
    /// checkpoint failed (see the module's documentation); `None` while
    /// it works.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Keeps `e`, the error of a change, commit or checkpoint, as the
    /// index's failure when it is neither bad input nor an interruption
    /// (both leave the structure at an operation boundary).
    pub(super) fn note_failure(&mut self, e: &Error) {
        if !matches!(e.kind(), ErrorKind::Interrupted) {
            self.fail(e);
        }
    }

    /// Fails this index with `e` (see [`failure`](Self::failure)) when it
    /// is a writable one in a directory (an index in memory has nothing a
    /// crash could lose; a reader writes nothing) and `e` is not bad input
    /// ([`Error::is_user_error`]), which never fails an index. For a front
    /// end that keeps durable state of its own beside the index (the
    /// Python package's record-map log) and cannot tell, after `e` (an
    /// interruption included), whether that state and the index agree;
    /// the index fails itself on its own errors. The first failure is kept.
    pub fn fail(&mut self, e: &Error) {
        if self.failure.is_none()
            && !e.is_user_error()
            && self.access == Access::Write
            && self.dir.is_some()
        {
            self.failure = Some(e.to_string());
        }
    }

    /// [`note_failure`](Self::note_failure) of the error of `r`, passed through.
    pub(super) fn noting_failure<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.note_failure(e);
        }
        r
    }

    /// An error naming the index and its failure once it failed (see
    /// [`failure`](Self::failure)); checked by every change, commit,
    /// checkpoint and query, and by front ends before they touch state of
    /// their own (see [`fail`](Self::fail)).
    pub fn refuse_if_failed(&self) -> Result<()> {
        let Some(why) = &self.failure else {
            return Ok(());
        };
        let dir = self
            .dir
            .as_deref()
            .map_or_else(String::new, |d| d.display().to_string());
        Err(Error::StoreFailed(format!(
            "the index {dir} failed part-way through a change, or failed to make one durable ({why}); \
             it may hold changes that a reopen would not, so it answers nothing more, queries included: \
             close it (which writes nothing) and open the directory again, which recovers what is \
             durable (that may or may not include the failed operation or batch: look before \
             repeating it)"
        )))
    }
}
