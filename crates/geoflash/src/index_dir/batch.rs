//! Batches of updates: many operations applied as one unit of work, the
//! way a bulk of SQL statements runs in one transaction.
//!
//! Inside [`Index::batch`] the front end reads the wall and CPU clocks once
//! around the batch instead of twice per operation (a thread's CPU clock is
//! a system call, about a tenth of an insertion's cost; the wall clock a few
//! per cent of it), and with
//! [`BatchDurability::AtEnd`] the store's group commit is suspended: the
//! operations become durable together when the batch returns, with one
//! checkpoint, instead of one log sync per group of operations. Flushes
//! during the batch stay protected against torn writes, and a crash inside
//! the batch recovers a prefix of it, as always (what a crash can take back
//! is the whole batch rather than the last group).
//!
//! **A batch into an empty index is not logged.** When a batch whose
//! durability point is its end ([`BatchDurability::AtEnd`] or
//! [`BatchDurability::Commit`]) begins on an index holding no object (a
//! `geoflash build` without `--ack-every`, a Python `with index.batch():`
//! around the load of a new index), the store is asked to stop logging
//! until its next checkpoint ([`crate::store::NodeStore::begin_unlogged`]):
//! the nodes are written when they leave memory and at the end, which
//! syncs and publishes, as a bulk load does, with no record per operation.
//! The batch then ends with a checkpoint whatever its durability (a commit
//! has no log to sync), and a crash inside it returns the index to the
//! checkpoint before it: the empty index, or for a build no index at all.
//! A batch ended by a failure checkpoints too, so that the operations after
//! it are logged again (except in a process asked to stop). Only empty indices: the store keeps a before-image
//! of every page of the previous state it rewrites, in its log, which for
//! an empty tree is one page.
use super::Index;
use crate::metrics::{thread_cpu_ns, Clock, Phase};
use crate::store::log::Durability;
use crate::Result;

/// When the operations of a batch become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchDurability {
    /// As the store's durability mode says, operation by operation (for a
    /// caller that acknowledges operations during the batch).
    #[default]
    AsConfigured,
    /// All together when the batch returns: the store's group commit waits
    /// for the end of the batch, which checkpoints. A store in the papers'
    /// `none` mode, or without a log, is checkpointed at the end too.
    AtEnd,
    /// All together when the batch returns, as with [`AtEnd`](Self::AtEnd),
    /// but by [`Index::commit`]: a store with a log syncs it and keeps its
    /// dirty nodes (a crash after the batch replays them from the log); a
    /// store without one is checkpointed. A commit's cost is what the batch
    /// changed, not the nodes the buffer holds.
    Commit,
}

/// A batch begun by [`Index::begin_batch`]: what [`Index::end_batch`]
/// needs to end it.
#[derive(Debug)]
#[must_use = "a batch must be ended with Index::end_batch"]
pub struct OpenBatch {
    durability: BatchDurability,
    /// The store's mode to restore, when the batch suspended it.
    restore: Option<Durability>,
    cpu_before: Option<u64>,
    wall_before: std::time::Instant,
    /// A batch was already open (this one is nested in it).
    nested: bool,
    /// The store stopped logging for this batch (see the module docs).
    unlogged: bool,
}

impl Index {
    /// Runs `ops` as one batch of operations on this index and returns
    /// what it returns ([`begin_batch`](Self::begin_batch), `ops`, then
    /// [`end_batch`](Self::end_batch)).
    ///
    /// The wall-clock and CPU time of the batch are measured once, around
    /// the whole batch (the caller's own work between operations included,
    /// the final checkpoint not), and added to the index phase; per
    /// operation only a simulated device's time is taken. With
    /// [`BatchDurability::AtEnd`] the batch ends with a
    /// [`checkpoint`](Self::checkpoint): everything is durable when it
    /// returns `Ok`. When `ops` fails, the store's durability mode is
    /// restored and the error returned, with no checkpoint.
    ///
    /// ```
    /// use geoflash::geom::Rect;
    /// use geoflash::{BatchDurability, Index, IndexOptions};
    ///
    /// let opts = IndexOptions { device: "mem:".parse()?, ..IndexOptions::default() };
    /// let mut index = Index::create_temporary(&opts)?;
    /// index.batch(BatchDurability::AtEnd, |index| {
    ///     for i in 0..1000u64 {
    ///         let x = (i % 40) as f64;
    ///         index.insert(i, Rect::new(x, 0.0, x + 0.5, 0.5)?)?;
    ///     }
    ///     Ok(())
    /// })?;
    /// assert_eq!(index.len(), 1000);
    /// # Ok::<(), geoflash::Error>(())
    /// ```
    pub fn batch<R>(
        &mut self,
        durability: BatchDurability,
        ops: impl FnOnce(&mut Index) -> Result<R>,
    ) -> Result<R> {
        let batch = self.begin_batch(durability)?;
        let done = ops(self);
        let ended = self.end_batch(batch, done.is_ok());
        let value = done?;
        ended?;
        Ok(value)
    }

    /// Begins a batch (see [`batch`](Self::batch)), for callers that cannot
    /// pass a closure (Python's `with index.batch():`). Every begun batch
    /// must be ended with [`end_batch`](Self::end_batch).
    pub fn begin_batch(&mut self, durability: BatchDurability) -> Result<OpenBatch> {
        let configured = self.tree.durability();
        let at_end = matches!(durability, BatchDurability::AtEnd | BatchDurability::Commit);
        let restore = configured.filter(|d| at_end && d.protects_flushes() && !self.in_batch);
        if restore.is_some() {
            self.writable()?;
            self.tree.set_durability(Durability::UNBOUNDED_GROUP)?;
        }
        // An empty index: the batch's end is the only durability point its
        // objects need, so the store need not log them (module docs).
        let unlogged = restore.is_some() && self.is_empty() && self.tree.begin_unlogged()?;
        let nested = std::mem::replace(&mut self.in_batch, true);
        Ok(OpenBatch {
            durability,
            restore,
            cpu_before: thread_cpu_ns(),
            wall_before: std::time::Instant::now(),
            nested,
            unlogged,
        })
    }

    /// Ends `batch`: adds its wall-clock and CPU time to the index phase,
    /// restores the store's durability mode and, when `succeeded`,
    /// checkpoints ([`BatchDurability::AtEnd`]) or commits
    /// ([`BatchDurability::Commit`]). A batch the store did not log
    /// (see the module docs) ends with a checkpoint, failed or not.
    pub fn end_batch(&mut self, batch: OpenBatch, succeeded: bool) -> Result<()> {
        if !batch.nested {
            let wall = u64::try_from(batch.wall_before.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
            times.add_ns(Clock::Wall, Phase::Index, wall);
            if let (Some(a), Some(b)) = (batch.cpu_before, thread_cpu_ns()) {
                times.add_ns(Clock::Cpu, Phase::Index, b.saturating_sub(a));
            }
        }
        self.in_batch = batch.nested;
        if let Some(d) = batch.restore {
            self.tree.set_durability(d)?;
        }
        if succeeded && !batch.nested {
            match batch.durability {
                BatchDurability::AtEnd => self.checkpoint()?,
                BatchDurability::Commit => self.commit()?,
                BatchDurability::AsConfigured => {}
            }
        } else if batch.unlogged && !crate::staging::stop_requested() {
            // The operations after a failed batch are logged again: the
            // checkpoint ends the store's unlogged mode (not in a process
            // asked to stop, whose builds publish nothing).
            self.checkpoint()?;
        }
        Ok(())
    }
}
