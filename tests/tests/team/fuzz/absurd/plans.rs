//! SubmitPlan and ReviewPlan: absurd plans, absurd grants and feedback.

use mesh_core::limits;
use shared::pb;

use super::{plan, Absurd};
use crate::fuzz::pools::{around, globs, times, weird, ENUMS};

/// Reviews with absurd grants (modes, write paths, expiry times) and absurd
/// feedback, for plans yet to be submitted.
fn reviews() -> Vec<pb::PlanReview> {
    let mut grants = Vec::new();
    for &mode in ENUMS {
        grants.push(pb::PermissionGrant {
            mode,
            ..Default::default()
        });
    }
    for glob in globs() {
        grants.push(pb::PermissionGrant {
            mode: pb::PermissionMode::AcceptEdits as i32,
            write_paths: vec![glob],
            ..Default::default()
        });
    }
    grants.push(pb::PermissionGrant {
        mode: pb::PermissionMode::AcceptEdits as i32,
        write_paths: vec!["src/**".into(); limits::LIST_ITEMS + 1],
        ..Default::default()
    });
    grants.push(pb::PermissionGrant {
        mode: pb::PermissionMode::AcceptEdits as i32,
        write_paths: (0..limits::LIST_ITEMS)
            .map(|i| format!("d{i}/**"))
            .collect(),
        ..Default::default()
    });
    for expires_at_unix_ms in times() {
        grants.push(pb::PermissionGrant {
            mode: pb::PermissionMode::Bypass as i32,
            expires_at_unix_ms,
            ..Default::default()
        });
    }
    let mut reviews = Vec::new();
    for (i, grant) in grants.into_iter().enumerate() {
        reviews.push(pb::PlanReview {
            approve: true,
            grant: Some(grant),
            refuse_overlap: i % 2 == 0,
            ..Default::default()
        });
    }
    for (i, feedback) in weird()
        .into_iter()
        .chain(around(limits::REASON))
        .enumerate()
    {
        reviews.push(pb::PlanReview {
            approve: i % 4 == 0,
            feedback,
            ..Default::default()
        });
    }
    reviews
}

impl Absurd {
    /// SubmitPlan: empty, long and odd plans, steps, files, globs, task ids,
    /// request ids reused with another plan, and superseding ones.
    pub(super) async fn submit_plan(&mut self) {
        let mut requests = vec![
            pb::PlanApprovalRequest::default(),
            plan(&|p| *p = pb::Plan::default()),
            plan(&|p| p.steps = vec![String::new(); limits::LIST_ITEMS]),
            plan(&|p| p.steps = vec!["s".into(); limits::LIST_ITEMS + 1]),
            plan(&|p| p.steps = vec!["step".into(); 5_000]),
            plan(&|p| p.steps = weird()),
            plan(&|p| p.steps = vec!["x".repeat(60_000)]),
            plan(&|p| p.steps = vec!["x".repeat(30_000); 3]),
            plan(&|p| p.files = vec!["a".into(); limits::LIST_ITEMS + 1]),
            plan(&|p| p.files = vec!["src/*.rs".into(); limits::LIST_ITEMS]),
            plan(&|p| p.files = Vec::new()),
            plan(&|p| p.tests = weird()),
            plan(&|p| p.tests = vec!["t".into(); 5_000]),
        ];
        for summary in weird().into_iter().chain(around(limits::PLAN)) {
            requests.push(plan(&|p| p.summary = summary.clone()));
        }
        for body in weird().into_iter().chain(around(limits::PLAN - 64)) {
            requests.push(plan(&|p| p.body = body.clone()));
        }
        for glob in globs() {
            requests.push(plan(&|p| p.files = vec![glob.clone()]));
        }
        for task_id in weird().into_iter().chain(around(limits::ID)) {
            requests.push(plan(&|p| p.task_id = task_id.clone()));
        }
        for id in weird().into_iter().chain(around(limits::ID)) {
            let mut request = plan(&|_| {});
            request.request_id = id.clone();
            requests.push(request.clone());
            // The same id with another plan.
            request.plan.as_mut().expect("plan").summary = "another".into();
            requests.push(request);
            let mut superseding = plan(&|_| {});
            superseding.supersedes = id;
            requests.push(superseding);
        }
        for request in requests {
            if let Some(reply) = call!(
                self.report,
                "SubmitPlan",
                self.alice.api,
                submit_plan,
                request
            ) {
                self.plans.push(reply.request_id);
            }
        }
        self.report.section("SubmitPlan");
    }

    /// ReviewPlan: absurd grants and feedback, each on a fresh plan; unknown
    /// ids and the plans submitted before; then alice in DEFAULT, to ask for
    /// permissions.
    pub(super) async fn review_plan(&mut self) {
        let valid_plan = || plan(&|_| {});
        for (i, mut review) in reviews().into_iter().enumerate() {
            let Some(submitted) = call!(
                self.report,
                "SubmitPlan",
                self.alice.api,
                submit_plan,
                valid_plan()
            ) else {
                continue;
            };
            review.request_id = submitted.request_id.clone();
            call!(
                self.report,
                "ReviewPlan",
                self.op,
                review_plan,
                review.clone()
            );
            if i % 8 == 0 {
                // A retry, and the other answer.
                call!(
                    self.report,
                    "ReviewPlan",
                    self.op,
                    review_plan,
                    review.clone()
                );
                review.approve = !review.approve;
                review.feedback = "changed my mind".into();
                call!(self.report, "ReviewPlan", self.op, review_plan, review);
            }
        }
        for request_id in weird()
            .into_iter()
            .chain(around(limits::ID))
            .chain(self.plans.iter().cloned())
        {
            let request = pb::PlanReview {
                request_id,
                approve: true,
                ..Default::default()
            };
            call!(self.report, "ReviewPlan", self.op, review_plan, request);
        }
        // Alice in DEFAULT, to ask for permissions.
        if let Some(submitted) = call!(
            self.report,
            "SubmitPlan",
            self.alice.api,
            submit_plan,
            valid_plan()
        ) {
            let review = pb::PlanReview {
                request_id: submitted.request_id,
                approve: true,
                grant: Some(pb::PermissionGrant {
                    mode: pb::PermissionMode::Default as i32,
                    ..Default::default()
                }),
                ..Default::default()
            };
            call!(self.report, "ReviewPlan", self.op, review_plan, review);
        }
        self.report.section("ReviewPlan");
    }
}
