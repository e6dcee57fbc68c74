//! RequestPermission and ReviewPermission: absurd tools, arguments, ids and
//! feedback.

use mesh_core::limits;
use shared::pb;

use super::Absurd;
use crate::fuzz::pools::{around, json_args, weird};

impl Absurd {
    /// RequestPermission with absurd tools, JSON and ids; each permission
    /// reviewed twice, both ways; ReviewPermission of unknown ids and plans.
    pub(super) async fn request_and_review_permission(&mut self) {
        let mut permission_requests = Vec::new();
        for tool in weird().into_iter().chain(around(limits::TOOL)) {
            permission_requests.push(pb::PermissionRequest {
                request_id: String::new(),
                tool,
                args_json: "{}".into(),
            });
        }
        for args_json in json_args() {
            permission_requests.push(pb::PermissionRequest {
                request_id: String::new(),
                tool: "write_file".into(),
                args_json,
            });
        }
        for request_id in weird().into_iter().chain(around(limits::ID)) {
            permission_requests.push(pb::PermissionRequest {
                request_id,
                tool: "run".into(),
                args_json: String::new(),
            });
        }
        for request in permission_requests {
            if let Some(reply) = call!(
                self.report,
                "RequestPermission",
                self.alice.api,
                request_permission,
                request
            ) {
                self.permissions.push(reply.request_id);
            }
        }
        let feedbacks: Vec<String> = weird().into_iter().chain(around(limits::REASON)).collect();
        for (i, request_id) in self.permissions.iter().enumerate() {
            let review = pb::PermissionReview {
                request_id: request_id.clone(),
                approve: i % 2 == 0,
                feedback: feedbacks[i % feedbacks.len()].clone(),
            };
            call!(
                self.report,
                "ReviewPermission",
                self.op,
                review_permission,
                review.clone()
            );
            let other = pb::PermissionReview {
                approve: !review.approve,
                ..review
            };
            call!(
                self.report,
                "ReviewPermission",
                self.op,
                review_permission,
                other
            );
        }
        for request_id in weird()
            .into_iter()
            .chain(around(limits::ID))
            .chain(self.plans.iter().take(5).cloned())
        {
            let review = pb::PermissionReview {
                request_id,
                approve: true,
                feedback: String::new(),
            };
            call!(
                self.report,
                "ReviewPermission",
                self.op,
                review_permission,
                review
            );
        }
        self.report.section("RequestPermission, ReviewPermission");
    }
}
