//! Children a lead left running when it stepped down. The process goes on
//! (standing by, perhaps leading again), and so do they: each is still
//! watched by the task that started it, which reaps it when it exits and
//! kills what it left behind. Kept here, they stay owned for the life of
//! the process: dropping one would stop the teammate, which is to rejoin
//! whoever leads next.

use std::sync::Mutex;

use super::Child;

/// Children left running by a lead that stepped down in this process.
static LEFT: Mutex<Vec<Child>> = Mutex::new(Vec::new());

/// Keeps `children`, which this lead leaves running as it steps down;
/// those that exited already are let go.
pub(crate) fn left_running(children: impl IntoIterator<Item = Child>) {
    let mut left = LEFT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    left.retain(|child| !child.task.is_finished());
    left.extend(children);
}
