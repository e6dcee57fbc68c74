//! A real OTLP/gRPC receiver for the telemetry tests: `tests/otlp/receiver.py`
//! (the collector's side of the protocol, from the `opentelemetry-proto`
//! package), run as its own process; what it received is read back from
//! the JSON lines it writes.

use std::{path::PathBuf, process::Stdio};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

/// One span as the receiver got it.
#[derive(Debug, Clone)]
pub struct Span {
    pub service: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Value,
    pub events: Vec<String>,
    /// 0 unset, 1 ok, 2 error.
    pub status: i64,
}

impl Span {
    /// Attribute `key`, if it is there.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    /// Attribute `key` as text ("" when absent).
    pub fn text(&self, key: &str) -> String {
        match self.attributes.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }

    /// Its length in milliseconds.
    pub fn millis(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e6
    }
}

/// The receiver process.
pub struct Receiver {
    child: Child,
    out: PathBuf,
    _dir: tempfile::TempDir,
    /// Where to export: `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Receiver {
    /// Starts the receiver; returns once it listens.
    pub async fn start() -> Receiver {
        let python = crate::python();
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("received.jsonl");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("otlp/receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(&out)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OTLP receiver");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = crate::within("the OTLP receiver to listen", lines.next_line())
            .await
            .expect("read the receiver's stdout")
            .expect("the receiver printed nothing");
        let port = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected receiver output: {line}"));
        Receiver {
            child,
            out,
            _dir: dir,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Everything received so far.
    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.lines()
            .into_iter()
            .filter(|l| l["type"] == "span")
            .map(|l| Span {
                service: l["service"].as_str().unwrap_or_default().to_owned(),
                trace_id: l["trace_id"].as_str().unwrap_or_default().to_owned(),
                span_id: l["span_id"].as_str().unwrap_or_default().to_owned(),
                parent_span_id: l["parent_span_id"].as_str().unwrap_or_default().to_owned(),
                name: l["name"].as_str().unwrap_or_default().to_owned(),
                start_ns: l["start_ns"].as_u64().unwrap_or_default(),
                end_ns: l["end_ns"].as_u64().unwrap_or_default(),
                attributes: l["attributes"].clone(),
                events: l["events"]
                    .as_array()
                    .map(|e| {
                        e.iter()
                            .filter_map(|e| e.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                status: l["status"].as_i64().unwrap_or_default(),
            })
            .collect()
    }

    /// Every metric export received so far: (service, name, points).
    pub fn metrics(&self) -> Vec<(String, String, Vec<Value>)> {
        self.lines()
            .into_iter()
            .filter(|l| l["type"] == "metric")
            .map(|l| {
                (
                    l["service"].as_str().unwrap_or_default().to_owned(),
                    l["name"].as_str().unwrap_or_default().to_owned(),
                    l["points"].as_array().cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Stops the receiver.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The spans of one trace as an indented tree, each with its service and
/// length: what a trace viewer would draw.
pub fn tree(spans: &[Span], trace_id: &str) -> String {
    let mut of_trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace_id).collect();
    of_trace.sort_by_key(|s| s.start_ns);
    let ids: std::collections::HashSet<&str> =
        of_trace.iter().map(|s| s.span_id.as_str()).collect();
    let mut out = String::new();
    let roots: Vec<&Span> = of_trace
        .iter()
        .copied()
        .filter(|s| !ids.contains(s.parent_span_id.as_str()))
        .collect();
    let start = of_trace.first().map_or(0, |s| s.start_ns);
    fn walk(out: &mut String, span: &Span, all: &[&Span], depth: usize, start: u64) {
        out.push_str(&format!(
            "{:indent$}{} [{}] +{:.1}ms {:.1}ms span={} parent={}\n",
            "",
            span.name,
            span.service,
            span.start_ns.saturating_sub(start) as f64 / 1e6,
            span.millis(),
            &span.span_id,
            if span.parent_span_id.is_empty() {
                "-"
            } else {
                &span.parent_span_id
            },
            indent = depth * 2
        ));
        for child in all.iter().filter(|c| c.parent_span_id == span.span_id) {
            walk(out, child, all, depth + 1, start);
        }
    }
    for root in roots {
        walk(&mut out, root, &of_trace, 0, start);
    }
    out
}
