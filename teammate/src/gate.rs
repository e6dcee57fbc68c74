//! The gate: write and command tools exist only behind a [`Writer`], which
//! only a grant of a mode other than PLAN creates, and each call runs only
//! with a [`Ticket`], which only the writer issues. Code in plan mode holds no
//! writer, so it cannot reach `write_file`, `edit_file` or `run_command` at all.
//!
//! ```text
//! Grant (mode != PLAN) --Writer::unlock--> Writer --clear(call)--> Ticket --run--> effect
//!                                                  \--> NeedsPermission --permit(response)--> Ticket
//! ```

use std::{io::Write, path::Path};

use mesh_core::{
    grant::{Grant, Mode, PathSet},
    protocol::Decision,
};
use shared::auth::now_unix_ms;

use crate::{
    command::CommandLimits,
    tools::{read_text, ToolCall, ToolError, Workspace},
};

/// What the teammate may do, as its current grant says.
#[derive(Debug)]
pub enum Gate {
    /// Plan mode: no writer exists.
    Plan,
    /// A grant unlocked the gated tools.
    Unlocked(Writer),
}

impl Gate {
    /// The tools on offer in this mode: the read tools, `send_message` and
    /// the task-list tools always; `submit_plan` in plan mode; the gated tools once a grant
    /// unlocked them (every mode but PLAN allows all three, DEFAULT and
    /// ACCEPT_EDITS through the lead's permission where the grant says).
    pub fn tools(&self) -> Vec<&'static str> {
        let mut tools = Self::tools_of(matches!(self, Gate::Plan));
        if let Gate::Unlocked(writer) = self {
            if !writer.commands.sandbox.offers_commands() {
                tools.retain(|t| *t != crate::tools::RUN_COMMAND);
            }
        }
        tools
    }

    /// The tools offered in plan mode (`plan`) or once a plan is approved.
    pub fn tools_of(plan: bool) -> Vec<&'static str> {
        let mut tools = crate::tools::READ_TOOLS.to_vec();
        tools.push(crate::catalog::SEND_MESSAGE);
        tools.extend(crate::catalog::TASK_TOOLS);
        if plan {
            tools.push(crate::catalog::SUBMIT_PLAN);
        } else {
            tools.extend(crate::tools::GATED_TOOLS);
            tools.push(crate::catalog::REQUEST_AMENDMENT);
        }
        tools
    }
}

/// The capability to run gated tools, within a grant.
#[derive(Debug)]
pub struct Writer {
    /// Where files are written.
    workspace: Workspace,
    /// The grant's mode (never PLAN).
    mode: Mode,
    /// ACCEPT_EDITS: the paths edits may touch.
    paths: PathSet,
    /// When the grant lapses.
    expires_at_unix_ms: Option<i64>,
    /// How `run_command` runs.
    commands: CommandLimits,
}

/// Leave to run exactly one gated call.
#[derive(Debug)]
pub struct Ticket {
    /// The call it allows.
    call: ToolCall,
}

/// What the gate says of a gated call.
#[derive(Debug)]
pub enum Clearance {
    /// Run it.
    Run(Ticket),
    /// Ask the lead first (`RequestPermission`).
    NeedsPermission,
    /// It may not run; the reason says why.
    Refused(String),
}

impl Writer {
    /// The writer a grant creates; `None` in plan mode. Empty `write_paths`
    /// mean the approved plan's files.
    pub fn unlock(
        grant: &Grant,
        plan_files: &[String],
        workspace: &Workspace,
        commands: &CommandLimits,
    ) -> Result<Option<Self>, mesh_core::error::FieldError> {
        if grant.mode == Mode::Plan {
            return Ok(None);
        }
        let patterns = if grant.write_paths.is_empty() {
            plan_files
        } else {
            &grant.write_paths
        };
        Ok(Some(Self {
            workspace: workspace.clone(),
            mode: grant.mode,
            paths: PathSet::new("grant.write_paths", patterns)?,
            expires_at_unix_ms: grant.expires_at_unix_ms,
            commands: commands.clone(),
        }))
    }

    /// The grant's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Decides whether a gated call runs now, needs the lead's permission, or is refused.
    pub fn clear(&self, call: &ToolCall) -> Clearance {
        if !call.is_gated() {
            return Clearance::Refused(format!("{} is not a gated tool", call.name()));
        }
        if self
            .expires_at_unix_ms
            .is_some_and(|at| now_unix_ms() >= at)
        {
            return Clearance::Refused("the grant has expired; submit a new plan".into());
        }
        if let (ToolCall::RunCommand { .. }, crate::sandbox::Sandbox::Unavailable(why)) =
            (call, &self.commands.sandbox)
        {
            return Clearance::Refused(format!("run_command is not offered: {why}"));
        }
        match (self.mode, call.write_path()) {
            (Mode::Bypass, _) => Clearance::Run(Ticket { call: call.clone() }),
            (Mode::AcceptEdits, Some(path)) => match self.workspace.write_relative(path) {
                Ok(rel) => match self.within_paths(path, &rel) {
                    Ok(()) => Clearance::Run(Ticket { call: call.clone() }),
                    Err(reason) => Clearance::Refused(reason),
                },
                Err(e) => Clearance::Refused(e.to_string()),
            },
            (Mode::AcceptEdits | Mode::Default, _) => Clearance::NeedsPermission,
            (Mode::Plan, _) => Clearance::Refused("plan mode has no write tools".into()),
        }
    }

    /// ACCEPT_EDITS: whether the file a write to `path` lands on (`rel`,
    /// symlinked directories resolved) is within the grant's write paths.
    fn within_paths(&self, path: &str, rel: &str) -> Result<(), String> {
        if self.mode != Mode::AcceptEdits || self.paths.matches(rel) {
            return Ok(());
        }
        let shown = match self.workspace.relative(path) {
            Ok(written) if written != rel => format!("{written} (which leads to {rel})"),
            _ => rel.to_owned(),
        };
        Err(format!(
            "{shown} is outside the grant's write paths {:?}",
            self.paths.patterns()
        ))
    }

    /// Where a write to `path` goes, checked against the grant's write paths
    /// again: the directories may have changed since the call was cleared.
    fn target(&self, path: &str) -> Result<std::path::PathBuf, ToolError> {
        let target = self.workspace.writable(path)?;
        self.within_paths(path, &self.workspace.relative_of(&target))
            .map_err(ToolError::Refused)?;
        Ok(target)
    }

    /// Turns the lead's answer to a permission request into a ticket.
    pub fn permit(&self, call: &ToolCall, response: &Decision) -> Result<Ticket, String> {
        if response.approve {
            Ok(Ticket { call: call.clone() })
        } else if response.feedback.is_empty() {
            Err("the lead denied permission".into())
        } else {
            Err(format!("the lead denied permission: {}", response.feedback))
        }
    }

    /// Runs the call a ticket allows.
    pub async fn run(&self, ticket: Ticket) -> Result<String, ToolError> {
        match ticket.call {
            ToolCall::WriteFile { path, content } => {
                let target = self.target(&path)?;
                write_atomically(&target, content.as_bytes())
                    .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
                Ok(format!("wrote {} bytes to {path}", content.len()))
            }
            ToolCall::EditFile { path, old, new } => {
                let target = self.target(&path)?;
                // Not through a FIFO, a device or a hard link: the same
                // checks as read_file.
                let text = read_text(&target, &path)?;
                match text.matches(old.as_str()).count() {
                    1 => {}
                    0 => {
                        return Err(ToolError::Failed(format!(
                            "{path}: the text to replace is not there"
                        )))
                    }
                    n => {
                        return Err(ToolError::Failed(format!(
                            "{path}: the text to replace occurs {n} times; make it unique"
                        )))
                    }
                }
                let edited = text.replacen(old.as_str(), &new, 1);
                write_atomically(&target, edited.as_bytes())
                    .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
                Ok(format!("edited {path}"))
            }
            ToolCall::RunCommand { command } => self.run_command(&command).await,
            other => Err(ToolError::Refused(format!(
                "{} is not a gated tool",
                other.name()
            ))),
        }
    }

    /// `run_command`: `sh -c` in the workspace, within the command limits,
    /// confined to the grant's write paths (see [`crate::command`]). What it
    /// wrote outside them is undone, and the call is refused for it.
    async fn run_command(&self, command: &str) -> Result<String, ToolError> {
        let done = crate::command::run(self.workspace.root(), command, &self.commands, &self.paths)
            .await
            .map_err(|e| ToolError::Failed(format!("could not run sh: {e}")))?;
        if !done.undone.is_empty() {
            return Err(ToolError::Refused(format!(
                "the command wrote outside the grant's write paths {:?}, which was undone: {}; \
                 {}; stdout: {}; stderr: {}",
                self.paths.patterns(),
                done.undone.join("; "),
                done.status
                    .map_or_else(|| "timed out".to_owned(), |s| s.to_string()),
                done.stdout.trim(),
                done.stderr.trim()
            )));
        }
        let Some(status) = done.status else {
            return Err(ToolError::Failed(format!(
                "timed out after {:?}; it and everything it started were killed; stdout: {}; stderr: {}",
                self.commands.timeout,
                done.stdout.trim(),
                done.stderr.trim()
            )));
        };
        let summary = format!(
            "{status}; stdout: {}; stderr: {}",
            done.stdout.trim(),
            done.stderr.trim()
        );
        if status.success() {
            Ok(summary)
        } else {
            Err(ToolError::Failed(summary))
        }
    }
}

/// Writes `bytes` to a temporary file beside `target`, syncs it, and renames
/// it over `target`: readers see the old file or the new one, never a part.
fn write_atomically(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent directory"))?;
    let mut temp = tempfile::Builder::new()
        .prefix(".mesh-write-")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(target).map_err(|e| e.error)?;
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(mode: Mode, write_paths: &[&str]) -> (tempfile::TempDir, Workspace, Option<Writer>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(dir.path()).expect("workspace");
        let grant = Grant {
            mode,
            write_paths: write_paths.iter().map(|s| s.to_string()).collect(),
            expires_at_unix_ms: None,
        };
        let writer = Writer::unlock(
            &grant,
            &["src/plan.rs".to_owned()],
            &ws,
            &CommandLimits::default(),
        )
        .expect("valid grant");
        (dir, ws, writer)
    }

    fn write(path: &str) -> ToolCall {
        ToolCall::WriteFile {
            path: path.into(),
            content: "x".into(),
        }
    }

    /// Where no sandbox works and none was waived, a grant unlocks the
    /// file tools but not `run_command`: it is not offered, and a call of
    /// it is refused, saying why.
    #[test]
    fn without_a_sandbox_run_command_is_neither_offered_nor_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(dir.path()).expect("workspace");
        let grant = Grant {
            mode: Mode::Bypass,
            write_paths: Vec::new(),
            expires_at_unix_ms: None,
        };
        let commands = CommandLimits {
            sandbox: crate::sandbox::Sandbox::Unavailable("no Landlock, no bubblewrap".into()),
            ..CommandLimits::default()
        };
        let writer = Writer::unlock(&grant, &["a.txt".to_owned()], &ws, &commands)
            .expect("valid grant")
            .expect("a writer");
        let gate = Gate::Unlocked(writer);
        let tools = gate.tools();
        assert!(tools.contains(&"write_file"), "{tools:?}");
        assert!(!tools.contains(&"run_command"), "{tools:?}");
        let Gate::Unlocked(writer) = &gate else {
            unreachable!("unlocked above")
        };
        let call = ToolCall::RunCommand {
            command: "true".into(),
        };
        match writer.clear(&call) {
            Clearance::Refused(why) => assert!(why.contains("no Landlock"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plan_mode_creates_no_writer() {
        let (_dir, _ws, writer) = setup(Mode::Plan, &[]);
        assert!(writer.is_none());
        assert_eq!(
            Gate::Plan.tools(),
            [
                "read_file",
                "list_dir",
                "search",
                "send_message",
                "list_tasks",
                "claim_task",
                "complete_task",
                "submit_plan"
            ]
        );
    }

    #[test]
    fn a_grant_offers_the_gated_tools_instead_of_submit_plan() {
        for mode in [Mode::Default, Mode::AcceptEdits, Mode::Bypass] {
            let (_dir, _ws, writer) = setup(mode, &["src/**"]);
            let gate = Gate::Unlocked(writer.expect("unlocked"));
            assert_eq!(
                gate.tools(),
                [
                    "read_file",
                    "list_dir",
                    "search",
                    "send_message",
                    "list_tasks",
                    "claim_task",
                    "complete_task",
                    "write_file",
                    "edit_file",
                    "run_command",
                    "request_amendment"
                ]
            );
        }
    }

    #[tokio::test]
    async fn accept_edits_writes_inside_its_paths_only() {
        let (_dir, ws, writer) = setup(Mode::AcceptEdits, &["src/**"]);
        let writer = writer.expect("unlocked");
        match writer.clear(&write("src/a/b.rs")) {
            Clearance::Run(ticket) => assert!(writer.run(ticket).await.is_ok()),
            other => panic!("expected to run, got {other:?}"),
        }
        assert_eq!(
            std::fs::read_to_string(ws.root().join("src/a/b.rs"))
                .ok()
                .as_deref(),
            Some("x")
        );
        assert!(
            matches!(writer.clear(&write("db/schema.sql")), Clearance::Refused(r) if r.contains("db/schema.sql"))
        );
        assert!(!ws.root().join("db").exists());
        assert!(matches!(
            writer.clear(&ToolCall::RunCommand {
                command: "true".into()
            }),
            Clearance::NeedsPermission
        ));
    }

    #[tokio::test]
    async fn accept_edits_matches_where_a_write_lands_not_the_symlink_it_goes_through() {
        let (_dir, ws, writer) = setup(Mode::AcceptEdits, &["src/**"]);
        let writer = writer.expect("unlocked");
        std::fs::create_dir_all(ws.root().join("src")).expect("mkdir");
        std::fs::create_dir_all(ws.root().join("db")).expect("mkdir");
        std::os::unix::fs::symlink("../db", ws.root().join("src/db")).expect("symlink");
        std::os::unix::fs::symlink("src", ws.root().join("alias")).expect("symlink");

        match writer.clear(&write("src/db/schema.sql")) {
            Clearance::Refused(reason) => assert!(
                reason.starts_with("src/db/schema.sql (which leads to db/schema.sql) is outside"),
                "{reason}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(!ws.root().join("db/schema.sql").exists());
        match writer.clear(&write("alias/a.rs")) {
            Clearance::Run(ticket) => assert!(writer.run(ticket).await.is_ok()),
            other => panic!("expected to run, got {other:?}"),
        }
        assert!(ws.root().join("src/a.rs").is_file());
        // Cleared, then the directory is swapped for a symlink out of the
        // grant's paths before the write: the write is refused.
        std::fs::create_dir_all(ws.root().join("src/late")).expect("mkdir");
        let Clearance::Run(ticket) = writer.clear(&write("src/late/x.rs")) else {
            panic!("inside the grant")
        };
        std::fs::remove_dir(ws.root().join("src/late")).expect("rmdir");
        std::os::unix::fs::symlink("../db", ws.root().join("src/late")).expect("symlink");
        assert!(matches!(
            writer.run(ticket).await,
            Err(ToolError::Refused(reason)) if reason.contains("db/x.rs")
        ));
        assert!(!ws.root().join("db/x.rs").exists());
    }

    #[test]
    fn empty_write_paths_mean_the_plan_files() {
        let (_dir, _ws, writer) = setup(Mode::AcceptEdits, &[]);
        let writer = writer.expect("unlocked");
        assert!(matches!(
            writer.clear(&write("src/plan.rs")),
            Clearance::Run(_)
        ));
        assert!(matches!(
            writer.clear(&write("src/other.rs")),
            Clearance::Refused(_)
        ));
    }

    #[tokio::test]
    async fn default_asks_and_bypass_runs_everything() {
        let (_dir, _ws, writer) = setup(Mode::Default, &[]);
        let writer = writer.expect("unlocked");
        assert!(matches!(
            writer.clear(&write("anything.rs")),
            Clearance::NeedsPermission
        ));
        let denied = Decision {
            approve: false,
            feedback: "no".into(),
            grant: None,
        };
        assert_eq!(
            writer.permit(&write("a"), &denied).map(|_| ()),
            Err("the lead denied permission: no".into())
        );

        let (_dir, _ws, bypass) = setup(Mode::Bypass, &[]);
        let bypass = bypass.expect("unlocked");
        match bypass.clear(&ToolCall::RunCommand {
            command: "echo hi".into(),
        }) {
            Clearance::Run(ticket) => {
                assert!(bypass.run(ticket).await.is_ok_and(|out| out.contains("hi")))
            }
            other => panic!("expected to run, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn edits_replace_exactly_one_occurrence() {
        let (_dir, ws, writer) = setup(Mode::Bypass, &[]);
        let writer = writer.expect("unlocked");
        std::fs::write(ws.root().join("f"), "a b a").expect("write");
        let edit = |old: &str| ToolCall::EditFile {
            path: "f".into(),
            old: old.into(),
            new: "c".into(),
        };
        for (old, ok) in [("a", false), ("z", false), ("b", true)] {
            let Clearance::Run(ticket) = writer.clear(&edit(old)) else {
                panic!("bypass runs")
            };
            assert_eq!(writer.run(ticket).await.is_ok(), ok, "{old}");
        }
        assert_eq!(
            std::fs::read_to_string(ws.root().join("f")).ok().as_deref(),
            Some("a c a")
        );
    }

    /// Runs one call under bypass on a thread of its own, with a time limit:
    /// a call that blocks fails the test instead of hanging it.
    fn bypass_run(ws: &Workspace, call: ToolCall) -> Result<String, ToolError> {
        let ws = ws.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let grant = Grant {
                mode: Mode::Bypass,
                write_paths: Vec::new(),
                expires_at_unix_ms: None,
            };
            let writer = Writer::unlock(&grant, &[], &ws, &CommandLimits::default())
                .expect("valid grant")
                .expect("unlocked");
            let Clearance::Run(ticket) = writer.clear(&call) else {
                panic!("bypass runs everything")
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let _ = tx.send(runtime.block_on(writer.run(ticket)));
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the call returned instead of blocking")
    }

    fn edit(path: &str) -> ToolCall {
        ToolCall::EditFile {
            path: path.into(),
            old: "a".into(),
            new: "b".into(),
        }
    }

    #[test]
    fn edits_refuse_a_fifo_and_a_hard_link_and_leave_the_outside_file_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(&dir.path().join("ws")).expect("workspace");
        nix::unistd::mkfifo(
            &ws.root().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "a").expect("write");
        std::fs::hard_link(&outside, ws.root().join("linked")).expect("link");

        match bypass_run(&ws, edit("pipe")) {
            Err(ToolError::Refused(reason)) => {
                assert_eq!(reason, "pipe: is a FIFO, not a regular file")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        match bypass_run(&ws, edit("linked")) {
            Err(ToolError::Refused(reason)) => {
                assert!(reason.contains("has 2 hard links"), "{reason}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&outside).ok().as_deref(), Some("a"));
        // A whole write replaces the link instead of writing through it.
        let write = ToolCall::WriteFile {
            path: "linked".into(),
            content: "mine".into(),
        };
        assert!(bypass_run(&ws, write).is_ok());
        assert_eq!(std::fs::read_to_string(&outside).ok().as_deref(), Some("a"));
    }

    #[test]
    fn writes_go_through_a_symlinked_directory_inside_but_not_to_the_root() {
        let (_dir, ws, _writer) = setup(Mode::Bypass, &[]);
        std::fs::create_dir_all(ws.root().join("real")).expect("mkdir");
        std::os::unix::fs::symlink(ws.root().join("real"), ws.root().join("alias"))
            .expect("symlink");
        std::fs::write(ws.root().join("real/f"), "a").expect("write");

        assert!(bypass_run(&ws, write("alias/new.rs")).is_ok());
        assert_eq!(
            std::fs::read_to_string(ws.root().join("real/new.rs"))
                .ok()
                .as_deref(),
            Some("x")
        );
        assert!(bypass_run(&ws, edit("alias/f")).is_ok());
        assert_eq!(
            std::fs::read_to_string(ws.root().join("real/f"))
                .ok()
                .as_deref(),
            Some("b")
        );
        match bypass_run(&ws, write(".")) {
            Err(ToolError::Path { problem, .. }) => {
                assert_eq!(problem, "names the workspace itself")
            }
            other => panic!("expected a path error, got {other:?}"),
        }
    }
}
