//! Where the session waits: the envelopes the inbox reader hands on, and the
//! stop signal. A [`Mailbox`] owns both, makes each envelope the core's
//! ([`crate::client::inbound`]) and remembers when the last one arrived and
//! the trace context it carried.

use tokio::sync::{mpsc, watch};

use crate::{client, error::SessionError, inbox::Incoming, protocol_state::Inbound};

/// The inbox and the stop signal.
#[derive(Debug)]
pub(super) struct Mailbox {
    /// Envelopes from the inbox reader.
    inbox: mpsc::Receiver<Incoming>,
    /// Turns true when a signal asks the teammate to stop.
    stop: watch::Receiver<bool>,
    /// The lead's URL (or the leads'), for errors.
    lead_url: String,
    /// The envelope being handled: when it arrived, what trace it carried.
    arrival: Arrival,
}

/// When the envelope being handled arrived, and the trace it carried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Arrival {
    /// When it arrived from the lead (unix ms).
    pub(super) at_unix_ms: i64,
    /// The trace context of a shutdown request (empty for anything else).
    pub(super) traceparent: String,
}

/// What waiting on the mailbox came to.
#[derive(Debug)]
pub(super) enum Next {
    /// An envelope.
    Envelope(Box<Inbound>),
    /// A signal asked the teammate to stop.
    Stop,
    /// Nothing arrived before the deadline.
    TimedOut,
}

impl Mailbox {
    /// A mailbox over the reader's `inbox` and the `stop` signal.
    pub(super) fn new(
        inbox: mpsc::Receiver<Incoming>,
        stop: watch::Receiver<bool>,
        lead_url: String,
    ) -> Self {
        Self {
            inbox,
            stop,
            lead_url,
            arrival: Arrival::default(),
        }
    }

    /// Whether a signal asked the teammate to stop.
    pub(super) fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// When the envelope being handled arrived, and its trace.
    pub(super) fn arrival(&self) -> &Arrival {
        &self.arrival
    }

    /// The envelope that arrived already, if any (without waiting).
    pub(super) fn try_next(&mut self) -> Result<Option<Inbound>, SessionError> {
        match self.inbox.try_recv() {
            Ok(incoming) => self.open(Some(incoming)).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Waits for the next envelope, the stop signal, or `until`. Cancel-safe:
    /// dropped before it ends, nothing is lost.
    pub(super) async fn next(
        &mut self,
        until: Option<tokio::time::Instant>,
    ) -> Result<Next, SessionError> {
        let deadline = async {
            match until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let incoming = tokio::select! {
            incoming = self.inbox.recv() => incoming,
            _ = self.stop.wait_for(|s| *s) => return Ok(Next::Stop),
            () = deadline => return Ok(Next::TimedOut),
        };
        self.open(incoming)
            .map(|inbound| Next::Envelope(Box::new(inbound)))
    }

    /// One item from the reader, as an envelope in the core's words; the
    /// reader gone (or a body the core cannot hold) is an error.
    fn open(&mut self, incoming: Option<Incoming>) -> Result<Inbound, SessionError> {
        let envelope = match incoming {
            Some(Incoming::Envelope(envelope, arrived)) => {
                self.arrival.at_unix_ms = arrived;
                *envelope
            }
            Some(Incoming::Gone(Some(status))) => {
                return Err(SessionError::Rpc {
                    rpc: "Inbox",
                    status,
                })
            }
            Some(Incoming::Gone(None)) | None => {
                return Err(SessionError::LeadGone(self.lead_url.clone()))
            }
        };
        let (inbound, traceparent) = client::inbound(envelope)
            .map_err(|e| SessionError::Setup(format!("the lead sent a bad envelope: {e}")))?;
        self.arrival.traceparent = traceparent;
        Ok(inbound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::pb;

    fn mailbox() -> (mpsc::Sender<Incoming>, watch::Sender<bool>, Mailbox) {
        let (tx, rx) = mpsc::channel(4);
        let (stop_tx, stop_rx) = watch::channel(false);
        (tx, stop_tx, Mailbox::new(rx, stop_rx, "http://lead".into()))
    }

    fn shutdown(seq: u64, request_id: &str) -> Incoming {
        let body = pb::envelope::Body::ShutdownRequest(pb::ShutdownRequest {
            request_id: request_id.into(),
            traceparent: "00-trace".into(),
            ..Default::default()
        });
        let envelope = pb::Envelope {
            seq,
            message_id: format!("m{seq}"),
            from: "lead".into(),
            body: Some(body),
            ..Default::default()
        };
        Incoming::Envelope(Box::new(envelope), 42)
    }

    #[tokio::test]
    async fn an_envelope_arrives_in_the_cores_words_with_its_arrival() {
        let (tx, _stop, mut mailbox) = mailbox();
        assert!(mailbox.try_next().expect("open").is_none());
        tx.send(shutdown(3, "s1")).await.expect("send");
        let inbound = mailbox.try_next().expect("open").expect("an envelope");
        assert_eq!((inbound.seq, inbound.from.as_str()), (3, "lead"));
        assert!(matches!(
            inbound.message,
            Some(mesh_core::effect::Message::ShutdownRequest { .. })
        ));
        assert_eq!(
            mailbox.arrival(),
            &Arrival {
                at_unix_ms: 42,
                traceparent: "00-trace".into()
            }
        );
    }

    #[tokio::test]
    async fn waiting_ends_at_a_stop_a_deadline_or_the_readers_end() {
        let (_tx, stop, mut mailbox) = mailbox();
        let soon = tokio::time::Instant::now() + std::time::Duration::from_millis(10);
        assert!(matches!(mailbox.next(Some(soon)).await, Ok(Next::TimedOut)));
        stop.send(true).expect("stop");
        assert!(mailbox.stopped());
        assert!(matches!(mailbox.next(None).await, Ok(Next::Stop)));
        let (tx, _stop, mut gone) = self::mailbox();
        drop(tx);
        assert!(matches!(
            gone.next(None).await,
            Err(SessionError::LeadGone(url)) if url == "http://lead"
        ));
    }

    #[tokio::test]
    async fn a_decision_the_core_cannot_hold_is_an_error_and_another_body_is_passed_over() {
        let (tx, _stop, mut mailbox) = mailbox();
        tx.send(shutdown(1, "")).await.expect("send");
        let passed = mailbox.try_next().expect("open").expect("an envelope");
        assert_eq!(passed.seq, 1);
        assert!(passed.message.is_none(), "{:?}", passed.message);
        let decision = pb::Envelope {
            seq: 2,
            message_id: "m2".into(),
            from: "lead".into(),
            body: Some(pb::envelope::Body::PlanApprovalResponse(
                pb::PlanApprovalResponse {
                    request_id: String::new(),
                    approve: true,
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        tx.send(Incoming::Envelope(Box::new(decision), 43))
            .await
            .expect("send");
        let bad = mailbox.try_next().expect_err("no request id");
        assert!(
            bad.to_string()
                .starts_with("the lead sent a bad envelope: "),
            "{bad}"
        );
    }
}
