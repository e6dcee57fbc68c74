//! Streams the lead can reset. hyper runs each HTTP/2 stream as a task of
//! its own, through the server's executor; a stream whose client stopped
//! reading waits in that task for flow-control window the client never
//! gives, and neither its data nor its trailers move. Ending such a stream
//! means dropping its task: h2 then sends RST_STREAM (CANCEL), which no
//! window holds back, and the stream's slot on its connection is free.
//!
//! [`Executor`] runs every stream's task with a [`Reset`] in scope; a
//! handler takes it with [`Reset::current`] and hands it to what decides
//! (an outbox's watchdog).

use std::{
    future::Future,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use tokio::sync::Notify;

tokio::task_local! {
    static CURRENT: Reset;
}

/// Resets the stream whose task it was made for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reset(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    asked: AtomicBool,
    wake: Notify,
}

impl Reset {
    /// The reset of the stream this task serves; `None` outside one (a
    /// handler called by a test, an HTTP/1.1 connection).
    pub(crate) fn current() -> Option<Reset> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Resets the stream (if it has not ended already).
    pub(crate) fn reset(&self) {
        self.0.asked.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }

    /// Completes once [`Reset::reset`] is called.
    async fn asked(&self) {
        while !self.0.asked.load(Ordering::Acquire) {
            self.0.wake.notified().await;
        }
    }
}

/// hyper's executor for the gRPC server: tokio, with each task (an HTTP/2
/// stream) under a [`Reset`] that drops it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        let reset = Reset::default();
        let asked = reset.clone();
        tokio::spawn(CURRENT.scope(reset, async move {
            tokio::select! {
                biased;
                _ = future => {}
                () = asked.asked() => {
                    tracing::debug!("a stream is reset");
                }
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor as _;

    #[tokio::test]
    async fn a_task_sees_its_reset_and_is_dropped_by_it() {
        let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        Executor.execute(async move {
            let _dropped = dropped_tx;
            let _ = seen_tx.send(Reset::current());
            std::future::pending::<()>().await;
        });
        let reset = seen_rx.await.expect("ran").expect("a reset in scope");
        reset.reset();
        assert!(dropped_rx.await.is_err(), "the task was dropped");
        assert!(Reset::current().is_none(), "none outside a stream's task");
    }
}
