//! Starting a teammate process for `SpawnTeammate`: every check that
//! touches the filesystem (the executable, the script, the workspace, each
//! confined to the spawn root), then the fork. It runs on a blocking task
//! off the hub, which checked the request's fields and reserved the name
//! before, and hears the outcome after.

use std::path::{Path, PathBuf};

use mesh_core::{error::FieldError, limits};

use crate::{
    children::{Brain, Child, Confined, Spawner},
    error::HubError,
};

/// What an operator asks to start (`SpawnTeammate`), as the edge read it:
/// an empty text is a field not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SpawnAsk {
    /// The member's name.
    pub(crate) name: String,
    /// Its role.
    pub(crate) role: String,
    /// A script teammate's playbook.
    pub(crate) script_path: String,
    /// Where it works.
    pub(crate) workspace: String,
    /// The teammate executable (only the lead's own).
    pub(crate) teammate_bin: String,
    /// A model teammate's model.
    pub(crate) model: String,
    /// A model teammate's task.
    pub(crate) task: String,
    /// A model teammate's server.
    pub(crate) base_url: String,
    /// The variable its key comes from.
    pub(crate) api_key_env: String,
    /// Its token budget (0: none).
    pub(crate) token_budget: u64,
    /// The longest reply it asks for (0: its default).
    pub(crate) max_tokens: u32,
    /// Its model's context window (0: ask the server).
    pub(crate) context_window: u32,
    /// CA certificates (PEM) it trusts besides the lead's own.
    pub(crate) ca_pem: String,
}

/// The most bytes of `ca_pem`.
const CA_PEM_MAX: usize = 64 * 1024;

/// `ca_pem`, checked: empty, or certificates in PEM (and nothing else) that
/// a lead serving TLS can hand its child.
fn check_ca_pem(spawner: &Spawner, ca_pem: &str) -> Result<(), HubError> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    if ca_pem.is_empty() {
        return Ok(());
    }
    if !spawner.lead_url.starts_with("https://") {
        return Err(HubError::FailedPrecondition(
            "ca_pem: this lead serves plain text (no --tls-cert); its children dial it \
             without TLS and trust nothing"
                .into(),
        ));
    }
    if ca_pem.len() > CA_PEM_MAX {
        return Err(FieldError::new("ca_pem", "is longer than 64 KiB").into());
    }
    let mut certificates = 0;
    for certificate in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        certificate
            .map_err(|e| FieldError::new("ca_pem", format!("is not PEM certificates: {e}")))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err(FieldError::new("ca_pem", "holds no PEM certificate").into());
    }
    Ok(())
}

/// A process started: its pid, and where its log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spawned {
    /// The process id.
    pub(crate) pid: u32,
    /// Its log file.
    pub(crate) log_path: String,
}

/// Starts `teammate` as `name` for `request`; `on_exit` hears its pid, how
/// it ended and the end of its log, once it is reaped. Each check is made
/// in the order the contract states: what the caller may not do is said
/// before anything about whether a file exists.
pub(crate) fn launch(
    spawner: &Spawner,
    name: &str,
    request: &SpawnAsk,
    on_exit: impl FnOnce(u32, String, String) + Send + 'static,
) -> Result<Child, HubError> {
    // The configured binary only, and paths inside the spawn root, each
    // checked before anything is said of whether a file exists.
    if !(request.teammate_bin.is_empty()
        || spawner.is_teammate_bin(Path::new(&request.teammate_bin)))
    {
        return Err(HubError::PermissionDenied(format!(
            "teammate_bin: this lead starts only its own teammate executable ({}, \
                 --teammate-bin), not {:?}; leave teammate_bin empty",
            spawner.teammate_bin.display(),
            request.teammate_bin
        )));
    }
    let confine = |field: &str, path: &str| -> Result<PathBuf, HubError> {
        spawner.confine(Path::new(path)).map_err(|e| match e {
            Confined::Malformed(problem) => FieldError::new(field, problem).into(),
            Confined::Outside => HubError::PermissionDenied(format!(
                "{field}: {path:?} is outside the directory this lead spawns from ({}, \
                     --spawn-root)",
                spawner.root.display()
            )),
        })
    };
    if !request.script_path.is_empty() {
        confine("script_path", &request.script_path)?;
    }
    let brain = brain(request)?;
    // The lead's environment holds its secrets: only the keys its own
    // command line names are passed on.
    let var = &request.api_key_env;
    if !var.is_empty() && !spawner.passes_key(var) {
        let named = if spawner.model_keys.is_empty() {
            "names none".to_owned()
        } else {
            format!("names {}", spawner.model_keys.join(", "))
        };
        return Err(HubError::PermissionDenied(format!(
            "api_key_env: {var:?} is not a variable this lead passes on; its command line \
                 (--model-key-env VAR, repeatable) {named}"
        )));
    }
    check_ca_pem(spawner, &request.ca_pem)?;
    let workspace = if request.workspace.is_empty() {
        match &spawner.repo {
            // Its own worktree of the team's repository; this runs on a
            // blocking thread, off the hub.
            Some(repo) => {
                let dir = spawner.worktree(name);
                tokio::runtime::Handle::current()
                    .block_on(repo.add_worktree(&dir, name))
                    .map_err(|e| {
                        HubError::FailedPrecondition(format!(
                            "workspace: cannot make the worktree: {e}"
                        ))
                    })?;
                dir
            }
            None => spawner.default_workspace(name),
        }
    } else {
        confine("workspace", &request.workspace)?
    };
    std::fs::create_dir_all(&workspace).map_err(|e| {
        HubError::FailedPrecondition(format!(
            "workspace: cannot create {}: {e}",
            workspace.display()
        ))
    })?;
    let bin = spawner.teammate_bin.clone();
    if !bin.is_file() {
        return Err(HubError::FailedPrecondition(format!(
            "teammate_bin: no teammate executable at {}; build it (cargo build -p teammate) \
                 or name one with --teammate-bin",
            bin.display()
        )));
    }
    spawner
        .spawn(
            &bin,
            name,
            &request.role,
            &brain,
            &workspace,
            &request.ca_pem,
            on_exit,
        )
        .map_err(|e| HubError::Internal(format!("could not start {}: {e}", bin.display())))
}

/// What drives a spawned teammate: a script the lead can read, or a model
/// with a task (exactly one of `script_path` and `model`).
fn brain(request: &SpawnAsk) -> Result<Brain, HubError> {
    for (field, value, limit) in [
        ("model", &request.model, limits::ROLE),
        ("task", &request.task, limits::TEXT),
        ("base_url", &request.base_url, limits::PATH),
        ("api_key_env", &request.api_key_env, limits::TOOL),
    ] {
        limits::check(field, value, limit)?;
    }
    match (request.script_path.is_empty(), request.model.is_empty()) {
        (false, false) => {
            Err(FieldError::new("model", "give script_path or model, not both").into())
        }
        (true, true) => Err(FieldError::new(
            "script_path",
            "is required (or model, for a model teammate)",
        )
        .into()),
        (false, true) => {
            for (field, value) in [
                ("token_budget", request.token_budget),
                ("max_tokens", u64::from(request.max_tokens)),
                ("context_window", u64::from(request.context_window)),
            ] {
                if value != 0 {
                    return Err(FieldError::new(field, "is only for a model teammate").into());
                }
            }
            let script = PathBuf::from(&request.script_path);
            if !script.is_file() {
                return Err(FieldError::new(
                    "script_path",
                    format!("{script:?} is not a file the lead can read"),
                )
                .into());
            }
            Ok(Brain::Script(script))
        }
        (true, false) => {
            if request.task.trim().is_empty() {
                return Err(FieldError::new("task", "is required for a model teammate").into());
            }
            if request.model.starts_with('-') {
                return Err(FieldError::new("model", "may not start with '-'").into());
            }
            let url = &request.base_url;
            if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
                return Err(
                    FieldError::new("base_url", "must be an http:// or https:// URL").into(),
                );
            }
            let var = &request.api_key_env;
            let valid_var = var.chars().enumerate().all(|(i, c)| {
                c == '_'
                    || c.is_ascii_uppercase()
                    || c.is_ascii_lowercase()
                    || (i > 0 && c.is_ascii_digit())
            });
            if !valid_var {
                return Err(FieldError::new(
                    "api_key_env",
                    "must be an environment variable's name ([A-Za-z_][A-Za-z0-9_]*)",
                )
                .into());
            }
            let given = |s: &String| (!s.is_empty()).then(|| s.clone());
            Ok(Brain::Model {
                model: request.model.clone(),
                task: request.task.clone(),
                base_url: given(&request.base_url),
                api_key_env: given(&request.api_key_env),
                token_budget: request.token_budget,
                max_tokens: request.max_tokens,
                context_window: request.context_window,
            })
        }
    }
}
