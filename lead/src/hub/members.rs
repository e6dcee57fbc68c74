//! The hub's member commands: joining, inboxes, messages, idleness, tool-call
//! reports, spawning and termination.

use std::path::PathBuf;

use shared::{
    error::FieldError,
    grant::Grant,
    names::{Name, EVERYONE, LEAD},
    pb::{self, envelope::Body},
};

use super::{Command, Hub};
use crate::{error::HubError, roster::Member, store::Change};

/// The longest `role` and `Text` the lead takes.
const MAX_ROLE_BYTES: usize = 256;
const MAX_TEXT_BYTES: usize = 64 * 1024;

impl Hub {
    /// `Join`: a new member in plan mode, or ALREADY_EXISTS for an active name.
    pub(super) fn join(&mut self, name: Name, role: String) -> Result<pb::JoinResponse, HubError> {
        if role.len() > MAX_ROLE_BYTES {
            return Err(
                FieldError::new("role", format!("is longer than {MAX_ROLE_BYTES} bytes")).into(),
            );
        }
        let spawned = match self.roster.get(name.as_str()) {
            Some(existing) if !existing.terminated => {
                return Err(HubError::AlreadyExists(format!(
                    "name: {name:?} is held by an active member; pick another name"
                )))
            }
            _ => self.children.contains_key(name.as_str()),
        };
        if self.roster.get(name.as_str()).is_some() {
            // A terminated member's name is reused: its old inbox goes.
            self.changes.push(Change::ClearInbox {
                member: name.to_string(),
            });
        }
        let token = shared::auth::new_token();
        let order = self.roster.next_order();
        let mut member = Member::new(name.clone(), role, &token, order);
        member.spawned = spawned;
        let member_id = member.id.clone();
        self.roster.insert(member);
        self.start_grace(name.as_str());
        tracing::info!(member = %name, "joined");
        self.emit_member(name.as_str());
        Ok(pb::JoinResponse {
            member_id,
            session_token: token,
            grant: Some(Grant::plan().to_pb()),
        })
    }

    /// `Inbox`: opens the caller's stream; returns its name and stream id.
    pub(super) fn open_inbox(
        &mut self,
        token: &str,
        after_seq: u64,
        sink: crate::roster::InboxSink,
    ) -> Result<(String, u64), HubError> {
        let name = self.caller(token)?;
        self.next_stream_id += 1;
        let stream_id = self.next_stream_id;
        let member = self.member_mut(&name)?;
        if after_seq > member.last_seq {
            return Err(HubError::OutOfRange(format!(
                "after_seq: {after_seq} is past the newest envelope ({}) of {name:?}",
                member.last_seq
            )));
        }
        member.open_stream(stream_id, after_seq, sink);
        if after_seq > 0 {
            self.changes.push(Change::Ack {
                member: name.clone(),
                seq: after_seq,
            });
        }
        self.end_grace(&name);
        self.dirty_streams.insert(name.clone());
        self.emit_member(&name);
        Ok((name, stream_id))
    }

    /// An inbox stream ended (the client went away, or it was replaced).
    pub(super) fn stream_closed(&mut self, name: &str, stream_id: u64) {
        let Some(member) = self.roster.live_mut(name) else {
            return;
        };
        if member.stream.as_ref().is_some_and(|s| s.id == stream_id) {
            member.stream = None;
            tracing::info!(member = %name, "inbox stream closed");
            if !member.terminated {
                self.start_grace(name);
            }
            self.emit_member(name);
        }
    }

    /// `Ack`: forgets the caller's envelopes up to `seq`.
    pub(super) fn ack(&mut self, token: &str, seq: u64) -> Result<(), HubError> {
        let name = self.caller(token)?;
        let member = self.member_mut(&name)?;
        if seq > member.last_seq {
            return Err(HubError::OutOfRange(format!(
                "seq: {seq} is past the newest envelope ({}) of {name:?}",
                member.last_seq
            )));
        }
        member.ack(seq);
        self.changes.push(Change::Ack { member: name, seq });
        Ok(())
    }

    /// `Send`: a text to one member, to `lead`, or to every other active member.
    pub(super) fn send_text(
        &mut self,
        token: &str,
        request: pb::SendRequest,
    ) -> Result<pb::SendResponse, HubError> {
        let from = self.caller(token)?;
        let text = request
            .text
            .ok_or_else(|| FieldError::new("text", "is required"))?;
        if text.content.len() > MAX_TEXT_BYTES {
            return Err(FieldError::new(
                "text.content",
                format!("is longer than {MAX_TEXT_BYTES} bytes"),
            )
            .into());
        }
        if request.message_id.len() > 128 {
            return Err(FieldError::new("message_id", "is longer than 128 bytes").into());
        }
        let recipients = match request.to.as_str() {
            "" => return Err(FieldError::new("to", "is required").into()),
            EVERYONE => self.roster.active_names_except(&from),
            LEAD => vec![LEAD.to_owned()],
            to => match self.roster.get(to) {
                Some(member) if !member.terminated => vec![to.to_owned()],
                Some(_) => return Err(HubError::NotFound(format!("to: {to:?} has terminated"))),
                None => return Err(HubError::NotFound(format!("to: no member {to:?}"))),
            },
        };
        for to in &recipients {
            if let Some(member) = self.roster.get(to) {
                if member.inbox.len() >= self.config.max_inbox {
                    return Err(HubError::ResourceExhausted(format!(
                        "to: the inbox of {to:?} holds {} unread envelopes",
                        member.inbox.len()
                    )));
                }
            }
        }
        // Only an id the sender chose can come again in a retry: only those
        // are remembered (and persisted).
        let (message_id, fresh) = if request.message_id.is_empty() {
            (uuid::Uuid::new_v4().to_string(), true)
        } else {
            let fresh = self
                .member_mut(&from)?
                .remember_message_id(&request.message_id);
            if fresh {
                self.changes.push(Change::MessageId {
                    sender: from.clone(),
                    message_id: request.message_id.clone(),
                });
            }
            (request.message_id, fresh)
        };
        if fresh {
            self.mark_busy(&from);
            for to in recipients {
                self.deliver(
                    &from,
                    &to,
                    Some(message_id.clone()),
                    Body::Text(text.clone()),
                );
            }
        }
        Ok(pb::SendResponse {
            message_id,
            skipped: Vec::new(),
        })
    }

    /// `ReportIdle`: the caller has nothing to do.
    pub(super) fn report_idle(
        &mut self,
        token: &str,
        idle: pb::IdleNotification,
    ) -> Result<(), HubError> {
        let name = self.caller(token)?;
        let changed = self.roster.get(&name).is_some_and(|m| !m.idle);
        if changed {
            if let Some(member) = self.roster.get_mut(&name) {
                member.idle = true;
            }
        }
        self.deliver(&name, LEAD, None, Body::IdleNotification(idle));
        if changed {
            self.emit_member(&name);
        }
        Ok(())
    }

    /// `ReportToolCall`: shows a teammate's tool call to the watchers.
    pub(super) fn report_tool_call(
        &mut self,
        token: &str,
        mut report: pb::ToolCallReport,
    ) -> Result<(), HubError> {
        let name = self.caller(token)?;
        if report.tool.is_empty() {
            return Err(FieldError::new("tool", "is required").into());
        }
        report.member = name.clone();
        tracing::info!(member = %name, tool = %report.tool, allowed = report.allowed, outcome = %report.outcome, "tool call");
        self.mark_busy(&name);
        self.emit(pb::event::Kind::ToolCall(report));
        Ok(())
    }

    /// The member is working again.
    pub(super) fn mark_busy(&mut self, name: &str) {
        // Only a change is worth persisting: most calls find it busy already.
        if self.roster.get(name).is_some_and(|m| m.idle) {
            if let Some(member) = self.roster.get_mut(name) {
                member.idle = false;
            }
            self.emit_member(name);
        }
    }

    /// The member of that name, which must exist.
    /// Only for what its persisted record does not hold (stream, inbox
    /// cursor, message ids): the record is not rewritten.
    pub(super) fn member_mut(&mut self, name: &str) -> Result<&mut Member, HubError> {
        self.roster.live_mut(name).ok_or_else(|| {
            HubError::Internal(format!("member {name:?} has a session but no roster entry"))
        })
    }

    /// The member leaves for good: TERMINATED, its token revoked, its stream
    /// ended, its pending requests expired, and every other member told.
    pub(super) fn terminate(&mut self, name: &str, reason: &str) {
        let Some(member) = self.roster.get_mut(name) else {
            return;
        };
        if member.terminated {
            return;
        }
        member.terminated = true;
        member.shutting_down = false;
        member.stream = None;
        member.inbox.clear();
        self.changes.push(Change::ClearInbox {
            member: name.to_owned(),
        });
        self.end_grace(name);
        self.roster.revoke(name);
        tracing::info!(member = %name, reason, "terminated");
        self.expire_involving(name, &format!("{name} terminated: {reason}"));
        self.emit_member(name);
        let notice = pb::TeammateTerminated {
            name: name.to_owned(),
            reason: reason.to_owned(),
            more: Vec::new(),
        };
        for other in self.roster.active_names_except(name) {
            self.deliver(LEAD, &other, None, Body::TeammateTerminated(notice.clone()));
        }
    }

    /// `SpawnTeammate`: starts a `teammate` process as a child of the lead.
    pub(super) fn spawn(
        &mut self,
        request: pb::SpawnTeammateRequest,
    ) -> Result<pb::SpawnTeammateResponse, HubError> {
        let spawner = self.config.spawner.clone().ok_or_else(|| {
            HubError::FailedPrecondition("this lead cannot start processes".into())
        })?;
        let name = Name::parse("name", &request.name)?;
        if request.role.is_empty() {
            return Err(FieldError::new("role", "is required").into());
        }
        if self
            .roster
            .get(name.as_str())
            .is_some_and(|m| !m.terminated)
            || self.children.contains_key(name.as_str())
        {
            return Err(HubError::AlreadyExists(format!(
                "name: {name:?} is already on the team"
            )));
        }
        let script = PathBuf::from(&request.script_path);
        if request.script_path.is_empty() {
            return Err(FieldError::new("script_path", "is required").into());
        }
        if !script.is_file() {
            return Err(FieldError::new(
                "script_path",
                format!("{script:?} is not a file the lead can read"),
            )
            .into());
        }
        let workspace = if request.workspace.is_empty() {
            spawner.default_workspace(name.as_str())
        } else {
            PathBuf::from(&request.workspace)
        };
        let bin = if request.teammate_bin.is_empty() {
            spawner.teammate_bin.clone()
        } else {
            PathBuf::from(&request.teammate_bin)
        };
        if !bin.is_file() {
            return Err(HubError::FailedPrecondition(format!(
                "teammate_bin: no teammate executable at {}; build it (cargo build -p teammate) \
                 or name one with --teammate-bin",
                bin.display()
            )));
        }
        let handle = self.handle.clone();
        let child_name = name.to_string();
        let child = spawner
            .spawn(
                &bin,
                name.as_str(),
                &request.role,
                &script,
                &workspace,
                move |pid, how| {
                    handle.notify(Command::ChildExited {
                        name: child_name,
                        pid,
                        how,
                    });
                },
            )
            .map_err(|e| HubError::Internal(format!("could not start {}: {e}", bin.display())))?;
        tracing::info!(member = %name, pid = child.pid, "spawned teammate");
        let pid = child.pid;
        self.children.insert(name.to_string(), child);
        Ok(pb::SpawnTeammateResponse { pid })
    }

    /// A child the lead started has been reaped.
    pub(super) fn child_exited(&mut self, name: &str, pid: u32, how: &str) {
        if self.children.get(name).is_some_and(|c| c.pid == pid) {
            self.children.remove(name);
        }
        self.terminate(name, &format!("process {how}"));
    }
}
