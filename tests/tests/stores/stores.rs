//! The stores: SQLite, and PostgreSQL against a real server (Debian's
//! `postgresql`, started by the test), each keeps what every store keeps
//! (`mesh_tests::store_conformance`); on PostgreSQL a lead that lost the
//! lease can write nothing more.

use std::time::Duration;

use lead::store::{
    Change, Fence, Lease, PgTarget, PostgresStore, Snapshot, SqliteStore, Store, StoreError, Sync,
    TeamChange,
};
use mesh_core::protocol::Status;
use mesh_tests::{pg::PgServer, store_conformance as conformance};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Takes the lease of the database at `url` as `holder`: its fence.
fn lease(url: &str, holder: &str, ttl: Duration) -> Fence {
    let target = PgTarget::parse("url", url).expect("url");
    runtime().block_on(async {
        let lease = Lease::connect(&target, holder, "http://127.0.0.1:1", ttl)
            .await
            .expect("lease connection");
        let epoch = lease
            .try_acquire()
            .await
            .expect("acquire")
            .expect("the lease is free");
        Fence {
            holder: holder.into(),
            epoch,
        }
    })
}

/// The PostgreSQL store (async) behind the blocking API the checks use:
/// a runtime of the test's own drives it and its connection.
#[derive(Debug)]
struct Blocking {
    runtime: tokio::runtime::Runtime,
    store: PostgresStore,
}

impl Store for Blocking {
    fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.runtime.block_on(self.store.load())
    }

    fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        self.runtime.block_on(self.store.commit(changes))
    }
}

fn open(url: &str, fence: &Fence) -> Blocking {
    let target = PgTarget::parse("url", url).expect("url");
    let runtime = runtime();
    let store = runtime
        .block_on(PostgresStore::open(&target, Sync::Full, fence.clone()))
        .expect("open");
    Blocking { runtime, store }
}

#[test]
fn sqlite_keeps_what_every_store_keeps() {
    let mut dirs = Vec::new();
    conformance::all(&mut || {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_owned();
        dirs.push(dir);
        Box::new(move || -> Box<dyn Store> {
            Box::new(SqliteStore::open(&path, Sync::Full).expect("open"))
        })
    });
}

#[test]
fn postgres_keeps_what_every_store_keeps() {
    let server = PgServer::start();
    conformance::all(&mut || {
        let url = server.database();
        let fence = lease(&url, "lead-a", Duration::from_secs(60));
        Box::new(move || -> Box<dyn Store> { Box::new(open(&url, &fence)) })
    });
}

#[test]
fn a_lead_that_lost_the_lease_writes_nothing_more() {
    let server = PgServer::start();
    let url = server.database();
    let a = lease(&url, "lead-a", Duration::from_millis(1));
    let mut store_a = open(&url, &a);
    // A's lease has expired: B takes it over, at the next epoch.
    let b = lease(&url, "lead-b", Duration::from_secs(60));
    assert_eq!(b.epoch, a.epoch + 1);
    let request = |id: &str| {
        Change::Team(TeamChange::Request(Box::new(conformance::request(
            id,
            Status::Pending,
        ))))
    };
    let err = store_a.commit(&[request("r-from-a")]).expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced(_)), "{err}");
    assert!(
        err.to_string()
            .contains("lease lost: lead-a no longer leads"),
        "{err}"
    );
    let mut store_b = open(&url, &b);
    store_b.commit(&[request("r-from-b")]).expect("b commits");
    let ids: Vec<String> = store_b
        .load()
        .expect("load")
        .requests
        .iter()
        .map(|r| r.opening.id.as_str().to_owned())
        .collect();
    assert_eq!(ids, ["r-from-b"], "nothing of A's after the takeover");
    assert_eq!(
        server.psql(&url, "SELECT holder, epoch FROM lease"),
        format!("lead-b|{}\n", b.epoch)
    );
}

#[test]
fn the_same_lead_restarting_takes_its_lease_back_at_once() {
    let server = PgServer::start();
    let url = server.database();
    let first = lease(&url, "lead-a", Duration::from_secs(60));
    let again = lease(&url, "lead-a", Duration::from_secs(60));
    assert_eq!(
        again.epoch,
        first.epoch + 1,
        "a new epoch fences the old process"
    );
    let target = PgTarget::parse("url", &url).expect("url");
    let held = runtime().block_on(async {
        let other = Lease::connect(&target, "lead-b", "http://b", Duration::from_secs(60))
            .await
            .expect("connect");
        let taken = other.try_acquire().await.expect("try");
        (taken, other.leader().await.expect("leader"))
    });
    assert_eq!(held.0, None, "another lead waits while the lease is held");
    assert_eq!(held.1.holder, "lead-a");
    assert!(!held.1.expired);
}

#[test]
fn a_database_that_is_not_a_mesh_database_is_refused() {
    let server = PgServer::start();
    let url = server.database();
    server.psql(&url, "CREATE TABLE orders (id int)");
    let target = PgTarget::parse("url", &url).expect("url");
    let err = runtime()
        .block_on(Lease::connect(
            &target,
            "lead-a",
            "http://a",
            Duration::from_secs(1),
        ))
        .expect_err("not empty");
    assert!(err.to_string().contains("no mesh meta"), "{err}");
}

#[test]
fn a_database_of_an_older_schema_is_upgraded_and_a_newer_one_refused() {
    let server = PgServer::start();
    let url = server.database();
    let target = PgTarget::parse("url", &url).expect("url");
    let connect = || {
        runtime().block_on(Lease::connect(
            &target,
            "lead-a",
            "http://a",
            Duration::from_secs(1),
        ))
    };
    connect().expect("a new database");
    // What schema 1 was: no console in the lease.
    server.psql(
        &url,
        "ALTER TABLE lease DROP COLUMN console; ALTER TABLE members DROP COLUMN sandbox; \
         ALTER TABLE members DROP COLUMN decoding; \
         UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    );
    connect().expect("schema 1, upgraded");
    assert_eq!(
        server.psql(&url, "SELECT value FROM meta WHERE key = 'schema_version'"),
        "4\n"
    );
    assert_eq!(server.psql(&url, "SELECT console FROM lease"), "\n");
    // Written by a newer lead: refused, and left as it is.
    server.psql(
        &url,
        "UPDATE meta SET value = '9' WHERE key = 'schema_version'",
    );
    let err = connect().expect_err("a newer schema");
    assert!(err.to_string().contains("schema version 9"), "{err}");
    assert_eq!(
        server.psql(&url, "SELECT value FROM meta WHERE key = 'schema_version'"),
        "9\n"
    );
}

#[tokio::test]
async fn the_lead_reaches_its_database_over_tls_when_the_url_asks_and_checks_its_certificate() {
    let pki = mesh_tests::pki::Pki::new();
    let server = PgServer::start_tls(&pki.cert("server"), &pki.key("server"));
    let name = server.new_database();
    // The real lead, told to verify the server against the CA.
    let url = server.tcp_url(&name, "verify-full", Some(&pki.cert("ca")));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lead = mesh_tests::Lead::start_in(
        dir,
        "127.0.0.1:0",
        shared::auth::new_token(),
        shared::auth::new_token(),
        &["--http", "off", "--store", &url],
    )
    .await;
    lead.says("leading (epoch 1)").await;
    let mut operator = lead.operator().await;
    operator
        .create_task(shared::pb::CreateTaskRequest {
            subject: "over TLS".into(),
            ..Default::default()
        })
        .await
        .expect("CreateTask");
    assert_eq!(
        server.psql(&server.url(&name), "SELECT count(*) FROM tasks"),
        "1\n"
    );
    assert_eq!(
        server.psql(
            &server.url(&name),
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE ssl AND datname = current_database()"
        )
        .trim()
        .parse::<u32>()
        .map(|n| n >= 1),
        Ok(true),
        "the lead's connections are TLS"
    );

    // A server the CA did not sign, and a client that does not ask for TLS,
    // are refused, each saying why.
    let refused = |url: String| async move {
        let target = PgTarget::parse("url", &url).expect("url");
        Lease::connect(&target, "x", "http://x", Duration::from_secs(1))
            .await
            .expect_err("refused")
            .to_string()
    };
    let untrusted =
        refused(server.tcp_url(&name, "verify-full", Some(&pki.cert("other-ca")))).await;
    assert!(
        untrusted.to_lowercase().contains("certificate"),
        "{untrusted}"
    );
    let plain = refused(server.tcp_url(&name, "disable", None)).await;
    println!("an untrusted server: {untrusted}\nwithout TLS: {plain}");
    assert!(
        plain.contains("no encryption") || plain.contains("pg_hba"),
        "{plain}"
    );
}
