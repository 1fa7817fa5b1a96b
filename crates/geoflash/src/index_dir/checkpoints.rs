//! Checkpoints by time (issue 43, item 2): when an [`Index`](super::Index)
//! whose store keeps a log checkpoints without being asked.
//!
//! A commit syncs the store's log and keeps the dirty nodes in memory, so
//! what a crash leaves to replay grows until a checkpoint: by size, the
//! log's capacity bounds it (the stores compact their log and flush when it
//! fills); by time, this timer does. A **durability point** — the end of a
//! batch committed by [`Index::commit`](super::Index::commit), or an
//! operation outside a suspended batch after which the store's durability
//! mode made every committed operation durable (each operation with
//! `sync`, each group with `group`) — that comes at least
//! [`StoreSpec::checkpoint_interval`](crate::config::StoreSpec::checkpoint_interval)
//! after the index's last checkpoint is a checkpoint. Never inside an
//! operation, nor in the middle of a batch whose durability point is its
//! end, nor with the papers' `none` mode (no durability points). The clock
//! restarts at every checkpoint, when the index is created and when it is
//! opened.
use std::time::{Duration, Instant};

/// The time since an index's last checkpoint, against its interval.
#[derive(Debug)]
pub(super) struct CheckpointTimer {
    /// `None`: checkpoints by time are off.
    interval: Option<Duration>,
    /// When the index last checkpointed (or was created or opened).
    last: Instant,
    /// The tests' clock: the time since the last checkpoint, which they
    /// advance instead of sleeping, the real clock ignored (`None`
    /// otherwise).
    manual: Option<Duration>,
}

impl CheckpointTimer {
    /// A timer started now, due every `interval` (`None`: never).
    pub(super) fn new(interval: Option<Duration>) -> CheckpointTimer {
        CheckpointTimer {
            interval,
            last: Instant::now(),
            manual: None,
        }
    }

    /// Whether the interval has passed since the last checkpoint.
    pub(super) fn due(&self) -> bool {
        let elapsed = self.manual.unwrap_or_else(|| self.last.elapsed());
        self.interval.is_some_and(|i| elapsed >= i)
    }

    /// A checkpoint happened: the interval starts again.
    pub(super) fn restart(&mut self) {
        self.last = Instant::now();
        if self.manual.is_some() {
            self.manual = Some(Duration::ZERO);
        }
    }

    /// The interval, `None` when off.
    pub(super) fn interval(&self) -> Option<Duration> {
        self.interval
    }

    /// Tests: the timer's clock moves on by `by` (no sleeping); from the
    /// first call on, only these calls move it.
    #[cfg(test)]
    pub(super) fn advance(&mut self, by: Duration) {
        self.manual = Some(self.manual.unwrap_or_default().saturating_add(by));
    }
}
