//! A2A's JSON-RPC binding, on the console's port at [`PATH`]: the same
//! service as over gRPC, each method named as its rpc (`SendMessage`,
//! `GetTask`, ...), its params the request in ProtoJSON and its result the
//! response. `SendStreamingMessage` and `SubscribeToTask` answer with
//! server-sent events, one JSON-RPC response an event. The caller's
//! `Authorization` and `A2A-Version` headers are read as the gRPC
//! service reads its metadata, so both bindings admit the same callers.
//!
//! Errors are the spec's: its codes -32001 to -32009 by the error's
//! reason (-32005 for a body not sent as `application/json`), -32602 for bad params (naming the field), -32601 for an unknown
//! method, -32600 for a request that is not JSON-RPC 2.0, -32700 for one
//! that is not JSON; a caller without a valid token gets HTTP 401.

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{
        sse::{Event, Sse},
        IntoResponse, Response,
    },
    routing::post,
    Json, Router,
};
use mesh_a2a::pb::{self as a2a, a2a_service_server::A2aService};
use serde_json::{json, Value};
use tokio_stream::StreamExt as _;
use tonic::{Code, Status};
use tonic_types::StatusExt as _;

use super::{A2a, BoxStream};

/// Where the binding is served.
pub(crate) const PATH: &str = "/a2a";

/// The binding, for the console's router.
pub(crate) fn router(a2a: A2a) -> Router {
    // With a trailing slash too: clients that join "/" to the card's URL.
    Router::new()
        .route(PATH, post(call))
        .route(&format!("{PATH}/"), post(call))
        .with_state(a2a)
}

/// A JSON-RPC error, and the HTTP status it goes with.
#[derive(Debug)]
struct Failure {
    code: i64,
    message: String,
    reason: Option<String>,
    http: StatusCode,
}

impl Failure {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            reason: None,
            http: StatusCode::OK,
        }
    }

    fn body(&self, id: &Value) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(reason) = &self.reason {
            error["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
            }]);
        }
        json!({ "jsonrpc": "2.0", "id": id, "error": error })
    }
}

impl From<Status> for Failure {
    /// The spec's code for the error's reason; else by the gRPC code.
    fn from(status: Status) -> Self {
        let reason = status.get_details_error_info().map(|info| info.reason);
        let code = match reason.as_deref() {
            Some("TASK_NOT_FOUND") => -32001,
            Some("TASK_NOT_CANCELABLE") => -32002,
            Some("PUSH_NOTIFICATION_NOT_SUPPORTED") => -32003,
            Some("UNSUPPORTED_OPERATION") => -32004,
            Some("CONTENT_TYPE_NOT_SUPPORTED") => -32005,
            Some("INVALID_AGENT_RESPONSE") => -32006,
            Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED") => -32007,
            Some("EXTENSION_SUPPORT_REQUIRED") => -32008,
            Some("VERSION_NOT_SUPPORTED") => -32009,
            Some("INVALID_PARAMS") => -32602,
            _ => match status.code() {
                Code::InvalidArgument | Code::NotFound | Code::OutOfRange => -32602,
                Code::Unauthenticated | Code::PermissionDenied => -32600,
                _ => -32603,
            },
        };
        let http = match status.code() {
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            _ => StatusCode::OK,
        };
        Self {
            code,
            message: status.message().to_owned(),
            reason,
            http,
        }
    }
}

/// What a method answers: one result, or a stream of them.
enum Answer {
    One(Value),
    Stream(BoxStream<a2a::StreamResponse>),
}

/// One JSON-RPC call.
async fn call(State(a2a): State<A2a>, headers: HeaderMap, body: Bytes) -> Response {
    let media = super::media_type(&headers);
    // Required, not only checked: a web page can post to a loopback lead
    // without a type (or as text) but not as JSON without the lead's CORS
    // consent, which it never gives; so no page can act as an open
    // lead's (`--a2a-open`) operator.
    if media != "application/json" && !media.ends_with("+json") {
        let failure = Failure {
            reason: Some("CONTENT_TYPE_NOT_SUPPORTED".into()),
            ..Failure::new(
                -32005,
                format!("Content-Type {media:?}: a JSON-RPC request is application/json"),
            )
        };
        return error(&Value::Null, &failure);
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return error(
                &Value::Null,
                &Failure::new(-32700, format!("not JSON: {e}")),
            )
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let answer = match checked(&request) {
        Ok((method, params)) => dispatch(&a2a, method, params, headers).await,
        Err(failure) => Err(failure),
    };
    match answer {
        Ok(Answer::One(result)) => {
            Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
        }
        Ok(Answer::Stream(updates)) => {
            let events = updates.map(move |update| {
                let body = match update {
                    Ok(update) => json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "result": encode(&update, "StreamResponse"),
                    }),
                    Err(status) => Failure::from(status).body(&id),
                };
                Ok::<_, std::convert::Infallible>(Event::default().data(body.to_string()))
            });
            Sse::new(events)
                .keep_alive(axum::response::sse::KeepAlive::default())
                .into_response()
        }
        Err(failure) => error(&id, &failure),
    }
}

/// A JSON-RPC error response.
fn error(id: &Value, failure: &Failure) -> Response {
    (failure.http, Json(failure.body(id))).into_response()
}

/// The method and params of a JSON-RPC 2.0 request.
fn checked(request: &Value) -> Result<(&str, Value), Failure> {
    if request.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(Failure::new(-32600, "jsonrpc: must be \"2.0\""));
    }
    if !matches!(
        request.get("id"),
        None | Some(Value::String(_) | Value::Number(_) | Value::Null)
    ) {
        return Err(Failure::new(
            -32600,
            "id: must be a string, a number or null",
        ));
    }
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| Failure::new(-32600, "method: a string is required"))?;
    let params = match request.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => return Err(Failure::new(-32602, "params: must be an object")),
    };
    Ok((method, params))
}

/// `params` as the request message `name`.
fn decode<M: prost::Message + Default>(params: &Value, name: &str) -> Result<M, Failure> {
    mesh_a2a::from_json(params, name).map_err(|e| Failure::new(-32602, format!("params: {e}")))
}

/// A response message `name` in ProtoJSON.
fn encode<M: prost::Message>(message: &M, name: &str) -> Value {
    mesh_a2a::to_json(message, name).unwrap_or(Value::Null)
}

/// `message` as a gRPC request with `metadata`.
fn wrap<T>(metadata: &tonic::metadata::MetadataMap, message: T) -> tonic::Request<T> {
    tonic::Request::from_parts(metadata.clone(), tonic::Extensions::default(), message)
}

/// Calls `method` of the service with `params`, as a gRPC call with
/// `headers` as its metadata would.
async fn dispatch(
    a2a: &A2a,
    method: &str,
    params: Value,
    headers: HeaderMap,
) -> Result<Answer, Failure> {
    let metadata = tonic::metadata::MetadataMap::from_headers(headers);
    macro_rules! one {
        ($rpc:ident, $ask:literal, $answer:literal) => {{
            let ask = decode(&params, $ask)?;
            let answer = a2a.$rpc(wrap(&metadata, ask)).await?.into_inner();
            Answer::One(encode(&answer, $answer))
        }};
    }
    macro_rules! stream {
        ($rpc:ident, $ask:literal) => {{
            let ask = decode(&params, $ask)?;
            Answer::Stream(a2a.$rpc(wrap(&metadata, ask)).await?.into_inner())
        }};
    }
    Ok(match method {
        "SendMessage" => one!(send_message, "SendMessageRequest", "SendMessageResponse"),
        "SendStreamingMessage" => stream!(send_streaming_message, "SendMessageRequest"),
        "GetTask" => one!(get_task, "GetTaskRequest", "Task"),
        "ListTasks" => one!(list_tasks, "ListTasksRequest", "ListTasksResponse"),
        "CancelTask" => one!(cancel_task, "CancelTaskRequest", "Task"),
        "SubscribeToTask" => stream!(subscribe_to_task, "SubscribeToTaskRequest"),
        "CreateTaskPushNotificationConfig" => one!(
            create_task_push_notification_config,
            "TaskPushNotificationConfig",
            "TaskPushNotificationConfig"
        ),
        "GetTaskPushNotificationConfig" => one!(
            get_task_push_notification_config,
            "GetTaskPushNotificationConfigRequest",
            "TaskPushNotificationConfig"
        ),
        "ListTaskPushNotificationConfigs" => one!(
            list_task_push_notification_configs,
            "ListTaskPushNotificationConfigsRequest",
            "ListTaskPushNotificationConfigsResponse"
        ),
        "DeleteTaskPushNotificationConfig" => {
            let ask = decode(&params, "DeleteTaskPushNotificationConfigRequest")?;
            a2a.delete_task_push_notification_config(wrap(&metadata, ask))
                .await?;
            Answer::One(json!({}))
        }
        "GetExtendedAgentCard" => one!(
            get_extended_agent_card,
            "GetExtendedAgentCardRequest",
            "AgentCard"
        ),
        other => {
            return Err(Failure::new(
                -32601,
                format!("method: {other:?} is no A2A method"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_is_not_json_rpc_is_named() {
        let failed = |request: Value| checked(&request).map(|_| ()).expect_err("refused");
        assert_eq!(failed(json!({"method": "GetTask"})).code, -32600);
        assert_eq!(failed(json!({"jsonrpc": "2.0", "id": 1})).code, -32600);
        assert_eq!(
            failed(json!({"jsonrpc": "2.0", "id": [1], "method": "GetTask"})).code,
            -32600
        );
        assert_eq!(
            failed(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]})).code,
            -32602
        );
        let request = json!({"jsonrpc": "2.0", "id": "x", "method": "GetTask"});
        let (method, params) = checked(&request).expect("ok");
        assert_eq!((method, params), ("GetTask", json!({})));
    }

    #[test]
    fn errors_take_the_specs_codes_by_reason() {
        let code = |status: Status| Failure::from(status).code;
        assert_eq!(code(super::super::errors::task_not_found("t")), -32001);
        assert_eq!(code(super::super::errors::push_not_supported()), -32003);
        assert_eq!(
            code(super::super::errors::invalid("id", "is required")),
            -32602
        );
        let refused = Failure::from(Status::unauthenticated("no token"));
        assert_eq!(refused.http, StatusCode::UNAUTHORIZED);
        assert_eq!(code(Status::internal("x")), -32603);
    }
}
