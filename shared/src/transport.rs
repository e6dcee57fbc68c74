//! How a client reaches the lead: `http://` in plain text, `https://` over
//! TLS (rustls), trusting `--ca` (else the system's roots) and showing
//! `--cert`/`--key` when the lead asks for a client certificate.

use std::{ffi::OsString, path::PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// A client's TLS files: `--ca`, `--cert`, `--key`.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ClientTls {
    /// For an https:// lead: the CA certificate(s), PEM, to trust (default:
    /// the system's roots).
    #[arg(long, env = "MESH_TLS_CA")]
    pub ca: Option<PathBuf>,
    /// For a lead that asks for client certificates (--client-ca): this
    /// client's certificate, PEM.
    #[arg(long, env = "MESH_TLS_CERT", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The private key of --cert, PEM.
    #[arg(long, env = "MESH_TLS_KEY", requires = "cert")]
    pub key: Option<PathBuf>,
}

/// Why an endpoint could not be set up; the message names the flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EndpointError(pub(crate) String);

impl ClientTls {
    /// Whether any file is named.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    /// The endpoint for `url`: plain for `http://`, TLS for `https://`.
    /// TLS files with an `http://` URL are an error (they would be ignored).
    pub fn endpoint(&self, url: &str) -> Result<Endpoint, EndpointError> {
        let endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(|e| EndpointError(format!("--lead {url:?}: {e}")))?;
        let tls = url.starts_with("https://");
        if !tls {
            if !self.is_empty() {
                return Err(EndpointError(format!(
                    "--ca/--cert/--key are for TLS, but --lead {url:?} is not https://"
                )));
            }
            return Ok(endpoint);
        }
        let mut config = ClientTlsConfig::new();
        config = match &self.ca {
            Some(ca) => config.ca_certificate(Certificate::from_pem(read("--ca", ca)?)),
            None => config.with_native_roots(),
        };
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                config = config.identity(Identity::from_pem(
                    read("--cert", cert)?,
                    read("--key", key)?,
                ));
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(EndpointError("--cert needs --key".into()));
            }
            (None, Some(_)) => {
                return Err(EndpointError("--key needs --cert".into()));
            }
        }
        endpoint
            .tls_config(config)
            .map_err(|e| EndpointError(format!("--lead {url:?}: TLS: {e}")))
    }

    /// These settings as flags for a child process (`teammate`).
    pub fn args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        for (flag, path) in [
            ("--ca", &self.ca),
            ("--cert", &self.cert),
            ("--key", &self.key),
        ] {
            if let Some(path) = path {
                args.push(flag.into());
                args.push(path.into());
            }
        }
        args
    }
}

/// A PEM file's bytes; the error names the flag.
fn read(flag: &str, path: &PathBuf) -> Result<Vec<u8>, EndpointError> {
    std::fs::read(path).map_err(|e| EndpointError(format!("{flag} {}: {e}", path.display())))
}

/// What a failed call says, followed by every error beneath it (`: `
/// between), so that a transport failure names its cause: the certificate
/// that did not verify, the refused connection, the name that did not
/// resolve. Tonic's own message alone is only "transport error".
pub fn cause(status: &tonic::Status) -> String {
    let mut text = status.message().to_owned();
    let mut next = std::error::Error::source(status);
    while let Some(error) = next {
        let said = error.to_string();
        if !text.contains(&said) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&said);
        }
        next = error.source();
    }
    text
}

/// A call that failed in the transport instead of being answered (its
/// connection closed under it, or could not be made): UNAVAILABLE, what a
/// gRPC client says of a server it cannot reach (tonic on its own says
/// UNKNOWN or CANCELLED), with the cause. A server's answer stays as it is.
pub fn unreached(status: tonic::Status) -> tonic::Status {
    let transport =
        std::error::Error::source(&status).is_some_and(|e| e.is::<tonic::transport::Error>());
    if !transport || status.code() == tonic::Code::Unavailable {
        return status;
    }
    tonic::Status::unavailable(cause(&status))
}

/// Whether the server at an `http://` URL answers in TLS: a client that
/// dials plain text at a lead serving TLS sees its connection closed in
/// one of several ways (a protocol error, a broken pipe, a reset),
/// depending on who is faster, so the teammate asks once, plainly: it sends
/// HTTP/2's connection preface and nothing more (so a TLS server reads all
/// that was sent, and closes without a reset). A TLS server answers with an
/// alert record (`0x15 0x03 ..`) before it closes; an HTTP/2 server with
/// its SETTINGS frame (`0x00 ..`), at once. Anything else (nothing within a
/// second, a refused connection) is no.
pub async fn speaks_tls(url: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .ok()?;
        let mut answer = [0u8; 2];
        stream.read_exact(&mut answer).await.ok()?;
        Some(answer == [0x15, 0x03])
    };
    tokio::time::timeout(std::time::Duration::from_secs(1), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on loopback that reads the preface and answers `answer`;
    /// its URL.
    async fn server(answer: &'static [u8]) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut preface = [0u8; 24];
            stream.read_exact(&mut preface).await.expect("preface");
            stream.write_all(answer).await.expect("answer");
        });
        url
    }

    #[tokio::test]
    async fn an_alert_is_tls_and_settings_or_nothing_is_not() {
        // A TLS alert record: fatal (2), decode_error (50).
        let tls = server(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]).await;
        assert!(super::speaks_tls(&tls).await);
        // An empty SETTINGS frame.
        let h2 = server(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await;
        assert!(!super::speaks_tls(&h2).await);
        let silent = server(&[]).await;
        assert!(!super::speaks_tls(&silent).await);
        assert!(!super::speaks_tls("https://127.0.0.1:1").await);
        assert!(!super::speaks_tls("http://127.0.0.1:1").await);
    }
}
