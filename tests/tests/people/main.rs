//! Reviews reaching the right person: operators from an OpenID provider
//! (npm's `oidc-provider`, started by the tests) with their roles, the
//! console's sign-in, owners by path, and notifications out.
//!
//! One test binary (`cargo test -p mesh-tests --test people`), each module linked once.

mod common;
mod console_signin;
mod notify;
mod owners;
mod roles;
