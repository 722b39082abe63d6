//! `pod-manager`: Dust's PodManagerActor, with PodDeadLetterActor-style creation on first
//! message (the schema is `mote_guest::patterns::pod_manager`).
//!
//! How: the manager is persistent. It journals `Added(name)` and `Removed(name)` events (a
//! snapshot of the names every 64 events) and, in `start`, recovers the set of pod names and
//! spawns a child of the configured module under each name: after a restart of the manager or
//! of the host, the same pods live again at the same paths. A message for a pod that does not
//! live creates it first: `pod-manager.deliver` {pod, kind, body|bytes}, any kind whose JSON
//! body has a `"pod"` field, or a message sent straight to `<manager>/<pod>`, which became a
//! dead letter the manager picks up (it subscribes to `/system/deadletters`). The message then
//! goes to the pod with its original sender (`forward`). Pods are supervised by the
//! configured strategy (restart by default); a pod that stops, by itself or by its
//! supervisor, is forgotten, and its next message creates it again.
//!
//! Invariants: at most `max_pods` pod names are kept; past it a message for a new pod is
//! refused (a dead letter, `rejected`). A dead letter addressed to a live pod is never passed
//! on again (it would loop: a full mailbox, a rejected message). A removed pod's leftover
//! messages are dead letters, not a new pod: the name is held until the pod's end is seen, and
//! messages for it wait in the stash meanwhile. A spawn that finds the name still taken by a
//! pod on its way out waits in the stash too, tried again 10 ms later.

use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};

use mote_guest::bindings::mote::actor::host;
use mote_guest::patterns::{config, control, pod_manager::*};
use mote_guest::serde::{Deserialize, Serialize};
use mote_guest::{
    Actor, Address, Context, DEAD_LETTERS_TOPIC, DeadLetter, Envelope, Error, Message, Result,
    SpawnError,
};

/// A change to the set of pod names, as journaled.
#[derive(Serialize, Deserialize)]
#[serde(crate = "mote_guest::serde")]
enum Event {
    Added(String),
    Removed(String),
}

/// The journal is folded into a snapshot every this many events.
const SNAPSHOT_EVERY: u64 = 64;

/// How long a spawn that found its name taken waits to be tried again.
const RETRY: Duration = Duration::from_millis(10);

/// Whether a message for a pod can go to it now.
enum Ready {
    /// The pod lives; `new` if this call created it.
    Live { new: bool },
    /// The message waits in the stash.
    Stashed,
}

/// Any JSON body with a `pod` field.
#[derive(Deserialize)]
#[serde(crate = "mote_guest::serde")]
struct PodField {
    pod: String,
}

struct PodManager {
    module: String,
    init: Vec<u8>,
    max_pods: usize,
    create_on_dead_letter: bool,
    /// `<manager path>/`: dead letters to paths under it may be for pods.
    prefix: String,
    /// The pod names, each with its live pod (none while it could not be spawned).
    pods: BTreeMap<String, Option<Address>>,
    /// Removed pods whose end has not been seen yet.
    removing: BTreeMap<String, Address>,
    /// Dead letters waiting in the stash, per pod, for a name still taken.
    held: BTreeMap<String, u32>,
    /// The retry timer, while one is set.
    retry: Option<u64>,
}

/// A refusal: the message becomes a dead letter (`rejected`), the manager goes on.
fn refused(why: String) -> Error {
    Error::msg(format!("pod-manager: {why}")).into_malformed()
}

impl PodManager {
    /// Journals a change; every [`SNAPSHOT_EVERY`] events the names become a snapshot.
    fn journal(&self, ctx: &Context, event: &Event) -> Result<()> {
        let seq = ctx.persist(event)?;
        if seq % SNAPSHOT_EVERY == 0 {
            let names: BTreeSet<&String> = self.pods.keys().collect();
            let covered = ctx.save_snapshot(&names)?;
            ctx.delete_events(covered)?;
        }
        Ok(())
    }

    /// Spawns pod `pod` and watches it.
    fn spawn(&self, ctx: &Context, pod: &str) -> core::result::Result<Address, SpawnError> {
        let address = host::spawn(pod, &self.module, &self.init)?;
        if let Err(e) = ctx.watch(&address) {
            ctx.warn(&format!("pod-manager: pod `{pod}` is not watched: {e}"));
        }
        Ok(address)
    }

    /// Makes sure pod `pod` lives before the message being handled goes to it; stashes the
    /// message if it must wait.
    fn ready(&mut self, ctx: &mut Context, pod: &str) -> Result<Ready> {
        if !valid_pod_name(pod) {
            return Err(refused(format!("`{pod}` is not a valid pod name")));
        }
        if let Some(Some(_)) = self.pods.get(pod) {
            return Ok(Ready::Live { new: false });
        }
        if self.removing.contains_key(pod) {
            ctx.stash();
            return Ok(Ready::Stashed);
        }
        let known = self.pods.contains_key(pod);
        if !known && self.pods.len() >= self.max_pods {
            return Err(refused(format!("{} pods already", self.max_pods)));
        }
        match self.spawn(ctx, pod) {
            Ok(address) => {
                self.pods.insert(pod.to_string(), Some(address));
                if !known {
                    self.journal(ctx, &Event::Added(pod.to_string()))?;
                }
                Ok(Ready::Live { new: true })
            }
            Err(SpawnError::NameTaken(_)) => {
                // The pod's previous incarnation is on its way out.
                ctx.stash();
                if self.retry.is_none() {
                    self.retry = Some(ctx.schedule_self(&Retry {}, RETRY, None)?);
                }
                Ok(Ready::Stashed)
            }
            Err(e) => Err(refused(format!("cannot spawn pod `{pod}`: {e:?}"))),
        }
    }

    /// Passes the message being handled (`kind`, `body`) to pod `pod`, created if need be,
    /// with its original sender.
    fn deliver(&mut self, ctx: &mut Context, pod: &str, kind: &str, body: &[u8]) -> Result<()> {
        if kind.starts_with("mote.") {
            return Err(refused(format!("kind `{kind}` is the host's own")));
        }
        match self.ready(ctx, pod)? {
            Ready::Live { .. } => ctx.forward_raw(pod, kind, body),
            Ready::Stashed => Ok(()),
        }
    }

    fn remove(&mut self, ctx: &Context, pod: &str) -> Result<Removed> {
        let existed = match self.pods.remove(pod) {
            Some(live) => {
                if let Some(address) = live {
                    ctx.stop(&address);
                    self.removing.insert(pod.to_string(), address);
                }
                self.journal(ctx, &Event::Removed(pod.to_string()))?;
                true
            }
            None => false,
        };
        Ok(Removed {
            pod: pod.to_string(),
            existed,
        })
    }

    fn pods(&self) -> Pods {
        Pods {
            pods: self.pods.keys().cloned().collect(),
        }
    }

    fn message(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if env.kind == Deliver::KIND {
            let deliver: Deliver = control(&env)?;
            self.deliver(ctx, &deliver.pod, &deliver.kind, &deliver.body_bytes())
        } else if env.kind == Create::KIND {
            let create: Create = control(&env)?;
            if let Ready::Live { new } = self.ready(ctx, &create.pod)? {
                let created = Created {
                    path: format!("{}{}", self.prefix, create.pod),
                    pod: create.pod,
                    new,
                };
                if ctx.sender().is_some() {
                    ctx.reply(&created)?;
                }
            }
            Ok(())
        } else if env.kind == List::KIND {
            control::<List>(&env)?;
            ctx.reply(&self.pods())
        } else if env.kind == Remove::KIND {
            let remove: Remove = control(&env)?;
            let removed = self.remove(ctx, &remove.pod)?;
            if ctx.sender().is_some() {
                ctx.reply(&removed)?;
            }
            Ok(())
        } else if env.kind == Retry::KIND {
            if ctx.sender().map(|s| &s.path) == Some(&ctx.myself().path) {
                self.retry = None;
                ctx.unstash_all();
            }
            Ok(())
        } else if env.kind.starts_with("pod-manager.") {
            Err(refused(format!(
                "`{}` is not a pod manager request",
                env.kind
            )))
        } else {
            // Application data with a `pod` field in a JSON object body.
            let pod = env
                .body
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .filter(|b| **b == b'{')
                .and_then(|_| serde_json::from_slice::<PodField>(&env.body).ok())
                .map(|field| field.pod)
                .ok_or_else(|| refused(format!("a `{}` message names no pod", env.kind)))?;
            self.deliver(ctx, &pod, &env.kind, &env.body)
        }
    }
}

impl Actor for PodManager {
    type Msg = List;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = config(MODULE, init)?;
        if config.module.is_empty() || config.max_pods == 0 {
            return Err(Error::msg(
                "pod-manager: bad configuration: a module and max_pods of at least 1",
            ));
        }
        ctx.set_strategy(&config.strategy.strategy());
        let names =
            ctx.recover::<BTreeSet<String>, Event>()?
                .fold(BTreeSet::new, |names, event| match event {
                    Event::Added(name) => {
                        names.insert(name);
                    }
                    Event::Removed(name) => {
                        names.remove(&name);
                    }
                })?;
        if config.create_on_dead_letter {
            ctx.subscribe(DEAD_LETTERS_TOPIC)?;
        }
        let mut manager = PodManager {
            init: config.init_bytes(),
            module: config.module,
            max_pods: usize::try_from(config.max_pods).unwrap_or(usize::MAX),
            create_on_dead_letter: config.create_on_dead_letter,
            prefix: format!("{}/", ctx.myself().path),
            pods: BTreeMap::new(),
            removing: BTreeMap::new(),
            held: BTreeMap::new(),
            retry: None,
        };
        // The pods live again; after a hot swap they live on, and are taken as they are.
        let live = ctx.children();
        for name in names {
            let path = format!("{}{name}", manager.prefix);
            let address = match live.iter().find(|c| c.path == path) {
                Some(address) => Some(address.clone()),
                None => match manager.spawn(ctx, &name) {
                    Ok(address) => Some(address),
                    Err(e) => {
                        ctx.warn(&format!("pod-manager: pod `{name}` not spawned: {e:?}"));
                        None
                    }
                },
            };
            manager.pods.insert(name, address);
        }
        Ok(manager)
    }

    fn receive(&mut self, ctx: &mut Context, _msg: List) -> Result<()> {
        ctx.reply(&self.pods())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        self.message(ctx, env)
    }

    fn dead_letter(&mut self, ctx: &mut Context, letter: DeadLetter) -> Result<()> {
        if !self.create_on_dead_letter {
            return Ok(());
        }
        let target = letter.target.split('#').next().unwrap_or_default();
        let Some(pod) = target.strip_prefix(self.prefix.as_str()) else {
            return Ok(());
        };
        if pod.contains('/') || letter.kind.starts_with("mote.") {
            return Ok(());
        }
        // One that waited in the stash for its name comes back ahead of the mailbox.
        let held = self
            .held
            .get_mut(pod)
            .filter(|n| **n > 0)
            .map(|n| *n -= 1)
            .is_some();
        if !held && (matches!(self.pods.get(pod), Some(Some(_))) || self.removing.contains_key(pod))
        {
            // A live pod's own dead letter, or a removed pod's leftovers.
            return Ok(());
        }
        match self.ready(ctx, pod) {
            Ok(Ready::Live { .. }) => ctx.forward_raw(pod, &letter.kind, &letter.body),
            Ok(Ready::Stashed) => {
                *self.held.entry(pod.to_string()).or_default() += 1;
                Ok(())
            }
            Err(e) if e.is_malformed() => {
                ctx.warn(&format!("a `{}` for {target} is lost: {e}", letter.kind));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        let Some(pod) = who.path.strip_prefix(self.prefix.as_str()) else {
            return Ok(());
        };
        let pod = pod.to_string();
        if self.pods.get(&pod) == Some(&Some(who.clone())) {
            // It stopped (by itself, or by its supervisor): forgotten until its next message.
            ctx.info(&format!("pod-manager: pod `{pod}` stopped"));
            self.pods.remove(&pod);
            self.journal(ctx, &Event::Removed(pod))?;
        } else if self.removing.get(&pod) == Some(&who) {
            self.removing.remove(&pod);
            if ctx.stashed() > 0 {
                ctx.unstash_all();
            }
        }
        Ok(())
    }
}

mote_guest::export_actor!(PodManager);
