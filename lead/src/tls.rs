//! The lead's TLS: one certificate for the gRPC port and the console, and
//! optionally a CA whose certificates clients must show (mTLS). rustls with
//! the ring provider; no OpenSSL.

use std::{path::Path, sync::Arc};

use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
    RootCertStore, ServerConfig,
};
use tokio_rustls::TlsAcceptor;

/// What `--tls-cert`, `--tls-key` and `--client-ca` name.
#[derive(Debug, Clone)]
pub struct TlsFiles<'a> {
    /// The server's certificate chain, PEM.
    pub cert: &'a Path,
    /// Its private key, PEM.
    pub key: &'a Path,
    /// The CA that signs client certificates, PEM; none: clients show none.
    pub client_ca: Option<&'a Path>,
}

/// TLS acceptors for the lead's two ports.
#[derive(Clone)]
pub struct ServerTls {
    /// gRPC: offers `h2` only.
    pub grpc: TlsAcceptor,
    /// The console: offers `http/1.1`.
    pub console: TlsAcceptor,
    /// Whether clients must show a certificate.
    pub mutual: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mutual", &self.mutual)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads the files; every error names the flag and the file.
    pub fn load(files: &TlsFiles<'_>) -> anyhow::Result<Self> {
        let certs = read_certs("--tls-cert", files.cert)?;
        let key = PrivateKeyDer::from_pem_file(files.key).map_err(|e| {
            anyhow::anyhow!(
                "--tls-key {}: no PEM private key ({e})",
                files.key.display()
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = match files.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certs("--client-ca", ca)? {
                    roots
                        .add(cert)
                        .map_err(|e| anyhow::anyhow!("--client-ca {}: {e}", ca.display()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| anyhow::anyhow!("--client-ca {}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder.with_single_cert(certs, key).map_err(|e| {
            anyhow::anyhow!(
                "--tls-cert {} and --tls-key {}: {e}",
                files.cert.display(),
                files.key.display()
            )
        })?;
        let with_alpn = |protocol: &[u8]| {
            let mut config = config.clone();
            config.alpn_protocols = vec![protocol.to_vec()];
            TlsAcceptor::from(Arc::new(config))
        };
        Ok(Self {
            grpc: with_alpn(b"h2"),
            console: with_alpn(b"http/1.1"),
            mutual: files.client_ca.is_some(),
        })
    }
}

/// Every certificate in a PEM file; at least one.
fn read_certs(flag: &str, path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{flag} {}: no PEM certificate in it", path.display());
    }
    Ok(certs)
}
