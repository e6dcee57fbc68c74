//! The sinks' own queues: each sink has a bounded queue and one task that
//! delivers from it in order, so that a slow or silent sink holds up no
//! other. Handing a delivery to a full queue drops it and counts it.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::{
    config::Config,
    http,
    notice::Notice,
    people::People,
    sink::{SinkConfig, SinkKind},
    slack::Slack,
    smtp::Smtp,
    stats::{bump, worth_a_warning, Counters, SinkCounters},
    webhook::Webhook,
};

/// How many deliveries one sink's queue holds.
pub const SINK_QUEUE: usize = 256;

/// What a sink's task is handed.
#[derive(Debug)]
pub(crate) enum Item {
    /// Deliver this.
    Deliver(Arc<Notice>),
    /// Answer once everything handed in before is done.
    Flush(oneshot::Sender<()>),
}

/// The sinks' queues, in the config's order, and the counters.
#[derive(Debug)]
pub(crate) struct Outlets {
    pub(crate) queues: Vec<mpsc::Sender<Item>>,
    pub(crate) counters: Arc<Counters>,
}

impl Outlets {
    /// A task per sink of `config`, each with its queue.
    pub(crate) fn spawn(config: &Config, counters: &Arc<Counters>) -> Outlets {
        let queues = config
            .sinks
            .iter()
            .enumerate()
            .map(|(index, sink)| {
                let (tx, rx) = mpsc::channel(SINK_QUEUE);
                let delivering = Sink::new(sink, &config.people);
                tokio::spawn(run(delivering, rx, Arc::clone(counters), index));
                tx
            })
            .collect();
        Outlets {
            queues,
            counters: Arc::clone(counters),
        }
    }

    /// Hands `notice` to sink `index` without waiting: a full queue drops
    /// it, counted.
    pub(crate) fn offer(&self, index: usize, notice: &Arc<Notice>) {
        let (Some(queue), Some((name, counters))) =
            (self.queues.get(index), self.counters.sinks.get(index))
        else {
            return;
        };
        if queue.try_send(Item::Deliver(Arc::clone(notice))).is_err() {
            let dropped = bump(&counters.dropped);
            if worth_a_warning(dropped) {
                tracing::warn!(
                    sink = name,
                    dropped,
                    "a notification sink is behind: its queue of {SINK_QUEUE} is full; \
                     notifications to it are dropped"
                );
            }
        }
    }

    /// Resolves once every sink has done what it was handed before.
    pub(crate) fn flushed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let queues = self.queues.clone();
        async move {
            for queue in queues {
                let (done, wait) = oneshot::channel();
                if queue.send(Item::Flush(done)).await.is_ok() {
                    let _ = wait.await;
                }
            }
        }
    }
}

/// A sink ready to deliver.
#[derive(Debug)]
enum Sink {
    Webhook(Webhook),
    Slack(Slack),
    Smtp(Box<Smtp>),
    /// One that could not be made: every delivery fails, saying why.
    Broken(String),
}

impl Sink {
    fn new(config: &SinkConfig, people: &People) -> Sink {
        let client = || http::client(config.timeout).map_err(|e| format!("no HTTP client: {e}"));
        match &config.kind {
            SinkKind::Webhook { url, secret } => match client() {
                Ok(client) => Sink::Webhook(Webhook {
                    client,
                    url: url.clone(),
                    secret: secret.clone(),
                }),
                Err(e) => Sink::Broken(e),
            },
            SinkKind::Slack { url } => match client() {
                Ok(client) => Sink::Slack(Slack {
                    client,
                    url: url.0.clone(),
                }),
                Err(e) => Sink::Broken(e),
            },
            SinkKind::Smtp(smtp) => Sink::Smtp(Box::new(Smtp::new(
                smtp.clone(),
                people.clone(),
                config.timeout,
            ))),
        }
    }

    async fn deliver(&self, notice: &Notice, counters: &SinkCounters) {
        match self {
            Sink::Webhook(webhook) => webhook.deliver(notice, counters).await,
            Sink::Slack(slack) => slack.deliver(notice, counters).await,
            Sink::Smtp(smtp) => smtp.deliver(notice, counters).await,
            Sink::Broken(why) => {
                bump(&counters.failed);
                tracing::warn!(request = notice.request_id, %why, "notification not sent");
            }
        }
    }
}

/// Sink `index`'s task: delivers what its queue holds, in order, until the
/// queue closes.
async fn run(sink: Sink, mut queue: mpsc::Receiver<Item>, counters: Arc<Counters>, index: usize) {
    let Some((_, own)) = counters.sinks.get(index) else {
        return;
    };
    while let Some(item) = queue.recv().await {
        match item {
            Item::Deliver(notice) => sink.deliver(&notice, own).await,
            Item::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
