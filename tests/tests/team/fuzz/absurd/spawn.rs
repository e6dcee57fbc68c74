//! SpawnTeammate: refused before anything starts, or `/bin/true` started (it
//! exits at once), never a real teammate.

use std::path::Path;

use mesh_core::limits;
use mesh_tests::Lead;
use shared::pb;

use super::Absurd;
use crate::fuzz::pools::{around, names, weird_some};

/// The teammate every request names: it exits at once.
const TRUE_BIN: &str = "/bin/true";

/// Builds spawn requests: `sp{n}` for the `n`th, with the script and
/// [`TRUE_BIN`], then edited.
struct Spawner {
    script: String,
    built: usize,
}

impl Spawner {
    fn spawn(&mut self, edit: &dyn Fn(&mut pb::SpawnTeammateRequest)) -> pb::SpawnTeammateRequest {
        self.built += 1;
        let mut request = pb::SpawnTeammateRequest {
            name: format!("sp{}", self.built),
            role: "r".into(),
            script_path: self.script.clone(),
            teammate_bin: TRUE_BIN.to_owned(),
            ..Default::default()
        };
        edit(&mut request);
        request
    }
}

/// A request for a model teammate rather than a scripted one.
fn model(request: &mut pb::SpawnTeammateRequest) {
    request.script_path = String::new();
    request.model = "m".into();
    request.task = "t".into();
}

/// Requests with absurd names, roles, scripts, binaries and workspaces.
fn scripted(lead: &Lead, spawner: &mut Spawner) -> Vec<pb::SpawnTeammateRequest> {
    let script = spawner.script.clone();
    let plain = lead.dir.path().join("plain.txt");
    std::fs::write(&plain, "not a program\n").expect("write");
    let plain = plain.display().to_string();
    let inside = |name: &str| lead.dir.path().join("ws").join(name).display().to_string();
    let mut spawn = |edit: &dyn Fn(&mut pb::SpawnTeammateRequest)| spawner.spawn(edit);
    let mut spawns = vec![
        spawn(&|r| *r = pb::SpawnTeammateRequest::default()),
        spawn(&|r| r.role = String::new()),
        spawn(&|r| r.script_path = String::new()),
        spawn(&|r| r.model = "m".into()),
        spawn(&|r| r.name = "alice".into()),
    ];
    for name in names() {
        spawns.push(spawn(&|r| r.name = name.clone()));
    }
    for role in weird_some()
        .into_iter()
        .chain(around(limits::ROLE))
        .chain(std::iter::once("r".repeat(200_000)))
    {
        spawns.push(spawn(&|r| r.role = role.clone()));
    }
    let mut paths = weird_some();
    paths.extend([
        "/nonexistent".to_owned(),
        "/etc".to_owned(),
        "/etc/passwd".to_owned(),
        "/dev/null".to_owned(),
        format!("{script}\0"),
        "x".repeat(limits::PATH + 1),
        format!("/{}", "p".repeat(100_000)),
    ]);
    for path in &paths {
        spawns.push(spawn(&|r| r.script_path = path.clone()));
        if path.contains("..") || !path.starts_with('/') {
            // A relative or escaping binary path is only looked up, but
            // keep the lead's working directory out of it.
            continue;
        }
        spawns.push(spawn(&|r| r.teammate_bin = path.clone()));
    }
    spawns.push(spawn(&|r| r.teammate_bin = plain.clone()));
    for workspace in [
        format!("{}\0", inside("nul")),
        format!("{plain}/below-a-file"),
        inside(&"w".repeat(300)),
        inside("\u{202E}rtl"),
        inside("🦀 \t\x01"),
    ] {
        spawns.push(spawn(&|r| r.workspace = workspace.clone()));
    }
    spawns
}

/// Model teammates with absurd models, tasks, URLs and key variables.
fn modelled(spawner: &mut Spawner) -> Vec<pb::SpawnTeammateRequest> {
    let mut spawn = |edit: &dyn Fn(&mut pb::SpawnTeammateRequest)| spawner.spawn(edit);
    let mut spawns = Vec::new();
    for value in weird_some()
        .into_iter()
        .chain(around(limits::ROLE))
        .filter(|v| !v.starts_with('-'))
    {
        spawns.push(spawn(&|r| {
            model(r);
            r.model = value.clone();
        }));
    }
    for task_ in weird_some().into_iter().chain(around(limits::TEXT)) {
        spawns.push(spawn(&|r| {
            model(r);
            r.task = task_.clone();
        }));
    }
    for url in weird_some().into_iter().chain([
        "ftp://x".to_owned(),
        "http://".to_owned(),
        "http://\0".to_owned(),
        format!("https://{}", "h".repeat(limits::PATH)),
    ]) {
        spawns.push(spawn(&|r| {
            model(r);
            r.base_url = url.clone();
        }));
    }
    for var in weird_some().into_iter().chain([
        "1X".to_owned(),
        "A-B".to_owned(),
        "PATH".to_owned(),
        "A".repeat(limits::TOOL + 1),
    ]) {
        spawns.push(spawn(&|r| {
            model(r);
            r.api_key_env = var.clone();
        }));
    }
    spawns
}

impl Absurd {
    /// SpawnTeammate, scripted and modelled, each request absurd in one way.
    pub(super) async fn spawn_teammate(&mut self) {
        let script = self
            .lead
            .script("absurd-script", "# never read: the teammate is /bin/true\n");
        let mut spawner = Spawner {
            script: script.display().to_string(),
            built: 0,
        };
        let mut spawns = scripted(&self.lead, &mut spawner);
        spawns.extend(modelled(&mut spawner));
        self.spawned = spawner.built;
        if Path::new(TRUE_BIN).is_file() {
            for request in spawns {
                call!(
                    self.report,
                    "SpawnTeammate",
                    self.op,
                    spawn_teammate,
                    request
                );
            }
        } else {
            println!("absurd: no /bin/true here; SpawnTeammate is left out");
        }
        self.report.section("SpawnTeammate");
    }
}
