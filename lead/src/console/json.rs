//! The console's JSON, made from the core's values: a member, a usage, a
//! request, a task. Field for field what `render` makes of their wire form
//! for `lead ... --json` (the page's scripts read these fields; the tests
//! below hold the two equal).

use mesh_core::{
    effect::MemberView,
    lifecycle,
    protocol::{Request, Status},
    tasks::{Task, TaskStatus},
    usage::Usage,
};
use serde_json::{json, Value};

use crate::stats::kind_name;

/// One member as JSON: who it is, where it stands, what it used and holds.
pub(super) fn member_json(view: &MemberView) -> Value {
    let m = &view.member;
    let idle_reason = if m.life.is_idle() {
        m.idle_reason.as_str()
    } else {
        ""
    };
    json!({
        "member_id": m.id, "name": m.name.to_string(), "role": m.role,
        "status": member_status(m.life.status()), "mode": m.mode.as_str(),
        "usage": usage_json(&view.standing.total),
        "token_budget": view.standing.token_budget, "holds": view.holds,
        "joining": m.life.is_joining(), "idle_reason": idle_reason,
        "sandbox": m.sandbox.as_ref().map(|s| json!({
            "kind": s.kind.as_str(),
            "confines": s.confines.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "detail": s.detail,
        })),
        "decoding": m.decoding.as_ref().map(|d| json!({
            "model": d.model, "server": d.server.as_str(),
            "constrain": d.constrain.as_str(), "why": d.why,
        })),
    })
}

/// A usage as JSON.
pub(super) fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
        "calls": u.calls, "model_ms": u.model_ms,
    })
}

/// One request as JSON, its payload and all.
pub(super) fn request_json(r: &Request) -> Value {
    let grant = r.decision.as_ref().and_then(|d| d.grant.as_ref());
    json!({
        "request_id": r.id().to_string(), "type": kind_name(r.opening.kind),
        "sender": r.opening.sender, "target": r.opening.target,
        "status": request_status(r.status),
        "payload": serde_json::from_str::<Value>(&r.opening.payload_json).unwrap_or(Value::Null),
        "feedback": r.feedback, "created_at_unix_ms": r.created_at_unix_ms,
        "resolved_at_unix_ms": r.resolved_at_unix_ms.unwrap_or(0),
        "waits_for": r.waits_for,
        "reviews": r.reviews.iter().map(|s| json!({
            "reviewer": s.reviewer, "verdict": s.verdict, "words": s.words,
            "at_unix_ms": s.at_unix_ms,
        })).collect::<Vec<_>>(),
        "grant": grant.map(|g| json!({
            "mode": g.mode.as_str(), "write_paths": g.write_paths,
            "expires_at_unix_ms": g.expires_at_unix_ms.unwrap_or(0),
        })),
    })
}

/// One task as JSON.
pub(super) fn task_json(t: &Task) -> Value {
    json!({
        "task_id": t.task_id, "subject": t.subject, "description": t.description,
        "status": task_status(t.status), "owner": t.owner, "blocked_by": t.blocked_by,
        "files": t.files, "created_at_unix_ms": t.created_at_unix_ms,
        "updated_at_unix_ms": t.updated_at_unix_ms, "summary": t.summary,
        "review": t.review.as_str(),
        "from": t.origin.by, "context_id": t.origin.context_id,
        "outputs": t.outputs.iter().map(output_json).collect::<Vec<_>>(),
    })
}

/// What a task produced, named: its kind and size (the content is the
/// A2A caller's; not copied to be measured).
fn output_json(o: &mesh_core::tasks::Output) -> Value {
    use mesh_core::tasks::OutputContent;
    let (kind, size) = match &o.content {
        OutputContent::Text(t) => ("text", t.len()),
        OutputContent::Raw(b) => ("raw", b.len()),
        OutputContent::Url(u) => ("url", u.len()),
        OutputContent::DataJson(j) => ("data", j.len()),
    };
    json!({ "name": o.name, "media_type": o.media_type, "kind": kind, "size": size })
}

/// `working`, `idle`, `disconnected`, `shutting_down`, `terminated`.
fn member_status(status: lifecycle::Status) -> &'static str {
    match status {
        lifecycle::Status::Working => "working",
        lifecycle::Status::Idle => "idle",
        lifecycle::Status::Disconnected => "disconnected",
        lifecycle::Status::ShuttingDown => "shutting_down",
        lifecycle::Status::Terminated => "terminated",
    }
}

/// `pending`, `approved`, `rejected`, `expired`.
fn request_status(status: Status) -> &'static str {
    match status {
        Status::Pending => "pending",
        Status::Approved => "approved",
        Status::Rejected => "rejected",
        Status::Expired => "expired",
    }
}

/// `PENDING`, `CLAIMED`, `COMPLETED`, `WITHDRAWN`.
fn task_status(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Pending => "PENDING",
        TaskStatus::Claimed => "CLAIMED",
        TaskStatus::Completed => "COMPLETED",
        TaskStatus::Withdrawn => "WITHDRAWN",
    }
}

/// Requests of every kind and status, for the tests of what is made of them.
#[cfg(test)]
pub(super) use tests::requests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render;
    use mesh_core::{
        grant::{Grant, Mode},
        lifecycle::{Event, Lifecycle},
        members::Member,
        names::{Name, RequestId},
        protocol::{Decision, Kind, Opening, ReviewStep},
        tasks::Review,
        usage::Standing,
    };
    use shared::wire::ToPb;

    fn usage(n: u64) -> Usage {
        Usage {
            prompt_tokens: n,
            completion_tokens: 2 * n,
            calls: n / 10,
            model_ms: 1_000 * n,
        }
    }

    /// A member in every state the page shows, with and without usage,
    /// budget, holds and an idle reason.
    fn members() -> Vec<MemberView> {
        let lives: Vec<(Lifecycle, &str)> = {
            let joined = Lifecycle::joined(50);
            let mut joined_idle = joined;
            joined_idle.on(Event::ReportedIdle);
            let mut working = joined;
            working.on(Event::StreamOpened);
            let mut idle = working;
            idle.on(Event::ReportedIdle);
            let mut gone_idle = idle;
            gone_idle.on(Event::StreamLost { grace_until: 99 });
            let mut shutting = idle;
            shutting.on(Event::ShutdownRequested);
            let mut ended = working;
            ended.on(Event::Terminate { at: 7 });
            vec![
                (joined, ""),
                (joined_idle, "nothing yet"),
                (working, "stale reason"),
                (idle, "done with t1"),
                (gone_idle, "waiting"),
                (shutting, ""),
                (ended, "was idle"),
                (Lifecycle::restored(false, false, 5, 60), ""),
                (Lifecycle::restored(true, true, 5, 60), "r"),
            ]
        };
        let modes = [Mode::Plan, Mode::Default, Mode::AcceptEdits, Mode::Bypass];
        lives
            .into_iter()
            .enumerate()
            .map(|(i, (life, reason))| MemberView {
                member: Member {
                    id: format!("m{i}"),
                    name: Name::parse("name", &format!("ann-{i}")).expect("name"),
                    role: if i % 2 == 0 { "coder" } else { "" }.into(),
                    token_hash: None,
                    mode: modes[i % modes.len()],
                    life,
                    order: i as u64,
                    last_seq: 3,
                    idle_reason: reason.into(),
                    sandbox: (i % 2 == 0).then(|| mesh_core::sandbox::Sandbox {
                        kind: mesh_core::sandbox::Kind::Landlock,
                        confines: vec![mesh_core::sandbox::Confine::Reads],
                        detail: "Landlock ABI 7".into(),
                    }),
                    decoding: (i % 3 == 0).then(|| mesh_core::decoding::Decoding {
                        model: "qwen2.5-coder:7b".into(),
                        server: mesh_core::decoding::Server::LlamaCpp,
                        constrain: mesh_core::decoding::Constrain::Schema,
                        why: "llama-server enforces a JSON schema".into(),
                    }),
                },
                standing: Standing {
                    total: usage(i as u64 * 100),
                    token_budget: if i % 3 == 0 { 0 } else { 10_000 },
                },
                holds: (0..i % 3).map(|h| format!("src/{h}/**")).collect(),
            })
            .collect()
    }

    fn opening(kind: Kind, payload: Value) -> Opening {
        Opening {
            id: RequestId::existing("request_id", "r1").expect("id"),
            kind,
            sender: "ann".into(),
            target: "lead".into(),
            payload_json: payload.to_string(),
            deadline_unix_ms: None,
        }
    }

    fn step(reviewer: &str, verdict: &str, words: &str, at: i64) -> ReviewStep {
        ReviewStep {
            reviewer: reviewer.into(),
            verdict: verdict.into(),
            words: words.into(),
            at_unix_ms: at,
            person: None,
            owner_rules: Vec::new(),
        }
    }

    /// A request of every kind and in every status: payloads with files,
    /// diffs and arguments, none, and one not JSON; reviews and a grant.
    pub(crate) fn requests() -> Vec<Request> {
        let plan = json!({"plan": {"summary": "s", "steps": ["a"], "files": ["src/a.rs"],
            "tests": [], "body": "the plan\n", "task_id": "t1"}, "overlaps": []});
        let result = json!({"result": {"summary": "done", "diff": "+x\n-y\n",
            "test_output": "ok", "base": "abc", "task_id": "t1",
            "files": [{"path": "a", "added": 3, "removed": 1, "binary": false},
                      {"path": "b.png", "added": 0, "removed": 0, "binary": true}]},
            "plan_id": "p"});
        let args = json!({"path": "src/a.rs", "content": "fn x() {}"}).to_string();
        let permission = json!({"tool": "write_file", "args_json": args});
        let amendment = json!({"plan_id": "p", "files": ["src/b.rs"], "why": "also b"});
        let shutdown = json!({"reason": "done"});
        let grant = Grant::checked("grant", Mode::AcceptEdits, vec!["src/**".into()], Some(99))
            .expect("grant");
        let mut out = Vec::new();
        for (kind, payload) in [
            (Kind::PlanApproval, plan),
            (Kind::Result, result),
            (Kind::Permission, permission),
            (Kind::Amendment, amendment),
            (Kind::Shutdown, shutdown),
        ] {
            for status in [
                Status::Pending,
                Status::Approved,
                Status::Rejected,
                Status::Expired,
            ] {
                let decision = match status {
                    Status::Approved => Some(Decision {
                        approve: true,
                        feedback: "ok".into(),
                        grant: (kind == Kind::PlanApproval).then(|| grant.clone()),
                    }),
                    Status::Rejected => Some(Decision {
                        approve: false,
                        feedback: "no".into(),
                        grant: None,
                    }),
                    _ => None,
                };
                let reviews = match status {
                    Status::Pending => vec![step("policy", "pass", "", 11)],
                    Status::Expired => Vec::new(),
                    _ => vec![
                        step("policy", "pass", "", 11),
                        step("model m", "waits", "unsure", 12),
                        step("operator", "approve", "fine", 20),
                    ],
                };
                out.push(Request {
                    opening: opening(kind, payload.clone()),
                    status,
                    feedback: decision
                        .as_ref()
                        .map_or(String::new(), |d| d.feedback.clone()),
                    decision,
                    created_at_unix_ms: 10,
                    resolved_at_unix_ms: status.is_terminal().then_some(30),
                    reviews,
                    waits_for: Vec::new(),
                });
            }
        }
        // An approval with a grant that names no paths and never expires,
        // and a payload that is empty or not JSON.
        let mut bare = out[1].clone();
        bare.decision = Some(Decision {
            approve: true,
            feedback: String::new(),
            grant: Some(Grant::plan()),
        });
        bare.opening.payload_json = String::new();
        out.push(bare);
        let mut broken = out[0].clone();
        broken.opening.payload_json = "{not json".into();
        out.push(broken);
        out
    }

    fn tasks() -> Vec<Task> {
        let mut out = Vec::new();
        for (i, status) in [
            TaskStatus::Pending,
            TaskStatus::Claimed,
            TaskStatus::Completed,
            TaskStatus::Withdrawn,
        ]
        .into_iter()
        .enumerate()
        {
            for review in [Review::Plan, Review::Result, Review::Both] {
                out.push(Task {
                    task_id: format!("t{i}"),
                    subject: "subject".into(),
                    description: if i == 0 { "" } else { "what to do" }.into(),
                    status,
                    owner: if status == TaskStatus::Pending {
                        ""
                    } else {
                        "ann"
                    }
                    .into(),
                    blocked_by: (0..i).map(|b| format!("t{b}")).collect(),
                    files: if i == 2 {
                        vec![]
                    } else {
                        vec!["src/**".into()]
                    },
                    created_at_unix_ms: 1,
                    updated_at_unix_ms: 1 + i as i64,
                    summary: if status == TaskStatus::Completed {
                        "done"
                    } else {
                        ""
                    }
                    .into(),
                    review,
                    origin: Default::default(),
                    outputs: if status == TaskStatus::Completed {
                        use mesh_core::tasks::{Output, OutputContent};
                        let output = |name: &str, media_type: &str, content| Output {
                            name: name.into(),
                            media_type: media_type.into(),
                            content,
                        };
                        vec![
                            output(
                                "report.md",
                                "text/markdown",
                                OutputContent::Text("# x".into()),
                            ),
                            output("out.bin", "", OutputContent::Raw(vec![1, 2, 3])),
                            output("site", "", OutputContent::Url("https://e.x/".into())),
                            output("n", "", OutputContent::DataJson("{}".into())),
                        ]
                    } else {
                        Vec::new()
                    },
                    reply: status == TaskStatus::Completed,
                });
            }
        }
        out
    }

    #[test]
    fn members_render_as_from_the_wire() {
        let mut seen = std::collections::BTreeSet::new();
        for view in members() {
            let json = member_json(&view);
            assert_eq!(json, render::member_json(&view.to_pb()));
            seen.insert(json["status"].to_string());
            if json["joining"] == true {
                seen.insert("joining".into());
            }
            if json["idle_reason"] != "" {
                seen.insert("with a reason".into());
            }
        }
        assert_eq!(seen.len(), 7, "every status, joining, a reason: {seen:?}");
    }

    #[test]
    fn usage_renders_as_from_the_wire() {
        let most = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: u64::MAX,
            calls: u64::MAX,
            model_ms: u64::MAX,
        };
        for u in [Usage::default(), usage(7), most] {
            assert_eq!(usage_json(&u), render::usage_value(&u.to_pb()));
        }
    }

    #[test]
    fn requests_render_as_from_the_wire() {
        for request in requests() {
            assert_eq!(
                request_json(&request),
                render::request_json(&request.to_pb()),
                "{request:?}"
            );
        }
    }

    #[test]
    fn tasks_render_as_from_the_wire() {
        for task in tasks() {
            assert_eq!(task_json(&task), render::task_json(&task.to_pb()));
        }
    }

    #[test]
    fn the_queues_figures_read_a_request_as_from_the_wire() {
        for request in requests() {
            assert_eq!(
                crate::stats::timed(&request),
                render::timed(&request.to_pb())
            );
        }
    }
}
