//! What `lead serve` runs with: one [`Config`], built from the command line
//! by `main.rs` (or by the demo) and passed to [`crate::run`].

use std::time::Duration;

use crate::{callers::Tokens, connections::ConnLimits, hub::HubConfig, store::Storage};

/// Everything the lead serves with but its listeners and when to stop.
#[derive(Debug)]
pub struct Config {
    /// How the hub behaves: approval, limits, spawning.
    pub hub: HubConfig,
    /// Where state is kept, opened (so that a store that cannot open stops
    /// the lead before it says where it listens).
    pub store: Storage,
    /// The join and operator tokens.
    pub tokens: Tokens,
    /// HTTP/2 keepalive pings.
    pub keepalive: Keepalive,
    /// Connection caps and timeouts.
    pub connections: ConnLimits,
    /// What the lead says of itself (`GetLeadership`).
    pub standing: tokio::sync::watch::Receiver<crate::leadership::Standing>,
    /// `--a2a-card FILE`: what the agent card says of the team in its own
    /// words (checked by `a2a::card::own_fields`); empty: the lead's.
    pub a2a_card: serde_json::Map<String, serde_json::Value>,
    /// `--a2a-push-allow HOST`: the hosts A2A push notifications may be
    /// posted to; none: push notifications are not offered.
    pub a2a_push_allow: Vec<String>,
    /// How the console signs people in at the identity provider
    /// (`--oidc-issuer` with the console on); none: tokens only.
    pub console_sign_in: Option<crate::SignIn>,
}

/// How often the server pings an idle connection, and how long it waits for
/// the answer: a teammate whose host or network vanished (no FIN, no RST) is
/// DISCONNECTED within their sum. A killed process on a live host is noticed
/// at once, from the closed socket.
#[derive(Debug, Clone, Copy)]
pub struct Keepalive {
    /// Between pings.
    pub interval: Duration,
    /// For the answer.
    pub timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(3),
        }
    }
}
