//! Time and the end of things: deadlines, grace periods for the
//! disconnected, and stopping the lead with its children.

use mesh_core::{
    lifecycle::Event,
    names::{Name, RequestId},
    op::RequestShutdown,
};

use super::{Claim, Hub};
use crate::store::Change;

/// How often the hub looks for stuck streams and for what retention lets go.
const SWEEP_EVERY_MS: i64 = 1_000;

impl Hub {
    /// When the hub must next wake without a command: a request deadline, the
    /// end of a grace period, or the end of the stop wait.
    pub(super) fn next_wakeup(&self) -> Option<i64> {
        [
            self.team.next_tick(),
            self.stopping_until,
            self.notice_due(),
            Some(self.next_sweep),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Expires what is due: the core's deadlines and grace periods (see
    /// [`mesh_core::team::Team::tick`]), then stuck streams and what retention
    /// lets go.
    pub(super) fn on_timer(&mut self) {
        let now = self.now();
        let effects = self.team.tick(now);
        self.carry_out(effects);
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY_MS;
            // The last second's history goes to the store in one commit.
            self.changes.extend(self.record.unsaved());
            self.end_stuck_streams(now);
            self.forget_past_retention(now);
            if mesh_telemetry::enabled() {
                crate::telemetry::sampled(&self.sample());
            }
        }
    }

    /// What the gauges show, as the state stands.
    fn sample(&self) -> crate::telemetry::Sample {
        use mesh_core::lifecycle::Status as Life;
        let mut sample = crate::telemetry::Sample::default();
        for r in self.team.requests.iter() {
            if !r.status.is_terminal() {
                *sample
                    .pending
                    .entry(crate::stats::kind_name(r.opening.kind))
                    .or_default() += 1;
            }
        }
        for m in self.team.members.iter() {
            let status = match m.life.status() {
                Life::Working => "working",
                Life::Idle => "idle",
                Life::Disconnected => "disconnected",
                Life::ShuttingDown => "shutting_down",
                Life::Terminated => "terminated",
            };
            *sample.members.entry(status).or_default() += 1;
        }
        sample.inboxes = self
            .inboxes
            .iter()
            .map(|(name, inbox)| (name.clone(), inbox.entries.len() as u64, inbox.bytes as u64))
            .collect();
        sample
    }

    /// Ends the stream of every member that has left an envelope on it
    /// unacknowledged for longer than `--ack-timeout`: it is DISCONNECTED,
    /// and has the grace period to reconnect and resume.
    fn end_stuck_streams(&mut self, now: i64) {
        let timeout = self.config.ack_timeout;
        let since = now - i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX / 2);
        let mut stuck: Vec<(String, u64)> = self
            .inboxes
            .iter()
            .filter_map(|(name, inbox)| inbox.stuck_since(since).map(|seq| (name.clone(), seq)))
            .collect();
        stuck.sort_by_key(|(name, _)| self.team.members.get(name).map(|m| m.order));
        for (name, seq) in stuck {
            tracing::warn!(member = %name, seq, "inbox stream stuck; ending it");
            if let Some(inbox) = self.inboxes.get_mut(&name) {
                inbox.end_stream(crate::outbox::StreamEnd::Unacknowledged(format!(
                    "inbox: envelope {seq} has gone unacknowledged for longer than \
                     --ack-timeout {}s; reconnect with after_seq and Ack what you process",
                    timeout.as_secs_f64()
                )));
            }
            self.stream_lost(&name);
        }
    }

    /// Forgets requests resolved, and members terminated, longer than
    /// `--retention` ago, and the oldest resolved requests past
    /// `--retained-max-bytes`.
    fn forget_past_retention(&mut self, now: i64) {
        let before = now - i64::try_from(self.config.retention.as_millis()).unwrap_or(i64::MAX / 2);
        self.team
            .forget_resolved(before, self.config.retained_max_bytes);
        let gone: Vec<String> = self
            .team
            .members
            .iter()
            .filter(|m| m.life.terminated_at().is_some_and(|at| at <= before))
            .map(|m| m.name.to_string())
            .collect();
        for name in gone {
            self.team.members.remove(&name);
            self.inboxes.remove(&name);
            self.processes.forget(&name);
            self.changes.push(Change::DeleteMember { member: name });
        }
    }

    /// When a grace period that starts now ends.
    pub(super) fn grace_until(&self) -> i64 {
        self.now() + i64::try_from(self.config.grace.as_millis()).unwrap_or(i64::MAX / 2)
    }

    /// Applies `event` to `name`'s life; `true` if its state changed.
    pub(super) fn life(&mut self, name: &str, event: Event) -> bool {
        self.team.members.on_life(name, event).unwrap_or(false)
    }

    /// `name`'s inbox stream is gone (its stream already ended): it is
    /// DISCONNECTED, with the grace period to come back, and the watchers
    /// hear of it.
    pub(super) fn stream_lost(&mut self, name: &str) {
        let grace_until = self.grace_until();
        self.life(name, Event::StreamLost { grace_until });
        self.emit_member(name);
    }

    /// The lead is stopping: every child it started is asked to shut down.
    pub(super) fn begin_stop(&mut self) {
        let wait = i64::try_from(self.config.stop_wait.as_millis()).unwrap_or(0);
        self.stopping_until = Some(self.now() + wait);
        let names = self.processes.names();
        tracing::info!(
            children = names.len(),
            "stopping; asking spawned teammates to shut down"
        );
        for name in names {
            if self.team.members.is_active(&name) {
                let Ok(target) = Name::parse("target", &name) else {
                    continue;
                };
                let asked = self.operate(
                    Claim::operator(),
                    Ok(RequestShutdown {
                        request_id: RequestId::generate(),
                        target,
                        reason: "the lead is stopping".into(),
                        deadline_unix_ms: Some(self.now() + wait.max(1)),
                        asked_by: "lead".into(),
                    }),
                );
                if let Err(e) = asked {
                    tracing::warn!(member = %name, error = %e, "could not ask to shut down");
                }
            }
        }
    }

    /// Stopping, and no child is left to wait for (or the wait is over).
    pub(super) fn stop_done(&self) -> bool {
        self.stopping_until
            .is_some_and(|until| self.processes.none_left() || self.now() >= until)
    }

    /// Goes without a word more to the store: every stream ends
    /// UNAVAILABLE saying `why`, and the children are left running (their
    /// sessions are not killed) to rejoin the lead that goes on.
    pub(super) async fn leave(mut self, why: &str) {
        let gone = || {
            crate::outbox::StreamEnd::Gone(format!(
                "the lead stepped down ({why}); reconnect to the active lead"
            ))
        };
        for inbox in self.inboxes.iter_mut() {
            inbox.end_stream(gone());
        }
        self.watchers.end_all(gone);
        self.committer.close().await;
        // Dropping a child would stop it: the process keeps it.
        let left = self.processes.drain();
        crate::children::left_running(left.into_iter().map(|(_, child)| child));
    }

    /// Stops the children still running (TERM, then KILL), waits for them to
    /// be reaped, and ends every stream.
    pub(super) async fn finish(mut self) {
        let children = self.processes.drain();
        for (_, child) in &children {
            child.stop();
        }
        for (name, child) in children {
            let _ = child.task.await;
            self.terminate(&name, "stopped by signal as the lead stopped");
        }
        self.changes.extend(self.record.unsaved());
        if let Err(e) = self.settle().await {
            tracing::error!(error = %e, "cannot persist the last changes");
        }
        if mesh_telemetry::enabled() {
            // The gauges as the lead leaves them, however short its life.
            crate::telemetry::sampled(&self.sample());
        }
        for tidy in self.processes.take_tidying() {
            let _ = tidy.await;
        }
        // The store is closed before the hub is gone.
        self.committer.close().await;
        for inbox in self.inboxes.iter_mut() {
            inbox.stream = None;
        }
        self.watchers.clear();
    }
}
