//! What the people tests share: a lead that takes the tests' provider's
//! tokens with the roles their groups give, an operator client on a token,
//! and a decision's audit entry.

use mesh_tests::{oidc::OidcProvider, within, Lead, Operator};
use serde_json::Value;
use shared::{
    auth::BearerToken,
    pb::{self, operator_client::OperatorClient},
};

/// A lead that takes the provider's tokens (`reviewers` and `dba` as
/// reviewers, `viewers` as viewers, `admins` as admins), `extra` after.
pub(crate) async fn lead_of(provider: &OidcProvider, extra: &[&str]) -> Lead {
    let mut args = vec![
        "--oidc-issuer",
        provider.issuer(),
        "--oidc-audience",
        "mesh",
        "--oidc-role",
        "reviewers=reviewer",
        "--oidc-role",
        "dba=reviewer",
        "--oidc-role",
        "viewers=viewer",
        "--oidc-role",
        "admins=admin",
    ];
    args.extend_from_slice(extra);
    Lead::start(&args).await
}

/// An operator client carrying `token`.
pub(crate) async fn operator_with(lead: &Lead, token: &str) -> Operator {
    OperatorClient::with_interceptor(
        lead.channel().await,
        BearerToken::new(token).expect("a token"),
    )
}

/// The audit entry of the decision on `request_id`, read with the
/// operator token.
pub(crate) async fn audit_of(lead: &Lead, request_id: &str) -> Value {
    let mut operator = lead.operator().await;
    let audit = within(
        "ListAudit",
        operator.list_audit(pb::ListAuditRequest::default()),
    )
    .await
    .expect("ListAudit")
    .into_inner();
    audit
        .entries
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).expect("JSON"))
        .find(|e| e["subject"] == request_id)
        .unwrap_or_else(|| panic!("no audit entry for {request_id}: {:?}", audit.entries))
}
