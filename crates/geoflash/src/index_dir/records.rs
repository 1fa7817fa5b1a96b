//! The record map of a front end inside the index (issue 43, item 1): the
//! user ids and objects of the Python package ([`Records`]), kept by the
//! [`Index`] so that every checkpoint (the front end's, a commit's by
//! time, the end of an unlogged batch, `close`, the command line's
//! `recover` and `checkpoint`) keeps the map and the tree together.
//!
//! Two protocols (`docs/architecture.md`, "Design: the map's changes in the
//! store's log"):
//!
//! - **In the store's log** (an index directory of an eFIND or FAST store
//!   whose log is of superblock version 8 or 9, not on a simulated device
//!   saved at checkpoints): the front end stages each change as a frame
//!   ([`Index::insert_logged_record`], [`Index::delete_logged_record`]); the
//!   store logs it with the operation it belongs to, so a commit syncs one
//!   log, and restart hands back exactly the frames of the operations it
//!   kept. A checkpoint writes the snapshot of the next generation
//!   (`pyrecords.next.dat`), checkpoints the store naming it, then renames
//!   the snapshot to `pyrecords.dat`; [`Records::load_logged`] reads the
//!   map back at open from the generation the store names.
//! - **The map's own log** (`pyrecords.log`, every other index): the front
//!   end keeps it ([`crate::records::log`]); the index only holds the map
//!   ([`Index::set_records`]) and its checkpoints leave the files alone.
use crate::geom::Rect;
use crate::records::{log as rlog, Records};
use crate::{Error, Result};

use super::Index;

/// Bytes of CLIENT frames in the store's log above which the index
/// checkpoints between operations (at least; the snapshot's size when
/// larger, and never more than a quarter of the log): a checkpoint's
/// snapshot is paid for by at least as many logged bytes, and the frames
/// never crowd the log.
pub const RECORD_FRAMES_BUDGET: u64 = 64 << 20;

/// The record map an index holds (see the module docs).
#[derive(Debug)]
pub(crate) struct RecordState {
    /// The map (an identity map while the front end attached none).
    map: Records,
    /// Its changes go to the store's log as CLIENT frames.
    logged: bool,
    /// Bytes of the newest snapshot.
    snapshot_bytes: u64,
    /// The map changed since its newest snapshot (a checkpoint writes the
    /// next one only then).
    changed: bool,
    /// The directory holds a front end's map that no front end has
    /// claimed in this session ([`Index::claim_records`]): the index's
    /// keys are that map's, not a caller's ids, so writes by key are
    /// refused ([`Index::check_keyed_writes`]).
    unclaimed: bool,
    /// A frame is staged for the running operation ([`Index::with_frame`]):
    /// the checkpoint the previous operation made due ran before the map
    /// changed, and none may run until the operation commits (its
    /// snapshot would hold the change its frame logs again).
    pub(super) staged: bool,
}

impl RecordState {
    /// The generation of the record map's newest snapshot (0 for an
    /// identity map).
    pub(super) fn map_generation(&self) -> u64 {
        self.map.generation()
    }
}

impl Default for RecordState {
    fn default() -> Self {
        RecordState {
            map: Records::identity(),
            logged: false,
            snapshot_bytes: 0,
            changed: false,
            unclaimed: false,
            staged: false,
        }
    }
}

impl Index {
    /// The record map (an identity map when the front end attached none).
    pub fn records(&self) -> &Records {
        &self.records.map
    }

    /// The record map, to change it (the front end's own protocol; with
    /// the store's log use [`Index::insert_logged_record`] and
    /// [`Index::delete_logged_record`], which log what they change).
    pub fn records_mut(&mut self) -> &mut Records {
        &mut self.records.map
    }

    /// Attaches `map`, whose changes the front end logs itself (the map's
    /// own log, `pyrecords.log`): checkpoints leave its files alone.
    pub fn set_records(&mut self, map: Records) {
        self.records = RecordState {
            map,
            ..RecordState::default()
        };
    }

    /// Replaces the record map by `map` (its protocol unchanged) and
    /// returns the one it held (a front end's repair after a crash).
    pub fn swap_records(&mut self, map: Records) -> Records {
        self.records.changed = true;
        std::mem::replace(&mut self.records.map, map)
    }

    /// Whether the record map's changes go to the store's log (see the
    /// module docs): a commit then syncs that log only.
    pub fn records_in_log(&self) -> bool {
        self.records.logged
    }

    /// Whether the map of a new index can keep its changes in the store's
    /// log: a writable index directory whose store's log holds CLIENT
    /// frames (eFIND or FAST, superblock versions 8 and 9), not saved
    /// whole at checkpoints.
    pub fn can_log_records(&self) -> bool {
        self.dir.is_some()
            && self.access == crate::manifest::Access::Write
            && !self.saved_at_checkpoints()
            && self.tree.client_log_ref().is_some()
    }

    /// Attaches `map` to a new index whose changes go to the store's log
    /// ([`Index::can_log_records`]) and checkpoints, which writes its first
    /// snapshot and names it in the store's checkpoint; `Ok(false)`, having
    /// attached nothing, when the index cannot.
    pub fn log_records_in_store(&mut self, map: Records) -> Result<bool> {
        if !self.can_log_records() || map.is_identity() {
            return Ok(false);
        }
        self.records = RecordState {
            map,
            logged: true,
            snapshot_bytes: 0,
            changed: true,
            unclaimed: false,
            staged: false,
        };
        self.checkpoint()?;
        Ok(true)
    }

    /// Allocates a record key for user `id` with its pickled object and
    /// inserts it with `rect`, the ADD logged with the insertion (a map in
    /// the store's log). On failure the key is given back. A failure for
    /// bad input logged nothing; after any other (a device or log error,
    /// possibly after the frame reached the log) the store refuses every
    /// later change, so the key is never handed out again in this process,
    /// and the next open's restart rebuilds map and tree together from what
    /// the log holds: reopen the index before trusting its answers.
    pub fn insert_logged_record(&mut self, id: i64, rect: Rect, obj: Option<Vec<u8>>) -> Result<u64> {
        self.check_logged()?;
        // What the previous operation made due, before the map changes.
        self.checkpoint_if_due()?;
        let key = self.records.map.add(id, obj)?;
        let frame = rlog::add_frame(key, id, self.records.map.obj(key));
        let done = self.with_frame(&frame, |index| index.insert(key, rect));
        if let Err(e) = done {
            self.records.map.undo_add(key);
            return Err(e);
        }
        self.records.changed = true;
        Ok(key)
    }

    /// Deletes record `key` with `rect` (from the object heap too when it
    /// holds the key), the REMOVE logged with the deletion (a map in the
    /// store's log).
    pub fn delete_logged_record(&mut self, key: u64, rect: Rect) -> Result<()> {
        self.check_logged()?;
        self.checkpoint_if_due()?;
        let frame = rlog::remove_frame(key);
        let object = self.objects().is_some_and(|h| h.contains(key));
        self.with_frame(&frame, |index| {
            if object {
                index.delete_object(key)
            } else {
                index.delete(key, rect)
            }
        })?;
        self.records.map.remove(key);
        self.records.changed = true;
        Ok(())
    }

    /// An error unless the map's changes go to the store's log.
    fn check_logged(&self) -> Result<()> {
        if self.records.logged {
            return Ok(());
        }
        Err(Error::invalid(
            "this index's record map keeps its own log: change it through the front end's protocol",
        ))
    }

    /// Runs `op` with `frame` staged for the store's next committed
    /// operation (the one `op` runs); what `op` did not commit is dropped.
    fn with_frame(&mut self, frame: &[u8], op: impl FnOnce(&mut Index) -> Result<()>) -> Result<()> {
        self.writable()?;
        if self.tree.client_log_ref().is_none() {
            return Err(Error::invalid(
                "the store's log takes no record-map frames (internal: the map is marked as logged there)",
            ));
        }
        // A change through the map's own protocol is the front end's,
        // whether or not it claimed the map.
        let unclaimed = std::mem::replace(&mut self.records.unclaimed, false);
        let done = self.with_staged(Some(frame), op);
        self.records.unclaimed = unclaimed;
        done
    }

    /// Runs `op` with `frame` (if any) staged for the store's next
    /// committed operation, no checkpoint running meanwhile (its snapshot
    /// or heap commit would hold the change the frame logs again); what
    /// `op` did not commit is dropped. Nested calls (the record map's frame
    /// and the object heap's, for one operation) stage both.
    pub(super) fn with_staged(
        &mut self,
        frame: Option<&[u8]>,
        op: impl FnOnce(&mut Index) -> Result<()>,
    ) -> Result<()> {
        self.writable()?;
        if let (Some(f), Some(c)) = (frame, self.tree.client_log()) {
            if let Err(e) = c.stage(f) {
                if !self.records.staged {
                    c.discard_staged();
                }
                return Err(e);
            }
        }
        let outer = std::mem::replace(&mut self.records.staged, true);
        let done = op(self);
        self.records.staged = outer;
        if !outer {
            if let Some(c) = self.tree.client_log() {
                c.discard_staged();
            }
        }
        done
    }

    /// Whether the record map must be saved at the next checkpoint: its
    /// changes are in the store's log and it changed since its snapshot.
    pub(super) fn records_changed(&self) -> bool {
        self.records.logged
            && self.records.changed
            && self.access == crate::manifest::Access::Write
            && self.dir.is_some()
    }

    /// Before the store's checkpoint naming `generation`, of an index whose
    /// map is in its log: writes the snapshot of that generation; returns
    /// whether it did (`records_after_checkpoint` then promotes it).
    pub(super) fn records_before_checkpoint(&mut self, generation: u64) -> Result<bool> {
        if !self.records.logged || self.access == crate::manifest::Access::Read {
            return Ok(false);
        }
        let Some(dir) = self.dir.clone() else {
            return Ok(false);
        };
        // The store's newest checkpoint names a generation the map has not
        // taken: that checkpoint's rename failed, and its snapshot may
        // still be `pyrecords.next.dat`, which this one would replace.
        let named = self
            .tree
            .client_log_ref()
            .and_then(|c| c.generation())
            .filter(|&g| g & super::objects::HEAP_ONLY_GENERATIONS == 0);
        if let Some(named) = named.filter(|&g| g != self.records.map.generation()) {
            self.records.map.finish_promotion(&dir, named)?;
        }
        let bytes = self.records.map.save_next(&dir, generation)?;
        self.records.snapshot_bytes = bytes;
        Ok(true)
    }

    /// After the store's checkpoint naming `generation`: the snapshot
    /// becomes `pyrecords.dat`.
    pub(super) fn records_after_checkpoint(&mut self, generation: u64) -> Result<()> {
        if let Some(dir) = self.dir.clone() {
            self.records.map.promote_next(&dir, generation)?;
        }
        self.records.changed = false;
        Ok(())
    }

    /// At open: the map of an index whose store's newest checkpoint names a
    /// record-map generation, read from its snapshot and the frames restart
    /// handed back (see [`Records::load_logged`]); for a map with its own
    /// log, the mark of a recovery in that log (`mark_own_log_recovery`).
    pub(super) fn open_logged_records(
        &mut self,
        found: Option<crate::store::log::RecoveredClient>,
    ) -> Result<()> {
        self.load_logged_records(found)?;
        self.mark_own_log_recovery()
    }

    /// At open for writing, when the directory holds a front end's map with
    /// its own log (`pyrecords.dat`, `pyrecords.log`) and restart replayed
    /// operations or the rollback journal undid pages: marks that log
    /// ([`rlog::mark_tree_recovered`]) before anything checkpoints the tree
    /// (the command line's `recover` does), which would leave the front
    /// end's next open no sign that the tree moved past what the map logged.
    fn mark_own_log_recovery(&self) -> Result<()> {
        let Some(dir) = self.dir.as_deref() else {
            return Ok(());
        };
        let recovered = self
            .restart
            .as_ref()
            .is_some_and(|r| r.recovered_anything())
            || self.rolled_back > 0;
        let own_log = !self.records.logged && dir.join(crate::records::RECORDS_FILE).exists();
        if !recovered || !own_log || self.access != crate::manifest::Access::Write {
            return Ok(());
        }
        rlog::mark_tree_recovered(dir).map(|_| ())
    }

    /// [`Index::open_logged_records`] of a map in the store's log.
    fn load_logged_records(
        &mut self,
        found: Option<crate::store::log::RecoveredClient>,
    ) -> Result<()> {
        let Some(dir) = self.dir.clone() else {
            return Ok(());
        };
        let Some(found) = found else {
            return Ok(());
        };
        let Some(generation) = found.generation else {
            return Ok(());
        };
        if generation & super::objects::HEAP_ONLY_GENERATIONS != 0 {
            // The object heap's generation: no record map in the log.
            if !found.frames.is_empty() {
                return Err(Error::corrupt(
                    None,
                    format!(
                        "the store's log holds {} record-map change(s), but its newest checkpoint names no record map (generation {generation} is the object heap's)",
                        found.frames.len()
                    ),
                )
                .in_file(dir.join(crate::records::RECORDS_FILE)));
            }
            return Ok(());
        }
        let writable = self.access == crate::manifest::Access::Write;
        let map = Records::load_logged(&dir, generation, &found.frames, writable)?;
        let snapshot_bytes = std::fs::metadata(dir.join(crate::records::RECORDS_FILE))
            .or_else(|_| std::fs::metadata(dir.join(crate::records::NEXT_FILE)))
            .map_or(0, |m| m.len());
        // Frames the store's next checkpoint drops go into a snapshot, and
        // a snapshot of an older format is rewritten in the current one.
        let changed =
            !found.frames.is_empty() || map.read_version() < crate::records::LOGGED_VERSION;
        self.records = RecordState {
            map,
            logged: true,
            snapshot_bytes,
            changed,
            unclaimed: true,
            staged: false,
        };
        Ok(())
    }

    /// At open, after [`Index::open_logged_records`]: marks a map with its
    /// own log (`pyrecords.dat`, `pyrecords.log`) as unclaimed too, which
    /// the index does not read (the front end does, and reconciles it with
    /// the tree after a crash).
    pub(super) fn note_own_log_records(&mut self) {
        let Some(dir) = self.dir.as_deref() else {
            return;
        };
        let files = [crate::records::RECORDS_FILE, crate::records::NEXT_FILE, rlog::LOG_FILE];
        if !self.records.logged && files.iter().any(|f| dir.join(f).exists()) {
            self.records.unclaimed = true;
        }
    }

    /// Whether the directory holds a front end's record map (the Python
    /// package's `pyrecords.dat`): the index's keys are that map's record
    /// keys, not the front end's ids. The map is [`Index::records`] when
    /// its changes are in the store's log ([`Index::records_in_log`]);
    /// otherwise the front end reads it ([`Records::load`]).
    pub fn has_front_end_records(&self) -> bool {
        self.records.unclaimed || !self.records.map.is_identity()
    }

    /// Declares the caller the front end whose record map the index holds
    /// (the Python package, after it opened the index): its writes by
    /// record key are then accepted. Without it an index holding a front
    /// end's map refuses them (`Index::check_keyed_writes`), since a key
    /// written by another caller would be an entry the map does not know,
    /// or one it knows as another object.
    pub fn claim_records(&mut self) {
        self.records.unclaimed = false;
    }

    /// An error naming the directory when the index holds a front end's
    /// record map that no front end claimed ([`Index::claim_records`]):
    /// writes by key would not go through that map.
    pub(super) fn check_keyed_writes(&self) -> Result<()> {
        if !self.records.unclaimed {
            return Ok(());
        }
        let dir = self.dir.as_deref().map_or(String::new(), |d| format!("{}: ", d.display()));
        Err(Error::invalid(format!(
            "{dir}this index was written by the Python package (geoflash.Index): its entries are keyed \
             by the package's id map ({}), not by the ids given here, so it is changed from Python only \
             (queries, checkpoint and recover work here)",
            crate::records::RECORDS_FILE
        )))
    }

    /// Whether the frames in the store's log (the record map's and the
    /// object heap's), or the object heap's changes pending in memory, have
    /// reached their budget (see [`RECORD_FRAMES_BUDGET`]): the next
    /// durability point checkpoints.
    pub(super) fn record_frames_due(&self) -> bool {
        if self
            .objects
            .as_ref()
            .is_some_and(|h| h.pending_bytes() > RECORD_FRAMES_BUDGET)
        {
            return true;
        }
        if !self.records.logged && self.objects.is_none() {
            return false;
        }
        let Some(c) = self.tree.client_log_ref() else {
            return false;
        };
        let budget = RECORD_FRAMES_BUDGET
            .max(self.records.snapshot_bytes)
            .min(c.room().max(1));
        c.bytes() > budget
    }
}
