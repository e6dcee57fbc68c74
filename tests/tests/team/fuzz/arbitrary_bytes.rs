//! Part 1: arbitrary bytes to every RPC's decoding path. Every method of
//! `mesh.v1.Lead` and `mesh.v1.Operator` gets crafted cases, a message past
//! the transport's size limit, random bytes, and random and mutated
//! well-formed messages, with the right credentials, as raw bytes.

use std::collections::HashMap;

use bytes::Bytes;
use mesh_tests::{within, Lead, LeadApi};
use shared::pb;
use tokio::time::error::Elapsed;
use tonic::{client::Grpc, Code, Status};

use crate::fuzz::{
    crafted::{crafted, Case, Expect},
    random_messages::{mutate, random_message},
    raw::raw_call,
    report::{clean, from_transport, hex, status_text, Report},
    rng::{seed, Rng},
    schema::{Caller, Rpc, Schema},
    wire::{delimited, UNKNOWN},
    CALL_TIMEOUT, RANDOM_BYTES, RANDOM_MESSAGES,
};

/// Every case for one RPC: crafted, over the size limit, random bytes,
/// random and mutated messages.
fn cases_for(schema: &Schema, rpc: &Rpc, rng: &mut Rng, dict: &[String]) -> Vec<Case> {
    let mut cases = crafted(schema, &rpc.input, 0);
    cases.push(Case {
        what: "a message past the transport's 4 MiB".into(),
        bytes: delimited(UNKNOWN, &vec![b'x'; 4 << 20]),
        expect: Expect::TooLarge,
    });
    for i in 0..RANDOM_BYTES {
        let len = match i % 3 {
            0 => rng.below(16),
            1 => rng.below(256),
            _ => rng.below(4_097),
        };
        cases.push(Case {
            what: format!("random bytes #{i}"),
            bytes: rng.bytes(len),
            expect: Expect::Clean,
        });
    }
    for i in 0..RANDOM_MESSAGES {
        let mut bytes = random_message(schema, &rpc.input, rng, dict, 0);
        let what = if i % 2 == 1 {
            mutate(rng, &mut bytes);
            format!("a mutated random message #{i}")
        } else {
            format!("a random message #{i}")
        };
        cases.push(Case {
            what,
            bytes,
            expect: Expect::Clean,
        });
    }
    cases
}

/// A new member's session token: `{prefix}{n}` for the next free `n`.
async fn join_fresh(joiner: &mut LeadApi, prefix: &str, counter: &mut usize) -> String {
    loop {
        *counter += 1;
        let request = pb::JoinRequest {
            name: format!("{prefix}{counter}"),
            role: "fuzzer".into(),
            ..Default::default()
        };
        match within("Join", joiner.join(request)).await {
            Ok(joined) => return joined.into_inner().session_token,
            // A fuzzed Join took the name first.
            Err(status) if status.code() == Code::AlreadyExists => {}
            Err(status) => panic!("joining a member to fuzz with: {status:?}"),
        }
    }
}

/// The RPCs that must be in the descriptor set (a sign that it was read).
const EXPECTED: [&str; 8] = [
    "/mesh.v1.Lead/Join",
    "/mesh.v1.Lead/Inbox",
    "/mesh.v1.Lead/SubmitPlan",
    "/mesh.v1.Lead/ReportUsage",
    "/mesh.v1.Operator/SetBudget",
    "/mesh.v1.Operator/ReviewPlan",
    "/mesh.v1.Operator/Watch",
    "/mesh.v1.Operator/SpawnTeammate",
];

/// Text for the random messages' string fields: names, ids and globs that
/// exist or look as if they might.
fn dictionary() -> Vec<String> {
    let mut dict: Vec<String> = [
        "bob",
        "*",
        "lead",
        "",
        "fz1",
        "m1",
        "r1",
        "t1",
        "1",
        "src/*.rs",
        "../up",
        "2f1c0e9a-7d2b-4c1e-9a4b-3f9d8e7c6b5a",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    dict.push(uuid::Uuid::new_v4().to_string());
    dict
}

/// The members that call the `Lead` RPCs: one per RPC, joined again when a
/// case made it leave.
struct Sessions {
    joiner: LeadApi,
    tokens: HashMap<String, String>,
    joins: usize,
}

impl Sessions {
    /// The token to call `rpc` with.
    async fn token(&mut self, lead: &Lead, rpc: &Rpc) -> String {
        match rpc.caller {
            Caller::Joiner => lead.join_token.clone(),
            Caller::Operator => lead.operator_token.clone(),
            Caller::Member => match self.tokens.get(&rpc.path) {
                Some(token) => token.clone(),
                None => {
                    let token = join_fresh(&mut self.joiner, "fz", &mut self.joins).await;
                    self.tokens.insert(rpc.path.clone(), token.clone());
                    token
                }
            },
        }
    }
}

/// A case, for a report.
fn what(rpc: &Rpc, case: &Case) -> String {
    format!("{} [{}] bytes {}", rpc.path, case.what, hex(&case.bytes))
}

/// Judges one raw call against its case, a finding if it is wrong. When the
/// lead answered with an error: its code, and whether it was the right one.
fn judge(
    report: &mut Report,
    rpc: &Rpc,
    case: &Case,
    result: Result<Result<(), Status>, Elapsed>,
) -> Option<(Code, bool)> {
    let status = match result {
        Err(_) => {
            report.count("no answer");
            report.finding(format!(
                "{}: no status within {CALL_TIMEOUT:?}",
                what(rpc, case)
            ));
            return None;
        }
        Ok(Ok(())) => {
            report.count("Ok");
            if case.expect != Expect::Clean {
                report.finding(format!(
                    "{}: OK, but the bytes do not decode ({:?} expected)",
                    what(rpc, case),
                    case.expect
                ));
            }
            return None;
        }
        Ok(Err(status)) => status,
    };
    let code = status.code();
    report.count(&format!("{code:?}"));
    let fine = !from_transport(&status)
        && match case.expect {
            Expect::Undecodable => code == Code::InvalidArgument,
            Expect::TooLarge => code == Code::ResourceExhausted,
            Expect::Clean => {
                clean(code) || (code == Code::Unauthenticated && rpc.caller == Caller::Member)
            }
        };
    if !fine {
        report.finding(format!(
            "{}: {} ({:?} expected)",
            what(rpc, case),
            status_text(&status),
            case.expect
        ));
    }
    Some((code, fine))
}

#[tokio::test]
async fn arbitrary_bytes_to_every_rpc_end_in_a_clean_status() {
    let seed = seed();
    let mut report = Report::new("bytes", seed);
    let schema = Schema::load();
    for expected in EXPECTED {
        assert!(
            schema.rpcs.iter().any(|r| r.path == expected),
            "{expected} is not in the descriptor set: {:?}",
            schema.rpcs
        );
    }
    // No teammate executable by default: a fuzzed SpawnTeammate never starts
    // a process, nor makes a workspace (a relative one would land in the
    // lead's working directory, this crate's).
    let mut lead = Lead::start(&["--teammate-bin", "/nonexistent/teammate"]).await;
    report.lead_started();
    let mut grpc = Grpc::new(lead.channel().await);
    // Someone for the messages to name.
    let _bob = lead.join("bob").await;
    let mut sessions = Sessions {
        joiner: lead.lead_api(&lead.join_token).await,
        tokens: HashMap::new(),
        joins: 0,
    };
    let dict = dictionary();

    'rpcs: for rpc in &schema.rpcs {
        let mut rng = Rng::derived(seed, &rpc.path);
        for case in cases_for(&schema, rpc, &mut rng, &dict) {
            let token = sessions.token(&lead, rpc).await;
            let body = Bytes::from(case.bytes.clone());
            let result =
                tokio::time::timeout(CALL_TIMEOUT, raw_call(&mut grpc, rpc, &token, body)).await;
            let Some((code, fine)) = judge(&mut report, rpc, &case, result) else {
                continue;
            };
            if code == Code::Unauthenticated && rpc.caller == Caller::Member {
                // The case made the member leave (or shut down): a new one.
                sessions.tokens.remove(&rpc.path);
            }
            if !fine {
                if let Ok(Some(exit)) = lead.child.try_wait() {
                    report.finding(format!(
                        "the lead exited ({exit}) after {}",
                        what(rpc, &case)
                    ));
                    break 'rpcs;
                }
            }
        }
        report.section(&rpc.path);
    }

    // Still running, and still serving.
    report.lead_running(&mut lead, "after fuzzing");
    let mut operator = lead.operator().await;
    report
        .lead_serving(
            &lead,
            &mut operator,
            "after fuzzing",
            "after-fuzzing",
            "bob",
        )
        .await;
    println!("bytes: {} members joined for the Lead RPCs", sessions.joins);
    report.finish();
}
