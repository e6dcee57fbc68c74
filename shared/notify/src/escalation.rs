//! Escalations: the book of requests that still wait, and a timer per
//! (request, route with `after`). A timer is armed once, when the request
//! first waits on a route; when it fires and the request still waits (and
//! its latest notice still matches the route), the route's sinks get that
//! notice as `escalated`. [`Book::settled`] forgets the request and stops
//! its timers.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::task::AbortHandle;

use crate::{
    notice::{Event, Notice},
    outlet::Outlets,
    route::Route,
    stats::bump,
};

/// The most requests the book holds; past it, a new request gets no
/// escalation (its notices at once still go out).
pub const MOST_OPEN: usize = 100_000;

/// One request that waits.
#[derive(Debug)]
struct Open {
    /// Its latest notice: what an escalation sends.
    latest: Arc<Notice>,
    /// The timers armed for it, by route.
    armed: Vec<(usize, AbortHandle)>,
}

/// The requests that wait, by id.
#[derive(Debug, Default)]
pub(crate) struct Book {
    open: Mutex<HashMap<String, Open>>,
}

impl Book {
    fn open(&self) -> MutexGuard<'_, HashMap<String, Open>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `notice`'s request waits: its latest notice is this one.
    pub(crate) fn waiting(&self, notice: &Arc<Notice>) {
        let mut open = self.open();
        if let Some(entry) = open.get_mut(&notice.request_id) {
            entry.latest = Arc::clone(notice);
        } else if open.len() < MOST_OPEN {
            open.insert(
                notice.request_id.clone(),
                Open {
                    latest: Arc::clone(notice),
                    armed: Vec::new(),
                },
            );
        } else {
            tracing::warn!(
                request = notice.request_id,
                "{MOST_OPEN} requests already wait: this one gets no escalation"
            );
        }
    }

    /// `notice` never reached the worker: forgets its request if it was
    /// new (no timer armed, this its only notice).
    pub(crate) fn dropped(&self, notice: &Arc<Notice>) {
        let mut open = self.open();
        let untouched = open
            .get(&notice.request_id)
            .is_some_and(|e| e.armed.is_empty() && Arc::ptr_eq(&e.latest, notice));
        if untouched {
            open.remove(&notice.request_id);
        }
    }

    /// The request was decided, expired or withdrawn: its timers stop.
    pub(crate) fn settled(&self, request_id: &str) {
        if let Some(entry) = self.open().remove(request_id) {
            for (_, timer) in entry.armed {
                timer.abort();
            }
        }
    }

    /// Every timer stops.
    pub(crate) fn close(&self) {
        for (_, entry) in self.open().drain() {
            for (_, timer) in entry.armed {
                timer.abort();
            }
        }
    }

    /// The timer of route `index` fired: the request's latest notice, if
    /// it still waits.
    fn fire(&self, request_id: &str, index: usize) -> Option<Arc<Notice>> {
        let mut open = self.open();
        let entry = open.get_mut(request_id)?;
        entry.armed.retain(|(route, _)| *route != index);
        Some(Arc::clone(&entry.latest))
    }
}

/// What a timer needs: the book, the routes, the sinks.
#[derive(Debug, Clone)]
pub(crate) struct Escalations {
    pub(crate) book: Arc<Book>,
    pub(crate) routes: Arc<[Route]>,
    pub(crate) outlets: Arc<Outlets>,
}

impl Escalations {
    /// Arms route `index`'s timer for `request_id`, unless it is armed or
    /// the request no longer waits.
    pub(crate) fn arm(&self, index: usize, after: Duration, request_id: &str) {
        let mut open = self.book.open();
        let Some(entry) = open.get_mut(request_id) else {
            return;
        };
        if entry.armed.iter().any(|(route, _)| *route == index) {
            return;
        }
        let this = self.clone();
        let id = request_id.to_owned();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            this.fire(index, after, &id);
        });
        entry.armed.push((index, timer.abort_handle()));
    }

    fn fire(&self, index: usize, after: Duration, request_id: &str) {
        let Some(latest) = self.book.fire(request_id, index) else {
            return;
        };
        let Some(route) = self.routes.get(index) else {
            return;
        };
        if !route.matches(&latest) {
            return;
        }
        bump(&self.outlets.counters.escalated);
        tracing::debug!(
            request = request_id,
            route = route.number,
            "a request still waits: escalating"
        );
        let notice = Arc::new(latest.as_event(Event::Escalated { after }));
        for &sink in &route.sinks {
            self.outlets.offer(sink, &notice);
        }
    }
}
