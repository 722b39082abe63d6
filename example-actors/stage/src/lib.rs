//! Stage: a pipeline stage (the `pipeline` pattern's stage protocol, in plain JSON, as a
//! Python or JavaScript stage would speak it). It replies to every message, whatever its
//! kind, with a message of the same kind whose body is the same JSON object with its
//! `"value"` (an integer) replaced by `value * mul + add`; the other fields pass untouched.
//!
//! Init: a JSON object, every field optional: `{"add": a, "mul": m}` (defaults 0 and 1), and
//! misbehaviour for tests, each on one input value: `"trap_on": v` panics (a trap, restarted
//! by the pipeline), `"silent_on": v` never replies (the pipeline's deadline fails the input),
//! `"drop_on": v` replies `pipeline.drop` (the input ends without output), `"defer_on": v`
//! holds that input's reply until it has replied to the next input (answers out of order).
//! A body that is not an object with an integer `value` is rejected (a dead letter).

use mote_guest::{Actor, Address, Context, Envelope, Error, Result};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The stage's init.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Init {
    #[serde(default)]
    add: i64,
    #[serde(default)]
    mul: Option<i64>,
    trap_on: Option<i64>,
    silent_on: Option<i64>,
    drop_on: Option<i64>,
    defer_on: Option<i64>,
}

/// A reply held back (`defer_on`): to whom, its kind and body.
type Held = (Address, String, Vec<u8>);

struct Stage {
    init: Init,
    held: Option<Held>,
}

/// Never sent: the stage takes every kind in `unhandled`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Unused {}
mote_guest::json_message!(Unused = "stage.unused");

impl Actor for Stage {
    type Msg = Unused;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let init = if init.iter().all(u8::is_ascii_whitespace) {
            Init::default()
        } else {
            serde_json::from_slice(init).map_err(|e| Error::msg(format!("stage: bad init: {e}")))?
        };
        Ok(Stage { init, held: None })
    }

    fn receive(&mut self, _ctx: &mut Context, _msg: Unused) -> Result<()> {
        Ok(())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        let mut object: Map<String, Value> = serde_json::from_slice(&env.body)
            .map_err(|e| Error::msg(format!("stage: not a JSON object: {e}")).into_malformed())?;
        let value = object
            .get("value")
            .and_then(Value::as_i64)
            .ok_or_else(|| Error::msg("stage: no integer `value`").into_malformed())?;
        let on = |option: Option<i64>| option == Some(value);
        if on(self.init.trap_on) {
            panic!("stage: trap on {value}");
        }
        if on(self.init.silent_on) {
            return Ok(());
        }
        let Some(sender) = ctx.sender().cloned() else {
            return Ok(());
        };
        if on(self.init.drop_on) {
            return ctx.tell_raw(&sender, "pipeline.drop", b"{}");
        }
        let result = value
            .saturating_mul(self.init.mul.unwrap_or(1))
            .saturating_add(self.init.add);
        object.insert("value".to_string(), Value::from(result));
        let body = serde_json::to_vec(&object).map_err(|e| Error::msg(e.to_string()))?;
        if on(self.init.defer_on) && self.held.is_none() {
            self.held = Some((sender, env.kind, body));
            return Ok(());
        }
        ctx.tell_raw(&sender, &env.kind, &body)?;
        if let Some((to, kind, body)) = self.held.take() {
            ctx.tell_raw(&to, &kind, &body)?;
        }
        Ok(())
    }
}

mote_guest::export_actor!(Stage);
