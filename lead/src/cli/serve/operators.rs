//! Who operates the lead, from `lead serve`'s flags: the unnamed operator
//! token, named tokens with their roles (`--operator-token
//! NAME=TOKEN[:ROLE]`), and the identity provider whose tokens name people
//! (`--oidc-issuer`, `--oidc-audience`, `--oidc-name-claim`, `--oidc-role`),
//! who also sign in to the console there (`--oidc-client-id`,
//! `--oidc-client-secret-file`, `--oidc-scopes`).

use std::{path::PathBuf, sync::Arc};

use clap::Args;
use mesh_core::{access::Role, owners::Owners};

use crate::{
    callers::{oidc::Verifier, NamedToken, OidcConfig},
    SignIn,
};

#[derive(Debug, Clone, Args)]
pub(super) struct OperatorArgs {
    /// The token operators use (default: generated into
    /// <state-dir>/operator.token; its holder is admin). Repeatable as
    /// NAME=TOKEN[:ROLE]: a named operator's token (role viewer, reviewer
    /// or admin; admin when none is given), whose decisions the audit
    /// trail signs with its name.
    #[arg(long, env = "MESH_OPERATOR_TOKEN", hide_env_values = true, action = clap::ArgAction::Append)]
    operator_token: Vec<String>,
    /// An OpenID provider whose ID or access tokens name operators (as
    /// `authorization: Bearer JWT`): its issuer URL, as its tokens' `iss`.
    #[arg(long, value_name = "URL", requires = "oidc_audience")]
    oidc_issuer: Option<String>,
    /// What a provider's token must be for (its `aud`): the client id the
    /// provider issues the lead's tokens to.
    #[arg(long, value_name = "AUD", requires = "oidc_issuer")]
    oidc_audience: Option<String>,
    /// The claim that names a person (default: `email`, else
    /// `preferred_username`, else `sub`).
    #[arg(long, value_name = "CLAIM", requires = "oidc_issuer")]
    oidc_name_claim: Option<String>,
    /// GROUP=ROLE: a person whose `groups` (or `roles`) claim holds GROUP
    /// has ROLE (viewer, reviewer, admin); the highest counts; a person in
    /// no such group may do nothing. Repeatable.
    #[arg(long, value_name = "GROUP=ROLE", requires = "oidc_issuer", action = clap::ArgAction::Append)]
    oidc_role: Vec<String>,
    /// The client the console signs people in as, at the provider (the
    /// authorization-code flow with PKCE; its redirect URI is <console
    /// URL>/oidc/callback). Default: the audience.
    #[arg(long, value_name = "ID", requires = "oidc_issuer")]
    oidc_client_id: Option<String>,
    /// A file holding the client's secret, for a confidential client
    /// (client_secret_basic); without it the client is public (PKCE alone).
    #[arg(long, value_name = "FILE", requires = "oidc_issuer")]
    oidc_client_secret_file: Option<PathBuf>,
    /// The scopes the console's sign-in asks for: what puts the name and
    /// groups claims in the ID token.
    #[arg(
        long,
        value_name = "SCOPES",
        default_value = "openid email profile groups",
        requires = "oidc_issuer"
    )]
    oidc_scopes: String,
    /// Owners by path, in CODEOWNERS syntax (`db/** @dba 2`): a request
    /// whose files match waits for approvals from the owners of every rule
    /// it falls under (see docs/people.md).
    #[arg(long, value_name = "FILE")]
    owners: Option<std::path::PathBuf>,
    /// Who is told that a review waits (TOML: webhooks signed as GitHub
    /// signs its hooks, Slack, mail by SMTP; routes by kind, path and owner;
    /// escalation after a time; see docs/people.md). Needs the console
    /// (its pages are what a notice links to).
    #[arg(long, value_name = "FILE")]
    notify: Option<std::path::PathBuf>,
}

impl OperatorArgs {
    /// The unnamed `--operator-token`, if one is given (at most one).
    pub(super) fn unnamed(&self) -> anyhow::Result<Option<String>> {
        let unnamed: Vec<&String> = self
            .operator_token
            .iter()
            .filter(|v| named_value(v).is_none())
            .collect();
        if unnamed.len() > 1 {
            anyhow::bail!(
                "--operator-token: give one unnamed token at most; name the others (NAME=TOKEN)"
            );
        }
        Ok(unnamed.first().map(|t| (*t).clone()))
    }

    /// The named `--operator-token NAME=TOKEN[:ROLE]`s: names unique,
    /// tokens long enough, roles known.
    pub(super) fn named(&self) -> anyhow::Result<Vec<NamedToken>> {
        let mut named: Vec<NamedToken> = Vec::new();
        for (name, token) in self.operator_token.iter().filter_map(|v| named_value(v)) {
            let (token, role) = match token.rsplit_once(':') {
                Some((token, role)) => (
                    token,
                    Role::parse(role).ok_or_else(|| {
                        anyhow::anyhow!(
                            "--operator-token {name}=...:{role}: the role is viewer, reviewer or admin"
                        )
                    })?,
                ),
                None => (token, Role::Admin),
            };
            if token.len() < 16 {
                anyhow::bail!(
                    "--operator-token {name}=...: the token is too short (16 characters at least)"
                );
            }
            if named.iter().any(|n| n.name == name) {
                anyhow::bail!("--operator-token: {name} is named twice");
            }
            named.push(NamedToken {
                name: name.to_owned(),
                token: token.to_owned(),
                role,
            });
        }
        Ok(named)
    }

    /// The identity provider, if `--oidc-issuer` names one: its keys are
    /// fetched now, and a provider that does not answer is said, not fatal
    /// (the lead tries again at the first token).
    pub(super) async fn oidc(&self) -> anyhow::Result<Option<Arc<Verifier>>> {
        let (Some(issuer), Some(audience)) = (&self.oidc_issuer, &self.oidc_audience) else {
            return Ok(None);
        };
        let mut roles = Vec::new();
        for value in &self.oidc_role {
            let (group, role) = value
                .split_once('=')
                .filter(|(group, _)| !group.is_empty())
                .ok_or_else(|| anyhow::anyhow!("--oidc-role {value}: expected GROUP=ROLE"))?;
            let role = Role::parse(role).ok_or_else(|| {
                anyhow::anyhow!("--oidc-role {value}: the role is viewer, reviewer or admin")
            })?;
            roles.push((group.to_owned(), role));
        }
        if roles.is_empty() {
            tracing::warn!(
                "--oidc-issuer without --oidc-role: no person has a role, so none may do anything"
            );
        }
        let verifier = Verifier::new(OidcConfig {
            issuer: issuer.clone(),
            audience: audience.clone(),
            name_claim: self.oidc_name_claim.clone(),
            roles,
        })
        .map_err(anyhow::Error::msg)?;
        match verifier.warm().await {
            Ok(keys) => tracing::info!(issuer = %issuer, keys, "the identity provider's keys"),
            Err(why) => tracing::warn!(issuer = %issuer, "the identity provider's keys {why}"),
        }
        Ok(Some(Arc::new(verifier)))
    }
}

impl OperatorArgs {
    /// How the console signs people in at the provider, if `--oidc-issuer`
    /// names one: as `--oidc-client-id` (the audience), back at
    /// `console_url`'s `oidc/callback`.
    pub(super) fn sign_in(&self, console_url: &str) -> anyhow::Result<Option<SignIn>> {
        let (Some(issuer), Some(audience)) = (&self.oidc_issuer, &self.oidc_audience) else {
            return Ok(None);
        };
        let client_id = self
            .oidc_client_id
            .clone()
            .unwrap_or_else(|| audience.clone());
        if client_id != *audience {
            tracing::warn!(
                "--oidc-client-id {client_id} is not --oidc-audience {audience}: the ID tokens the \
                 console's sign-in gets are for {client_id}, and are taken only if they name \
                 {audience} too"
            );
        }
        let client_secret = match &self.oidc_client_secret_file {
            Some(path) => {
                let secret = std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!("--oidc-client-secret-file {}: {e}", path.display())
                })?;
                let secret = secret.trim().to_owned();
                if secret.is_empty() {
                    anyhow::bail!(
                        "--oidc-client-secret-file {}: the file is empty",
                        path.display()
                    );
                }
                Some(secret)
            }
            None => None,
        };
        Ok(Some(SignIn {
            issuer: issuer.clone(),
            client_id,
            client_secret,
            redirect_uri: format!("{}/oidc/callback", console_url.trim_end_matches('/')),
            scopes: self.oidc_scopes.clone(),
        }))
    }

    /// The notifier `--notify` configures, started on this runtime, with
    /// the console's address its notices link to.
    pub(super) fn notify(
        &self,
        console: Option<&str>,
    ) -> anyhow::Result<Option<(mesh_notify::Notifier, String)>> {
        let Some(path) = &self.notify else {
            return Ok(None);
        };
        let Some(console) = console else {
            anyhow::bail!("--notify: a notice links to the console's page, and --http is off");
        };
        let config =
            mesh_notify::Config::load(path).map_err(|e| anyhow::anyhow!("--notify {e}"))?;
        Ok(Some((
            mesh_notify::Notifier::start(config),
            console.to_owned(),
        )))
    }

    /// The owners file's rules (none without `--owners`).
    pub(super) fn owners(&self) -> anyhow::Result<Arc<Owners>> {
        let Some(path) = &self.owners else {
            return Ok(Arc::default());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--owners {}: {e}", path.display()))?;
        let owners =
            Owners::parse(&text).map_err(|e| anyhow::anyhow!("--owners {}:{e}", path.display()))?;
        Ok(Arc::new(owners))
    }
}

/// A `--operator-token` value: `NAME=TOKEN` names its operator (a name as a
/// member's); anything else is the token alone.
fn named_value(value: &str) -> Option<(&str, &str)> {
    let (name, token) = value.split_once('=')?;
    mesh_core::names::Name::parse("--operator-token", name).ok()?;
    Some((name, token))
}
