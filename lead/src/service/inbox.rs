//! A member's inbox as the wire streams it.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use shared::{pb, wire::ToPb};
use tokio_stream::Stream;
use tonic::Status;

use crate::hub::{Command, HubHandle};

/// An inbox stream that tells the hub when the client goes away, and that the
/// hub can end early with a status (replaced by a newer stream, stuck).
pub(super) struct InboxStream {
    /// Envelopes from the hub, ending with the status the hub ended the
    /// stream with, if it did.
    pub(super) inner: crate::outbox::Receiver<crate::inboxes::Entry>,
    /// Whom to tell, and about which stream.
    pub(super) hub: HubHandle,
    /// The member.
    pub(super) name: String,
    /// This stream's id.
    pub(super) stream_id: u64,
}

impl Stream for InboxStream {
    type Item = Result<pb::Envelope, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_next(cx);
        let to = &this.name;
        polled.map(|item| item.map(|r| r.map(|e| envelope(&e, to)).map_err(Status::from)))
    }
}

impl Drop for InboxStream {
    fn drop(&mut self) {
        self.hub.notify(Command::StreamClosed {
            name: std::mem::take(&mut self.name),
            stream_id: self.stream_id,
        });
    }
}

/// An inbox entry as the wire carries it to `to`.
fn envelope(entry: &crate::inboxes::Entry, to: &str) -> pb::Envelope {
    let mut body = entry.payload.body().to_pb();
    // A shutdown request carries its trace: the teammate's answer joins it.
    if let pb::envelope::Body::ShutdownRequest(request) = &mut body {
        request.traceparent = crate::telemetry::traceparent(&request.request_id);
    }
    pb::Envelope {
        seq: entry.seq,
        message_id: entry.message_id.clone(),
        from: entry.from.clone(),
        to: to.to_owned(),
        sent_at_unix_ms: entry.sent_at_unix_ms,
        body: Some(body),
    }
}
