//! What the session does with each envelope: the protocol state takes it in
//! ([`crate::protocol_state::ProtocolState::receive`]), the session logs what
//! it meant, acknowledges it, and says what it was to the step waiting.

use mesh_core::{display::Escaped, effect::Message, protocol::Decision};

use super::{mailbox::Next, Exit, Session};
use crate::{
    driver::{Driver, ShutdownRequest},
    error::SessionError,
    protocol_state::{Inbound, Received, Taken},
};

/// What an envelope meant for the step in progress.
pub(super) enum Handled {
    /// Nothing the step waits for.
    Nothing,
    /// Stop: a signal came while nothing ran.
    Exit(Exit),
    /// A shutdown request, to be answered by the driver; its envelope's
    /// `seq` is acknowledged only if the teammate refuses (and goes on).
    Shutdown(ShutdownRequest, u64),
    /// The decision on the plan under review, applied to the gate (and
    /// queued in the state for the driver).
    Decided,
    /// The answer to a permission request: its id, and the answer.
    Permission(String, Decision),
    /// The answer to a result request.
    Result(ResultAnswer),
    /// The answer to an amendment: its id, and the answer (with the
    /// widened grant).
    Amendment(String, Decision),
    /// Nothing arrived before the deadline.
    TimedOut,
}

/// The lead's answer to a result request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ResultAnswer {
    /// The request.
    pub(super) request_id: String,
    /// Landed.
    pub(super) approve: bool,
    /// Why.
    pub(super) feedback: String,
    /// The commit it landed as.
    pub(super) commit: String,
    /// The paths that conflicted.
    pub(super) conflicts: Vec<String>,
    /// Where the team branch stands.
    pub(super) branch_head: String,
}

impl Session {
    /// Handles one envelope that arrived already, answering a shutdown
    /// request through the driver; `Some` to stop.
    pub(super) async fn handle<D: Driver>(
        &mut self,
        driver: &mut D,
        envelope: Inbound,
    ) -> Result<Option<Exit>, SessionError> {
        match self.on_incoming(envelope).await? {
            Handled::Exit(exit) => Ok(Some(exit)),
            Handled::Shutdown(request, seq) => self.answer_shutdown(driver, request, seq).await,
            Handled::Nothing
            | Handled::Decided
            | Handled::Permission(..)
            | Handled::Result(_)
            | Handled::Amendment(..)
            | Handled::TimedOut => Ok(None),
        }
    }

    /// Waits for the next envelope and handles it, a shutdown request
    /// through the driver. A signal while waiting counts as agreeing to
    /// stop: there is no tool call in progress.
    pub(super) async fn next_incoming<D: Driver>(
        &mut self,
        driver: &mut D,
    ) -> Result<Handled, SessionError> {
        self.next_incoming_until(driver, None).await
    }

    /// [`Session::next_incoming`], giving up waiting (not handling) at `until`.
    pub(super) async fn next_incoming_until<D: Driver>(
        &mut self,
        driver: &mut D,
        until: Option<tokio::time::Instant>,
    ) -> Result<Handled, SessionError> {
        let envelope = match self.mailbox.next(until).await? {
            Next::Envelope(envelope) => *envelope,
            Next::Stop => return Ok(Handled::Exit(Exit::Signal)),
            Next::TimedOut => return Ok(Handled::TimedOut),
        };
        match self.on_incoming(envelope).await? {
            Handled::Shutdown(request, seq) => {
                Ok(match self.answer_shutdown(driver, request, seq).await? {
                    Some(exit) => Handled::Exit(exit),
                    None => Handled::Nothing,
                })
            }
            handled => Ok(handled),
        }
    }

    /// Handles one envelope from the inbox.
    pub(super) async fn on_incoming(&mut self, envelope: Inbound) -> Result<Handled, SessionError> {
        let received = self
            .state
            .receive(envelope, &self.workspace, &self.config.commands)
            .map_err(|e| SessionError::Setup(e.to_string()))?;
        let (seq, taken) = match received {
            Received::Again => return Ok(Handled::Nothing),
            Received::Shutdown(request, seq) => return Ok(Handled::Shutdown(request, seq)),
            Received::Taken(seq, taken) => (seq, taken),
        };
        let handled = self.taken(taken);
        self.lead.ack(seq).await?;
        Ok(handled)
    }

    /// What an envelope taken in is to the step waiting, logged.
    fn taken(&mut self, taken: Taken) -> Handled {
        match taken {
            Taken::Decided {
                request_id: id,
                decision,
            } => {
                match decision {
                    crate::driver::Observation::PlanRejected { feedback } => {
                        self.traces.decided(&id, false, &feedback);
                        tracing::info!(request_id = %id, feedback = %Escaped(&feedback), "plan rejected; revising");
                    }
                    crate::driver::Observation::PlanApproved { mode, .. } => {
                        self.traces.decided(&id, true, "");
                        tracing::info!(request_id = %id, mode = %mode, "plan approved");
                    }
                    _ => {}
                }
                Handled::Decided
            }
            Taken::Permission { request_id, answer } => Handled::Permission(request_id, answer),
            Taken::Queued => Handled::Nothing,
            Taken::Terminated(ended) => {
                for t in ended {
                    tracing::info!(member = %Escaped(&t.name), reason = %Escaped(&t.reason), "a teammate terminated");
                }
                Handled::Nothing
            }
            Taken::Ignored(Some(Message::ResultDecided {
                request_id,
                approve,
                feedback,
                commit,
                conflicts,
                branch_head,
            })) => Handled::Result(ResultAnswer {
                request_id: request_id.as_str().to_owned(),
                approve,
                feedback,
                commit,
                conflicts,
                branch_head,
            }),
            Taken::Ignored(Some(Message::AmendmentDecided {
                request_id,
                approve,
                feedback,
                grant,
            })) => Handled::Amendment(
                request_id.as_str().to_owned(),
                Decision {
                    approve,
                    feedback,
                    grant,
                },
            ),
            Taken::Ignored(other) => {
                tracing::debug!(body = ?other, "envelope with nothing to do");
                Handled::Nothing
            }
        }
    }
}
