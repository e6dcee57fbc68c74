//! Several leads on one database, one of them active (`lead serve --store
//! postgres://...`): a client is given their URLs (`--lead` repeated, or
//! comma-separated; a DNS name with several addresses counts as each) and
//! talks to whichever leads. A standby answers every call UNAVAILABLE with
//! the active lead's URL in the `mesh-leader` metadata ([`LEADER_KEY`]), so
//! a client goes there next, at once, rather than trying each address in
//! turn.
//!
//! [`Leads::find`] looks for the active lead: each address (the last one
//! known to lead first) is asked the standard health check
//! (`grpc.health.v1.Health/Check`, which only an active lead answers), and a
//! standby that names the active lead sends the search there next. Every
//! address is asked once; when none leads, the error names each and what it
//! answered. [`Follow`] is the transport the clients use: it searches when
//! it has no lead yet, after a call could not reach the lead, and after a
//! standby answered a call.

use std::{collections::VecDeque, fmt, net::SocketAddr, time::Duration};

use tonic::{transport::Channel, Code, Status};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
};

use crate::transport::{cause, ClientTls, EndpointError};

mod follow;

pub use follow::Follow;

/// The metadata key a standby names the active lead's URL under.
pub const LEADER_KEY: &str = "mesh-leader";

/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one address may take to answer the health check.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most addresses named by standbys that one search follows (beyond the
/// ones given), so that standbys naming each other in turn cannot hold a
/// search forever.
const MOST_NAMED: usize = 8;

/// A standby that names itself is taking over (it holds the lease and is
/// restoring the team): it is asked again this often, this many times.
const TAKING_OVER_PAUSE: Duration = Duration::from_millis(100);
const TAKING_OVER_TRIES: usize = 30;

/// The leads a client was given: `--lead` repeated, or comma-separated, in
/// the order given, and how to reach them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leads {
    urls: Vec<String>,
    tls: ClientTls,
}

impl Leads {
    /// The URLs in `given` (each may hold several, comma-separated), each
    /// checked as the endpoint `tls` makes of it; one at least.
    pub fn new(given: &[String], tls: ClientTls) -> Result<Self, EndpointError> {
        let mut urls: Vec<String> = Vec::new();
        for url in given
            .iter()
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .filter(|url| !url.is_empty())
        {
            tls.endpoint(url)?;
            if !urls.iter().any(|known| known == url) {
                urls.push(url.to_owned());
            }
        }
        if urls.is_empty() {
            return Err(EndpointError("--lead: no URL given".into()));
        }
        Ok(Self { urls, tls })
    }

    /// The URLs, in the order given.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The URLs as one `--lead` value (comma-separated), for a child process.
    pub fn joined(&self) -> String {
        self.urls.join(",")
    }

    /// The active lead, and a channel to it, asking `first` first (the last
    /// lead known), then the addresses given; a standby's answer sends the
    /// search to the lead it names next (one that names itself is taking
    /// over, and is asked again shortly).
    pub async fn find(&self, first: Option<&Candidate>) -> Result<(Candidate, Channel), NoLeader> {
        let (given, mut tried) = self.candidates().await;
        let mut queue: VecDeque<Candidate> = first.cloned().into_iter().chain(given).collect();
        let mut asked: Vec<Candidate> = Vec::new();
        let mut named = 0;
        let mut taking_over = 0;
        while let Some(candidate) = queue.pop_front() {
            if asked.contains(&candidate) {
                continue;
            }
            asked.push(candidate.clone());
            match self.probe(&candidate).await {
                Ok(channel) => return Ok((candidate, channel)),
                Err(Answer::Elsewhere(url))
                    if url == candidate.url && taking_over < TAKING_OVER_TRIES =>
                {
                    taking_over += 1;
                    tokio::time::sleep(TAKING_OVER_PAUSE).await;
                    asked.pop();
                    queue.push_front(candidate);
                }
                Err(Answer::Elsewhere(url)) => {
                    tried.push(Tried {
                        who: candidate.to_string(),
                        said: format!("a standby; the active lead is at {url}"),
                        code: Code::Unavailable,
                    });
                    let next = Candidate { url, at: None };
                    if named < MOST_NAMED && !asked.contains(&next) {
                        named += 1;
                        queue.push_front(next);
                    }
                }
                Err(Answer::Refused(status)) => tried.push(Tried {
                    who: candidate.to_string(),
                    said: cause(&status),
                    code: status.code(),
                }),
            }
        }
        Err(NoLeader { tried })
    }

    /// The addresses to ask: each URL, or, where its host is a DNS name
    /// with several addresses, each address; and the names that did not
    /// resolve, as answers.
    async fn candidates(&self) -> (Vec<Candidate>, Vec<Tried>) {
        let mut candidates = Vec::new();
        let mut failed = Vec::new();
        for url in &self.urls {
            let Some((host, port)) = host_port(url) else {
                candidates.push(Candidate::at_url(url));
                continue;
            };
            if host.parse::<std::net::IpAddr>().is_ok() {
                candidates.push(Candidate::at_url(url));
                continue;
            }
            let resolved = tokio::net::lookup_host((host.as_str(), port)).await;
            match resolved {
                Ok(found) => {
                    let mut addrs: Vec<SocketAddr> = Vec::new();
                    for addr in found {
                        if !addrs.contains(&addr) {
                            addrs.push(addr);
                        }
                    }
                    if addrs.len() <= 1 {
                        candidates.push(Candidate::at_url(url));
                    } else {
                        candidates.extend(addrs.into_iter().map(|addr| Candidate {
                            url: url.clone(),
                            at: Some(addr),
                        }));
                    }
                }
                Err(e) => failed.push(Tried {
                    who: url.clone(),
                    said: format!("dns error: {host} does not resolve: {e}"),
                    code: Code::Unavailable,
                }),
            }
        }
        (candidates, failed)
    }

    /// Connects to `candidate` and asks whether it leads: the channel if it
    /// does.
    async fn probe(&self, candidate: &Candidate) -> Result<Channel, Answer> {
        let endpoint = self
            .tls
            .endpoint(&candidate.url)
            .map_err(|e| Answer::Refused(Status::invalid_argument(e.to_string())))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        let connected = match candidate.at {
            None => endpoint.connect().await,
            Some(addr) => endpoint.connect_with_connector(follow::Dial(addr)).await,
        };
        let channel = connected.map_err(|e| Answer::Refused(Status::from_error(Box::new(e))))?;
        let mut health = HealthClient::new(channel.clone());
        let check = health.check(HealthCheckRequest {
            service: String::new(),
        });
        match tokio::time::timeout(PROBE_TIMEOUT, check).await {
            Err(_) => Err(Answer::Refused(Status::deadline_exceeded(format!(
                "no answer to the health check within {} s",
                PROBE_TIMEOUT.as_secs()
            )))),
            Ok(Ok(answer)) if answer.get_ref().status == ServingStatus::Serving as i32 => {
                Ok(channel)
            }
            Ok(Ok(answer)) => Err(Answer::Refused(Status::unavailable(format!(
                "its health check says {}",
                ServingStatus::try_from(answer.get_ref().status)
                    .map(|s| s.as_str_name())
                    .unwrap_or("an unknown status")
            )))),
            Ok(Err(status)) => match leader_named(&status) {
                Some(url) => Err(Answer::Elsewhere(url)),
                None => Err(Answer::Refused(crate::transport::unreached(status))),
            },
        }
    }
}

impl fmt::Display for Leads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.urls.join(", "))
    }
}

/// The active lead's URL, when `status` is a standby's answer naming it.
pub fn leader_named(status: &Status) -> Option<String> {
    if status.code() != Code::Unavailable {
        return None;
    }
    let url = status.metadata().get(LEADER_KEY)?.to_str().ok()?.trim();
    (!url.is_empty()).then(|| url.to_owned())
}

/// A URL's host (without brackets) and port (the scheme's default if none).
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: tonic::codegen::http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    Some((host.to_owned(), port))
}

/// One address to ask: a URL, dialled at `at` when its name resolved to
/// several addresses (TLS still checks the URL's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    url: String,
    at: Option<SocketAddr>,
}

impl Candidate {
    /// The URL, dialled as it is.
    fn at_url(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            at: None,
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            None => f.write_str(&self.url),
            Some(addr) => write!(f, "{} ({addr})", self.url),
        }
    }
}

/// What an address answered that was not "I lead".
#[derive(Debug)]
enum Answer {
    /// A standby, naming the active lead.
    Elsewhere(String),
    /// Anything else: not reached, refused, a standby that knows no lead.
    Refused(Status),
}

/// One address asked, and what it answered.
#[derive(Debug, Clone)]
struct Tried {
    who: String,
    said: String,
    code: Code,
}

/// No address led: each one asked, and what it answered.
#[derive(Debug, Clone)]
pub struct NoLeader {
    tried: Vec<Tried>,
}

impl NoLeader {
    /// As a call's status: UNAVAILABLE (worth trying again), unless every
    /// address answered with one other code (plain text to a TLS lead, say).
    pub fn status(&self) -> Status {
        let code = match self.tried.first() {
            Some(first) if self.tried.iter().all(|t| t.code == first.code) => first.code,
            _ => Code::Unavailable,
        };
        let code = if code == Code::Ok {
            Code::Unavailable
        } else {
            code
        };
        Status::new(code, self.to_string())
    }
}

impl fmt::Display for NoLeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tried.as_slice() {
            [one] => write!(f, "{}: {}", one.who, one.said),
            all => {
                write!(f, "no lead is active among those asked:")?;
                for (i, tried) in all.iter().enumerate() {
                    let sep = if i == 0 { " " } else { "; " };
                    write!(f, "{sep}{}: {}", tried.who, tried.said)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for NoLeader {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_come_repeated_or_comma_separated_once_each() {
        let given = [
            "http://127.0.0.1:1, http://127.0.0.1:2".to_owned(),
            "http://127.0.0.1:1".to_owned(),
            "http://127.0.0.1:3,".to_owned(),
        ];
        let leads = Leads::new(&given, ClientTls::default()).expect("urls");
        assert_eq!(
            leads.urls(),
            [
                "http://127.0.0.1:1",
                "http://127.0.0.1:2",
                "http://127.0.0.1:3"
            ]
        );
        assert_eq!(
            leads.joined(),
            "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3"
        );
        assert!(Leads::new(&[" , ".to_owned()], ClientTls::default()).is_err());
        assert!(Leads::new(&["not a url".to_owned()], ClientTls::default()).is_err());
    }

    #[test]
    fn a_standby_names_the_active_lead_only_with_unavailable() {
        let mut status = Status::unavailable("standby");
        status
            .metadata_mut()
            .insert(LEADER_KEY, "http://127.0.0.1:7601".parse().expect("value"));
        assert_eq!(
            leader_named(&status).as_deref(),
            Some("http://127.0.0.1:7601")
        );
        assert_eq!(leader_named(&Status::unavailable("no one leads")), None);
        let mut other = Status::internal("no");
        other
            .metadata_mut()
            .insert(LEADER_KEY, "http://127.0.0.1:7601".parse().expect("value"));
        assert_eq!(leader_named(&other), None);
    }

    #[test]
    fn hosts_and_ports() {
        assert_eq!(
            host_port("http://leads.example:7447"),
            Some(("leads.example".into(), 7447))
        );
        assert_eq!(
            host_port("https://leads.example"),
            Some(("leads.example".into(), 443))
        );
        assert_eq!(host_port("http://[::1]:5"), Some(("::1".into(), 5)));
    }

    #[test]
    fn no_leader_names_every_address_and_keeps_a_shared_code() {
        let tried = |code| Tried {
            who: "http://a".into(),
            said: "h2 protocol error".into(),
            code,
        };
        let one = NoLeader {
            tried: vec![tried(Code::Internal)],
        };
        assert_eq!(one.status().code(), Code::Internal);
        assert_eq!(one.to_string(), "http://a: h2 protocol error");
        let mixed = NoLeader {
            tried: vec![tried(Code::Internal), tried(Code::Unavailable)],
        };
        assert_eq!(mixed.status().code(), Code::Unavailable);
        assert!(mixed.to_string().contains("; http://a: "), "{mixed}");
    }

    #[tokio::test]
    async fn a_search_that_reaches_no_one_says_what_each_answered() {
        // Ports nothing listens on: refused at once.
        let free = |_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("http://{}", listener.local_addr().expect("addr"))
        };
        let urls: Vec<String> = (0..2).map(free).collect();
        let leads = Leads::new(&urls, ClientTls::default()).expect("urls");
        let err = leads.find(None).await.expect_err("no lead");
        let text = err.to_string();
        for url in &urls {
            assert!(text.contains(url.as_str()), "{text}");
        }
        assert_eq!(err.status().code(), Code::Unavailable, "{text}");
    }
}
