//! A teammate's finished work, as the result review sees it: the change
//! (a diff against the base commit it started from, already turned into a
//! commit of the team's repository by the edge, which runs git), the files
//! it changes, and how its landing on the team branch came out.
//!
//! ```text
//!  SubmitResult --> PENDING --reviewer approves--> PENDING, landing --merged--> APPROVED
//!                      |                                  \--conflict/fails--> REJECTED
//!                      +--reviewer rejects--> REJECTED
//! ```
//!
//! An approval is a review step (`approve`) on a request that stays pending
//! until the runtime has merged it ([`crate::effect::Effect::Land`], then
//! `op::Landed`): the request is APPROVED only once the team branch has the
//! commit, so the two never disagree. A lead that restarts finds the
//! landings it had started in the requests themselves
//! ([`crate::team::Team::landings`]) and finishes them.

use serde::{Deserialize, Serialize};

use crate::protocol::Request;

/// One file a result changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FileChange {
    /// Its path in the repository.
    pub path: String,
    /// Lines added.
    pub added: u32,
    /// Lines removed.
    pub removed: u32,
    /// A binary file: no line counts.
    #[serde(default)]
    pub binary: bool,
}

/// What a teammate submits, once the edge made a commit of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct WorkResult {
    /// The submitter's claimed task.
    pub task_id: String,
    /// The commit the change is against.
    pub base: String,
    /// The change as a commit on `base` (made by the edge from the diff).
    pub commit: String,
    /// What it did: the landed commit's message.
    pub summary: String,
    /// The diff, as submitted.
    pub diff: String,
    /// Its test run's output, if it sent one.
    #[serde(default)]
    pub test_output: String,
    /// Every file the commit changes, as git counts them.
    pub files: Vec<FileChange>,
}

impl WorkResult {
    /// Lines added and removed, over every file.
    pub fn changed_lines(&self) -> u64 {
        self.files
            .iter()
            .map(|f| u64::from(f.added) + u64::from(f.removed))
            .sum()
    }

    /// The paths it changes.
    pub fn paths(&self) -> Vec<String> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }
}

/// A result request's payload as stored (`payload_json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ResultPayload {
    /// The result.
    pub result: WorkResult,
    /// The rejected result it revises ("" if none).
    #[serde(default)]
    pub supersedes: String,
    /// The approved plan of the task, if it had one ("" if none).
    #[serde(default)]
    pub plan_id: String,
    /// What the submitter's grant lets it write, if it holds one for the
    /// task (none: the task had no plan).
    #[serde(default)]
    pub scope: Option<Vec<String>>,
    /// The changed paths outside that scope, for a reviewer to see.
    #[serde(default)]
    pub outside_grant: Vec<String>,
}

/// How landing an approved result came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// The team branch moved to `commit`.
    Merged {
        /// The commit on the team branch.
        commit: String,
    },
    /// The change conflicts with the team branch as it stands (`head`).
    Conflict {
        /// The conflicting paths.
        paths: Vec<String>,
        /// Where the team branch stands: the base to rebase onto.
        head: String,
    },
    /// It could not be landed for another reason.
    Failed(String),
}

impl Request {
    /// The payload of a result request (empty for any other).
    pub fn result_payload(&self) -> ResultPayload {
        serde_json::from_str(&self.opening.payload_json).unwrap_or_default()
    }
}
