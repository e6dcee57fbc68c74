//! What one response stream (an inbox, a `Watch`, the console's events) may
//! hold unsent: a queue bounded in bytes between the hub, which fills it, and
//! the transport, which empties it as fast as the client reads.
//!
//! The transport polls a stream only while the client's HTTP/2 window has
//! room, so a client that stops reading leaves its items here; this is where
//! the bound must hold. A full queue refuses the next item: the hub then ends
//! a live-only stream (`Watch`, the console) with RESOURCE_EXHAUSTED, and
//! simply stops feeding an inbox until its reader has taken half of what
//! waits (the reader asks for more through [`Sender::on_room`]). Ending a
//! stream frees what it held at once, read or not.
//!
//! A client that reads nothing never sees that end either: the status goes
//! out as trailers, which wait behind data its flow-control window does not
//! let through. So the transport sets a [`Receiver::watchdog`]: once the
//! stream is ended, a transport that has taken nothing for a grace period
//! resets it (RST_STREAM over HTTP/2, which no window holds back; the
//! connection's close over HTTP/1.1), and the stream's slot is free at
//! once. A full inbox is not ended (its reader may be busy, and will read),
//! so it is not reset; it is when a newer stream of its member replaces it.

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
    time::Duration,
};

use tokio::sync::Notify;

use tokio_stream::Stream;

/// How long a stuck stream's transport has to take something before the
/// stream is reset (see [`Receiver::watchdog`]).
pub(crate) const RESET_AFTER: Duration = Duration::from_secs(2);

/// Why the lead ended a stream, in its own words; each edge says it in its
/// protocol's (gRPC: the `Status` of `From<StreamEnd>` in `error.rs`; the
/// console: its message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The reader fell further behind than the stream's budget.
    Behind(String),
    /// A newer stream of the same member took its place.
    Replaced(String),
    /// What it was sent went unacknowledged for too long.
    Unacknowledged(String),
    /// Its reader is gone, or the lead is going away.
    Gone(String),
}

impl StreamEnd {
    /// What the reader is told.
    pub(crate) fn message(&self) -> &str {
        match self {
            StreamEnd::Behind(m)
            | StreamEnd::Replaced(m)
            | StreamEnd::Unacknowledged(m)
            | StreamEnd::Gone(m) => m,
        }
    }
}

/// Why an item was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The queue holds its budget; the reader is behind.
    Full,
    /// The reader is gone.
    Gone,
}

/// Called once the reader has taken half of a full queue.
type RoomCallback = Box<dyn Fn() + Send>;

struct State<T> {
    /// Items not yet taken by the transport, with their sizes.
    queue: VecDeque<(T, usize)>,
    /// Their bytes.
    bytes: usize,
    /// The most bytes the queue holds (one item is always let in).
    max_bytes: usize,
    /// The sender ended the stream: nothing more is queued.
    ended: bool,
    /// Why the stream ends, until the reader takes it.
    end: Option<StreamEnd>,
    /// The sender was dropped: the stream ends once the queue is empty.
    sender_gone: bool,
    /// The reader was dropped: nothing more is queued.
    reader_gone: bool,
    /// An item was refused as `Full`: call `on_room` once there is room.
    wants_room: bool,
    /// What to call when there is room again.
    on_room: Option<RoomCallback>,
    /// The reader's task, waiting for an item.
    waker: Option<Waker>,
    /// Items (and the end) the transport has taken.
    taken: u64,
    /// Wakes the watchdog: the stream was ended, or lost its reader.
    stuck: Arc<Notify>,
}

type Shared<T> = Arc<Mutex<State<T>>>;

fn lock<T>(shared: &Shared<T>) -> MutexGuard<'_, State<T>> {
    // Nothing panics while holding the lock; a poisoned one is still whole.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The hub's end of a stream.
pub(crate) struct Sender<T> {
    shared: Shared<T>,
}

/// The transport's end: a stream of items that ends with the status the
/// sender ended it with, if any.
pub(crate) struct Receiver<T> {
    shared: Shared<T>,
    /// The end status was yielded: the stream is over.
    done: bool,
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.shared);
        f.debug_struct("outbox::Sender")
            .field("items", &state.queue.len())
            .field("bytes", &state.bytes)
            .field("max_bytes", &state.max_bytes)
            .finish()
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("outbox::Receiver")
            .field("done", &self.done)
            .finish()
    }
}

/// A queue of at most `max_bytes` (at least one item).
pub(crate) fn channel<T>(max_bytes: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(State {
        queue: VecDeque::new(),
        bytes: 0,
        max_bytes,
        ended: false,
        end: None,
        sender_gone: false,
        reader_gone: false,
        wants_room: false,
        on_room: None,
        waker: None,
        taken: 0,
        stuck: Arc::new(Notify::new()),
    }));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            done: false,
        },
    )
}

impl<T> Sender<T> {
    /// Queues `item`, which costs `bytes`, unless the queue is full (an
    /// empty queue takes any item) or the reader is gone.
    pub(crate) fn try_send(&self, item: T, bytes: usize) -> Result<(), Refused> {
        let mut state = lock(&self.shared);
        if state.reader_gone || state.ended {
            return Err(Refused::Gone);
        }
        if !state.queue.is_empty() && state.bytes.saturating_add(bytes) > state.max_bytes {
            state.wants_room = true;
            return Err(Refused::Full);
        }
        state.bytes += bytes;
        state.queue.push_back((item, bytes));
        if let Some(waker) = state.waker.take() {
            drop(state);
            waker.wake();
        }
        Ok(())
    }

    /// What to call once the reader has taken half of a queue that refused
    /// an item as full (called on the reader's task: it must not block).
    pub(crate) fn on_room(&self, callback: impl Fn() + Send + 'static) {
        lock(&self.shared).on_room = Some(Box::new(callback));
    }

    /// Ends the stream for `why`: what it held is dropped now, and the
    /// reader gets `why` next.
    pub(crate) fn end(&self, why: StreamEnd) {
        let mut state = lock(&self.shared);
        state.queue.clear();
        state.bytes = 0;
        state.ended = true;
        state.end = Some(why);
        state.stuck.notify_one();
        if let Some(waker) = state.waker.take() {
            drop(state);
            waker.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.sender_gone = true;
        if let Some(waker) = state.waker.take() {
            drop(state);
            waker.wake();
        }
    }
}

impl<T> Stream for Receiver<T> {
    type Item = Result<T, StreamEnd>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut state = lock(&self.shared);
        if let Some(status) = state.end.take() {
            state.taken += 1;
            drop(state);
            self.done = true;
            return Poll::Ready(Some(Err(status)));
        }
        if let Some((item, bytes)) = state.queue.pop_front() {
            state.bytes -= bytes;
            state.taken += 1;
            if state.wants_room && state.bytes <= state.max_bytes / 2 {
                state.wants_room = false;
                if let Some(on_room) = &state.on_room {
                    on_room();
                }
            }
            return Poll::Ready(Some(Ok(item)));
        }
        if state.sender_gone {
            drop(state);
            self.done = true;
            return Poll::Ready(None);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<T: Send + 'static> Receiver<T> {
    /// Resets this gRPC stream (RST_STREAM) when it is stuck, if it runs on
    /// a stream's task of the lead's server ([`crate::reset`]).
    pub(crate) fn reset_when_stuck(&self) {
        if let Some(reset) = crate::reset::Reset::current() {
            tokio::spawn(self.watchdog(RESET_AFTER, move || {
                tracing::warn!(
                    "a stream's client took nothing for {}s after the lead ended it \
                     (--stream-max-bytes, or a newer inbox stream); the stream is reset",
                    RESET_AFTER.as_secs()
                );
                reset.reset();
            }));
        }
    }

    /// Runs until the stream is over; calls `reset` (the transport's way to
    /// end it without the client: RST_STREAM, or closing the connection)
    /// if, once the stream was ended, the transport takes nothing for
    /// `grace`: not even the end, which is all it has left to take. A
    /// reader that takes it in time is not reset.
    pub(crate) fn watchdog(
        &self,
        grace: Duration,
        reset: impl FnOnce() + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let shared = Arc::downgrade(&self.shared);
        let stuck = lock(&self.shared).stuck.clone();
        async move {
            loop {
                stuck.notified().await;
                let taken = |shared: &std::sync::Weak<Mutex<State<T>>>| {
                    let shared = shared.upgrade()?;
                    let state = lock(&shared);
                    (!state.reader_gone).then_some(state.taken)
                };
                let Some(before) = taken(&shared) else {
                    return;
                };
                tokio::time::sleep(grace).await;
                match taken(&shared) {
                    None => return,
                    Some(now) if now == before => {
                        reset();
                        return;
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.reader_gone = true;
        state.queue.clear();
        state.bytes = 0;
        state.on_room = None;
        // The watchdog, if any, ends.
        state.stuck.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio_stream::StreamExt as _;

    #[tokio::test]
    async fn items_pass_in_order_within_the_budget_and_the_stream_ends_with_the_sender() {
        let (tx, mut rx) = channel(10);
        assert_eq!(tx.try_send(1, 4), Ok(()));
        assert_eq!(tx.try_send(2, 6), Ok(()));
        assert_eq!(tx.try_send(3, 1), Err(Refused::Full));
        assert_eq!(rx.next().await.map(|r| r.ok()), Some(Some(1)));
        assert_eq!(tx.try_send(3, 4), Ok(()));
        drop(tx);
        assert_eq!(rx.next().await.map(|r| r.ok()), Some(Some(2)));
        assert_eq!(rx.next().await.map(|r| r.ok()), Some(Some(3)));
        assert!(rx.next().await.is_none());
    }

    #[tokio::test]
    async fn an_empty_queue_takes_an_item_past_the_budget() {
        let (tx, mut rx) = channel(10);
        assert_eq!(tx.try_send("big", 100), Ok(()));
        assert_eq!(tx.try_send("small", 1), Err(Refused::Full));
        assert_eq!(rx.next().await.map(|r| r.ok()), Some(Some("big")));
        assert_eq!(tx.try_send("small", 1), Ok(()));
    }

    #[tokio::test]
    async fn ending_frees_what_was_held_and_the_reader_gets_the_status() {
        let (tx, mut rx) = channel(100);
        for i in 0..10 {
            tx.try_send(i, 10).expect("room");
        }
        tx.end(StreamEnd::Behind("behind".into()));
        assert_eq!(lock(&tx.shared).queue.len(), 0, "freed without a read");
        let status = rx.next().await.expect("an item").expect_err("the status");
        assert_eq!(status, StreamEnd::Behind("behind".into()));
        assert!(rx.next().await.is_none());
        assert_eq!(tx.try_send(0, 1), Err(Refused::Gone));
    }

    #[tokio::test]
    async fn a_full_queue_asks_for_more_once_half_is_read() {
        let (tx, mut rx) = channel(40);
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        tx.on_room(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        for i in 0..4 {
            tx.try_send(i, 10).expect("room");
        }
        assert_eq!(tx.try_send(4, 10), Err(Refused::Full));
        rx.next().await;
        assert_eq!(calls.load(Ordering::SeqCst), 0, "30 of 40 bytes still wait");
        rx.next().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "half read");
        rx.next().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "once per refusal");
    }

    #[tokio::test]
    async fn a_gone_reader_refuses_and_frees() {
        let (tx, rx) = channel(100);
        tx.try_send(1, 10).expect("room");
        drop(rx);
        assert_eq!(tx.try_send(2, 10), Err(Refused::Gone));
        assert_eq!(lock(&tx.shared).bytes, 0);
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_for_an_item() {
        let (tx, mut rx) = channel(100);
        let reader = tokio::spawn(async move { rx.next().await.map(|r| r.ok()) });
        tokio::task::yield_now().await;
        tx.try_send(7, 1).expect("room");
        assert_eq!(reader.await.expect("joined"), Some(Some(7)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_whose_transport_takes_nothing_after_its_end_is_reset() {
        let (tx, rx) = channel::<u32>(10);
        let reset = Arc::new(AtomicUsize::new(0));
        let count = reset.clone();
        let watchdog = tokio::spawn(rx.watchdog(Duration::from_secs(2), move || {
            count.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(tx.try_send(1, 8), Ok(()));
        tx.end(StreamEnd::Behind("behind".into()));
        tokio::time::sleep(Duration::from_millis(1999)).await;
        assert_eq!(reset.load(Ordering::SeqCst), 0, "not before the grace");
        watchdog.await.expect("the watchdog ends");
        assert_eq!(reset.load(Ordering::SeqCst), 1);
        drop(rx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_stream_or_one_read_in_time_is_not_reset() {
        let (tx, mut rx) = channel::<u32>(10);
        let reset = Arc::new(AtomicUsize::new(0));
        let count = reset.clone();
        let watchdog = tokio::spawn(rx.watchdog(Duration::from_secs(2), move || {
            count.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(tx.try_send(1, 8), Ok(()));
        assert_eq!(tx.try_send(2, 8), Err(Refused::Full));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(reset.load(Ordering::SeqCst), 0, "full is not ended");
        tx.end(StreamEnd::Replaced("replaced".into()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(matches!(rx.next().await, Some(Err(_))), "the end, in time");
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(reset.load(Ordering::SeqCst), 0, "it read within the grace");
        drop(rx);
        watchdog.await.expect("the watchdog ends with its reader");
        assert_eq!(reset.load(Ordering::SeqCst), 0);
    }
}
