//! A task's updates as a stream (`SubscribeToTask`,
//! `SendStreamingMessage`): the task as it stands first, then each change,
//! from the same notices as `Watch`.

use mesh_a2a::pb as a2a;
use tokio_stream::StreamExt as _;
use tonic::Status;

use super::{tasks, A2a, BoxStream, UPDATES_HELD};
use crate::hub::{Claim, Command};

/// Task `id`'s updates, in order: the task as it stands first, then
/// each change of its state or status (a status update; a completed
/// task's summary as an artifact before its last status), until it has
/// ended or (`until_interrupted`) waits for its caller. Bounded: a
/// client that stops reading holds at most a few updates.
pub(super) async fn updates(
    a2a: &A2a,
    id: String,
    until_interrupted: bool,
) -> Result<BoxStream<a2a::StreamResponse>, Status> {
    use a2a::stream_response::Payload;
    // Watching first, so no change between the look and the wait is missed.
    let mut events = a2a
        .hub
        .call(|reply| Command::Watch {
            claim: Claim::operator(),
            reply,
        })
        .await?;
    let now = a2a.task(&id).await?;
    let first = now.to_a2a(None, true);
    let state = now.state();
    let ends = move |state: a2a::TaskState| {
        tasks::terminal(state) || (until_interrupted && tasks::interrupted(state))
    };
    let (tx, rx) = tokio::sync::mpsc::channel(UPDATES_HELD);
    let this = a2a.clone();
    tokio::spawn(async move {
        let said = |t: &a2a::Task| t.status.clone().map(|s| (s.state, s.message));
        let mut last = said(&first);
        let first = a2a::StreamResponse {
            payload: Some(Payload::Task(first)),
        };
        if tx.send(Ok(first)).await.is_err() || ends(state) {
            return;
        }
        loop {
            tokio::select! {
                () = tx.closed() => return,
                event = events.next() => match event {
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => {
                        let gone = Status::unavailable("the lead stopped; GetTask or subscribe again");
                        let _ = tx.send(Err(gone)).await;
                        return;
                    }
                },
            }
            let Ok(seen) = this.task(&id).await else {
                return;
            };
            let now = seen.to_a2a(None, true);
            if said(&now) == last {
                continue;
            }
            last = said(&now);
            let state = seen.state();
            let mut out = Vec::new();
            if state == a2a::TaskState::Completed {
                out.extend(now.artifacts.iter().map(|artifact| {
                    Payload::ArtifactUpdate(a2a::TaskArtifactUpdateEvent {
                        task_id: now.id.clone(),
                        context_id: now.context_id.clone(),
                        artifact: Some(artifact.clone()),
                        append: false,
                        last_chunk: true,
                        metadata: None,
                    })
                }));
            }
            out.push(Payload::StatusUpdate(a2a::TaskStatusUpdateEvent {
                task_id: now.id.clone(),
                context_id: now.context_id.clone(),
                status: now.status.clone(),
                metadata: None,
            }));
            for payload in out {
                let update = a2a::StreamResponse {
                    payload: Some(payload),
                };
                if tx.send(Ok(update)).await.is_err() {
                    return;
                }
            }
            if ends(state) {
                return;
            }
        }
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}
