//! A teammate's protocol state: the envelopes it has processed ([`Seen`]),
//! where it stands with its plans and the grant it holds ([`PlanState`]), and
//! the news queued for its driver. [`ProtocolState::receive`] takes in one
//! envelope ([`Inbound`], in the core's words: the client made it from the
//! wire) and says what the session is to do with it.
//!
//! Pure bookkeeping: no async, no I/O, no RPC, no clock, no log. The session
//! ([`crate::session::Session`]) talks to the lead and steps this state with
//! what it sends and receives; everything here can be stepped in a test.

use std::collections::VecDeque;

use mesh_core::{
    effect::{Ended, Message},
    grant::Grant,
    plan::Plan,
    protocol::Decision,
};

use crate::{
    command::CommandLimits,
    driver::{Observation, ShutdownRequest},
    gate::Gate,
    plan_state::{BadGrant, PlanState},
    seen::Seen,
    tools::Workspace,
};

/// What a teammate keeps of the protocol between calls.
#[derive(Debug)]
pub(crate) struct ProtocolState {
    /// The envelopes processed (acknowledged, or for a shutdown request
    /// being answered, to be acknowledged if refused), so that a redelivery
    /// is not acted on twice.
    seen: Seen,
    /// The claimed task, the last plan, its review, the gate.
    plan: PlanState,
    /// What arrived while the driver was busy (messages, a plan's
    /// decision), in the order it arrived.
    messages: VecDeque<Observation>,
}

/// An envelope from the inbox, as the client made it from the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inbound {
    /// Its place in the inbox.
    pub(crate) seq: u64,
    /// Its message id.
    pub(crate) message_id: String,
    /// Who sent it.
    pub(crate) from: String,
    /// What it carries; `None` for a body this build does not know.
    pub(crate) message: Option<Message>,
}

/// What an envelope from the inbox meant.
#[derive(Debug)]
pub(crate) enum Received {
    /// Processed before (an old `seq`, or a message id remembered): nothing
    /// to do, nothing to acknowledge.
    Again,
    /// A shutdown request, for the driver to answer; its envelope's `seq` is
    /// acknowledged only if the teammate refuses (and goes on).
    Shutdown(ShutdownRequest, u64),
    /// Taken in: acknowledge the `seq` (the first field), and do what the
    /// second says.
    Taken(u64, Taken),
}

/// What an envelope taken in asks of the session, beyond its acknowledgement.
#[derive(Debug)]
pub(crate) enum Taken {
    /// The decision on the plan under review: applied to the gate and queued
    /// for the driver (`decision` is a copy, for the log).
    Decided {
        /// The plan's request id.
        request_id: String,
        /// `PlanApproved` or `PlanRejected`.
        decision: Observation,
    },
    /// The answer to a permission request.
    Permission {
        /// The request's id.
        request_id: String,
        /// Allowed or not, and why.
        answer: Decision,
    },
    /// News for the driver (a message, a claimable task), queued.
    Queued,
    /// Teammates terminated.
    Terminated(Vec<Ended>),
    /// Nothing to do with it (a decision on a plan not under review, a
    /// kind a teammate does not act on).
    Ignored(Option<Message>),
}

impl ProtocolState {
    /// A teammate that just joined: plan mode, nothing seen.
    pub(crate) fn new() -> Self {
        Self {
            seen: Seen::default(),
            plan: PlanState::new(),
            messages: VecDeque::new(),
        }
    }

    /// The last `seq` processed.
    pub(crate) fn last_seq(&self) -> u64 {
        self.seen.last_seq()
    }

    /// Plan mode, or the writer the grant created.
    pub(crate) fn gate(&self) -> &Gate {
        self.plan.gate()
    }

    /// Whether a plan is under review (its decision has not arrived).
    pub(crate) fn is_under_review(&self) -> bool {
        self.plan.is_under_review()
    }

    /// Readies `plan` for submission ([`PlanState::prepare`]): the id of the
    /// plan it supersedes, or why `submit_plan` is not available.
    pub(crate) fn prepare_plan(&self, plan: &mut Plan) -> Result<String, &'static str> {
        self.plan.prepare(plan)
    }

    /// The lead took `plan`, as `request_id`, for review.
    pub(crate) fn submitted(&mut self, request_id: String, plan: Plan) {
        self.plan.submitted(request_id, plan);
    }

    /// The teammate claimed `task_id`: its plans are for it now.
    pub(crate) fn claim(&mut self, task_id: String) {
        self.plan.claim(task_id);
    }

    /// An approved amendment widened the grant
    /// ([`crate::plan_state::PlanState::widen`]); the paths writable now.
    pub(crate) fn widen(
        &mut self,
        grant: Grant,
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<Vec<String>, BadGrant> {
        self.plan.widen(grant, workspace, commands)
    }

    /// The claimed task is reviewed by its result alone: edits may start
    /// ([`crate::plan_state::PlanState::unlock_for_result`]).
    pub(crate) fn unlock_for_result(
        &mut self,
        task_id: &str,
        files: &[String],
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<(), BadGrant> {
        self.plan
            .unlock_for_result(task_id, files, workspace, commands)
    }

    /// The teammate completed `task_id` ([`PlanState::completed`]); `true`
    /// if the grant for it ended, and the gate is back in plan mode.
    pub(crate) fn completed(&mut self, task_id: &str) -> bool {
        self.plan.completed(task_id)
    }

    /// The oldest news queued for the driver.
    pub(crate) fn next_news(&mut self) -> Option<Observation> {
        self.messages.pop_front()
    }

    /// Whether news is queued for the driver.
    pub(crate) fn has_news(&self) -> bool {
        !self.messages.is_empty()
    }

    /// Takes the decision on the last plan out of the queue (it is the
    /// result of the `submit_plan` that waited for it; anything queued
    /// before it is observed after).
    pub(crate) fn take_decision(&mut self) -> Option<Observation> {
        let at = self.messages.iter().position(|seen| {
            matches!(
                seen,
                Observation::PlanApproved { .. } | Observation::PlanRejected { .. }
            )
        })?;
        self.messages.remove(at)
    }

    /// Takes in one envelope: a redelivery is recognised, news is queued,
    /// and the decision on the plan under review is applied (a grant unlocks
    /// a writer over `workspace`). A bad grant is an error, and the envelope
    /// is then not processed.
    pub(crate) fn receive(
        &mut self,
        envelope: Inbound,
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<Received, BadGrant> {
        if !self.seen.is_new(envelope.seq, &envelope.message_id) {
            return Ok(Received::Again);
        }
        let taken = match envelope.message {
            Some(Message::ShutdownRequest {
                request_id,
                reason,
                deadline_unix_ms,
                ..
            }) => {
                // Acknowledged once answered with a refusal: an agreement
                // ends the member, and a crash before the answer leaves the
                // request to be delivered again.
                self.seen.processed(envelope.seq);
                let request = ShutdownRequest {
                    request_id: request_id.as_str().to_owned(),
                    reason,
                    deadline_unix_ms,
                };
                return Ok(Received::Shutdown(request, envelope.seq));
            }
            Some(Message::PlanDecided {
                request_id,
                approve,
                feedback,
                grant,
            }) if self.plan.reviews(request_id.as_str()) => {
                let answer = Decision {
                    approve,
                    feedback,
                    grant,
                };
                let decision = self.plan.decide(answer, workspace, commands)?;
                self.messages.push_back(decision.clone());
                Taken::Decided {
                    request_id: request_id.as_str().to_owned(),
                    decision,
                }
            }
            Some(Message::PermissionDecided {
                request_id,
                approve,
                feedback,
            }) => Taken::Permission {
                request_id: request_id.as_str().to_owned(),
                answer: Decision {
                    approve,
                    feedback,
                    grant: None,
                },
            },
            Some(Message::Text { content }) => {
                self.messages.push_back(Observation::Message {
                    from: envelope.from,
                    text: content,
                });
                Taken::Queued
            }
            Some(Message::TaskClaimable(task)) => {
                self.messages.push_back(Observation::TaskClaimable {
                    task_id: task.task_id,
                    subject: task.subject,
                });
                Taken::Queued
            }
            Some(Message::Terminated(ended)) => Taken::Terminated(ended),
            Some(Message::BudgetChanged { token_budget }) => {
                self.messages
                    .push_back(Observation::BudgetChanged { token_budget });
                Taken::Queued
            }
            other => Taken::Ignored(other),
        };
        self.seen.processed(envelope.seq);
        Ok(Received::Taken(envelope.seq, taken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_state::tests::{approval, plan, rejection, unlocked, workspace};
    use mesh_core::{
        grant::Mode,
        names::RequestId,
        tasks::{NewTask, TaskBoard},
    };

    /// A state, the workspace its grants unlock writers over, and the inbox.
    struct Fixture {
        /// Holds the workspace's directory.
        _dir: tempfile::TempDir,
        /// The workspace.
        workspace: Workspace,
        /// The state under test.
        state: ProtocolState,
        /// The last envelope's `seq`.
        seq: u64,
    }

    impl Fixture {
        fn new() -> Self {
            let (dir, workspace) = workspace();
            Self {
                _dir: dir,
                workspace,
                state: ProtocolState::new(),
                seq: 0,
            }
        }

        /// Delivers `body` in the next envelope, with a fresh message id.
        fn deliver(&mut self, body: Message) -> Result<Received, BadGrant> {
            self.seq += 1;
            self.receive(envelope(self.seq, &format!("m{}", self.seq), body))
        }

        fn receive(&mut self, envelope: Inbound) -> Result<Received, BadGrant> {
            let limits = CommandLimits::default();
            self.state.receive(envelope, &self.workspace, &limits)
        }

        /// Submits a plan as `request_id`.
        fn submit(&mut self, request_id: &str) {
            let mut plan = plan(&["a.txt"]);
            self.state.prepare_plan(&mut plan).expect("submittable");
            self.state.submitted(request_id.to_owned(), plan);
        }

        /// Every message queued, in order, as `from: text`.
        fn messages(&mut self) -> Vec<String> {
            std::iter::from_fn(|| self.state.next_news())
                .map(|seen| match seen {
                    Observation::Message { from, text } => format!("{from}: {text}"),
                    other => format!("{other:?}"),
                })
                .collect()
        }
    }

    fn envelope(seq: u64, message_id: &str, body: Message) -> Inbound {
        Inbound {
            seq,
            message_id: message_id.to_owned(),
            from: "lead".into(),
            message: Some(body),
        }
    }

    fn text(content: &str) -> Message {
        Message::Text {
            content: content.into(),
        }
    }

    fn id(value: &str) -> RequestId {
        RequestId::existing("request_id", value).expect("an id")
    }

    /// The decision `answer` on plan `request_id`, as the lead sends it.
    fn decided(request_id: &str, answer: Decision) -> Message {
        Message::PlanDecided {
            request_id: id(request_id),
            approve: answer.approve,
            feedback: answer.feedback,
            grant: answer.grant,
        }
    }

    #[test]
    fn a_decision_is_applied_queued_and_taken_after_nothing_else() {
        let mut f = Fixture::new();
        f.submit("p1");
        f.deliver(text("before")).expect("queued");
        match f.deliver(decided("p1", rejection())) {
            Ok(Received::Taken(
                2,
                Taken::Decided {
                    request_id,
                    decision,
                },
            )) => {
                assert_eq!(request_id, "p1");
                assert!(matches!(decision, Observation::PlanRejected { .. }));
            }
            other => panic!("the decision on p1, not {other:?}"),
        }
        f.deliver(text("after")).expect("queued");
        assert!(!f.state.is_under_review());
        assert_eq!(
            f.state.take_decision(),
            Some(Observation::PlanRejected {
                feedback: "smaller".into()
            })
        );
        assert_eq!(f.state.take_decision(), None, "taken once");
        assert_eq!(f.messages(), ["lead: before", "lead: after"]);

        assert_eq!(f.state.prepare_plan(&mut plan(&[])), Ok("p1".into()));
        f.submit("p2");
        let grant = Some((Mode::Default, &["src/**"][..]));
        f.deliver(decided("p2", approval(grant))).expect("decided");
        assert_eq!(unlocked(f.state.gate()), Some(Mode::Default));
        assert!(matches!(
            f.state.take_decision(),
            Some(Observation::PlanApproved {
                mode: Mode::Default,
                ..
            })
        ));
    }

    #[test]
    fn a_decision_on_a_plan_not_under_review_is_ignored() {
        let mut f = Fixture::new();
        let unknown = f.deliver(decided("p0", approval(None)));
        assert!(matches!(
            unknown,
            Ok(Received::Taken(
                1,
                Taken::Ignored(Some(Message::PlanDecided { .. }))
            ))
        ));
        f.submit("p1");
        f.deliver(decided("p1", rejection())).expect("decided");
        f.state.take_decision();
        f.submit("p2");
        // A late second word on the superseded plan.
        let old = f.deliver(decided("p1", approval(None)));
        assert!(matches!(old, Ok(Received::Taken(3, Taken::Ignored(_)))));
        assert!(f.state.is_under_review(), "p2 still waits for its decision");
        assert_eq!(unlocked(f.state.gate()), None);
        assert!(!f.state.has_news());
    }

    #[test]
    fn a_bad_grant_is_an_error_and_its_envelope_is_not_processed() {
        let mut f = Fixture::new();
        f.submit("p1");
        let grant = Some((Mode::AcceptEdits, &["/etc/*"][..]));
        let bad = f.deliver(decided("p1", approval(grant)));
        assert!(bad.is_err(), "{bad:?}");
        assert_eq!(f.state.last_seq(), 0);
        assert_eq!(unlocked(f.state.gate()), None);
        assert!(!f.state.has_news());
    }

    #[test]
    fn a_redelivery_is_not_taken_in_again() {
        let mut f = Fixture::new();
        let first = envelope(5, "a", text("hello"));
        let taken = f.receive(first.clone());
        assert!(matches!(taken, Ok(Received::Taken(5, Taken::Queued))));
        assert_eq!(f.state.last_seq(), 5);
        assert!(matches!(f.receive(first), Ok(Received::Again)));
        let old = f.receive(envelope(4, "b", text("older")));
        assert!(matches!(old, Ok(Received::Again)));
        let same_id = f.receive(envelope(6, "a", text("again")));
        assert!(matches!(same_id, Ok(Received::Again)));
        assert_eq!(f.state.last_seq(), 5, "a redelivery is not processed");
        assert_eq!(f.messages(), ["lead: hello"]);
    }

    #[test]
    fn a_shutdown_request_is_left_to_answer_and_not_taken_twice() {
        let mut f = Fixture::new();
        let request = ShutdownRequest {
            request_id: "s1".into(),
            reason: "done".into(),
            ..Default::default()
        };
        let asked = Message::ShutdownRequest {
            request_id: id("s1"),
            target: "alice".into(),
            reason: "done".into(),
            deadline_unix_ms: 0,
        };
        let delivered = envelope(3, "m3", asked);
        match f.receive(delivered.clone()) {
            Ok(Received::Shutdown(pending, 3)) => assert_eq!(pending, request),
            other => panic!("a shutdown request to answer, not {other:?}"),
        }
        assert_eq!(f.state.last_seq(), 3);
        assert!(matches!(f.receive(delivered), Ok(Received::Again)));
        assert!(!f.state.has_news(), "the driver answers it: it is not news");
    }

    #[test]
    fn answers_and_terminations_are_handed_back_and_news_queued_in_order() {
        let mut f = Fixture::new();
        let answer = Decision {
            approve: true,
            feedback: String::new(),
            grant: None,
        };
        let allowed = Message::PermissionDecided {
            request_id: id("r1"),
            approve: true,
            feedback: String::new(),
        };
        match f.deliver(allowed) {
            Ok(Received::Taken(
                1,
                Taken::Permission {
                    request_id,
                    answer: got,
                },
            )) => assert_eq!((request_id.as_str(), got), ("r1", answer)),
            other => panic!("a permission answer, not {other:?}"),
        }
        let claimable = TaskBoard::new(10)
            .create(
                "t1".into(),
                NewTask {
                    subject: "docs".into(),
                    ..Default::default()
                },
                1,
            )
            .expect("a task");
        f.deliver(Message::TaskClaimable(Box::new(claimable)))
            .expect("queued");
        f.deliver(text("hi")).expect("queued");
        let terminated = f.deliver(Message::Terminated(vec![Ended {
            name: "bob".into(),
            reason: String::new(),
        }]));
        assert!(
            matches!(terminated, Ok(Received::Taken(4, Taken::Terminated(t))) if t[0].name == "bob")
        );
        let idle = f.deliver(Message::Idle {
            reason: String::new(),
        });
        assert!(matches!(
            idle,
            Ok(Received::Taken(5, Taken::Ignored(Some(_))))
        ));
        assert_eq!(
            f.messages(),
            [
                r#"TaskClaimable { task_id: "t1", subject: "docs" }"#,
                "lead: hi"
            ]
        );
    }

    #[test]
    fn completing_the_planned_task_ends_the_grant() {
        let mut f = Fixture::new();
        f.state.claim("t1".into());
        f.submit("p1");
        f.deliver(decided("p1", approval(None))).expect("decided");
        assert_eq!(unlocked(f.state.gate()), Some(Mode::AcceptEdits));
        assert!(!f.state.completed("t2"));
        assert!(f.state.completed("t1"));
        assert_eq!(unlocked(f.state.gate()), None);
        assert_eq!(f.state.prepare_plan(&mut plan(&[])), Ok(String::new()));
    }
}
