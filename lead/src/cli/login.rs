//! `lead login --oidc`: a token for the operator commands from the
//! identity provider, by the device authorization grant (RFC 8628). The
//! command asks the provider for a user code, says where to enter it, and
//! polls the token endpoint (at the provider's `interval`, slower on
//! `slow_down`) until someone signs in there, the code expires or the
//! sign-in is denied. The ID token is kept in a file only its owner can
//! read ([`token_file`]); the operator commands use it when no other token
//! is given ([`stored_token`]). The lead checks the token on every call, as
//! every provider token ([`crate::callers::oidc`]); here it is only read,
//! to say who signed in and until when.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use mesh_core::display::escape;
use serde_json::Value;

use super::CliError;
use crate::console::provider::{self, TokenError};

/// The device authorization grant's `grant_type`.
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// How long between polls when the provider does not say (RFC 8628 3.2).
const DEFAULT_INTERVAL: u64 = 5;
/// How much longer between polls after each `slow_down` (RFC 8628 3.5).
const SLOW_DOWN: u64 = 5;

/// `lead login`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LoginArgs {
    /// Sign in at an OpenID provider, by the device authorization grant
    /// (the only way `lead login` signs in).
    #[arg(long, required = true)]
    pub oidc: bool,
    /// The provider's issuer URL: the lead's --oidc-issuer.
    #[arg(long, env = "MESH_OIDC_ISSUER", value_name = "URL")]
    pub issuer: String,
    /// The client to sign in as: the lead's --oidc-audience.
    #[arg(long, default_value = "mesh", value_name = "ID")]
    pub client_id: String,
    /// The scopes asked for: what puts the name and groups claims in the
    /// ID token.
    #[arg(long, default_value = "openid email profile groups")]
    pub scopes: String,
    /// Where the token is kept (default: $XDG_CONFIG_HOME/mesh/token, else
    /// ~/.config/mesh/token).
    #[arg(long, env = "MESH_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// What the device authorization endpoint answered.
struct Device {
    device_code: String,
    user_code: String,
    verification_uri: String,
    verification_uri_complete: Option<String>,
    expires_in: u64,
    interval: u64,
}

/// `lead login --oidc`: signs in at the provider and keeps the ID token;
/// says who signed in and until when.
pub async fn login(args: LoginArgs) -> Result<String, CliError> {
    let path = token_file(args.token_file.as_deref())?;
    let http = provider::http_client().map_err(CliError::Connect)?;
    let endpoints = provider::discover(&http, &args.issuer)
        .await
        .map_err(CliError::Connect)?;
    let Some(device_endpoint) = &endpoints.device_authorization else {
        return Err(CliError::Connect(format!(
            "the identity provider at {} does not offer the device authorization grant (its \
             discovery document names no device_authorization_endpoint): sign in to the \
             console instead, or give the commands a token (--operator-token)",
            args.issuer
        )));
    };
    let answer = provider::post_form(
        &http,
        device_endpoint,
        &args.client_id,
        None,
        &[("scope", &args.scopes)],
    )
    .await
    .map_err(|e| CliError::Connect(format!("the provider did not begin a sign-in: {e}")))?;
    let device = device(&answer)?;
    let mut out = std::io::stdout().lock();
    match &device.verification_uri_complete {
        Some(complete) => writeln!(out, "To sign in, open {}", escape(complete))?,
        None => writeln!(out, "To sign in:")?,
    }
    writeln!(
        out,
        "or open {} and enter the code {}",
        escape(&device.verification_uri),
        escape(&device.user_code)
    )?;
    writeln!(
        out,
        "Waiting for the sign-in (the code expires in {} minutes)...",
        device.expires_in.div_ceil(60)
    )?;
    out.flush()?;
    drop(out);
    let tokens = poll(&http, &endpoints.token, &args.client_id, &device).await?;
    let id_token = tokens
        .get("id_token")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            CliError::Connect(
                "the provider gave no ID token (is openid among --scopes?)".to_owned(),
            )
        })?;
    keep(&path, id_token)?;
    let claims = provider::unverified_claims(id_token).unwrap_or_default();
    Ok(format!(
        "Signed in as {}; the token expires {}. Kept in {}: the operator commands use it when \
         no other token is given.\n",
        escape(&who(&claims)),
        expiry(&claims),
        path.display()
    ))
}

/// The device authorization endpoint's answer, read.
fn device(answer: &Value) -> Result<Device, CliError> {
    let text = |field: &str| answer.get(field).and_then(Value::as_str).map(str::to_owned);
    let number =
        |field: &str, default: u64| answer.get(field).and_then(Value::as_u64).unwrap_or(default);
    let missing = |field: &str| {
        CliError::Connect(format!(
            "the provider's device authorization answer has no {field}"
        ))
    };
    Ok(Device {
        device_code: text("device_code").ok_or_else(|| missing("device_code"))?,
        user_code: text("user_code").ok_or_else(|| missing("user_code"))?,
        verification_uri: text("verification_uri").ok_or_else(|| missing("verification_uri"))?,
        verification_uri_complete: text("verification_uri_complete"),
        expires_in: number("expires_in", 600),
        interval: number("interval", DEFAULT_INTERVAL).max(1),
    })
}

/// Polls the token endpoint for `device`'s tokens until someone signs in,
/// the code expires or the sign-in is denied.
async fn poll(
    http: &reqwest::Client,
    token_endpoint: &str,
    client_id: &str,
    device: &Device,
) -> Result<Value, CliError> {
    let expired = || {
        CliError::Connect(
            "the code expired before anyone signed in with it; run `lead login --oidc` again"
                .to_owned(),
        )
    };
    let until = Instant::now() + Duration::from_secs(device.expires_in);
    let mut interval = device.interval;
    loop {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        if Instant::now() >= until {
            return Err(expired());
        }
        let answer = provider::post_form(
            http,
            token_endpoint,
            client_id,
            None,
            &[
                ("grant_type", DEVICE_GRANT),
                ("device_code", &device.device_code),
            ],
        )
        .await;
        match answer {
            Ok(tokens) => return Ok(tokens),
            Err(TokenError::Refused { error, .. }) if error == "authorization_pending" => {}
            Err(TokenError::Refused { error, .. }) if error == "slow_down" => {
                interval += SLOW_DOWN;
            }
            Err(TokenError::Refused { error, .. }) if error == "expired_token" => {
                return Err(expired())
            }
            Err(TokenError::Refused { error, .. }) if error == "access_denied" => {
                return Err(CliError::Connect(
                    "the sign-in was denied at the identity provider".to_owned(),
                ))
            }
            Err(e) => {
                return Err(CliError::Connect(format!(
                    "the identity provider refused the sign-in: {e}"
                )))
            }
        }
    }
}

/// Where `lead login --oidc` keeps its token: `given`, else
/// `$XDG_CONFIG_HOME/mesh/token`, else `~/.config/mesh/token`.
pub fn token_file(given: Option<&Path>) -> Result<PathBuf, CliError> {
    if let Some(path) = given {
        return Ok(path.to_owned());
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .ok_or_else(|| {
            CliError::Usage("no home directory (HOME) for the token: pass --token-file".to_owned())
        })?;
    Ok(config.join("mesh").join("token"))
}

/// Writes `token` to `path`, which only its owner may read (0600; a new
/// directory 0700), replacing it whole.
fn keep(path: &Path, token: &str) -> Result<(), CliError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let partial = path.with_file_name(format!(
        ".{}.{}.partial",
        name.unwrap_or_else(|| "token".to_owned()),
        std::process::id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)?;
    let written = file
        .write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    Ok(written?)
}

/// The token `lead login --oidc` kept at `path`, if there is one; one that
/// has expired is refused here, saying so, rather than by the lead.
pub fn stored_token(path: &Path) -> Result<Option<String>, CliError> {
    let token = match std::fs::read_to_string(path) {
        Ok(token) => token.trim().to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::Connect(format!("{}: {e}", path.display()))),
    };
    if token.is_empty() {
        return Ok(None);
    }
    let claims = provider::unverified_claims(&token).unwrap_or_default();
    let now = shared::auth::now_unix_ms() / 1000;
    if claims
        .get("exp")
        .and_then(Value::as_i64)
        .is_some_and(|exp| exp <= now)
    {
        return Err(CliError::Connect(format!(
            "the token in {} (signed in as {}) expired {}; sign in again with `lead login --oidc`",
            path.display(),
            escape(&who(&claims)),
            expiry(&claims)
        )));
    }
    Ok(Some(token))
}

/// Who an ID token names, for display: its email, else its
/// preferred_username, else its sub.
fn who(claims: &Value) -> String {
    ["email", "preferred_username", "sub"]
        .iter()
        .find_map(|claim| claims.get(*claim).and_then(Value::as_str))
        .unwrap_or("someone the token does not name")
        .to_owned()
}

/// When an ID token expires, as a UTC time and how far off it is.
fn expiry(claims: &Value) -> String {
    let Some(exp) = claims.get("exp").and_then(Value::as_u64) else {
        return "at no time it says".to_owned();
    };
    let at = UNIX_EPOCH + Duration::from_secs(exp);
    let when = humantime::format_rfc3339_seconds(at);
    match at.duration_since(SystemTime::now()) {
        Ok(left) => format!("at {when} (in {} minutes)", left.as_secs().div_ceil(60)),
        Err(_) => format!("at {when}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_kept_for_its_owner_only_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mesh").join("token");
        assert_eq!(stored_token(&path).expect("none yet"), None);
        let exp = shared::auth::now_unix_ms() / 1000 + 3600;
        let claims = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            format!(r#"{{"sub":"dan","email":"dan@example.com","exp":{exp}}}"#),
        );
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{claims}.c2ln");
        keep(&path, &token).expect("kept");
        keep(&path, &token).expect("kept again, replaced");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().expect("dir"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(stored_token(&path).expect("read"), Some(token));
        let left = std::fs::read_dir(path.parent().expect("dir"))
            .expect("list")
            .count();
        assert_eq!(left, 1, "no partial file is left");
    }

    #[test]
    fn an_expired_token_is_refused_naming_who_and_when() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        let claims = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            r#"{"sub":"dan","preferred_username":"dan","exp":1000000000}"#,
        );
        keep(&path, &format!("eyJhbGciOiJSUzI1NiJ9.{claims}.c2ln")).expect("kept");
        let refused = stored_token(&path).expect_err("expired");
        let said = refused.to_string();
        assert!(
            said.contains("signed in as dan") && said.contains("2001-09-09T01:46:40Z"),
            "{said}"
        );
    }

    #[test]
    fn the_device_answer_is_read_with_rfc_8628s_defaults() {
        let device = device(&serde_json::json!({
            "device_code": "d", "user_code": "ABCD-EFGH",
            "verification_uri": "http://p/device",
        }))
        .expect("read");
        assert_eq!(
            (device.interval, device.expires_in),
            (DEFAULT_INTERVAL, 600)
        );
        assert!(device.verification_uri_complete.is_none());
        let missing = device_missing();
        assert!(missing.contains("user_code"), "{missing}");
    }

    fn device_missing() -> String {
        match device(&serde_json::json!({"device_code": "d"})) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }
}
