//! The list calls' pages, for the wire.

use mesh_core::{
    protocol::Request as CoreRequest,
    tasks::Task,
    team::{Listed, TeamPage},
};
use shared::{pb, wire::ToPb};

use crate::paging::{self, MEMBERS, REQUESTS, TASKS};

/// A page of tasks, for the wire.
pub(crate) fn tasks_page(listed: Listed<Task>) -> pb::ListTasksResponse {
    let (tasks, next_page_token) = paging::render(listed, TASKS, Task::to_pb);
    pb::ListTasksResponse {
        tasks,
        next_page_token,
    }
}

/// A page of requests, for the wire.
pub(crate) fn requests_page(listed: Listed<CoreRequest>) -> pb::ListRequestsResponse {
    let (requests, next_page_token) = paging::render(listed, REQUESTS, CoreRequest::to_pb);
    pb::ListRequestsResponse {
        requests,
        next_page_token,
    }
}

/// A page of the team, for the wire.
pub(crate) fn team_page(page: TeamPage) -> pb::ListTeamResponse {
    let (members, next_page_token) = paging::render(page.members, MEMBERS, ToPb::to_pb);
    pb::ListTeamResponse {
        members,
        next_page_token,
        team_usage: Some(page.team_usage.to_pb()),
        other_usage: page
            .others
            .into_iter()
            .map(|(name, usage)| pb::NamedUsage {
                name,
                usage: Some(usage.to_pb()),
            })
            .collect(),
    }
}
