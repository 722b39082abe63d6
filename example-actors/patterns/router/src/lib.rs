//! `router`: passes each message on to one of its routees, picked by a strategy, with the
//! message's original sender (the schema is `mote_guest::patterns::router`). Akka's group and
//! pool routers; µJavaActors' load-balanced categories.
//!
//! How: the routees are a list of paths, in routing order: the configured ones, then the
//! pool's children (`routee-0`, `routee-1`, ...; absolute paths), then those added later.
//! - `round-robin`: a cursor over the list.
//! - `random`: a xorshift generator seeded from the host's randomness (through std's
//!   `RandomState`) and the clock.
//! - `consistent-hash`: rendezvous hashing: each routee scores `hash(routee, key)` and the
//!   highest wins, so a key keeps its routee while the set is unchanged and a routee's
//!   arrival or departure moves only the keys it wins or won. The key is the text of a
//!   top-level field of the JSON body (a string's own text, any other value's JSON); a body
//!   that is not a JSON object, or lacks the field, is rejected.
//! - `smallest-mailbox`: `lookup.mailbox-depth` of every routee; the smallest wins, ties in
//!   turn from a cursor; a routee whose depth cannot be read comes last.
//!
//! Pool routees are supervised with the configured directive and watched: one that stops
//! for good leaves the list (a restart keeps it, at the same path). A message finding no
//! routee, or one the host refuses to forward, is rejected: a dead letter with reason
//! `rejected`, the reason in the host's log. Invariants: at most `max_routees` routees; the
//! router holds no message (each is forwarded or rejected while it is handled); a
//! malformed control message is rejected and the router goes on.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use mote_guest::patterns::{config, control, malformed, router::*};
use mote_guest::serde::{Deserialize, Serialize};
use mote_guest::{
    Actor, Address, Context, Envelope, Error, Message, Result, Strategy as Supervision,
};
use serde_json::Value;

/// One routee: where to send, and whether the router spawned it.
#[derive(Serialize, Deserialize)]
#[serde(crate = "mote_guest::serde")]
struct Routee {
    path: String,
    child: bool,
}

/// The router's state, all of which an upgrade carries over.
#[derive(Serialize, Deserialize)]
#[serde(crate = "mote_guest::serde")]
struct Router {
    strategy: Strategy,
    hash_key: String,
    routees: Vec<Routee>,
    max_routees: usize,
    /// The next routee in turn (round-robin, and ties of smallest-mailbox).
    cursor: usize,
    /// The random generator's state (never 0).
    seed: u64,
    routed: u64,
}

/// A configuration the router cannot start with.
fn bad(why: String) -> Error {
    Error::msg(format!("{MODULE}: bad configuration: {why}"))
}

/// SplitMix64's finaliser: spreads every input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a over `bytes`, from `hash`.
fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The rendezvous score of `routee` for `key`: stable across runs and hosts.
fn score(routee: &str, key: &[u8]) -> u64 {
    let hash = fnv(0xcbf2_9ce4_8422_2325, routee.as_bytes());
    mix(fnv(fnv(hash, &[0xff]), key))
}

impl Router {
    /// The routing key of a message: the text of the configured field of its JSON body.
    fn key(&self, env: &Envelope) -> Result<Vec<u8>> {
        let body: serde_json::Map<String, Value> =
            serde_json::from_slice(&env.body).map_err(|e| {
                malformed(format!(
                    "router: `{}` has no JSON object body to hash ({e})",
                    env.kind
                ))
            })?;
        match body.get(&self.hash_key) {
            None | Some(Value::Null) => Err(malformed(format!(
                "router: `{}` has no field `{}` to hash",
                env.kind, self.hash_key
            ))),
            Some(Value::String(text)) => Ok(text.as_bytes().to_vec()),
            Some(other) => Ok(other.to_string().into_bytes()),
        }
    }

    /// The next random number (xorshift64*).
    fn random(&mut self) -> u64 {
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The index of the routee for `env` (there is at least one).
    fn pick(&mut self, ctx: &Context, env: &Envelope) -> Result<usize> {
        let n = self.routees.len();
        Ok(match self.strategy {
            Strategy::RoundRobin => {
                let i = self.cursor % n;
                self.cursor = i + 1;
                i
            }
            Strategy::Random => (self.random() % n as u64) as usize,
            Strategy::ConsistentHash => {
                let key = self.key(env)?;
                let mut best = (0, 0);
                for (i, routee) in self.routees.iter().enumerate() {
                    let s = score(&routee.path, &key);
                    if i == 0 || s > best.1 {
                        best = (i, s);
                    }
                }
                best.0
            }
            Strategy::SmallestMailbox => {
                let start = self.cursor % n;
                let mut best = (start, u64::MAX);
                for offset in 0..n {
                    let i = (start + offset) % n;
                    // An unreadable depth (a remote or absent routee) comes after any other.
                    let depth = ctx
                        .mailbox_depth(&self.routees[i].path)
                        .map_or(u64::MAX, u64::from);
                    if depth < best.1 || offset == 0 {
                        best = (i, depth);
                    }
                    if depth == 0 {
                        break;
                    }
                }
                self.cursor = best.0 + 1;
                best.0
            }
        })
    }

    /// Passes the message being handled on to one routee.
    fn route(&mut self, ctx: &Context, env: &Envelope) -> Result<()> {
        if self.routees.is_empty() {
            return Err(malformed(format!(
                "router: no routee left to take `{}`",
                env.kind
            )));
        }
        let i = self.pick(ctx, env)?;
        let path = &self.routees[i].path;
        ctx.forward_raw(path, &env.kind, &env.body)
            .map_err(|e| malformed(format!("router: {}", e.message())))?;
        self.routed += 1;
        Ok(())
    }

    fn position(&self, path: &str) -> Option<usize> {
        self.routees.iter().position(|r| r.path == path)
    }

    /// Adds a routee at the end of the list (one already there stays where it is); else why
    /// not.
    fn add(&mut self, path: String, child: bool) -> core::result::Result<(), String> {
        if path.is_empty() {
            return Err("a routee path is empty".into());
        }
        if self.position(&path).is_some() {
            return Ok(());
        }
        if self.routees.len() >= self.max_routees {
            return Err(format!(
                "{} routees already (max_routees)",
                self.max_routees
            ));
        }
        self.routees.push(Routee { path, child });
        Ok(())
    }

    /// Takes the routee at `i` out of the list, keeping the turn of the others.
    fn remove(&mut self, i: usize) -> Routee {
        if i < self.cursor {
            self.cursor -= 1;
        }
        self.routees.remove(i)
    }

    /// Spawns the pool's routees (or adopts those still alive, after an upgrade).
    fn spawn_pool(&mut self, ctx: &Context, pool: &Pool) -> Result<()> {
        let room = self.max_routees - self.routees.len();
        if pool.size == 0 || pool.size as usize > room {
            return Err(bad(format!(
                "a pool needs a size from 1 to {room} (max_routees less the paths)"
            )));
        }
        let directive = match pool.directive {
            Directive::Restart => mote_guest::Directive::Restart,
            Directive::Resume => mote_guest::Directive::Resume,
            Directive::Stop => mote_guest::Directive::Stop,
            Directive::Escalate => mote_guest::Directive::Escalate,
        };
        ctx.set_strategy(
            &Supervision::one_for_one(directive).restarts(pool.max_restarts, pool.within_ms),
        );
        let alive = ctx.children();
        for n in 0..pool.size {
            let name = format!("routee-{n}");
            let child = match alive
                .iter()
                .find(|a| a.path.rsplit('/').next() == Some(name.as_str()))
            {
                Some(child) => child.clone(),
                None => ctx.spawn(&name, &pool.module, pool.init.as_bytes())?,
            };
            ctx.watch(&child)?;
            self.add(child.path, true).map_err(bad)?;
        }
        Ok(())
    }

    fn routees(&self) -> Routees {
        Routees {
            routees: self.routees.iter().map(|r| r.path.clone()).collect(),
            routed: self.routed,
        }
    }
}

impl Actor for Router {
    type Msg = GetRoutees;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = config(MODULE, init)?;
        let hash_key = match (config.strategy, config.hash_key) {
            (Strategy::ConsistentHash, Some(key)) if !key.is_empty() => key,
            (Strategy::ConsistentHash, _) => {
                return Err(bad("consistent-hash needs a `hash_key`".into()));
            }
            (_, key) => key.unwrap_or_default(),
        };
        let clock = u64::try_from(ctx.since_start().as_nanos()).unwrap_or(0);
        let seed = mix(RandomState::new().hash_one(clock) ^ clock) | 1;
        let mut router = Router {
            strategy: config.strategy,
            hash_key,
            routees: Vec::new(),
            max_routees: config.max_routees as usize,
            cursor: 0,
            seed,
            routed: 0,
        };
        for path in config.routees {
            router.add(path, false).map_err(bad)?;
        }
        if let Some(pool) = &config.pool {
            router.spawn_pool(ctx, pool)?;
        }
        Ok(router)
    }

    fn receive(&mut self, ctx: &mut Context, _get: GetRoutees) -> Result<()> {
        ctx.reply(&self.routees())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        match env.kind.as_str() {
            AddRoutee::KIND => {
                let add: AddRoutee = control(&env)?;
                self.add(add.path, false)
                    .map_err(|why| malformed(format!("router: {why}")))
            }
            RemoveRoutee::KIND => {
                let remove: RemoveRoutee = control(&env)?;
                let i = self.position(&remove.path).ok_or_else(|| {
                    malformed(format!("router: no routee `{}` to remove", remove.path))
                })?;
                let routee = self.remove(i);
                if routee.child
                    && let Some(child) = ctx.resolve(&routee.path)
                {
                    ctx.unwatch(&child);
                    ctx.stop(&child);
                }
                Ok(())
            }
            Broadcast::KIND => {
                let broadcast: Broadcast = control(&env)?;
                let (kind, body) = broadcast.message().map_err(Error::into_malformed)?;
                if self.routees.is_empty() {
                    return Err(malformed(format!(
                        "router: no routee left to take `{kind}`"
                    )));
                }
                for routee in &self.routees {
                    ctx.forward_raw(&routee.path, kind, &body)
                        .map_err(|e| malformed(format!("router: {}", e.message())))?;
                }
                self.routed += 1;
                Ok(())
            }
            kind if kind.starts_with("router.") => {
                Err(malformed(format!("router: unknown control kind `{kind}`")))
            }
            _ => self.route(ctx, &env),
        }
    }

    fn save_state(&self) -> Result<Option<Vec<u8>>> {
        mote_guest::state(self)
    }

    /// An upgrade keeps the routees (added ones included) and the turn.
    fn migrate(_ctx: &mut Context, _from_version: &str, state: &[u8]) -> Result<Self> {
        mote_guest::from_state(state)
    }

    fn terminated(&mut self, _ctx: &mut Context, who: Address) -> Result<()> {
        if let Some(i) = self.position(&who.path)
            && self.routees[i].child
        {
            self.remove(i);
        }
        Ok(())
    }
}

mote_guest::export_actor!(Router);
