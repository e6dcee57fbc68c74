//! The model's answer to a shutdown request: asked on a copy of the
//! conversation (a refusal leaves the real one as it was), fitted to the
//! window without a summary, before the lead's deadline; a model that does
//! not answer in time, or cannot, agrees.

use std::time::{Duration, Instant};

use mesh_llm::{self as chat, Constrain, Message, Role, Tool};
use shared::auth::now_unix_ms;

use super::{window, Limits, ModelDriver, DEFAULT_SHUTDOWN_WAIT, KEPT};
use crate::{
    catalog::{self, Request},
    driver::{ShutdownAnswer, ShutdownRequest},
};

impl ModelDriver {
    /// The answer to `request` ([`crate::driver::Driver::answer_shutdown`]).
    pub(super) async fn answer_shutdown_request(
        &mut self,
        request: &ShutdownRequest,
        tools: &[&'static str],
    ) -> ShutdownAnswer {
        if self.meter.spent() {
            return ShutdownAnswer {
                approve: true,
                reason: "agreed (the token budget is spent: the model was not asked)".into(),
            };
        }
        let (mut conversation, ask) = self.shutdown_conversation(request);
        let schemas = Self::offered(tools);
        let respond: Vec<Tool> = catalog::tool(catalog::RESPOND_SHUTDOWN)
            .into_iter()
            .collect();
        let told = if self.chat.constraint() == Constrain::Schema {
            format!("\n\nAs JSON:\n{}", chat::describe_tools(&respond))
        } else {
            String::new()
        };
        conversation.push(Message::user(format!("{ask}{told}")));
        let wait = match request.deadline_unix_ms {
            0 => DEFAULT_SHUTDOWN_WAIT,
            at => {
                Duration::from_millis(u64::try_from(at - now_unix_ms() - 1_000).unwrap_or_default())
            }
        }
        .max(Duration::from_millis(500));
        let until = tokio::time::Instant::now() + wait;
        let limits = self.limits().await;
        self.cut_to_fit(&mut conversation, &schemas, limits);
        let asked = Asked {
            schemas: &schemas,
            respond: &respond,
            tools,
            ask: &ask,
            limits,
            wait,
            until,
        };
        match self.ask_to_respond(conversation, asked).await {
            Some((approve, reason)) => ShutdownAnswer { approve, reason },
            None => ShutdownAnswer {
                approve: true,
                reason: "agreed (the model did not call respond_shutdown)".into(),
            },
        }
    }

    /// A copy of the conversation in which every open call is answered,
    /// and what the model is asked.
    fn shutdown_conversation(&self, request: &ShutdownRequest) -> (Vec<Message>, String) {
        // Asked on a copy of the conversation in which every open call is
        // answered, so that a refusal leaves the real one as it was.
        let mut conversation = self.messages.clone();
        let open = self.running.iter().chain(self.queue.iter().map(|c| &c.id));
        for id in open {
            conversation.push(Message::tool(
                id,
                "not finished yet: the lead's shutdown request came first",
            ));
        }
        let why = if request.reason.is_empty() {
            String::new()
        } else {
            format!(" Reason: {}.", request.reason)
        };
        let ask = format!(
            "The lead asks you to shut down.{why} Call respond_shutdown now: approve=true to \
             stop (your work so far is kept), or approve=false with a reason to keep working."
        );
        (conversation, ask)
    }

    /// Fits `conversation` into the window, only mechanically: there is no
    /// time to summarize.
    fn cut_to_fit(&self, conversation: &mut [Message], schemas: &[Tool], limits: Limits) {
        let room = limits.window.saturating_sub(u64::from(limits.max_tokens));
        for limit in [window::SHORT_RESULT, window::LAST_RESORT] {
            if self.tokens_of(conversation, schemas) <= room {
                break;
            }
            let all = conversation.len();
            window::cut_contents(&mut conversation[KEPT.min(all)..], all, limit, |m| {
                m.role == Role::Tool || limit == window::LAST_RESORT
            });
        }
    }

    /// Asks the model to call `respond_shutdown`, once, and reminds it once
    /// if it answers without the call; its answer, if it gave one in time.
    async fn ask_to_respond(
        &mut self,
        mut conversation: Vec<Message>,
        asked: Asked<'_>,
    ) -> Option<(bool, String)> {
        for _ in 0..2 {
            let sent = window::request_bytes(&conversation, asked.schemas);
            let started = Instant::now();
            let reply = tokio::time::timeout_at(
                asked.until,
                self.chat.complete_call(
                    &conversation,
                    asked.schemas,
                    Some(asked.respond),
                    Some(asked.limits.max_tokens),
                ),
            )
            .await;
            match reply {
                Ok(Ok(reply)) => {
                    self.account(sent, &reply, started.elapsed());
                    let answered = reply.tool_calls.iter().find_map(|c| {
                        match catalog::parse(&c.function.name, &c.function.arguments, asked.tools) {
                            Ok(Request::RespondShutdown { approve, reason }) => {
                                Some((approve, reason))
                            }
                            _ => None,
                        }
                    });
                    if answered.is_some() {
                        return answered;
                    }
                    conversation.push(Message::assistant(&chat::Reply {
                        content: reply.content,
                        ..chat::Reply::default()
                    }));
                    conversation.push(Message::user(format!(
                        "You did not call respond_shutdown. {}",
                        asked.ask
                    )));
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %mesh_core::display::Escaped(&e.to_string()), "the model could not answer the shutdown request; agreeing");
                    return None;
                }
                Err(_) => {
                    tracing::warn!(
                        wait_ms = asked.wait.as_millis() as u64,
                        "the model did not answer the shutdown request in time; agreeing"
                    );
                    return None;
                }
            }
        }
        None
    }
}

/// What the model is asked to answer a shutdown request with, and how long
/// it may take.
struct Asked<'a> {
    /// The tools it is told of.
    schemas: &'a [Tool],
    /// What it may call: `respond_shutdown`.
    respond: &'a [Tool],
    /// The tools of the current mode, and `respond_shutdown`.
    tools: &'a [&'static str],
    /// What it is asked (said again if it does not call).
    ask: &'a str,
    /// The window and the longest reply.
    limits: Limits,
    /// How long it may take.
    wait: Duration,
    /// When that time is up.
    until: tokio::time::Instant,
}
