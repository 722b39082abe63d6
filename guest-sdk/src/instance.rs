//! [`Instance`]: a running actor with its behaviour stack, and the routing of each message to
//! the right hook. Plain Rust: the host is only reached through the hooks, and the stash
//! requests a hook makes are handed to the runtime to pass on to the host, which keeps the
//! stash.
//!
//! Invariant (tested below): every message is handled in the one [`Context`] the instance
//! keeps from `start` on, reset for it: it sees that message's sender (or none) and nothing a
//! hook before it asked for; only the addresses it looked up (its own, its parent's) carry over.

use crate::actor::Actor;
use crate::behavior::{Behavior, Change, Request};
use crate::bindings::mote::actor::types::{Address, Directive, StopReason};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::message::{Envelope, Message, decode};
use crate::routing::{Route, route};
use crate::spare;
use crate::supervision::Failure;

/// What a hook asked of the host's stash, in call order, once it succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StashOp {
    /// Keep the message being handled.
    Stash,
    /// Release every stashed message ahead of the mailbox.
    UnstashAll,
}

/// A started actor and the runtime's bookkeeping around it.
pub struct Instance<A: Actor> {
    actor: A,
    /// Pushed behaviours; the last handles `A::Msg`, `Actor::receive` when empty.
    behaviors: Vec<Behavior<A>>,
    /// Why the last message was rejected (its body did not decode), if it was.
    rejected: Option<String>,
    /// The stash requests of the last hook, for the host.
    stash_ops: Vec<StashOp>,
    /// The context every message is handled in, kept from one to the next (with the addresses
    /// it looked up: an instance's own and its parent's never change).
    ctx: Context,
}

impl<A: Actor> Instance<A> {
    /// Runs [`Actor::start`], applying the behaviour changes it requested.
    pub fn start(init: &[u8]) -> Result<Self> {
        let mut ctx = Context::new();
        let actor = A::start(&mut ctx, init)?;
        Self::install(actor, ctx)
    }

    /// Runs [`Actor::migrate`] instead of `start` in a hot swap, and sets the instance up as
    /// `start` would, with the behaviour changes `migrate` requested applied. The stash is the
    /// host's: it is carried over as it is.
    pub fn migrate(from_version: &str, state: &[u8]) -> Result<Self> {
        let mut ctx = Context::new();
        let actor = A::migrate(&mut ctx, from_version, state)?;
        Self::install(actor, ctx)
    }

    /// A fresh instance around a new actor, with the behaviour changes its creating hook
    /// requested through `ctx`, which it keeps for the messages.
    fn install(actor: A, mut ctx: Context) -> Result<Self> {
        let requests = ctx.take_requests();
        let mut instance = Self {
            actor,
            behaviors: Vec::new(),
            rejected: None,
            stash_ops: Vec::new(),
            ctx,
        };
        instance.apply(requests, false)?;
        Ok(instance)
    }

    /// Runs [`Actor::save_state`]; changes nothing.
    pub fn save_state(&self) -> Result<Option<Vec<u8>>> {
        self.actor.save_state()
    }

    /// Handles one message with the hook its kind calls for.
    ///
    /// A message of the actor's kind whose body does not decode is no failure: it is the
    /// sender's problem. It is rejected ([`Instance::take_rejected`] says why; the runtime
    /// hands it to the host's dead letters).
    pub fn receive(&mut self, mut env: Envelope) -> Result<()> {
        self.rejected = None;
        let route = route(&env, A::Msg::KIND);
        // The sender moves into the context; a hook handed the whole envelope gets it back.
        self.ctx.begin_message(env.sender.take());
        let ctx = &mut self.ctx;
        let result = match dispatch(&mut self.actor, &self.behaviors, ctx, route, &env) {
            Err(e) if e.is_malformed() => {
                self.rejected = Some(e.into());
                Ok(())
            }
            Err(e) => Err(e),
            Ok(()) => {
                let requests = ctx.take_requests();
                self.apply(requests, true)
            }
        };
        // The next message's sender and kind are unpacked into these strings.
        spare::keep(self.ctx.take_sender(), env.kind);
        result
    }

    /// Why the message of the last [`Instance::receive`] was rejected, if it was.
    pub fn take_rejected(&mut self) -> Option<String> {
        self.rejected.take()
    }

    /// The stash requests of the last hook, in call order, for the host.
    pub fn take_stash_ops(&mut self) -> Vec<StashOp> {
        std::mem::take(&mut self.stash_ops)
    }

    /// Runs [`Actor::supervise`], applying its behaviour changes.
    pub fn supervise(&mut self, child: &Address, failure: &Failure) -> Option<Directive> {
        let mut ctx = Context::new();
        let directive = self.actor.supervise(&mut ctx, child, failure);
        if let Err(e) = self.apply(ctx.take_requests(), false) {
            ctx.error(&format!("supervise: {e}"));
        }
        directive
    }

    /// Runs [`Actor::stopping`] and drops the actor.
    pub fn stopping(mut self, reason: StopReason) {
        self.actor.stopping(&mut Context::new(), reason);
    }

    /// Applies a successful hook's requests in call order; `in_message` if it handled one
    /// (only that can be stashed).
    fn apply(&mut self, requests: Vec<Request>, in_message: bool) -> Result<()> {
        if requests.is_empty() {
            // The common case: nothing to convert or collect.
            return Ok(());
        }
        let changes = requests
            .into_iter()
            .map(Change::<A>::from_request)
            .collect::<Result<Vec<_>, Error>>()?;
        for change in changes {
            match change {
                Change::Become(behavior) => self.behaviors.push(behavior),
                Change::Unbecome => {
                    self.behaviors.pop();
                }
                Change::Stash if in_message => self.stash_ops.push(StashOp::Stash),
                Change::Stash => {}
                Change::UnstashAll => self.stash_ops.push(StashOp::UnstashAll),
            }
        }
        Ok(())
    }
}

/// Hands an envelope (whose sender is the context's) to the hook `route` names (see
/// [`route`]): host messages and ask replies to theirs, `A::Msg` to the top behaviour or
/// `receive`, any other kind to `unhandled`.
fn dispatch<A: Actor>(
    actor: &mut A,
    behaviors: &[Behavior<A>],
    ctx: &mut Context,
    route: Route,
    env: &Envelope,
) -> Result<()> {
    match route {
        Route::Terminated(who) => actor.terminated(ctx, who),
        Route::DeadLetter(letter) => actor.dead_letter(ctx, letter),
        Route::AskTimeout(id) => actor.ask_timeout(ctx, id),
        Route::Answer(id) => {
            actor.answered(ctx, id, whole(ctx, env))?;
            if std::mem::take(&mut ctx.handle_as_message) {
                handle(actor, behaviors, ctx, env)
            } else {
                Ok(())
            }
        }
        Route::HttpResponse(id) => match crate::callouts::take(id) {
            Some(outcome) => actor.http_response(ctx, id, outcome),
            // Taken already: nothing to hand over.
            None => Ok(()),
        },
        Route::Message | Route::Unhandled => handle(actor, behaviors, ctx, env),
        Route::Ignore(why) => {
            ctx.warn(&why);
            Ok(())
        }
    }
}

/// Handles an envelope as a plain message: `A::Msg` by the top behaviour (the last of
/// `behaviors`) or `receive`, any other kind by `unhandled`.
fn handle<A: Actor>(
    actor: &mut A,
    behaviors: &[Behavior<A>],
    ctx: &mut Context,
    env: &Envelope,
) -> Result<()> {
    if env.kind != A::Msg::KIND {
        return actor.unhandled(ctx, whole(ctx, env));
    }
    let msg = decode::<A::Msg>(&env.kind, &env.body).map_err(Error::into_malformed)?;
    match behaviors.last() {
        Some(behavior) => behavior(actor, ctx, msg),
        None => actor.receive(ctx, msg),
    }
}

/// `env` with its sender, which the context holds, put back.
fn whole(ctx: &Context, env: &Envelope) -> Envelope {
    Envelope {
        sender: ctx.sender().cloned(),
        kind: env.kind.clone(),
        body: env.body.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dead_letter::DeadLetter;
    use crate::message::{ASK_TIMEOUT, DEAD_LETTER, TERMINATED};
    use serde::{Deserialize, Serialize};

    /// The test actor's messages.
    #[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
    enum Door {
        Open,
        Close,
        Item(u32),
        Fail(u32),
        /// Asks for the loud behaviour, then fails.
        PushThenFail,
        Push,
        Pop,
    }

    #[derive(Serialize, Deserialize)]
    struct Other;

    crate::message!(Door, Other);

    /// A gate that stashes items while closed and records what it handles.
    #[derive(Default)]
    struct Gate {
        /// (handler, sender path, item) for each item handled.
        log: Vec<(&'static str, String, u32)>,
        terminated: Vec<Address>,
        others: usize,
        dead: Vec<DeadLetter>,
        timeouts: Vec<u64>,
    }

    impl Gate {
        fn open(&mut self, ctx: &mut Context, msg: Door) -> Result<()> {
            self.common(ctx, msg, "open")
        }

        fn loud(&mut self, ctx: &mut Context, msg: Door) -> Result<()> {
            self.common(ctx, msg, "loud")
        }

        fn common(&mut self, ctx: &mut Context, msg: Door, name: &'static str) -> Result<()> {
            match msg {
                Door::Item(n) => self.log.push((name, path(ctx.sender()), n)),
                Door::Fail(n) => return Err(Error::msg(format!("fail {n}"))),
                Door::PushThenFail => {
                    ctx.become_(Self::loud);
                    return Err(Error::msg("failed after asking to become loud"));
                }
                Door::Close | Door::Pop => ctx.unbecome(),
                Door::Push => ctx.become_(Self::loud),
                Door::Open => {}
            }
            Ok(())
        }
    }

    impl Actor for Gate {
        type Msg = Door;

        fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
            if init == b"open" {
                ctx.become_(Self::open);
            }
            Ok(Self::default())
        }

        fn receive(&mut self, ctx: &mut Context, msg: Door) -> Result<()> {
            match msg {
                Door::Item(_) | Door::Fail(_) => ctx.stash(),
                Door::Open => {
                    ctx.unstash_all();
                    ctx.become_(Self::open);
                }
                Door::Close | Door::Push | Door::PushThenFail => {}
                Door::Pop => ctx.unbecome(),
            }
            Ok(())
        }

        fn unhandled(&mut self, ctx: &mut Context, _env: Envelope) -> Result<()> {
            self.others += 1;
            ctx.stash();
            Ok(())
        }

        fn terminated(&mut self, _ctx: &mut Context, who: Address) -> Result<()> {
            self.terminated.push(who);
            Ok(())
        }

        fn dead_letter(&mut self, _ctx: &mut Context, letter: DeadLetter) -> Result<()> {
            self.dead.push(letter);
            Ok(())
        }

        fn ask_timeout(&mut self, _ctx: &mut Context, id: u64) -> Result<()> {
            self.timeouts.push(id);
            Ok(())
        }
    }

    /// An actor that takes ask replies itself.
    #[derive(Default)]
    struct Asker {
        /// (ask id, reply kind) for each reply.
        answers: Vec<(u64, String)>,
        received: usize,
    }

    impl Actor for Asker {
        type Msg = Door;

        fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
            Ok(Self::default())
        }

        fn receive(&mut self, _ctx: &mut Context, _msg: Door) -> Result<()> {
            self.received += 1;
            Ok(())
        }

        fn answered(&mut self, _ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
            // The reply comes whole: its sender is the ask's address, whose incarnation is the id.
            assert_eq!(reply.sender.map(|s| s.incarnation), Some(id));
            self.answers.push((id, reply.kind));
            Ok(())
        }
    }

    /// A counter that carries its count across a hot swap; migrated from version "loud", it
    /// starts with a behaviour that counts double.
    struct Keeper {
        count: u64,
    }

    impl Keeper {
        fn double(&mut self, _ctx: &mut Context, msg: Door) -> Result<()> {
            if let Door::Item(n) = msg {
                self.count += 2 * u64::from(n);
            }
            Ok(())
        }
    }

    impl Actor for Keeper {
        type Msg = Door;

        fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
            Ok(Self { count: 0 })
        }

        fn receive(&mut self, _ctx: &mut Context, msg: Door) -> Result<()> {
            if let Door::Item(n) = msg {
                self.count += u64::from(n);
            }
            Ok(())
        }

        fn save_state(&self) -> Result<Option<Vec<u8>>> {
            crate::state(&self.count)
        }

        fn migrate(ctx: &mut Context, from_version: &str, state: &[u8]) -> Result<Self> {
            if from_version == "loud" {
                ctx.become_(Self::double);
            }
            Ok(Self {
                count: crate::from_state(state)?,
            })
        }
    }

    /// An order as a Python or JS actor sends it: a JSON body of kind `order`.
    #[derive(Serialize, Deserialize)]
    struct Order {
        id: u64,
        item: String,
    }

    crate::json_message!(Order = "order");

    /// An actor whose messages are JSON orders.
    #[derive(Default)]
    struct Shop {
        /// (sender path, id, item) for each order.
        orders: Vec<(String, u64, String)>,
        /// The kinds that went to `unhandled`.
        others: Vec<String>,
    }

    impl Actor for Shop {
        type Msg = Order;

        fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
            Ok(Self::default())
        }

        fn receive(&mut self, ctx: &mut Context, order: Order) -> Result<()> {
            self.orders.push((path(ctx.sender()), order.id, order.item));
            Ok(())
        }

        fn unhandled(&mut self, _ctx: &mut Context, env: Envelope) -> Result<()> {
            self.others.push(env.kind);
            Ok(())
        }
    }

    fn path(address: Option<&Address>) -> String {
        address.map(|a| a.path.clone()).unwrap_or_default()
    }

    fn from(path: &str) -> Option<Address> {
        Some(Address {
            path: path.to_string(),
            incarnation: 1,
        })
    }

    /// The address an ask's reply or timeout comes from.
    fn ask(id: u64) -> Option<Address> {
        Some(Address {
            path: format!("/system/ask/{id}"),
            incarnation: id,
        })
    }

    fn send(gate: &mut Instance<Gate>, sender: &str, msg: Door) -> Result<()> {
        gate.receive(Envelope::of(from(sender), &msg)?)
    }

    fn items(gate: &Instance<Gate>) -> Vec<(&'static str, &str, u32)> {
        let log = gate.actor.log.iter();
        log.map(|(h, s, n)| (*h, s.as_str(), *n)).collect()
    }

    fn ops(gate: &mut Instance<Gate>) -> Vec<StashOp> {
        gate.take_stash_ops()
    }

    #[test]
    fn stash_requests_go_to_the_host_in_call_order_and_the_behaviour_changes() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"")?;
        send(&mut gate, "/a", Door::Item(1))?;
        assert!(items(&gate).is_empty());
        assert_eq!(ops(&mut gate), [StashOp::Stash]);
        send(&mut gate, "/c", Door::Open)?;
        assert_eq!(ops(&mut gate), [StashOp::UnstashAll]);
        // The host hands the stashed message back: the open behaviour takes it.
        send(&mut gate, "/a", Door::Item(1))?;
        assert_eq!(items(&gate), [("open", "/a", 1)]);
        assert!(
            ops(&mut gate).is_empty(),
            "each hook's requests are taken once"
        );
        Ok(())
    }

    #[test]
    fn unbecome_returns_to_receive_and_is_a_no_op_when_empty() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"")?;
        send(&mut gate, "/a", Door::Pop)?;
        assert!(gate.behaviors.is_empty());
        send(&mut gate, "/a", Door::Open)?;
        send(&mut gate, "/a", Door::Push)?;
        send(&mut gate, "/a", Door::Item(1))?;
        send(&mut gate, "/a", Door::Pop)?;
        send(&mut gate, "/a", Door::Item(2))?;
        send(&mut gate, "/a", Door::Close)?;
        ops(&mut gate);
        send(&mut gate, "/a", Door::Item(3))?;
        assert_eq!(items(&gate), [("loud", "/a", 1), ("open", "/a", 2)]);
        assert_eq!(ops(&mut gate), [StashOp::Stash], "closed again, it stashes");
        Ok(())
    }

    #[test]
    fn start_may_choose_the_first_behaviour() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"open")?;
        send(&mut gate, "/a", Door::Item(7))?;
        assert_eq!(items(&gate), [("open", "/a", 7)]);
        Ok(())
    }

    #[test]
    fn a_failed_hook_changes_nothing_and_stashes_nothing() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"open")?;
        send(&mut gate, "/a", Door::Push)?;
        assert_eq!(gate.behaviors.len(), 2);
        assert!(send(&mut gate, "/a", Door::Fail(1)).is_err());
        assert_eq!(gate.behaviors.len(), 2);
        let mut closed = Instance::<Gate>::start(b"")?;
        assert!(ops(&mut closed).is_empty());
        // A closed gate stashes a failing order without running it: stashing is not failing.
        send(&mut closed, "/a", Door::Fail(2))?;
        assert_eq!(ops(&mut closed), [StashOp::Stash]);
        Ok(())
    }

    #[test]
    fn the_next_message_sees_its_own_sender_and_nothing_a_failed_hook_asked() -> Result<()> {
        // The context is kept from message to message: only the addresses it looked up stay.
        let mut gate = Instance::<Gate>::start(b"open")?;
        assert!(send(&mut gate, "/a", Door::PushThenFail).is_err());
        assert_eq!(gate.behaviors.len(), 1);
        send(&mut gate, "/b", Door::Item(1))?;
        send(&mut gate, "/c", Door::Item(2))?;
        gate.receive(Envelope::of(None, &Door::Item(3))?)?;
        assert_eq!(
            items(&gate),
            [("open", "/b", 1), ("open", "/c", 2), ("open", "", 3)]
        );
        Ok(())
    }

    #[test]
    fn stash_then_unstash_in_one_hook_go_to_the_host_in_that_order() -> Result<()> {
        let mut gate = Instance::<Stasher>::start(b"")?;
        assert!(ops_of(&mut gate).is_empty());
        gate.receive(Envelope::of(from("/a"), &Door::Open)?)?;
        assert_eq!(ops_of(&mut gate), [StashOp::Stash, StashOp::UnstashAll]);
        Ok(())
    }

    /// An actor that stashes every message and then unstashes.
    struct Stasher;

    impl Actor for Stasher {
        type Msg = Door;

        fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
            Ok(Self)
        }

        fn receive(&mut self, ctx: &mut Context, _msg: Door) -> Result<()> {
            ctx.stash();
            ctx.unstash_all();
            Ok(())
        }
    }

    fn ops_of(stasher: &mut Instance<Stasher>) -> Vec<StashOp> {
        stasher.take_stash_ops()
    }

    #[test]
    fn other_kinds_and_terminations_take_their_own_hooks() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"")?;
        gate.receive(Envelope::of(from("/x"), &Other)?)?;
        let who = from("/user/w");
        gate.receive(Envelope {
            sender: who.clone(),
            kind: TERMINATED.to_string(),
            body: Vec::new(),
        })?;
        assert_eq!(gate.actor.others, 1);
        assert_eq!(gate.actor.terminated, who.into_iter().collect::<Vec<_>>());
        assert_eq!(
            ops(&mut gate),
            [StashOp::Stash],
            "unhandled stashed `Other`"
        );
        Ok(())
    }

    #[test]
    fn malformed_bodies_are_rejected_not_failures() -> Result<()> {
        let env = Envelope {
            sender: None,
            kind: "Door".to_string(),
            body: vec![99],
        };
        let mut gate = Instance::<Gate>::start(b"")?;
        gate.receive(env)?;
        let why = gate.take_rejected().expect("the message is rejected");
        assert!(why.contains("malformed `Door` body"), "{why}");
        gate.receive(Envelope::of(from("/user/a"), &Door::Item(1))?)?;
        assert_eq!(gate.take_rejected(), None, "a good message is not rejected");
        Ok(())
    }

    #[test]
    fn ask_replies_are_plain_messages_by_default() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"")?;
        gate.receive(Envelope::of(ask(5), &Door::Item(1))?)?;
        assert_eq!(
            ops(&mut gate),
            [StashOp::Stash],
            "the closed gate's receive stashed the reply"
        );
        send(&mut gate, "/a", Door::Open)?;
        gate.receive(Envelope::of(ask(5), &Door::Item(1))?)?;
        assert_eq!(items(&gate), [("open", "/system/ask/5", 1)]);
        gate.receive(Envelope::of(ask(6), &Door::Item(2))?)?;
        assert_eq!(items(&gate)[1], ("open", "/system/ask/6", 2));
        gate.receive(Envelope::of(ask(7), &Other)?)?;
        assert_eq!(gate.actor.others, 1);
        Ok(())
    }

    #[test]
    fn an_overridden_answered_takes_the_replies() -> Result<()> {
        let mut asker = Instance::<Asker>::start(b"")?;
        asker.receive(Envelope::of(ask(5), &Door::Item(1))?)?;
        asker.receive(Envelope::of(from("/a"), &Door::Item(2))?)?;
        asker.receive(Envelope::of(ask(6), &Other)?)?;
        let answers = [(5, "Door".to_string()), (6, "Other".to_string())];
        assert_eq!(asker.actor.answers, answers);
        assert_eq!(asker.actor.received, 1);
        Ok(())
    }

    #[test]
    fn timeouts_and_dead_letters_take_their_hooks() -> Result<()> {
        let mut gate = Instance::<Gate>::start(b"")?;
        gate.receive(Envelope {
            sender: ask(9),
            kind: ASK_TIMEOUT.to_string(),
            body: Vec::new(),
        })?;
        assert_eq!(gate.actor.timeouts, [9]);
        let letter = DeadLetter {
            sender: from("/user/a"),
            target: "/user/gone".to_string(),
            kind: "Door".to_string(),
            body: crate::encode(&Door::Item(3))?,
        };
        gate.receive(Envelope {
            sender: letter.sender.clone(),
            kind: DEAD_LETTER.to_string(),
            body: letter.encode(),
        })?;
        assert_eq!(gate.actor.dead, [letter]);
        assert!(items(&gate).is_empty() && ops(&mut gate).is_empty());
        Ok(())
    }

    #[test]
    fn by_default_no_state_is_saved_and_none_is_taken() -> Result<()> {
        let gate = Instance::<Gate>::start(b"")?;
        assert_eq!(gate.save_state()?, None);
        let error = Instance::<Gate>::migrate("1.0", &[])
            .err()
            .map(String::from);
        assert_eq!(
            error.as_deref(),
            Some("this actor does not migrate state from version `1.0`")
        );
        Ok(())
    }

    #[test]
    fn saved_state_goes_to_migrate() -> Result<()> {
        let mut old = Instance::<Keeper>::start(b"")?;
        old.receive(Envelope::of(None, &Door::Item(5))?)?;
        let saved = old.save_state()?.unwrap_or_default();
        assert_eq!(saved, [5]);
        let mut new = Instance::<Keeper>::migrate("1", &saved)?;
        assert_eq!(new.actor.count, 5);
        assert!(new.behaviors.is_empty());
        new.receive(Envelope::of(None, &Door::Item(1))?)?;
        assert_eq!(new.actor.count, 6);
        old.receive(Envelope::of(None, &Door::Item(1))?)?;
        assert_eq!(old.actor.count, 6, "saving changed nothing");
        Ok(())
    }

    #[test]
    fn migrate_may_choose_the_first_behaviour() -> Result<()> {
        let mut new = Instance::<Keeper>::migrate("loud", &[3])?;
        assert_eq!(new.behaviors.len(), 1);
        new.receive(Envelope::of(None, &Door::Item(2))?)?;
        assert_eq!(new.actor.count, 7);
        Ok(())
    }

    #[test]
    fn malformed_state_refuses_the_upgrade() {
        let error = Instance::<Keeper>::migrate("1", &[3, 0])
            .err()
            .map(String::from);
        assert_eq!(
            error.as_deref(),
            Some("malformed carried state: 1 trailing bytes")
        );
    }

    #[test]
    fn json_messages_from_other_languages_reach_receive() -> Result<()> {
        let mut shop = Instance::<Shop>::start(b"")?;
        shop.receive(Envelope {
            sender: from("/user/py"),
            kind: "order".to_string(),
            body: br#"{"item": "tea", "id": 3}"#.to_vec(),
        })?;
        let order = Order {
            id: 4,
            item: "cake".to_string(),
        };
        shop.receive(Envelope::of(from("/user/rs"), &order)?)?;
        shop.receive(Envelope::of(from("/user/rs"), &Door::Item(1))?)?;
        let orders = [
            ("/user/py".to_string(), 3, "tea".to_string()),
            ("/user/rs".to_string(), 4, "cake".to_string()),
        ];
        assert_eq!(shop.actor.orders, orders);
        assert_eq!(shop.actor.others, ["Door"]);
        let malformed = Envelope {
            sender: None,
            kind: "order".to_string(),
            body: br#"{"id": "three"}"#.to_vec(),
        };
        shop.receive(malformed)?;
        assert!(shop.take_rejected().is_some_and(|why| why.contains("JSON")));
        assert_eq!(shop.actor.orders.len(), 2);
        Ok(())
    }
}
