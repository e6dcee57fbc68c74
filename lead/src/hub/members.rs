//! The hub's side of the members: the join rate and a joining child,
//! inbox streams, messages, termination notices, the team's pages, and
//! spawning teammates.

use mesh_core::{
    access::Admitted,
    effect::{Message, Notice},
    error::FieldError,
    lifecycle::Event,
    limits,
    names::{Name, EVERYONE, LEAD},
    op::{Join, Joined, Sent},
};
use sha2::Digest as _;
use shared::wire::message_bytes;

use super::{Command, Hub, Reply};
use crate::{
    error::HubError,
    inboxes::{envelope_bytes, Inbox, SeenId},
    launch::{SpawnAsk, Spawned},
    outbox,
    store::Change,
};

impl Hub {
    /// `Join`: past the join rate (every attempt counts, so a leaked join
    /// token cannot be tried faster than the rate either), the core admits
    /// the member; a child the lead is starting under its name, or started,
    /// is marked as joined.
    pub(super) fn join(&mut self, caller: &Admitted, op: Join) -> Result<Joined, HubError> {
        let now = self.now();
        if !self.joins.take(now) {
            return Err(HubError::ResourceExhausted(format!(
                "Join: more than --join-rate {} joins a second (burst --join-burst {}); retry later",
                self.config.join_rate, self.config.join_burst
            )));
        }
        let name = op.name.to_string();
        let joined = self.in_core(caller, op)?;
        self.processes.joined(&name);
        tracing::info!(member = %name, "joined");
        Ok(joined)
    }

    /// `Inbox`: opens the caller's stream; returns its name, the stream's id
    /// and where its envelopes come out.
    pub(super) fn open_inbox(
        &mut self,
        name: &str,
        after_seq: u64,
    ) -> Result<super::OpenedInbox, HubError> {
        let name = name.to_owned();
        self.next_stream_id += 1;
        let stream_id = self.next_stream_id;
        let last_seq = self.last_seq(&name)?;
        if after_seq > last_seq {
            return Err(HubError::OutOfRange(format!(
                "after_seq: {after_seq} is past the newest envelope ({last_seq}) of {name:?}"
            )));
        }
        let (sink, envelopes) = outbox::channel(self.config.stream_max_bytes);
        let (handle, room_for) = (self.handle.clone(), name.clone());
        sink.on_room(move || {
            handle.notify(Command::InboxRoom {
                name: room_for.clone(),
                stream_id,
            });
        });
        self.inboxes
            .open_stream(&name, stream_id, after_seq, sink, self.now());
        self.life(&name, Event::StreamOpened);
        if after_seq > 0 {
            self.changes.push(Change::Ack {
                member: name.clone(),
                seq: after_seq,
            });
        }
        self.forming.streams.insert(name.clone());
        self.emit_member(&name);
        Ok((name, stream_id, envelopes))
    }

    /// An inbox stream's reader has room for more: it gets what waits for
    /// it with the next batch.
    pub(super) fn inbox_room(&mut self, name: String, stream_id: u64) {
        let current = self
            .inboxes
            .get(&name)
            .and_then(|inbox| inbox.stream.as_ref())
            .is_some_and(|s| s.id == stream_id);
        if current {
            self.forming.streams.insert(name);
        }
    }

    /// An inbox stream ended (the client went away, or it was replaced).
    pub(super) fn stream_closed(&mut self, name: &str, stream_id: u64) {
        let Some(inbox) = self.inboxes.get_mut(name) else {
            return;
        };
        if inbox.stream.as_ref().is_some_and(|s| s.id == stream_id) {
            inbox.stream = None;
            tracing::info!(member = %name, "inbox stream closed");
            self.stream_lost(name);
        }
    }

    /// `Send`: a text to one member, to `lead`, or to every other active
    /// member. A retry (the same `message_id` with the same message) is
    /// answered OK before anything else is looked at, so it is answered as
    /// the first call was even if an inbox filled since; the same id with
    /// another message is ALREADY_EXISTS. A broadcast skips full inboxes and
    /// names them in `skipped`.
    pub(super) fn send_text(
        &mut self,
        from: &str,
        to: &str,
        message_id: Option<String>,
        content: String,
    ) -> Result<Sent, HubError> {
        let from = from.to_owned();
        let digest = message_digest(to, &content);
        if let Some(message_id) = &message_id {
            let seen = self.inbox_mut(&from)?.check_message_id(message_id, &digest);
            match seen {
                SeenId::New => {}
                SeenId::Retry => {
                    return Ok(Sent {
                        message_id: message_id.clone(),
                        skipped: Vec::new(),
                    })
                }
                SeenId::Reused => {
                    return Err(HubError::AlreadyExists(format!(
                        "message_id: {:?} was already used for a different message \
                         (another recipient or text); a retry must repeat the message, \
                         a new message needs a new id",
                        message_id
                    )))
                }
            }
        }
        let body = Message::Text { content };
        // The id the lead makes when the sender chose none is a UUID.
        let id_len = message_id.as_ref().map_or(36, String::len);
        let bytes = envelope_bytes(from.len(), id_len, message_bytes(&body));
        let (recipients, skipped) = match to {
            EVERYONE => {
                let (room, full): (Vec<String>, Vec<String>) = self
                    .team
                    .members
                    .active_names_except(&from)
                    .into_iter()
                    .partition(|to| self.inbox_full(to, bytes).is_none());
                (room, full)
            }
            LEAD => (vec![LEAD.to_owned()], Vec::new()),
            to => match self.team.members.get(to) {
                Some(member) if !member.terminated() => {
                    if let Some(why) = self.inbox_full(to, bytes) {
                        return Err(HubError::ResourceExhausted(format!("to: {why}")));
                    }
                    (vec![to.to_owned()], Vec::new())
                }
                Some(_) => return Err(HubError::NotFound(format!("to: {to:?} has terminated"))),
                None => return Err(HubError::NotFound(format!("to: no member {to:?}"))),
            },
        };
        let held = self.inboxes.held_bytes();
        let cost = if recipients.len() > 1 {
            bytes + 64 * recipients.len()
        } else {
            bytes
        };
        if recipients.first().is_some_and(|to| to != LEAD)
            && held + cost > self.config.max_held_bytes
        {
            return Err(HubError::ResourceExhausted(format!(
                "the lead holds {held} bytes of unread envelopes; this message would pass \
                 --held-max-bytes {}",
                self.config.max_held_bytes
            )));
        }
        // Only an id the sender chose can come again in a retry: only those
        // are remembered (and persisted).
        let message_id = match message_id {
            None => uuid::Uuid::new_v4().to_string(),
            Some(message_id) => {
                self.inbox_mut(&from)?
                    .remember_message_id(&message_id, &digest);
                self.changes.push(Change::MessageId {
                    sender: from.clone(),
                    message_id: message_id.clone(),
                    digest,
                });
                message_id
            }
        };
        self.mark_busy(&from);
        if recipients.len() > 1 {
            self.fan_out(&from, &recipients, message_id.clone(), body);
        } else if let Some(to) = recipients.first() {
            self.deliver(&from, to, Some(message_id.clone()), body);
        }
        if !skipped.is_empty() {
            tracing::warn!(member = %from, skipped = skipped.len(), "a broadcast skipped full inboxes");
        }
        Ok(Sent {
            message_id,
            skipped,
        })
    }

    /// Why `to`'s inbox has no room for `bytes` more, naming the flag; `None`
    /// if it has room.
    fn inbox_full(&self, to: &str, bytes: usize) -> Option<String> {
        let inbox = self.inboxes.get(to)?;
        if inbox.entries.len() >= self.config.max_inbox {
            return Some(format!(
                "the inbox of {to:?} holds {} unread envelopes (--inbox-max-envelopes {})",
                inbox.entries.len(),
                self.config.max_inbox
            ));
        }
        if inbox.bytes + bytes > self.config.max_inbox_bytes {
            return Some(format!(
                "the inbox of {to:?} holds {} bytes of unread envelopes; {bytes} more would \
                 pass --inbox-max-bytes {}",
                inbox.bytes, self.config.max_inbox_bytes
            ));
        }
        None
    }

    /// The member is working again.
    pub(super) fn mark_busy(&mut self, name: &str) {
        let effects = self.team.show_work(name);
        self.carry_out(effects);
    }

    /// The inbox of member `name`, which must have one.
    fn inbox_mut(&mut self, name: &str) -> Result<&mut Inbox, HubError> {
        self.inboxes.get_mut(name).ok_or_else(|| {
            HubError::Internal(format!("member {name:?} has a session but no inbox"))
        })
    }

    /// The last `seq` the inbox of member `name` handed out.
    fn last_seq(&self, name: &str) -> Result<u64, HubError> {
        self.team
            .members
            .get(name)
            .map(|m| m.last_seq)
            .ok_or_else(|| {
                HubError::Internal(format!("member {name:?} has a session but no entry"))
            })
    }

    /// The member leaves for good (see [`mesh_core::team::Team::end_member`]):
    /// every other member is told (see [`Hub::send_due_notices`]).
    pub(super) fn terminate(&mut self, name: &str, reason: &str) {
        let effects = self.team.end_member(name, reason, self.now());
        self.carry_out(effects);
    }

    /// When a termination notice is waiting to go out.
    pub(super) fn notice_due(&self) -> Option<i64> {
        self.terminations.due()
    }

    /// Tells every active member of the terminations since the last notice,
    /// in one `TeammateTerminated` (its body stored once for them all), once
    /// the last notice's hold has passed. A notice costs O(1) per recipient,
    /// and many members ending at once make one notice, not one each.
    pub(super) fn send_due_notices(&mut self) {
        if self.terminations.due().is_none_or(|at| at > self.now()) {
            return;
        }
        let recipients = self.team.members.active_names_except(LEAD);
        let Some(notice) = self.terminations.take_due(self.now(), recipients.len()) else {
            return;
        };
        match recipients.len() {
            0 => {}
            1 => self.deliver(LEAD, &recipients[0], None, notice),
            _ => self.fan_out(LEAD, &recipients, uuid::Uuid::new_v4().to_string(), notice),
        }
    }

    /// `SpawnTeammate`: checks the request's fields here, reserves the
    /// name, and hands the rest (every check that touches the filesystem,
    /// then the fork) to a blocking task off the hub; its outcome comes back
    /// as [`Command::Launched`], which answers.
    pub(super) fn spawn(&mut self, request: SpawnAsk, reply: Reply<Spawned>) {
        let (spawner, name) = match self.check_spawn(&request) {
            Ok(checked) => checked,
            Err(e) => return self.reply(reply, Err(e)),
        };
        self.processes.reserve(name.as_str());
        let handle = self.handle.clone();
        tokio::task::spawn_blocking(move || {
            // The exit is told only once the hub knows the child, so that a
            // child that dies at once is never reported before it exists.
            let (armed, armed_rx) = tokio::sync::oneshot::channel::<()>();
            let on_exit = {
                let handle = handle.clone();
                let name = name.to_string();
                move |pid, how, log_tail| {
                    tokio::spawn(async move {
                        let _ = armed_rx.await;
                        handle.notify(Command::ChildExited {
                            name,
                            pid,
                            how,
                            log_tail,
                        });
                    });
                }
            };
            let result = crate::launch::launch(&spawner, name.as_str(), &request, on_exit);
            let launched = Command::Launched {
                name: name.to_string(),
                result,
                armed,
                reply,
            };
            if let Some(Command::Launched {
                result: Ok(child), ..
            }) = handle.send_blocking(launched)
            {
                // The hub is gone: nobody would stop it.
                child.stop();
            }
        });
    }

    /// The checks of a `SpawnTeammate` that touch nothing outside the hub:
    /// the spawner, the name and the fields' sizes.
    fn check_spawn(
        &self,
        request: &SpawnAsk,
    ) -> Result<(crate::children::Spawner, Name), HubError> {
        let spawner = self.config.spawner.clone().ok_or_else(|| {
            HubError::FailedPrecondition("this lead cannot start processes".into())
        })?;
        let name = Name::parse("name", &request.name)?;
        if request.role.is_empty() {
            return Err(FieldError::new("role", "is required").into());
        }
        for (field, value, limit) in [
            ("role", &request.role, limits::ROLE),
            ("script_path", &request.script_path, limits::PATH),
            ("workspace", &request.workspace, limits::PATH),
            ("teammate_bin", &request.teammate_bin, limits::PATH),
        ] {
            limits::check(field, value, limit)?;
        }
        for (field, value) in [
            ("role", &request.role),
            ("script_path", &request.script_path),
            ("workspace", &request.workspace),
            ("teammate_bin", &request.teammate_bin),
            ("model", &request.model),
            ("task", &request.task),
            ("base_url", &request.base_url),
        ] {
            if value.contains('\0') {
                return Err(FieldError::new(field, "may not contain a NUL byte").into());
            }
        }
        if self.team.members.is_active(name.as_str()) || self.processes.has(name.as_str()) {
            return Err(HubError::AlreadyExists(format!(
                "name: {name:?} is already on the team"
            )));
        }
        Ok((spawner, name))
    }

    /// A spawn's outcome: the child is the hub's now (and its exit may be
    /// told), and the caller hears how it went.
    pub(super) fn launched(
        &mut self,
        name: String,
        result: Result<crate::children::Child, HubError>,
        armed: tokio::sync::oneshot::Sender<()>,
        reply: Reply<Spawned>,
    ) {
        let result = self.processes.launched(&name, result).map(|(pid, log)| {
            tracing::info!(member = %name, pid, "spawned teammate");
            Spawned {
                pid,
                log_path: log.to_string_lossy().into_owned(),
            }
        });
        let _ = armed.send(());
        self.reply(reply, result);
    }

    /// A child the lead started has been reaped: the watchers hear how it
    /// ended, and whether it had joined.
    pub(super) fn child_exited(&mut self, name: &str, pid: u32, how: &str, log_tail: String) {
        let (joined, log) = self.processes.exited(name, pid);
        // Stopping, the lead forgot its children first.
        let log = log.unwrap_or_else(|| {
            self.config
                .spawner
                .as_ref()
                .map(|s| s.log_path(name))
                .unwrap_or_default()
        });
        if !joined {
            tracing::warn!(member = %name, pid, how, log = %log.display(), "a spawned teammate ended before joining");
        }
        self.emit(Notice::ChildExited {
            name: name.to_owned(),
            pid,
            how: how.to_owned(),
            joined,
            log_path: log.to_string_lossy().into_owned(),
            log_tail,
        });
        self.terminate(name, &format!("process {how}"));
        self.tidy_worktree(name);
    }

    /// A spawned teammate's process ended: its worktree (`--repo`) goes,
    /// with its branch, unless it holds work that has not landed (kept for
    /// `lead gc --force`, or for a teammate of that name to take up again).
    /// Git runs off the hub.
    fn tidy_worktree(&mut self, name: &str) {
        let (Some(repo), Some(spawner)) = (self.config.repo.clone(), self.config.spawner.as_ref())
        else {
            return;
        };
        let dir = spawner.worktree(name);
        if !dir.exists() {
            return;
        }
        let name = name.to_owned();
        self.processes.tidy(tokio::spawn(async move {
            match repo.remove_worktree(&dir, &name, false).await {
                Ok(true) => {
                    tracing::info!(member = %name, worktree = %dir.display(), "removed the worktree: its work landed")
                }
                Ok(false) => {
                    tracing::warn!(member = %name, worktree = %dir.display(), "kept the worktree: it holds work that has not landed (lead gc --force removes it)")
                }
                Err(e) => tracing::warn!(member = %name, error = %e, "cannot remove the worktree"),
            }
        }));
    }
}

/// What a `Send` carried, to tell a retry from a reused id: SHA-256 of the
/// recipient and the text, hex, cut to 128 bits.
fn message_digest(to: &str, content: &str) -> String {
    let mut hasher = sha2::Sha256::new();
    hasher.update(to.as_bytes());
    hasher.update([0]);
    hasher.update(content.as_bytes());
    let digest = hasher.finalize();
    crate::store::hex(&digest[..16])
}
