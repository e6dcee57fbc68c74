//! `lead serve --approval`: who decides plans, as written on the command
//! line, and the approval it loads (a policy, a model reviewer, a chain).

use std::path::PathBuf;

use mesh_core::policy::Policy;

use crate::hub::Approval;

/// `--approval`: who decides plans, as written on the command line.
#[derive(Debug, Clone)]
pub(super) enum ApprovalArg {
    Manual,
    Auto,
    Policy(PathBuf),
    Model(PathBuf),
    Chain(PathBuf),
}

impl std::str::FromStr for ApprovalArg {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let file = |prefix: &str| value.strip_prefix(prefix).map(PathBuf::from);
        if value == "manual" {
            Ok(Self::Manual)
        } else if value == "auto" {
            Ok(Self::Auto)
        } else if let Some(file) = file("policy:") {
            Ok(Self::Policy(file))
        } else if let Some(file) = file("model:") {
            Ok(Self::Model(file))
        } else if let Some(file) = file("chain:") {
            Ok(Self::Chain(file))
        } else {
            Err(format!(
                "{value:?} is not manual, auto, policy:FILE, model:FILE or chain:FILE"
            ))
        }
    }
}

impl ApprovalArg {
    /// Reads and checks the file it names, if any.
    pub(super) fn load(self) -> anyhow::Result<Approval> {
        let read = |kind: &str, file: &std::path::Path| {
            std::fs::read_to_string(file)
                .map_err(|e| anyhow::anyhow!("--approval {kind}:{}: {e}", file.display()))
        };
        let invalid = |kind: &str, file: &std::path::Path, e: String| {
            anyhow::anyhow!("--approval {kind}:{}: {e}", file.display())
        };
        Ok(match self {
            Self::Manual => Approval::Manual,
            Self::Auto => Approval::Auto,
            Self::Policy(file) => Approval::Policy(
                Policy::parse(&read("policy", &file)?)
                    .map_err(|e| invalid("policy", &file, e.to_string()))?,
            ),
            Self::Model(file) => Approval::Model(std::sync::Arc::new(
                crate::reviewer::Reviewer::parse(&read("model", &file)?)
                    .map_err(|e| invalid("model", &file, e))?,
            )),
            Self::Chain(file) => {
                let dir = file.parent().unwrap_or(std::path::Path::new("."));
                Approval::Chain(std::sync::Arc::new(
                    crate::chain::Chain::parse(&read("chain", &file)?, dir)
                        .map_err(|e| invalid("chain", &file, e.to_string()))?,
                ))
            }
        })
    }
}
