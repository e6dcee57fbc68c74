//! `lead status`: each lead given (or the one in the state dir), asked
//! directly: its role, the lease's epoch and expiry, its store, and which
//! lead is active.

use std::time::Duration;

use shared::{
    auth::{now_unix_ms, BearerToken},
    leads::LEADER_KEY,
    pb::{self, operator_client::OperatorClient},
    transport::cause,
};
use tonic::{metadata::MetadataMap, Code};

use super::{token_and_urls, CliError, Target};
use crate::{
    leadership::{EPOCH_KEY, EXPIRES_KEY, ROLE_KEY},
    render,
};

/// How long one lead may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// What one lead said.
#[derive(Debug)]
struct Seen {
    lead: String,
    answer: Result<pb::Leadership, String>,
}

/// `lead status`: the table (or JSON); an error, after printing it, when no
/// lead among them is active.
pub async fn status(target: &Target, json: bool) -> Result<String, CliError> {
    let (token, urls) = token_and_urls(target)?;
    let token = BearerToken::new(&token)?;
    let mut seen = Vec::new();
    for url in &urls {
        seen.push(Seen {
            lead: url.clone(),
            answer: ask(target, url, token.clone()).await,
        });
    }
    let text = if json {
        render::json_text(&serde_json::Value::Array(
            seen.iter().map(as_json).collect(),
        ))
    } else {
        table(&seen, now_unix_ms())
    };
    let leading = seen.iter().any(|s| {
        s.answer.as_ref().is_ok_and(|l| {
            l.role == pb::LeadRole::Active as i32 || l.role == pb::LeadRole::Sole as i32
        })
    });
    if leading {
        return Ok(text);
    }
    print!("{text}");
    Err(CliError::Connect(
        "no lead among them is active (a standby takes over once the lease lapses)".into(),
    ))
}

/// Asks the lead at `url` what it is: its answer, or a standby's metadata
/// read as one, or why it could not say.
async fn ask(target: &Target, url: &str, token: BearerToken) -> Result<pb::Leadership, String> {
    let endpoint = target
        .tls
        .endpoint(url)
        .map_err(|e| e.to_string())?
        .connect_timeout(ASK_TIMEOUT)
        .timeout(ASK_TIMEOUT);
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| cause(&tonic::Status::from_error(Box::new(e))))?;
    let mut client = OperatorClient::with_interceptor(channel, token);
    match client.get_leadership(pb::GetLeadershipRequest {}).await {
        Ok(answer) => Ok(answer.into_inner()),
        Err(status) if status.code() == Code::Unavailable => {
            standby(status.metadata()).ok_or_else(|| cause(&status))
        }
        Err(status) if status.code() == Code::Unimplemented => {
            Err("it does not say (a lead older than `lead status`)".into())
        }
        Err(status) => Err(format!(
            "{}: {}",
            status.code().description(),
            cause(&status)
        )),
    }
}

/// A standby's answer, from its metadata.
fn standby(metadata: &MetadataMap) -> Option<pb::Leadership> {
    let get = |key: &str| metadata.get(key).and_then(|v| v.to_str().ok());
    if get(ROLE_KEY)? != "standby" {
        return None;
    }
    Some(pb::Leadership {
        role: pb::LeadRole::Standby as i32,
        epoch: get(EPOCH_KEY).and_then(|v| v.parse().ok()).unwrap_or(0),
        lease_expires_unix_ms: get(EXPIRES_KEY).and_then(|v| v.parse().ok()).unwrap_or(0),
        leader_url: get(LEADER_KEY).unwrap_or_default().to_owned(),
        ..Default::default()
    })
}

/// The role's word.
fn role(leadership: &pb::Leadership) -> &'static str {
    match pb::LeadRole::try_from(leadership.role) {
        Ok(pb::LeadRole::Sole) => "sole",
        Ok(pb::LeadRole::Active) => "active",
        Ok(pb::LeadRole::Standby) => "standby",
        _ => "unknown",
    }
}

/// When the lease expires, from `now` (Unix ms).
fn expiry(leadership: &pb::Leadership, now: i64) -> String {
    if leadership.role == pb::LeadRole::Sole as i32 {
        return "no lease (its store is its own)".into();
    }
    let at = leadership.lease_expires_unix_ms;
    if at == 0 {
        return "none held".into();
    }
    let left = (at - now) as f64 / 1000.0;
    if left >= 0.0 {
        format!("expires in {left:.1} s")
    } else {
        format!("expired {:.1} s ago", -left)
    }
}

/// The table: one row a lead, then who leads.
fn table(seen: &[Seen], now: i64) -> String {
    let mut rows = vec![vec![
        "LEAD".to_owned(),
        "ROLE".to_owned(),
        "EPOCH".to_owned(),
        "LEASE".to_owned(),
        "STORE".to_owned(),
    ]];
    let mut active = None;
    for s in seen {
        rows.push(match &s.answer {
            Ok(l) => {
                if role(l) != "standby" && active.is_none() {
                    active = Some(s.lead.clone());
                }
                vec![
                    s.lead.clone(),
                    role(l).to_owned(),
                    l.epoch.to_string(),
                    expiry(l, now),
                    if l.store.is_empty() {
                        "(a standby does not say)".to_owned()
                    } else {
                        l.store.clone()
                    },
                ]
            }
            Err(why) => vec![
                s.lead.clone(),
                "unreachable".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                why.clone(),
            ],
        });
    }
    let mut out = render::table(&rows);
    let named = seen
        .iter()
        .filter_map(|s| s.answer.as_ref().ok())
        .map(|l| l.leader_url.as_str())
        .find(|url| !url.is_empty());
    out.push_str(&match (active, named) {
        (Some(lead), _) => format!("active: {lead}\n"),
        (None, Some(url)) => format!("active: {url} (named by a standby; not among those asked)\n"),
        (None, None) => "active: none\n".to_owned(),
    });
    out
}

/// One lead as JSON.
fn as_json(seen: &Seen) -> serde_json::Value {
    match &seen.answer {
        Ok(l) => serde_json::json!({
            "lead": seen.lead,
            "role": role(l),
            "epoch": l.epoch,
            "lease_expires_unix_ms": l.lease_expires_unix_ms,
            "store": l.store,
            "leader_url": l.leader_url,
            "leader_console": l.leader_console,
        }),
        Err(why) => serde_json::json!({ "lead": seen.lead, "role": "unreachable", "error": why }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_each_role_and_who_leads() {
        let active = pb::Leadership {
            role: pb::LeadRole::Active as i32,
            epoch: 2,
            lease_expires_unix_ms: 10_500,
            store: "postgres://mesh@[db]:5432/mesh".into(),
            leader_url: "http://a".into(),
            ..Default::default()
        };
        let standby = pb::Leadership {
            role: pb::LeadRole::Standby as i32,
            epoch: 2,
            lease_expires_unix_ms: 10_500,
            leader_url: "http://a".into(),
            ..Default::default()
        };
        let seen = [
            Seen {
                lead: "http://a".into(),
                answer: Ok(active),
            },
            Seen {
                lead: "http://b".into(),
                answer: Ok(standby),
            },
            Seen {
                lead: "http://c".into(),
                answer: Err("connection refused".into()),
            },
        ];
        let out = table(&seen, 2_000);
        assert!(out.contains("http://a  active"), "{out}");
        assert!(out.contains("expires in 8.5 s"), "{out}");
        assert!(out.contains("http://b  standby"), "{out}");
        assert!(out.contains("unreachable"), "{out}");
        assert!(out.ends_with("active: http://a\n"), "{out}");
    }
}
