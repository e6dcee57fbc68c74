//! What the lead reports: a [`Notice`] of one request that waits for people,
//! as plain data. A webhook receives it as JSON, exactly as it serializes
//! here (the [`Event`] flattened in: `"event": "waiting"`, or
//! `"event": "escalated"` with `"after": "30m"`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The request kinds a notice may be of, as the notify file's `kinds` names
/// them.
pub const KINDS: &[&str] = &["plan", "result", "amendment", "permission", "shutdown"];

/// Why a notice is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The request began waiting (or what it waits for changed).
    Waiting,
    /// The request still waits, `after` the time its route names.
    Escalated {
        /// The route's `after`.
        #[serde(with = "after_text")]
        after: Duration,
    },
}

impl Event {
    /// `waiting` or `escalated`: the `X-Mesh-Event` header's value.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Waiting => "waiting",
            Event::Escalated { .. } => "escalated",
        }
    }
}

/// One request that waits for a decision, as the lead reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// Waiting or escalated. [`crate::Notifier::waiting`] sets `Waiting`
    /// whatever it is handed; an escalation sets `Escalated`.
    #[serde(flatten)]
    pub event: Event,
    /// The request's id.
    pub request_id: String,
    /// One of [`KINDS`].
    pub kind: String,
    /// The member whose request it is.
    pub member: String,
    /// One line: what it asks.
    pub title: String,
    /// The paths it touches.
    pub paths: Vec<String>,
    /// Who is still owed a decision, as people read it (`"@dba: 1 of 2"`).
    pub waits_for: Vec<String>,
    /// The owners it waits for (`"@dba"`, `"carol"`): what routes match and
    /// mail is addressed to.
    pub owners: Vec<String>,
    /// The request's page in the console.
    pub url: String,
    /// When it began waiting, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
}

impl Notice {
    /// The same notice as `event`.
    pub(crate) fn as_event(&self, event: Event) -> Notice {
        Notice {
            event,
            ..self.clone()
        }
    }

    /// "alice's plan waits for @dba, carol", the line a mail's subject and a
    /// Slack message's fallback text are made of.
    pub fn summary(&self) -> String {
        let whom = if self.owners.is_empty() {
            "a review".to_owned()
        } else {
            self.owners.join(", ")
        };
        let line = format!("{}'s {} waits for {whom}", self.member, self.kind);
        match self.event {
            Event::Waiting => line,
            Event::Escalated { after } => format!(
                "still waiting after {}: {line}",
                humantime::format_duration(after)
            ),
        }
    }
}

/// `after` as humantime's text (`"30m"`, `"1h 30m"`).
mod after_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(after: &Duration, out: S) -> Result<S::Ok, S::Error> {
        out.collect_str(&humantime::format_duration(*after))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(from)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}
