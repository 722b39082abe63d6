//! `pipeline`: Dust's PipelineActor (the Unix `A | B | C` of actors). Its stages are its
//! children `stage-0` .. `stage-<n-1>`, spawned from the modules [`Config::stages`] names;
//! every message that enters it goes through them in order, and the last stage's output goes
//! back to the original sender (Dust's `ReturnableMsg`), or to [`Config::sink`].
//!
//! # The stage protocol (any language)
//!
//! A stage is an ordinary actor that REPLIES to what it receives: the pipeline asks stage `k`
//! with a message (kind `K`, body `B`), and the one reply it gets (kind `K'`, body `B'`, sent
//! to the sender of the request as any reply is: `ctx.reply`, `mote.reply`, `reply()`) is the
//! message it asks stage `k+1` with. The last stage's reply is the pipeline's output, passed
//! on untouched. Kinds and bodies are the stages' business: the pipeline never reads them
//! (JSON is the natural choice when stages are in different languages). Two reply kinds are
//! the pipeline's:
//! - [`DropInput`] (`pipeline.drop`, any body): the input ends here, nothing is returned (Dust
//!   drops a final message that is not returnable; a filter stage drops what it rejects);
//! - [`Failed`] (`pipeline.failed`): the input fails at this stage (a nested pipeline used as
//!   a stage answers so).
//!
//! A stage that fails while handling an input (a trap, an error) fails that input; one that
//! does not reply within [`Config::stage_timeout_ms`] (measured from the request, queueing
//! included) fails it too. Either way the original sender gets [`Failed`] (`stage`, `reason`)
//! instead of an output, and later inputs go on: a failed stage is restarted (or resumed, as
//! [`Config::strategy`] says) with its mailbox. Failures are pinned on the stage's oldest
//! unanswered input, which is exact for a stage that answers its inputs in arrival order
//! before handling the next (any actor that replies from its handler does).
//!
//! Init: [`Config`] as JSON. Control kinds: [`GetStatus`] (replied with [`Status`]). Every
//! other kind is an input.

use serde::{Deserialize, Serialize};

pub use super::supervision::{OnFailure, Supervision};

/// The module name of the component (`builtin = "pipeline"`).
pub const MODULE: &str = "pipeline";

/// One stage: a module and the init its instance is spawned with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// The deployed module the stage runs.
    pub module: String,
    /// Its init: a JSON string is passed as its text, `null` as nothing, any other JSON value
    /// as its JSON text (default `null`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub init: serde_json::Value,
}

impl Stage {
    /// A stage of `module` spawned with `init` as text.
    pub fn new(module: impl Into<String>, init: impl Into<String>) -> Self {
        Stage {
            module: module.into(),
            init: serde_json::Value::String(init.into()),
        }
    }

    /// A stage of `module` spawned with `init` as JSON text.
    pub fn json(module: impl Into<String>, init: serde_json::Value) -> Self {
        Stage {
            module: module.into(),
            init,
        }
    }

    /// The init bytes the stage is spawned with.
    pub fn init_bytes(&self) -> Vec<u8> {
        super::supervision::init_bytes(&self.init)
    }
}

/// The pipeline's configuration, its spawn `init` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The stages, in order (at least 1, at most [`MAX_STAGES`]).
    pub stages: Vec<Stage>,
    /// Where outputs go instead of the original sender: an absolute or relative path
    /// (default none). Failures still go to the original sender (to the sink if it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    /// How long one stage may take to answer one input, queueing included (default 5000 ms).
    #[serde(default = "stage_timeout_ms")]
    pub stage_timeout_ms: u64,
    /// Inputs held at once, from entry until their output leaves (default 1000); past it an
    /// input is a dead letter (`rejected`).
    #[serde(default = "max_in_flight")]
    pub max_in_flight: u32,
    /// How a failed stage is supervised (default `restart`, 3 restarts in 10 s: one more fails
    /// the pipeline).
    #[serde(default)]
    pub strategy: Supervision,
}

impl Config {
    /// A pipeline of these stages with the default timeout, bound and strategy.
    pub fn of(stages: impl IntoIterator<Item = Stage>) -> Self {
        Config {
            stages: stages.into_iter().collect(),
            sink: None,
            stage_timeout_ms: stage_timeout_ms(),
            max_in_flight: max_in_flight(),
            strategy: Supervision::default(),
        }
    }
}

/// The most stages a pipeline has.
pub const MAX_STAGES: usize = 64;

fn stage_timeout_ms() -> u64 {
    5000
}

fn max_in_flight() -> u32 {
    1000
}

/// Asks for a [`Status`] (kind `pipeline.get-status`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct GetStatus {}

/// How the pipeline is doing (kind `pipeline.status`), the reply to [`GetStatus`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// The number of stages.
    pub stages: u32,
    /// Inputs held now (in a stage, or done and waiting for an earlier one).
    pub in_flight: u32,
    /// Inputs whose output left so far.
    pub completed: u64,
    /// Inputs that failed so far (each answered with [`Failed`]).
    pub failed: u64,
    /// Inputs a stage dropped so far ([`DropInput`]).
    pub dropped: u64,
    /// Inputs refused so far (too many in flight): each became a dead letter.
    pub refused: u64,
}

/// An input failed at a stage (kind `pipeline.failed`): what the original sender gets instead
/// of an output. A stage may reply with it too (only `reason` is needed) to fail its input.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The input's number, from 1, in the order the pipeline took inputs.
    #[serde(default)]
    pub input: u64,
    /// The stage it failed at, from 0.
    #[serde(default)]
    pub stage: u32,
    /// Why: the stage's failure, a timeout, or a nested pipeline's reason.
    pub reason: String,
}

/// A stage's reply that ends an input without output (kind `pipeline.drop`; any body).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct DropInput {}

/// The pipeline's note to itself that a stage failed (kind `pipeline.stage-failed`); from
/// anyone else it is rejected.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StageFailed {
    /// The stage, from 0.
    pub stage: u32,
    /// The failure, in words.
    pub reason: String,
}

crate::json_message!(
    Config = "pipeline.config",
    GetStatus = "pipeline.get-status",
    Status = "pipeline.status",
    Failed = "pipeline.failed",
    DropInput = "pipeline.drop",
    StageFailed = "pipeline.stage-failed",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    #[test]
    fn a_configuration_needs_only_its_stages() {
        let config: Config = serde_json::from_str(
            r#"{"stages": [{"module": "stage", "init": {"add": 1}}, {"module": "upper"}]}"#,
        )
        .unwrap();
        assert_eq!(config.stages[0].init_bytes(), br#"{"add":1}"#);
        assert_eq!(config.stages[1].init_bytes(), b"");
        assert_eq!(config.stage_timeout_ms, 5000);
        assert_eq!(config.max_in_flight, 1000);
        assert_eq!(config.strategy, Supervision::default());
        assert_eq!(config.sink, None);
        let text = serde_json::to_string(&config).unwrap();
        assert_eq!(serde_json::from_str::<Config>(&text).unwrap(), config);
    }

    #[test]
    fn a_stage_fails_its_input_with_a_reason_alone() {
        let failed: Failed = crate::decode(Failed::KIND, br#"{"reason": "no"}"#).unwrap();
        assert_eq!(
            (failed.input, failed.stage, failed.reason.as_str()),
            (0, 0, "no")
        );
    }
}
