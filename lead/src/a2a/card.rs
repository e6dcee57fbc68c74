//! The agent card (`/.well-known/agent-card.json`, on the console's port,
//! public as A2A clients fetch it): the team's name, its gRPC interface
//! (A2A 1.0), what it can do, and the bearer scheme its callers
//! authenticate with (an operator token).

use serde_json::{json, Value};

/// The card of a lead whose clients reach it at `lead_url`
/// (`http://HOST:PORT` or `https://...`; A2A names a gRPC interface by
/// `HOST:PORT`); `open` (`--a2a-open`): no token is required.
pub(crate) fn card(lead_url: &str, open: bool) -> Value {
    let address = lead_url
        .split_once("://")
        .map_or(lead_url, |(_, rest)| rest)
        .trim_end_matches('/');
    json!({
        "name": "mesh team",
        "description": "A team of agents coordinated by a mesh lead: a task handed in is \
            planned by a teammate, its plan reviewed (INPUT_REQUIRED: approve or reject it \
            with a message on the task), then done and, with a repository, landed.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": address,
            "protocolBinding": "GRPC",
            "protocolVersion": super::VERSION,
        }],
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
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
        "securityRequirements": if open {
            json!([])
        } else {
            json!([{ "schemes": { "bearer": { "list": [] } } }])
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "team-task",
            "name": "Hand the team a task",
            "description": "The first line of the message is the task's subject, the rest its \
                description; a data part may name files, review (plan, result or both) and \
                blocked_by (task ids). Its plan comes back as INPUT_REQUIRED.",
            "tags": ["planning", "coding", "review"],
        }],
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_card_names_the_grpc_interface_without_a_scheme() {
        let card = super::card("https://lead.example:7447", false);
        let interface = &card["supportedInterfaces"][0];
        assert_eq!(interface["url"], "lead.example:7447");
        assert_eq!(interface["protocolBinding"], "GRPC");
        assert_eq!(interface["protocolVersion"], "1.0");
        for field in ["name", "description", "version", "capabilities", "skills"] {
            assert!(card.get(field).is_some(), "{field}");
        }
        assert_eq!(
            card["securityRequirements"].as_array().map(Vec::len),
            Some(1)
        );
        let open = super::card("http://127.0.0.1:7447", true);
        assert_eq!(open["securityRequirements"], serde_json::json!([]));
    }
}
