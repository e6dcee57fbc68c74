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

/// `message` (of the A2A type named `name`, e.g. `StreamResponse`) in
/// ProtoJSON, as A2A's JSON bindings and its push notifications carry it:
/// lowerCamelCase names, enums by name, bytes in base64, defaults left out.
/// `None` if `name` is no A2A message.
pub fn to_json<M: prost::Message>(message: &M, name: &str) -> Option<serde_json::Value> {
    use std::sync::OnceLock;
    static POOL: OnceLock<Option<prost_reflect::DescriptorPool>> = OnceLock::new();
    let pool = POOL
        .get_or_init(|| prost_reflect::DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).ok())
        .as_ref()?;
    let descriptor = pool.get_message_by_name(&format!("lf.a2a.v1.{name}"))?;
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
    }
}
