//! A self-signed certificate for a lead on TLS, made at bench time, to
//! measure what TLS costs.

use std::path::PathBuf;

use shared::transport::ClientTls;

/// The certificate and key files, kept until dropped.
pub(crate) struct SelfSigned {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

impl SelfSigned {
    /// A certificate for `127.0.0.1` and `localhost`.
    pub(crate) fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let made = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
        ])?;
        let cert = dir.path().join("lead.pem");
        let key = dir.path().join("lead.key");
        std::fs::write(&cert, made.cert.pem())?;
        std::fs::write(&key, made.signing_key.serialize_pem())?;
        Ok(Self {
            _dir: dir,
            cert,
            key,
        })
    }

    /// `--tls-cert FILE --tls-key FILE`.
    pub(crate) fn server_flags(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert.display().to_string(),
            "--tls-key".into(),
            self.key.display().to_string(),
        ]
    }

    /// A client that trusts it.
    pub(crate) fn client(&self) -> ClientTls {
        ClientTls {
            ca: Some(self.cert.clone()),
            ..ClientTls::default()
        }
    }
}
