//! The one place the generated `mesh.v1` types meet the core's: every
//! conversion between a protobuf message or enum and a `mesh-core` type,
//! by family (requests and plans, grants, tasks, members and usage,
//! messages, events). `to_pb` goes to the wire; `TryFrom` (or `From`)
//! comes from it and refuses what the core cannot hold (an unknown enum
//! number, a malformed grant).
//!
//! `to_pb` is a trait, [`ToPb`], because the types live in `mesh-core`,
//! which knows nothing of protobuf: bring it in with `use shared::wire::*;`.
//! The way back needs no trait of its own: the generated types are this
//! crate's, so `impl TryFrom<pb::Task> for Task` is allowed here. An enum
//! comes off the wire as a number: `pb::RequestType::try_from(n)` reads it,
//! and `.and_then(Kind::try_from)` makes it the core's, UNSPECIFIED being
//! no value (an `UnknownEnumValue` of 0) like a number this build does not
//! know.

mod events;
mod grants;
mod members;
mod messages;
mod requests;
mod tasks;

pub use events::{event, event_bytes};
pub use grants::mode_from_pb;
pub use members::member_usage;
pub use messages::{file_change_to_pb, message_bytes};
pub use requests::{permission_response, plan_response, request_without_payload};
pub use tasks::{output_from_pb, review_from_pb, review_to_pb};

/// A core value's wire form.
pub trait ToPb {
    /// The generated type.
    type Pb;
    /// To the wire.
    fn to_pb(&self) -> Self::Pb;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{pb, plan::Plan};
    use mesh_core::{
        effect::{Ended, Message},
        grant::{Grant, Mode},
        names::RequestId,
        protocol::{Kind, Opening, Status, Tracker},
        tasks::{NewTask, Task, TaskBoard},
    };
    use prost::UnknownEnumValue;

    #[test]
    fn a_texts_size_is_its_encoded_size() {
        for n in [0, 1, 5, 126, 127, 128, 16_383, 16_384, 70_000] {
            let text = Message::Text {
                content: "x".repeat(n),
            };
            assert_eq!(
                message_bytes(&text),
                text.to_pb().encoded_len(),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn every_message_comes_back_from_the_wire_as_it_went() {
        let id = RequestId::existing("id", "0b6f3c1e-1d2a-4f5b-8c9d-0e1f2a3b4c5d").expect("id");
        let task = TaskBoard::new(10)
            .create(
                "t1".into(),
                NewTask {
                    subject: "s".into(),
                    ..NewTask::default()
                },
                1,
            )
            .expect("task");
        let messages = [
            Message::Text {
                content: "hi".into(),
            },
            Message::PlanApprovalRequest {
                request_id: id.clone(),
                plan: Plan {
                    summary: "s".into(),
                    files: vec!["a.rs".into()],
                    ..Plan::default()
                },
                supersedes: String::new(),
            },
            Message::PlanDecided {
                request_id: id.clone(),
                approve: true,
                feedback: "ok".into(),
                grant: Some(
                    Grant::checked("grant", Mode::AcceptEdits, vec!["src/**".into()], None)
                        .expect("grant"),
                ),
            },
            Message::PlanDecided {
                request_id: id.clone(),
                approve: false,
                feedback: "no".into(),
                grant: None,
            },
            Message::PermissionRequest {
                request_id: id.clone(),
                tool: "write_file".into(),
                args_json: "{}".into(),
            },
            Message::PermissionDecided {
                request_id: id.clone(),
                approve: true,
                feedback: String::new(),
            },
            Message::ShutdownRequest {
                request_id: id.clone(),
                target: "alice".into(),
                reason: "r".into(),
                deadline_unix_ms: 9,
            },
            Message::ShutdownResponse {
                request_id: id.clone(),
                approve: false,
                reason: "busy".into(),
            },
            Message::Idle {
                reason: "done".into(),
            },
            Message::Terminated(vec![
                Ended {
                    name: "a".into(),
                    reason: "x".into(),
                },
                Ended {
                    name: "b".into(),
                    reason: "y".into(),
                },
            ]),
            Message::TaskClaimable(Box::new(task)),
            Message::BudgetChanged { token_budget: 7 },
        ];
        for message in messages {
            assert_eq!(Message::try_from(message.to_pb()).as_ref(), Ok(&message));
        }
    }

    #[test]
    fn grants_round_trip_and_default_their_mode() {
        let wire = pb::PermissionGrant {
            mode: 0,
            write_paths: vec!["src/**".into()],
            expires_at_unix_ms: 0,
        };
        let grant = Grant::try_from(&wire).expect("valid");
        assert_eq!(grant.mode, Mode::AcceptEdits);
        assert_eq!(grant.expires_at_unix_ms, None);
        assert_eq!(grant.to_pb().mode, pb::PermissionMode::AcceptEdits as i32);
        let bad = pb::PermissionGrant { mode: 99, ..wire };
        assert_eq!(Grant::try_from(&bad).expect_err("bad").field, "grant.mode");
    }

    #[test]
    fn states_and_kinds_round_trip_with_the_contract_names() {
        for state in [
            Status::Pending,
            Status::Approved,
            Status::Rejected,
            Status::Expired,
        ] {
            assert_eq!(
                pb::RequestStatus::try_from(state.to_pb() as i32).and_then(Status::try_from),
                Ok(state)
            );
            assert_eq!(state.as_str(), state.to_pb().as_str_name());
        }
        for kind in [Kind::PlanApproval, Kind::Shutdown, Kind::Permission] {
            assert_eq!(
                pb::RequestType::try_from(kind.to_pb() as i32).and_then(Kind::try_from),
                Ok(kind)
            );
            assert_eq!(kind.as_str(), kind.to_pb().as_str_name());
        }
        assert_eq!(
            pb::RequestStatus::try_from(0).and_then(Status::try_from),
            Err(UnknownEnumValue(0))
        );
        assert_eq!(
            pb::RequestType::try_from(42).and_then(Kind::try_from),
            Err(UnknownEnumValue(42))
        );
        let mut tracker = Tracker::new();
        let id = RequestId::existing("request_id", "r1").expect("id");
        tracker
            .open(
                Opening {
                    id: id.clone(),
                    kind: Kind::PlanApproval,
                    sender: "alice".into(),
                    target: "lead".into(),
                    payload_json: "{}".into(),
                    deadline_unix_ms: None,
                },
                1,
            )
            .expect("opens");
        let wire = tracker.get(&id).expect("present").to_pb();
        assert_eq!(wire.status, pb::RequestStatus::Pending as i32);
        assert_eq!(wire.sender, "alice");
    }

    #[test]
    fn tasks_and_plans_round_trip() {
        let mut board = TaskBoard::new(10);
        let task = board
            .create(
                "a".into(),
                NewTask {
                    subject: "s".into(),
                    ..Default::default()
                },
                5,
            )
            .expect("created");
        assert_eq!(Task::try_from(task.to_pb()), Ok(task));
        let plan = Plan {
            summary: "s".into(),
            files: vec!["a".into()],
            task_id: "t".into(),
            ..Default::default()
        };
        assert_eq!(Plan::from(&plan.to_pb()), plan);
    }
}
