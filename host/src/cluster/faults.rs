//! Fault points: places in the cluster's protocols where a node can be made to stop, so that a
//! crash test kills it (`kill -9`) at a known moment instead of a lucky one.
//!
//! A node whose environment has `MOTE_FAULT=<point>[,<point>...]` stops at each of those points
//! it reaches: it logs `fault point reached` (a warning naming the point) and waits until the
//! file `<point>` appears in the directory `MOTE_FAULT_RELEASE` names, which it then deletes
//! and goes on; without that variable it waits for good. Without `MOTE_FAULT`, a point costs
//! one branch. The points: `move-captured` (a source, its actor captured, nothing stored
//! yet), `move-stored` (a source, the image and the move's record stored, the target not yet
//! asked), `move-restoring` (a target, everything arrived, about to restore).
//!
//! Invariants:
//! - A point that is not armed never waits, and is never logged.
//! - A release file lets one wait go: the next time the point is reached it waits again.

use std::path::PathBuf;
use std::time::Duration;

/// The fault points armed in this process.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    armed: Vec<String>,
    release: Option<PathBuf>,
}

impl Faults {
    /// The points the environment arms (`MOTE_FAULT`, `MOTE_FAULT_RELEASE`).
    pub(crate) fn from_env() -> Self {
        let armed = std::env::var("MOTE_FAULT")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let release = std::env::var_os("MOTE_FAULT_RELEASE").map(PathBuf::from);
        Faults { armed, release }
    }

    /// Whether `point` is armed.
    pub(crate) fn armed(&self, point: &str) -> bool {
        !self.armed.is_empty() && self.armed.iter().any(|p| p == point)
    }

    /// Waits at `point` if it is armed, until it is released (see the module's doc).
    pub(crate) async fn reached(&self, point: &str) {
        if !self.armed(point) {
            return;
        }
        tracing::warn!(point, "fault point reached");
        loop {
            if let Some(dir) = &self.release {
                let file = dir.join(point);
                if std::fs::remove_file(&file).is_ok() {
                    tracing::warn!(point, "fault point released");
                    return;
                }
            }
            // A test hook polled from the host's side: the test creates the file when it wants
            // the node to go on.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unarmed_point_passes_and_an_armed_one_waits_for_its_release_each_time() {
        let dir = std::env::temp_dir().join(format!("mote-faults-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let faults = Faults {
            armed: vec!["b".into()],
            release: Some(dir.clone()),
        };
        faults.reached("a").await;
        assert!(!faults.armed("a") && faults.armed("b"));
        for _ in 0..2 {
            let waiting = faults.reached("b");
            tokio::pin!(waiting);
            assert!(
                tokio::time::timeout(Duration::from_millis(100), &mut waiting)
                    .await
                    .is_err(),
                "an armed point waits"
            );
            std::fs::write(dir.join("b"), b"").unwrap();
            tokio::time::timeout(Duration::from_secs(10), waiting)
                .await
                .expect("released");
            assert!(!dir.join("b").exists(), "a release lets one wait go");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
