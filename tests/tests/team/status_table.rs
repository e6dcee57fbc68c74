//! Every row of the contract's status table, over the wire, against a real
//! `lead` process.

#![allow(clippy::unwrap_used)]

use mesh_tests::{Lead, Member, Operator};
use shared::{
    auth::BearerToken,
    pb::{self, envelope::Body, operator_client::OperatorClient},
};
use tonic::Code;

const ID_A: &str = "0b6f3c1e-1d2a-4f5b-8c9d-0e1f2a3b4c5d";
const ID_B: &str = "1c7a4d2f-2e3b-4a6c-9d0e-1f2a3b4c5d6e";

/// Asserts `result` failed with `code` and a message containing each of `words`.
fn expect_status<T: std::fmt::Debug>(result: Result<T, tonic::Status>, code: Code, words: &[&str]) {
    let status = result.expect_err("the call should fail");
    assert_eq!(status.code(), code, "{status:?}");
    for word in words {
        assert!(
            status.message().contains(word),
            "{:?} lacks {word:?}",
            status.message()
        );
    }
}

async fn lead_with(names: &[&str]) -> (Lead, Operator, Vec<Member>) {
    let lead = Lead::start(&[]).await;
    let operator = lead.operator().await;
    let mut members = Vec::new();
    for name in names {
        members.push(lead.join(name).await);
    }
    (lead, operator, members)
}

async fn shutdown(operator: &mut Operator, target: &str, id: &str) -> String {
    operator
        .request_shutdown(pb::ShutdownRequest {
            request_id: id.into(),
            target: target.into(),
            reason: "test".into(),
            deadline_unix_ms: 0,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .request_id
}

#[tokio::test]
async fn no_such_request_id_is_not_found() {
    let (_lead, mut operator, mut members) = lead_with(&["alice"]).await;
    let review = pb::PlanReview {
        request_id: "no-such-request".into(),
        approve: true,
        ..Default::default()
    };
    expect_status(
        operator.review_plan(review).await,
        Code::NotFound,
        &["no-such-request"],
    );
    expect_status(
        operator
            .get_request(pb::GetRequestRequest {
                request_id: ID_A.into(),
            })
            .await,
        Code::NotFound,
        &[ID_A],
    );
    let answer = pb::ShutdownResponse {
        request_id: ID_A.into(),
        approve: true,
        reason: String::new(),
    };
    expect_status(
        members[0].api.respond_shutdown(answer).await,
        Code::NotFound,
        &[ID_A],
    );
    let review = pb::PermissionReview {
        request_id: ID_B.into(),
        approve: true,
        feedback: String::new(),
    };
    expect_status(
        operator.review_permission(review).await,
        Code::NotFound,
        &[ID_B],
    );
}

#[tokio::test]
async fn an_answer_of_the_wrong_type_is_failed_precondition_naming_both_types() {
    let (_lead, mut operator, mut members) = lead_with(&["alice"]).await;
    let plan_id = members[0].submit("", "a plan", &["a.rs"]).await.unwrap();
    let answer = pb::ShutdownResponse {
        request_id: plan_id,
        approve: true,
        reason: String::new(),
    };
    expect_status(
        members[0].api.respond_shutdown(answer).await,
        Code::FailedPrecondition,
        &["REQUEST_TYPE_PLAN_APPROVAL", "REQUEST_TYPE_SHUTDOWN"],
    );
    let shutdown_id = shutdown(&mut operator, "alice", "").await;
    let review = pb::PlanReview {
        request_id: shutdown_id,
        approve: true,
        ..Default::default()
    };
    expect_status(
        operator.review_plan(review).await,
        Code::FailedPrecondition,
        &["REQUEST_TYPE_SHUTDOWN", "REQUEST_TYPE_PLAN_APPROVAL"],
    );
}

#[tokio::test]
async fn the_wrong_party_is_permission_denied() {
    let (lead, mut operator, mut members) = lead_with(&["alice", "bob"]).await;
    let id = shutdown(&mut operator, "alice", "").await;
    let answer = pb::ShutdownResponse {
        request_id: id.clone(),
        approve: true,
        reason: String::new(),
    };
    expect_status(
        members[1].api.respond_shutdown(answer).await,
        Code::PermissionDenied,
        &["alice", "bob"],
    );

    // A teammate calling Operator, with its session token.
    let channel = lead.channel().await;
    let mut as_teammate = OperatorClient::with_interceptor(
        channel.clone(),
        BearerToken::new(&members[0].token).unwrap(),
    );
    expect_status(
        as_teammate.list_team(pb::ListTeamRequest::default()).await,
        Code::PermissionDenied,
        &["alice", "operator"],
    );
    let review = pb::PlanReview {
        request_id: id,
        approve: true,
        ..Default::default()
    };
    expect_status(
        as_teammate.review_plan(review).await,
        Code::PermissionDenied,
        &["operator"],
    );
    // ... or with the join token.
    let mut with_join =
        OperatorClient::with_interceptor(channel, BearerToken::new(&lead.join_token).unwrap());
    expect_status(
        with_join.list_team(pb::ListTeamRequest::default()).await,
        Code::PermissionDenied,
        &["join token"],
    );
    // The operator token on a teammate RPC.
    let mut operator_as_teammate = lead.lead_api(&lead.operator_token).await;
    expect_status(
        operator_as_teammate
            .report_idle(pb::IdleNotification::default())
            .await,
        Code::PermissionDenied,
        &["operator token"],
    );
}

#[tokio::test]
async fn a_different_answer_to_a_resolved_request_is_failed_precondition_naming_its_status() {
    let (_lead, mut operator, mut members) = lead_with(&["alice"]).await;
    let id = members[0].submit("", "a plan", &["a.rs"]).await.unwrap();
    operator
        .review_plan(pb::PlanReview {
            request_id: id.clone(),
            approve: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let reject = pb::PlanReview {
        request_id: id,
        approve: false,
        feedback: "changed my mind".into(),
        grant: None,
        refuse_overlap: false,
    };
    expect_status(
        operator.review_plan(reject).await,
        Code::FailedPrecondition,
        &["REQUEST_STATUS_APPROVED"],
    );

    let shutdown_id = shutdown(&mut operator, "alice", "").await;
    let refuse = pb::ShutdownResponse {
        request_id: shutdown_id.clone(),
        approve: false,
        reason: "busy".into(),
    };
    members[0].api.respond_shutdown(refuse).await.unwrap();
    let agree = pb::ShutdownResponse {
        request_id: shutdown_id,
        approve: true,
        reason: String::new(),
    };
    expect_status(
        members[0].api.respond_shutdown(agree).await,
        Code::FailedPrecondition,
        &["REQUEST_STATUS_REJECTED"],
    );
}

#[tokio::test]
async fn the_same_answer_again_is_ok_with_the_original_result_and_nothing_sent_twice() {
    let (_lead, mut operator, mut members) = lead_with(&["alice", "bob"]).await;
    let id = members[0].submit("", "a plan", &["a.rs"]).await.unwrap();
    let review = pb::PlanReview {
        request_id: id.clone(),
        approve: false,
        feedback: "needs tests".into(),
        grant: None,
        refuse_overlap: false,
    };
    let first = operator
        .review_plan(review.clone())
        .await
        .unwrap()
        .into_inner();
    let again = operator.review_plan(review).await.unwrap().into_inner();
    assert_eq!(first, again);
    assert!(!again.approve);
    assert_eq!(again.feedback, "needs tests");

    // alice's inbox holds one response, then the marker bob sends after the retry.
    members[1]
        .api
        .send(pb::SendRequest {
            to: "alice".into(),
            text: Some(pb::Text {
                content: "marker".into(),
            }),
            message_id: String::new(),
        })
        .await
        .unwrap();
    let alice = &mut members[0];
    let response = alice.next().await;
    assert!(
        matches!(response.body, Some(Body::PlanApprovalResponse(ref r)) if r.request_id == id),
        "{response:?}"
    );
    let next = alice.next().await;
    assert!(
        matches!(next.body, Some(Body::Text(ref t)) if t.content == "marker"),
        "the retry sent nothing: {next:?}"
    );

    // A teammate's retried shutdown answer, too.
    let shutdown_id = shutdown(&mut operator, "bob", "").await;
    let refuse = pb::ShutdownResponse {
        request_id: shutdown_id,
        approve: false,
        reason: "busy".into(),
    };
    members[1]
        .api
        .respond_shutdown(refuse.clone())
        .await
        .unwrap();
    members[1].api.respond_shutdown(refuse).await.unwrap();
}

#[tokio::test]
async fn a_reused_request_id_with_a_different_payload_is_already_exists() {
    let (_lead, mut operator, mut members) = lead_with(&["alice"]).await;
    let id = members[0].submit(ID_A, "a plan", &["a.rs"]).await.unwrap();
    assert_eq!(id, ID_A, "the sender's id is kept");
    assert_eq!(
        members[0].submit(ID_A, "a plan", &["a.rs"]).await.unwrap(),
        ID_A,
        "the same request again is a retry"
    );
    expect_status(
        members[0].submit(ID_A, "another plan", &["b.rs"]).await,
        Code::AlreadyExists,
        &[ID_A],
    );
    let request = pb::ShutdownRequest {
        request_id: ID_A.into(),
        target: "alice".into(),
        ..Default::default()
    };
    expect_status(
        operator.request_shutdown(request).await,
        Code::AlreadyExists,
        &[ID_A],
    );
    let pending = operator
        .list_requests(pb::ListRequestsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert_eq!(pending.len(), 1, "nothing was opened twice");
}

#[tokio::test]
async fn malformed_input_is_invalid_argument_naming_the_field() {
    let (lead, mut operator, mut members) = lead_with(&["alice"]).await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    for bad in ["Alice", "-x", "a b", "lead", &"a".repeat(65), ""] {
        expect_status(
            joiner
                .join(pb::JoinRequest {
                    name: bad.into(),
                    role: "r".into(),
                    ..Default::default()
                })
                .await,
            Code::InvalidArgument,
            &["name"],
        );
    }
    expect_status(
        joiner
            .join(pb::JoinRequest {
                name: "zed".into(),
                role: String::new(),
                ..Default::default()
            })
            .await,
        Code::InvalidArgument,
        &["role"],
    );
    for (sandbox, field) in [
        (("docker", vec![], ""), "sandbox.kind"),
        (
            ("landlock", vec!["reads", "disks"], ""),
            "sandbox.confines[1]",
        ),
        (
            ("landlock", vec!["reads", "reads"], ""),
            "sandbox.confines[1]",
        ),
        (("bwrap", vec![], &*"d".repeat(2000)), "sandbox.detail"),
    ] {
        expect_status(
            joiner
                .join(pb::JoinRequest {
                    name: "zed".into(),
                    role: "r".into(),
                    sandbox: Some(pb::Sandbox {
                        kind: sandbox.0.into(),
                        confines: sandbox.1.iter().map(|c| c.to_string()).collect(),
                        detail: sandbox.2.into(),
                    }),
                    ..Default::default()
                })
                .await,
            Code::InvalidArgument,
            &[field],
        );
    }
    let long_model = "m".repeat(257);
    let long_why = "w".repeat(1025);
    for ((model, server, constrain, why), field) in [
        (("", "llama.cpp", "schema", ""), "decoding.model"),
        ((&*long_model, "llama.cpp", "schema", ""), "decoding.model"),
        (("qwen", "tgi", "schema", ""), "decoding.server"),
        (("qwen", "ollama", "grammar", ""), "decoding.constrain"),
        (("qwen", "ollama", "off", &*long_why), "decoding.why"),
    ] {
        expect_status(
            joiner
                .join(pb::JoinRequest {
                    name: "zed".into(),
                    role: "r".into(),
                    decoding: Some(pb::Decoding {
                        model: model.into(),
                        server: server.into(),
                        constrain: constrain.into(),
                        why: why.into(),
                    }),
                    ..Default::default()
                })
                .await,
            Code::InvalidArgument,
            &[field],
        );
    }

    let alice = &mut members[0];
    let no_plan = pb::PlanApprovalRequest {
        request_id: String::new(),
        plan: None,
        supersedes: String::new(),
    };
    expect_status(
        alice.api.submit_plan(no_plan).await,
        Code::InvalidArgument,
        &["plan"],
    );
    expect_status(
        alice.submit("", "", &[]).await,
        Code::InvalidArgument,
        &["plan.summary"],
    );
    expect_status(
        alice.submit("", "s", &["../etc/passwd"]).await,
        Code::InvalidArgument,
        &["plan.files[0]"],
    );
    expect_status(
        alice.submit("not-a-uuid", "s", &[]).await,
        Code::InvalidArgument,
        &["request_id"],
    );
    let huge = pb::Plan {
        summary: "s".into(),
        body: "x".repeat(100_000),
        ..Default::default()
    };
    let too_big = pb::PlanApprovalRequest {
        request_id: String::new(),
        plan: Some(huge),
        supersedes: String::new(),
    };
    expect_status(
        alice.api.submit_plan(too_big).await,
        Code::InvalidArgument,
        &["plan", "limit"],
    );
    let dangling = pb::PlanApprovalRequest {
        request_id: String::new(),
        plan: Some(pb::Plan {
            summary: "s".into(),
            ..Default::default()
        }),
        supersedes: ID_B.into(),
    };
    expect_status(
        alice.api.submit_plan(dangling).await,
        Code::InvalidArgument,
        &["supersedes"],
    );

    let unknown = pb::ShutdownRequest {
        target: "nobody".into(),
        ..Default::default()
    };
    expect_status(
        operator.request_shutdown(unknown).await,
        Code::InvalidArgument,
        &["target", "nobody"],
    );
    let past = pb::ShutdownRequest {
        target: "alice".into(),
        deadline_unix_ms: 1,
        ..Default::default()
    };
    expect_status(
        operator.request_shutdown(past).await,
        Code::InvalidArgument,
        &["deadline_unix_ms"],
    );
    let grant = pb::PermissionGrant {
        mode: 0,
        write_paths: vec!["/etc/*".into()],
        expires_at_unix_ms: 0,
    };
    let id = members[0].submit("", "s", &[]).await.unwrap();
    let review = pb::PlanReview {
        request_id: id.clone(),
        approve: true,
        feedback: String::new(),
        grant: Some(grant),
        refuse_overlap: false,
    };
    expect_status(
        operator.review_plan(review).await,
        Code::InvalidArgument,
        &["grant.write_paths[0]"],
    );
    let silent = pb::PlanReview {
        request_id: id,
        approve: false,
        feedback: String::new(),
        grant: None,
        refuse_overlap: false,
    };
    expect_status(
        operator.review_plan(silent).await,
        Code::InvalidArgument,
        &["feedback"],
    );
    let bad_filter = pb::ListRequestsRequest {
        status: 42,
        r#type: 0,
        ..Default::default()
    };
    expect_status(
        operator.list_requests(bad_filter).await,
        Code::InvalidArgument,
        &["status"],
    );
    for (epoch, totals, field) in [
        (String::new(), Some(pb::Usage::default()), "epoch"),
        ("e".repeat(129), Some(pb::Usage::default()), "epoch"),
        ("e1".to_owned(), None, "totals"),
    ] {
        expect_status(
            members[0]
                .api
                .report_usage(pb::UsageReport { epoch, totals })
                .await,
            Code::InvalidArgument,
            &[field],
        );
    }
    for bad in ["Alice", "a b", ""] {
        expect_status(
            operator
                .set_budget(pb::SetBudgetRequest {
                    name: bad.into(),
                    token_budget: 1,
                })
                .await,
            Code::InvalidArgument,
            &["name"],
        );
    }
}

#[tokio::test]
async fn joining_with_an_active_name_is_already_exists() {
    let (lead, _operator, _members) = lead_with(&["alice"]).await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    expect_status(
        joiner
            .join(pb::JoinRequest {
                name: "alice".into(),
                role: "r".into(),
                ..Default::default()
            })
            .await,
        Code::AlreadyExists,
        &["alice"],
    );
}

#[tokio::test]
async fn sending_to_a_name_that_is_not_a_member_is_not_found() {
    let (_lead, _operator, mut members) = lead_with(&["alice"]).await;
    let text = Some(pb::Text {
        content: "hi".into(),
    });
    expect_status(
        members[0]
            .api
            .send(pb::SendRequest {
                to: "nobody".into(),
                text,
                message_id: String::new(),
            })
            .await,
        Code::NotFound,
        &["nobody"],
    );
}

#[tokio::test]
async fn a_budget_for_a_name_that_never_joined_is_not_found() {
    let (_lead, mut operator, _members) = lead_with(&["alice"]).await;
    expect_status(
        operator
            .set_budget(pb::SetBudgetRequest {
                name: "nobody".into(),
                token_budget: 10,
            })
            .await,
        Code::NotFound,
        &["nobody"],
    );
}

#[tokio::test]
async fn a_members_decoding_is_shown_as_it_said_at_join() {
    let lead = Lead::start(&[]).await;
    let mut operator = lead.operator().await;
    let mut joiner = lead.lead_api(&lead.join_token).await;
    let decoding = pb::Decoding {
        model: "qwen".into(),
        server: "llama.cpp".into(),
        constrain: "schema".into(),
        why: "llama-server holds replies\nto the schema".into(),
    };
    joiner
        .join(pb::JoinRequest {
            name: "dee".into(),
            role: "r".into(),
            decoding: Some(decoding.clone()),
            ..Default::default()
        })
        .await
        .expect("joins");
    joiner
        .join(pb::JoinRequest {
            name: "eve".into(),
            role: "r".into(),
            ..Default::default()
        })
        .await
        .expect("joins");
    let dee = mesh_tests::member_named(&mut operator, "dee").await;
    assert_eq!(dee.decoding, Some(decoding));
    let eve = mesh_tests::member_named(&mut operator, "eve").await;
    assert_eq!(eve.decoding, None);
    let (ok, table, err) = lead.cli(&["team"]).await;
    assert!(ok, "{err}");
    assert!(
        table.contains(
            "dee's model qwen on llama.cpp: schema (llama-server holds replies\\nto the schema)\n"
        ),
        "{table}"
    );
    assert!(!table.contains("eve's model"), "{table}");
    let (ok, out, err) = lead.cli(&["team", "--json"]).await;
    assert!(ok, "{err}");
    let team: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let dee = team
        .as_array()
        .and_then(|a| a.iter().find(|m| m["name"] == "dee"))
        .expect("dee listed");
    assert_eq!(dee["decoding"]["server"], "llama.cpp", "{dee}");
    assert_eq!(dee["decoding"]["constrain"], "schema", "{dee}");
    let browser = lead.console_browser().await;
    let base = lead.console.clone().unwrap();
    browser.open(&format!("{base}#/members/dee")).await;
    browser
        .wait_for(
            "[data-testid=member-model]",
            "Model: qwen on llama.cpp — replies held by a JSON schema (llama-server holds replies",
        )
        .await;
    browser.open(&format!("{base}#/members/eve")).await;
    browser
        .wait_for("[data-testid=member-model]", "Model: not said")
        .await;
}

#[tokio::test]
async fn no_token_or_a_wrong_token_is_unauthenticated() {
    let lead = Lead::start(&[]).await;
    let channel = lead.channel().await;
    let mut bare = pb::lead_client::LeadClient::new(channel.clone());
    expect_status(
        bare.join(pb::JoinRequest {
            name: "a".into(),
            role: "r".into(),
            ..Default::default()
        })
        .await,
        Code::Unauthenticated,
        &["authorization"],
    );
    let mut wrong = lead.lead_api("wrong").await;
    expect_status(
        wrong
            .join(pb::JoinRequest {
                name: "a".into(),
                role: "r".into(),
                ..Default::default()
            })
            .await,
        Code::Unauthenticated,
        &["join token"],
    );
    expect_status(
        wrong.report_idle(pb::IdleNotification::default()).await,
        Code::Unauthenticated,
        &["session token"],
    );
    let mut bare_operator = OperatorClient::new(channel.clone());
    expect_status(
        bare_operator
            .list_team(pb::ListTeamRequest::default())
            .await,
        Code::Unauthenticated,
        &["authorization"],
    );
    let mut wrong_operator =
        OperatorClient::with_interceptor(channel, BearerToken::new("wrong").unwrap());
    expect_status(
        wrong_operator
            .list_team(pb::ListTeamRequest::default())
            .await,
        Code::Unauthenticated,
        &["unknown token"],
    );
}
