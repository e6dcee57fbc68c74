//! A real PostgreSQL server for the tests, from Debian's `postgresql`
//! package: `initdb` into a temporary directory (as the unprivileged
//! `postgres` user when the tests run as root, since PostgreSQL refuses
//! root), `pg_ctl` on a Unix socket in that directory and no TCP at all
//! (or, from [`PgServer::start_tls`], TLS only on a loopback port beside it),
//! stopped when the value drops. `tests/run` installs the package.

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicU32, Ordering},
};

/// A running server.
#[derive(Debug)]
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    /// Whether the server flushes its log to the disk (the benchmark's)
    /// or not (the tests', which kill leads, not the machine).
    fsync: bool,
    /// The loopback port it also serves TLS on (and only TLS), if it does.
    tls_port: Option<u16>,
}

/// Where Debian keeps the server's programs (not on PATH): `MESH_PG_BINDIR`,
/// else the newest `/usr/lib/postgresql/*/bin`.
fn bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MESH_PG_BINDIR") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!("no PostgreSQL server found under /usr/lib/postgresql; run tests/run, which installs Debian's postgresql package")
    })
}

/// The `postgres` user's uid and gid when this process is root.
fn owner() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> u32 {
        let out = Command::new("id").args(args).output().expect("id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the postgres user (Debian's postgresql package creates it)")
    };
    if id(&["-u"]) != 0 {
        return None;
    }
    Some((id(&["-u", "postgres"]), id(&["-g", "postgres"])))
}

impl PgServer {
    /// A new cluster, started, with `mesh` as its superuser (trust auth on
    /// its socket only), without fsync.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A new cluster that flushes each commit to the disk, as a production
    /// server does: for measuring.
    pub fn start_durable() -> Self {
        Self::start_with(true)
    }

    /// A new cluster that also listens on a loopback port where it speaks
    /// TLS only, with the certificate `cert` and key `key` (PEM files);
    /// the Unix socket stays as it is.
    pub fn start_tls(cert: &Path, key: &Path) -> Self {
        let mut server = Self::init(false);
        for (from, to) in [(cert, "server.crt"), (key, "server.key")] {
            let to = server.data().join(to);
            std::fs::copy(from, &to).expect("copy the certificate");
            std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .expect("chmod");
            if let Some((uid, gid)) = server.owner {
                std::os::unix::fs::chown(&to, Some(uid), Some(gid)).expect("chown");
            }
        }
        // TCP only with TLS; the socket as before.
        std::fs::write(
            server.data().join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .expect("pg_hba.conf");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        server.tls_port = Some(port);
        server.pg_ctl(&["start"]);
        server
    }

    /// The URL of database `name` over TCP, with `sslmode` (and the CA file
    /// `ca`, if given): on a server of [`PgServer::start_tls`].
    pub fn tcp_url(&self, name: &str, sslmode: &str, ca: Option<&Path>) -> String {
        let port = self.tls_port.expect("a server started with start_tls");
        let mut url = format!("postgres://mesh@localhost:{port}/{name}?sslmode={sslmode}");
        if let Some(ca) = ca {
            url.push_str(&format!("&sslrootcert={}", ca.display()));
        }
        url
    }

    fn start_with(fsync: bool) -> Self {
        let server = Self::init(fsync);
        server.pg_ctl(&["start"]);
        server
    }

    /// A new cluster, not started.
    fn init(fsync: bool) -> Self {
        let bin = bindir();
        let owner = owner();
        let dir = tempfile::Builder::new()
            .prefix("mesh-pg.")
            .tempdir_in("/tmp")
            .expect("tempdir");
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        }
        let server = Self {
            dir,
            bin,
            owner,
            fsync,
            tls_port: None,
        };
        server.run(
            "initdb",
            &[
                "-D",
                &server.data().display().to_string(),
                "-U",
                "mesh",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
        );
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The directory of the server's socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        let mut command = Command::new(self.bin.join(program));
        command.args(args).current_dir(self.dir.path());
        if let Some((uid, gid)) = self.owner {
            command.uid(uid).gid(gid);
        }
        let out = command
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `pg_ctl ACTION` with the options every start uses: the socket in the
    /// temporary directory, no TCP.
    pub fn pg_ctl(&self, action: &[&str]) {
        let listen = match self.tls_port {
            None => "-c listen_addresses=''".to_owned(),
            Some(port) => format!(
                "-c listen_addresses=127.0.0.1 -p {port} -c ssl=on \
                 -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
            ),
        };
        let options = format!(
            "{listen} -k {} -c fsync={} -c shared_buffers=16MB -c max_connections=60",
            self.socket_dir().display(),
            if self.fsync { "on" } else { "off" }
        );
        let data = self.data().display().to_string();
        let log = self.dir.path().join("log").display().to_string();
        let mut args = vec!["-D", &data, "-l", &log, "-w", "-t", "60", "-o", &options];
        args.extend_from_slice(action);
        self.run("pg_ctl", &args);
    }

    /// Restarts the server at once (`pg_ctl restart -m fast`).
    pub fn restart(&self) {
        self.pg_ctl(&["-m", "fast", "restart"]);
    }

    /// A new, empty database: its URL.
    pub fn database(&self) -> String {
        self.url(&self.new_database())
    }

    /// A new, empty database: its name.
    pub fn new_database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.sql("postgres", &format!("CREATE DATABASE {name}"));
        name
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://mesh@/{name}?host={}&port={}",
            self.socket_dir().display(),
            self.port()
        )
    }

    /// The port (which names the Unix socket too).
    fn port(&self) -> u16 {
        self.tls_port.unwrap_or(5432)
    }

    /// Runs `sql` on the database at `url` with psql: its output, one row a
    /// line, columns split by `|`.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let db = url
            .split_once("@/")
            .and_then(|(_, rest)| rest.split('?').next())
            .expect("a database in the URL");
        self.sql(db, sql)
    }

    /// Runs `sql` on database `db` with psql: its output.
    fn sql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(self.socket_dir())
            .args(["-p", &self.port().to_string()])
            .args(["-U", "mesh", "-d", db, "-v", "ON_ERROR_STOP=1", "-Atc", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let mut command = Command::new(self.bin.join("pg_ctl"));
        command.args(["-D", &data, "-w", "-m", "immediate", "stop"]);
        if let Some((uid, gid)) = self.owner {
            command.uid(uid).gid(gid);
        }
        let _ = command.output();
    }
}
