//! `mote run --otlp`: the host exports a span per handled message to a collector, and the spans
//! still queued when it exits are sent before it does.

use std::path::PathBuf;
use std::process::Command;

use mote_tests::collector::{Collector, ExportedSpan};

/// A fresh directory for one run's manifest and database.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mote-cli-traces-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_otlp_exports_one_trace_for_a_game_of_ping_pong() {
    let collector = Collector::start().await;
    let dir = scratch("pingpong");
    let manifest = dir.join("pingpong.toml");
    let pingpong = mote_test_programs::path("pingpong").expect("example actors are built");
    std::fs::write(
        &manifest,
        format!(
            "[[module]]\nname = \"pingpong\"\npath = {pingpong:?}\n\n\
             [[actor]]\npath = \"/user/pong\"\nmodule = \"pingpong\"\ninit = \"pong\"\n\n\
             [[actor]]\npath = \"/user/ping\"\nmodule = \"pingpong\"\ninit = \"ping /user/pong 20\"\n"
        ),
    )
    .unwrap();
    let endpoint = collector.endpoint();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_mote"))
            .current_dir(&dir)
            .args(["run", manifest.to_str().unwrap(), "--otlp", &endpoint])
            .args(["--control", "mote.sock"])
            .output()
            .expect("run mote")
    })
    .await
    .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(!log.contains("mote: warning"), "{log}");

    // Sent at exit: the run is shorter than a batch's delay.
    let game = |spans: &Vec<ExportedSpan>| -> Vec<ExportedSpan> {
        spans
            .iter()
            .filter(|s| matches!(s.actor(), "/user/ping" | "/user/pong"))
            .cloned()
            .collect()
    };
    // 20 pings and the final Done at pong, 20 pongs at ping.
    collector
        .wait_for("41 spans of the game", |spans| game(spans).len() == 41)
        .await;
    let spans = game(&collector.spans());
    let roots: Vec<_> = spans.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(
        roots.len(),
        1,
        "the first ping, sent at start, starts the one trace"
    );
    assert_eq!(roots[0].actor(), "/user/pong");
    for span in &spans {
        assert_eq!(span.trace_id, roots[0].trace_id, "{span:#?}");
        if let Some(parent) = span.parent {
            let parent = spans.iter().find(|s| s.span_id == parent).unwrap();
            assert_ne!(
                parent.actor(),
                span.actor(),
                "each ball comes from the other side"
            );
        }
    }
}
