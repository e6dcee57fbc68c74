//! A standby's console: every page says that this lead is a standby and
//! links to the active lead's console; every `/api/` call is 503 with the
//! same in JSON, so a console page left open on a lead that stepped down
//! learns where to go.

use http::{header, Response, StatusCode};
use tonic::body::Body;

use super::super::Standing;

/// How often the page looks again (it becomes the console once this lead
/// leads).
const REFRESH_SECS: u32 = 5;

/// The answer to a request for `path`.
pub(super) fn answer(path: &str, now: &Standing) -> Response<Body> {
    let (kind, body) = if path.starts_with("/api/") {
        let json = serde_json::json!({
            "role": "standby",
            "epoch": now.epoch,
            "lease_expires_unix_ms": now.lease_expires_unix_ms,
            "leader": now.leader_url,
            "leader_console": now.leader_console,
        });
        ("application/json", json.to_string())
    } else {
        ("text/html; charset=utf-8", html(now))
    };
    let mut response = Response::new(Body::new(body));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(kind));
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(header::RETRY_AFTER, REFRESH_SECS.into());
    headers.insert(
        "content-security-policy",
        header::HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    response
}

/// The page.
fn html(now: &Standing) -> String {
    let leader = if now.leader_url.is_empty() {
        "No lead is active yet; this one takes over once it holds the lease.".to_owned()
    } else if now.leader_console.is_empty() {
        format!(
            "The active lead is at <code>{}</code> (epoch {}); it has no console.",
            escape(&now.leader_url),
            now.epoch
        )
    } else {
        format!(
            "The active lead is at <code>{}</code> (epoch {}): \
             <a id=\"leader\" href=\"{}\">its console</a>.",
            escape(&now.leader_url),
            now.epoch,
            escape(&now.leader_console)
        )
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>mesh: a standby lead</title>\
         <style>body{{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}}\
         code{{overflow-wrap:anywhere}}</style></head><body>\
         <h1 id=\"role\">This lead is a standby</h1><p>{leader}</p>\
         <p>This page looks again every {REFRESH_SECS} s.</p></body></html>"
    )
}

/// `text` safe inside HTML text and a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_the_active_lead_and_escapes_what_the_database_says() {
        let now = Standing {
            epoch: 3,
            leader_url: "http://a:1".into(),
            leader_console: "http://a:2/\"><script>".into(),
            ..Standing::default()
        };
        let page = html(&now);
        assert!(page.contains("This lead is a standby"));
        assert!(page.contains("epoch 3"));
        assert!(page.contains("http://a:2/&quot;&gt;&lt;script&gt;"));
        assert!(!page.contains("<script>"));
        let none = html(&Standing::default());
        assert!(none.contains("No lead is active yet"));
    }
}
