//! The dashboard of `mote run --http`, in a real headless Chromium driven over WebDriver: the
//! page shows a live actor, a message sent from its form reaches the actor, and the actor's
//! count changes on the page. Also `/metrics`, the token, and the refusal of a non-loopback
//! bind without one.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); without them the
//! test fails and names the command that installs them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::{ClientBuilder, Locator};

const PATIENCE: Duration = Duration::from_secs(60);
const INSTALL: &str = "apt-get install -y chromium chromium-driver";

/// Kills a child process when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mote-dash-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn example(name: &str) -> PathBuf {
    mote_test_programs::path(name).expect("example actors are built")
}

/// Starts `mote run` with `args` in `dir`, and waits for the dashboard URL it prints.
fn host(dir: &Path, manifest: &str, args: &[&str]) -> (Killed, String) {
    let path = dir.join("app.toml");
    std::fs::write(&path, manifest).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(dir)
        .args(["run", path.to_str().unwrap(), "--control", "mote.sock"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mote run");
    let stdout = child.stdout.take().unwrap();
    let child = Killed(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("dashboard: ") {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx
        .recv_timeout(PATIENCE)
        .expect("mote run prints the dashboard URL");
    (child, url)
}

/// A plain HTTP/1.1 GET of `path` on `addr`: the status code and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the dashboard");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// `host:port` of a URL like `http://127.0.0.1:9100/?token=x`.
fn authority(url: &str) -> &str {
    url.trim_start_matches("http://").split('/').next().unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts chromedriver on a free port and waits until it accepts connections.
fn chromedriver(dir: &Path) -> (Killed, String) {
    for tool in ["chromium", "chromedriver"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(found, "{tool} is not installed; install it with: {INSTALL}");
    }
    let port = free_port();
    let driver = Killed(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .arg(format!(
                "--log-path={}",
                dir.join("chromedriver.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start chromedriver ({e}); install it with: {INSTALL}")
            }),
    );
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (driver, format!("http://127.0.0.1:{port}"))
}

const MANIFEST_MODULES: &str = "[[module]]\nname = \"counter\"\npath = {counter:?}\n\n\
     [[module]]\nname = \"crasher\"\npath = {crasher:?}\n\n\
     [[module]]\nname = \"supervisor\"\npath = {supervisor:?}\n\n\
     [[module]]\nname = \"ticker\"\npath = {ticker:?}\n\n\
     [[actor]]\npath = \"/user/counter\"\nmodule = \"counter\"\n\n\
     [[actor]]\npath = \"/user/sup\"\nmodule = \"supervisor\"\n\
     init = \"one restart 3 60000 2 crasher /user/sink\"\n\n\
     [[actor]]\npath = \"/user/ticker\"\nmodule = \"ticker\"\ninit = \"/user/sink\"\n";

fn manifest() -> String {
    MANIFEST_MODULES
        .replace("{counter:?}", &format!("{:?}", example("counter")))
        .replace("{crasher:?}", &format!("{:?}", example("crasher")))
        .replace("{supervisor:?}", &format!("{:?}", example("supervisor")))
        .replace("{ticker:?}", &format!("{:?}", example("ticker")))
}

/// Runs `mote <args>` against the host in `dir`; fails the test if it fails.
fn mote(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(dir)
        .args(args)
        .args(["--control", "mote.sock"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_an_actor_sends_it_a_message_and_sees_its_count_change() {
    let dir = scratch("browser");
    let (running, url) = host(&dir, &manifest(), &["--http", "127.0.0.1:0"]);
    let addr = authority(&url).to_owned();

    // Something to see: a timer firing at a path with no actor (dead letters), and a child's
    // crash, restarted by its supervisor.
    // Timer::Every { period_ms: 200, tag: 1 } and Crash::Panic, in postcard.
    mote(
        &dir,
        &["send", "/user/ticker", "Timer", "--hex", "01c80101"],
    );
    mote(&dir, &["send", "/user/sup/c1", "Crash", "--hex", "00"]);

    let (driver, webdriver) = chromedriver(&dir);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--window-size=1400,820",
                format!("--user-data-dir={}", dir.join("chromium").display()),
            ]
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&webdriver)
        .await
        .unwrap_or_else(|e| {
            panic!("cannot start chromium through chromedriver ({e}); install: {INSTALL}")
        });
    let outcome = drive(&client, &url).await;
    // Close the browser whatever happened, then report.
    client.close().await.ok();
    outcome.unwrap();

    // The form's message reached the actor: Counter::Get ([1]) answers Value(5) ([2, 5]).
    let reply = mote(&dir, &["ask", "/user/counter", "Counter", "--hex", "01"]);
    assert!(reply.contains("body=0205"), "{reply}");

    // /metrics is there, in the OpenMetrics text format.
    let (status, metrics) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("mote_module_messages_received_total{module=\"counter\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("mote_module_restarts_total{module=\"crasher\"} 1"),
        "{metrics}"
    );
    drop((driver, running));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the browser does; an error names the step.
async fn drive(client: &fantoccini::Client, url: &str) -> Result<(), String> {
    let step = |what: &'static str| move |e: fantoccini::error::CmdError| format!("{what}: {e}");
    client.goto(url).await.map_err(step("open the page"))?;
    let row = r#"tr[data-path="/user/counter"]"#;
    client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(row))
        .await
        .map_err(step("the counter appears"))?;
    let received = format!("{row} td.received");
    let before = text(client, &received).await?;
    assert_eq!(before, "0", "nothing sent to the counter yet");

    // Counter::Add(5) is postcard [0, 5].
    let to = client
        .find(Locator::Id("send-to"))
        .await
        .map_err(step("to"))?;
    to.clear().await.map_err(step("clear to"))?;
    to.send_keys("/user/counter")
        .await
        .map_err(step("type to"))?;
    let kind = client
        .find(Locator::Id("send-kind"))
        .await
        .map_err(step("kind"))?;
    kind.send_keys("Counter").await.map_err(step("type kind"))?;
    let encoding = client
        .find(Locator::Id("send-encoding"))
        .await
        .map_err(step("encoding"))?;
    encoding
        .select_by_value("hex")
        .await
        .map_err(step("choose hex"))?;
    let body = client
        .find(Locator::Id("send-body"))
        .await
        .map_err(step("body"))?;
    body.send_keys("0005").await.map_err(step("type body"))?;
    client
        .find(Locator::Id("send-button"))
        .await
        .map_err(step("button"))?
        .click()
        .await
        .map_err(step("click send"))?;

    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = text(client, "#send-status").await?;
        let now = text(client, &received).await?;
        if now == "1" && status == "sent Counter to /user/counter" {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("count {now:?}, status {status:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The crash reached the feed, and the crasher shows its restart.
    let restarts = text(client, r#"tr[data-path="/user/sup/c1"] td.restarts"#).await?;
    let feed = text(client, "#feed").await?;
    if restarts != "1" || !feed.contains("/user/sup/c1") || !feed.contains("dead letter Report") {
        return Err(format!("restarts {restarts:?}, feed {feed:?}"));
    }
    // Show the counter's detail in the screenshot.
    // A click through script, for the same reason `text` reads through script.
    client
        .execute(
            "document.querySelector(arguments[0]).click();",
            vec![serde_json::json!(row)],
        )
        .await
        .map_err(step("select the counter"))?;
    client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#detail dd"))
        .await
        .map_err(step("the detail"))?;
    let png = client.screenshot().await.map_err(step("screenshot"))?;
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&shot, png).map_err(|e| format!("save {}: {e}", shot.display()))?;
    Ok(())
}

/// The rendered text of the first element matching `css`, read in one round trip: the page
/// re-renders its tables every second, so a found element can go stale before a second
/// WebDriver call reads it.
async fn text(client: &fantoccini::Client, css: &str) -> Result<String, String> {
    let got = client
        .execute(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;",
            vec![serde_json::json!(css)],
        )
        .await
        .map_err(|e| format!("text of {css}: {e}"))?;
    match got {
        serde_json::Value::String(s) => Ok(s.trim().to_owned()),
        _ => Err(format!("find {css}: no such element")),
    }
}

#[test]
fn a_token_guards_the_dashboard_and_a_public_bind_needs_one() {
    let dir = scratch("token");
    let (running, url) = host(
        &dir,
        &manifest(),
        &["--http", "127.0.0.1:0", "--http-token", "s3cret"],
    );
    assert!(url.ends_with("/?token=s3cret"), "{url}");
    let addr = authority(&url);
    assert_eq!(get(addr, "/metrics").0, 401);
    assert_eq!(get(addr, "/api/state?token=wrong").0, 401);
    let (status, state) = get(addr, "/api/state?token=s3cret");
    assert_eq!(status, 200);
    assert!(state.contains("\"/user/counter\""), "{state}");
    assert_eq!(get(addr, "/?token=s3cret").0, 200);

    let public = Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(&dir)
        .args([
            "run",
            "app.toml",
            "--control",
            "public.sock",
            "--db",
            "public.redb",
        ])
        .args(["--http", "0.0.0.0:0"])
        .env_remove("MOTE_HTTP_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&public.stderr);
    assert!(!public.status.success());
    assert!(
        err.contains("not loopback") && err.contains("--http-token"),
        "{err}"
    );
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}
