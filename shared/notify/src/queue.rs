//! The [`Notifier`]: the lead's handle. [`Notifier::waiting`] puts a notice
//! on a bounded queue with `try_send` and returns (never a wait, never an
//! await: a full queue drops the notice and counts it); one worker task
//! matches each notice against the routes and hands it to each sink's own
//! queue at once, or arms an escalation.

use std::{collections::BTreeSet, sync::Arc};

use tokio::sync::{mpsc, oneshot};

use crate::{
    config::Config,
    escalation::{Book, Escalations},
    notice::{Event, Notice},
    outlet::Outlets,
    stats::{bump, worth_a_warning, Counters, Stats},
};

/// How many notices the notifier's queue holds.
pub const QUEUE: usize = 1024;

/// What the worker is handed.
#[derive(Debug)]
enum Command {
    Waiting(Arc<Notice>),
    Flush(oneshot::Sender<()>),
}

/// Sends notices as a notify file says: a cheap handle to clone; the tasks
/// stop once every clone is dropped.
#[derive(Debug, Clone)]
pub struct Notifier {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    queue: mpsc::Sender<Command>,
    book: Arc<Book>,
    counters: Arc<Counters>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.book.close();
    }
}

impl Notifier {
    /// Starts the worker and a task per sink on the current tokio runtime
    /// (it panics outside one, as `tokio::spawn` does).
    pub fn start(config: Config) -> Notifier {
        let counters = Arc::new(Counters::new(config.sinks.iter().map(|s| s.name.clone())));
        let outlets = Outlets::spawn(&config, &counters);
        Notifier::with_outlets(config, outlets)
    }

    /// Starts the worker, handing deliveries to `outlets`.
    pub(crate) fn with_outlets(config: Config, outlets: Outlets) -> Notifier {
        let (queue, commands) = mpsc::channel(QUEUE);
        let book = Arc::new(Book::default());
        let counters = Arc::clone(&outlets.counters);
        let escalations = Escalations {
            book: Arc::clone(&book),
            routes: config.routes.into(),
            outlets: Arc::new(outlets),
        };
        tokio::spawn(work(commands, escalations));
        Notifier {
            inner: Arc::new(Inner {
                queue,
                book,
                counters,
            }),
        }
    }

    /// `notice`'s request waits for people (its `event` is set to
    /// `Waiting`). Returns at once: when the queue is full the notice is
    /// dropped, counted in [`Stats::dropped`], with a warning for the first
    /// drop and every thousandth.
    pub fn waiting(&self, mut notice: Notice) {
        notice.event = Event::Waiting;
        let notice = Arc::new(notice);
        self.inner.book.waiting(&notice);
        if self
            .inner
            .queue
            .try_send(Command::Waiting(Arc::clone(&notice)))
            .is_err()
        {
            self.inner.book.dropped(&notice);
            let dropped = bump(&self.inner.counters.dropped);
            if worth_a_warning(dropped) {
                tracing::warn!(
                    dropped,
                    "the notifier's queue of {QUEUE} is full: notifications are dropped"
                );
            }
        }
    }

    /// The request was decided, expired or withdrawn: its escalations that
    /// have not fired never will. Returns at once.
    pub fn settled(&self, request_id: &str) {
        self.inner.book.settled(request_id);
    }

    /// What has been sent, failed, dropped and retried so far.
    pub fn stats(&self) -> Stats {
        self.inner.counters.read()
    }

    /// Resolves once every notice handed to [`Notifier::waiting`] before
    /// this call has been delivered, given up on or dropped, and the
    /// deliveries at once it led to are done (escalations still to fire
    /// aside). For a graceful stop, under a timeout of the caller's.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.inner.queue.send(Command::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

/// The worker: routes each notice in turn.
async fn work(mut commands: mpsc::Receiver<Command>, escalations: Escalations) {
    while let Some(command) = commands.recv().await {
        match command {
            Command::Waiting(notice) => route(&escalations, &notice),
            Command::Flush(done) => {
                let flushed = escalations.outlets.flushed();
                tokio::spawn(async move {
                    flushed.await;
                    let _ = done.send(());
                });
            }
        }
    }
}

/// Hands `notice` to the sinks of every route it matches that sends at
/// once (each sink once), and arms the others' escalations.
fn route(escalations: &Escalations, notice: &Arc<Notice>) {
    let mut now = BTreeSet::new();
    for (index, route) in escalations.routes.iter().enumerate() {
        if !route.matches(notice) {
            continue;
        }
        match route.after {
            None => now.extend(route.sinks.iter().copied()),
            Some(after) => escalations.arm(index, after, &notice.request_id),
        }
    }
    for sink in now {
        escalations.outlets.offer(sink, notice);
    }
}

/// The routes' sinks, for a test that hands deliveries to queues of its own.
#[cfg(test)]
pub(crate) fn test_outlets(
    config: &Config,
    size: usize,
) -> (Outlets, Vec<mpsc::Receiver<crate::outlet::Item>>) {
    let counters = Arc::new(Counters::new(config.sinks.iter().map(|s| s.name.clone())));
    let (queues, receivers) = config.sinks.iter().map(|_| mpsc::channel(size)).unzip();
    (Outlets { queues, counters }, receivers)
}
