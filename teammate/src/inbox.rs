//! The inbox reader: keeps one `Inbox` stream open, resumes after the last
//! envelope it passed on when the stream or the lead goes away, and hands
//! envelopes to the session in `seq` order.

use std::time::Duration;

use shared::pb;
use tokio::sync::mpsc;
use tonic::{Code, Status};

use crate::{backoff::Backoff, client::Client};

/// What the reader hands the session.
#[derive(Debug)]
pub enum Incoming {
    /// The next envelope, and when it arrived (unix ms).
    Envelope(Box<pb::Envelope>, i64),
    /// The reader stopped: the lead refused the stream (`Some`), or was
    /// unreachable for longer than the limit (`None`).
    Gone(Option<Status>),
}

/// Starts the reader; envelopes after `after_seq` arrive on the returned channel.
pub(crate) fn start(client: Client, after_seq: u64, limit: Duration) -> mpsc::Receiver<Incoming> {
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(read(client, after_seq, limit, tx));
    rx
}

async fn read(mut client: Client, mut after_seq: u64, limit: Duration, tx: mpsc::Sender<Incoming>) {
    let mut backoff = Backoff::new(limit);
    loop {
        match client.inbox(pb::InboxRequest { after_seq }).await {
            Ok(stream) => {
                backoff.reset();
                let mut stream = stream.into_inner();
                loop {
                    match stream.message().await {
                        Ok(Some(envelope)) => {
                            after_seq = after_seq.max(envelope.seq);
                            if tx
                                .send(Incoming::Envelope(
                                    Box::new(envelope),
                                    shared::auth::now_unix_ms(),
                                ))
                                .await
                                .is_err()
                            {
                                return;
                            }
                        }
                        Ok(None) => break,
                        Err(status) => {
                            tracing::warn!(error = %mesh_core::display::Escaped(&shared::transport::cause(&status)), "inbox stream broke; resuming");
                            break;
                        }
                    }
                }
            }
            Err(status)
                if matches!(
                    status.code(),
                    Code::Unauthenticated | Code::PermissionDenied | Code::OutOfRange
                ) =>
            {
                let _ = tx.send(Incoming::Gone(Some(status))).await;
                return;
            }
            Err(status) => {
                tracing::warn!(error = %mesh_core::display::Escaped(&shared::transport::cause(&status)), "cannot open the inbox; retrying")
            }
        }
        if tx.is_closed() {
            return;
        }
        if !backoff.wait().await {
            let _ = tx.send(Incoming::Gone(None)).await;
            return;
        }
    }
}
