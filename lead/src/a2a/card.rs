//! The agent card (`/.well-known/agent-card.json`, on the console's port,
//! public as A2A clients fetch it): the team's name, its gRPC interface
//! (A2A 1.0), what it can do (a skill for handing it a task, and one for
//! each role its members have, unless `--a2a-card FILE` names the skills),
//! and the bearer scheme its callers authenticate with (an operator token).

use std::sync::Arc;

use axum::{extract::State, http::HeaderMap, routing::get, Router};
use mesh_core::op::{ListTeam, PageAsk};
use serde_json::{json, Map, Value};

use crate::{
    error::HubError,
    hub::{Claim, HubHandle},
    paging::MAX_PAGE_SIZE,
};

/// What `--a2a-card FILE` may say of the team; the lead says the rest
/// (its interface, capabilities and security), which it alone knows.
const OWN_FIELDS: [&str; 8] = [
    "name",
    "description",
    "provider",
    "documentationUrl",
    "iconUrl",
    "skills",
    "defaultInputModes",
    "defaultOutputModes",
];

/// What the card is made from, besides the team as it stands.
#[derive(Debug, Clone, Default)]
pub(crate) struct CardBase {
    /// `http://HOST:PORT` or `https://...` (A2A names a gRPC interface by
    /// `HOST:PORT`).
    pub(crate) lead_url: String,
    /// `--a2a-open`: no token is required.
    pub(crate) open: bool,
    /// `--a2a-card FILE`: the team's own words.
    pub(crate) own: Map<String, Value>,
    /// `--a2a-push-allow`: push notifications are offered.
    pub(crate) push: bool,
}

/// What the card's route holds.
#[derive(Clone)]
struct CardRoute {
    base: Arc<CardBase>,
    served: Arc<Served>,
    hub: HubHandle,
    /// The console's port is on TLS.
    tls: bool,
}

/// The card's route, `/.well-known/agent-card.json`: public, as A2A
/// clients fetch it before they authenticate; its skills are the roles of
/// the team as it stands.
pub(crate) fn router(base: Arc<CardBase>, hub: HubHandle, tls: bool) -> Router {
    let route = CardRoute {
        base,
        served: Arc::default(),
        hub,
        tls,
    };
    Router::new()
        .route("/.well-known/agent-card.json", get(answer_card))
        .with_state(route)
}

async fn answer_card(
    State(route): State<CardRoute>,
    headers: HeaderMap,
) -> axum::response::Response {
    let roles = roles(&route.hub).await.unwrap_or_default();
    // The JSON bindings are where the card was fetched from.
    let here = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|host| {
            let scheme = if route.tls { "https" } else { "http" };
            format!("{scheme}://{host}")
        });
    let body = card(&route.base, &roles, here.as_deref()).to_string();
    route.served.answer(body, &headers)
}

/// The roles of the members not terminated (the card's skills), page
/// after page.
async fn roles(hub: &HubHandle) -> Result<Vec<String>, HubError> {
    let mut roles = Vec::new();
    let mut page = Some(PageAsk {
        after: None,
        size: MAX_PAGE_SIZE,
    });
    while let Some(ask) = page {
        let listed = hub
            .operate(Claim::operator(), Ok(ListTeam { page: ask }))
            .await?
            .members;
        page = listed
            .entries
            .last()
            .filter(|_| listed.more)
            .map(|(last, _)| PageAsk {
                after: Some(*last),
                size: MAX_PAGE_SIZE,
            });
        roles.extend(
            listed
                .entries
                .into_iter()
                .filter(|(_, m)| !m.member.terminated())
                .map(|(_, m)| m.member.role),
        );
    }
    Ok(roles)
}

/// The card as served: its validators, so that a client that has it asks
/// again for nothing (`If-None-Match`, `If-Modified-Since`: 304).
#[derive(Debug, Default)]
pub(crate) struct Served {
    /// The last card's entity tag, and when the card first read so.
    last: std::sync::Mutex<Option<(String, std::time::SystemTime)>>,
}

impl Served {
    /// The card `body` as the answer to a request with `headers`: with
    /// `ETag` (a digest of the body), `Last-Modified` (when the card last
    /// changed, as this lead saw it) and `Cache-Control`; 304 and no body
    /// when the client's copy is this one.
    pub(crate) fn answer(
        &self,
        body: String,
        headers: &axum::http::HeaderMap,
    ) -> axum::response::Response {
        use axum::{
            http::{header, StatusCode},
            response::IntoResponse as _,
        };
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(body.as_bytes());
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let etag = format!("\"{hex}\"");
        let modified = {
            let mut last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match &*last {
                Some((tag, at)) if *tag == etag => *at,
                _ => {
                    let now = std::time::SystemTime::now();
                    *last = Some((etag.clone(), now));
                    now
                }
            }
        };
        let modified_text = httpdate::fmt_http_date(modified);
        let header_text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let unchanged = match header_text(header::IF_NONE_MATCH) {
            Some(tags) => tags
                .split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag),
            None => header_text(header::IF_MODIFIED_SINCE)
                .and_then(|since| httpdate::parse_http_date(since).ok())
                .zip(httpdate::parse_http_date(&modified_text).ok())
                .is_some_and(|(since, modified)| modified <= since),
        };
        let validators = [
            (header::ETAG, etag),
            (header::LAST_MODIFIED, modified_text),
            (header::CACHE_CONTROL, "max-age=60".to_owned()),
        ];
        if unchanged {
            return (StatusCode::NOT_MODIFIED, validators).into_response();
        }
        (
            validators,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// `--a2a-card FILE`'s text, checked: a JSON object of [`OWN_FIELDS`]
/// alone (an A2A card admits no other field), `skills` a list of objects
/// each with an id, a name, a description and tags.
pub(crate) fn own_fields(text: &str) -> Result<Map<String, Value>, String> {
    let Value::Object(own) = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?
    else {
        return Err("not a JSON object".into());
    };
    if let Some(other) = own.keys().find(|k| !OWN_FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "{other:?} is not a field it may set (only {}; the lead says its interface, \
             capabilities and security itself)",
            OWN_FIELDS.join(", ")
        ));
    }
    if let Some(skills) = own.get("skills") {
        let Some(skills) = skills.as_array() else {
            return Err("skills: not a list".into());
        };
        for (i, skill) in skills.iter().enumerate() {
            for field in ["id", "name", "description"] {
                if !skill.get(field).is_some_and(Value::is_string) {
                    return Err(format!("skills[{i}].{field}: a string is required"));
                }
            }
            if !skill.get("tags").is_some_and(Value::is_array) {
                return Err(format!("skills[{i}].tags: a list is required"));
            }
        }
    }
    Ok(own)
}

/// The card of the lead `base` says, whose members have `roles`, with the
/// JSON-RPC and HTTP+JSON bindings on the console at `console` (its URL,
/// `scheme://host:port`) beside gRPC.
pub(crate) fn card(base: &CardBase, roles: &[String], console: Option<&str>) -> Value {
    let address = base
        .lead_url
        .split_once("://")
        .map_or(base.lead_url.as_str(), |(_, rest)| rest)
        .trim_end_matches('/');
    let mut skills = vec![json!({
        "id": "team-task",
        "name": "Hand the team a task",
        "description": "The first line of the message is the task's subject, the rest its \
            description; a data part may name files, review (plan, result or both) and \
            blocked_by (task ids). Its plan comes back as INPUT_REQUIRED.",
        "tags": ["planning", "coding", "review"],
    })];
    let mut seen = std::collections::BTreeSet::new();
    for role in roles.iter().map(|r| r.trim()).filter(|r| !r.is_empty()) {
        if seen.insert(role) && seen.len() <= MOST_ROLE_SKILLS {
            skills.push(json!({
                "id": format!("role-{role}"),
                "name": role,
                "description": format!("A member of the team works as {role}."),
                "tags": ["role", role],
            }));
        }
    }
    let mut interfaces = vec![json!({
        "url": address,
        "protocolBinding": "GRPC",
        "protocolVersion": super::VERSION,
    })];
    if let Some(console) = console {
        for (path, binding) in [
            (super::jsonrpc::PATH, "JSONRPC"),
            (super::rest::PATH, "HTTP+JSON"),
        ] {
            interfaces.push(json!({
                "url": format!("{console}{path}"),
                "protocolBinding": binding,
                "protocolVersion": super::VERSION,
            }));
        }
    }
    let mut card = json!({
        "name": "mesh team",
        "description": "A team of agents coordinated by a mesh lead: a task handed in is \
            planned by a teammate, its plan reviewed (INPUT_REQUIRED: approve or reject it \
            with a message on the task), then done and, with a repository, landed.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": interfaces,
        "capabilities": {
            "streaming": true,
            "pushNotifications": base.push,
            "extendedAgentCard": false,
        },
        "securitySchemes": {
            "bearer": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "bearerFormat": "opaque",
                    "description": "a mesh operator token (lead serve --operator-token NAME=TOKEN)",
                }
            }
        },
        "securityRequirements": if base.open {
            json!([])
        } else {
            json!([{ "schemes": { "bearer": { "list": [] } } }])
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    });
    if let Value::Object(card) = &mut card {
        card.extend(base.own.clone());
    }
    card
}

/// At most this many roles become skills (a team of many roles lists the
/// first, by name).
const MOST_ROLE_SKILLS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn base(url: &str, open: bool) -> CardBase {
        CardBase {
            lead_url: url.into(),
            open,
            own: Map::new(),
            push: false,
        }
    }

    #[test]
    fn the_card_names_the_grpc_interface_without_a_scheme() {
        let card = card(
            &base("https://lead.example:7447", false),
            &[],
            Some("https://lead.example:8080"),
        );
        let interface = &card["supportedInterfaces"][0];
        assert_eq!(interface["url"], "lead.example:7447");
        assert_eq!(interface["protocolBinding"], "GRPC");
        assert_eq!(interface["protocolVersion"], "1.0");
        let beside = &card["supportedInterfaces"][1];
        assert_eq!(beside["url"], "https://lead.example:8080/a2a");
        assert_eq!(beside["protocolBinding"], "JSONRPC");
        let rest = &card["supportedInterfaces"][2];
        assert_eq!(rest["url"], "https://lead.example:8080/a2a/rest");
        assert_eq!(rest["protocolBinding"], "HTTP+JSON");
        for field in ["name", "description", "version", "capabilities", "skills"] {
            assert!(card.get(field).is_some(), "{field}");
        }
        assert_eq!(
            card["securityRequirements"].as_array().map(Vec::len),
            Some(1)
        );
        let open = super::card(&base("http://127.0.0.1:7447", true), &[], None);
        assert_eq!(open["securityRequirements"], json!([]));
    }

    #[test]
    fn each_role_is_a_skill_unless_the_file_names_the_skills() {
        let roles = [
            "writer".to_owned(),
            "reviewer".into(),
            "writer".into(),
            " ".into(),
        ];
        let card = card(&base("http://h:1", false), &roles, None);
        let ids: Vec<&str> = card["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .filter_map(|s| s["id"].as_str())
            .collect();
        assert_eq!(ids, ["team-task", "role-writer", "role-reviewer"]);
        let own = own_fields(
            r#"{"name": "docs team", "skills": [{"id": "docs", "name": "Docs",
                "description": "writes docs", "tags": ["docs"]}]}"#,
        )
        .expect("fields");
        let card = super::card(
            &CardBase {
                own,
                ..base("http://h:1", false)
            },
            &roles,
            None,
        );
        assert_eq!(card["name"], "docs team");
        assert_eq!(card["skills"][0]["id"], "docs");
        assert_eq!(card["skills"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            card["supportedInterfaces"][0]["url"], "h:1",
            "the lead's own"
        );
        for (text, names) in [
            ("[]", "object"),
            (r#"{"url": "x"}"#, "\"url\""),
            (r#"{"skills": [{"id": "a"}]}"#, "skills[0].name"),
            (
                r#"{"skills": [{"id": "a", "name": "b", "description": "c"}]}"#,
                "skills[0].tags",
            ),
        ] {
            let refused = own_fields(text).expect_err(text);
            assert!(refused.contains(names), "{text}: {refused}");
        }
    }
}
