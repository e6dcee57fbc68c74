//! The hub's events, live, as server-sent events.

use std::{convert::Infallible, time::Duration};

use axum::{
    extract::State,
    http::header,
    response::{
        sse::{Event, KeepAlive, Sse},
        IntoResponse, Response,
    },
};
use serde_json::json;
use tokio_stream::StreamExt;

use super::{answers::hub_failed, session::Operator, Console};
use crate::{
    connections::ConnInfo,
    hub::{Claim, Command},
    render,
};

/// The hub's events, live, as server-sent events (one JSON object each).
pub(super) async fn events(
    State(console): State<Console>,
    axum::extract::ConnectInfo(conn): axum::extract::ConnectInfo<ConnInfo>,
    _: Operator,
) -> Response {
    let watch = |reply| Command::Watch {
        claim: Claim::operator(),
        reply,
    };
    let events = match console.hub.call(watch).await {
        Ok(events) => events,
        Err(e) => return hub_failed(e),
    };
    // A client that reads nothing never sees the stream's end: its
    // connection (HTTP/1.1: this stream's alone) is closed instead.
    tokio::spawn(events.watchdog(crate::outbox::RESET_AFTER, move || {
        tracing::warn!("a console event stream took nothing after it was ended or filled (--stream-max-bytes); its connection is closed");
        conn.state.close();
    }));
    let stream = events.map(|event| {
        let data = match event {
            Ok(event) => render::event_json(&shared::wire::event(event.0, &event.1)),
            Err(end) => json!({"error": end.message()}),
        };
        Ok::<_, Infallible>(Event::default().data(data.to_string()))
    });
    // The keep-alive is an event the page sees (a comment it would not):
    // the time it last heard from the lead.
    let heartbeat = Event::default().event("heartbeat").data("{}");
    let mut response = Sse::new(stream)
        .keep_alive(
            KeepAlive::new()
                .interval(Duration::from_secs(15))
                .event(heartbeat),
        )
        .into_response();
    // An event stream has its connection to itself: once it ends (the
    // reader fell too far behind, the lead stops), the connection closes
    // too, and the browser's EventSource opens a new one.
    response
        .headers_mut()
        .insert(header::CONNECTION, "close".parse().expect("valid"));
    response
}
