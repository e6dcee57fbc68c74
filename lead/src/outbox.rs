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

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
};

use tokio_stream::Stream;

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
    /// The status the stream ends with, until the reader takes it.
    end: Option<tonic::Status>,
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

    /// Ends the stream with `status`: what it held is dropped now, and the
    /// reader gets `status` next.
    pub(crate) fn end(&self, status: tonic::Status) {
        let mut state = lock(&self.shared);
        state.queue.clear();
        state.bytes = 0;
        state.ended = true;
        state.end = Some(status);
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
    type Item = Result<T, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let mut state = lock(&self.shared);
        if let Some(status) = state.end.take() {
            drop(state);
            self.done = true;
            return Poll::Ready(Some(Err(status)));
        }
        if let Some((item, bytes)) = state.queue.pop_front() {
            state.bytes -= bytes;
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

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared);
        state.reader_gone = true;
        state.queue.clear();
        state.bytes = 0;
        state.on_room = None;
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
        tx.end(tonic::Status::resource_exhausted("behind"));
        assert_eq!(lock(&tx.shared).queue.len(), 0, "freed without a read");
        let status = rx.next().await.expect("an item").expect_err("the status");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
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
}
