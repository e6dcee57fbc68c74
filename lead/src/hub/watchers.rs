//! The open `Watch` streams (and the console's event streams): each is sent
//! every notice of a committed batch, shared, and a watcher that falls
//! `--stream-max-bytes` behind is ended, never waited for.

use mesh_core::effect::Notice;

use super::{EventSink, Watched};
use crate::outbox::{self, Refused, StreamEnd};

/// Who watches the team's events.
#[derive(Debug)]
pub(crate) struct Watchers {
    /// One sender per open stream.
    sinks: Vec<EventSink>,
    /// The most bytes one stream holds unread before it is ended.
    max_bytes: usize,
}

impl Watchers {
    /// No watchers yet; each stream may hold `max_bytes` unread.
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            sinks: Vec::new(),
            max_bytes,
        }
    }

    /// Whether nobody watches (then notices need not be formed at all).
    pub(crate) fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// A new watcher: where its events come out.
    pub(crate) fn add(&mut self) -> outbox::Receiver<Watched> {
        let (sink, events) = outbox::channel(self.max_bytes);
        self.sinks.push(sink);
        events
    }

    /// Sends each of `events` (when it happened, what) to every watcher,
    /// one shared value however many watch; a watcher that is full is
    /// ended and dropped, one that is gone is dropped.
    pub(crate) fn send(&mut self, events: Vec<(i64, Notice)>) {
        if self.sinks.is_empty() {
            return;
        }
        for (at_unix_ms, notice) in events {
            let bytes = shared::wire::event_bytes(at_unix_ms, &notice);
            let event = std::sync::Arc::new((at_unix_ms, notice));
            let max_bytes = self.max_bytes;
            self.sinks
                .retain(|w| match w.try_send(event.clone(), bytes) {
                    Ok(()) => true,
                    Err(Refused::Full) => {
                        tracing::warn!(
                            "a watcher fell --stream-max-bytes behind; its stream is ended"
                        );
                        w.end(StreamEnd::Behind(format!(
                            "watch: this watcher did not read {max_bytes} bytes of events \
                             (--stream-max-bytes); its stream ends here and what \
                             follows is not sent (ListTeam and ListRequests tell the state)"
                        )));
                        false
                    }
                    Err(Refused::Gone) => false,
                });
        }
    }

    /// Ends every stream (the lead stops).
    pub(crate) fn clear(&mut self) {
        self.sinks.clear();
    }

    /// Ends every stream, each for `why`.
    pub(crate) fn end_all(&mut self, why: impl Fn() -> StreamEnd) {
        for sink in self.sinks.drain(..) {
            sink.end(why());
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    use super::*;

    fn notice(n: usize) -> (i64, Notice) {
        (
            i64::try_from(n).unwrap_or_default(),
            Notice::Usage {
                name: format!("m{n}"),
                standing: mesh_core::usage::Standing::default(),
            },
        )
    }

    #[tokio::test]
    async fn every_watcher_gets_every_event_in_order_and_one_gone_is_dropped() {
        let mut watchers = Watchers::new(1 << 20);
        assert!(watchers.is_empty());
        let mut first = watchers.add();
        let second = watchers.add();
        drop(second);
        watchers.send(vec![notice(1), notice(2)]);
        assert_eq!(watchers.sinks.len(), 1);
        for n in 1..=2_i64 {
            let got = first.next().await.and_then(Result::ok).map(|e| e.0);
            assert_eq!(got, Some(n));
        }
        watchers.clear();
        assert!(watchers.is_empty());
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_ended_and_dropped() {
        let one = shared::wire::event_bytes(1, &notice(1).1);
        let mut watchers = Watchers::new(one * 2);
        let mut slow = watchers.add();
        watchers.send((1..=5).map(notice).collect());
        assert!(watchers.is_empty());
        let mut ends = Vec::new();
        while let Some(item) = slow.next().await {
            match item {
                // What was sent before it fell behind, if anything.
                Ok(event) => assert!(event.0 <= 2, "event {} sent past the bound", event.0),
                Err(end) => ends.push(end.message().to_owned()),
            }
        }
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert!(ends[0].contains("--stream-max-bytes"), "{ends:?}");
    }
}
