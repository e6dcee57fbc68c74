//! Just enough of the W3C WebDriver protocol to drive headless Chromium
//! through `chromedriver` (Debian's `chromium` and `chromium-driver`).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use base64::Engine;
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// The key WebDriver names elements by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for the page lasts before the test fails.
const WAIT: Duration = Duration::from_secs(20);

/// A chromedriver process and one browser session in it. Dropped, it
/// kills chromedriver's process group, Chromium with it: a test that ends
/// without [`Browser::quit`] (or fails) leaves no browser running.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    session: String,
}

/// An element of the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session,
    /// its window `width` x `height`.
    pub async fn start(width: u32, height: u32) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(which("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group, which Chromium's processes join.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver (Debian: apt-get install chromium chromium-driver)");
        let http = http_client(reqwest::Client::builder());
        let base = format!("http://127.0.0.1:{port}");
        // chromedriver says when it is ready.
        let ready = Instant::now();
        loop {
            let status = http.get(format!("{base}/status")).send().await;
            if let Ok(response) = status {
                let body: Value = response.json().await.unwrap_or_default();
                if body["value"]["ready"] == true {
                    break;
                }
            }
            assert!(ready.elapsed() < WAIT, "chromedriver did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            // The browser's console, for script_errors.
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": which("chromium"),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", format!("--window-size={width},{height}")],
            },
        }}});
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("json");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Browser {
            driver,
            http,
            session: format!("{base}/session/{session}"),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response: Value = request
            .send()
            .await
            .expect("webdriver call")
            .json()
            .await
            .expect("json");
        response["value"].clone()
    }

    /// Opens `url`.
    pub async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// The elements `css` selects now.
    pub async fn all(&self, css: &str) -> Vec<Element> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|id| Element(id.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until `css` selects an element whose text contains `text`.
    pub async fn wait_for(&self, css: &str, text: &str) -> Element {
        let start = Instant::now();
        loop {
            for element in self.all(css).await {
                if self.text(&element).await.contains(text) {
                    return element;
                }
            }
            assert!(
                start.elapsed() < WAIT,
                "no {css:?} with {text:?} appeared; the page says:\n{}",
                self.page_text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The first element `css` selects within `parent`.
    pub async fn within(&self, parent: &Element, css: &str) -> Element {
        let found = self
            .call(
                reqwest::Method::POST,
                &format!("/element/{}/element", parent.0),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        Element(
            found[ELEMENT]
                .as_str()
                .unwrap_or_else(|| panic!("no {css:?}: {found}"))
                .to_owned(),
        )
    }

    /// The element's visible text.
    pub async fn text(&self, element: &Element) -> String {
        self.call(
            reqwest::Method::GET,
            &format!("/element/{}/text", element.0),
            None,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// The whole page's text.
    pub async fn page_text(&self) -> String {
        match self.all("body").await.first() {
            Some(body) => self.text(body).await,
            None => String::new(),
        }
    }

    /// Types `text` into the element (after clearing it).
    pub async fn type_into(&self, element: &Element, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/clear", element.0),
            Some(json!({})),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/value", element.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Presses `key` on the keyboard (WebDriver actions: down, then up), as
    /// a person would, wherever the focus is.
    pub async fn press(&self, key: &str) {
        let actions = json!({ "actions": [{
            "type": "key", "id": "keyboard",
            "actions": [{ "type": "keyDown", "value": key }, { "type": "keyUp", "value": key }],
        }]});
        self.call(reqwest::Method::POST, "/actions", Some(actions))
            .await;
    }

    /// Clicks the element.
    pub async fn click(&self, element: &Element) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{}/click", element.0),
            Some(json!({})),
        )
        .await;
    }

    /// Saves a screenshot of the window as a PNG at `path`.
    pub async fn screenshot(&self, path: &Path) {
        let shot = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().unwrap_or_default())
            .expect("a base64 screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("screenshot dir");
        }
        std::fs::write(path, png).expect("write screenshot");
    }

    /// Scrolls the element `css` selects to the top of the window.
    pub async fn scroll_to(&self, css: &str) {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({
                "script": "document.querySelector(arguments[0]).scrollIntoView({block: 'start'});",
                "args": [css],
            })),
        )
        .await;
    }

    /// Types `token` into the console's login form (the page open) and waits
    /// until the console is live.
    pub async fn log_in(&self, token: &str) {
        let field = self.wait_for("#token", "").await;
        self.type_into(&field, token).await;
        self.click(&self.wait_for("#login", "Log in").await).await;
        self.wait_for("#live", "live").await;
    }

    /// Runs `script` in the page with `args` (elements as [`Browser::arg`]);
    /// what it returns.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// An element as an argument of [`Browser::execute`].
    pub fn arg(element: &Element) -> Value {
        json!({ ELEMENT: element.0 })
    }

    /// An element's DOM property (`value` of an input), as a string; empty
    /// when the element is gone from the page.
    pub async fn property(&self, element: &Element, name: &str) -> String {
        self.call(
            reqwest::Method::GET,
            &format!("/element/{}/property/{name}", element.0),
            None,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// What the page's console said at level SEVERE since the last call:
    /// uncaught errors, rejected promises nobody caught, resources that did
    /// not load (chromedriver's log of the browser).
    pub async fn script_errors(&self) -> Vec<String> {
        let entries = self
            .call(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({ "type": "browser" })),
            )
            .await;
        entries
            .as_array()
            .unwrap_or_else(|| panic!("chromedriver gave no browser log: {entries}"))
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Lets the page show notifications, as a person who clicked "Allow"
    /// (WebDriver's permissions extension).
    pub async fn allow_notifications(&self) {
        let answer = self
            .call(
                reqwest::Method::POST,
                "/permissions",
                Some(json!({ "descriptor": { "name": "notifications" }, "state": "granted" })),
            )
            .await;
        assert!(
            answer.is_null(),
            "chromedriver refused the permission: {answer}"
        );
    }

    /// Fails on any script error the page logged, and on a page wider
    /// than the window; then the screenshot `NAME-WIDTH.png` under
    /// [`shots`].
    pub async fn clean_shot(&self, name: &str, width: u32) {
        let errors = self.script_errors().await;
        assert!(errors.is_empty(), "{name} at {width} px: {errors:?}");
        assert!(
            self.sideways().await <= 0,
            "{name} scrolls sideways at {width} px"
        );
        self.screenshot(&shots().join(format!("{name}-{width}.png")))
            .await;
    }

    /// How far the page is wider than its window (0: it does not scroll
    /// sideways).
    pub async fn sideways(&self) -> i64 {
        match self
            .execute(
                "return document.documentElement.scrollWidth - window.innerWidth;",
                vec![],
            )
            .await
        {
            Value::Number(n) => n.as_i64().unwrap_or(i64::MAX),
            other => panic!("the script answered {other}"),
        }
    }

    /// The value of the page's cookie `name`, HttpOnly ones too (WebDriver's
    /// Get Named Cookie), if the browser holds it.
    pub async fn cookie(&self, name: &str) -> Option<String> {
        let cookie = self
            .call(reqwest::Method::GET, &format!("/cookie/{name}"), None)
            .await;
        cookie["value"].as_str().map(str::to_owned)
    }

    /// Ends the session: Chromium exits, then chromedriver goes with this.
    pub async fn quit(self) {
        self.call(reqwest::Method::DELETE, "", None).await;
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.driver.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// An HTTP client from `builder` (reqwest here needs rustls's one crypto
/// provider installed first, though the tests speak plain HTTP).
pub fn http_client(builder: reqwest::ClientBuilder) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    builder.build().expect("an HTTP client")
}

/// The path of `program` on PATH, or the name itself.
fn which(program: &str) -> String {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
        })
        .map_or_else(|| program.to_owned(), |p| p.display().to_string())
}

/// Where the console's screenshots go: `target/console-shots/`.
pub fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-shots");
    std::fs::create_dir_all(&dir).expect("make target/console-shots");
    dir
}
