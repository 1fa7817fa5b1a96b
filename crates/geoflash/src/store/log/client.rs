//! A front end's frames in the log: CLIENT records (issue 43, item 1).
//!
//! A front end that keeps state of its own beside the tree (the record map
//! of user ids and objects, `crate::records`) *stages* frames with the
//! store before the operation they belong to; the store attaches the
//! staged frames to the next operation that commits and logs them as one
//! CLIENT record with that operation's id (in the compact format, one
//! CLIENT record per logged group of operations), so they are durable
//! exactly when that operation is, and restart hands back exactly the
//! frames of the operations it kept ([`super::recovery`]). The log and the
//! stores never read a frame: a CLIENT payload is the frames, each as its
//! length (an unsigned LEB128 varint) and its bytes.
//!
//! Only a checkpoint makes frames obsolete; its CHECKPOINT payload carries
//! the front end's *generation* (the snapshot that holds every frame
//! before it, [`super::CheckpointState::client_generation`]), which is how
//! a front end that writes its snapshot before the store's checkpoint
//! tells, after a crash between the two, which snapshot the frames follow.
use integer_encoding::VarInt;

use super::record::{Record, RecordKind, MAX_PAYLOAD};
use crate::store::OpId;
use crate::{Error, Result};

/// Bytes of frames held for a logged group at which the store logs the
/// group (half a record's largest payload, at most half the room; see
/// [`ClientLog::group_due`]).
pub const GROUP_BYTES: usize = MAX_PAYLOAD / 2;

/// Frames staged or held for logging, packed as a CLIENT payload.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ClientFrames {
    bytes: Vec<u8>,
}

impl ClientFrames {
    /// Appends one frame.
    pub fn push(&mut self, frame: &[u8]) {
        let mut len = [0u8; 10];
        let n = frame.len().encode_var(&mut len);
        self.bytes.extend_from_slice(&len[..n]);
        self.bytes.extend_from_slice(frame);
    }

    /// Appends every frame of `other`, emptying it.
    pub fn append(&mut self, other: &mut ClientFrames) {
        if self.bytes.is_empty() {
            std::mem::swap(&mut self.bytes, &mut other.bytes);
        } else {
            self.bytes.append(&mut other.bytes);
        }
    }

    /// Whether no frame is held.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Forgets every frame.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// The CLIENT record of operation `op` holding the frames (which are
    /// then forgotten); `None` when there are none.
    pub fn take_record(&mut self, op: OpId) -> Option<Record> {
        if self.bytes.is_empty() {
            return None;
        }
        Some(Record::new(
            RecordKind::Client,
            op,
            0,
            std::mem::take(&mut self.bytes),
        ))
    }

    /// The frames of a CLIENT record's payload, in the order they were
    /// staged; [`Error::Corrupt`] for a payload that does not parse.
    pub fn unpack(rec: &Record) -> Result<Vec<Vec<u8>>> {
        let bad = || {
            Error::corrupt(
                None,
                format!("log record {}: a CLIENT payload that does not parse", rec.lsn),
            )
        };
        let mut out = Vec::new();
        let mut at = 0;
        let p = &rec.payload;
        while at < p.len() {
            let (len, n) = u64::decode_var(p.get(at..).ok_or_else(bad)?).ok_or_else(bad)?;
            at += n;
            let len = usize::try_from(len).map_err(|_| bad())?;
            let end = at.checked_add(len).ok_or_else(bad)?;
            out.push(p.get(at..end).ok_or_else(bad)?.to_vec());
            at = end;
        }
        Ok(out)
    }
}

internal! {
    /// What restart found for a front end: the generation the newest
    /// checkpoint named and the frames logged since, oldest first.
    #[derive(Debug, Default, Clone, PartialEq, Eq)]
    pub struct RecoveredClient {
        /// [`super::CheckpointState::client_generation`] of the newest
        /// checkpoint (`None`: none was named, as in logs before version 8).
        pub generation: Option<u64>,
        /// The frames of the operations restart kept, in log order.
        pub frames: Vec<Vec<u8>>,
        /// Bytes of CLIENT payloads among the survivors.
        pub bytes: u64,
    }
}

impl RecoveredClient {
    /// Adds the frames of `rec`, the next of restart's survivors (oldest
    /// first), when it is a CLIENT record: true when it was.
    pub fn add(&mut self, rec: &Record) -> Result<bool> {
        if rec.kind != RecordKind::Client {
            return Ok(false);
        }
        self.bytes += rec.payload.len() as u64;
        self.frames.extend(ClientFrames::unpack(rec)?);
        Ok(true)
    }

    /// Collects the frames of the CLIENT records among `records` (restart's
    /// survivors) after the checkpoint naming `generation`.
    #[cfg(test)]
    pub fn collect(generation: Option<u64>, records: &super::KeptRecords) -> Result<RecoveredClient> {
        let mut out = RecoveredClient {
            generation,
            ..RecoveredClient::default()
        };
        for rec in records.iter() {
            out.add(&*rec?)?;
        }
        Ok(out)
    }
}

internal! {
    /// A store's side of a front end's frames (eFIND and FAST, on logs of
    /// superblock versions 8 to 11): what is staged for the running operation,
    /// held for the next logged group, the generation checkpoints name, and
    /// what restart found. Front ends reach it through
    /// [`crate::store::NodeStore::client_log`].
    #[derive(Debug, Default)]
    pub struct ClientLog {
        /// Frames staged for the next operation to commit.
        staged: ClientFrames,
        /// Frames of committed operations not logged yet (a compact log's held
        /// group).
        held: ClientFrames,
        /// The generation the next checkpoint names.
        next_generation: Option<u64>,
        /// The generation the newest checkpoint named.
        generation: Option<u64>,
        /// What restart found, until the front end takes it.
        recovered: Option<RecoveredClient>,
        /// Bytes of CLIENT payloads in the log since the newest checkpoint.
        bytes: u64,
        /// Bytes of frames the log can take between checkpoints without
        /// crowding its own records (0: not set, no limit).
        room: u64,
    }
}

impl ClientLog {
    /// The client log of a store whose newest checkpoint named
    /// `generation` and whose restart kept `recovered` (frames since it).
    pub fn restarted(recovered: RecoveredClient) -> ClientLog {
        ClientLog {
            next_generation: recovered.generation,
            generation: recovered.generation,
            bytes: recovered.bytes,
            recovered: Some(recovered),
            ..ClientLog::default()
        }
    }

    /// The same client log, its frames limited to `room` bytes between
    /// checkpoints (the stores give a quarter of their log's capacity).
    pub fn with_room(mut self, room: u64) -> ClientLog {
        self.room = room;
        self
    }

    /// Bytes of frames the log can take between checkpoints (see
    /// [`with_room`](Self::with_room); `u64::MAX` when not set).
    pub fn room(&self) -> u64 {
        if self.room == 0 {
            u64::MAX
        } else {
            self.room
        }
    }

    /// Stages `frame` for the next operation that commits: it is logged
    /// with that operation and kept by restart exactly when it is. An
    /// error, staging nothing, when the operation's frames would pass
    /// [`max_op_bytes`](Self::max_op_bytes): a CLIENT record must fit in
    /// one log record.
    pub fn stage(&mut self, frame: &[u8]) -> Result<()> {
        let limit = self.max_op_bytes();
        let after = self.staged.bytes.len() + frame.len() + 10;
        if after > limit {
            return Err(Error::invalid(format!(
                "a change of {} bytes (a stored geometry or object) is more than the store's log carries \
                 with one operation ({limit} bytes: a quarter of a log record, and of the room the log \
                 keeps for such changes)",
                frame.len()
            )));
        }
        self.staged.push(frame);
        Ok(())
    }

    /// The most bytes of frames one operation may stage: a quarter of a
    /// record's largest payload and of the [room](Self::room), so that a
    /// held group logged once it passes [`GROUP_BYTES`] still fits in one
    /// record.
    pub fn max_op_bytes(&self) -> usize {
        let room = usize::try_from(self.room() / 4).unwrap_or(usize::MAX);
        (MAX_PAYLOAD / 4).min(room)
    }

    /// Whether the frames held for the next logged group have reached
    /// [`GROUP_BYTES`]: the store logs the group now (its CLIENT record
    /// must fit in one log record).
    pub fn group_due(&self) -> bool {
        let room = usize::try_from(self.room() / 2).unwrap_or(usize::MAX);
        self.held.bytes.len() >= GROUP_BYTES.min(room)
    }

    /// Forgets the frames staged and not yet committed (the operation
    /// they were staged for failed, or did not run).
    pub fn discard_staged(&mut self) {
        self.staged.clear();
    }

    /// Operation commit: the staged frames join the held ones.
    pub fn committed(&mut self) {
        self.held.append(&mut self.staged);
    }

    /// Operation commit in a store that logs nothing now (the unlogged
    /// mode, whose checkpoint is the durability point): the staged frames
    /// are dropped, the front end's snapshot at that checkpoint holds them.
    pub fn committed_unlogged(&mut self) {
        self.staged.clear();
        self.held.clear();
    }

    /// The CLIENT record of the held frames with operation `op` (the
    /// operation, or the last of the group, they are logged with), counted
    /// as logged; `None` when nothing is held.
    pub fn take_record(&mut self, op: OpId) -> Option<Record> {
        let rec = self.held.take_record(op)?;
        self.bytes += rec.payload.len() as u64;
        Some(rec)
    }

    /// Whether frames were logged or are held since the newest checkpoint:
    /// only a checkpoint that names the front end's next generation may
    /// make them obsolete (a store's own emergency checkpoint may not).
    pub fn holds_logged_frames(&self) -> bool {
        self.bytes > 0 || !self.held.is_empty() || !self.staged.is_empty()
    }

    /// Sets the generation the next checkpoint names (the front end's
    /// snapshot holding every frame staged so far).
    pub fn set_next_generation(&mut self, generation: u64) {
        self.next_generation = Some(generation);
    }

    /// The generation the next checkpoint names.
    pub fn next_generation(&self) -> Option<u64> {
        self.next_generation
    }

    /// The generation the newest checkpoint named.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// Whether the next checkpoint must be taken even with nothing else to
    /// do: it names another generation than the newest one.
    pub fn generation_pending(&self) -> bool {
        self.next_generation != self.generation
    }

    /// A checkpoint naming [`next_generation`](Self::next_generation) is
    /// durable: the frames before it are obsolete.
    pub fn checkpointed(&mut self) {
        self.generation = self.next_generation;
        self.bytes = 0;
        self.held.clear();
    }

    /// Bytes of CLIENT payloads in the log since the newest checkpoint.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What restart found (once; `None` after).
    pub fn take_recovered(&mut self) -> Option<RecoveredClient> {
        self.recovered.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::log::{recover, NO_OP};

    /// A CLIENT record of operation `op` holding the one frame `[b]`, at `lsn`.
    fn client(lsn: u64, op: OpId, b: u8) -> Record {
        let mut f = ClientFrames::default();
        f.push(&[b]);
        let mut r = f.take_record(op).unwrap();
        r.lsn = lsn;
        r
    }

    fn rec(lsn: u64, kind: RecordKind, op: OpId, page: u64, payload: Vec<u8>) -> Record {
        Record::at(lsn, kind, op, page, payload)
    }

    #[test]
    fn restart_keeps_client_frames_exactly_with_their_operations() {
        let mut log = vec![
            rec(1, RecordKind::Checkpoint, NO_OP, 0, vec![]),
            rec(2, RecordKind::New, 1, 5, vec![0; 4]),
            client(3, 1, 1),
            rec(4, RecordKind::Commit, 1, 0, vec![]),
            client(5, 2, 2),
            rec(6, RecordKind::Mod, 2, 5, vec![0; 4]),
            rec(7, RecordKind::Commit, 2, 0, vec![]),
            // A FLUSH of the page makes its records obsolete, not the frames.
            Record {
                lsn: 8,
                ..Record::flush(&[5]).unwrap()
            },
            // Operation 3 never committed: its frame goes with it.
            client(9, 3, 3),
            rec(10, RecordKind::Mod, 3, 5, vec![0; 4]),
        ];
        let got = recover(log.clone());
        let found = RecoveredClient::collect(Some(4), &got.records).unwrap();
        assert_eq!(found.frames, vec![vec![1], vec![2]]);
        assert_eq!(found.generation, Some(4));
        assert_eq!(got.incomplete_ops, vec![3]);
        // The survivors are what compaction writes: recovering them again
        // keeps the same frames.
        let again = recover(got.records.all());
        assert_eq!(
            RecoveredClient::collect(None, &again.records).unwrap().frames,
            vec![vec![1], vec![2]]
        );
        // A later CHECKPOINT makes every frame before it obsolete.
        log.push(rec(11, RecordKind::Checkpoint, NO_OP, 0, vec![]));
        log.push(client(12, NO_OP, 4));
        let got = recover(log);
        let found = RecoveredClient::collect(Some(5), &got.records).unwrap();
        assert_eq!(found.frames, vec![vec![4]]);
    }

    #[test]
    fn frames_round_trip_through_a_client_record() {
        let mut f = ClientFrames::default();
        let frames: Vec<Vec<u8>> = vec![vec![], vec![1], vec![7; 300], vec![2, 3]];
        for fr in &frames {
            f.push(fr);
        }
        let mut more = ClientFrames::default();
        more.push(&[9, 9]);
        f.append(&mut more);
        assert!(more.is_empty());
        let rec = f.take_record(5).unwrap();
        assert!(f.is_empty() && f.take_record(6).is_none());
        assert_eq!((rec.kind, rec.op, rec.page), (RecordKind::Client, 5, 0));
        let mut want = frames.clone();
        want.push(vec![9, 9]);
        assert_eq!(ClientFrames::unpack(&rec).unwrap(), want);
        // A payload cut inside a frame does not parse.
        let mut cut = rec.clone();
        cut.payload.pop();
        assert!(ClientFrames::unpack(&cut).is_err());
    }
}
