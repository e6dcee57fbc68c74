//! The model reviewer (`--approval model:FILE`): a language model with
//! criteria reviews each plan, like an operator would, through the same
//! `ReviewPlan` command. It sees the plan, who sent it, and the plans already
//! approved or still pending for the other teammates (their files), and
//! answers through one tool, `review_plan(approve, feedback, write_paths?)`.
//!
//! It never approves by default: a model that errs, times out, answers
//! without calling `review_plan`, or rejects without feedback leaves the plan
//! pending for a person (`lead approve`), and a `ReviewNote` event says why.
//! The model runs outside the hub, which only hands it jobs and is told
//! each [`Outcome`] through the report function it started the reviewer
//! with: the reviewer knows nothing of the hub.

use std::{sync::Arc, time::Duration};

use mesh_core::{
    error::FieldError,
    grant::{Grant, Mode},
    limits,
    names::RequestId,
    op::PlanVerdict,
};
use mesh_llm::{ChatClient, ChatConfig, Message, Tool, DEFAULT_API_KEY_ENV, OPENAI_BASE_URL};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

/// The reviewer's TOML file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewerFile {
    /// The model's name, as its server knows it.
    model: String,
    /// The chat-completions API's root.
    #[serde(default = "openai")]
    base_url: String,
    /// The environment variable that holds the key (unset: no key sent).
    #[serde(default = "default_key_env")]
    api_key_env: String,
    /// The reviewer's instructions.
    criteria: String,
    /// How long one review may take, retries included.
    #[serde(default = "default_timeout")]
    timeout_secs: u64,
}

fn openai() -> String {
    OPENAI_BASE_URL.into()
}

fn default_key_env() -> String {
    DEFAULT_API_KEY_ENV.into()
}

fn default_timeout() -> u64 {
    120
}

/// How many plans are reviewed at once.
const CONCURRENT_REVIEWS: usize = 4;
/// Plans waiting for the reviewer before new ones are left to an operator.
const QUEUE: usize = 256;

/// A configured model reviewer.
#[derive(Debug, Clone)]
pub struct Reviewer {
    chat: ChatClient,
    criteria: String,
    timeout: Duration,
}

/// One plan to review, as the hub hands it over.
#[derive(Debug, Clone)]
pub struct Job {
    pub(crate) request_id: RequestId,
    pub(crate) sender: String,
    pub(crate) role: String,
    pub(crate) plan: mesh_core::plan::Plan,
    /// Other teammates' plans: approved, or still pending.
    pub(crate) others: Vec<OtherPlan>,
    /// Where the plan's files fall inside other teammates' holds, e.g.
    /// "overlaps bob: src/auth.rs".
    pub(crate) overlaps: Vec<String>,
    /// For a result (a stage of the results' chain): what is reviewed is
    /// its diff, not a plan.
    pub(crate) result: Option<ResultView>,
}

/// A result, as the model reviews it.
#[derive(Debug, Clone)]
pub(crate) struct ResultView {
    /// The task: its subject and description.
    pub(crate) task: String,
    /// What the teammate says it did.
    pub(crate) summary: String,
    /// The files it changes.
    pub(crate) files: Vec<String>,
    /// The changed files outside its grant.
    pub(crate) outside_grant: Vec<String>,
    /// The diff.
    pub(crate) diff: String,
}

/// The most of a result's diff the model reads.
const DIFF_SHOWN: usize = 32 * 1024;

/// Another teammate's plan, for the reviewer to check collisions against.
#[derive(Debug, Clone)]
pub(crate) struct OtherPlan {
    pub(crate) member: String,
    pub(crate) status: &'static str,
    pub(crate) summary: String,
    pub(crate) files: Vec<String>,
}

/// What the model decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Approve {
        feedback: String,
        write_paths: Vec<String>,
    },
    Reject {
        feedback: String,
    },
}

impl Reviewer {
    /// The reviewer a TOML file describes; the key is read from the
    /// environment now.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: ReviewerFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.criteria.trim().is_empty() {
            return Err("criteria: is empty; say what a plan must have to be approved".into());
        }
        if file.model.trim().is_empty() {
            return Err("model: is empty".into());
        }
        let mut config = ChatConfig::new(
            &file.base_url,
            &file.model,
            ChatConfig::key_from_env(&file.api_key_env),
        );
        let timeout = Duration::from_secs(file.timeout_secs.max(1));
        config.timeout = timeout;
        config.max_retries = 3;
        let chat = ChatClient::new(config).map_err(|e| e.to_string())?;
        Ok(Self {
            chat,
            criteria: file.criteria,
            timeout,
        })
    }

    /// How it signs its notes and feedback.
    /// How long one review may take, retries included.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn name(&self) -> String {
        format!("model {}", self.chat.model())
    }

    /// Asks the model; `Err` says why there is no decision. `tokens`: what
    /// the call used, where the server said.
    pub(crate) async fn decide(
        &self,
        job: &Job,
        tokens: &mut Option<mesh_llm::Usage>,
    ) -> Result<Verdict, String> {
        let messages = [
            Message::system(if job.result.is_some() {
                format!(
                    "You review the finished work of teammates before it is merged into the \
                     team's branch: a diff, against the task it is for. Approve it only if it \
                     does the task and meets every criterion below; otherwise reject it with \
                     feedback that tells the teammate exactly what to change. Answer by \
                     calling review_plan exactly once.\n\nCriteria:\n{}",
                    self.criteria
                )
            } else {
                format!(
                    "You review plans that teammates submit before they may write anything. \
                     Approve a plan only if it meets every criterion below; otherwise reject it \
                     with feedback that tells the teammate exactly what to change. Check its files \
                     against the other teammates' plans: two teammates must not write the same \
                     file. Answer by calling review_plan exactly once.\n\nCriteria:\n{}",
                    self.criteria
                )
            }),
            Message::user(describe(job)),
        ];
        let reply = self
            .chat
            .complete(&messages, &[review_plan_tool()])
            .await
            .map_err(|e| e.to_string())?;
        *tokens = reply.usage;
        let call = reply
            .tool_calls
            .iter()
            .find(|c| c.function.name == "review_plan")
            .ok_or_else(|| {
                format!(
                    "the model answered without calling review_plan: {:?}",
                    mesh_core::limits::cut(reply.content.trim(), 300)
                )
            })?;
        parse_verdict(&call.function.arguments)
    }
}

/// The one tool the reviewer answers through.
fn review_plan_tool() -> Tool {
    Tool {
        name: "review_plan",
        description: "Approve or reject the plan. Rejecting needs feedback the teammate can act \
                      on. write_paths (optional) narrows where an approved teammate may write; \
                      by default, the files its plan names.",
        parameters: json!({
            "type": "object",
            "properties": {
                "approve": {"type": "boolean"},
                "feedback": {"type": "string"},
                "write_paths": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["approve", "feedback"],
        }),
    }
}

/// The plan (or the result) and its context, as the model reads it.
fn describe(job: &Job) -> String {
    if let Some(result) = &job.result {
        let mut text = format!(
            "Result {} from {} (role {:?}).\nThe task: {}\nWhat it says it did: {}\nFiles it changes: {}\n",
            job.request_id,
            job.sender,
            job.role,
            result.task,
            result.summary,
            result.files.join(", "),
        );
        if !result.outside_grant.is_empty() {
            text.push_str(&format!(
                "Outside what its grant lets it write: {}\n",
                result.outside_grant.join(", ")
            ));
        }
        text.push_str(&format!(
            "\nThe diff:\n{}\n",
            mesh_core::limits::cut(&result.diff, DIFF_SHOWN)
        ));
        if result.diff.len() > DIFF_SHOWN {
            text.push_str(&format!(
                "(cut: the diff has {} bytes)\n",
                result.diff.len()
            ));
        }
        return text;
    }
    let list = |items: &[String]| {
        if items.is_empty() {
            "  (none)".to_owned()
        } else {
            items
                .iter()
                .map(|i| format!("  - {i}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let plan = &job.plan;
    let mut text = format!(
        "Plan {} from {} (role {:?}).\nSummary: {}\nSteps:\n{}\nFiles it will write:\n{}\nTests:\n{}\n",
        job.request_id,
        job.sender,
        job.role,
        plan.summary,
        list(&plan.steps),
        list(&plan.files),
        list(&plan.tests),
    );
    if !plan.body.is_empty() {
        text.push_str(&format!("Details:\n{}\n", plan.body));
    }
    text.push_str("\nThe other teammates' plans:\n");
    if job.others.is_empty() {
        text.push_str("  (none)\n");
    }
    for other in &job.others {
        text.push_str(&format!(
            "- {} ({}): {}; files: {}\n",
            other.member,
            other.status,
            other.summary,
            if other.files.is_empty() {
                "(none)".to_owned()
            } else {
                other.files.join(", ")
            }
        ));
    }
    if !job.overlaps.is_empty() {
        text.push_str(
            "\nConflicts: this plan writes files another teammate holds under an approved plan:\n",
        );
        for overlap in &job.overlaps {
            text.push_str(&format!("- {overlap}\n"));
        }
    }
    text
}

/// `review_plan`'s arguments as a verdict.
fn parse_verdict(arguments: &str) -> Result<Verdict, String> {
    let args: Value = serde_json::from_str(arguments)
        .map_err(|e| format!("review_plan's arguments are not JSON ({e})"))?;
    let approve = args["approve"]
        .as_bool()
        .ok_or("review_plan: approve is not a boolean")?;
    let feedback = args["feedback"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let write_paths = match &args["write_paths"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("review_plan: write_paths holds something other than strings")?,
        _ => return Err("review_plan: write_paths is not a list".into()),
    };
    if approve {
        Ok(Verdict::Approve {
            feedback,
            write_paths,
        })
    } else if feedback.is_empty() {
        Err("the model rejected the plan without feedback".into())
    } else {
        Ok(Verdict::Reject { feedback })
    }
}

/// What came of one review, for whoever started the reviewer.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// No decision (the plan waits for an operator), and why.
    Note {
        /// The plan request.
        request_id: RequestId,
        /// Who (the reviewer's name).
        reviewer: String,
        /// Why.
        text: String,
    },
    /// The model decided: `review` is to be recorded as from `by`, and a
    /// note then says `said` (or that the decision could not be recorded).
    Decided {
        /// The plan request.
        request_id: RequestId,
        /// The decision, as an operator's review (an error where the
        /// model's words do not make one: a write path that is no
        /// workspace-relative glob, say).
        verdict: Result<PlanVerdict, FieldError>,
        /// Who decided (the reviewer's name).
        by: String,
        /// What the note says once it is recorded.
        said: String,
    },
    /// What one review's model call used (told before its decision).
    Used {
        /// Who (the reviewer's name).
        reviewer: String,
        /// One call, the time it took, and its tokens where the server said.
        used: mesh_core::usage::Usage,
    },
}

/// Where a reviewer reports its outcomes.
pub(crate) type Report = Arc<dyn Fn(Outcome) + Send + Sync>;

/// Reviews the jobs sent to it, a few at a time, until the sender goes;
/// each outcome goes to `report`.
pub(crate) fn start(reviewer: Arc<Reviewer>, report: Report) -> mpsc::Sender<Job> {
    let (tx, mut jobs) = mpsc::channel::<Job>(QUEUE);
    let slots = Arc::new(Semaphore::new(CONCURRENT_REVIEWS));
    tokio::spawn(async move {
        while let Some(job) = jobs.recv().await {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let reviewer = reviewer.clone();
            let report = report.clone();
            // The model's call is a span of the request's trace.
            let cx = crate::telemetry::context(job.request_id.as_str()).unwrap_or_default();
            let review_one = async move {
                let started = tokio::time::Instant::now();
                let mut tokens = None;
                let outcome = review(&reviewer, job, &mut tokens).await;
                report(Outcome::Used {
                    reviewer: reviewer.name(),
                    used: used(started.elapsed(), tokens),
                });
                report(outcome);
                drop(slot);
            };
            tokio::spawn(opentelemetry::context::FutureExt::with_context(
                review_one, cx,
            ));
        }
    });
    tx
}

/// What one model call used: one call, `took`, and the server's count of
/// tokens if it gave one.
pub(crate) fn used(took: Duration, tokens: Option<mesh_llm::Usage>) -> mesh_core::usage::Usage {
    let tokens = tokens.unwrap_or_default();
    mesh_core::usage::Usage {
        prompt_tokens: tokens.prompt_tokens,
        completion_tokens: tokens.completion_tokens,
        calls: 1,
        model_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
    }
}

/// Reviews one plan: the decision, or why there is none; `tokens` gets
/// what the model call used, where the server said.
async fn review(reviewer: &Reviewer, job: Job, tokens: &mut Option<mesh_llm::Usage>) -> Outcome {
    let name = reviewer.name();
    let note = |text: String| Outcome::Note {
        request_id: job.request_id.clone(),
        reviewer: name.clone(),
        text,
    };
    let verdict = match tokio::time::timeout(reviewer.timeout, reviewer.decide(&job, tokens)).await
    {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(why)) => {
            tracing::warn!(request_id = %job.request_id, why = %mesh_core::display::Escaped(&why), "the reviewer made no decision; the plan waits for an operator");
            return note(format!("no decision, left for an operator: {why}"));
        }
        Err(_) => {
            tracing::warn!(request_id = %job.request_id, "the reviewer timed out; the plan waits for an operator");
            return note(format!(
                "no decision, left for an operator: no answer within {}s",
                reviewer.timeout.as_secs()
            ));
        }
    };
    let (verdict, said) = match verdict {
        Verdict::Approve {
            feedback,
            write_paths,
        } => (
            Grant::checked("grant", Mode::AcceptEdits, write_paths, None).map(|grant| {
                PlanVerdict::Approve {
                    grant,
                    feedback: signed(&name, &feedback),
                    // The model saw the conflicts in its input and decided.
                    allow_overlap: true,
                }
            }),
            format!("approved: {feedback}"),
        ),
        Verdict::Reject { feedback } => (
            Ok(PlanVerdict::Reject {
                feedback: signed(&name, &feedback),
            }),
            format!("rejected: {feedback}"),
        ),
    };
    let verdict = verdict.and_then(|verdict| {
        let (PlanVerdict::Approve { feedback, .. } | PlanVerdict::Reject { feedback }) = &verdict;
        limits::check("feedback", feedback, limits::REASON)?;
        Ok(verdict)
    });
    Outcome::Decided {
        request_id: job.request_id.clone(),
        verdict,
        by: name,
        said,
    }
}

/// Feedback as the teammate sees it: who said it.
fn signed(name: &str, feedback: &str) -> String {
    let text = if feedback.is_empty() {
        "(no comment)"
    } else {
        feedback
    };
    mesh_core::limits::cut(&format!("{name}: {text}"), mesh_core::limits::REASON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_parse_and_a_bare_rejection_is_no_decision() {
        assert_eq!(
            parse_verdict(r#"{"approve": true, "feedback": "fine", "write_paths": ["src/**"]}"#),
            Ok(Verdict::Approve {
                feedback: "fine".into(),
                write_paths: vec!["src/**".into()]
            })
        );
        assert_eq!(
            parse_verdict(r#"{"approve": false, "feedback": "add tests"}"#),
            Ok(Verdict::Reject {
                feedback: "add tests".into()
            })
        );
        assert!(parse_verdict(r#"{"approve": false, "feedback": " "}"#).is_err());
        assert!(parse_verdict(r#"{"approve": "yes"}"#).is_err());
        assert!(parse_verdict(r#"{"approve": true, "write_paths": "src"}"#).is_err());
        assert!(parse_verdict("not json").is_err());
    }

    #[test]
    fn a_call_counts_once_with_its_time_and_the_tokens_the_server_gave() {
        let counted = used(
            Duration::from_millis(1_500),
            Some(mesh_llm::Usage {
                prompt_tokens: 120,
                completion_tokens: 30,
                cached_tokens: 0,
            }),
        );
        assert_eq!(
            counted,
            mesh_core::usage::Usage {
                prompt_tokens: 120,
                completion_tokens: 30,
                calls: 1,
                model_ms: 1_500,
            }
        );
        assert_eq!(used(Duration::from_millis(7), None).tokens(), 0);
    }

    #[test]
    fn the_file_needs_criteria_and_a_model() {
        assert!(Reviewer::parse("model = \"m\"\ncriteria = \"tests\"\n").is_ok());
        assert!(Reviewer::parse("model = \"m\"\ncriteria = \"\"\n")
            .expect_err("empty")
            .contains("criteria"));
        assert!(Reviewer::parse("criteria = \"x\"\n").is_err());
        assert!(Reviewer::parse("model = \"m\"\ncriteria = \"x\"\nbogus = 1\n").is_err());
    }

    #[test]
    fn the_model_sees_the_plan_and_the_others_files() {
        let text = describe(&Job {
            request_id: RequestId::existing("request_id", "r1").expect("an id"),
            sender: "alice".into(),
            role: "coder".into(),
            plan: mesh_core::plan::Plan {
                summary: "login".into(),
                files: vec!["src/auth.rs".into()],
                tests: vec!["cargo test auth".into()],
                ..Default::default()
            },
            others: vec![OtherPlan {
                member: "bob".into(),
                status: "approved",
                summary: "session".into(),
                files: vec!["src/auth.rs".into(), "src/session.rs".into()],
            }],
            overlaps: vec!["overlaps bob: src/auth.rs".into()],
            result: None,
        });
        assert!(text.contains("Conflicts:") && text.contains("- overlaps bob: src/auth.rs"));
        assert!(text.contains("from alice (role \"coder\")"));
        assert!(text.contains("  - src/auth.rs"));
        assert!(text.contains("- bob (approved): session; files: src/auth.rs, src/session.rs"));
    }
}
