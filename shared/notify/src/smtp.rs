//! The mail sink: one plain-text mail per notice to the addresses of its
//! owners (`[people]`) and the sink's own `to`, through `lettre` (tokio,
//! rustls on ring): STARTTLS required, TLS from the first byte, or, on
//! loopback only, none. The mail links to the request's page in the
//! console and approves nothing.

use lettre::{
    address::Envelope,
    message::{header::ContentType, Mailbox, Message},
    transport::smtp::authentication::Credentials,
    AsyncSmtpTransport, AsyncTransport, Tokio1Executor,
};

use crate::{
    notice::{Event, Notice},
    people::People,
    retry::{with_retries, Outcome},
    sink::{Encryption, SmtpConfig},
    stats::{bump, SinkCounters},
};

/// A mail sink, ready to send.
#[derive(Debug)]
pub(crate) struct Smtp {
    transport: Result<AsyncSmtpTransport<Tokio1Executor>, String>,
    config: SmtpConfig,
    people: People,
}

impl Smtp {
    /// The sink of `config`, its attempts ending within `timeout`.
    pub(crate) fn new(config: SmtpConfig, people: People, timeout: std::time::Duration) -> Smtp {
        let transport = transport(&config, timeout).map_err(|e| format!("{e}"));
        Smtp {
            transport,
            config,
            people,
        }
    }

    /// Mails `notice`, trying again as [`crate::retry`] says.
    pub(crate) async fn deliver(&self, notice: &Notice, counters: &SinkCounters) {
        let what = format!("mail for {}", notice.request_id);
        let transport = match &self.transport {
            Ok(transport) => transport,
            Err(e) => return give_up(&what, counters, &format!("no mail transport: {e}")),
        };
        let (mut to, unknown) = self.people.of(&notice.owners);
        if !unknown.is_empty() {
            tracing::debug!(
                delivery = what,
                ?unknown,
                "owners without an address in [people]"
            );
        }
        for fixed in &self.config.to {
            if !to.iter().any(|m| m.email == fixed.email) {
                to.push(fixed.clone());
            }
        }
        if to.is_empty() {
            let why = format!(
                "no address for any of {:?} in [people], and no `to`",
                notice.owners
            );
            return give_up(&what, counters, &why);
        }
        let message = match mail(&self.config.from, &to, notice) {
            Ok(message) => message,
            Err(e) => return give_up(&what, counters, &e),
        };
        let envelope: Envelope = message.envelope().clone();
        let raw = message.formatted();
        with_retries(&what, counters, || async {
            match transport.send_raw(&envelope, &raw).await {
                Ok(_) => Outcome::Sent,
                Err(e) if e.is_permanent() || e.is_client() => Outcome::Permanent(format!("{e}")),
                Err(e) => Outcome::Transient {
                    why: format!("{e}"),
                    retry_after: None,
                },
            }
        })
        .await;
    }
}

/// Counts a delivery that cannot be made, and says why.
fn give_up(what: &str, counters: &SinkCounters, why: &str) {
    bump(&counters.failed);
    tracing::warn!(delivery = what, %why, "notification not mailed");
}

/// The connection `config` asks for.
fn transport(
    config: &SmtpConfig,
    timeout: std::time::Duration,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, lettre::transport::smtp::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = match config.tls {
        Encryption::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&config.host)?,
        Encryption::Implicit => AsyncSmtpTransport::<Tokio1Executor>::relay(&config.host)?,
        Encryption::Plain => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&config.host),
    };
    let mut builder = builder.port(config.port).timeout(Some(timeout));
    if let Some((user, password)) = &config.credentials {
        builder = builder.credentials(Credentials::new(user.clone(), password.0.clone()));
    }
    Ok(builder.build())
}

/// The mail: "[mesh] alice's plan waits for @dba", in plain text.
fn mail(from: &Mailbox, to: &[Mailbox], notice: &Notice) -> Result<Message, String> {
    let subject = format!("[mesh] {}", one_line(&notice.summary()));
    let mut builder = Message::builder()
        .from(from.clone())
        .subject(subject)
        .header(ContentType::TEXT_PLAIN);
    for address in to {
        builder = builder.to(address.clone());
    }
    builder
        .body(body(notice))
        .map_err(|e| format!("cannot make the mail: {e}"))
}

/// The mail's text.
fn body(notice: &Notice) -> String {
    let opening = match notice.event {
        Event::Waiting => format!("{}.", notice.summary()),
        Event::Escalated { after } => format!(
            "{}'s {} has waited {} and still waits for {}.",
            notice.member,
            notice.kind,
            humantime::format_duration(after),
            if notice.owners.is_empty() {
                "a review".to_owned()
            } else {
                notice.owners.join(", ")
            }
        ),
    };
    let mut text = format!("{opening}\n\n  {}\n\n", one_line(&notice.title));
    let mut line = |name: &str, value: String| {
        if !value.is_empty() {
            text.push_str(&format!("{name:<11}{value}\n"));
        }
    };
    line("Member:", notice.member.clone());
    line("Kind:", notice.kind.clone());
    line("Waits for:", notice.waits_for.join(", "));
    line("Paths:", notice.paths.join(", "));
    line("Request:", notice.request_id.clone());
    text.push_str(&format!(
        "\nReview it in the console:\n{}\n\n\
         This mail approves nothing and answers to no reply: sign in to decide.\n",
        notice.url
    ));
    text
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
