//! Who may call what: every `Lead` and `Operator` rpc and every console
//! endpoint, called by every kind of caller, against a real `lead` process.
//! The expected answers are the tables below, written from the contract
//! (docs/protocol.md, mesh.proto): missing, malformed or unknown credentials are
//! UNAUTHENTICATED; a credential the lead knows, of the wrong kind (a teammate
//! calling `Operator`, the operator or join token calling a teammate's rpc,
//! another teammate answering alice's shutdown) is PERMISSION_DENIED; the
//! console answers 401 to anything but the operator token.
//!
//! Each row gets its own lead with the same team (see [`Fixture`]). Refused
//! calls go first, each followed by a snapshot of the team, the requests and
//! the tasks, which must not change; then a marker proves that none of them
//! reached the event stream; then the authorized callers, whose bodies are
//! real (they succeed, or fail validation with the code the table names).

#![allow(clippy::unwrap_used)]

use base64::Engine as _;
use mesh_tests::{webdriver::http_client, within, Lead, Operator};
use shared::pb::{self, lead_client::LeadClient, operator_client::OperatorClient};
use tonic::{metadata::MetadataValue, transport::Channel, Code, Status};

/// What a call came to: a gRPC status code, an HTTP status, or which page `/` served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Grpc(Code),
    Http(u16),
    LoginForm,
    ConsolePage,
}

impl Answer {
    /// Whether the caller is turned away (and so nothing may change).
    fn refuses(self) -> bool {
        matches!(
            self,
            Answer::Grpc(Code::Unauthenticated | Code::PermissionDenied)
                | Answer::Http(401)
                | Answer::LoginForm
        )
    }
}

const UN: Answer = Answer::Grpc(Code::Unauthenticated);
const PD: Answer = Answer::Grpc(Code::PermissionDenied);
const OK: Answer = Answer::Grpc(Code::Ok);
const FP: Answer = Answer::Grpc(Code::FailedPrecondition);
const AE: Answer = Answer::Grpc(Code::AlreadyExists);
const NO: Answer = Answer::Http(401);
const CONFLICT: Answer = Answer::Http(409);
const YES: Answer = Answer::Http(200);
const LOGIN: Answer = Answer::LoginForm;
const PAGE: Answer = Answer::ConsolePage;

/// Who calls, in the tables' column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    Nothing,
    Basic,
    EmptyBearer,
    Garbage,
    Unprefixed,
    Wrong,
    Departed,
    JoinToken,
    Alice,
    Bob,
    OperatorToken,
}

const CALLERS: [Caller; 11] = [
    Caller::Nothing,
    Caller::Basic,
    Caller::EmptyBearer,
    Caller::Garbage,
    Caller::Unprefixed,
    Caller::Wrong,
    Caller::Departed,
    Caller::JoinToken,
    Caller::Alice,
    Caller::Bob,
    Caller::OperatorToken,
];

/// Every rpc and console endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Join,
    Inbox,
    Ack,
    Send,
    SubmitPlan,
    RespondShutdown,
    RequestPermission,
    ReportIdle,
    ReportToolCall,
    ReportUsage,
    Leave,
    LeadListTasks,
    ClaimTask,
    SubmitResult,
    GetRepo,
    RequestAmendment,
    CompleteTask,
    ReviewPlan,
    RequestShutdown,
    ReviewPermission,
    ListTeam,
    ListRequests,
    GetRequest,
    Watch,
    CreateTask,
    OperatorListTasks,
    SpawnTeammate,
    SetBudget,
    ReviewResult,
    ReviewAmendment,
    OperatorDecide,
    ListAudit,
    Page,
    State,
    Stats,
    Events,
    Script,
    Approve,
    Reject,
    Permission,
    Shutdown,
    Decide,
}

// Columns: no metadata | `Basic <base64>` | `Bearer ` and nothing | non-ASCII
// garbage | the right token without `Bearer ` | a wrong token | the session
// token of carol, who left | the join token | alice's session token | bob's
// session token | the operator token.
#[rustfmt::skip]
const GRPC: [(Target, [Answer; 11]); 32] = [
    //                           none  basic empty garb. bare  wrong left  join  alice bob   oper.
    // Known credentials of the wrong kind: PERMISSION_DENIED, as on every other rpc.
    (Target::Join,              [UN,   UN,   UN,   UN,   UN,   UN,   UN,   OK,   PD,   PD,   PD]),
    (Target::Inbox,             [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::Ack,               [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::Send,              [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::SubmitPlan,        [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    // alice's shutdown request: bob is not the party that must answer.
    (Target::RespondShutdown,   [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   PD,   PD]),
    // bob is in plan mode: a permission request is out of place, not forbidden.
    (Target::RequestPermission, [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   FP,   PD]),
    (Target::ReportIdle,        [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::ReportToolCall,    [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::ReportUsage,       [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::Leave,             [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    (Target::LeadListTasks,     [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   OK,   PD]),
    // alice's task: claimed by another member is FAILED_PRECONDITION (mesh.proto).
    (Target::ClaimTask,         [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   FP,   PD]),
    // This lead has no team repository (--repo): after the caller is placed.
    (Target::SubmitResult,      [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   FP,   FP,   PD]),
    (Target::GetRepo,           [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   FP,   FP,   PD]),
    // alice holds an approved plan; bob, in plan mode, has none to amend.
    (Target::RequestAmendment,  [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   FP,   PD]),
    // alice's task: PERMISSION_DENIED for anyone but its owner (mesh.proto).
    (Target::CompleteTask,      [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   OK,   PD,   PD]),
    (Target::ReviewPlan,        [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::RequestShutdown,   [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::ReviewPermission,  [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::ListTeam,          [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::ListRequests,      [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::GetRequest,        [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::Watch,             [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::CreateTask,        [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::OperatorListTasks, [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    // alice is on the team already: nothing is started.
    (Target::SpawnTeammate,     [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   AE]),
    (Target::SetBudget,         [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    // alice's plan is no result and no amendment: the types differ.
    (Target::ReviewResult,      [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   FP]),
    (Target::ReviewAmendment,   [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   FP]),
    // alice's approved plan, approved again: by its type, as ReviewPlan.
    (Target::OperatorDecide,    [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
    (Target::ListAudit,         [UN,   UN,   UN,   UN,   UN,   UN,   UN,   PD,   PD,   PD,   OK]),
];

/// The console takes the operator token as a bearer; everyone else gets the
/// login form at `/` and 401 everywhere else.
#[rustfmt::skip]
const CONSOLE: [(Target, [Answer; 11]); 10] = [
    //                    none   basic  empty  garb.  bare   wrong  left   join   alice  bob    oper.
    (Target::Page,       [LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, PAGE]),
    (Target::State,      [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Stats,      [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Events,     [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Script,     [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Approve,    [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Reject,     [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Permission, [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    (Target::Shutdown,   [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    YES]),
    // alice's plan is no result: the types differ.
    (Target::Decide,     [NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    NO,    CONFLICT]),
];

/// A lead with a team in every state the rows need: alice (in DEFAULT mode,
/// holding a task, with a pending permission request, a pending second plan
/// and a pending shutdown request), bob (in PLAN mode) and carol (who left).
struct Fixture {
    lead: Lead,
    channel: Channel,
    operator: Operator,
    http: reqwest::Client,
    alice: String,
    bob: String,
    carol: String,
    /// alice's claimed task.
    task: String,
    /// alice's pending plan.
    plan: String,
    /// alice's pending permission request.
    permission: String,
    /// The pending request to shut alice down.
    shutdown: String,
}

impl Fixture {
    async fn start() -> Fixture {
        let lead = Lead::start(&[]).await;
        let channel = lead.channel().await;
        let mut operator = lead.operator().await;
        let mut alice = lead.join("alice").await;
        let bob = lead.join("bob").await;
        let mut carol = lead.join("carol").await;
        carol
            .api
            .leave(pb::LeaveRequest {
                reason: "done".into(),
            })
            .await
            .unwrap();
        let new_task = pb::CreateTaskRequest {
            subject: "the auth module".into(),
            ..Default::default()
        };
        let task = operator.create_task(new_task).await.unwrap().into_inner();
        let claim = pb::ClaimTaskRequest {
            task_id: task.task_id.clone(),
        };
        alice.api.claim_task(claim).await.unwrap();
        let first = alice.submit("", "auth", &["src/auth.rs"]).await.unwrap();
        let grant = pb::PermissionGrant {
            mode: pb::PermissionMode::Default as i32,
            ..Default::default()
        };
        let approval = pb::PlanReview {
            request_id: first,
            approve: true,
            grant: Some(grant),
            ..Default::default()
        };
        operator.review_plan(approval).await.unwrap();
        let ask = pb::PermissionRequest {
            request_id: String::new(),
            tool: "write_file".into(),
            args_json: r#"{"path":"src/auth.rs","content":"x"}"#.into(),
        };
        let permission = alice.api.request_permission(ask).await.unwrap();
        let plan = alice.submit("", "docs", &["docs/auth.md"]).await.unwrap();
        let shutdown = pb::ShutdownRequest {
            target: "alice".into(),
            reason: "time's up".into(),
            ..Default::default()
        };
        let shutdown = operator.request_shutdown(shutdown).await.unwrap();
        Fixture {
            http: http_client(reqwest::Client::builder()),
            alice: alice.token,
            bob: bob.token,
            carol: carol.token,
            task: task.task_id,
            plan,
            permission: permission.into_inner().request_id,
            shutdown: shutdown.into_inner().request_id,
            lead,
            channel,
            operator,
        }
    }

    /// The `authorization` value `caller` sends to `target`, if any.
    fn authorization(&self, target: Target, caller: Caller) -> Option<Vec<u8>> {
        let right = match target {
            Target::Join => &self.lead.join_token,
            c if c.is_lead_rpc() => &self.alice,
            _ => &self.lead.operator_token,
        };
        let bearer = |token: &str| Some(format!("Bearer {token}").into_bytes());
        match caller {
            Caller::Nothing => None,
            Caller::Basic => {
                let basic = base64::engine::general_purpose::STANDARD.encode(format!("x:{right}"));
                Some(format!("Basic {basic}").into_bytes())
            }
            Caller::EmptyBearer => Some(b"Bearer ".to_vec()),
            Caller::Garbage => Some(b"\xde\xad\xbe\xef garbage".to_vec()),
            Caller::Unprefixed => Some(right.clone().into_bytes()),
            Caller::Wrong => bearer(&shared::auth::new_token()),
            Caller::Departed => bearer(&self.carol),
            Caller::JoinToken => bearer(&self.lead.join_token),
            Caller::Alice => bearer(&self.alice),
            Caller::Bob => bearer(&self.bob),
            Caller::OperatorToken => bearer(&self.lead.operator_token),
        }
    }

    /// Calls `target` as `caller`: what it came to, and the status's message.
    async fn call(&self, target: Target, caller: Caller, refusal: bool) -> (Answer, String) {
        let auth = self.authorization(target, caller);
        let auth = auth.as_deref();
        if target.is_console() {
            return self.web(target, auth).await;
        }
        let mut lead = LeadClient::new(self.channel.clone());
        let mut operator = OperatorClient::new(self.channel.clone());
        let result: Result<(), Status> = match target {
            Target::Join => {
                let body = pb::JoinRequest {
                    name: "dave".into(),
                    role: "tester".into(),
                    ..Default::default()
                };
                unary(lead.join(req(auth, body)).await)
            }
            Target::Inbox => {
                let body = pb::InboxRequest { after_seq: 0 };
                stream(lead.inbox(req(auth, body)).await, refusal).await
            }
            Target::Ack => unary(lead.ack(req(auth, pb::AckRequest { seq: 0 })).await),
            Target::Send => {
                let text = Some(pb::Text {
                    content: "hello".into(),
                });
                let body = pb::SendRequest {
                    to: "*".into(),
                    text,
                    message_id: String::new(),
                };
                unary(lead.send(req(auth, body)).await)
            }
            Target::SubmitPlan => {
                let plan = pb::Plan {
                    summary: "tests".into(),
                    files: vec!["tests/auth.rs".into()],
                    ..Default::default()
                };
                let body = pb::PlanApprovalRequest {
                    plan: Some(plan),
                    ..Default::default()
                };
                unary(lead.submit_plan(req(auth, body)).await)
            }
            Target::RespondShutdown => {
                let body = pb::ShutdownResponse {
                    request_id: Clone::clone(&self.shutdown),
                    approve: true,
                    reason: "done".into(),
                };
                unary(lead.respond_shutdown(req(auth, body)).await)
            }
            Target::RequestPermission => {
                let body = pb::PermissionRequest {
                    request_id: String::new(),
                    tool: "write_file".into(),
                    args_json: r#"{"path":"src/auth.rs","content":"y"}"#.into(),
                };
                unary(lead.request_permission(req(auth, body)).await)
            }
            Target::ReportIdle => {
                let body = pb::IdleNotification {
                    reason: "nothing to do".into(),
                };
                unary(lead.report_idle(req(auth, body)).await)
            }
            Target::ReportToolCall => {
                let body = pb::ToolCallReport {
                    tool: "read_file".into(),
                    allowed: true,
                    outcome: "read".into(),
                    ..Default::default()
                };
                unary(lead.report_tool_call(req(auth, body)).await)
            }
            Target::ReportUsage => {
                let body = pb::UsageReport {
                    epoch: "e1".into(),
                    totals: Some(pb::Usage {
                        prompt_tokens: 10,
                        completion_tokens: 5,
                        calls: 1,
                        model_ms: 100,
                    }),
                };
                unary(lead.report_usage(req(auth, body)).await)
            }
            Target::Leave => {
                let body = pb::LeaveRequest {
                    reason: "bye".into(),
                };
                unary(lead.leave(req(auth, body)).await)
            }
            Target::LeadListTasks => {
                let body = pb::ListTasksRequest::default();
                unary(lead.list_tasks(req(auth, body)).await)
            }
            Target::ClaimTask => {
                let body = pb::ClaimTaskRequest {
                    task_id: Clone::clone(&self.task),
                };
                unary(lead.claim_task(req(auth, body)).await)
            }
            Target::CompleteTask => {
                let body = pb::CompleteTaskRequest {
                    task_id: Clone::clone(&self.task),
                    summary: "done".into(),
                    ..Default::default()
                };
                unary(lead.complete_task(req(auth, body)).await)
            }
            Target::ReviewPlan => {
                let body = pb::PlanReview {
                    request_id: Clone::clone(&self.plan),
                    approve: true,
                    ..Default::default()
                };
                unary(operator.review_plan(req(auth, body)).await)
            }
            Target::RequestShutdown => {
                let body = pb::ShutdownRequest {
                    target: "bob".into(),
                    reason: "enough".into(),
                    ..Default::default()
                };
                unary(operator.request_shutdown(req(auth, body)).await)
            }
            Target::ReviewPermission => {
                let body = pb::PermissionReview {
                    request_id: Clone::clone(&self.permission),
                    approve: true,
                    feedback: String::new(),
                };
                unary(operator.review_permission(req(auth, body)).await)
            }
            Target::ListTeam => {
                let body = pb::ListTeamRequest::default();
                unary(operator.list_team(req(auth, body)).await)
            }
            Target::ListRequests => {
                let body = pb::ListRequestsRequest::default();
                unary(operator.list_requests(req(auth, body)).await)
            }
            Target::GetRequest => {
                let body = pb::GetRequestRequest {
                    request_id: Clone::clone(&self.plan),
                };
                unary(operator.get_request(req(auth, body)).await)
            }
            Target::Watch => {
                stream(
                    operator.watch(req(auth, pb::WatchRequest {})).await,
                    refusal,
                )
                .await
            }
            Target::CreateTask => {
                let body = pb::CreateTaskRequest {
                    subject: "more".into(),
                    ..Default::default()
                };
                unary(operator.create_task(req(auth, body)).await)
            }
            Target::OperatorListTasks => {
                let body = pb::ListTasksRequest::default();
                unary(operator.list_tasks(req(auth, body)).await)
            }
            Target::SpawnTeammate => {
                let body = pb::SpawnTeammateRequest {
                    name: "alice".into(),
                    role: "coder".into(),
                    script_path: "alice.toml".into(),
                    ..Default::default()
                };
                unary(operator.spawn_teammate(req(auth, body)).await)
            }
            Target::SubmitResult => {
                let body = pb::ResultRequest {
                    task_id: Clone::clone(&self.task),
                    base: "0".repeat(40),
                    diff: "diff --git a/x b/x\n".into(),
                    summary: "done".into(),
                    ..Default::default()
                };
                unary(lead.submit_result(req(auth, body)).await)
            }
            Target::GetRepo => unary(lead.get_repo(req(auth, pb::GetRepoRequest {})).await),
            Target::RequestAmendment => {
                let body = pb::AmendmentRequest {
                    files: vec!["src/extra.rs".into()],
                    why: "needed".into(),
                    ..Default::default()
                };
                unary(lead.request_amendment(req(auth, body)).await)
            }
            Target::ReviewResult => {
                let body = pb::ResultReview {
                    request_id: Clone::clone(&self.plan),
                    approve: true,
                    feedback: String::new(),
                };
                unary(operator.review_result(req(auth, body)).await)
            }
            Target::ReviewAmendment => {
                let body = pb::AmendmentReview {
                    request_id: Clone::clone(&self.plan),
                    approve: true,
                    feedback: String::new(),
                };
                unary(operator.review_amendment(req(auth, body)).await)
            }
            Target::OperatorDecide => {
                let body = pb::DecideRequest {
                    request_id: Clone::clone(&self.plan),
                    approve: true,
                    ..Default::default()
                };
                unary(operator.decide(req(auth, body)).await)
            }
            Target::ListAudit => {
                let body = pb::ListAuditRequest::default();
                unary(operator.list_audit(req(auth, body)).await)
            }
            Target::SetBudget => {
                let body = pb::SetBudgetRequest {
                    name: "bob".into(),
                    token_budget: 1_000,
                };
                unary(operator.set_budget(req(auth, body)).await)
            }
            _ => unreachable!("{target:?} is a console endpoint"),
        };
        match result {
            Ok(()) => (OK, String::new()),
            Err(status) => (Answer::Grpc(status.code()), status.message().to_owned()),
        }
    }

    /// Calls a console endpoint with `authorization` (if any).
    async fn web(&self, target: Target, authorization: Option<&[u8]>) -> (Answer, String) {
        let base = self.lead.console.clone().expect("the console is on");
        let post = |path: &str, body: serde_json::Value| {
            self.http.post(format!("{base}{path}")).json(&body)
        };
        let mut request = match target {
            Target::Page => self.http.get(&base),
            Target::State => self.http.get(format!("{base}api/state")),
            Target::Stats => self.http.get(format!("{base}api/stats")),
            Target::Events => self.http.get(format!("{base}api/events")),
            Target::Script => self.http.get(format!("{base}app.js")),
            Target::Approve => post("api/approve", serde_json::json!({"request_id": self.plan})),
            Target::Reject => post(
                "api/reject",
                serde_json::json!({"request_id": self.plan, "feedback": "no"}),
            ),
            Target::Permission => post(
                "api/permission",
                serde_json::json!({"request_id": self.permission, "approve": true}),
            ),
            Target::Shutdown => post("api/shutdown", serde_json::json!({"name": "bob"})),
            Target::Decide => post(
                "api/decide",
                serde_json::json!({"request_id": self.plan, "kind": "result", "approve": true}),
            ),
            _ => unreachable!("{target:?} is an rpc"),
        };
        if let Some(value) = authorization {
            let value = reqwest::header::HeaderValue::from_bytes(value).unwrap();
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let response = within("the console", request.send()).await.unwrap();
        let status = response.status().as_u16();
        if target != Target::Page || status != 200 {
            return (Answer::Http(status), String::new());
        }
        let page = within("the page", response.text()).await.unwrap();
        if page.contains("app.js") {
            (PAGE, String::new())
        } else if page.contains("Operator token") {
            (LOGIN, String::new())
        } else {
            (Answer::Http(status), page)
        }
    }
}

impl Target {
    fn is_lead_rpc(self) -> bool {
        (self as usize) <= Target::CompleteTask as usize
    }

    fn is_console(self) -> bool {
        (self as usize) >= Target::Page as usize
    }

    fn name(self) -> String {
        match self {
            Target::LeadListTasks => "Lead.ListTasks".into(),
            Target::OperatorListTasks => "Operator.ListTasks".into(),
            Target::OperatorDecide => "Operator.Decide".into(),
            Target::Page => "GET /".into(),
            Target::State => "GET /api/state".into(),
            Target::Stats => "GET /api/stats".into(),
            Target::Events => "GET /api/events".into(),
            Target::Script => "GET /app.js".into(),
            Target::Approve => "POST /api/approve".into(),
            Target::Reject => "POST /api/reject".into(),
            Target::Permission => "POST /api/permission".into(),
            Target::Shutdown => "POST /api/shutdown".into(),
            Target::Decide => "POST /api/decide".into(),
            c if c.is_lead_rpc() => format!("Lead.{c:?}"),
            c => format!("Operator.{c:?}"),
        }
    }
}

impl Caller {
    fn describe(self) -> &'static str {
        match self {
            Caller::Nothing => "no authorization metadata",
            Caller::Basic => "`Basic <base64 of the right token>`",
            Caller::EmptyBearer => "`Bearer ` with no token",
            Caller::Garbage => "a non-ASCII garbage authorization value",
            Caller::Unprefixed => "the right token without `Bearer `",
            Caller::Wrong => "a wrong bearer token",
            Caller::Departed => "the session token of carol, who left",
            Caller::JoinToken => "the join token",
            Caller::Alice => "alice's session token",
            Caller::Bob => "bob's session token",
            Caller::OperatorToken => "the operator token",
        }
    }
}

/// `body` with `authorization` metadata, if any.
fn req<T>(authorization: Option<&[u8]>, body: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(body);
    if let Some(value) = authorization {
        let value = MetadataValue::try_from(value).unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn unary<T>(result: Result<tonic::Response<T>, Status>) -> Result<(), Status> {
    result.map(drop)
}

/// A streaming call's status: refused callers may get theirs on the call or
/// on the first message (an authorized stream is not read: it may stay quiet).
async fn stream<T>(
    result: Result<tonic::Response<tonic::Streaming<T>>, Status>,
    refusal: bool,
) -> Result<(), Status> {
    let mut stream = result?.into_inner();
    if refusal {
        within("the stream's first message", stream.message()).await?;
    }
    Ok(())
}

/// What a refused call must leave as it was.
#[derive(Debug, PartialEq)]
struct Snapshot {
    team: Vec<pb::Member>,
    requests: Vec<pb::ProtocolState>,
    tasks: Vec<pb::Task>,
}

impl Snapshot {
    /// How `after` differs from this, a line each.
    fn changes(&self, after: &Snapshot) -> Vec<String> {
        let mut changes = Vec::new();
        if self.team != after.team {
            changes.push(format!(
                "the team changed: {:?} -> {:?}",
                self.team, after.team
            ));
        }
        if self.requests != after.requests {
            let (was, is) = (&self.requests, &after.requests);
            changes.push(format!("the requests changed: {was:?} -> {is:?}"));
        }
        if self.tasks != after.tasks {
            changes.push(format!(
                "the tasks changed: {:?} -> {:?}",
                self.tasks, after.tasks
            ));
        }
        changes
    }
}

async fn snapshot(mut operator: Operator) -> Snapshot {
    let team = operator.list_team(pb::ListTeamRequest::default());
    let team = within("ListTeam", team).await.unwrap().into_inner().members;
    let requests = operator.list_requests(pb::ListRequestsRequest::default());
    let requests = within("ListRequests", requests).await.unwrap();
    let tasks = operator.list_tasks(pb::ListTasksRequest::default());
    let tasks = within("ListTasks", tasks).await.unwrap().into_inner().tasks;
    Snapshot {
        team,
        requests: requests.into_inner().requests,
        tasks,
    }
}

/// One row on its own lead; every way it differs from the table.
async fn row(target: Target, want: [Answer; 11]) -> Vec<String> {
    let fx = Fixture::start().await;
    let mut failures = Vec::new();
    let mut events = fx
        .operator
        .clone()
        .watch(pb::WatchRequest {})
        .await
        .unwrap()
        .into_inner();
    let columns = CALLERS.into_iter().zip(want);
    let mut before = snapshot(fx.operator.clone()).await;
    for (caller, want) in columns.clone().filter(|(_, want)| want.refuses()) {
        let (got, message) = fx.call(target, caller, true).await;
        let (name, who) = (target.name(), caller.describe());
        if got != want {
            failures.push(format!(
                "{name} with {who}: want {want:?}, got {got:?} {message:?}"
            ));
        }
        let after = snapshot(fx.operator.clone()).await;
        for change in before.changes(&after) {
            failures.push(format!("{name} with {who} was refused, yet {change}"));
        }
        before = after;
    }

    // Nothing refused reached the event stream: the next event is bob's marker.
    let marker = uuid::Uuid::new_v4().to_string();
    let report = pb::ToolCallReport {
        tool: "marker".into(),
        outcome: marker.clone(),
        ..Default::default()
    };
    let mut bob = fx.lead.lead_api(&fx.bob).await;
    let marked = bob.report_tool_call(report);
    within("the marker", marked).await.unwrap();
    let mut stray = Vec::new();
    loop {
        let event = within("the marker event", events.message()).await;
        let event = event.unwrap().expect("the event stream goes on");
        match &event.kind {
            Some(pb::event::Kind::ToolCall(t)) if t.outcome == marker => break,
            _ => stray.push(event),
        }
    }
    if !stray.is_empty() {
        failures.push(format!(
            "refused {} calls made events: {stray:?}",
            target.name()
        ));
    }

    for (caller, want) in columns.filter(|(_, want)| !want.refuses()) {
        let (got, message) = fx.call(target, caller, false).await;
        if got != want {
            let (name, who) = (target.name(), caller.describe());
            failures.push(format!(
                "{name} with {who}: want {want:?}, got {got:?} {message:?}"
            ));
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread")]
async fn every_rpc_and_console_endpoint_answers_each_caller_as_the_contract_says() {
    // Build the binaries once, before the rows start leads at the same time.
    mesh_tests::bin_dir();
    let mut rows = tokio::task::JoinSet::new();
    let mut names = std::collections::HashMap::new();
    for (target, want) in GRPC.into_iter().chain(CONSOLE) {
        names.insert(rows.spawn(row(target, want)).id(), target.name());
    }
    let mut failures = Vec::new();
    while let Some(done) = rows.join_next().await {
        match done {
            Ok(row_failures) => failures.extend(row_failures),
            Err(e) => failures.push(format!("{}: the row panicked: {e}", names[&e.id()])),
        }
    }
    failures.sort();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
