//! The notify file: what it accepts, and errors that name the sink, route
//! or key and its line.

#![allow(clippy::unwrap_used)]

use mesh_notify::{Config, ConfigError};

fn env(name: &str) -> Option<String> {
    match name {
        "MESH_HOOK_SECRET" => Some("from the environment".into()),
        "MESH_SMTP_PASSWORD" => Some("hunter2".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse_with_env(text, &env)
}

fn refused(text: &str) -> ConfigError {
    parse(text).expect_err("the file should be refused")
}

const FULL: &str = r#"
[[sink]]
name = "hooks"
kind = "webhook"
url = "https://example.com/mesh"
secret_env = "MESH_HOOK_SECRET"
secret = "in the file"

[[sink]]
name = "slack"
kind = "slack"
url = "https://hooks.slack.com/services/T000/B000/XXXX"
timeout = "3s"

[[sink]]
name = "mail"
kind = "smtp"
server = "smtp.example.com:587"
from = "mesh <mesh@example.com>"
tls = "starttls"
username = "mesh"
password_env = "MESH_SMTP_PASSWORD"

[people]
"@dba" = ["dba@example.com", "Dana <dana@example.com>"]
carol = "carol@example.com"

[[route]]
kinds = ["plan", "permission"]
paths = ["db/**"]
owners = ["@dba"]
sinks = ["hooks", "mail"]

[[route]]
sinks = ["slack"]
after = "30m"
"#;

#[test]
fn the_documented_file_is_accepted() {
    let config = parse(FULL).unwrap();
    assert_eq!(
        config.sink_names().collect::<Vec<_>>(),
        ["hooks", "slack", "mail"]
    );
    assert_eq!(config.route_count(), 2);
    // Secrets are not printed.
    let shown = format!("{config:?}");
    for secret in ["from the environment", "in the file", "hunter2", "XXXX"] {
        assert!(!shown.contains(secret), "{secret:?} shown in {shown}");
    }
}

#[test]
fn the_crate_docs_file_is_accepted() {
    // The example in the crate's documentation, as written there.
    let docs = include_str!("../src/lib.rs");
    let start = docs.find("//! ```toml\n").unwrap() + "//! ```toml\n".len();
    let end = start + docs[start..].find("//! ```\n").unwrap();
    let text: String = docs[start..end]
        .lines()
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    parse(&text).unwrap();
}

#[test]
fn the_environments_secret_wins_and_secret_is_the_fallback() {
    let file = |env_var: &str, secret: &str| {
        format!(
            "[[sink]]\nname = \"h\"\nkind = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\n\
             secret_env = \"{env_var}\"\n{secret}\n[[route]]\nsinks = [\"h\"]\n"
        )
    };
    parse(&file("MESH_HOOK_SECRET", "")).unwrap();
    parse(&file("UNSET", "secret = \"fallback\"")).unwrap();
    parse(&file("EMPTY", "secret = \"fallback\"")).unwrap();
    let e = refused(&file("UNSET", ""));
    assert_eq!(e.line, Some(5), "{e}");
    assert!(
        e.message.contains("sink \"h\"") && e.message.contains("UNSET"),
        "{e}"
    );
}

/// `text`'s error, expected on `line` and to say each of `words`.
fn assert_refused(text: &str, line: usize, words: &[&str]) {
    let e = refused(text);
    assert_eq!(e.line, Some(line), "{e}");
    let shown = e.to_string();
    assert!(shown.starts_with(&format!("line {line}: ")), "{shown}");
    for word in words {
        assert!(shown.contains(word), "{shown:?} should say {word:?}");
    }
}

#[test]
fn errors_name_the_key_the_sink_or_route_and_the_line() {
    let sink = "[[sink]]\nname = \"h\"\nkind = \"webhook\"\nurl = \"https://example.com/\"\n";
    let route = "[[route]]\nsinks = [\"h\"]\n";
    assert_refused(&format!("{sink}colour = \"red\"\n{route}"), 5, &["colour"]);
    assert_refused(
        &format!("{sink}server = \"x\"\n{route}"),
        5,
        &["sink \"h\"", "`server`"],
    );
    assert_refused(
        "[[sink]]\nname = \"h\"\nkind = \"pager\"\n[[route]]\nsinks = [\"h\"]\n",
        3,
        &["sink \"h\"", "pager"],
    );
    assert_refused(
        &format!("{sink}[[route]]\nsinks = [\"h\", \"nope\"]\n"),
        6,
        &["route 1", "\"nope\""],
    );
    assert_refused(
        &format!("{sink}{route}[[route]]\nkinds = [\"plans\"]\nsinks = [\"h\"]\n"),
        8,
        &["route 2", "\"plans\""],
    );
    assert_refused(
        &format!("{sink}[[route]]\nsinks = [\"h\"]\nafter = \"soon\"\n"),
        7,
        &["route 1", "after", "soon"],
    );
    assert_refused(
        &format!("{sink}[[route]]\nsinks = [\"h\"]\nafter = \"0s\"\n"),
        7,
        &["route 1", "after"],
    );
    assert_refused(
        &format!("{sink}[[route]]\npaths = [\"db/[\"]\nsinks = [\"h\"]\n"),
        6,
        &["route 1", "db/["],
    );
    assert_refused(
        &format!("{sink}{sink}{route}"),
        5,
        &["\"h\"", "twice", "line 1"],
    );
    assert_refused(
        &format!("{sink}{route}[people]\ncarol = \"not an address\"\n"),
        8,
        &["carol"],
    );
    assert_refused(
        &format!("{sink}{route}[[route]]\nsinks = \"h\"\n"),
        8,
        &["sinks"],
    );
    assert_refused("[[sink]]\nname = \"h\"\nkind = 3\n", 3, &["kind"]);
}

#[test]
fn nothing_leaves_the_machine_in_the_clear() {
    let route = "[[route]]\nsinks = [\"s\"]\n";
    assert_refused(
        &format!("[[sink]]\nname = \"s\"\nkind = \"slack\"\nurl = \"http://hooks.example.com/x\"\n{route}"),
        4,
        &["sink \"s\"", "https"],
    );
    parse(&format!(
        "[[sink]]\nname = \"s\"\nkind = \"slack\"\nurl = \"http://[::1]:8080/x\"\n{route}"
    ))
    .unwrap();
    let mail = |server: &str| {
        format!(
            "[[sink]]\nname = \"s\"\nkind = \"smtp\"\nserver = \"{server}\"\nfrom = \"m@example.com\"\n\
             tls = \"none\"\nto = [\"ops@example.com\"]\n{route}"
        )
    };
    parse(&mail("127.0.0.1:2525")).unwrap();
    parse(&mail("localhost")).unwrap();
    assert_refused(
        &mail("smtp.example.com:25"),
        4,
        &["sink \"s\"", "none", "loopback"],
    );
}

#[test]
fn a_mail_sink_needs_someone_to_write_to() {
    let text = "[[sink]]\nname = \"m\"\nkind = \"smtp\"\nserver = \"localhost:25\"\n\
                from = \"m@example.com\"\ntls = \"none\"\n[[route]]\nsinks = [\"m\"]\n";
    assert_refused(text, 1, &["sink \"m\"", "no one"]);
    parse(&format!("{text}[people]\ncarol = \"carol@example.com\"\n")).unwrap();
}

#[test]
fn credentials_come_in_pairs_and_from_the_environment() {
    let mail = |extra: &str| {
        format!(
            "[[sink]]\nname = \"m\"\nkind = \"smtp\"\nserver = \"smtp.example.com\"\n\
             from = \"m@example.com\"\nto = [\"ops@example.com\"]\n{extra}\n\
             [[route]]\nsinks = [\"m\"]\n"
        )
    };
    parse(&mail(
        "username = \"u\"\npassword_env = \"MESH_SMTP_PASSWORD\"",
    ))
    .unwrap();
    assert_refused(&mail("username = \"u\""), 7, &["password_env"]);
    assert_refused(
        &mail("username = \"u\"\npassword_env = \"UNSET\""),
        8,
        &["UNSET"],
    );
}

#[test]
fn a_file_without_routes_is_refused_and_load_names_the_file() {
    let e = refused("[[sink]]\nname = \"h\"\nkind = \"webhook\"\nurl = \"https://example.com/\"\n");
    assert!(e.message.contains("no [[route]]"), "{e}");

    let dir = std::env::temp_dir().join(format!("mesh-notify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notify.toml");
    std::fs::write(&path, "[[sink]]\nname = 1\n").unwrap();
    let e = Config::load(&path).expect_err("refused");
    assert_eq!((e.file.as_deref(), e.line), (Some(path.as_path()), Some(2)));
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2: ", path.display())),
        "{e}"
    );
    let e = Config::load(dir.join("missing.toml")).expect_err("refused");
    assert!(
        e.to_string().contains("missing.toml: cannot read it"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn toml_errors_name_the_table_and_the_key() {
    let sink = "[[sink]]\nname = \"h\"\nkind = \"webhook\"\nurl = \"https://example.com/\"\n";
    for (text, shown) in [
        (
            format!("{sink}[[route]]\nsinks = [\"h\"]\n[[route]]\nsinks = \"h\"\n"),
            "line 8: route 2: `sinks`: invalid type: string \"h\", expected a sequence",
        ),
        (
            format!("{sink}timeout = 10\n[[route]]\nsinks = [\"h\"]\n"),
            "line 5: sink 1: `timeout`: invalid type: integer `10`, expected a string",
        ),
    ] {
        assert_eq!(refused(&text).to_string(), shown);
    }
}
