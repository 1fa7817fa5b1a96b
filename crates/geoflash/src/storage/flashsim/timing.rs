//! The timing model: per-operation latencies and the overlap of operations on
//! different parallel units.
//!
//! Each plane (an array unit: a die, or one plane of a multi-plane die) and
//! each channel keeps the simulated time until which it is busy. A host batch
//! is issued at once at the device clock `now`; every NAND operation of the
//! batch starts when its inputs are ready and its plane (and, for transfers,
//! its channel) is free:
//!
//! - host read: array read on the plane (`read_ns`), then the page crosses the
//!   channel (`transfer`); the plane stays busy until its register is emptied;
//! - host program: the page crosses the channel into the plane's register
//!   (waiting for both), then the array program (`program_ns`);
//! - erase: `erase_ns` on the plane;
//! - GC and wear-levelling copies are on-die copybacks: array read then array
//!   program on the same plane, no channel transfer.
//!
//! The batch completes when its last operation completes and the clock moves
//! there, so a single operation costs the sum of its steps and a batch costs
//! the maximum over the parallel units it touches. The clock saturates at
//! `u64::MAX` nanoseconds (585 years) rather than wrapping.

/// Busy-until times of planes and channels, and the device clock.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    now: u64,
    batch_end: u64,
    plane_busy: Vec<u64>,
    channel_busy: Vec<u64>,
    channels: usize,
    read_ns: u64,
    program_ns: u64,
    erase_ns: u64,
    transfer_ns: u64,
}

impl Timeline {
    /// A timeline for `planes` planes on `channels` channels (plane `u` on
    /// channel `u mod channels`); `transfer_ns` is per flash page.
    pub(crate) fn new(
        planes: usize,
        channels: usize,
        read_ns: u64,
        program_ns: u64,
        erase_ns: u64,
        transfer_ns: u64,
    ) -> Self {
        Timeline {
            now: 0,
            batch_end: 0,
            plane_busy: vec![0; planes],
            channel_busy: vec![0; channels.max(1)],
            channels: channels.max(1),
            read_ns,
            program_ns,
            erase_ns,
            transfer_ns,
        }
    }

    /// The device clock in nanoseconds.
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Starts a batch: returns its issue time.
    pub(crate) fn begin(&mut self) -> u64 {
        self.batch_end = self.now;
        self.now
    }

    /// Ends a batch: the clock moves to its last completion. Returns the batch's duration.
    pub(crate) fn finish(&mut self) -> u64 {
        let start = self.now;
        self.now = self.now.max(self.batch_end);
        self.now - start
    }

    fn plane(&mut self, plane: usize) -> &mut u64 {
        let i = plane % self.plane_busy.len().max(1);
        &mut self.plane_busy[i]
    }

    fn channel_of(&self, plane: usize) -> usize {
        plane % self.channels
    }

    fn done(&mut self, t: u64) -> u64 {
        self.batch_end = self.batch_end.max(t);
        t
    }

    /// A host read of one flash page on `plane`, its inputs ready at `ready`; returns its completion.
    pub(crate) fn read(&mut self, plane: usize, ready: u64) -> u64 {
        let c = self.channel_of(plane);
        let read_ns = self.read_ns;
        let transfer_ns = self.transfer_ns;
        let start = ready.max(*self.plane(plane));
        let array_end = start.saturating_add(read_ns);
        let xfer_start = array_end.max(self.channel_busy[c]);
        let end = xfer_start.saturating_add(transfer_ns);
        self.channel_busy[c] = end;
        *self.plane(plane) = end;
        self.done(end)
    }

    /// A host program of one flash page on `plane`; returns its completion.
    pub(crate) fn program(&mut self, plane: usize, ready: u64) -> u64 {
        let c = self.channel_of(plane);
        let program_ns = self.program_ns;
        let transfer_ns = self.transfer_ns;
        let xfer_start = ready.max(*self.plane(plane)).max(self.channel_busy[c]);
        let xfer_end = xfer_start.saturating_add(transfer_ns);
        self.channel_busy[c] = xfer_end;
        let end = xfer_end.saturating_add(program_ns);
        *self.plane(plane) = end;
        self.done(end)
    }

    /// An on-die copy (copyback) of one page: array read then array program on `plane`.
    pub(crate) fn copyback(&mut self, plane: usize, ready: u64) -> u64 {
        let cost = self.read_ns.saturating_add(self.program_ns);
        let start = ready.max(*self.plane(plane));
        let end = start.saturating_add(cost);
        *self.plane(plane) = end;
        self.done(end)
    }

    /// A block erase on `plane`; returns its completion.
    pub(crate) fn erase(&mut self, plane: usize, ready: u64) -> u64 {
        let erase_ns = self.erase_ns;
        let start = ready.max(*self.plane(plane));
        let end = start.saturating_add(erase_ns);
        *self.plane(plane) = end;
        self.done(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_ops_accumulate_and_batches_overlap() {
        // 2 planes on 2 channels; read 10, program 100, erase 1000, transfer 5.
        let mut t = Timeline::new(2, 2, 10, 100, 1000, 5);
        let t0 = t.begin();
        t.program(0, t0);
        assert_eq!(t.finish(), 105);
        let t0 = t.begin();
        t.read(0, t0);
        assert_eq!(t.finish(), 15);
        assert_eq!(t.now(), 120);
        // Two programs on different planes and channels overlap: 105, not 210.
        let t0 = t.begin();
        t.program(0, t0);
        t.program(1, t0);
        assert_eq!(t.finish(), 105);
        // Two programs on one plane serialise: 210.
        let t0 = t.begin();
        t.program(0, t0);
        t.program(0, t0);
        assert_eq!(t.finish(), 210);
        // An erase after a copyback on the same plane: 110 + 1000.
        let t0 = t.begin();
        let c = t.copyback(1, t0);
        t.erase(1, c);
        assert_eq!(t.finish(), 1110);
    }

    #[test]
    fn a_shared_channel_serialises_transfers() {
        // 2 planes on 1 channel: the second transfer waits for the first.
        let mut t = Timeline::new(2, 1, 10, 100, 1000, 5);
        let t0 = t.begin();
        t.program(0, t0);
        t.program(1, t0);
        // plane 0: xfer 0..5, program 5..105; plane 1: xfer 5..10, program 10..110.
        assert_eq!(t.finish(), 110);
    }
}
