//! Where `run_command` runs: the sandbox a teammate picks at start, and the
//! confinement each command gets from the grant it runs under.
//!
//! ```text
//! --sandbox auto|landlock|bwrap|none --> Sandbox (once, at start)
//! Sandbox + workspace + grant -------> Scope (each command: what it may read and write)
//! Scope --> landlock::Rules + seccomp  (in the child, before exec)
//!       \-> bwrap arguments
//! Scope --> Guard: before (granted files made, what a glob's directory holds kept)
//!                  after  (whatever the command left outside the grant undone)
//! ```
//!
//! Landlock needs no user namespace, so it works as root in a container and
//! under AppArmor's restriction of unprivileged user namespaces, where
//! bubblewrap cannot start.

mod bwrap;
mod guard;
mod landlock;
mod scope;
mod seccomp;

use std::{
    fmt,
    path::{Path, PathBuf},
};

pub use guard::Guard;
pub(crate) use scope::is_state_dir;
pub use scope::Scope;

/// Where commands run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// Unconfined, as the teammate's user: asked for by name only.
    None,
    /// Landlock at this ABI, with a seccomp filter.
    Landlock {
        /// The kernel's Landlock ABI.
        abi: i32,
    },
    /// Inside bubblewrap (the path of `bwrap`).
    Bwrap(PathBuf),
    /// No sandbox works here and none was waived: commands are not offered.
    Unavailable(String),
}

/// What a sandbox confines, as the teammate reports it at join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `landlock`, `bwrap`, `none` or `unavailable`.
    pub kind: &'static str,
    /// What it confines: any of `reads`, `writes`, `network`, `signals`,
    /// `processes`.
    pub confines: Vec<&'static str>,
    /// For people: what it is made of, or why there is none.
    pub detail: String,
}

impl Sandbox {
    /// `--sandbox auto|landlock|bwrap|none`: `auto` is Landlock where the
    /// kernel has it, else bubblewrap where it can start, else unavailable
    /// (commands are not offered).
    pub fn parse(spec: &str) -> Result<Self, String> {
        match spec {
            "none" => Ok(Sandbox::None),
            "landlock" => match landlock_abi() {
                Some(abi) => Ok(Sandbox::Landlock { abi }),
                None => Err(
                    "--sandbox landlock: this kernel has no Landlock (Linux 5.13 or later, \
                     with landlock in its lsm= list)"
                        .into(),
                ),
            },
            "bwrap" => bwrap::usable().map(Sandbox::Bwrap),
            "auto" => Ok(Self::auto()),
            other => Err(format!(
                "--sandbox: {other:?} is not auto, landlock, bwrap or none"
            )),
        }
    }

    /// The best sandbox this machine offers.
    fn auto() -> Self {
        if let Some(abi) = landlock_abi() {
            return Sandbox::Landlock { abi };
        }
        match bwrap::usable() {
            Ok(path) => Sandbox::Bwrap(path),
            Err(why) => Sandbox::Unavailable(format!(
                "this kernel has no Landlock and bubblewrap cannot run here ({why}); \
                 run_command is not offered (--sandbox none runs commands unconfined)"
            )),
        }
    }

    /// Whether commands may run at all.
    pub fn offers_commands(&self) -> bool {
        !matches!(self, Sandbox::Unavailable(_))
    }

    /// What it confines.
    pub fn report(&self) -> Report {
        match self {
            Sandbox::None => Report {
                kind: "none",
                confines: vec!["processes"],
                detail: "commands run unconfined, as the teammate's user (--sandbox none)".into(),
            },
            Sandbox::Landlock { abi } => {
                let mut confines = vec!["reads", "writes", "network", "processes"];
                if *abi >= landlock::SIGNAL_SCOPE_ABI {
                    confines.push("signals");
                }
                Report {
                    kind: "landlock",
                    confines,
                    detail: format!("Landlock ABI {abi} and a seccomp filter"),
                }
            }
            Sandbox::Bwrap(path) => Report {
                kind: "bwrap",
                confines: vec!["reads", "writes", "network", "signals", "processes"],
                detail: format!("bubblewrap ({})", path.display()),
            },
            Sandbox::Unavailable(why) => Report {
                kind: "unavailable",
                confines: Vec::new(),
                detail: why.clone(),
            },
        }
    }
}

impl Report {
    /// As `JoinRequest.sandbox` says it.
    pub fn to_pb(&self) -> shared::pb::Sandbox {
        shared::pb::Sandbox {
            kind: self.kind.to_owned(),
            confines: self.confines.iter().map(|c| (*c).to_owned()).collect(),
            detail: self.detail.clone(),
        }
    }

    /// Says at start, in the log, how commands run: a warning where they
    /// run unconfined or not at all.
    pub fn announce(&self, name: &str) {
        match self.kind {
            "none" => tracing::warn!(
                member = name,
                "run_command runs UNCONFINED (--sandbox none): a command can read and write \
                 whatever this user can, and reach the network"
            ),
            "unavailable" => tracing::warn!(member = name, "{}", self.detail),
            _ => tracing::info!(member = name, sandbox = %self, "run_command is sandboxed"),
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.confines.is_empty() {
            write!(f, "{}: {}", self.kind, self.detail)
        } else {
            write!(
                f,
                "{} (confines {}): {}",
                self.kind,
                self.confines.join(", "),
                self.detail
            )
        }
    }
}

/// `bwrap` on `PATH`, not tried (the test of a confined command, whose
/// process may not start others beside the reaper's sweeps).
#[cfg(test)]
pub(crate) fn bwrap_installed() -> Option<PathBuf> {
    bwrap::find("bwrap")
}

/// The kernel's Landlock ABI, if it has Landlock and it is enabled.
pub fn landlock_abi() -> Option<i32> {
    landlock::abi()
}

/// A command, confined: what to start, and what to undo once it ended.
#[derive(Debug)]
pub struct Confined {
    /// The process to start (`sh -c` itself, or `bwrap ... sh -c`).
    pub process: tokio::process::Command,
    /// What the command must not leave behind.
    pub guard: Option<Guard>,
    /// Its `TMPDIR`.
    pub tmpdir: PathBuf,
    /// The command's private temporary directory, removed with this.
    _temp: Option<tempfile::TempDir>,
}

/// Builds the process that runs `sh -c command` in `workspace` under
/// `sandbox`, scoped by `grant` (the globs the current grant lets it write);
/// `reads` are the trees the user let commands read (`--sandbox-read`).
pub fn confine(
    sandbox: &Sandbox,
    workspace: &Path,
    grant: &mesh_core::grant::PathSet,
    reads: &[PathBuf],
) -> std::io::Result<Confined> {
    let bwrap = match sandbox {
        Sandbox::None => {
            let mut process = tokio::process::Command::new("sh");
            process.current_dir(workspace);
            return Ok(Confined {
                process,
                guard: None,
                tmpdir: std::env::temp_dir(),
                _temp: None,
            });
        }
        Sandbox::Unavailable(why) => return Err(std::io::Error::other(why.clone())),
        Sandbox::Landlock { .. } => None,
        Sandbox::Bwrap(path) => Some(path),
    };
    let temp = tempfile::Builder::new().prefix("mesh-command-").tempdir()?;
    let scope = Scope::new(workspace, grant, reads, temp.path())?;
    let guard = Guard::before(&scope, grant)?;
    let (process, tmpdir) = match bwrap {
        Some(path) => (bwrapped(path, &scope), PathBuf::from("/tmp")),
        None => (landlocked(&scope)?, temp.path().to_owned()),
    };
    Ok(Confined {
        process,
        guard: Some(guard),
        tmpdir,
        _temp: Some(temp),
    })
}

/// `sh`, to be confined to `scope` by Landlock and the seccomp filter in
/// the child, before it runs anything.
fn landlocked(scope: &Scope) -> std::io::Result<tokio::process::Command> {
    let mut rules = Some(landlock::Rules::build(scope)?);
    let filter = seccomp::filter()?;
    let mut process = tokio::process::Command::new("sh");
    process.current_dir(&scope.workspace);
    // SAFETY: between fork and exec the closure only makes system calls
    // (prctl, landlock_restrict_self, seccomp) on what was built before the
    // fork; it allocates nothing.
    unsafe {
        process.pre_exec(move || {
            if let Some(rules) = rules.take() {
                rules.enforce()?;
            }
            seccomp::apply(&filter)
        });
    }
    Ok(process)
}

/// `bwrap ... -- sh`, confined to `scope`.
fn bwrapped(bwrap: &Path, scope: &Scope) -> tokio::process::Command {
    let mut process = tokio::process::Command::new(bwrap);
    process
        .args(bwrap::args(scope))
        .arg("--")
        .arg("sh")
        .current_dir(&scope.workspace);
    process
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_or_name_the_flag() {
        assert_eq!(Sandbox::parse("none"), Ok(Sandbox::None));
        assert!(Sandbox::parse("auto").is_ok());
        let err = Sandbox::parse("docker").expect_err("unknown");
        assert!(err.contains("--sandbox"), "{err}");
    }

    #[test]
    fn auto_is_landlock_where_the_kernel_has_it() {
        match landlock_abi() {
            Some(abi) => assert_eq!(Sandbox::parse("auto"), Ok(Sandbox::Landlock { abi })),
            None => assert!(!matches!(
                Sandbox::parse("auto"),
                Ok(Sandbox::Landlock { .. })
            )),
        }
    }

    #[test]
    fn a_report_says_what_is_confined() {
        let none = Sandbox::None.report();
        assert_eq!(none.kind, "none");
        assert!(!none.confines.contains(&"writes"));
        let landlock = Sandbox::Landlock { abi: 7 }.report();
        assert_eq!(
            landlock.confines,
            ["reads", "writes", "network", "processes", "signals"]
        );
        let old = Sandbox::Landlock { abi: 3 }.report();
        assert!(!old.confines.contains(&"signals"));
        let unavailable = Sandbox::Unavailable("why".into());
        assert!(!unavailable.offers_commands());
        assert_eq!(unavailable.report().to_string(), "unavailable: why");
    }
}
