//! One request and its reply: the HTTP exchange, a streamed reply read
//! event by event (or one JSON completion), and how a failure reads.

use std::time::Duration;

use serde_json::Value;
use tokio_stream::StreamExt as _;

use super::{ChatClient, Failure};
use crate::{assemble, constrain, ChatError, Reply};

impl ChatClient {
    /// One request and its reply.
    pub(super) async fn attempt(&self, body: &Value) -> Result<Reply, Failure> {
        let text = constrain::to_ordered_string(body);
        // `RUST_LOG=mesh_llm::wire=trace` shows every request and reply
        // whole (the key travels in a header, never here).
        tracing::trace!(target: "mesh_llm::wire", url = %self.url, body = %text, "request");
        let mut request = self
            .http
            .post(&self.url)
            .timeout(self.config.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(text);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| Failure::Retry {
            problem: describe(&e),
            after: None,
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let after = retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            return Err(Failure::Retry {
                problem: format!("HTTP {}: {}", status.as_u16(), error_message(&text)),
                after,
            });
        }
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(Failure::Stop(ChatError::Refused {
                url: self.url.clone(),
                status: status.as_u16(),
                message: error_message(&text),
            }));
        }
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut assembler = assemble::Assembler::default();
        let broken = |problem: String| Failure::Retry {
            problem,
            after: None,
        };
        if streamed {
            use eventsource_stream::Eventsource as _;
            let mut events = response.bytes_stream().eventsource();
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| broken(format!("the stream broke: {e}")))?;
                let data = event.data.trim();
                if data == "[DONE]" {
                    break;
                }
                if data.is_empty() {
                    continue;
                }
                let chunk: Value = serde_json::from_str(data).map_err(|e| {
                    broken(format!("a streamed chunk is not JSON ({e}): {}", cut(data)))
                })?;
                if let Some(error) = chunk.get("error") {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| error.to_string(), str::to_owned);
                    return Err(Failure::Format(cut(&message)));
                }
                assembler.push_chunk(&chunk);
            }
        } else {
            let text = response
                .text()
                .await
                .map_err(|e| broken(format!("the reply broke: {}", describe(&e))))?;
            let completion: Value = serde_json::from_str(&text)
                .map_err(|e| broken(format!("the reply is not JSON ({e}): {}", cut(&text))))?;
            if assemble::first_choice(&completion)
                .and_then(|c| c.get("message"))
                .is_none()
            {
                return Err(broken(format!(
                    "the reply has no choices[0].message: {}",
                    cut(&text)
                )));
            }
            assembler.push_completion(&completion);
        }
        let reply = assembler.finish();
        tracing::trace!(
            target: "mesh_llm::wire",
            content = %reply.content,
            tool_calls = ?reply.tool_calls,
            finish = ?reply.finish_reason,
            "reply"
        );
        Ok(reply)
    }
}

/// A reqwest error with its causes (reqwest's own message is terse).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The server's own words from an error body: `error.message`, `error`,
/// `message`, or the body itself, cut.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match found {
        Some(message) => cut(&message),
        None if body.trim().is_empty() => "(no body)".into(),
        None => cut(body.trim()),
    }
}

/// At most 500 bytes of `text`, for error messages.
fn cut(text: &str) -> String {
    mesh_core::limits::cut(text, 500)
}

/// `Retry-After`, in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    if let Ok(seconds) = value.trim().parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_the_servers_own_words() {
        assert_eq!(
            error_message(r#"{"error": {"message": "model not found", "type": "x"}}"#),
            "model not found"
        );
        assert_eq!(error_message(r#"{"error": "bad key"}"#), "bad key");
        assert_eq!(error_message("plain words\n"), "plain words");
        assert_eq!(error_message(""), "(no body)");
        assert!(error_message(&"x".repeat(2_000)).len() < 600);
    }

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
        headers.insert(reqwest::header::RETRY_AFTER, later.parse().expect("header"));
        let wait = retry_after(&headers).expect("a date");
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60));
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "soon".parse().expect("header"),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
