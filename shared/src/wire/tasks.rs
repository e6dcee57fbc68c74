//! Tasks on the wire: a task, its status and its review.

use crate::pb;
use mesh_core::{
    error::FieldError,
    tasks::{Origin, Output, OutputContent, Review, Task, TaskStatus},
};
use prost::UnknownEnumValue;

use super::ToPb;

impl ToPb for TaskStatus {
    type Pb = pb::TaskStatus;
    fn to_pb(&self) -> pb::TaskStatus {
        match self {
            TaskStatus::Pending => pb::TaskStatus::Pending,
            TaskStatus::Claimed => pb::TaskStatus::Claimed,
            TaskStatus::Completed => pb::TaskStatus::Completed,
            TaskStatus::Withdrawn => pb::TaskStatus::Withdrawn,
        }
    }
}

/// [`TaskStatus`] from the wire: UNSPECIFIED is no status (an error of 0).
/// From a number, `pb::TaskStatus::try_from(n).and_then(TaskStatus::try_from)`.
impl TryFrom<pb::TaskStatus> for TaskStatus {
    type Error = UnknownEnumValue;
    fn try_from(value: pb::TaskStatus) -> Result<Self, UnknownEnumValue> {
        match value {
            pb::TaskStatus::Pending => Ok(TaskStatus::Pending),
            pb::TaskStatus::Claimed => Ok(TaskStatus::Claimed),
            pb::TaskStatus::Completed => Ok(TaskStatus::Completed),
            pb::TaskStatus::Withdrawn => Ok(TaskStatus::Withdrawn),
            pb::TaskStatus::Unspecified => Err(UnknownEnumValue(value as i32)),
        }
    }
}

impl ToPb for Task {
    type Pb = pb::Task;
    fn to_pb(&self) -> pb::Task {
        pb::Task {
            task_id: self.task_id.clone(),
            subject: self.subject.clone(),
            description: self.description.clone(),
            status: self.status.to_pb() as i32,
            owner: self.owner.clone(),
            blocked_by: self.blocked_by.clone(),
            files: self.files.clone(),
            created_at_unix_ms: self.created_at_unix_ms,
            updated_at_unix_ms: self.updated_at_unix_ms,
            summary: self.summary.clone(),
            review: review_to_pb(self.review) as i32,
            origin: (self.origin != Origin::default()).then(|| pb::TaskOrigin {
                by: self.origin.by.clone(),
                context_id: self.origin.context_id.clone(),
                message_id: self.origin.message_id.clone(),
            }),
            outputs: self.outputs.iter().map(ToPb::to_pb).collect(),
            reply: self.reply,
        }
    }
}

/// [`Task`] from the wire (as stored): its status's number is the error
/// when it is not a task status.
impl TryFrom<pb::Task> for Task {
    type Error = UnknownEnumValue;
    fn try_from(task: pb::Task) -> Result<Self, UnknownEnumValue> {
        Ok(Self {
            status: pb::TaskStatus::try_from(task.status).and_then(TaskStatus::try_from)?,
            task_id: task.task_id,
            subject: task.subject,
            description: task.description,
            owner: task.owner,
            blocked_by: task.blocked_by,
            files: task.files,
            created_at_unix_ms: task.created_at_unix_ms,
            updated_at_unix_ms: task.updated_at_unix_ms,
            summary: task.summary,
            // Tasks stored before reviews existed were reviewed by plan.
            review: review_from_pb("review", task.review)
                .ok()
                .flatten()
                .unwrap_or_default(),
            origin: task
                .origin
                .map(|o| Origin {
                    by: o.by,
                    context_id: o.context_id,
                    message_id: o.message_id,
                })
                .unwrap_or_default(),
            // Stored, so checked when completed; one without content is dropped.
            outputs: task
                .outputs
                .into_iter()
                .filter_map(|o| output_from_pb(o).ok())
                .collect(),
            reply: task.reply,
        })
    }
}

impl ToPb for Output {
    type Pb = pb::TaskOutput;
    fn to_pb(&self) -> pb::TaskOutput {
        use pb::task_output::Content;
        pb::TaskOutput {
            name: self.name.clone(),
            media_type: self.media_type.clone(),
            content: Some(match &self.content {
                OutputContent::Text(t) => Content::Text(t.clone()),
                OutputContent::Raw(b) => Content::Raw(b.clone()),
                OutputContent::Url(u) => Content::Url(u.clone()),
                OutputContent::DataJson(j) => Content::DataJson(j.clone()),
            }),
        }
    }
}

/// An output from the wire: one without content is an error naming the
/// field (checking the rest is [`Output::check`]'s).
pub fn output_from_pb(output: pb::TaskOutput) -> Result<Output, FieldError> {
    use pb::task_output::Content;
    let content = match output.content {
        Some(Content::Text(t)) => OutputContent::Text(t),
        Some(Content::Raw(b)) => OutputContent::Raw(b),
        Some(Content::Url(u)) => OutputContent::Url(u),
        Some(Content::DataJson(j)) => OutputContent::DataJson(j),
        None => {
            return Err(FieldError::new(
                "outputs.content",
                "is required (text, raw, url or data_json)",
            ))
        }
    };
    Ok(Output {
        name: output.name,
        media_type: output.media_type,
        content,
    })
}

/// A task's review on the wire.
pub fn review_to_pb(review: Review) -> pb::TaskReview {
    match review {
        Review::Plan => pb::TaskReview::Plan,
        Review::Result => pb::TaskReview::Result,
        Review::Both => pb::TaskReview::Both,
    }
}

/// A task's review from the wire: UNSPECIFIED is `None`; an unknown number
/// an error naming `field`.
pub fn review_from_pb(field: &str, value: i32) -> Result<Option<Review>, FieldError> {
    match pb::TaskReview::try_from(value) {
        Ok(pb::TaskReview::Unspecified) => Ok(None),
        Ok(pb::TaskReview::Plan) => Ok(Some(Review::Plan)),
        Ok(pb::TaskReview::Result) => Ok(Some(Review::Result)),
        Ok(pb::TaskReview::Both) => Ok(Some(Review::Both)),
        Err(_) => Err(FieldError::new(
            field,
            format!("{value} is not a TaskReview"),
        )),
    }
}
