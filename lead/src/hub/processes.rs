//! The teammate processes this lead started, the names it is starting, and
//! the worktrees of ended ones being tidied away: what the hub knows of
//! processes, apart from the team (whose members they may or may not have
//! joined).

use std::collections::{HashMap, HashSet};

use tokio::task::JoinHandle;

use crate::children::Child;

/// The lead's own processes, by member name.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    /// Processes the lead started and has not seen reaped.
    children: HashMap<String, Child>,
    /// Members whose process the lead started (in this run of the lead),
    /// remembered past the child's exit until the member is forgotten.
    spawned: HashSet<String>,
    /// Names whose process is being started off the hub, and whether a
    /// `Join` with that name came meanwhile.
    starting: HashMap<String, bool>,
    /// Worktrees of ended teammates being removed (`--repo`), awaited when
    /// the hub finishes.
    tidying: Vec<JoinHandle<()>>,
}

impl Processes {
    /// Whether `name` is a process the lead started or is starting.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.children.contains_key(name) || self.starting.contains_key(name)
    }

    /// The running child named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Child> {
        self.children.get(name)
    }

    /// A member named `name` joined: it is ours if the lead started (or is
    /// starting) a process of that name, and that process has joined.
    pub(crate) fn joined(&mut self, name: &str) {
        if self.has(name) {
            self.spawned.insert(name.to_owned());
        } else {
            self.spawned.remove(name);
        }
        if let Some(child) = self.children.get_mut(name) {
            child.joined = true;
        }
        if let Some(joined) = self.starting.get_mut(name) {
            *joined = true;
        }
    }

    /// The lead starts a process named `name` (off the hub).
    pub(crate) fn reserve(&mut self, name: &str) {
        self.starting.insert(name.to_owned(), false);
    }

    /// How starting `name` came out: the child is held (and told whether
    /// it joined meanwhile; its pid and log are returned), or the name is
    /// free again.
    pub(crate) fn launched<E>(
        &mut self,
        name: &str,
        result: Result<Child, E>,
    ) -> Result<(u32, std::path::PathBuf), E> {
        let joined = self.starting.remove(name).unwrap_or(false);
        match result {
            Ok(mut child) => {
                child.joined = joined;
                let held = (child.pid, child.log.clone());
                self.children.insert(name.to_owned(), child);
                Ok(held)
            }
            Err(e) => {
                if joined {
                    // Whoever joined under the name meanwhile is no child of ours.
                    self.spawned.remove(name);
                }
                Err(e)
            }
        }
    }

    /// The child `name` with `pid` was reaped: whether it had joined, and
    /// its log if the lead still held it (stopping, it forgot its children
    /// first: then whether the lead had started the member, and no log).
    pub(crate) fn exited(&mut self, name: &str, pid: u32) -> (bool, Option<std::path::PathBuf>) {
        match self.children.get(name) {
            Some(child) if child.pid == pid => {
                let known = (child.joined, Some(child.log.clone()));
                self.children.remove(name);
                known
            }
            _ => (self.spawned.contains(name), None),
        }
    }

    /// The member `name` is forgotten.
    pub(crate) fn forget(&mut self, name: &str) {
        self.spawned.remove(name);
    }

    /// The names of the running children.
    pub(crate) fn names(&self) -> Vec<String> {
        self.children.keys().cloned().collect()
    }

    /// Whether no child runs and none is being started.
    pub(crate) fn none_left(&self) -> bool {
        self.children.is_empty() && self.starting.is_empty()
    }

    /// Every running child, which the lead no longer holds.
    pub(crate) fn drain(&mut self) -> Vec<(String, Child)> {
        self.children.drain().collect()
    }

    /// Keeps `tidy` (a worktree's removal) to await as the hub finishes.
    pub(crate) fn tidy(&mut self, tidy: JoinHandle<()>) {
        self.tidying.retain(|t| !t.is_finished());
        self.tidying.push(tidy);
    }

    /// The removals still running.
    pub(crate) fn take_tidying(&mut self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut self.tidying)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_child_that_joins_while_starting_is_ours_and_joined() {
        let mut processes = Processes::default();
        processes.reserve("bob");
        assert!(processes.has("bob"));
        assert!(!processes.none_left());
        processes.joined("bob");
        let launched = processes.launched::<()>("bob", Ok(Child::idle(7)));
        assert_eq!(launched.map(|(pid, _)| pid), Ok(7));
        assert!(processes.get("bob").is_some_and(|c| c.joined));
        assert_eq!(processes.names(), ["bob"]);
        assert!(processes.exited("bob", 7).0);
        assert!(processes.none_left());
        // Reaped, it is still remembered as ours until forgotten.
        assert_eq!(processes.exited("bob", 7), (true, None));
        processes.forget("bob");
        assert_eq!(processes.exited("bob", 7), (false, None));
    }

    #[tokio::test]
    async fn a_spawn_that_failed_leaves_no_claim_on_the_name() {
        let mut processes = Processes::default();
        processes.reserve("bob");
        processes.joined("bob");
        assert_eq!(
            processes.launched("bob", Err::<Child, _>("no")).err(),
            Some("no")
        );
        assert!(!processes.has("bob"));
        assert_eq!(processes.exited("bob", 1), (false, None));
        // A member that joins under a name the lead never started is not ours.
        processes.joined("carol");
        assert_eq!(processes.exited("carol", 1), (false, None));
    }

    #[tokio::test]
    async fn an_exit_of_another_pid_leaves_the_child_held() {
        let mut processes = Processes::default();
        processes.reserve("bob");
        let _ = processes.launched::<()>("bob", Ok(Child::idle(7)));
        assert_eq!(processes.exited("bob", 8), (false, None));
        assert!(processes.get("bob").is_some());
        assert_eq!(processes.drain().len(), 1);
        assert!(processes.none_left());
    }
}
