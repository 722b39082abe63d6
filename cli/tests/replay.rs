//! `mote replay`: a journal written through a running `mote run` host is replayed by the
//! binary to several events, each answering with the state it had then; the file is never
//! written, and a file the host holds, an event past the end and an unknown id are one-line
//! errors.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// How long the host may take to come up or to shut down.
const PATIENCE: Duration = Duration::from_secs(60);

fn mote(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run mote")
}

/// Runs `mote` and returns its stdout, failing the test if it failed.
fn mote_ok(dir: &Path, args: &[&str]) -> String {
    let out = mote(dir, args);
    assert!(
        out.status.success(),
        "mote {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `mote: error:` line of a failed run.
fn error_line(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find(|l| l.starts_with("mote: error:"))
        .unwrap_or_else(|| panic!("no error line in {err}"))
        .to_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mote-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Kills the host if the test ends before it stopped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Host {
    /// Stops the host with SIGTERM (a graceful shutdown) and waits for it to exit cleanly.
    fn stop(mut self) {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                assert!(status.success(), "the host exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "the host did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Postcard of `Journal::Append(v)` for a small `v`.
fn append(v: u8) -> String {
    format!("00{v:02x}")
}

#[test]
fn replay_shows_a_journal_at_each_event_and_never_writes_the_file() {
    let dir = scratch("replay");
    let journal = mote_test_programs::path("journal").expect("example actors are built");
    let manifest = dir.join("journal.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[module]]\nname = \"journal\"\npath = {journal:?}\n\n\
             [[actor]]\npath = \"/user/j\"\nmodule = \"journal\"\ninit = \"3\"\n"
        ),
    )
    .unwrap();
    let socket = dir.join("mote.sock");
    let socket = socket.to_str().unwrap();
    let host = Host(
        Command::new(env!("CARGO_BIN_EXE_mote"))
            .current_dir(&dir)
            .args(["run", "journal.toml", "--db", "j.redb", "--control", socket])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start mote run"),
    );
    let deadline = Instant::now() + PATIENCE;
    while !mote(&dir, &["tree", "--control", socket]).status.success() {
        assert!(Instant::now() < deadline, "the host did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    for v in [10, 20, 30, 40, 50, 60, 70] {
        mote_ok(
            &dir,
            &[
                "send",
                "/user/j",
                "Journal",
                "--hex",
                &append(v),
                "--control",
                socket,
            ],
        );
    }
    // The query comes after the appends: they are all committed when it is answered.
    let answer = mote_ok(
        &dir,
        &[
            "ask",
            "/user/j",
            "Journal",
            "--hex",
            "01",
            "--control",
            socket,
        ],
    );
    assert!(answer.contains("body=070a141e28323c46"), "{answer}");

    let line = error_line(&mote(
        &dir,
        &["replay", "journal:/user/j", "--db", "j.redb"],
    ));
    assert!(
        line.contains("in use by a running host: stop the host"),
        "{line}"
    );
    host.stop();

    let db = dir.join("j.redb");
    let before = std::fs::read(&db).unwrap();
    let out = mote_ok(&dir, &["replay", "journal:/user/j", "--db", "j.redb"]);
    assert!(out.contains("journal:/user/j: journal@0 sha256:"), "{out}");
    assert!(
        out.contains("recovered to event 7 of 7 from the snapshot at event 6; 1 event read"),
        "{out}"
    );
    // JournalState { values, recovered_from_snapshot, replayed } in postcard, at each event.
    for (until, recovered, state) in [
        (
            "0",
            "from the first event (the snapshot at event 6 is later); 0 events read",
            "000000",
        ),
        (
            "4",
            "from the first event (the snapshot at event 6 is later); 4 events read",
            "040a141e280004",
        ),
        (
            "6",
            "from the snapshot at event 6; 0 events read",
            "060a141e28323c0100",
        ),
        (
            "7",
            "from the snapshot at event 6; 1 event read",
            "070a141e28323c460101",
        ),
    ] {
        let args = [
            "replay",
            "journal:/user/j",
            "--until",
            until,
            "--ask",
            "Journal",
            "--hex",
            "01",
            "--db",
            "j.redb",
        ];
        let out = mote_ok(&dir, &args);
        assert!(
            out.contains(&format!("recovered to event {until} of 7 {recovered}")),
            "{out}"
        );
        assert!(
            out.contains(&format!("reply kind=JournalState hex={state}")),
            "{out}"
        );
    }
    // An append in the sandbox is dropped, not written.
    let out = mote_ok(
        &dir,
        &[
            "replay",
            "journal:/user/j",
            "--ask",
            "Journal",
            "--hex",
            &append(80),
            "--db",
            "j.redb",
        ],
    );
    assert!(
        out.contains("no reply") && out.contains("dropped, never released: 1 event"),
        "{out}"
    );

    let line = error_line(&mote(
        &dir,
        &[
            "replay",
            "journal:/user/j",
            "--until",
            "9",
            "--db",
            "j.redb",
        ],
    ));
    assert!(
        line.contains("has events up to 7; there is no event 9"),
        "{line}"
    );
    let line = error_line(&mote(
        &dir,
        &["replay", "journal:/user/x", "--db", "j.redb"],
    ));
    assert!(
        line.contains("no durable state under persistence id \"journal:/user/x\"")
            && line.contains("ids there: journal:/user/j"),
        "{line}"
    );
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the file was never written"
    );
}
