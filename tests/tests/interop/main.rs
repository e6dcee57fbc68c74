//! Other languages and protocols against the lead: A2A through the official
//! Python SDK, MCP through the official Python client, the Python example
//! teammate, OpenTelemetry export, TLS, the tests' OpenID provider (npm's
//! `oidc-provider`), and the notifications the lead sends (webhooks, Slack,
//! and mail through a real SMTP server).
//!
//! One test binary (`cargo test -p mesh-tests --test interop`), each module linked once.

mod a2a;
mod mcp;
mod notify;
mod oidc;
mod python;
mod telemetry;
mod tls;
