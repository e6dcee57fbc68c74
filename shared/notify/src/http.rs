//! HTTP for the webhook and Slack sinks: one `reqwest` client per sink
//! (rustls on ring, no redirects, a timeout per attempt), and what an
//! answer means for trying again.

use std::time::{Duration, SystemTime};

use reqwest::{
    header::{HeaderMap, RETRY_AFTER},
    StatusCode, Url,
};

use crate::retry::Outcome;

/// A client whose every attempt ends within `timeout`.
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    // https with the one TLS provider the workspace uses; another part of
    // the process may have installed it already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("mesh-notify/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// POSTs `body` (JSON) with `headers` once.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &Url,
    headers: HeaderMap,
    body: &[u8],
) -> Outcome {
    let sent = client
        .post(url.clone())
        .headers(headers)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_vec())
        .send()
        .await;
    match sent {
        Ok(answer) => judge(answer.status(), answer.headers()),
        Err(e) if e.is_builder() => {
            Outcome::Permanent(format!("cannot make the request: {}", e.without_url()))
        }
        // Without the URL: a Slack webhook's path is its secret.
        Err(e) => Outcome::Transient {
            why: format!("{}", e.without_url()),
            retry_after: None,
        },
    }
}

/// 2xx sent; 429 and 5xx may pass; anything else is refused for good.
pub(crate) fn judge(status: StatusCode, headers: &HeaderMap) -> Outcome {
    if status.is_success() {
        Outcome::Sent
    } else if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        Outcome::Transient {
            why: format!("answered {status}"),
            retry_after: retry_after(headers),
        }
    } else {
        Outcome::Permanent(format!("answered {status}"))
    }
}

/// `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_retry_after(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, value.parse().expect("a header value"));
        headers
    }

    #[test]
    fn answers_are_judged_as_github_and_slack_mean_them() {
        let none = HeaderMap::new();
        assert_eq!(judge(StatusCode::OK, &none), Outcome::Sent);
        assert_eq!(judge(StatusCode::NO_CONTENT, &none), Outcome::Sent);
        assert!(matches!(
            judge(StatusCode::SERVICE_UNAVAILABLE, &none),
            Outcome::Transient { .. }
        ));
        assert_eq!(
            judge(StatusCode::TOO_MANY_REQUESTS, &with_retry_after("7")),
            Outcome::Transient {
                why: "answered 429 Too Many Requests".into(),
                retry_after: Some(Duration::from_secs(7)),
            }
        );
        for refused in [
            StatusCode::BAD_REQUEST,
            StatusCode::NOT_FOUND,
            StatusCode::GONE,
            StatusCode::FOUND,
        ] {
            assert!(matches!(judge(refused, &none), Outcome::Permanent(_)));
        }
    }

    #[test]
    fn retry_after_takes_seconds_and_dates() {
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let wait = retry_after(&with_retry_after(&later)).expect("a date");
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60));
        assert_eq!(retry_after(&with_retry_after("soon")), None);
    }
}
