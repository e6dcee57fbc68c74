//! ListTeam, ListRequests, GetRequest and Watch: absurd page sizes, page
//! tokens, filters and ids.

use mesh_core::limits;
use shared::pb;

use super::Absurd;
use crate::fuzz::pools::{around, page_tokens, weird, ENUMS, PAGE_SIZES};

impl Absurd {
    /// ListTeam and ListRequests by absurd pages and filters, GetRequest of
    /// absurd and real ids, and Watch opened and dropped.
    pub(super) async fn lists_get_request_and_watch(&mut self) {
        for &page_size in PAGE_SIZES {
            let request = pb::ListTeamRequest {
                page_size,
                page_token: String::new(),
            };
            call!(self.report, "ListTeam", self.op, list_team, request);
        }
        for page_token in page_tokens() {
            let request = pb::ListTeamRequest {
                page_size: *self.rng.pick(PAGE_SIZES),
                page_token,
            };
            call!(self.report, "ListTeam", self.op, list_team, request);
        }
        for &value in ENUMS {
            for (status, r#type) in [(value, 0), (0, value), (value, *self.rng.pick(ENUMS))] {
                let request = pb::ListRequestsRequest {
                    status,
                    r#type,
                    page_size: *self.rng.pick(PAGE_SIZES),
                    page_token: String::new(),
                };
                call!(self.report, "ListRequests", self.op, list_requests, request);
            }
        }
        for page_token in page_tokens() {
            let request = pb::ListRequestsRequest {
                page_token,
                ..Default::default()
            };
            call!(self.report, "ListRequests", self.op, list_requests, request);
        }
        for request_id in weird()
            .into_iter()
            .chain(around(limits::ID))
            .chain(self.plans.iter().take(5).cloned())
            .chain(self.permissions.iter().take(5).cloned())
        {
            call!(
                self.report,
                "GetRequest",
                self.op,
                get_request,
                pb::GetRequestRequest { request_id }
            );
        }
        for _ in 0..3 {
            let stream = call!(self.report, "Watch", self.op, watch, pb::WatchRequest {});
            drop(stream);
        }
        self.report.section("lists, GetRequest, Watch");
    }
}
