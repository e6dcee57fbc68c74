//! A2A's HTTP+JSON binding, on the console's port under [`PATH`]: the same
//! service as over gRPC and JSON-RPC, each rpc at the path its
//! `google.api.http` rule gives (`POST /message:send`, `GET /tasks/{id}`,
//! `POST /tasks/{id}:cancel`, ...), the request in ProtoJSON (the body,
//! with the path's and the query's fields), the response in ProtoJSON with
//! no envelope. `message:stream` and `tasks/{id}:subscribe` answer with
//! server-sent events, one `StreamResponse` an event. The caller's
//! `Authorization` and `A2A-Version` headers are read as the gRPC service
//! reads its metadata, so every binding admits the same callers.
//!
//! Errors are AIP-193's, as the specification asks of this binding: an
//! HTTP status by the error's reason (404 no such task, 409 not
//! cancelable, 415 not JSON, 400 an unsupported operation, version or bad
//! field, ...) or else by its gRPC code, and a body `{"error": {code,
//! status, message, details: [ErrorInfo]}}`.

use axum::{
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode},
    response::{
        sse::{Event, Sse},
        IntoResponse, Response,
    },
    routing::get,
    Json, Router,
};
use mesh_a2a::pb::{self as a2a, a2a_service_server::A2aService};
use serde_json::{json, Map, Value};
use tokio_stream::StreamExt as _;
use tonic::{Code, Status};
use tonic_types::StatusExt as _;

use super::{A2a, BoxStream};

/// Where the binding is served.
pub(crate) const PATH: &str = "/a2a/rest";

/// The binding, for the console's router.
pub(crate) fn router(a2a: A2a) -> Router {
    let at = |tail: &str| format!("{PATH}{tail}");
    Router::new()
        .route(&at("/message:send"), axum::routing::post(send))
        .route(&at("/message:stream"), axum::routing::post(stream))
        .route(&at("/tasks"), get(list))
        // `{id}`, `{id}:cancel` and `{id}:subscribe`: one segment, told
        // apart by what follows its last colon.
        .route(&at("/tasks/{name}"), get(task).post(task_action))
        .route(
            &at("/tasks/{id}/pushNotificationConfigs"),
            get(list_configs).post(create_config),
        )
        .route(
            &at("/tasks/{id}/pushNotificationConfigs/{config}"),
            get(get_config).delete(delete_config),
        )
        .route(&at("/extendedAgentCard"), get(extended_card))
        .with_state(a2a)
}

/// An error as AIP-193 says it, with its HTTP status.
#[derive(Debug)]
struct Failure {
    http: StatusCode,
    status: Code,
    message: String,
    reason: Option<String>,
}

impl Failure {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            http: StatusCode::BAD_REQUEST,
            status: Code::InvalidArgument,
            message: message.into(),
            reason: None,
        }
    }

    fn body(&self) -> Value {
        let mut error = json!({
            "code": self.http.as_u16(),
            "status": code_name(self.status),
            "message": self.message,
        });
        if let Some(reason) = &self.reason {
            error["details"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
            }]);
        }
        json!({ "error": error })
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.http, Json(self.body())).into_response()
    }
}

impl From<Status> for Failure {
    /// The specification's HTTP status for the error's reason; else the
    /// one `google.rpc.Code` maps the gRPC code to.
    fn from(status: Status) -> Self {
        let reason = status.get_details_error_info().map(|info| info.reason);
        let http = match reason.as_deref() {
            Some("TASK_NOT_FOUND") => StatusCode::NOT_FOUND,
            Some("TASK_NOT_CANCELABLE") => StatusCode::CONFLICT,
            Some("CONTENT_TYPE_NOT_SUPPORTED") => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("INVALID_AGENT_RESPONSE") => StatusCode::BAD_GATEWAY,
            Some(
                "PUSH_NOTIFICATION_NOT_SUPPORTED"
                | "UNSUPPORTED_OPERATION"
                | "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
                | "EXTENSION_SUPPORT_REQUIRED"
                | "VERSION_NOT_SUPPORTED"
                | "INVALID_PARAMS",
            ) => StatusCode::BAD_REQUEST,
            _ => http_of(status.code()),
        };
        Self {
            http,
            status: status.code(),
            message: status.message().to_owned(),
            reason,
        }
    }
}

/// The HTTP status of a gRPC code, as `google/rpc/code.proto` maps them.
fn http_of(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A gRPC code's name, as AIP-193's `status` says it.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A body that must be JSON: the object it holds (`{}` when empty).
/// Required, not only checked, for what changes anything: a web page can
/// post to a loopback lead without a type (or as text) but not as JSON
/// without the lead's CORS consent, which it never gives.
fn json_body(headers: &HeaderMap, body: &Bytes) -> Result<Map<String, Value>, Failure> {
    let media = super::media_type(headers);
    if media != "application/json" && !media.ends_with("+json") {
        return Err(Failure::from(super::errors::content_type_not_supported(
            &media,
        )));
    }
    object(body)
}

/// The JSON object `body` holds (`{}` when it is empty).
fn object(body: &Bytes) -> Result<Map<String, Value>, Failure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(Failure::invalid("body: must be a JSON object")),
        Err(e) => Err(Failure::invalid(format!("body: not JSON: {e}"))),
    }
}

/// The query's fields as ProtoJSON: `true` and `false` as booleans (which
/// ProtoJSON does not read from strings), the rest as strings (which it
/// reads as numbers, enums and timestamps where the field is one).
fn query_fields(query: Vec<(String, String)>) -> Map<String, Value> {
    query
        .into_iter()
        .map(|(name, value)| {
            let value = match value.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(value),
            };
            (name, value)
        })
        .collect()
}

/// `fields` as the request message `name`.
fn decode<M: prost::Message + Default>(
    fields: Map<String, Value>,
    name: &str,
) -> Result<M, Failure> {
    mesh_a2a::from_json(&Value::Object(fields), name).map_err(Failure::invalid)
}

/// A response message `name` in ProtoJSON.
fn encode<M: prost::Message>(message: &M, name: &str) -> Response {
    Json(mesh_a2a::to_json(message, name).unwrap_or(Value::Null)).into_response()
}

/// `message` as a gRPC request with `headers` as its metadata.
fn wrap<T>(headers: HeaderMap, message: T) -> tonic::Request<T> {
    tonic::Request::from_parts(
        tonic::metadata::MetadataMap::from_headers(headers),
        tonic::Extensions::default(),
        message,
    )
}

/// Calls the unary rpc `$rpc` with `$fields` as its request `$ask`, the
/// caller's `$headers` as its metadata: its answer `$answer` in ProtoJSON.
macro_rules! unary {
    ($a2a:expr, $rpc:ident, $headers:expr, $fields:expr, $ask:literal, $answer:literal) => {{
        let ask = decode($fields, $ask)?;
        let answer = $a2a.$rpc(wrap($headers, ask)).await?.into_inner();
        Ok(encode(&answer, $answer))
    }};
}

/// Server-sent events, one `StreamResponse` each; an error in the stream
/// is an `error` event with AIP-193's body.
fn events(updates: BoxStream<a2a::StreamResponse>) -> Response {
    let events = updates.map(|update| {
        let event = match update {
            Ok(update) => Event::default().data(
                mesh_a2a::to_json(&update, "StreamResponse")
                    .unwrap_or(Value::Null)
                    .to_string(),
            ),
            Err(status) => Event::default()
                .event("error")
                .data(Failure::from(status).body().to_string()),
        };
        Ok::<_, std::convert::Infallible>(event)
    });
    Sse::new(events)
        .keep_alive(axum::response::sse::KeepAlive::default())
        .into_response()
}

/// A call's answer, or its failure, as the response.
fn answer(result: Result<Response, Failure>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn send(State(a2a): State<A2a>, headers: HeaderMap, body: Bytes) -> Response {
    answer(
        async {
            let fields = json_body(&headers, &body)?;
            unary!(
                a2a,
                send_message,
                headers,
                fields,
                "SendMessageRequest",
                "SendMessageResponse"
            )
        }
        .await,
    )
}

async fn stream(State(a2a): State<A2a>, headers: HeaderMap, body: Bytes) -> Response {
    answer(
        async {
            let ask = decode(json_body(&headers, &body)?, "SendMessageRequest")?;
            let updates = a2a
                .send_streaming_message(wrap(headers, ask))
                .await?
                .into_inner();
            Ok(events(updates))
        }
        .await,
    )
}

async fn list(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    answer(
        async {
            let fields = query_fields(query);
            unary!(
                a2a,
                list_tasks,
                headers,
                fields,
                "ListTasksRequest",
                "ListTasksResponse"
            )
        }
        .await,
    )
}

/// `GET /tasks/{id}`, and `GET /tasks/{id}:subscribe` (the proto's verb
/// for it; the specification's text says POST, which is taken too).
async fn task(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    answer(
        async {
            match name.rsplit_once(':') {
                Some((id, "subscribe")) => subscribe(&a2a, headers, id).await,
                Some((_, verb)) => Err(Failure::invalid(format!(
                    "path: GET takes tasks/{{id}} or tasks/{{id}}:subscribe, not :{verb}"
                ))),
                None => {
                    let mut fields = query_fields(query);
                    fields.insert("id".into(), Value::String(name));
                    unary!(a2a, get_task, headers, fields, "GetTaskRequest", "Task")
                }
            }
        }
        .await,
    )
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
async fn task_action(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            match name.rsplit_once(':') {
                Some((id, "cancel")) => {
                    let mut fields = json_body(&headers, &body)?;
                    fields.insert("id".into(), Value::String(id.to_owned()));
                    unary!(a2a, cancel_task, headers, fields, "CancelTaskRequest", "Task")
                }
                // Nothing changes: a body is not needed, nor a type.
                Some((id, "subscribe")) => subscribe(&a2a, headers, id).await,
                _ => Err(Failure::invalid(format!(
                    "path: POST takes tasks/{{id}}:cancel or tasks/{{id}}:subscribe, not tasks/{name}"
                ))),
            }
        }
        .await,
    )
}

async fn subscribe(a2a: &A2a, headers: HeaderMap, id: &str) -> Result<Response, Failure> {
    let mut fields = Map::new();
    fields.insert("id".into(), Value::String(id.to_owned()));
    let ask = decode(fields, "SubscribeToTaskRequest")?;
    let updates = a2a
        .subscribe_to_task(wrap(headers, ask))
        .await?
        .into_inner();
    Ok(events(updates))
}

async fn create_config(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            let mut fields = json_body(&headers, &body)?;
            fields.insert("taskId".into(), Value::String(id));
            unary!(
                a2a,
                create_task_push_notification_config,
                headers,
                fields,
                "TaskPushNotificationConfig",
                "TaskPushNotificationConfig"
            )
        }
        .await,
    )
}

async fn list_configs(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    answer(
        async {
            let mut fields = query_fields(query);
            fields.insert("taskId".into(), Value::String(id));
            unary!(
                a2a,
                list_task_push_notification_configs,
                headers,
                fields,
                "ListTaskPushNotificationConfigsRequest",
                "ListTaskPushNotificationConfigsResponse"
            )
        }
        .await,
    )
}

/// The task's and the config's ids, as the requests name them.
fn config_fields(id: String, config: String) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("taskId".into(), Value::String(id));
    fields.insert("id".into(), Value::String(config));
    fields
}

async fn get_config(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Path((id, config)): Path<(String, String)>,
) -> Response {
    answer(
        async {
            unary!(
                a2a,
                get_task_push_notification_config,
                headers,
                config_fields(id, config),
                "GetTaskPushNotificationConfigRequest",
                "TaskPushNotificationConfig"
            )
        }
        .await,
    )
}

async fn delete_config(
    State(a2a): State<A2a>,
    headers: HeaderMap,
    Path((id, config)): Path<(String, String)>,
) -> Response {
    answer(
        async {
            let ask = decode(
                config_fields(id, config),
                "DeleteTaskPushNotificationConfigRequest",
            )?;
            a2a.delete_task_push_notification_config(wrap(headers, ask))
                .await?;
            Ok(Json(json!({})).into_response())
        }
        .await,
    )
}

async fn extended_card(State(a2a): State<A2a>, headers: HeaderMap) -> Response {
    answer(
        async {
            unary!(
                a2a,
                get_extended_agent_card,
                headers,
                Map::new(),
                "GetExtendedAgentCardRequest",
                "AgentCard"
            )
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_take_the_specs_http_status_by_reason_then_by_code() {
        let http = |status: Status| Failure::from(status).http.as_u16();
        assert_eq!(http(super::super::errors::task_not_found("t")), 404);
        assert_eq!(http(super::super::errors::not_cancelable("t", "done")), 409);
        assert_eq!(http(super::super::errors::push_not_supported()), 400);
        assert_eq!(http(super::super::errors::unsupported("no")), 400);
        assert_eq!(http(super::super::errors::version_not_supported("9")), 400);
        assert_eq!(http(Status::unauthenticated("no token")), 401);
        assert_eq!(http(Status::internal("x")), 500);
        let body = Failure::from(super::super::errors::task_not_found("t")).body();
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(body["error"]["status"], "NOT_FOUND");
        assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    }

    #[test]
    fn a_query_is_protojson_with_booleans_as_booleans() {
        let fields = query_fields(vec![
            ("pageSize".into(), "5".into()),
            ("includeArtifacts".into(), "false".into()),
        ]);
        assert_eq!(
            Value::Object(fields),
            json!({"pageSize": "5", "includeArtifacts": false})
        );
        let empty = object(&Bytes::from_static(b" \n")).expect("empty is {}");
        assert!(empty.is_empty());
        assert!(object(&Bytes::from_static(b"[1]")).is_err());
    }
}
