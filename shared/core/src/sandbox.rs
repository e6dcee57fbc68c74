//! How a teammate confines the commands it runs, as it says at join: what
//! the lead shows beside the member, and what a lead that requires a
//! sandbox checks before it grants commands.

use std::fmt;

use crate::error::FieldError;
use crate::words::{value_of, word_of};

/// The longest `detail` kept.
pub const DETAIL_MAX: usize = 1024;

/// What confines a teammate's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Landlock and a seccomp filter.
    Landlock,
    /// bubblewrap.
    Bwrap,
    /// Nothing: unconfined, asked for by name.
    None,
    /// No sandbox works where it runs, so it offers no commands at all.
    Unavailable,
}

/// One thing a sandbox confines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Confine {
    /// Reads reach only the workspace and the system's trees.
    Reads,
    /// Writes reach only what the grant names.
    Writes,
    /// No network.
    Network,
    /// No signal reaches a process outside its own.
    Signals,
    /// Nothing a command starts outlives it.
    Processes,
}

const KINDS: [(Kind, &str); 4] = [
    (Kind::Landlock, "landlock"),
    (Kind::Bwrap, "bwrap"),
    (Kind::None, "none"),
    (Kind::Unavailable, "unavailable"),
];

const CONFINES: [(Confine, &str); 5] = [
    (Confine::Reads, "reads"),
    (Confine::Writes, "writes"),
    (Confine::Network, "network"),
    (Confine::Signals, "signals"),
    (Confine::Processes, "processes"),
];

impl Kind {
    /// As the wire and the store spell it.
    pub fn as_str(self) -> &'static str {
        word_of(&KINDS, self)
    }

    fn parse(word: &str) -> Option<Self> {
        value_of(&KINDS, word)
    }
}

impl Confine {
    /// As the wire and the store spell it.
    pub fn as_str(self) -> &'static str {
        word_of(&CONFINES, self)
    }

    fn parse(word: &str) -> Option<Self> {
        value_of(&CONFINES, word)
    }
}

/// A teammate's sandbox, as it reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// What confines its commands.
    pub kind: Kind,
    /// What that confines, in a fixed order, each once.
    pub confines: Vec<Confine>,
    /// For people: what it is made of, or why there is none.
    pub detail: String,
}

impl Sandbox {
    /// The report of a `JoinRequest.sandbox` (`field`), checked: a known
    /// kind, known words each once, a detail within [`DETAIL_MAX`].
    pub fn parse(
        field: &str,
        kind: &str,
        confines: &[String],
        detail: &str,
    ) -> Result<Self, FieldError> {
        let kind = Kind::parse(kind).ok_or_else(|| {
            FieldError::new(
                format!("{field}.kind"),
                format!("{kind:?} is not landlock, bwrap, none or unavailable"),
            )
        })?;
        let mut parsed = Vec::with_capacity(confines.len());
        for (i, word) in confines.iter().enumerate() {
            let confine = Confine::parse(word).ok_or_else(|| {
                FieldError::new(
                    format!("{field}.confines[{i}]"),
                    format!("{word:?} is not reads, writes, network, signals or processes"),
                )
            })?;
            if parsed.contains(&confine) {
                return Err(FieldError::new(
                    format!("{field}.confines[{i}]"),
                    format!("{word:?} is named twice"),
                ));
            }
            parsed.push(confine);
        }
        parsed.sort();
        crate::limits::check(&format!("{field}.detail"), detail, DETAIL_MAX)?;
        Ok(Self {
            kind,
            confines: parsed,
            detail: detail.to_owned(),
        })
    }

    /// Whether its commands run unconfined.
    pub fn unconfined(&self) -> bool {
        self.kind == Kind::None
    }

    /// As the store keeps it: `kind`, the confines comma-separated, and the
    /// detail, separated by newlines.
    pub fn encode(&self) -> String {
        let confines: Vec<&str> = self.confines.iter().map(|c| c.as_str()).collect();
        format!(
            "{}\n{}\n{}",
            self.kind.as_str(),
            confines.join(","),
            self.detail
        )
    }

    /// What [`Sandbox::encode`] made; `None` for an empty or unknown text.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '\n');
        let kind = Kind::parse(parts.next()?)?;
        let confines = parts
            .next()
            .unwrap_or_default()
            .split(',')
            .filter_map(Confine::parse)
            .collect();
        Some(Self {
            kind,
            confines,
            detail: parts.next().unwrap_or_default().to_owned(),
        })
    }
}

impl fmt::Display for Sandbox {
    /// `landlock (reads, writes, network, signals, processes)`, or the
    /// kind alone when it confines nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.as_str())?;
        if !self.confines.is_empty() {
            let confines: Vec<&str> = self.confines.iter().map(|c| c.as_str()).collect();
            write!(f, " ({})", confines.join(", "))?;
        }
        Ok(())
    }
}

/// Why a member's commands count as unconfined to a lead that requires a
/// sandbox, if they do: it runs them with none, or it did not say.
pub fn unconfined_reason(name: &str, sandbox: Option<&Sandbox>) -> Option<String> {
    match sandbox {
        None => Some(format!(
            "{name} did not say how it confines its commands (no sandbox in its join)"
        )),
        Some(s) if s.unconfined() => Some(format!(
            "{name} runs its commands unconfined (--sandbox none); restart it with a sandbox"
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_report_parses_or_names_its_field() {
        let s = Sandbox::parse(
            "sandbox",
            "landlock",
            &words(&["writes", "reads", "network"]),
            "Landlock ABI 7",
        )
        .expect("valid");
        assert_eq!(
            s.confines,
            [Confine::Reads, Confine::Writes, Confine::Network]
        );
        assert_eq!(s.to_string(), "landlock (reads, writes, network)");
        assert_eq!(Sandbox::decode(&s.encode()), Some(s));

        let err = Sandbox::parse("sandbox", "docker", &[], "").expect_err("kind");
        assert_eq!(err.field, "sandbox.kind");
        let err =
            Sandbox::parse("sandbox", "bwrap", &words(&["reads", "disk"]), "").expect_err("word");
        assert_eq!(err.field, "sandbox.confines[1]");
        let err =
            Sandbox::parse("sandbox", "bwrap", &words(&["reads", "reads"]), "").expect_err("twice");
        assert_eq!(err.field, "sandbox.confines[1]");
        let long = "x".repeat(DETAIL_MAX + 1);
        let err = Sandbox::parse("sandbox", "bwrap", &[], &long).expect_err("long");
        assert_eq!(err.field, "sandbox.detail");
    }

    #[test]
    fn unconfined_is_none_or_unsaid() {
        let none = Sandbox::parse("s", "none", &words(&["processes"]), "").expect("valid");
        let landlock = Sandbox::parse("s", "landlock", &[], "").expect("valid");
        let unavailable = Sandbox::parse("s", "unavailable", &[], "").expect("valid");
        assert!(unconfined_reason("ann", Some(&none)).is_some());
        assert!(unconfined_reason("ann", None).is_some());
        assert!(unconfined_reason("ann", Some(&landlock)).is_none());
        assert!(unconfined_reason("ann", Some(&unavailable)).is_none());
        assert_eq!(Sandbox::decode(""), None);
    }
}
