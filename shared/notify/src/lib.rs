//! Notifications out of the lead: telling people that a review waits for
//! them, by webhook, Slack or mail, and telling them again (escalating)
//! when it still waits after a while.
//!
//! ```no_run
//! # async fn lead() -> Result<(), mesh_notify::ConfigError> {
//! use mesh_notify::{Config, Event, Notice, Notifier};
//! let notifier = Notifier::start(Config::load("notify.toml")?);
//! notifier.waiting(Notice {
//!     event: Event::Waiting,
//!     request_id: "r-42".into(),
//!     kind: "plan".into(),
//!     member: "alice".into(),
//!     title: "Add an index to orders".into(),
//!     paths: vec!["db/migrations/0042.sql".into()],
//!     waits_for: vec!["@dba: 1 of 2".into()],
//!     owners: vec!["@dba".into()],
//!     url: "https://lead.example.com/console/requests/r-42".into(),
//!     at_unix_ms: 1_700_000_000_000,
//! });
//! // ... once it is decided, expired or withdrawn:
//! notifier.settled("r-42");
//! # Ok(()) }
//! ```
//!
//! [`Notifier::waiting`] never waits: a bounded queue ([`QUEUE`] notices)
//! that drops and counts when full; one worker matches routes and hands
//! each delivery to its sink's own bounded queue ([`SINK_QUEUE`]) and task,
//! so a slow sink holds up no other. A notification never approves
//! anything: it links to the request's page in the console, where one
//! signs in to decide.
//!
//! # The notify file
//!
//! TOML; every key below is all there is (an unknown key is an error, as
//! is a route naming a sink that does not exist), and an error names the
//! sink, route or key and its line.
//!
//! ```toml
//! [[sink]]
//! name = "hooks"
//! kind = "webhook"
//! url = "https://example.com/mesh"
//! secret_env = "MESH_HOOK_SECRET"   # wins when set and not empty
//! secret = "a fallback secret"      # otherwise this; neither: unsigned
//! timeout = "10s"                   # each attempt's; any sink may say it
//!
//! [[sink]]
//! name = "slack"
//! kind = "slack"
//! url = "https://hooks.slack.com/services/T000/B000/XXXX"
//!
//! [[sink]]
//! name = "mail"
//! kind = "smtp"
//! server = "smtp.example.com:587"   # the port defaults by tls: 587, 465, 25
//! from = "mesh <mesh@example.com>"
//! tls = "starttls"                  # the default; "tls" (SMTPS); "none" on loopback only
//! username = "mesh"                 # with password_env, or neither
//! password_env = "MESH_SMTP_PASSWORD"
//! to = ["reviews@example.com"]      # optional: every mail goes here too
//!
//! [people]                          # the owners' addresses, for mail
//! "@dba" = ["dba@example.com", "Dana <dana@example.com>"]
//! carol = "carol@example.com"
//!
//! [[route]]
//! kinds = ["plan", "permission"]    # optional: every kind when absent
//! paths = ["db/**"]                 # optional: globs, one of the request's paths matching
//! owners = ["@dba"]                 # optional: the request waits for one of these
//! sinks = ["hooks", "mail"]
//!
//! [[route]]
//! sinks = ["slack"]
//! after = "30m"                     # escalation: only if it still waits then
//! ```
//!
//! - A notice goes to every route it matches (`kinds` and `paths` and
//!   `owners`; a key left out matches anything). Routes without `after`
//!   send at once, each sink once however many of them name it; a route
//!   with `after` (1 s to 30 days, in humantime's words) arms a timer when
//!   the request first waits on it, and sends the request's latest notice
//!   as `escalated` if, when it fires, the request still waits and that
//!   notice still matches. [`Notifier::settled`] stops the timers.
//! - `http://` is accepted only for loopback, as is `tls = "none"`:
//!   nothing leaves the machine in the clear.
//! - Secrets are read from the environment when the file is read:
//!   `secret_env` wins over `secret` when the variable is set and not
//!   empty; a `secret_env` or `password_env` naming an unset variable (and
//!   no `secret` to fall back on) is an error.
//!
//! # What each sink sends
//!
//! - **webhook**: `POST` of the [`Notice`] as JSON (`"event": "waiting"` or
//!   `"escalated"` with `"after": "30m"`, then its fields), with
//!   `Content-Type: application/json`, `X-Mesh-Event`, `X-Mesh-Delivery`
//!   (a UUID, the same on every attempt of one delivery) and, with a
//!   secret, `X-Mesh-Signature-256: sha256=<hex>` as GitHub signs its
//!   hooks ([`signature_256`]).
//! - **slack**: an incoming-webhook message in Block Kit: a header with
//!   the title, the member, the kind and whom it waits for, and a button
//!   "Review in the console" to the request's page.
//! - **smtp**: a plain-text mail to the addresses of the notice's owners
//!   (`[people]`; a group to all of its addresses) and the sink's `to`,
//!   subject `[mesh] alice's plan waits for @dba`, with the console link.
//!
//! Webhook and Slack deliveries are tried again after a connection error,
//! a timeout, a 5xx or a 429, at most [`TRIES`] times, waiting 0.5 s, 1 s,
//! 2 s and 4 s (or what `Retry-After` says, up to [`MOST_WAIT`]); any
//! other 4xx is not tried again. A mail is tried again after a transient
//! (4xx) or connection error, not after a permanent (5xx) one.

mod config;
mod doc;
mod escalation;
mod http;
mod notice;
mod outlet;
mod people;
mod queue;
mod retry;
mod route;
mod sink;
mod slack;
mod smtp;
mod stats;
mod webhook;

#[cfg(test)]
mod tests;

pub use self::{
    config::{Config, ConfigError},
    escalation::MOST_OPEN,
    notice::{Event, Notice, KINDS},
    outlet::SINK_QUEUE,
    queue::{Notifier, QUEUE},
    retry::{FIRST_WAIT, MOST_WAIT, TRIES},
    route::{LEAST_AFTER, MOST_AFTER},
    sink::DEFAULT_TIMEOUT,
    stats::{SinkStats, Stats},
    webhook::{signature_256, DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER},
};
