//! The teammate's calls to the lead: joining, and every later call, retried
//! with backoff while the lead is unreachable (and no longer than the limit);
//! acknowledging the inbox; sending a message and asking permission for the
//! driver; reporting tool calls; leaving. Which refusals end the session
//! ([`fatal_status`]) and which failures are worth repeating ([`transient`])
//! are decided here. None of it keeps protocol state: that is
//! [`crate::protocol_state`]'s.

use std::{future::Future, time::Duration};

use mesh_core::{
    display::Escaped,
    effect::Message,
    error::FieldError,
    limits,
    usage::{Standing, Usage},
};
use shared::{
    auth::BearerToken,
    leads::Follow,
    pb::{self, lead_client::LeadClient},
    wire::ToPb,
};
use tonic::{service::interceptor::InterceptedService, Code, Status};

use crate::{
    backoff::Backoff, catalog, config::Config, driver::Observation, error::SessionError,
    protocol_state::Inbound, tools::ToolCall,
};

/// The lead's API, with a bearer token attached, over the transport that
/// follows the active lead (of several on one database).
pub(crate) type Client = LeadClient<InterceptedService<Follow, BearerToken>>;

/// The lead, as a member that joined calls it.
#[derive(Debug, Clone)]
pub(crate) struct Lead {
    /// The lead, with the session token attached.
    client: Client,
    /// The lead's URL (or the leads'), for errors.
    url: String,
    /// How long the lead may be unreachable before the teammate gives up.
    gone_limit: Duration,
    /// The member name, for the log.
    name: String,
    /// What the lead said of the member's model use at the join (a lead
    /// that does not count usage says nothing).
    usage: Option<Standing>,
}

impl Lead {
    /// Joins the lead as `config` says (retrying while it is unreachable)
    /// and returns the lead with the session token attached. With several
    /// leads, every call goes to the active one: when the lead a call went
    /// to is gone or a standby, the next try finds the active lead (the one
    /// the standby named first), and the session goes on there.
    pub(crate) async fn join(config: &Config) -> Result<Self, SessionError> {
        let channel = Follow::new(config.leads.clone());
        let leads = config.leads.to_string();
        let join_token = BearerToken::new(&config.join_token)
            .map_err(|e| SessionError::Setup(e.message().to_owned()))?;
        let mut joiner = LeadClient::with_interceptor(channel.clone(), join_token);
        let sandbox = config.commands.sandbox.report();
        sandbox.announce(&config.name);
        let request = pb::JoinRequest {
            name: config.name.clone(),
            role: config.role.clone(),
            token_budget: config.token_budget.unwrap_or_default(),
            sandbox: Some(sandbox.to_pb()),
            decoding: config.decoding.clone(),
        };
        let mut backoff = Backoff::new(config.lead_gone_limit);
        let joined = loop {
            match joiner.join(request.clone()).await {
                Ok(response) => break response.into_inner(),
                Err(status) if transient(&status) => {
                    let cause = shared::transport::cause(&status);
                    if let Some(url) = serves_tls(config.leads.urls(), &cause).await {
                        // Plain text at a lead that serves TLS: no retry
                        // can help.
                        return Err(SessionError::Setup(format!(
                            "--lead {url}: the lead speaks TLS, not plain HTTP/2 ({cause}); \
                             dial https:// (with --ca)"
                        )));
                    }
                    // Every attempt says why it failed: a teammate that
                    // cannot join is never silent.
                    tracing::warn!(lead = %Escaped(&leads), error = %Escaped(&cause), "cannot reach the lead to join; retrying");
                    if !backoff.wait().await {
                        return Err(SessionError::LeadGone(format!(
                            "{leads} (the last attempt: {cause})"
                        )));
                    }
                }
                Err(status) => {
                    return Err(SessionError::Rpc {
                        rpc: "Join",
                        status,
                    })
                }
            }
        };
        tracing::info!(member = %Escaped(&config.name), member_id = %Escaped(&joined.member_id), "joined the team in plan mode");
        let session_token = BearerToken::new(&joined.session_token)
            .map_err(|e| SessionError::Setup(e.message().to_owned()))?;
        Ok(Self {
            client: LeadClient::with_interceptor(channel, session_token),
            url: leads,
            gone_limit: config.lead_gone_limit,
            name: config.name.clone(),
            usage: joined.usage.as_ref().map(standing),
        })
    }

    /// What the lead said of the member's model use when it joined.
    pub(crate) fn joined_usage(&self) -> Option<Standing> {
        self.usage
    }

    /// Reports this process's model use (`epoch` names the process): the
    /// lead's totals and the budget, or the code with which the lead did not
    /// take the report (one that does not count usage answers
    /// UNIMPLEMENTED): usage is bookkeeping, and never ends the session.
    pub(crate) async fn report_usage(
        &self,
        epoch: &str,
        totals: Usage,
    ) -> Result<Result<Standing, Code>, SessionError> {
        let report = pb::UsageReport {
            epoch: epoch.to_owned(),
            totals: Some(totals.to_pb()),
        };
        let reported = self
            .retry("ReportUsage", |mut client| {
                let report = report.clone();
                async move { client.report_usage(report).await }
            })
            .await;
        match reported {
            Ok(status) => Ok(Ok(standing(&status))),
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::debug!(error = %Escaped(&status.to_string()), "the lead did not take the usage report");
                Ok(Err(status.code()))
            }
            Err(e) => Err(e),
        }
    }

    /// The client, for the inbox reader.
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// What leaves the team for this member.
    pub(crate) fn leaver(&self) -> Leaver {
        Leaver {
            client: self.client.clone(),
        }
    }

    /// Calls the lead until the call succeeds, or fails for a reason other
    /// than the lead being unreachable, with capped exponential backoff and
    /// jitter; gives up once the lead has been gone for the limit. Every call
    /// the teammate makes is safe to repeat: ids are chosen by the teammate.
    pub(crate) async fn retry<T, F, Fut>(
        &self,
        rpc: &'static str,
        mut call: F,
    ) -> Result<T, SessionError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut backoff = Backoff::new(self.gone_limit);
        loop {
            match call(self.client.clone()).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if transient(&status) => {
                    let cause = shared::transport::cause(&status);
                    tracing::warn!(rpc, error = %Escaped(&cause), "the lead is unreachable; retrying");
                    if !backoff.wait().await {
                        return Err(SessionError::LeadGone(format!(
                            "{} (the last attempt: {cause})",
                            self.url
                        )));
                    }
                }
                Err(status) => return Err(SessionError::Rpc { rpc, status }),
            }
        }
    }

    /// Acknowledges everything up to `seq`.
    pub(crate) async fn ack(&self, seq: u64) -> Result<(), SessionError> {
        self.retry("Ack", |mut client| async move {
            client.ack(pb::AckRequest { seq }).await
        })
        .await
        .map(|_| ())
    }

    /// Sends a text message for the driver (`send_message`), reported like a
    /// tool call; a refusal by the lead is the call's error.
    pub(crate) async fn send(&self, to: String, text: String) -> Result<Observation, SessionError> {
        let request = pb::SendRequest {
            to: to.clone(),
            text: Some(pb::Text { content: text }),
            message_id: uuid::Uuid::new_v4().to_string(),
        };
        let args = serde_json::json!({ "to": to, "text": request.text.as_ref().map(|t| crate::tools::truncate(&t.content, 120)) }).to_string();
        let sent = self
            .retry("Send", |mut client| {
                let request = request.clone();
                async move { client.send(request).await }
            })
            .await;
        let result = match sent {
            Ok(response) if response.skipped.is_empty() => Ok(format!("sent to {to}")),
            Ok(response) => Ok(format!(
                "sent to {to}; not delivered to {} (their inbox is full)",
                response.skipped.join(", ")
            )),
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => Err(format!(
                "the lead refused the message: {}",
                status.message()
            )),
            Err(e) => return Err(e),
        };
        let outcome = match &result {
            Ok(text) | Err(text) => text.clone(),
        };
        self.report(catalog::SEND_MESSAGE, &args, result.is_ok(), &outcome)
            .await?;
        Ok(Observation::ToolResult(result))
    }

    /// Asks the lead to allow `call`, showing the whole call: `Ok` with the
    /// request's id once asked. A call too long for a permission request is
    /// not asked, and one the lead refuses to consider (a status other than
    /// an unreachable lead or a bad token) is refused with the lead's
    /// message: `Err` with why, and the call does not run.
    pub(crate) async fn request_permission(
        &self,
        call: &ToolCall,
    ) -> Result<Result<String, String>, SessionError> {
        let request = pb::PermissionRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            tool: call.name().to_owned(),
            args_json: call.full_args_json(),
        };
        for (field, value, limit) in [
            ("tool", &request.tool, limits::TOOL),
            ("args_json", &request.args_json, limits::ARGS_JSON),
        ] {
            if value.len() > limit {
                let reason = format!(
                    "{}: the permission request's {field} would be {} bytes, more than the \
                     {limit} the lead accepts; not asked, not run",
                    call.name(),
                    value.len()
                );
                tracing::warn!(tool = call.name(), reason = %reason, "permission not asked");
                return Ok(Err(reason));
            }
        }
        let id = request.request_id.clone();
        let asked = self
            .retry("RequestPermission", |mut client| {
                let request = request.clone();
                async move { client.request_permission(request).await }
            })
            .await;
        match asked {
            Ok(_) => {}
            Err(SessionError::Rpc { status, .. }) if !fatal_status(&status) => {
                tracing::warn!(tool = call.name(), error = %Escaped(&status.to_string()), "the lead refused the permission request");
                return Ok(Err(format!(
                    "the lead refused the permission request: {}",
                    status.message()
                )));
            }
            Err(e) => return Err(e),
        }
        tracing::info!(request_id = %id, tool = call.name(), "asked the lead for permission");
        Ok(Ok(id))
    }

    /// Reports one tool call to the lead, cut to the report's limits so that
    /// the lead never refuses a report for its size: every call shows in the
    /// record. Only the lead refusing the session itself is an error.
    pub(crate) async fn report(
        &self,
        tool: &str,
        args_json: &str,
        allowed: bool,
        outcome: &str,
    ) -> Result<(), SessionError> {
        let report = pb::ToolCallReport {
            tool: limits::cut(tool, limits::TOOL),
            args_json: limits::cut(args_json, limits::REPORT_ARGS_JSON),
            allowed,
            outcome: limits::cut(outcome, limits::REPORT_OUTCOME),
            member: String::new(),
        };
        tracing::info!(member = %Escaped(&self.name), tool = %Escaped(&report.tool), args = %Escaped(&report.args_json), allowed, outcome = %Escaped(&report.outcome), "tool call");
        let reported = self
            .retry("ReportToolCall", |mut client| {
                let report = report.clone();
                async move { client.report_tool_call(report).await }
            })
            .await;
        match reported {
            Ok(_) => Ok(()),
            Err(e) if session_refused(&e) => Err(e),
            Err(e) => {
                tracing::warn!(error = %Escaped(&e.to_string()), "could not report a tool call");
                Ok(())
            }
        }
    }
}

/// Leaves the team (`Leave`) for a session whose owner went away.
#[derive(Debug, Clone)]
pub struct Leaver {
    /// The lead, with the session token attached.
    client: Client,
}

impl Leaver {
    /// Tells the lead the member has left, trying for a few seconds at most:
    /// the process is about to end either way.
    pub async fn leave(mut self, reason: &str) -> Result<(), SessionError> {
        let request = pb::LeaveRequest {
            reason: limits::cut(reason, limits::REASON),
        };
        let mut backoff = Backoff::new(Duration::from_secs(3));
        loop {
            match self.client.leave(request.clone()).await {
                Ok(_) => return Ok(()),
                Err(status) if transient(&status) && backoff.wait().await => {}
                Err(status) => {
                    return Err(SessionError::Rpc {
                        rpc: "Leave",
                        status,
                    })
                }
            }
        }
    }
}

/// What the lead said of a member's model use, in the core's words (no
/// total: nothing used).
fn standing(status: &pb::UsageStatus) -> Standing {
    Standing {
        total: status.total.as_ref().map(Usage::from).unwrap_or_default(),
        token_budget: status.token_budget,
    }
}

/// An envelope from the inbox in the core's words, and the trace context a
/// shutdown request carries (empty for anything else). A decision of the
/// teammate's plan or amendment that the core cannot hold (a malformed id
/// or grant) is an error: the session cannot go on without knowing what it
/// may write. Any other body it cannot read is passed on as none (as one of
/// a newer lead's kinds would be), with a warning.
pub(crate) fn inbound(envelope: pb::Envelope) -> Result<(Inbound, String), FieldError> {
    use pb::envelope::Body;
    let traceparent = match &envelope.body {
        Some(Body::ShutdownRequest(request)) => request.traceparent.clone(),
        _ => String::new(),
    };
    let message = match envelope.body {
        None => None,
        Some(body) => {
            let decides_writes = matches!(
                body,
                Body::PlanApprovalResponse(_) | Body::AmendmentResponse(_)
            );
            match Message::try_from(body) {
                Ok(message) => Some(message),
                Err(e) if decides_writes => return Err(e),
                Err(e) => {
                    tracing::warn!(seq = envelope.seq, error = %e, "an envelope this teammate cannot read; passed over");
                    None
                }
            }
        }
    };
    let inbound = Inbound {
        seq: envelope.seq,
        message_id: envelope.message_id,
        from: envelope.from,
        message,
    };
    Ok((inbound, traceparent))
}

/// Whether the lead refused the caller itself (an unknown or wrong token):
/// the session cannot go on. Any other refusal concerns one call.
pub(crate) fn fatal_status(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unauthenticated | Code::PermissionDenied
    )
}

/// Whether the error is the lead refusing the session itself, which ends it
/// even where the failure of one call (a report) would not.
fn session_refused(error: &SessionError) -> bool {
    match error {
        SessionError::Rpc { status, .. } => fatal_status(status),
        SessionError::LeadGone(_) | SessionError::Setup(_) | SessionError::Driver(_) => false,
    }
}

/// The `http://` lead among `urls` that answers in TLS, asked only when a
/// connection was made and then failed (a refused connection is a lead not
/// there yet, not one speaking another protocol).
async fn serves_tls<'a>(urls: &'a [String], cause: &str) -> Option<&'a str> {
    if cause.contains("refused") {
        return None;
    }
    for url in urls.iter().filter(|u| u.starts_with("http://")) {
        if shared::transport::speaks_tls(url).await {
            return Some(url);
        }
    }
    None
}

/// Whether a failed call may succeed if repeated: the lead was unreachable,
/// or the connection broke under the call.
fn transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refused_token_ends_the_session() {
        for code in [Code::Unauthenticated, Code::PermissionDenied] {
            let status = Status::new(code, "no");
            assert!(fatal_status(&status), "{code:?}");
            assert!(!transient(&status), "{code:?}");
            assert!(session_refused(&SessionError::Rpc {
                rpc: "Send",
                status
            }));
        }
        for code in [
            Code::InvalidArgument,
            Code::FailedPrecondition,
            Code::NotFound,
        ] {
            let status = Status::new(code, "no");
            assert!(!fatal_status(&status), "{code:?}");
            assert!(!session_refused(&SessionError::Rpc {
                rpc: "Send",
                status
            }));
        }
        assert!(!session_refused(&SessionError::LeadGone(
            "http://lead".into()
        )));
    }

    #[test]
    fn an_unreachable_lead_or_a_broken_call_is_retried() {
        for code in [
            Code::Unavailable,
            Code::Unknown,
            Code::Cancelled,
            Code::DeadlineExceeded,
        ] {
            assert!(transient(&Status::new(code, "gone")), "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::ResourceExhausted,
            Code::Unauthenticated,
        ] {
            assert!(!transient(&Status::new(code, "no")), "{code:?}");
        }
    }
}
