//! Scenarios against a running lead: handshakes, shutdowns, routing, scale.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context};
use shared::{
    auth::BearerToken,
    pb::{self, envelope::Body, lead_client::LeadClient, operator_client::OperatorClient},
};
use tokio::{sync::Notify, task::JoinSet};
use tokio_stream::StreamExt;
use tonic::{service::interceptor::InterceptedService, transport::Channel};

use crate::stats::Samples;

type Api = LeadClient<InterceptedService<Channel, BearerToken>>;
type Operator = OperatorClient<InterceptedService<Channel, BearerToken>>;

/// The longest any one wait may take.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// How to reach a lead.
#[derive(Debug, Clone)]
pub(crate) struct Lead {
    /// `HOST:PORT`.
    pub(crate) addr: String,
    /// The join token.
    pub(crate) join: String,
    /// The operator token.
    pub(crate) operator: String,
    /// For a lead on TLS: what to trust.
    pub(crate) tls: Option<shared::transport::ClientTls>,
}

/// A joined member with its inbox open.
pub(crate) struct Member {
    /// Its name.
    pub(crate) name: String,
    /// Its client.
    pub(crate) api: Api,
    /// Its inbox.
    pub(crate) inbox: tonic::Streaming<pb::Envelope>,
}

impl Lead {
    async fn channel(&self) -> anyhow::Result<Channel> {
        let endpoint = match &self.tls {
            Some(tls) => tls.endpoint(&format!("https://{}", self.addr))?,
            None => Channel::from_shared(format!("http://{}", self.addr))?,
        };
        Ok(endpoint.connect().await?)
    }

    /// An operator client on its own connection.
    pub(crate) async fn operator(&self) -> anyhow::Result<Operator> {
        Ok(OperatorClient::with_interceptor(
            self.channel().await?,
            BearerToken::new(&self.operator)?,
        ))
    }

    /// Joins `name` on `channel` (or a new connection) and opens its inbox.
    pub(crate) async fn member(
        &self,
        name: &str,
        channel: Option<Channel>,
    ) -> anyhow::Result<Member> {
        let channel = match channel {
            Some(c) => c,
            None => self.channel().await?,
        };
        let mut joiner =
            LeadClient::with_interceptor(channel.clone(), BearerToken::new(&self.join)?);
        let joined = joiner
            .join(pb::JoinRequest {
                name: name.into(),
                role: "bench".into(),
                ..Default::default()
            })
            .await?
            .into_inner();
        let mut api =
            LeadClient::with_interceptor(channel, BearerToken::new(&joined.session_token)?);
        let inbox = api
            .inbox(pb::InboxRequest { after_seq: 0 })
            .await?
            .into_inner();
        Ok(Member {
            name: name.into(),
            api,
            inbox,
        })
    }
}

impl Member {
    /// The next envelope whose body `pick` accepts; acks as it goes.
    async fn next_matching<T>(
        &mut self,
        mut pick: impl FnMut(&Body) -> Option<T>,
    ) -> anyhow::Result<T> {
        loop {
            let envelope = tokio::time::timeout(WAIT, self.inbox.message())
                .await
                .context("waiting for an envelope")??
                .ok_or_else(|| anyhow!("{}'s inbox ended", self.name))?;
            if let Some(found) = envelope.body.as_ref().and_then(&mut pick) {
                if envelope.seq % 64 == 0 {
                    self.api.ack(pb::AckRequest { seq: envelope.seq }).await?;
                }
                return Ok(found);
            }
        }
    }

    /// One plan handshake: `SubmitPlan` until the answer is read from the inbox.
    pub(crate) async fn handshake(&mut self) -> anyhow::Result<Duration> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let plan = pb::Plan {
            summary: "bench".into(),
            files: vec![format!("src/{}.rs", self.name)],
            tests: vec!["t".into()],
            ..Default::default()
        };
        let start = Instant::now();
        self.api
            .submit_plan(pb::PlanApprovalRequest {
                request_id: request_id.clone(),
                plan: Some(plan),
                supersedes: String::new(),
            })
            .await?;
        let approved = self
            .next_matching(|body| match body {
                Body::PlanApprovalResponse(r) if r.request_id == request_id => Some(r.approve),
                _ => None,
            })
            .await?;
        if !approved {
            bail!("the plan was rejected");
        }
        Ok(start.elapsed())
    }
}

/// Approves every plan request it sees, as an operator program would.
pub(crate) async fn run_operator(lead: Lead) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let operator = lead.operator().await?;
    let mut events = operator
        .clone()
        .watch(pb::WatchRequest {})
        .await?
        .into_inner();
    Ok(tokio::spawn(async move {
        while let Some(Ok(event)) = events.next().await {
            if let Some(pb::event::Kind::Envelope(e)) = event.kind {
                if let Some(Body::PlanApprovalRequest(r)) = e.body {
                    let review = pb::PlanReview {
                        request_id: r.request_id,
                        approve: true,
                        ..Default::default()
                    };
                    // Answer each as it comes, without waiting for the last.
                    let mut operator = operator.clone();
                    tokio::spawn(async move { operator.review_plan(review).await });
                }
            }
        }
    }))
}

/// `n` sequential handshakes by one teammate.
pub(crate) async fn handshakes_sequential(
    lead: &Lead,
    name: &str,
    n: usize,
) -> anyhow::Result<(Samples, f64)> {
    let mut member = lead.member(name, None).await?;
    for _ in 0..n / 10 {
        member.handshake().await?;
    }
    let mut samples = Samples::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        samples.push(member.handshake().await?);
    }
    Ok((samples, n as f64 / start.elapsed().as_secs_f64()))
}

/// `teammates` teammates doing `each` handshakes at once.
pub(crate) async fn handshakes_concurrent(
    lead: &Lead,
    prefix: &str,
    teammates: usize,
    each: usize,
) -> anyhow::Result<(Samples, f64)> {
    let mut members = Vec::new();
    for i in 0..teammates {
        members.push(lead.member(&format!("{prefix}{i}"), None).await?);
    }
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    for mut member in members {
        tasks.spawn(async move {
            let mut samples = Samples::with_capacity(each);
            for _ in 0..each {
                samples.push(member.handshake().await?);
            }
            anyhow::Ok(samples)
        });
    }
    let mut all = Samples::with_capacity(teammates * each);
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    Ok((
        all,
        (teammates * each) as f64 / start.elapsed().as_secs_f64(),
    ))
}

/// `n` shutdowns: `RequestShutdown` until another member reads `TeammateTerminated`.
pub(crate) async fn shutdowns(lead: &Lead, prefix: &str, n: usize) -> anyhow::Result<Samples> {
    let mut operator = lead.operator().await?;
    let mut observer = lead.member(&format!("{prefix}observer"), None).await?;
    let mut samples = Samples::with_capacity(n);
    for i in 0..n {
        let name = format!("{prefix}{i}");
        let mut target = lead.member(&name, None).await?;
        let answering = tokio::spawn(async move {
            let request_id = target
                .next_matching(|body| match body {
                    Body::ShutdownRequest(r) => Some(r.request_id.clone()),
                    _ => None,
                })
                .await?;
            target
                .api
                .respond_shutdown(pb::ShutdownResponse {
                    request_id,
                    approve: true,
                    reason: String::new(),
                })
                .await?;
            anyhow::Ok(())
        });
        let start = Instant::now();
        operator
            .request_shutdown(pb::ShutdownRequest {
                target: name.clone(),
                ..Default::default()
            })
            .await?;
        observer
            .next_matching(|body| match body {
                Body::TeammateTerminated(t) if t.name == name => Some(()),
                _ => None,
            })
            .await?;
        samples.push(start.elapsed());
        answering.await??;
    }
    Ok(samples)
}

/// `pairs` senders each pipelining `each` messages (`window` in flight) to
/// their own receiver: messages per second, and the delivery latencies.
pub(crate) async fn routing(
    lead: &Lead,
    prefix: &str,
    pairs: usize,
    each: usize,
    window: usize,
) -> anyhow::Result<(f64, Samples)> {
    let epoch = Instant::now();
    let mut receivers = JoinSet::new();
    let mut senders = Vec::new();
    for i in 0..pairs {
        let mut receiver = lead.member(&format!("{prefix}r{i}"), None).await?;
        senders.push((
            lead.member(&format!("{prefix}s{i}"), None).await?,
            receiver.name.clone(),
        ));
        receivers.spawn(async move {
            let mut samples = Samples::with_capacity(each);
            while samples.len() < each {
                let envelope = tokio::time::timeout(WAIT, receiver.inbox.message())
                    .await??
                    .ok_or_else(|| anyhow!("inbox ended"))?;
                if let Some(Body::Text(t)) = envelope.body {
                    let sent: u64 = t.content.parse()?;
                    samples.push(epoch.elapsed().saturating_sub(Duration::from_micros(sent)));
                }
                if envelope.seq % 256 == 0 {
                    receiver
                        .api
                        .ack(pb::AckRequest { seq: envelope.seq })
                        .await?;
                }
            }
            anyhow::Ok(samples)
        });
    }
    let start = Instant::now();
    // `window` sends in flight per sender: as many workers, each sending its
    // share one after another (no task per message in the load generator).
    let mut sending = JoinSet::new();
    for (sender, to) in senders {
        for worker in 0..window {
            let share = each / window + usize::from(worker < each % window);
            let mut api = sender.api.clone();
            let to = to.clone();
            sending.spawn(async move {
                for _ in 0..share {
                    let content = (epoch.elapsed().as_micros() as u64).to_string();
                    let text = Some(pb::Text { content });
                    api.send(pb::SendRequest {
                        to: to.clone(),
                        text,
                        message_id: String::new(),
                    })
                    .await?;
                }
                anyhow::Ok(())
            });
        }
    }
    while let Some(done) = sending.join_next().await {
        done??;
    }
    let mut all = Samples::with_capacity(pairs * each);
    while let Some(done) = receivers.join_next().await {
        all.extend(done??);
    }
    Ok(((pairs * each) as f64 / start.elapsed().as_secs_f64(), all))
}

/// What the scale scenario measured.
#[derive(Debug)]
pub(crate) struct Scale {
    /// Seconds to join every teammate and open its inbox.
    pub(crate) join_secs: f64,
    /// Handshake latencies of one more teammate while all are connected.
    pub(crate) handshakes: Samples,
    /// Milliseconds for a broadcast to reach every teammate.
    pub(crate) broadcast_ms: f64,
}

/// `n` teammates, each on its own connection with its inbox open.
pub(crate) async fn scale(lead: &Lead, n: usize, handshakes: usize) -> anyhow::Result<Scale> {
    let received = Arc::new(AtomicUsize::new(0));
    let all_received = Arc::new(Notify::new());
    let start = Instant::now();
    let mut joining = JoinSet::new();
    let mut readers = JoinSet::new();
    let mut next = 0;
    // Up to 64 joins in flight: a thousand SYNs at once is a different test.
    while next < n || !joining.is_empty() {
        while next < n && joining.len() < 64 {
            let lead = lead.clone();
            let name = format!("m{next}");
            joining.spawn(async move { lead.member(&name, None).await });
            next += 1;
        }
        let member = joining
            .join_next()
            .await
            .ok_or_else(|| anyhow!("no join in flight"))???;
        let (received, all_received) = (received.clone(), all_received.clone());
        readers.spawn(async move {
            let mut member = member;
            while let Ok(Some(envelope)) = member.inbox.message().await {
                if matches!(envelope.body, Some(Body::Text(_)))
                    && received.fetch_add(1, Ordering::SeqCst) + 1 == n
                {
                    all_received.notify_one();
                }
            }
        });
    }
    let join_secs = start.elapsed().as_secs_f64();
    let (handshakes, _) = handshakes_sequential(lead, "probe", handshakes).await?;

    let mut broadcaster = lead.member("broadcaster", None).await?;
    let waiting = all_received.notified();
    let start = Instant::now();
    broadcaster
        .api
        .send(pb::SendRequest {
            to: "*".into(),
            text: Some(pb::Text {
                content: "all hands".into(),
            }),
            message_id: String::new(),
        })
        .await?;
    tokio::time::timeout(WAIT, waiting)
        .await
        .context("the broadcast reaching everyone")?;
    let broadcast_ms = start.elapsed().as_secs_f64() * 1e3;
    readers.abort_all();
    Ok(Scale {
        join_secs,
        handshakes,
        broadcast_ms,
    })
}

/// What many members terminating at once cost.
#[derive(Debug)]
pub(crate) struct Terminations {
    /// From the moment the grace periods end until `ListTeam` shows them all
    /// TERMINATED and a connected member has heard of them all.
    pub(crate) settled_secs: f64,
    /// The slowest `ListTeam` answer in that time.
    pub(crate) list_team_max_ms: f64,
    /// Termination notices the connected member received.
    pub(crate) notices: usize,
}

/// `n` members join and never open their inbox (one more, the watcher,
/// reads its inbox); their grace periods (`grace`) end, and every one of them
/// is TERMINATED at about once.
pub(crate) async fn terminations(
    lead: &Lead,
    n: usize,
    grace: Duration,
) -> anyhow::Result<Terminations> {
    let mut watcher = lead.member("watcher", None).await?;
    let channel = lead.channel().await?;
    let mut joining = JoinSet::new();
    let mut next = 0;
    while next < n || !joining.is_empty() {
        while next < n && joining.len() < 64 {
            let mut joiner =
                LeadClient::with_interceptor(channel.clone(), BearerToken::new(&lead.join)?);
            let name = format!("t{next}");
            joining.spawn(async move {
                joiner
                    .join(pb::JoinRequest {
                        name,
                        role: "silent".into(),
                        ..Default::default()
                    })
                    .await
            });
            next += 1;
        }
        joining
            .join_next()
            .await
            .ok_or_else(|| anyhow!("no join in flight"))???;
    }
    let ends = Instant::now() + grace;
    let heard = tokio::spawn(async move {
        let mut names = std::collections::HashSet::new();
        let mut notices = 0;
        while names.len() < n {
            let notice = watcher
                .next_matching(|body| match body {
                    Body::TeammateTerminated(t) => Some(t.clone()),
                    _ => None,
                })
                .await?;
            notices += 1;
            names.insert(notice.name);
            names.extend(notice.more.into_iter().map(|m| m.name));
        }
        anyhow::Ok(notices)
    });
    tokio::time::sleep_until(ends.into()).await;
    let mut operator = lead.operator().await?;
    let mut list_team_max_ms: f64 = 0.0;
    loop {
        let start = Instant::now();
        let mut terminated = 0;
        let mut token = String::new();
        loop {
            let page = tokio::time::timeout(
                WAIT,
                operator.list_team(pb::ListTeamRequest {
                    page_token: token,
                    ..Default::default()
                }),
            )
            .await
            .context("ListTeam")??
            .into_inner();
            terminated += page
                .members
                .iter()
                .filter(|m| m.status == pb::MemberStatus::Terminated as i32)
                .count();
            token = page.next_page_token;
            if token.is_empty() {
                break;
            }
        }
        list_team_max_ms = list_team_max_ms.max(start.elapsed().as_secs_f64() * 1e3);
        if terminated >= n {
            break;
        }
        if ends.elapsed() > WAIT {
            bail!("{terminated} of {n} terminated after {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let notices = tokio::time::timeout(WAIT, heard)
        .await
        .context("the watcher hearing of every termination")???;
    Ok(Terminations {
        settled_secs: ends.elapsed().as_secs_f64(),
        list_team_max_ms,
        notices,
    })
}
