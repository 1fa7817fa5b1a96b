//! Reading an input on a thread of its own while the caller applies it: a
//! build by insertion parses its CSV file on a second core instead of
//! between insertions (the parse was about a tenth of a build's CPU).
//!
//! [`read_ahead`] runs an iterator on a new thread, which sends its items in
//! chunks of [`CHUNK`] over a channel of [`CHUNKS_AHEAD`] chunks; the
//! returned iterator yields them in the same order. The reading thread is
//! never more than `CHUNK × (CHUNKS_AHEAD + 1)` items ahead, so the memory
//! it holds is bounded whatever the input's size. Dropping the returned
//! iterator before the end (an error, an interruption) stops the thread at
//! its next chunk and waits for it, so nothing reads the input after the
//! caller is done with it. A panic of the reading thread is raised again in
//! the caller's thread when it reaches the missing items, never taken for
//! the end of the input.
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

/// Items per chunk sent from the reading thread.
pub const CHUNK: usize = 1024;

/// Chunks the channel holds beyond the one each side is working on.
pub const CHUNKS_AHEAD: usize = 4;

/// The items of an iterator run on its own thread ([`read_ahead`]).
pub struct ReadAhead<T> {
    /// Chunks from the reading thread; `None` once it is dropped.
    chunks: Option<Receiver<Vec<T>>>,
    /// The chunk being handed out.
    current: std::vec::IntoIter<T>,
    /// The reading thread, joined when this is dropped.
    reader: Option<JoinHandle<()>>,
}

/// Runs `items` on a new thread and yields its items, in order, as it
/// produces them. Falls back to reading on the caller's thread if the
/// thread cannot be started.
pub fn read_ahead<T, I>(items: I) -> Box<dyn Iterator<Item = T>>
where
    T: Send + 'static,
    I: Iterator<Item = T> + Send + 'static,
{
    let (send, chunks) = sync_channel::<Vec<T>>(CHUNKS_AHEAD);
    // The iterator moves to the thread only if the thread starts; `spawn`
    // consumes its closure either way, so the closure takes the iterator
    // out of a slot the caller can still reach when the spawn fails.
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(items)));
    let theirs = std::sync::Arc::clone(&slot);
    let spawned = std::thread::Builder::new()
        .name("geoflash-read-ahead".into())
        .spawn(move || {
            let Some(mut items) = theirs.lock().ok().and_then(|mut s| s.take()) else {
                return;
            };
            loop {
                let chunk: Vec<T> = items.by_ref().take(CHUNK).collect();
                // An empty chunk ends the input; a send fails when the
                // consumer is gone: either way the thread is done.
                if chunk.is_empty() || send.send(chunk).is_err() {
                    return;
                }
            }
        });
    match spawned {
        Ok(reader) => Box::new(ReadAhead {
            chunks: Some(chunks),
            current: Vec::new().into_iter(),
            reader: Some(reader),
        }),
        Err(_) => match slot.lock().ok().and_then(|mut s| s.take()) {
            Some(items) => Box::new(items),
            None => Box::new(std::iter::empty()),
        },
    }
}

impl<T> Iterator for ReadAhead<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        loop {
            if let Some(item) = self.current.next() {
                return Some(item);
            }
            match self.chunks.as_ref()?.recv() {
                Ok(chunk) => self.current = chunk.into_iter(),
                Err(_) => {
                    // The channel closed: the input ended, or the reading
                    // thread panicked, which must not look like an end of
                    // the input (a build would then publish part of it):
                    // its panic goes on here, in the caller's thread.
                    self.chunks = None;
                    if let Some(Err(panic)) = self.reader.take().map(JoinHandle::join) {
                        std::panic::resume_unwind(panic);
                    }
                    return None;
                }
            }
        }
    }
}

impl<T> Drop for ReadAhead<T> {
    fn drop(&mut self) {
        // Closing the channel first makes the thread's next send fail, so
        // the join below waits for at most one chunk of reading.
        self.chunks = None;
        if let Some(reader) = self.reader.take() {
            // Dropped before the end: the caller stops anyway, so a panic
            // of the reader (which could not have been seen yet) has
            // nothing left to change.
            let _ = reader.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn yields_every_item_in_order() {
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 7 * CHUNK + 13] {
            let got: Vec<usize> = read_ahead(0..n).collect();
            assert_eq!(got, (0..n).collect::<Vec<_>>(), "{n} items");
        }
    }

    #[test]
    fn a_consumer_that_stops_early_stops_the_reader_within_its_bound() {
        let produced = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&produced);
        let items = (0..usize::MAX).inspect(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let mut ahead = read_ahead(items);
        assert_eq!(ahead.nth(10), Some(10));
        drop(ahead);
        // Joined on drop: the count no longer moves, and the reader never
        // ran more than its bound ahead of the 11 items taken.
        let after = produced.load(Ordering::Relaxed);
        assert!(
            after <= 11 + CHUNK * (CHUNKS_AHEAD + 2),
            "{after} items read"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(produced.load(Ordering::Relaxed), after);
    }

    #[test]
    fn a_reader_that_panics_panics_the_caller_instead_of_ending_the_items() {
        let items = (0..3000).inspect(|&i| {
            assert!(i != 2500, "the reader fails at item 2500");
        });
        let mut ahead = read_ahead(items);
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ahead.by_ref().count()));
        assert!(got.is_err(), "the items ended quietly: {got:?}");
    }

    #[test]
    fn errors_arrive_in_their_place() {
        let items = (0..3000).map(|i| if i == 2500 { Err(i) } else { Ok(i) });
        let got: Result<Vec<i32>, i32> = read_ahead(items).collect();
        assert_eq!(got, Err(2500));
    }
}
