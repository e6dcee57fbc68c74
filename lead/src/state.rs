//! The lead's state directory: where tokens and the address are kept, so that
//! operator commands and teammates on this machine find the lead.

use std::{
    fs,
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

/// The state directory and the files in it.
#[derive(Debug, Clone)]
pub struct StateDir {
    /// The directory.
    pub root: PathBuf,
}

/// The join token's file.
pub const JOIN_TOKEN_FILE: &str = "join.token";
/// The operator token's file.
pub const OPERATOR_TOKEN_FILE: &str = "operator.token";
/// The running lead's address (`HOST:PORT`).
pub const ADDR_FILE: &str = "lead.addr";
/// The URL clients on this host dial (`http://` or `https://HOST:PORT`).
pub const URL_FILE: &str = "lead.url";

impl StateDir {
    /// Creates the directory (mode 0700) if needed. An existing directory
    /// keeps its mode (it is the owner's to choose); one that others can
    /// read or enter is warned about, since tokens and the database are
    /// kept in it (each file itself is 0600).
    pub fn create(root: &Path) -> std::io::Result<Self> {
        if root.is_dir() {
            let mode = fs::metadata(root)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    dir = %root.display(),
                    mode = format!("{:o}", mode & 0o777),
                    "the state dir is open to other users; its files are 0600, \
                     but consider chmod 700"
                );
            }
        } else {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(root)?;
        }
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// An existing directory, for operator commands.
    pub fn open(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    /// The token given (by flag or environment), else the one in `file`, else
    /// a new one written to `file` with mode 0600.
    pub fn token(&self, given: Option<String>, file: &str) -> std::io::Result<String> {
        if let Some(token) = given.filter(|t| !t.is_empty()) {
            return Ok(token);
        }
        let path = self.root.join(file);
        if let Ok(existing) = fs::read_to_string(&path) {
            let existing = existing.trim();
            if !existing.is_empty() {
                return Ok(existing.to_owned());
            }
        }
        let token = shared::auth::new_token();
        write_private(&path, &token)?;
        Ok(token)
    }

    /// Reads a token file, for operator commands.
    pub fn read_token(&self, file: &str) -> std::io::Result<String> {
        let path = self.root.join(file);
        fs::read_to_string(&path)
            .map(|t| t.trim().to_owned())
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// Records the address the lead listens on, and the URL to dial it.
    pub fn write_addr(&self, addr: &str, url: &str) -> std::io::Result<()> {
        write_private(&self.root.join(ADDR_FILE), &format!("{addr}\n"))?;
        write_private(&self.root.join(URL_FILE), &format!("{url}\n"))
    }

    /// The URL a running lead recorded.
    pub fn read_url(&self) -> std::io::Result<String> {
        self.read_token(URL_FILE)
    }
}

/// Writes `text` to `path` readable by the owner alone, atomically.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_generated_once_private_and_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::create(dir.path()).expect("create");
        let first = state.token(None, JOIN_TOKEN_FILE).expect("token");
        assert_eq!(first.len(), 64);
        let mode = fs::metadata(dir.path().join(JOIN_TOKEN_FILE))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(state.token(None, JOIN_TOKEN_FILE).expect("again"), first);
        assert_eq!(
            state
                .token(Some("given".into()), JOIN_TOKEN_FILE)
                .expect("given"),
            "given"
        );
        state
            .write_addr("127.0.0.1:5", "https://127.0.0.1:5")
            .expect("addr");
        assert_eq!(state.read_url().expect("read"), "https://127.0.0.1:5");
    }
}
