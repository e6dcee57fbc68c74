//! A `[[sink]]`: where notices go (a webhook, a Slack incoming webhook, a
//! mail server), checked kind by kind: only the keys its kind has, an
//! address it may reach in the clear only on loopback, secrets read from
//! the environment.

use std::{net::IpAddr, ops::Range, time::Duration};

use lettre::message::Mailbox;
use reqwest::Url;
use serde::Deserialize;
use toml::Spanned;

use crate::doc::{ConfigError, Doc};

/// How long one attempt may take, unless the sink says `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `timeout` a sink may set.
const MOST_TIMEOUT: Duration = Duration::from_secs(300);

/// A `[[sink]]` as TOML reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSink {
    name: Spanned<String>,
    kind: Spanned<String>,
    url: Option<Spanned<String>>,
    secret: Option<Spanned<String>>,
    secret_env: Option<Spanned<String>>,
    server: Option<Spanned<String>>,
    from: Option<Spanned<String>>,
    tls: Option<Spanned<String>>,
    username: Option<Spanned<String>>,
    password_env: Option<Spanned<String>>,
    to: Option<Spanned<Vec<String>>>,
    timeout: Option<Spanned<String>>,
}

/// The keys each kind may have besides `name`, `kind` and `timeout`.
const KEYS: &[(&str, &[&str])] = &[
    ("webhook", &["url", "secret", "secret_env"]),
    ("slack", &["url"]),
    (
        "smtp",
        &["server", "from", "tls", "username", "password_env", "to"],
    ),
];

/// A secret: never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A URL that is a secret (a Slack webhook's): its host alone is printed.
#[derive(Clone)]
pub(crate) struct Hidden(pub(crate) Url);

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}/..",
            self.0.scheme(),
            self.0.host_str().unwrap_or("")
        )
    }
}

/// One sink, checked.
#[derive(Debug, Clone)]
pub(crate) struct SinkConfig {
    pub(crate) name: String,
    /// The line of its `[[sink]]`.
    pub(crate) line: usize,
    /// How long one attempt may take.
    pub(crate) timeout: Duration,
    pub(crate) kind: SinkKind,
}

/// What a sink is, with what its kind needs.
#[derive(Debug, Clone)]
pub(crate) enum SinkKind {
    /// POST the notice as JSON, signed when there is a secret.
    Webhook { url: Url, secret: Option<Secret> },
    /// POST a Block Kit message to a Slack incoming webhook, whose URL is
    /// its secret.
    Slack { url: Hidden },
    /// Mail to the owners' addresses.
    Smtp(SmtpConfig),
}

/// How a mail server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encryption {
    /// Plain, then STARTTLS (required): `tls = "starttls"`.
    StartTls,
    /// TLS from the first byte (SMTPS): `tls = "tls"`.
    Implicit,
    /// No TLS at all, loopback only: `tls = "none"`.
    Plain,
}

/// A mail sink.
#[derive(Debug, Clone)]
pub(crate) struct SmtpConfig {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: Encryption,
    pub(crate) from: Mailbox,
    /// Addresses every mail goes to, besides the owners'.
    pub(crate) to: Vec<Mailbox>,
    /// `username` and the password `password_env` names.
    pub(crate) credentials: Option<(String, Secret)>,
}

impl SinkConfig {
    /// Checks one `[[sink]]`.
    pub(crate) fn parse(doc: &Doc<'_>, raw: Spanned<RawSink>) -> Result<SinkConfig, ConfigError> {
        let line = doc.line(&raw.span());
        let raw = raw.into_inner();
        let name = raw.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(doc.error(&raw.name.span(), "a sink's `name` is empty"));
        }
        let at = |what: &str| format!("sink {name:?}: {what}");
        let kind_name = raw.kind.get_ref().as_str();
        let Some((_, allowed)) = KEYS.iter().find(|(k, _)| *k == kind_name) else {
            return Err(doc.error(
                &raw.kind.span(),
                at(&format!(
                    "kind {kind_name:?} is not one of \"webhook\", \"slack\", \"smtp\""
                )),
            ));
        };
        for (key, span) in raw.present() {
            if !allowed.contains(&key) {
                return Err(doc.error(&span, at(&format!("a {kind_name} sink has no key `{key}`"))));
            }
        }
        let timeout = match &raw.timeout {
            None => DEFAULT_TIMEOUT,
            Some(t) => duration(t, Duration::from_millis(100), MOST_TIMEOUT)
                .map_err(|e| doc.error(&t.span(), at(&format!("timeout {e}"))))?,
        };
        let kind = match kind_name {
            "webhook" => SinkKind::Webhook {
                url: http_url(doc, &raw.url, &at, line)?,
                secret: webhook_secret(doc, &raw, &at)?,
            },
            "slack" => SinkKind::Slack {
                url: Hidden(http_url(doc, &raw.url, &at, line)?),
            },
            _ => SinkKind::Smtp(smtp(doc, &raw, &at, line)?),
        };
        Ok(SinkConfig {
            name,
            line,
            timeout,
            kind,
        })
    }
}

impl RawSink {
    /// The kind-specific keys it has, with their spans.
    fn present(&self) -> Vec<(&'static str, Range<usize>)> {
        let strings = [
            ("url", &self.url),
            ("secret", &self.secret),
            ("secret_env", &self.secret_env),
            ("server", &self.server),
            ("from", &self.from),
            ("tls", &self.tls),
            ("username", &self.username),
            ("password_env", &self.password_env),
        ];
        let mut present: Vec<_> = strings
            .into_iter()
            .filter_map(|(key, value)| value.as_ref().map(|v| (key, v.span())))
            .collect();
        if let Some(to) = &self.to {
            present.push(("to", to.span()));
        }
        present
    }
}

/// A duration in humantime's words, within `least..=most`.
pub(crate) fn duration(
    text: &Spanned<String>,
    least: Duration,
    most: Duration,
) -> Result<Duration, String> {
    let value = humantime::parse_duration(text.get_ref().trim()).map_err(|e| {
        format!(
            "{:?} is not a duration (\"30m\", \"1h 30m\"): {e}",
            text.get_ref()
        )
    })?;
    if value < least || value > most {
        return Err(format!(
            "{:?} is outside {} to {}",
            text.get_ref(),
            humantime::format_duration(least),
            humantime::format_duration(most)
        ));
    }
    Ok(value)
}

/// Whether `host` is this machine's loopback (`localhost`, 127.0.0.0/8,
/// `::1`), the one place plain text may go.
pub(crate) fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The `url` of a webhook or Slack sink: https, or http on loopback.
fn http_url(
    doc: &Doc<'_>,
    url: &Option<Spanned<String>>,
    at: &dyn Fn(&str) -> String,
    line: usize,
) -> Result<Url, ConfigError> {
    let Some(url) = url else {
        return Err(ConfigError {
            file: None,
            line: Some(line),
            message: at("`url` is required"),
        });
    };
    let parsed = Url::parse(url.get_ref().trim())
        .map_err(|e| doc.error(&url.span(), at(&format!("url is not a URL: {e}"))))?;
    let host = parsed.host_str().unwrap_or("");
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if is_loopback(host) => Ok(parsed),
        "http" => Err(doc.error(
            &url.span(),
            at("url is http: only https may leave this machine (http is for loopback)"),
        )),
        other => Err(doc.error(
            &url.span(),
            at(&format!("url's scheme {other:?} is not https")),
        )),
    }
}

/// A webhook's secret: the variable `secret_env` names wins when it is set
/// and not empty; `secret` otherwise; neither, no signature.
fn webhook_secret(
    doc: &Doc<'_>,
    raw: &RawSink,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<Secret>, ConfigError> {
    if let Some(var) = &raw.secret_env {
        if let Some(value) = doc.env(var.get_ref()) {
            return Ok(Some(Secret(value)));
        }
        if raw.secret.is_none() {
            return Err(doc.error(
                &var.span(),
                at(&format!(
                    "secret_env names {:?}, which is not set (or empty), and there is no `secret`",
                    var.get_ref()
                )),
            ));
        }
    }
    match &raw.secret {
        Some(s) if s.get_ref().is_empty() => Err(doc.error(&s.span(), at("secret is empty"))),
        Some(s) => Ok(Some(Secret(s.get_ref().clone()))),
        None => Ok(None),
    }
}

/// A mail sink's keys.
fn smtp(
    doc: &Doc<'_>,
    raw: &RawSink,
    at: &dyn Fn(&str) -> String,
    line: usize,
) -> Result<SmtpConfig, ConfigError> {
    let required = |key: &str, value: &Option<Spanned<String>>| {
        value.clone().ok_or_else(|| ConfigError {
            file: None,
            line: Some(line),
            message: at(&format!("`{key}` is required")),
        })
    };
    let server = required("server", &raw.server)?;
    let from = required("from", &raw.from)?;
    let tls = match raw.tls.as_ref().map(|t| (t.get_ref().as_str(), t.span())) {
        None | Some(("starttls", _)) => Encryption::StartTls,
        Some(("tls", _)) => Encryption::Implicit,
        Some(("none", _)) => Encryption::Plain,
        Some((other, span)) => {
            return Err(doc.error(
                &span,
                at(&format!(
                    "tls {other:?} is not one of \"starttls\", \"tls\", \"none\""
                )),
            ))
        }
    };
    let (host, port) = host_port(server.get_ref().trim(), tls)
        .map_err(|e| doc.error(&server.span(), at(&format!("server {e}"))))?;
    if tls == Encryption::Plain && !is_loopback(&host) {
        return Err(doc.error(
            &server.span(),
            at(&format!(
                "tls = \"none\" sends mail in the clear, only to loopback; {host:?} is not"
            )),
        ));
    }
    let from =
        mailbox(from.get_ref()).map_err(|e| doc.error(&from.span(), at(&format!("from {e}"))))?;
    let mut to = Vec::new();
    if let Some(list) = &raw.to {
        for address in list.get_ref() {
            to.push(mailbox(address).map_err(|e| doc.error(&list.span(), at(&format!("to {e}"))))?);
        }
    }
    let credentials = credentials(doc, raw, at)?;
    Ok(SmtpConfig {
        host,
        port,
        tls,
        from,
        to,
        credentials,
    })
}

/// `username` with the password `password_env` names: both or neither.
fn credentials(
    doc: &Doc<'_>,
    raw: &RawSink,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<(String, Secret)>, ConfigError> {
    match (&raw.username, &raw.password_env) {
        (None, None) => Ok(None),
        (Some(user), None) => Err(doc.error(&user.span(), at("username without password_env"))),
        (None, Some(var)) => Err(doc.error(&var.span(), at("password_env without username"))),
        (Some(user), Some(var)) => match doc.env(var.get_ref()) {
            Some(password) => Ok(Some((user.get_ref().clone(), Secret(password)))),
            None => Err(doc.error(
                &var.span(),
                at(&format!(
                    "password_env names {:?}, which is not set (or empty)",
                    var.get_ref()
                )),
            )),
        },
    }
}

/// "host", "host:port", "[::1]:port"; the port defaults by `tls`.
fn host_port(server: &str, tls: Encryption) -> Result<(String, u16), String> {
    let default = match tls {
        Encryption::StartTls => 587,
        Encryption::Implicit => 465,
        Encryption::Plain => 25,
    };
    let (host, port) = if let Some(rest) = server.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{server:?} opens a [ it does not close"))?;
        (host, after.strip_prefix(':'))
    } else {
        match server.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            _ => (server, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{server:?} names no host"));
    }
    let port = match port {
        None => default,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{server:?} has no valid port"))?,
    };
    Ok((host.to_owned(), port))
}

/// A mail address, `"carol@example.com"` or `"Carol <carol@example.com>"`.
pub(crate) fn mailbox(text: &str) -> Result<Mailbox, String> {
    text.trim()
        .parse::<Mailbox>()
        .map_err(|e| format!("{text:?} is not a mail address: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_with_and_without_ports() {
        assert_eq!(
            host_port("smtp.example.com", Encryption::StartTls),
            Ok(("smtp.example.com".into(), 587))
        );
        assert_eq!(
            host_port("smtp.example.com:2525", Encryption::Implicit),
            Ok(("smtp.example.com".into(), 2525))
        );
        assert_eq!(
            host_port("[::1]:25", Encryption::Plain),
            Ok(("::1".into(), 25))
        );
        assert_eq!(host_port("::1", Encryption::Plain), Ok(("::1".into(), 25)));
        assert!(host_port("host:x", Encryption::Plain).is_err());
        assert!(host_port(":25", Encryption::Plain).is_err());
    }

    #[test]
    fn loopback_is_localhost_127_and_1() {
        for host in ["localhost", "127.0.0.1", "127.9.9.9", "::1", "[::1]"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "localhost.example.com"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
