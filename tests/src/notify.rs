//! Real receivers for the notifications the lead sends: an HTTP server on
//! loopback that records each webhook and checks its signature with an
//! HMAC-SHA256 of its own making (as a GitHub receiver does), answering as
//! a script says; and a real SMTP server (aiosmtpd,
//! `tests/notify/smtp_server.py`) printing each message it takes.

use std::{
    collections::VecDeque,
    path::PathBuf,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Instant,
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout, Command},
    sync::mpsc,
};

use crate::within;

pub const SECRET: &str = "It's a Secret to Everybody";

/// HMAC-SHA256 (RFC 2104) on SHA-256 alone, in lowercase hex: the
/// receiver's own check, sharing no code with the sender's.
pub fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// One request the receiver got, and what it answered.
#[derive(Debug)]
pub struct Hit {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub answered: u16,
    pub at: Instant,
}

impl Hit {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no header {name}: {:?}", self.headers))
    }

    /// Whether `X-Mesh-Signature-256` is the HMAC of the raw body under
    /// the secret.
    pub fn signed(&self) -> bool {
        self.header("x-mesh-signature-256")
            == format!("sha256={}", hmac_sha256_hex(SECRET.as_bytes(), &self.body))
    }
}

/// What the receiver answers, in turn: a status and a `Retry-After`;
/// 200 once the list is done.
pub type Script = Arc<Mutex<VecDeque<(u16, Option<&'static str>)>>>;

/// A real HTTP server on loopback recording what it gets.
pub struct Receiver {
    pub url: String,
    hits: mpsc::UnboundedReceiver<Hit>,
}

impl Receiver {
    pub async fn start(script: &[(u16, Option<&'static str>)]) -> Receiver {
        let script: Script = Arc::new(Mutex::new(script.iter().copied().collect()));
        let (tx, hits) = mpsc::unbounded_channel();
        let app = Router::new()
            .route("/hook", post(answer))
            .with_state((script, tx));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, hits }
    }

    pub async fn next(&mut self) -> Hit {
        within("a request to the receiver", self.hits.recv())
            .await
            .expect("the receiver is up")
    }

    pub fn none_left(&mut self) -> bool {
        self.hits.try_recv().is_err()
    }
}

async fn answer(
    State((script, hits)): State<(Script, mpsc::UnboundedSender<Hit>)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (status, retry_after) = script.lock().unwrap().pop_front().unwrap_or((200, None));
    let _ = hits.send(Hit {
        headers,
        body,
        answered: status,
        at: Instant::now(),
    });
    let status = StatusCode::from_u16(status).unwrap();
    match retry_after {
        Some(after) => (status, [("retry-after", after)]).into_response(),
        None => status.into_response(),
    }
}

/// The SMTP server process and its lines.
pub struct MailServer {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    pub port: u16,
}

impl MailServer {
    pub async fn start(defer: u32) -> MailServer {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("notify/smtp_server.py");
        let mut child = Command::new(crate::python())
            .arg(script)
            .args(["--defer", &defer.to_string()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the SMTP server");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = within("the SMTP server to listen", lines.next_line())
            .await
            .unwrap()
            .expect("the SMTP server printed nothing");
        let port = first
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("not a port: {first}"));
        MailServer {
            _child: child,
            lines,
            port,
        }
    }

    pub async fn next(&mut self) -> Value {
        let line = within("a message at the SMTP server", self.lines.next_line())
            .await
            .unwrap()
            .expect("the SMTP server stopped");
        serde_json::from_str(&line).unwrap()
    }
}
