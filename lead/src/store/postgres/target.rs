//! Where the store is: a `postgres://` URL as libpq reads it, with TLS by
//! rustls where the URL asks for it (`sslmode=require`, `verify-ca` or
//! `verify-full`; the certificate is always verified, against
//! `sslrootcert=FILE` when the URL names one, else the system's roots).

use std::{fmt, str::FromStr, sync::Arc};

use rustls::pki_types::{pem::PemObject, CertificateDer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::mpsc,
};
use tokio_postgres::{
    config::{Host, SslMode},
    AsyncMessage, Client, Config,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::pg;
use crate::store::StoreError;

/// A parsed store URL.
#[derive(Clone)]
pub struct PgTarget {
    config: Config,
    /// The roots a TLS connection trusts, when the URL asks for TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgTarget({self})")
    }
}

impl PgTarget {
    /// Parses `url` (`postgres://` or `postgresql://`, or libpq's
    /// `key=value` form); `field` names where it came from in errors.
    pub fn parse(field: &str, url: &str) -> Result<Self, StoreError> {
        let bad = |detail: String| StoreError::Postgres(format!("{field}: {detail}"));
        let (url, root_file) = take_param(url, "sslrootcert");
        let mut tls_asked = false;
        let (url, mode) = take_param(&url, "sslmode");
        let mut config = Config::from_str(&url).map_err(|e| bad(e.to_string()))?;
        match mode.as_deref() {
            None | Some("disable") | Some("allow") | Some("prefer") => {
                config.ssl_mode(SslMode::Disable);
            }
            Some("require") | Some("verify-ca") | Some("verify-full") => {
                config.ssl_mode(SslMode::Require);
                tls_asked = true;
            }
            Some(other) => {
                return Err(bad(format!(
                    "sslmode={other} is not one of disable, require, verify-ca, verify-full"
                )))
            }
        }
        if config.get_hosts().is_empty() {
            return Err(bad(
                "the URL names no host (a name, an address, or host=/socket/dir)".into(),
            ));
        }
        if config.get_user().is_none() {
            // libpq's default: the operating system's user name.
            if let Ok(user) = std::env::var("USER") {
                config.user(user);
            }
        }
        let tls = if tls_asked {
            Some(Arc::new(client_config(root_file.as_deref()).map_err(bad)?))
        } else {
            None
        };
        Ok(Self { config, tls })
    }

    /// A new connection, its I/O driven by a task on the current runtime.
    pub(crate) async fn connect(&self) -> Result<Client, StoreError> {
        self.connect_with(None).await
    }

    /// A new connection whose notifications (LISTEN) come out of the
    /// receiver, their payloads.
    pub(crate) async fn connect_notified(
        &self,
    ) -> Result<(Client, mpsc::UnboundedReceiver<String>), StoreError> {
        let (tx, rx) = mpsc::unbounded_channel();
        Ok((self.connect_with(Some(tx)).await?, rx))
    }

    async fn connect_with(
        &self,
        notes: Option<mpsc::UnboundedSender<String>>,
    ) -> Result<Client, StoreError> {
        match &self.tls {
            None => {
                let (client, connection) = self
                    .config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(pg)?;
                tokio::spawn(drive(connection, notes));
                Ok(client)
            }
            Some(tls) => {
                let tls = MakeRustlsConnect::new(rustls::ClientConfig::clone(tls));
                let (client, connection) = self.config.connect(tls).await.map_err(pg)?;
                tokio::spawn(drive(connection, notes));
                Ok(client)
            }
        }
    }
}

/// Runs a connection's I/O until it ends, passing on its notifications.
async fn drive<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
    notes: Option<mpsc::UnboundedSender<String>>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notification(note))) => {
                if let Some(notes) = &notes {
                    let _ = notes.send(note.payload().to_owned());
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::debug!(error = %e, "a PostgreSQL connection ended");
                return;
            }
            None => return,
        }
    }
}

/// The URL without a password: user, hosts, port and database.
impl fmt::Display for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self.config.get_user().unwrap_or("");
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .map(|host| match host {
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        let ports: Vec<String> = self.config.get_ports().iter().map(u16::to_string).collect();
        let db = self.config.get_dbname().unwrap_or(user);
        write!(f, "postgres://{user}@[{}]", hosts.join(","))?;
        if !ports.is_empty() {
            write!(f, ":{}", ports.join(","))?;
        }
        write!(f, "/{db}")?;
        if self.tls.is_some() {
            write!(f, " (TLS)")?;
        }
        Ok(())
    }
}

/// Removes `key=value` from a URL's query (or a `key=value` string) and
/// returns the value: libpq options tokio-postgres does not read itself.
fn take_param(url: &str, key: &str) -> (String, Option<String>) {
    let (head, query, sep) = match url.split_once('?') {
        Some((head, query)) => (head, query, '&'),
        None if !url.contains("://") => ("", url, ' '),
        None => return (url.to_owned(), None),
    };
    let mut value = None;
    let kept: Vec<&str> = query
        .split(sep)
        .filter(|part| match part.split_once('=') {
            Some((k, v)) if k.trim() == key => {
                value = Some(v.trim().to_owned());
                false
            }
            _ => true,
        })
        .collect();
    let rest = kept.join(&sep.to_string());
    let url = match (head, sep) {
        ("", ' ') => rest,
        (head, _) if rest.is_empty() => head.to_owned(),
        (head, _) => format!("{head}?{rest}"),
    };
    (url, value)
}

/// TLS to the server: its certificate checked against `roots` (a PEM file)
/// or the system's roots.
fn client_config(roots: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        Some(file) => {
            let certs = CertificateDer::pem_file_iter(file)
                .map_err(|e| format!("sslrootcert={file}: {e}"))?;
            for cert in certs {
                let cert = cert.map_err(|e| format!("sslrootcert={file}: {e}"))?;
                store
                    .add(cert)
                    .map_err(|e| format!("sslrootcert={file}: {e}"))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
        }
    }
    if store.is_empty() {
        return Err("sslmode asks for TLS but no root certificate was found; name one with sslrootcert=FILE".into());
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|builder| builder.with_root_certificates(store).with_no_client_auth())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_options_tokio_postgres_does_not_read_are_taken_out() {
        assert_eq!(
            take_param(
                "postgres://u@h/db?sslrootcert=/ca.pem&sslmode=require",
                "sslrootcert"
            ),
            (
                "postgres://u@h/db?sslmode=require".into(),
                Some("/ca.pem".into())
            )
        );
        assert_eq!(
            take_param("postgres://u@h/db?sslmode=require", "sslmode"),
            ("postgres://u@h/db".into(), Some("require".into()))
        );
        assert_eq!(
            take_param("host=/tmp user=mesh sslmode=disable", "sslmode"),
            ("host=/tmp user=mesh".into(), Some("disable".into()))
        );
        assert_eq!(
            take_param("postgres://u@h/db", "sslmode"),
            ("postgres://u@h/db".into(), None)
        );
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        let target =
            PgTarget::parse("--store", "postgres://mesh:secret@db.example:5433/team").expect("url");
        let shown = target.to_string();
        assert_eq!(shown, "postgres://mesh@[db.example]:5433/team");
        assert!(!format!("{target:?}").contains("secret"));
    }

    #[test]
    fn a_bad_url_names_its_field() {
        let err = PgTarget::parse("--store", "postgres://h/db?sslmode=sometimes").expect_err("bad");
        assert!(
            err.to_string().contains("--store: sslmode=sometimes"),
            "{err}"
        );
    }
}
