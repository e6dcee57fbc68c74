//! Certificates made at test time (rcgen): a CA, a server certificate for
//! `localhost` and `127.0.0.1` that it signed, a client certificate it
//! signed, and a client certificate from another CA. PEM files in a
//! temporary directory.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use shared::transport::ClientTls;

/// The files, kept until dropped.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// Makes every certificate and writes them.
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = authority("mesh test CA");
        let other = authority("some other CA");
        write(dir.path(), "ca", &ca.pem(), None);
        write(dir.path(), "other-ca", &other.pem(), None);
        let server = leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (cert, key) = server.sign(&ca);
        write(dir.path(), "server", &cert, Some(&key));
        let client = leaf(&["teammate"], ExtendedKeyUsagePurpose::ClientAuth);
        let (cert, key) = client.sign(&ca);
        write(dir.path(), "client", &cert, Some(&key));
        let stranger = leaf(&["stranger"], ExtendedKeyUsagePurpose::ClientAuth);
        let (cert, key) = stranger.sign(&other);
        write(dir.path(), "stranger", &cert, Some(&key));
        Pki { dir }
    }

    /// `NAME.pem` (a certificate) in the directory.
    pub fn cert(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.pem"))
    }

    /// `NAME.key` (a private key) in the directory.
    pub fn key(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.key"))
    }

    /// `--tls-cert server.pem --tls-key server.key`, for `lead serve`.
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert("server").display().to_string(),
            "--tls-key".into(),
            self.key("server").display().to_string(),
        ]
    }

    /// A client that trusts the CA and shows `identity`'s certificate
    /// (`client`, `stranger`) if one is named.
    pub fn client(&self, identity: Option<&str>) -> ClientTls {
        ClientTls {
            ca: Some(self.cert("ca")),
            cert: identity.map(|name| self.cert(name)),
            key: identity.map(|name| self.key(name)),
        }
    }
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

struct Leaf {
    params: CertificateParams,
    key: KeyPair,
}

fn leaf(names: &[&str], usage: ExtendedKeyUsagePurpose) -> Leaf {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names.clone()).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, &names[0]);
    params.extended_key_usages = vec![usage];
    Leaf {
        params,
        key: KeyPair::generate().expect("key"),
    }
}

impl Leaf {
    /// (certificate PEM, key PEM), signed by `issuer`.
    fn sign(&self, issuer: &CertifiedIssuer<'static, KeyPair>) -> (String, String) {
        let cert = self.params.signed_by(&self.key, issuer).expect("sign");
        (cert.pem(), self.key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, cert: &str, key: Option<&str>) {
    std::fs::write(dir.join(format!("{name}.pem")), cert).expect("write cert");
    if let Some(key) = key {
        std::fs::write(dir.join(format!("{name}.key")), key).expect("write key");
    }
}
