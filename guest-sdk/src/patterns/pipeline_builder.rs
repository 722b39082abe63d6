//! `pipeline-builder`: Dust's PipelineBuilderServiceActor, which makes pipelines dynamically.
//! A [`Build`] request names a pipeline and gives its configuration (the fields of a
//! [`pipeline::Config`](super::pipeline::Config)); the builder spawns a `pipeline` child of
//! that name, waits until it answers (its stages started), and replies [`Built`] with its
//! path, or [`Refused`] with the reason (a stage module that is not deployed, say). Its
//! pipelines live as long as it does, or until [`TearDown`].
//!
//! Init: [`Config`] as JSON (empty: the defaults). Control kinds: [`Build`] (replied with
//! [`Built`] or [`Refused`]), [`TearDown`] (replied with [`TornDown`]), [`List`] (replied with
//! [`Pipelines`]). Other kinds are rejected.

use serde::{Deserialize, Serialize};

use super::pipeline;
pub use super::supervision::{OnFailure, Supervision};

/// The module name of the component (`builtin = "pipeline-builder"`).
pub const MODULE: &str = "pipeline-builder";

/// The builder's configuration, its spawn `init` (JSON; empty means `{}`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The module its pipelines run (default `pipeline`).
    #[serde(default = "pipeline_module")]
    pub module: String,
    /// Pipelines at once (default 100); past it a build is refused.
    #[serde(default = "max_pipelines")]
    pub max_pipelines: u32,
    /// How long a new pipeline may take to answer before the build is refused (default
    /// 5000 ms).
    #[serde(default = "ready_timeout_ms")]
    pub ready_timeout_ms: u64,
    /// How a built pipeline that fails is supervised (default `restart`: its stages start
    /// afresh). A pipeline that fails before it answered is stopped and its build refused.
    #[serde(default)]
    pub strategy: Supervision,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            module: pipeline_module(),
            max_pipelines: max_pipelines(),
            ready_timeout_ms: ready_timeout_ms(),
            strategy: Supervision::default(),
        }
    }
}

fn pipeline_module() -> String {
    pipeline::MODULE.to_string()
}

fn max_pipelines() -> u32 {
    100
}

fn ready_timeout_ms() -> u64 {
    5000
}

/// Builds a pipeline (kind `pipeline-builder.build`): `{"name": n, "stages": [...], ...}`, the
/// name beside the pipeline's configuration fields.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Build {
    /// The pipeline's name: the builder's child, `<builder path>/<name>`.
    pub name: String,
    /// The pipeline's configuration.
    #[serde(flatten)]
    pub pipeline: pipeline::Config,
}

/// A pipeline was built and answers (kind `pipeline-builder.built`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// Its name.
    pub name: String,
    /// Its absolute path: send inputs there.
    pub path: String,
}

/// A build that did not happen (kind `pipeline-builder.refused`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The pipeline's name.
    pub name: String,
    /// Why: the name is taken, too many pipelines, or the pipeline failed to start.
    pub reason: String,
}

/// Stops a pipeline and forgets it (kind `pipeline-builder.tear-down`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TearDown {
    /// The pipeline's name.
    pub name: String,
}

/// The answer to [`TearDown`] (kind `pipeline-builder.torn-down`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TornDown {
    /// The pipeline's name.
    pub name: String,
    /// Whether the builder had such a pipeline.
    pub existed: bool,
}

/// Asks for the [`Pipelines`] (kind `pipeline-builder.list`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct List {}

/// The built pipelines' names, sorted (kind `pipeline-builder.pipelines`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Pipelines {
    /// Their names.
    pub pipelines: Vec<String>,
}

crate::json_message!(
    Config = "pipeline-builder.config",
    Build = "pipeline-builder.build",
    Built = "pipeline-builder.built",
    Refused = "pipeline-builder.refused",
    TearDown = "pipeline-builder.tear-down",
    TornDown = "pipeline-builder.torn-down",
    List = "pipeline-builder.list",
    Pipelines = "pipeline-builder.pipelines",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::pipeline::Stage;

    #[test]
    fn a_build_is_a_name_beside_a_pipeline_configuration() {
        let build = Build {
            name: "p".into(),
            pipeline: pipeline::Config::of([Stage::new("upper", "")]),
        };
        let text = serde_json::to_string(&build).unwrap();
        assert!(text.starts_with(r#"{"name":"p","stages":[{"module":"upper","init":""}]"#));
        assert_eq!(serde_json::from_str::<Build>(&text).unwrap(), build);
        let short: Build =
            serde_json::from_str(r#"{"name": "q", "stages": [{"module": "m"}], "sink": "/x"}"#)
                .unwrap();
        assert_eq!(short.pipeline.sink.as_deref(), Some("/x"));
        assert_eq!(short.pipeline.max_in_flight, 1000);
    }
}
