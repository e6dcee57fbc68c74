//! The gRPC services: thin. Each RPC says who the caller's token claims to
//! be (`crate::callers`), validates what it can alone, sends an op to the
//! hub and maps the reply.
//! `mesh.v1.Lead` is `service/lead.rs`, `mesh.v1.Operator`
//! `service/operator.rs`.

use std::pin::Pin;

use tokio_stream::Stream;
use tonic::Status;

use crate::{callers::Tokens, hub::HubHandle};

mod inbox;
mod lead;
mod operator;
mod pages;
mod trace;

/// `mesh.v1.Lead`, for teammates.
#[derive(Debug, Clone)]
pub(crate) struct LeadService {
    /// The hub.
    pub(crate) hub: HubHandle,
    /// The join and operator tokens.
    pub(crate) tokens: Tokens,
    /// The team's repository (`--repo`).
    pub(crate) repo: Option<std::sync::Arc<crate::git::Repo>>,
}

/// `mesh.v1.Operator`, for operators.
#[derive(Debug, Clone)]
pub(crate) struct OperatorService {
    /// The hub.
    pub(crate) hub: HubHandle,
    /// The join and operator tokens.
    pub(crate) tokens: Tokens,
    /// What this lead is (`GetLeadership`).
    pub(crate) standing: tokio::sync::watch::Receiver<crate::leadership::Standing>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;
