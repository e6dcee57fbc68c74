//! The team as an A2A agent: the lead serves `lf.a2a.v1.A2AService` (A2A
//! v1.0) on its gRPC port, and its agent card on the console's port. A
//! message hands the team a task (its state follows the team's work, see
//! [`tasks`]); a message on a task whose plan, result or amendment waits
//! is the operator's decision on it. A task its owner completed with a
//! reply (a question answered) comes back to a blocking `SendMessage` as
//! a message, A2A's direct reply; the team keeps the task. Callers
//! authenticate as an operator (`--operator-token NAME=TOKEN`): the task's
//! origin and every decision's history say which.
//!
//! `SendStreamingMessage` and `SubscribeToTask` stream a task's updates,
//! from the same notices as `Watch`. `CancelTask` withdraws the task (its
//! claimant is told, its pending requests of it expire). Push
//! notifications post a task's updates to the caller's webhook
//! ([`push`], with `--a2a-push-allow`). The same service is served as
//! A2A's JSON-RPC binding on the console's port ([`jsonrpc`]).

use std::pin::Pin;

use mesh_a2a::pb::{self as a2a, a2a_service_server::A2aService, send_message_response::Payload};
use mesh_core::{
    access::{Admitted, Call, Caller, Person, Role},
    op::{CreateTask, Decide, ListRequests, ListTasks, PageAsk, WithdrawTask},
    protocol::{Kind, Request as CoreRequest, Status as RequestStatus},
    tasks::Task,
    team::Listed,
};
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status};

use crate::{
    callers::{claim_of, token_of, Tokens},
    hub::{Claim, Command, HubHandle},
};

mod answers;
pub(crate) mod card;
mod cursor;
mod errors;
pub(crate) mod jsonrpc;
pub(crate) mod push;
pub(crate) mod rest;
mod tasks;
mod updates;

use errors::{invalid, not_cancelable, task_not_found, unsupported};
use tasks::Seen;

/// The version of A2A served.
const VERSION: &str = "1.0";

/// The most tasks a `ListTasks` page holds, and how many by default.
const MOST_PAGE: i32 = 100;
const DEFAULT_PAGE: usize = 50;

/// How many entries one internal list call reads at a time.
const READ_PAGE: usize = 1_000;

/// How many updates a stream holds for a client that does not read.
const UPDATES_HELD: usize = 16;

/// `lf.a2a.v1.A2AService`.
#[derive(Debug, Clone)]
pub(crate) struct A2a {
    hub: HubHandle,
    tokens: Tokens,
    /// The webhooks (`--a2a-push-allow`; none: push is not offered).
    push: Option<std::sync::Arc<push::Push>>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The caller, admitted: its operator name (`operator` for the unnamed
/// token), and what the hub admitted, which its ops carry.
#[derive(Debug)]
struct Operator(String, Admitted);

impl Operator {
    /// Who handed a task in.
    fn origin(&self) -> String {
        format!("a2a {}", self.0)
    }

    /// Who decided, for the request's history.
    fn decider(&self) -> String {
        if self.0 == "operator" {
            "operator".into()
        } else {
            format!("operator {}", self.0)
        }
    }

    /// The claim the caller's ops carry: admitted already, not again.
    fn claim(&self) -> Claim {
        Claim::Admitted(self.1.clone())
    }
}

/// The claim the lead's own reads carry: those it makes for a caller it
/// admitted, and those of a push (for a config such a caller set).
/// A `history_length`: none is every message; negative is an error.
fn history_length(asked: Option<i32>, field: &str) -> Result<Option<usize>, Status> {
    asked
        .map(|n| usize::try_from(n).map_err(|_| invalid(field, "must not be negative")))
        .transpose()
}

impl A2a {
    pub(crate) fn new(hub: HubHandle, tokens: Tokens, push: Option<push::Push>) -> Self {
        Self {
            hub,
            tokens,
            push: push.map(std::sync::Arc::new),
        }
    }

    /// Admits the caller of `request` as an operator of at least `role`
    /// (after checking the version it speaks): who they are. A caller
    /// without a token, where `--a2a-open NAME` lets one in, is reviewer
    /// NAME.
    async fn admit<T>(&self, request: &Request<T>, role: Role) -> Result<Operator, Status> {
        errors::check_version(request.metadata())?;
        let claim = match (&self.tokens.a2a_open, token_of(request)) {
            (Some(name), None) => {
                Claim::Known(Caller::Operator(Person::token(name, Role::Reviewer)))
            }
            _ => claim_of(request, &self.tokens).await,
        };
        let admitted = self
            .hub
            .call(|reply| Command::Admit {
                claim,
                door: Call::Operator(role),
                reply,
            })
            .await?;
        let name = admitted
            .person()
            .map_or_else(|| "operator".to_owned(), |p| p.name.clone());
        Ok(Operator(name, admitted))
    }

    /// Every task, oldest first, each with what of it waits and its
    /// landed result.
    async fn snapshot(&self) -> Result<Vec<Seen>, Status> {
        let mut tasks = Vec::new();
        let mut after = None;
        loop {
            let page: Listed<Task> = self
                .hub
                .operate(
                    Claim::operator(),
                    Ok(ListTasks {
                        status: None,
                        page: PageAsk {
                            after,
                            size: READ_PAGE,
                        },
                    }),
                )
                .await?;
            after = page.entries.last().map(|(key, _)| *key);
            tasks.extend(page.entries.into_iter().map(|(_, t)| t));
            if !page.more {
                break;
            }
        }
        let pending = self.requests(Some(RequestStatus::Pending), None).await?;
        let approved = self.requests(Some(RequestStatus::Approved), None).await?;
        let mut decided = self.requests(Some(RequestStatus::Rejected), None).await?;
        decided.extend(approved.iter().cloned());
        Ok(tasks
            .into_iter()
            .map(|task| Seen {
                waiting: tasks::waiting(&task, &pending).cloned(),
                landed: tasks::landed_of(&task, &approved).cloned(),
                answered: answers::answered(&task, &decided),
                task,
            })
            .collect())
    }

    /// Every request of `status` and `kind` (`None`: any), oldest first.
    async fn requests(
        &self,
        status: Option<RequestStatus>,
        kind: Option<Kind>,
    ) -> Result<Vec<CoreRequest>, Status> {
        let mut found = Vec::new();
        let mut after = None;
        loop {
            let page: Listed<CoreRequest> = self
                .hub
                .operate(
                    Claim::operator(),
                    Ok(ListRequests {
                        status,
                        kind,
                        page: PageAsk {
                            after,
                            size: READ_PAGE,
                        },
                    }),
                )
                .await?;
            after = page.entries.last().map(|(key, _)| *key);
            found.extend(page.entries.into_iter().map(|(_, r)| r));
            if !page.more {
                return Ok(found);
            }
        }
    }

    /// Task `id` as it stands.
    async fn task(&self, id: &str) -> Result<Seen, Status> {
        self.snapshot()
            .await?
            .into_iter()
            .find(|seen| seen.task.task_id == id)
            .ok_or_else(|| task_not_found(id))
    }

    /// Waits until task `id` has ended or waits for its caller (what a
    /// blocking `SendMessage` returns on), within the call's deadline.
    async fn settle(&self, id: &str) -> Result<(), Status> {
        // Watching first, so no change between the look and the wait is missed.
        let mut events = self
            .hub
            .call(|reply| Command::Watch {
                claim: Claim::operator(),
                reply,
            })
            .await?;
        loop {
            let state = self.task(id).await?.state();
            if tasks::terminal(state) || tasks::interrupted(state) {
                return Ok(());
            }
            match events.next().await {
                Some(Ok(_)) => {}
                // The lead stops, or the watch fell behind: the task as it stands.
                Some(Err(_)) | None => return Ok(()),
            }
        }
    }

    /// What a `SendMessage` asks: a new task, or (a message on a task) the
    /// caller's decision on what of it waits. The task's id, and how the
    /// caller wants the answer.
    async fn take(
        &self,
        by: &Operator,
        ask: a2a::SendMessageRequest,
    ) -> Result<(String, a2a::SendMessageConfiguration), Status> {
        let message = ask
            .message
            .ok_or_else(|| invalid("message", "is required"))?;
        if message.message_id.is_empty() {
            return Err(invalid("message.message_id", "is required"));
        }
        if message.parts.is_empty() {
            return Err(invalid("message.parts", "is empty"));
        }
        if message.role != a2a::Role::User as i32 {
            return Err(invalid("message.role", "must be ROLE_USER"));
        }
        let config = ask.configuration.unwrap_or_default();
        history_length(config.history_length, "configuration.history_length")?;
        let webhook = push::asked(self, &config)?;
        if !message.task_id.is_empty() {
            // Kept first, so the webhook hears what the answer changes.
            push::keep(self, webhook, &message.task_id).await?;
            self.answer(by, &message).await?;
            return Ok((message.task_id, config));
        }
        let context = if message.context_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            message.context_id.clone()
        };
        let new = tasks::new_task(&message, &by.origin(), context)?;
        let task: Task = self
            .hub
            .operate(
                by.claim(),
                Ok(CreateTask {
                    task_id: uuid::Uuid::new_v4().to_string(),
                    task: new,
                }),
            )
            .await?;
        push::keep(self, webhook, &task.task_id).await?;
        Ok((task.task_id, config))
    }

    /// A message on task `id`: the caller's decision on what of it waits.
    async fn answer(&self, by: &Operator, message: &a2a::Message) -> Result<(), Status> {
        let Seen { task, waiting, .. } = self.task(&message.task_id).await?;
        let context = tasks::context_of(&task);
        if !message.context_id.is_empty() && message.context_id != context {
            return Err(invalid(
                "message.context_id",
                format!("is not task {:?}'s context ({context:?})", task.task_id),
            ));
        }
        let state = tasks::state(&task, waiting.as_ref());
        if tasks::terminal(state) {
            return Err(unsupported(format!(
                "task {:?} is {}; it takes no more messages",
                task.task_id,
                state.as_str_name()
            )));
        }
        let Some(request) = waiting else {
            return Err(unsupported(format!(
                "nothing of task {:?} waits for an answer now ({})",
                task.task_id,
                state.as_str_name()
            )));
        };
        let (approve, feedback) = answers::decision(message)?;
        let decide = Decide {
            request_id: request.id().clone(),
            approve,
            feedback,
            grant: None,
            allow_overlap: false,
            by: by.decider(),
            kind: Some(request.opening.kind),
        };
        let _: CoreRequest = self.hub.operate(by.claim(), Ok(decide)).await?;
        Ok(())
    }
}

#[tonic::async_trait]
impl A2aService for A2a {
    async fn send_message(
        &self,
        request: Request<a2a::SendMessageRequest>,
    ) -> Result<Response<a2a::SendMessageResponse>, Status> {
        let by = self.admit(&request, Role::Reviewer).await?;
        let (id, config) = self.take(&by, request.into_inner()).await?;
        let history = history_length(config.history_length, "configuration.history_length")?;
        if !config.return_immediately {
            self.settle(&id).await?;
        }
        let seen = self.task(&id).await?;
        // A question its owner answered with a reply: A2A's direct reply.
        let payload = if tasks::replied(&seen.task) {
            Payload::Message(tasks::reply(&seen.task))
        } else {
            Payload::Task(seen.to_a2a(history, true))
        };
        Ok(Response::new(a2a::SendMessageResponse {
            payload: Some(payload),
        }))
    }

    type SendStreamingMessageStream = BoxStream<a2a::StreamResponse>;

    async fn send_streaming_message(
        &self,
        request: Request<a2a::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let by = self.admit(&request, Role::Reviewer).await?;
        let (id, _) = self.take(&by, request.into_inner()).await?;
        Ok(Response::new(updates::updates(self, id, true).await?))
    }

    async fn get_task(
        &self,
        request: Request<a2a::GetTaskRequest>,
    ) -> Result<Response<a2a::Task>, Status> {
        self.admit(&request, Role::Viewer).await?;
        let ask = request.into_inner();
        if ask.id.is_empty() {
            return Err(invalid("id", "is required"));
        }
        let history = history_length(ask.history_length, "history_length")?;
        Ok(Response::new(
            self.task(&ask.id).await?.to_a2a(history, true),
        ))
    }

    async fn list_tasks(
        &self,
        request: Request<a2a::ListTasksRequest>,
    ) -> Result<Response<a2a::ListTasksResponse>, Status> {
        self.admit(&request, Role::Viewer).await?;
        let ask = request.into_inner();
        let size = match ask.page_size {
            None => DEFAULT_PAGE,
            Some(n) if (1..=MOST_PAGE).contains(&n) => usize::try_from(n).unwrap_or(DEFAULT_PAGE),
            Some(n) => {
                return Err(invalid(
                    "page_size",
                    format!("{n} is not between 1 and {MOST_PAGE}"),
                ))
            }
        };
        let state = match ask.status {
            0 => None,
            n => Some(
                a2a::TaskState::try_from(n)
                    .map_err(|_| invalid("status", format!("{n} is not a TaskState")))?,
            ),
        };
        let history = history_length(ask.history_length, "history_length")?;
        let after = match ask.page_token.as_str() {
            "" => None,
            token => Some(
                cursor::parse(token)
                    .ok_or_else(|| invalid("page_token", "is not a token a ListTasks page gave"))?,
            ),
        };
        let since = ask
            .status_timestamp_after
            .map(|t| t.seconds.saturating_mul(1000) + i64::from(t.nanos / 1_000_000));
        let mut matching: Vec<Seen> = self
            .snapshot()
            .await?
            .into_iter()
            .filter(|s| ask.context_id.is_empty() || tasks::context_of(&s.task) == ask.context_id)
            .filter(|s| since.is_none_or(|since| s.task.updated_at_unix_ms > since))
            .filter(|s| state.is_none_or(|state| s.state() == state))
            .collect();
        // Newest change first; the id breaks ties, so the cursor is exact.
        matching.sort_by(|a, b| {
            (b.task.updated_at_unix_ms, &b.task.task_id)
                .cmp(&(a.task.updated_at_unix_ms, &a.task.task_id))
        });
        let total = matching.len();
        let start = match &after {
            None => 0,
            Some((at, id)) => matching
                .iter()
                .position(|s| (s.task.updated_at_unix_ms, &s.task.task_id) < (*at, id))
                .unwrap_or(total),
        };
        let page: Vec<&Seen> = matching.iter().skip(start).take(size).collect();
        let next_page_token = match page.last() {
            Some(last) if start + page.len() < total => {
                cursor::make(last.task.updated_at_unix_ms, &last.task.task_id)
            }
            _ => String::new(),
        };
        let artifacts = ask.include_artifacts.unwrap_or(false);
        Ok(Response::new(a2a::ListTasksResponse {
            tasks: page.iter().map(|s| s.to_a2a(history, artifacts)).collect(),
            next_page_token,
            page_size: i32::try_from(size).unwrap_or(MOST_PAGE),
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
        }))
    }

    async fn cancel_task(
        &self,
        request: Request<a2a::CancelTaskRequest>,
    ) -> Result<Response<a2a::Task>, Status> {
        let by = self.admit(&request, Role::Reviewer).await?;
        let id = request.into_inner().id;
        if id.is_empty() {
            return Err(invalid("id", "is required"));
        }
        let Seen { task, waiting, .. } = self.task(&id).await?;
        let state = tasks::state(&task, waiting.as_ref());
        if tasks::terminal(state) {
            return Err(not_cancelable(&id, state.as_str_name()));
        }
        let withdraw = WithdrawTask {
            task_id: id.clone(),
            reason: format!("cancelled by {} (A2A CancelTask)", by.origin()),
            by: by.decider(),
        };
        let _: Task = self
            .hub
            .operate(by.claim(), Ok(withdraw))
            .await
            .map_err(|e| match e {
                // Ended meanwhile.
                crate::error::HubError::FailedPrecondition(_) => not_cancelable(&id, "ended"),
                e => Status::from(e),
            })?;
        Ok(Response::new(self.task(&id).await?.to_a2a(None, true)))
    }

    type SubscribeToTaskStream = BoxStream<a2a::StreamResponse>;

    async fn subscribe_to_task(
        &self,
        request: Request<a2a::SubscribeToTaskRequest>,
    ) -> Result<Response<Self::SubscribeToTaskStream>, Status> {
        self.admit(&request, Role::Viewer).await?;
        let id = request.into_inner().id;
        if id.is_empty() {
            return Err(invalid("id", "is required"));
        }
        let Seen { task, waiting, .. } = self.task(&id).await?;
        let state = tasks::state(&task, waiting.as_ref());
        if tasks::terminal(state) {
            return Err(unsupported(format!(
                "task {id:?} is {}; there is nothing to follow",
                state.as_str_name()
            )));
        }
        Ok(Response::new(updates::updates(self, id, false).await?))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<a2a::TaskPushNotificationConfig>,
    ) -> Result<Response<a2a::TaskPushNotificationConfig>, Status> {
        self.admit(&request, Role::Reviewer).await?;
        Ok(Response::new(
            push::create(self, request.into_inner()).await?,
        ))
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<a2a::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<a2a::TaskPushNotificationConfig>, Status> {
        self.admit(&request, Role::Viewer).await?;
        Ok(Response::new(push::get(self, request.into_inner()).await?))
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<a2a::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<a2a::ListTaskPushNotificationConfigsResponse>, Status> {
        self.admit(&request, Role::Viewer).await?;
        Ok(Response::new(push::list(self, request.into_inner()).await?))
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<a2a::GetExtendedAgentCardRequest>,
    ) -> Result<Response<a2a::AgentCard>, Status> {
        self.admit(&request, Role::Viewer).await?;
        Err(unsupported(
            "there is no extended agent card (the card says extendedAgentCard: false)",
        ))
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<a2a::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<()>, Status> {
        self.admit(&request, Role::Reviewer).await?;
        push::delete(self, request.into_inner()).await?;
        Ok(Response::new(()))
    }
}

/// The media type a request's body was sent as (`Content-Type` without its
/// parameters, lower case; empty when none was given).
fn media_type(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}
