//! `pipeline-builder`: Dust's PipelineBuilderServiceActor, which makes pipelines from
//! messages (the schema is `mote_guest::patterns::pipeline_builder`).
//!
//! How: a `pipeline-builder.build` {name, stages, ...} spawns a child `name` of the pipeline
//! module with the rest of the request as its configuration, watches it and asks it for its
//! status (deadline `ready_timeout_ms`). The answer proves its stages started: the requester
//! gets `pipeline-builder.built` {name, path}. If the pipeline fails first (a stage module
//! that is not deployed fails its `start`), the builder stops it and the requester gets
//! `pipeline-builder.refused` {name, reason} with the failure; so it does too when the name is
//! taken, the builder holds `max_pipelines` already, or the deadline passes.
//! `pipeline-builder.tear-down` {name} stops a pipeline. Unlike Dust's builder, which hands
//! back the pipeline's Props and dies, this one stays, as the parent of what it built.
//!
//! Invariants: at most `max_pipelines` pipelines, built or being built; each build request
//! gets exactly one answer (when it has a sender); a pipeline that stops is forgotten.

use core::time::Duration;
use std::collections::{BTreeMap, HashMap};

use mote_guest::patterns::pipeline::GetStatus;
use mote_guest::patterns::supervision::valid_child_name;
use mote_guest::patterns::{config, control, init, pipeline_builder::*};
use mote_guest::{Actor, Address, Context, Directive, Envelope, Error, Failure, Message, Result};

/// A pipeline spawned and not yet answering.
struct Pending {
    address: Address,
    /// Who asked for it: the answer goes there.
    requester: Option<Address>,
    /// The readiness ask.
    ask: u64,
    /// Why it failed, once it did.
    failure: Option<String>,
}

struct Builder {
    module: String,
    max_pipelines: usize,
    ready_timeout: Duration,
    built: BTreeMap<String, Address>,
    pending: BTreeMap<String, Pending>,
    /// Readiness asks: ask id -> pipeline name.
    readiness: HashMap<u64, String>,
}

/// Sends `msg` to `to` if there is someone to tell; a refused send is logged.
fn answer<M: Message>(ctx: &Context, to: Option<&Address>, msg: &M) {
    if let Some(to) = to
        && let Err(e) = ctx.tell(to, msg)
    {
        ctx.warn(&format!("pipeline-builder: cannot answer: {e}"));
    }
}

/// The last segment of a path.
fn name_of(address: &Address) -> &str {
    address.path.rsplit('/').next().unwrap_or_default()
}

impl Builder {
    fn build(&mut self, ctx: &mut Context, build: Build) {
        let requester = ctx.sender().cloned();
        let refuse = |reason: String| {
            answer(
                ctx,
                requester.as_ref(),
                &Refused {
                    name: build.name.clone(),
                    reason,
                },
            );
        };
        if !valid_child_name(&build.name) {
            return refuse(format!("`{}` is not a valid pipeline name", build.name));
        }
        if self.built.contains_key(&build.name) || self.pending.contains_key(&build.name) {
            return refuse(format!("a pipeline named `{}` exists", build.name));
        }
        if self.built.len() + self.pending.len() >= self.max_pipelines {
            return refuse(format!(
                "the builder holds {} pipelines already",
                self.max_pipelines
            ));
        }
        let address = match ctx.spawn(&build.name, &self.module, &init(&build.pipeline)) {
            Ok(address) => address,
            Err(e) => return refuse(e.message().to_string()),
        };
        let ready = ctx
            .watch(&address)
            .and_then(|()| ctx.ask(&address, &GetStatus {}, self.ready_timeout));
        match ready {
            Ok(ask) => {
                self.readiness.insert(ask, build.name.clone());
                self.pending.insert(
                    build.name,
                    Pending {
                        address,
                        requester,
                        ask,
                        failure: None,
                    },
                );
            }
            Err(e) => {
                ctx.stop(&address);
                refuse(e.message().to_string());
            }
        }
    }

    /// The pipeline `name` answered: it is built.
    fn ready(&mut self, ctx: &mut Context, name: String) {
        let Some(pending) = self.pending.remove(&name) else {
            return;
        };
        let built = Built {
            name: name.clone(),
            path: pending.address.path.clone(),
        };
        self.built.insert(name, pending.address);
        answer(ctx, pending.requester.as_ref(), &built);
    }

    /// The build of `name` failed: the pipeline is stopped, the requester told why.
    fn refuse_pending(&mut self, ctx: &mut Context, name: &str, reason: String) {
        let Some(pending) = self.pending.remove(name) else {
            return;
        };
        self.readiness.remove(&pending.ask);
        ctx.stop(&pending.address);
        let refused = Refused {
            name: name.to_string(),
            reason,
        };
        answer(ctx, pending.requester.as_ref(), &refused);
    }

    fn tear_down(&mut self, ctx: &mut Context, name: &str) -> TornDown {
        let existed = if let Some(address) = self.built.remove(name) {
            ctx.stop(&address);
            true
        } else if self.pending.contains_key(name) {
            self.refuse_pending(ctx, name, "torn down before it answered".to_string());
            true
        } else {
            false
        };
        TornDown {
            name: name.to_string(),
            existed,
        }
    }

    fn message(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if env.kind == Build::KIND {
            let build: Build = control(&env)?;
            self.build(ctx, build);
            Ok(())
        } else if env.kind == TearDown::KIND {
            let tear: TearDown = control(&env)?;
            let torn = self.tear_down(ctx, &tear.name);
            answer(ctx, ctx.sender(), &torn);
            Ok(())
        } else if env.kind == List::KIND {
            control::<List>(&env)?;
            let pipelines = Pipelines {
                pipelines: self.built.keys().cloned().collect(),
            };
            ctx.reply(&pipelines)
        } else {
            Err(Error::msg(format!(
                "pipeline-builder: `{}` is not a builder request",
                env.kind
            ))
            .into_malformed())
        }
    }
}

impl Actor for Builder {
    type Msg = List;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = if init.iter().all(u8::is_ascii_whitespace) {
            Config::default()
        } else {
            config(MODULE, init)?
        };
        ctx.set_strategy(&config.strategy.strategy());
        // After a hot swap its pipelines live on: take them as built.
        let built = ctx
            .children()
            .into_iter()
            .map(|c| (name_of(&c).to_string(), c))
            .collect();
        Ok(Builder {
            module: config.module,
            max_pipelines: usize::try_from(config.max_pipelines).unwrap_or(usize::MAX),
            ready_timeout: Duration::from_millis(config.ready_timeout_ms.max(1)),
            built,
            pending: BTreeMap::new(),
            readiness: HashMap::new(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, _msg: List) -> Result<()> {
        let pipelines = Pipelines {
            pipelines: self.built.keys().cloned().collect(),
        };
        ctx.reply(&pipelines)
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        self.message(ctx, env)
    }

    fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
        match self.readiness.remove(&id) {
            Some(name) => {
                self.ready(ctx, name);
                Ok(())
            }
            // Not a readiness answer: a request from someone who asks the builder.
            None => self.message(ctx, reply),
        }
    }

    fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
        if let Some(name) = self.readiness.remove(&id) {
            let reason = format!(
                "the pipeline did not answer within {} ms",
                self.ready_timeout.as_millis()
            );
            self.refuse_pending(ctx, &name, reason);
        }
        Ok(())
    }

    fn supervise(
        &mut self,
        _ctx: &mut Context,
        child: &Address,
        failure: &Failure,
    ) -> Option<Directive> {
        // A pipeline that fails before it answered is not built: stop it, say why.
        let pending = self.pending.get_mut(name_of(child))?;
        if pending.address != *child {
            return None;
        }
        pending.failure.get_or_insert_with(|| failure.error.clone());
        Some(Directive::Stop)
    }

    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        let name = name_of(&who).to_string();
        if self.built.get(&name) == Some(&who) {
            ctx.info(&format!("pipeline-builder: pipeline `{name}` stopped"));
            self.built.remove(&name);
        } else if let Some(pending) = self.pending.get_mut(&name)
            && pending.address == who
        {
            let reason = pending
                .failure
                .take()
                .unwrap_or_else(|| "the pipeline stopped before it answered".to_string());
            self.refuse_pending(ctx, &name, reason);
        }
        Ok(())
    }
}

mote_guest::export_actor!(Builder);
