//! Join, Inbox, Ack and Send, with absurd names, roles, sequence numbers,
//! texts and message ids.

use mesh_core::limits;
use shared::pb;

use super::{text, Absurd};
use crate::fuzz::pools::{around, names, weird, SEQS};

impl Absurd {
    /// Join: absurd names, and absurd roles.
    pub(super) async fn join(&mut self) {
        for name in names() {
            let request = pb::JoinRequest {
                name,
                role: "tester".into(),
                ..Default::default()
            };
            call!(self.report, "Join", self.joiner, join, request);
        }
        for (i, role) in weird().into_iter().chain(around(limits::ROLE)).enumerate() {
            let request = pb::JoinRequest {
                name: format!("role{i}"),
                role,
                ..Default::default()
            };
            call!(self.report, "Join", self.joiner, join, request);
        }
        self.report.section("Join");
    }

    /// Inbox and Ack at absurd sequence numbers (carol's inbox).
    pub(super) async fn inbox_and_ack(&mut self) {
        for &after_seq in SEQS {
            let stream = call!(
                self.report,
                "Inbox",
                self.carol.api,
                inbox,
                pb::InboxRequest { after_seq }
            );
            drop(stream);
            call!(
                self.report,
                "Ack",
                self.carol.api,
                ack,
                pb::AckRequest { seq: after_seq }
            );
        }
        self.report.section("Inbox, Ack");
    }

    /// Send: to absurd names, absurd texts, absurd message ids (each twice,
    /// with two texts).
    pub(super) async fn send(&mut self) {
        for to in names() {
            let request = pb::SendRequest {
                to,
                text: text("hi"),
                message_id: String::new(),
            };
            call!(self.report, "Send", self.alice.api, send, request);
        }
        call!(
            self.report,
            "Send",
            self.alice.api,
            send,
            pb::SendRequest {
                to: "bob".into(),
                text: None,
                message_id: String::new(),
            }
        );
        let mut contents = weird();
        contents.extend(around(limits::TEXT));
        contents.push("z".repeat(1 << 20));
        contents.push("z".repeat(5 << 20));
        for content in contents {
            let request = pb::SendRequest {
                to: "bob".into(),
                text: text(&content),
                message_id: String::new(),
            };
            call!(self.report, "Send", self.alice.api, send, request);
        }
        call!(
            self.report,
            "Send",
            self.alice.api,
            send,
            pb::SendRequest {
                to: "*".into(),
                text: text(&"b".repeat(limits::TEXT)),
                message_id: String::new(),
            }
        );
        for id in weird().into_iter().chain(around(limits::ID)) {
            for content in ["once", "then something else"] {
                let request = pb::SendRequest {
                    to: "bob".into(),
                    text: text(content),
                    message_id: id.clone(),
                };
                call!(self.report, "Send", self.alice.api, send, request);
            }
        }
        self.report.section("Send");
    }
}
