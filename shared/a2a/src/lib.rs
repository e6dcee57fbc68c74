//! A2A v1.0 (`lf.a2a.v1`), the agent ecosystem's protocol for one agent
//! handing another work: the messages and the `A2AService` server trait,
//! generated from the specification's `a2a.proto` (v1.0.1, on the wire the
//! same as v1.0.0). The lead serves it (`lead/src/a2a`).

pub mod pb {
    //! Generated from `proto/lf/a2a/v1/a2a.proto`.
    #![allow(
        missing_docs,
        unreachable_pub,
        missing_debug_implementations,
        clippy::all
    )]
    tonic::include_proto!("lf.a2a.v1");

    /// The encoded file descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));
}

/// The A2A messages' descriptors.
fn pool() -> Option<&'static prost_reflect::DescriptorPool> {
    use std::sync::OnceLock;
    static POOL: OnceLock<Option<prost_reflect::DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| prost_reflect::DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).ok())
        .as_ref()
}

/// The A2A message `M` (named `name`, e.g. `SendMessageRequest`) that
/// `json` says in ProtoJSON (field names in lowerCamelCase or as the proto
/// names them; a field it does not know is ignored); what is wrong with it
/// otherwise, naming the field.
pub fn from_json<M: prost::Message + Default>(
    json: &serde_json::Value,
    name: &str,
) -> Result<M, String> {
    let descriptor = pool()
        .and_then(|pool| pool.get_message_by_name(&format!("lf.a2a.v1.{name}")))
        .ok_or_else(|| format!("{name} is no A2A message"))?;
    // Unknown fields are ignored, as a ProtoJSON reader should: a newer
    // client's additions do not break an older agent.
    let options = prost_reflect::DeserializeOptions::new().deny_unknown_fields(false);
    // The path of what was wrong, to name the field (`message.parts[0]...`).
    let mut track = serde_path_to_error::Track::new();
    let dynamic = prost_reflect::DynamicMessage::deserialize_with_options(
        descriptor,
        serde_path_to_error::Deserializer::new(json, &mut track),
        &options,
    )
    .map_err(|e| match track.path().to_string().as_str() {
        "" | "." => e.to_string(),
        path => format!("{path}: {e}"),
    })?;
    M::decode(prost::Message::encode_to_vec(&dynamic).as_slice()).map_err(|e| e.to_string())
}

/// `message` (of the A2A type named `name`, e.g. `StreamResponse`) in
/// ProtoJSON, as A2A's JSON bindings and its push notifications carry it:
/// lowerCamelCase names, enums by name, bytes in base64, defaults left out.
/// `None` if `name` is no A2A message.
pub fn to_json<M: prost::Message>(message: &M, name: &str) -> Option<serde_json::Value> {
    let descriptor = pool()?.get_message_by_name(&format!("lf.a2a.v1.{name}"))?;
    let dynamic =
        prost_reflect::DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
            .ok()?;
    serde_json::to_value(&dynamic).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stream_response_is_protojson() {
        let update = super::pb::StreamResponse {
            payload: Some(super::pb::stream_response::Payload::StatusUpdate(
                super::pb::TaskStatusUpdateEvent {
                    task_id: "t1".into(),
                    context_id: "c1".into(),
                    status: Some(super::pb::TaskStatus {
                        state: super::pb::TaskState::InputRequired as i32,
                        ..Default::default()
                    }),
                    metadata: None,
                },
            )),
        };
        let json = super::to_json(&update, "StreamResponse").expect("json");
        assert_eq!(
            json,
            serde_json::json!({"statusUpdate": {"taskId": "t1", "contextId": "c1",
                "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
        );
        assert!(super::to_json(&update, "NoSuchThing").is_none());
        let back: super::pb::StreamResponse =
            super::from_json(&json, "StreamResponse").expect("back");
        assert_eq!(back, update);
        // The proto's own names are taken too; an unknown field is
        // ignored, a known one of the wrong type named.
        let ask: super::pb::GetTaskRequest = super::from_json(
            &serde_json::json!({"id": "t1", "history_length": 2, "tckExtra": {"x": 1}}),
            "GetTaskRequest",
        )
        .expect("snake case, an unknown field ignored");
        assert_eq!((ask.id.as_str(), ask.history_length), ("t1", Some(2)));
        let wrong = super::from_json::<super::pb::GetTaskRequest>(
            &serde_json::json!({"id": "t1", "historyLength": "many"}),
            "GetTaskRequest",
        );
        let wrong = wrong.expect_err("a string is no number");
        assert!(
            wrong.contains("historyLength") || wrong.contains("history_length"),
            "{wrong}"
        );
    }
}
