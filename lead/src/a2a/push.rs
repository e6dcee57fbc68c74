//! Push notifications: a caller names a webhook for a task
//! (`CreateTaskPushNotificationConfig`, or beside the message that hands
//! the task in), and the lead POSTs the task's updates to it, each a
//! `StreamResponse` in JSON (the task as it stands first, then each change
//! of its state, as `SubscribeToTask` gives them), with the caller's
//! credentials (`Authorization: SCHEME CREDENTIALS`) and token
//! (`X-A2A-Notification-Token`).
//!
//! Only to the hosts `lead serve --a2a-push-allow HOST` names (a caller
//! cannot make the lead post anywhere else, nor follow a redirect there).
//! Each webhook has a task and a queue of its own: a POST waits at most
//! [`POST_TIMEOUT`] and is tried [`ATTEMPTS`] times; a webhook that is slow
//! or down loses its own oldest updates beyond [`QUEUED`], never slows the
//! hub or another webhook. The configs are kept in memory, up to
//! [`MOST_PER_TASK`] a task and [`MOST`] in all (those of finished
//! deliveries make room first): a restart forgets them.

use std::{collections::VecDeque, sync::Mutex, time::Duration};

use mesh_a2a::pb as a2a;
use tokio_stream::StreamExt as _;
use tonic::Status;

use super::{errors::invalid, updates, A2a, BoxStream};

/// How long one POST may take.
pub(crate) const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times an update is tried (0.5 s, then 1 s between).
pub(crate) const ATTEMPTS: u32 = 3;
/// Updates a webhook holds while it is slow; beyond, the oldest go.
pub(crate) const QUEUED: usize = 16;
/// The most configs a task has.
pub(crate) const MOST_PER_TASK: usize = 8;
/// The most configs the lead keeps.
pub(crate) const MOST: usize = 1_000;

/// The webhooks, and where the lead may post.
#[derive(Debug)]
pub(crate) struct Push {
    /// Hosts (lower case) the lead may post to.
    allowed: Vec<String>,
    http: reqwest::Client,
    /// Oldest first.
    kept: Mutex<Vec<Kept>>,
}

/// One webhook of one task, and the task posting its updates.
#[derive(Debug)]
struct Kept {
    config: a2a::TaskPushNotificationConfig,
    delivery: tokio::task::AbortHandle,
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.delivery.abort();
    }
}

impl Push {
    /// Posting to `allowed` hosts (`--a2a-push-allow`).
    pub(crate) fn new(allowed: &[String]) -> Result<Self, reqwest::Error> {
        // Webhooks over https: the one TLS provider the lead uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            allowed: allowed.iter().map(|h| h.to_ascii_lowercase()).collect(),
            http: reqwest::Client::builder()
                .timeout(POST_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            kept: Mutex::new(Vec::new()),
        })
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `config` checked (fields named under `at`, e.g. `configuration.
    /// task_push_notification_config.`): a URL of an allowed host, header-safe
    /// credentials, every field within its bound; its id made if empty.
    pub(crate) fn checked(
        &self,
        mut config: a2a::TaskPushNotificationConfig,
        at: &str,
    ) -> Result<a2a::TaskPushNotificationConfig, Status> {
        let field = |f: &str| format!("{at}{f}");
        let long = |f: &str, value: &str, most: usize| {
            if value.len() > most {
                Err(invalid(
                    &field(f),
                    format!("is {} bytes; the limit is {most}", value.len()),
                ))
            } else {
                Ok(())
            }
        };
        long("id", &config.id, 256)?;
        long("url", &config.url, 4_096)?;
        long("token", &config.token, 1_024)?;
        if config.url.is_empty() {
            return Err(invalid(&field("url"), "is required"));
        }
        let url = reqwest::Url::parse(&config.url)
            .map_err(|e| invalid(&field("url"), format!("is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(&field("url"), "is not an http(s) URL"));
        }
        let host = url.host_str().unwrap_or("").to_ascii_lowercase();
        if !self.allowed.contains(&host) {
            return Err(invalid(
                &field("url"),
                format!(
                    "names host {host:?}, which this lead does not post to \
                     (lead serve --a2a-push-allow HOST names those it does)"
                ),
            ));
        }
        if !header_safe(&config.token) {
            return Err(invalid(&field("token"), "holds characters a header cannot"));
        }
        if let Some(auth) = &config.authentication {
            long("authentication.scheme", &auth.scheme, 64)?;
            long("authentication.credentials", &auth.credentials, 4_096)?;
            let token_char = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if auth.scheme.is_empty() || !auth.scheme.chars().all(token_char) {
                return Err(invalid(
                    &field("authentication.scheme"),
                    "is required, one word (e.g. Bearer)",
                ));
            }
            if !header_safe(&auth.credentials) {
                return Err(invalid(
                    &field("authentication.credentials"),
                    "holds characters a header cannot",
                ));
            }
        }
        if config.id.is_empty() {
            config.id = uuid::Uuid::new_v4().to_string();
        }
        Ok(config)
    }

    /// Keeps `config` (checked) for its task, which exists, replacing one of
    /// the same id, and starts posting the task's updates to it.
    pub(crate) async fn create(
        &self,
        a2a: &A2a,
        config: a2a::TaskPushNotificationConfig,
    ) -> Result<a2a::TaskPushNotificationConfig, Status> {
        {
            let mut kept = self.kept();
            let same = |k: &Kept| k.config.task_id == config.task_id;
            kept.retain(|k| !(same(k) && k.config.id == config.id));
            if kept.iter().filter(|k| same(k)).count() >= MOST_PER_TASK {
                return Err(Status::resource_exhausted(format!(
                    "task {:?} has {MOST_PER_TASK} push configs, the most it may; \
                     delete one first",
                    config.task_id
                )));
            }
            if kept.len() >= MOST {
                // Those whose task has ended and whose updates went out make room.
                match kept.iter().position(|k| k.delivery.is_finished()) {
                    Some(done) => drop(kept.remove(done)),
                    None => {
                        return Err(Status::resource_exhausted(format!(
                            "the lead keeps {MOST} push configs, the most it may; \
                             delete one first"
                        )))
                    }
                }
            }
        }
        let updates = updates::updates(a2a, config.task_id.clone(), false).await?;
        let delivery = tokio::spawn(deliver(self.http.clone(), config.clone(), updates));
        let mut kept = self.kept();
        // A create of the same id may have come in meanwhile: the last wins.
        kept.retain(|k| !(k.config.task_id == config.task_id && k.config.id == config.id));
        kept.push(Kept {
            config: config.clone(),
            delivery: delivery.abort_handle(),
        });
        Ok(config)
    }

    /// Config `id` of task `task_id`.
    pub(crate) fn get(
        &self,
        task_id: &str,
        id: &str,
    ) -> Result<a2a::TaskPushNotificationConfig, Status> {
        self.kept()
            .iter()
            .find(|k| k.config.task_id == task_id && k.config.id == id)
            .map(|k| k.config.clone())
            .ok_or_else(|| {
                Status::not_found(format!("id: task {task_id:?} has no push config {id:?}"))
            })
    }

    /// Task `task_id`'s configs, oldest first.
    pub(crate) fn list(&self, task_id: &str) -> Vec<a2a::TaskPushNotificationConfig> {
        self.kept()
            .iter()
            .filter(|k| k.config.task_id == task_id)
            .map(|k| k.config.clone())
            .collect()
    }

    /// Forgets config `id` of task `task_id` (whether it was kept or not),
    /// and stops posting to it.
    pub(crate) fn delete(&self, task_id: &str, id: &str) {
        self.kept()
            .retain(|k| !(k.config.task_id == task_id && k.config.id == id));
    }
}

/// Whether `value` can go in a header as it is.
fn header_safe(value: &str) -> bool {
    reqwest::header::HeaderValue::from_str(value).is_ok()
}

/// Posts each of `updates` to `config`'s webhook in order, while reading
/// on: a slow webhook loses its oldest updates beyond [`QUEUED`] (never the
/// one being posted). Ends once the task has ended and its last update has
/// been tried, or when the config is deleted (aborted).
async fn deliver(
    http: reqwest::Client,
    config: a2a::TaskPushNotificationConfig,
    mut updates: BoxStream<a2a::StreamResponse>,
) {
    let mut queue: VecDeque<serde_json::Value> = VecDeque::new();
    let mut ended = false;
    loop {
        let Some(body) = queue.front().cloned() else {
            match updates.next().await {
                Some(Ok(update)) => queue.extend(mesh_a2a::to_json(&update, "StreamResponse")),
                Some(Err(_)) | None => return,
            }
            continue;
        };
        let post = post(&http, &config, body);
        tokio::pin!(post);
        loop {
            tokio::select! {
                () = &mut post => {
                    queue.pop_front();
                    break;
                }
                update = updates.next(), if !ended => match update {
                    Some(Ok(update)) => {
                        queue.extend(mesh_a2a::to_json(&update, "StreamResponse"));
                        if queue.len() > QUEUED {
                            queue.remove(1);
                            tracing::warn!(url = %config.url, task = %config.task_id,
                                "push: the webhook is slow; its oldest update waiting was dropped");
                        }
                    }
                    Some(Err(_)) | None => ended = true,
                },
            }
        }
        if ended && queue.is_empty() {
            return;
        }
    }
}

/// POSTs `body` to the webhook, up to [`ATTEMPTS`] times; a 2xx answer is
/// delivered.
async fn post(
    http: &reqwest::Client,
    config: &a2a::TaskPushNotificationConfig,
    body: serde_json::Value,
) {
    let mut pause = Duration::from_millis(500);
    for attempt in 1..=ATTEMPTS {
        let mut request = http.post(&config.url).json(&body);
        if let Some(auth) = &config.authentication {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                format!("{} {}", auth.scheme, auth.credentials),
            );
        }
        if !config.token.is_empty() {
            request = request.header("X-A2A-Notification-Token", &config.token);
        }
        let outcome = match request.send().await {
            Ok(answer) if answer.status().is_success() => return,
            Ok(answer) => format!("answered {}", answer.status()),
            Err(e) => e.to_string(),
        };
        tracing::warn!(url = %config.url, task = %config.task_id, attempt, %outcome,
            "push: the webhook did not take the update");
        if attempt < ATTEMPTS {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
}

/// The push webhooks, if this lead posts any (else the spec's
/// PushNotificationNotSupported).
fn of(a2a: &A2a) -> Result<&Push, Status> {
    a2a.push
        .as_deref()
        .ok_or_else(super::errors::push_not_supported)
}

/// Checks that task `task_id` is named and exists.
async fn task_named(a2a: &A2a, task_id: &str) -> Result<(), Status> {
    if task_id.is_empty() {
        return Err(invalid("task_id", "is required"));
    }
    a2a.task(task_id).await.map(|_| ())
}

/// `CreateTaskPushNotificationConfig`.
pub(super) async fn create(
    a2a: &A2a,
    config: a2a::TaskPushNotificationConfig,
) -> Result<a2a::TaskPushNotificationConfig, Status> {
    let push = of(a2a)?;
    task_named(a2a, &config.task_id).await?;
    let config = push.checked(config, "")?;
    push.create(a2a, config).await
}

/// The push config a `SendMessage` carries, checked before the message is
/// taken (`None`: it carries none).
pub(super) fn asked(
    a2a: &A2a,
    configuration: &a2a::SendMessageConfiguration,
) -> Result<Option<a2a::TaskPushNotificationConfig>, Status> {
    configuration
        .task_push_notification_config
        .clone()
        .map(|config| of(a2a)?.checked(config, "configuration.task_push_notification_config."))
        .transpose()
}

/// Keeps the push config a `SendMessage` carried for its task `task_id`.
pub(super) async fn keep(
    a2a: &A2a,
    config: Option<a2a::TaskPushNotificationConfig>,
    task_id: &str,
) -> Result<(), Status> {
    if let Some(config) = config {
        let config = a2a::TaskPushNotificationConfig {
            task_id: task_id.to_owned(),
            ..config
        };
        of(a2a)?.create(a2a, config).await?;
    }
    Ok(())
}

/// `GetTaskPushNotificationConfig`.
pub(super) async fn get(
    a2a: &A2a,
    ask: a2a::GetTaskPushNotificationConfigRequest,
) -> Result<a2a::TaskPushNotificationConfig, Status> {
    let push = of(a2a)?;
    task_named(a2a, &ask.task_id).await?;
    if ask.id.is_empty() {
        return Err(invalid("id", "is required"));
    }
    push.get(&ask.task_id, &ask.id)
}

/// `ListTaskPushNotificationConfigs`: pages of `page_size` (0: all), the
/// token the index of the next.
pub(super) async fn list(
    a2a: &A2a,
    ask: a2a::ListTaskPushNotificationConfigsRequest,
) -> Result<a2a::ListTaskPushNotificationConfigsResponse, Status> {
    let push = of(a2a)?;
    task_named(a2a, &ask.task_id).await?;
    let size =
        usize::try_from(ask.page_size).map_err(|_| invalid("page_size", "must not be negative"))?;
    let from = if ask.page_token.is_empty() {
        0
    } else {
        ask.page_token
            .parse::<usize>()
            .map_err(|_| invalid("page_token", "is not a token this lead gave"))?
    };
    let all = push.list(&ask.task_id);
    let size = if size == 0 { all.len() } else { size };
    let configs: Vec<_> = all.iter().skip(from).take(size).cloned().collect();
    let next = from + configs.len();
    Ok(a2a::ListTaskPushNotificationConfigsResponse {
        configs,
        next_page_token: if next < all.len() {
            next.to_string()
        } else {
            String::new()
        },
    })
}

/// `DeleteTaskPushNotificationConfig`: idempotent.
pub(super) async fn delete(
    a2a: &A2a,
    ask: a2a::DeleteTaskPushNotificationConfigRequest,
) -> Result<(), Status> {
    let push = of(a2a)?;
    task_named(a2a, &ask.task_id).await?;
    if ask.id.is_empty() {
        return Err(invalid("id", "is required"));
    }
    push.delete(&ask.task_id, &ask.id);
    Ok(())
}
