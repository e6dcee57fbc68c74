//! The playbook both of the demo's teammates run.

/// The playbook both teammates run.
pub(super) const PLAYBOOK: &str = r##"# The team's playbook: alice and bob both run it. Each claims the next
# task on the list, does what the section with its subject says, completes
# it (its result is reviewed and merged into main), and claims again until
# none is left.
claim = "next"

[shutdown]
approve = true
reason = "my tasks are done"

[[tasks]]
subject = "Add the auth module"
summary = "Add login() in src/auth.rs, with a test"
await_message = true    # land once bob says so

[[tasks.actions]]
phase = "plan"
tool = "list_dir"
path = "."

[[tasks.actions]]
phase = "plan"
tool = "write_file"     # refused: plan mode has no write tools
path = "src/auth.rs"
content = "pub fn login() {}\n"

[[tasks.plans]]
summary = "Add the auth module"
files = ["src/auth.rs"]
steps = ["write src/auth.rs"]   # no tests: the policy rejects it

[[tasks.plans]]
summary = "Add the auth module, with tests"
files = ["src/auth.rs", "tests/auth_test.rs"]
tests = ["tests/auth_test.rs"]
steps = ["write src/auth.rs", "write tests/auth_test.rs"]

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "src/auth.rs"
content = "pub fn login(user: &str) -> bool {\n    !user.is_empty()\n}\n"

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "tests/auth_test.rs"
content = "#[test]\nfn login_needs_a_user() {\n    assert!(!auth::login(\"\"));\n}\n"

[[tasks.actions]]
phase = "work"
tool = "write_file"     # refused: outside the grant's paths
path = "db/schema.sql"
content = "DROP TABLE users;\n"

[[tasks.actions]]
phase = "work"
tool = "request_amendment"   # one more file: the policy grants it
files = ["src/lib.rs"]
text = "the module must be registered in src/lib.rs"

[[tasks.actions]]
phase = "work"
tool = "edit_file"
path = "src/lib.rs"
old = "// modules\n"
new = "// modules\npub mod auth;\n"

[[tasks]]
subject = "Add session handling"
summary = "Add sessions in src/session.rs, on top of login()"
await_message = true    # land once alice's auth has landed

[[tasks.actions]]
phase = "plan"
tool = "read_file"      # not there: alice's work has not landed
path = "src/auth.rs"

[[tasks.plans]]
summary = "Sessions, on top of login()"
files = ["src/session.rs", "tests/session_test.rs", "src/lib.rs"]
tests = ["tests/session_test.rs"]
steps = ["write src/session.rs", "write tests/session_test.rs", "register the module"]

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "src/session.rs"
content = "pub fn start(user: &str) -> Option<String> {\n    auth::login(user).then(|| format!(\"session-{user}\"))\n}\n"

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "tests/session_test.rs"
content = "#[test]\nfn no_session_without_a_user() {\n    assert!(session::start(\"\").is_none());\n}\n"

[[tasks.actions]]
phase = "work"
tool = "edit_file"
path = "src/lib.rs"
old = "// modules\n"
new = "// modules\npub mod session;\n"

[[tasks.actions]]
phase = "work"
tool = "send_message"
to = "alice"
text = "sessions are written in my worktree; land auth first"

[[tasks]]
subject = "Document the login flow"
summary = "Document the login flow in docs/login.md"

[[tasks.actions]]
phase = "work"
tool = "send_message"
to = "bob"
text = "auth has landed on main"

[[tasks.actions]]
phase = "work"
tool = "write_file"
path = "docs/login.md"
content = "# Login\n\n`auth::login(user)` checks the user; `session::start(user)` opens a session.\n"
"##;
