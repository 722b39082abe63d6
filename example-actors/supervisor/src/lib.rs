//! Supervisor: a parent with a chosen strategy over watched crasher children, for supervision
//! and death-watch tests.
//!
//! Init: `<scope> <directive> <max-restarts> <within-ms> <children> <child-module> <R>
//! [backoff-min-ms] [backoff-max-ms] [node]`, scope `one|all`, directive
//! `resume|restart|stop|escalate|by-error`. At start it sets its strategy (`one` is one-for-one,
//! `all` all-for-one; `by-error` uses `restart` as the strategy's directive; backoff 0 ms unless
//! given), spawns `c0`..`c{n-1}` from `<child-module>` with init `<R>` (on the cluster node
//! `node` if given: `spawn-on`) and watches each.
//!
//! - `supervise`: reports each failure to `R` as `kind:<failure kind>` = 0, `from` the child's
//!   path; in `by-error` mode the child's error text picks the directive, the first of
//!   `resume`, `restart`, `stop`, `escalate` it contains (none: defer to the strategy); in the
//!   other modes it always defers.
//! - A watched child's end is reported to `R` as `terminated` = its incarnation, `from` its path.
//! - `Relay::Broadcast(k)` sends `Crash::Echo(k)` (truncated to `u32`) to every live child;
//!   each `Crash::Echo(n)` reply is reported to `R` as `echo` = `n`, `from` the child's path.
//!   `Relay::Collect` is ignored.

use mote_example_protocol::{Crash, Relay, Report, init_arg, init_opt, init_words};
use mote_guest::{
    Actor, Address, Context, Directive, Envelope, Error, Failure, Result, Scope, SpawnOptions,
    Strategy,
};

/// How `supervise` answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Always defer to the strategy's directive.
    Fixed,
    /// Pick the directive from the child's error text.
    ByError,
}

/// The supervisor's state.
struct Supervisor {
    mode: Mode,
    /// Children not yet reported terminated.
    children: Vec<Address>,
    report_to: String,
}

/// Parses `one|all`.
fn parse_scope(word: &str) -> Result<Scope> {
    match word {
        "one" => Ok(Scope::OneForOne),
        "all" => Ok(Scope::AllForOne),
        _ => Err(Error::msg(format!(
            "bad init argument <scope> `{word}`: expected one|all"
        ))),
    }
}

/// Parses `resume|restart|stop|escalate|by-error` into the strategy's directive and the mode.
fn parse_directive(word: &str) -> Result<(Directive, Mode)> {
    let directive = match word {
        "resume" => Directive::Resume,
        "restart" => Directive::Restart,
        "stop" => Directive::Stop,
        "escalate" => Directive::Escalate,
        "by-error" => return Ok((Directive::Restart, Mode::ByError)),
        _ => {
            return Err(Error::msg(format!(
                "bad init argument <directive> `{word}`: expected \
                 resume|restart|stop|escalate|by-error"
            )));
        }
    };
    Ok((directive, Mode::Fixed))
}

/// The directive an error text asks for: the first directive name it contains, in the order
/// resume, restart, stop, escalate.
fn directive_in(error: &str) -> Option<Directive> {
    [
        ("resume", Directive::Resume),
        ("restart", Directive::Restart),
        ("stop", Directive::Stop),
        ("escalate", Directive::Escalate),
    ]
    .into_iter()
    .find(|(name, _)| error.contains(name))
    .map(|(_, directive)| directive)
}

impl Supervisor {
    /// Sends `Report { from, label, value }` to `R`.
    fn report_as(&self, ctx: &Context, from: String, label: &str, value: u64) -> Result<()> {
        let report = Report {
            from,
            label: label.to_string(),
            value,
        };
        ctx.tell_path(&self.report_to, &report)
    }
}

impl Actor for Supervisor {
    type Msg = Relay;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let scope = parse_scope(&init_arg::<String>(&words, 0, "scope")?)?;
        let (directive, mode) = parse_directive(&init_arg::<String>(&words, 1, "directive")?)?;
        let max_restarts: u32 = init_arg(&words, 2, "max-restarts")?;
        let within_ms: u64 = init_arg(&words, 3, "within-ms")?;
        let count: u32 = init_arg(&words, 4, "children")?;
        let module: String = init_arg(&words, 5, "child-module")?;
        let report_to: String = init_arg(&words, 6, "report-path")?;
        let backoff_min: Option<u64> = init_opt(&words, 7, "backoff-min-ms")?;
        let backoff_max: Option<u64> = init_opt(&words, 8, "backoff-max-ms")?;
        let node: Option<String> = init_opt(&words, 9, "node")?;
        let strategy = Strategy::new(scope, directive)
            .restarts(max_restarts, within_ms)
            .backoff(backoff_min.unwrap_or(0), backoff_max.unwrap_or(0));
        ctx.set_strategy(&strategy);
        let mut children = Vec::with_capacity(count as usize);
        for i in 0..count {
            let name = format!("c{i}");
            let init = report_to.as_bytes();
            let child = match &node {
                Some(node) => ctx.spawn_on(node, &name, &module, init, &SpawnOptions::default())?,
                None => ctx.spawn(&name, &module, init)?,
            };
            ctx.watch(&child)?;
            children.push(child);
        }
        ctx.info(&format!(
            "supervisor: {count} children from `{module}` under {strategy:?}"
        ));
        Ok(Self {
            mode,
            children,
            report_to,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Relay) -> Result<()> {
        match msg {
            Relay::Broadcast(k) => {
                for child in &self.children {
                    ctx.tell(child, &Crash::Echo(k as u32))?;
                }
            }
            Relay::Collect => ctx.warn("supervisor: ignoring Relay::Collect"),
        }
        Ok(())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if !env.is::<Crash>() {
            ctx.warn(&format!("unhandled message of kind `{}`", env.kind));
            return Ok(());
        }
        let Crash::Echo(n) = env.decode::<Crash>()? else {
            ctx.warn("ignoring a Crash message that is not an Echo");
            return Ok(());
        };
        let Some(child) = env.sender else {
            ctx.warn(&format!("ignoring Echo({n}) without a sender"));
            return Ok(());
        };
        self.report_as(ctx, child.path, "echo", u64::from(n))
    }

    fn supervise(
        &mut self,
        ctx: &mut Context,
        child: &Address,
        failure: &Failure,
    ) -> Option<Directive> {
        let kind = format!("kind:{}", failure.kind.name());
        if let Err(e) = self.report_as(ctx, child.path.clone(), &kind, 0) {
            ctx.warn(&format!("cannot report the failure: {e}"));
        }
        if self.mode != Mode::ByError {
            return None;
        }
        let error = &failure.error;
        let directive = directive_in(error);
        ctx.info(&format!(
            "supervisor: {} failed with `{error}`: {directive:?}",
            child.path
        ));
        directive
    }

    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        self.children.retain(|child| *child != who);
        self.report_as(ctx, who.path, "terminated", who.incarnation)
    }
}

mote_guest::export_actor!(Supervisor);
