//! End-to-end: the page at `/` in a real headless browser (Debian's chromium, driven through
//! chromedriver's WebDriver API). The page loads with the key, shows the upstream server,
//! shows a call made through MCP in its live feed, and its status filter works. A
//! screenshot is saved under `target/` and its path printed.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, call, config_with, connect, stdio_fixture};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The browser and its driver, or `None` with a note when they are not installed, unless
/// `MCPPROXY_REQUIRE_BROWSER` is set (as in CI).
pub(crate) fn browser_installed() -> bool {
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return true;
    }
    assert!(
        std::env::var_os("MCPPROXY_REQUIRE_BROWSER").is_none(),
        "{CHROMIUM} and {CHROMEDRIVER} are required: apt-get install chromium chromium-driver"
    );
    eprintln!(
        "skipped: no {CHROMIUM} or {CHROMEDRIVER} (apt-get install chromium chromium-driver)"
    );
    false
}

pub(crate) struct Driver {
    child: Child,
    base: String,
    session: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    /// Ends the WebDriver session first (chromedriver then closes the browser, which
    /// killing chromedriver alone leaves running), then chromedriver.
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = end_session(&self.base, &self.session);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `DELETE /session/ID` over a plain blocking connection (`Drop` cannot await), waiting up
/// to 10 s for chromedriver's answer, which comes once the browser has quit.
fn end_session(base: &str, session: &str) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "DELETE /session/{session} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(())
}

impl Driver {
    pub(crate) async fn start(profile: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        crate::support::poll::until("chromedriver starts", Duration::from_secs(30), || async {
            let status = http.get(format!("{base}/status")).send().await;
            status.map(drop).map_err(|e| e.to_string())
        })
        .await;
        let mut driver = Self {
            child,
            base,
            session: String::new(),
            http,
        };
        let profile = profile.display().to_string();
        let created = driver
            .post(
                "/session",
                json!({"capabilities": {"alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--disable-quic", "--no-first-run", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync",
                            "--window-size=1280,1000", format!("--user-data-dir={profile}"),
                        ]
                    }
                }}}),
            )
            .await;
        driver.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        driver
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> Value {
        let url = if self.session.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let answer: Value = self
            .http
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["value"].clone()
    }

    /// Opens `proxy`'s page, logged in with its API key.
    pub(crate) async fn open_page(&self, proxy: &Proxy) {
        let url = format!("{}/#key={}", proxy.base(), proxy.api_key());
        self.post("/url", json!({ "url": url })).await;
    }

    pub(crate) async fn script(&self, script: &str) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// Polls `script` until `done` accepts its answer; panics with the last answer after
    /// 20 s.
    pub(crate) async fn wait_for(&self, script: &str, done: impl Fn(&Value) -> bool) -> Value {
        crate::support::poll::until_value(
            &format!("the page's answer to {script}"),
            Duration::from_secs(20),
            || async {
                let answer = self.script(script).await;
                if done(&answer) {
                    Ok(answer)
                } else {
                    Err(format!("the page shows {answer}"))
                }
            },
        )
        .await
    }

    pub(crate) async fn screenshot(&self, to: &Path) {
        let png = self
            .http
            .get(format!("{}/session/{}/screenshot", self.base, self.session))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        let bytes = base64_decode(png["value"].as_str().expect("screenshot data"));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
}

/// Standard base64, as WebDriver sends screenshots.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = text
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let v: Vec<u32> = chunk.iter().map(|c| u32::from(value(*c))).collect();
        let n = v.iter().fold(0u32, |acc, x| (acc << 6) | x) << (6 * (4 - v.len()));
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&got[..v.len() - 1]);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_shows_servers_a_live_call_and_filters() {
    if !browser_installed() {
        return;
    }
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let key = std::fs::read_to_string(proxy.data_dir.path().join("api_key")).unwrap();
    let base = proxy.url.trim_end_matches("/mcp").to_owned();
    let profile = tempfile::tempdir().unwrap();
    let driver = Driver::start(profile.path()).await;

    driver
        .post(
            "/url",
            json!({"url": format!("{base}/#key={}", key.trim())}),
        )
        .await;
    // The key is taken from the address and the page connects: the server is listed.
    let servers = driver
        .wait_for(
            "return document.querySelector('#upstreams tbody').innerText",
            |t| {
                t.as_str()
                    .is_some_and(|t| t.contains("fx") && t.contains("ready"))
            },
        )
        .await;
    assert!(servers.as_str().unwrap().contains("trusted"), "{servers}");
    assert!(
        servers.as_str().unwrap().contains("on (network none, "),
        "the server's sandbox: {servers}"
    );
    // What the sandbox granted without the config naming it (the fixture's binary), and
    // what the config grants.
    assert!(
        servers.as_str().unwrap().contains(" (inferred), writes "),
        "the server's sandbox: {servers}"
    );
    assert_eq!(
        driver.script("return location.hash").await,
        "",
        "the key does not stay in the address"
    );

    // A call made through MCP shows in the live feed.
    let client = connect(&proxy.url).await;
    call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "hello page"}}),
    )
    .await
    .unwrap();
    let started = Instant::now();
    driver
        .wait_for(
            "return document.querySelector('#feed tbody').innerText",
            |t| {
                t.as_str()
                    .is_some_and(|t| t.contains("echo") && t.contains("success"))
            },
        )
        .await;
    eprintln!("the call showed in the page after {:?}", started.elapsed());

    // The status filter: only blocked calls, and a new blocked one arrives live.
    driver
        .script(
            "const s = document.getElementById('f-status'); s.value = 'blocked'; \
             s.dispatchEvent(new Event('change')); return true",
        )
        .await;
    driver
        .wait_for(
            "return document.querySelector('#feed tbody').innerText",
            |t| t.as_str().is_some_and(|t| !t.contains("echo")),
        )
        .await;
    call(
        &client,
        "call_tool_read",
        json!({"name": "fx:delete_note", "args": {"id": "n"}}),
    )
    .await
    .unwrap();
    let feed = driver
        .wait_for(
            "return document.querySelector('#feed tbody').innerText",
            |t| t.as_str().is_some_and(|t| t.contains("delete_note")),
        )
        .await;
    let feed = feed.as_str().unwrap();
    assert!(feed.contains("blocked") && !feed.contains("echo"), "{feed}");
    client.cancel().await.unwrap();

    // A record's detail.
    driver
        .script("document.querySelector('#feed tbody tr').click(); return true")
        .await;
    let detail = driver
        .wait_for(
            "return document.getElementById('detail-json').textContent",
            |t| {
                t.as_str()
                    .is_some_and(|t| t.contains("\"tool_name\": \"delete_note\""))
            },
        )
        .await;
    assert!(
        detail.as_str().unwrap().contains("marked destructive"),
        "{detail}"
    );

    // Beside the binaries under test, in the target dir, never in the source tree.
    let shots = Path::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .parent()
        .and_then(Path::parent)
        .expect("the binary is in target/<profile>/")
        .join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("web-page.png");
    driver.screenshot(&shot).await;
    println!("screenshot: {}", shot.canonicalize().unwrap().display());
    assert!(std::fs::metadata(&shot).unwrap().len() > 1000);
}

/// The page, its script and its style sheet, fetched from a real `mcpproxy serve`, carry
/// the Content-Security-Policy docs/security.md and docs/rest-api.md promise: only this
/// origin's script, style and API, no inline script, nothing from another origin, no
/// framing; and `nosniff`.
#[tokio::test(flavor = "multi_thread")]
async fn the_page_is_served_under_its_content_security_policy() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    for path in ["/", "/ui/app.js", "/ui/app.css"] {
        let response = reqwest::get(format!("{}{path}", proxy.base()))
            .await
            .expect("GET the page");
        assert_eq!(response.status(), 200, "{path}");
        let policies: Vec<String> = response
            .headers()
            .get_all("content-security-policy")
            .iter()
            .map(|v| v.to_str().expect("ASCII").to_owned())
            .collect();
        assert_eq!(policies.len(), 1, "{path}: {policies:?}");
        let directives: std::collections::BTreeMap<String, Vec<String>> = policies[0]
            .split(';')
            .filter_map(|d| {
                let mut words = d.split_whitespace().map(str::to_owned);
                Some((words.next()?.to_ascii_lowercase(), words.collect()))
            })
            .collect();
        let sources = |name: &str| -> Vec<&str> {
            directives
                .get(name)
                .unwrap_or_else(|| panic!("{path}: no {name} in {policies:?}"))
                .iter()
                .map(String::as_str)
                .collect()
        };
        assert_eq!(sources("default-src"), ["'none'"], "{path}");
        assert_eq!(
            sources("script-src"),
            ["'self'"],
            "{path}: no inline script"
        );
        assert_eq!(sources("style-src"), ["'self'"], "{path}");
        assert_eq!(
            sources("connect-src"),
            ["'self'"],
            "{path}: only its own API"
        );
        assert_eq!(sources("frame-ancestors"), ["'none'"], "{path}");
        assert_eq!(sources("base-uri"), ["'none'"], "{path}");
        // Nothing from another origin, and nothing that would run inline code.
        for (name, list) in &directives {
            for source in list {
                assert!(
                    ["'self'", "'none'"].contains(&source.as_str())
                        || (name == "img-src" && source == "data:"),
                    "{path}: {name} allows {source}: {policies:?}"
                );
            }
        }
        assert_eq!(
            response
                .headers()
                .get("x-content-type-options")
                .and_then(|v| v.to_str().ok()),
            Some("nosniff"),
            "{path}"
        );
    }
}
