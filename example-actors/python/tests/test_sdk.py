"""Unit tests of the `mote` SDK in CPython, against the fake host of `fake_wit`: encoding,
dispatch, behaviours and the stash, recovery, asks, supervision and upgrades."""

import json
import unittest
from dataclasses import dataclass

import fake_wit

fake_wit.install()

import mote  # noqa: E402  (after the fake bindings are installed)
from componentize_py_types import Err  # noqa: E402

msg = fake_wit.message


@mote.message("order")
@dataclass
class Order:
    customer: str
    amount: int


@mote.message
@dataclass
class Ping:
    n: int


def runtime(cls, init=b""):
    """A started runtime of `cls` on a fresh fake host."""
    host = fake_wit.reset()
    rt = mote.Runtime(cls)
    rt.start(init)
    return rt, host


def sent(host, name="tell_path"):
    """(to, kind, JSON value) of each recorded send."""
    out = []
    for args in host.named(name):
        to = args[0].path if hasattr(args[0], "path") else args[0]
        out.append((to, args[1], json.loads(args[2]) if args[2] else None))
    return out


class Encoding(unittest.TestCase):
    def test_values_are_compact_json_and_bytes_go_as_they_are(self):
        self.assertEqual(mote.encode({"a": [1, 2]}), b'{"a":[1,2]}')
        self.assertEqual(mote.encode(b"\x00raw"), b"\x00raw")
        self.assertEqual(mote.encode(None), b"")
        self.assertEqual(mote.decode(b""), None)

    def test_a_typed_message_has_its_kind_and_the_json_of_its_fields(self):
        self.assertEqual(mote.kind_of(Order), "order")
        self.assertEqual(mote.kind_of(Ping(1)), "Ping")
        self.assertEqual(mote.encode(Order("ann", 5)), b'{"customer":"ann","amount":5}')
        self.assertEqual(mote.decode_as(Order, b'{"amount":5,"customer":"ann"}'),
                         Order("ann", 5))

    def test_bodies_that_do_not_decode_are_malformed(self):
        for body in [b"{not json", b'{"customer":"ann"}', b"[1]", b'\xff']:
            with self.subTest(body=body), self.assertRaises(mote.Malformed):
                mote.decode_as(Order, body)

    def test_another_encoding_is_a_codec(self):
        class Csv(mote.Codec):
            def encode(self, obj):
                return f"{obj.customer},{obj.amount}".encode()

            def decode(self, cls, body):
                customer, amount = body.decode().split(",")
                return cls(customer, int(amount))

        @mote.message("csv-order", codec=Csv())
        @dataclass
        class CsvOrder:
            customer: str
            amount: int

        self.assertEqual(mote.encode(CsvOrder("bob", 7)), b"bob,7")
        self.assertEqual(mote.decode_as(CsvOrder, b"bob,7"), CsvOrder("bob", 7))

    def test_rust_enum_variants_split_into_name_and_payload(self):
        self.assertEqual(mote.variant("Query"), ("Query", None))
        self.assertEqual(mote.variant({"Append": 5}), ("Append", 5))
        with self.assertRaises(mote.Malformed):
            mote.variant({"A": 1, "B": 2})

    def test_dead_letters_decode_their_three_fields(self):
        body = bytes([8]) + b"/user/no" + bytes([5]) + b"order" + bytes([7]) + b'{"x":1}'
        letter = mote.DeadLetter.decode(None, body)
        self.assertEqual((letter.target, letter.kind, letter.body),
                         ("/user/no", "order", b'{"x":1}'))
        with self.assertRaises(mote.Malformed):
            mote.DeadLetter.decode(None, bytes([200]))


class Orders(mote.Actor):
    messages = [Order]

    def start(self, ctx, init):
        self.totals = {}
        self.unhandled_kinds = []

    def receive(self, ctx, order):
        self.totals[order.customer] = self.totals.get(order.customer, 0) + order.amount
        ctx.reply("total", self.totals[order.customer])

    def unhandled(self, ctx, env):
        self.unhandled_kinds.append(env.kind)


class Dispatch(unittest.TestCase):
    def test_a_declared_kind_reaches_receive_decoded_and_reply_answers_its_sender(self):
        rt, host = runtime(Orders)
        rt.receive(msg("order", b'{"customer":"ann","amount":5}', "/system/p"))
        rt.receive(msg("order", b'{"customer":"ann","amount":2}', "/system/p"))
        self.assertEqual(rt.actor.totals, {"ann": 7})
        self.assertEqual(sent(host, "tell"), [("/system/p", "total", 5),
                                              ("/system/p", "total", 7)])

    def test_other_kinds_go_to_unhandled(self):
        rt, _ = runtime(Orders)
        rt.receive(msg("refund", b"{}"))
        self.assertEqual(rt.actor.unhandled_kinds, ["refund"])

    def test_a_malformed_body_is_rejected_not_a_failure(self):
        rt, host = runtime(Orders)
        rt.receive(msg("order", b'{"customer":"ann"}'))
        (reason,), = host.named("reject")
        self.assertIn("malformed `order` body", reason)
        self.assertEqual(rt.actor.totals, {})

    def test_an_exception_is_the_actors_failure_with_its_type_and_text(self):
        class Fails(mote.Actor):
            def receive(self, ctx, env):
                raise ValueError("no " + env.kind)

        rt, host = runtime(Fails)
        with self.assertRaises(Err) as raised:
            rt.receive(msg("thing"))
        self.assertTrue(raised.exception.value.startswith("ValueError: no thing"))
        self.assertEqual(host.named("reject"), [])

    def test_without_declared_messages_receive_gets_envelopes(self):
        class Any(mote.Actor):
            def start(self, ctx, init):
                self.seen = []

            def receive(self, ctx, env):
                self.seen.append((env.kind, env.value, env.sender.path))

        rt, _ = runtime(Any)
        rt.receive(msg("x", b"[1,2]", "/user/a"))
        self.assertEqual(rt.actor.seen, [("x", [1, 2], "/user/a")])

    def test_host_messages_reach_their_hooks(self):
        class Watcher(mote.Actor):
            def start(self, ctx, init):
                self.events = []

            def terminated(self, ctx, who):
                self.events.append(("terminated", who.path))

            def dead_letter(self, ctx, letter):
                self.events.append(("dead", letter.target))

        rt, _ = runtime(Watcher)
        rt.receive(msg(mote.TERMINATED, b"", "/user/child"))
        rt.receive(msg(mote.DEAD_LETTER, bytes([2]) + b"/x" + bytes([1]) + b"k" + bytes([0])))
        self.assertEqual(rt.actor.events, [("terminated", "/user/child"), ("dead", "/x")])

    def test_sends_take_typed_messages_or_a_kind_and_a_value(self):
        class Sender(mote.Actor):
            def start(self, ctx, init):
                ctx.tell("/user/a", Order("ann", 1))
                ctx.tell("/user/b", "note", {"k": 1})
                ctx.tell(mote.Address("/user/c", 3), Ping(2))
                ctx.publish("news", "headline", "hi")

        _, host = runtime(Sender)
        self.assertEqual(sent(host), [("/user/a", "order", {"customer": "ann", "amount": 1}),
                                      ("/user/b", "note", {"k": 1})])
        self.assertEqual(sent(host, "tell"), [("/user/c", "Ping", {"n": 2})])
        self.assertEqual(sent(host, "publish"), [("news", "headline", "hi")])

    def test_tell_forward_and_tell_urgent_take_a_path_or_an_address(self):
        class Relay(mote.Actor):
            def receive(self, ctx, env):
                for to in ("/user/a", mote.Address("/user/b", 3)):
                    ctx.tell(to, "t", 1)
                    ctx.forward(to, "f", 2)
                    ctx.tell_urgent(to, "u", 3)

        rt, host = runtime(Relay)
        rt.receive(msg("go", b"", "/user/x"))
        for path_import, address_import, kind, value in [
            ("tell_path", "tell", "t", 1),
            ("forward_path", "forward", "f", 2),
            ("tell_path_urgent", "tell_urgent", "u", 3),
        ]:
            with self.subTest(kind=kind):
                self.assertEqual(sent(host, path_import), [("/user/a", kind, value)])
                self.assertEqual(sent(host, address_import), [("/user/b", kind, value)])
        host.refuse.add("forward")
        with self.assertRaises(Err) as raised:
            rt.receive(msg("go", b"", "/user/x"))
        self.assertIn("forward /user/b: Quota(asks)", raised.exception.value)

    def test_a_refused_call_raises_mote_error_naming_the_variant(self):
        class Sender(mote.Actor):
            def start(self, ctx, init):
                self.error = None
                try:
                    ctx.tell("/user/a", "x")
                except mote.Error as e:
                    self.error = str(e)

        fake_wit.reset().refuse.add("tell_path")
        rt = mote.Runtime(Sender)
        fake_wit.HOST.refuse.add("tell_path")
        rt.start(b"")
        self.assertEqual(rt.actor.error, "tell /user/a: Quota(asks)")


class Door(mote.Actor):
    """Closed: stashes orders. `open` becomes `opened`, which handles them; `close` returns."""

    def start(self, ctx, init):
        self.handled = []

    def receive(self, ctx, env):
        if env.kind == "open":
            ctx.become_(Door.opened)
            ctx.unstash_all()
        else:
            ctx.stash()

    def opened(self, ctx, env):
        if env.kind == "close":
            ctx.unbecome()
        else:
            self.handled.append(env.kind)


class Behaviours(unittest.TestCase):
    def test_become_switches_the_handler_and_unbecome_returns(self):
        rt, host = runtime(Door)
        rt.receive(msg("a"))
        self.assertEqual(len(host.named("stash")), 1)
        rt.receive(msg("open"))
        self.assertEqual(len(host.named("unstash_all")), 1)
        rt.receive(msg("a"))
        self.assertEqual(rt.actor.handled, ["a"])
        rt.receive(msg("close"))
        rt.receive(msg("b"))
        self.assertEqual(rt.actor.handled, ["a"])
        self.assertEqual(len(host.named("stash")), 2)

    def test_a_failed_hook_changes_nothing(self):
        class Flaky(Door):
            def receive(self, ctx, env):
                ctx.become_(Door.opened)
                ctx.stash()
                raise RuntimeError("after asking")

        rt, host = runtime(Flaky)
        with self.assertRaises(Err):
            rt.receive(msg("open"))
        self.assertEqual(rt.behaviors, [])
        self.assertEqual(host.named("stash"), [])

    def test_a_full_stash_rejects_the_message(self):
        rt, host = runtime(Door)
        host.stash_full = True
        rt.receive(msg("a"))
        (reason,), = host.named("reject")
        self.assertIn("cannot stash", reason)

    def test_stash_outside_a_message_is_ignored(self):
        class Early(mote.Actor):
            def start(self, ctx, init):
                ctx.stash()

        _, host = runtime(Early)
        self.assertEqual(host.named("stash"), [])
        self.assertIn("stash ignored", host.named("log")[0][1])

    def test_take_returns_a_stashed_envelope(self):
        rt, host = runtime(Door)
        host.stash.append(fake_wit.message("b", b"2", "/user/x"))
        env = rt.ctx.take("b")
        self.assertEqual((env.kind, env.value, env.sender.path), ("b", 2, "/user/x"))
        self.assertIsNone(rt.ctx.take("b"))


class Journal(mote.Actor):
    def start(self, ctx, init):
        recovery = ctx.recover()
        self.from_snapshot = recovery.snapshot is not None
        self.values = recovery.fold(list, lambda values, v: values.append(v))
        self.last_seq = recovery.last_seq

    def receive(self, ctx, env):
        seq = ctx.persist(env.value)
        self.values.append(env.value)
        if seq % 3 == 0:
            ctx.save_snapshot(self.values)


class Persistence(unittest.TestCase):
    def test_recover_folds_the_snapshot_and_the_events_after_it(self):
        rt, host = runtime(Journal)
        for v in range(1, 8):
            rt.receive(msg("append", str(v)))
        # A new incarnation on the same journal: snapshot at 6, then event 7.
        again = mote.Runtime(Journal)
        host.calls.clear()
        again.start(b"")
        self.assertEqual(again.actor.values, [1, 2, 3, 4, 5, 6, 7])
        self.assertTrue(again.actor.from_snapshot)
        self.assertEqual(again.actor.last_seq, 7)
        self.assertEqual(host.named("replay"), [(6, mote.REPLAY_PAGE)])

    def test_events_are_read_page_by_page(self):
        host = fake_wit.reset()
        host.events = [fake_wit.Event(i, str(i).encode()) for i in range(1, 2050)]
        rt = mote.Runtime(Journal)
        rt.start(b"")
        self.assertEqual(rt.actor.values, list(range(1, 2050)))
        self.assertEqual([a[0] for a in host.named("replay")], [0, 1024, 2048])

    def test_typed_snapshots_and_events(self):
        host = fake_wit.reset()
        host.snapshot = fake_wit.Snapshot(1, b'{"n":4}')
        host.events = [fake_wit.Event(2, b'{"n":5}')]
        rec = mote.Runtime(Journal).ctx.recover(snapshot=Ping, event=Ping)
        self.assertEqual(rec.snapshot, Ping(4))
        self.assertEqual(list(rec.events), [(2, Ping(5))])

    def test_persisting_before_recover_is_an_error(self):
        class Eager(mote.Actor):
            def start(self, ctx, init):
                ctx.persist(1)

        with self.assertRaises(Err) as raised:
            runtime(Eager)
        self.assertIn("persist: NotRecovered", raised.exception.value)

    def test_reminders_carry_kind_and_body(self):
        class Reminding(mote.Actor):
            def start(self, ctx, init):
                ctx.recover()
                self.id = ctx.remind("wake", 100, value={"n": 1})

        rt, host = runtime(Reminding)
        self.assertEqual(host.named("remind"), [("wake", b'{"n":1}', 100, None)])
        self.assertTrue(rt.ctx.cancel_reminder(rt.actor.id))


class Asks(unittest.TestCase):
    def test_answered_and_ask_timeout_receive_the_ask_id(self):
        class Asker(mote.Actor):
            def start(self, ctx, init):
                self.id = ctx.ask("/user/b", "q", {"x": 1}, timeout_ms=50)
                self.events = []

            def answered(self, ctx, ask_id, reply):
                self.events.append(("answered", ask_id, reply.kind, reply.value))

            def ask_timeout(self, ctx, ask_id):
                self.events.append(("timeout", ask_id))

        rt, host = runtime(Asker)
        (to, kind, body, timeout), = host.named("ask")
        self.assertEqual((to.path, to.incarnation, kind, body, timeout),
                         ("/user/b", 0, "q", b'{"x":1}', 50))
        ask = rt.actor.id
        rt.receive(msg("a", b"42", mote.Address(f"/system/ask/{ask}", ask)))
        rt.receive(msg(mote.ASK_TIMEOUT, b"", mote.Address("/system/ask/9", 9)))
        self.assertEqual(rt.actor.events, [("answered", ask, "a", 42), ("timeout", 9)])

    def test_by_default_a_reply_is_handled_as_a_message(self):
        rt, _ = runtime(Orders)
        rt.receive(msg("order", b'{"customer":"cy","amount":3}', mote.Address("/system/ask/4", 4)))
        self.assertEqual(rt.actor.totals, {"cy": 3})


class Supervision(unittest.TestCase):
    def test_supervise_decides_from_the_failure_and_none_defers(self):
        class Parent(mote.Actor):
            def start(self, ctx, init):
                ctx.set_strategy(mote.Strategy.one_for_one(mote.Directive.STOP).restarts(2, 50))
                self.child = ctx.spawn("c", "worker", "hello")
                ctx.watch(self.child)

            def supervise(self, ctx, child, failure):
                if "resume" in failure.error:
                    return mote.Directive.RESUME
                if failure.name == "trap":
                    raise RuntimeError("a bug in supervise")
                return None

        rt, host = runtime(Parent)
        (strategy,), = host.named("set_strategy")
        self.assertEqual((strategy.directive, strategy.max_restarts, strategy.within_ms),
                         (mote.Directive.STOP, 2, 50))
        self.assertEqual(host.named("spawn")[0][1:], ("worker", b"hello"))
        self.assertEqual(host.named("watch"), [(rt.actor.child,)])
        child, error = rt.actor.child, mote.FailureKind.ERROR
        self.assertEqual(rt.supervise(child, error, "please resume"), mote.Directive.RESUME)
        self.assertIsNone(rt.supervise(child, error, "other"))
        # An exception in supervise defers to the strategy (and is logged).
        self.assertIsNone(rt.supervise(child, mote.FailureKind.TRAP, "boom"))
        self.assertIn("supervise failed", host.named("log")[-1][1])

    def test_spawn_with_and_spawn_on_carry_the_limits(self):
        class Parent(mote.Actor):
            def start(self, ctx, init):
                ctx.spawn_with("w", "worker", "hi", memory_limit=1 << 20, mailbox_capacity=8)
                ctx.spawn_on("b", "r", "worker", b"", cpu_deadline_ms=50)

        rt, host = runtime(Parent)
        (name, module, init, options), = host.named("spawn_with")
        self.assertEqual((name, module, init), ("w", "worker", b"hi"))
        self.assertEqual((options.memory_limit, options.mailbox_capacity, options.descendants),
                         (1 << 20, 8, None))
        (node, name, _, _, options), = host.named("spawn_on")
        self.assertEqual((node, name, options.cpu_deadline_ms), ("b", "r", 50))

    def test_http_request_builds_the_contract_request(self):
        class Caller(mote.Actor):
            def start(self, ctx, init):
                self.id = ctx.http_request("http://127.0.0.1:1/x", method="POST",
                                           headers=[("a", "b")], body="hi", timeout_ms=500)

        rt, host = runtime(Caller)
        (request,), = host.named("http_request")
        self.assertEqual((request.method, request.url, request.headers, request.body,
                          request.timeout_ms),
                         ("POST", "http://127.0.0.1:1/x", [("a", "b")], b"hi", 500))
        self.assertIsInstance(rt.actor.id, int)

    def test_stopping_gets_the_reason_by_name(self):
        class Stops(mote.Actor):
            def stopping(self, ctx, reason):
                self.reason = reason

        rt, _ = runtime(Stops)
        rt.stopping(fake_wit.StopReason_Shutdown())
        self.assertEqual(rt.actor.reason, "shutdown")


class Counter(mote.Actor):
    def start(self, ctx, init):
        self.count = 0
        self.migrated_from = None

    def receive(self, ctx, env):
        self.count += 1

    def save_state(self):
        return mote.state({"count": self.count})

    def migrate(self, ctx, from_version, saved):
        if from_version == "0":
            raise ValueError("too old")
        self.count = mote.from_state(saved)["count"]
        self.migrated_from = from_version


class Upgrades(unittest.TestCase):
    def test_state_carries_over_to_migrate(self):
        old, _ = runtime(Counter)
        old.receive(msg("x"))
        old.receive(msg("x"))
        saved = old.save_state()
        new = mote.Runtime(Counter)
        new.migrate("1", saved)
        self.assertEqual((new.actor.count, new.actor.migrated_from), (2, "1"))

    def test_a_refused_migration_is_an_error(self):
        with self.assertRaises(Err) as raised:
            mote.Runtime(Counter).migrate("0", b"{}")
        self.assertIn("ValueError: too old", raised.exception.value)

    def test_by_default_no_state_is_saved_and_none_is_accepted(self):
        rt, _ = runtime(mote.Actor)
        self.assertIsNone(rt.save_state())
        with self.assertRaises(Err):
            mote.Runtime(mote.Actor).migrate("1", b"")


class Exports(unittest.TestCase):
    def test_export_gives_the_three_classes_componentize_py_looks_for(self):
        fake_wit.reset()
        actor, supervisor, upgrade = mote.export(Counter)
        actor().start(b"")
        actor().receive(msg("x"))
        self.assertEqual(upgrade().save_state(), b'{"count":1}')
        self.assertIsNone(supervisor().supervise(mote.Address("/c", 1),
                                                 mote.FailureKind.TRAP, "x"))

    def test_export_warms_the_sdk_without_calling_the_host(self):
        host = fake_wit.reset()
        actor, _, _ = mote.export(Counter)
        self.assertEqual(host.calls, [], "at pre-initialisation the imports do not exist yet")
        self.assertEqual(actor.runtime.behaviors, [])
        self.assertIsNone(actor.runtime.actor, "the actor itself starts only in `start`")

    def test_export_freezes_the_heap_the_import_left(self):
        import gc

        gc.unfreeze()
        leftover = [object() for _ in range(10)]  # noqa: F841 - alive at the export
        mote.export(Counter)
        self.assertGreater(gc.get_freeze_count(), 0, "the snapshot's objects are frozen")
        gc.unfreeze()


class Patterns(unittest.TestCase):
    """The pattern components' messages keep the Rust SDK's JSON schema (checked end to end by
    the mixed-language pattern test)."""

    def test_a_configuration_is_the_json_init_and_replies_decode_typed(self):
        from mote.patterns import init, throttle

        config = throttle.Config(target="/user/sink", rate=10, burst=2)
        self.assertEqual(json.loads(init(config)),
                         {"target": "/user/sink", "rate": 10, "per_ms": 1000, "burst": 2,
                          "queue": 1000})
        self.assertEqual(mote.kind_of(throttle.SetRate), "throttle.set-rate")
        self.assertEqual(mote.encode(throttle.GetStatus()), b"{}")
        status = mote.decode_as(throttle.Status, b'{"queued":1,"forwarded":2,"refused":0,'
                                                 b'"rate":10,"per_ms":1000}')
        self.assertEqual((status.queued, status.forwarded), (1, 2))

    def test_router_config_pool_broadcast_and_routees(self):
        from mote.patterns import init, router

        group = router.Config(strategy=router.CONSISTENT_HASH, hash_key="user",
                              routees=["/user/a"])
        self.assertEqual(json.loads(init(group)),
                         {"strategy": "consistent-hash", "hash_key": "user",
                          "routees": ["/user/a"], "pool": None, "max_routees": 1000})
        pool = router.Config(strategy="smallest-mailbox", pool=router.Pool("counter", 4))
        self.assertEqual(json.loads(init(pool))["pool"],
                         {"module": "counter", "size": 4, "init": "", "directive": "restart",
                          "max_restarts": 3, "within_ms": 10000})
        back = mote.decode_as(router.Config, b'{"strategy": "smallest-mailbox", '
                                             b'"pool": {"module": "counter", "size": 4}}')
        self.assertEqual(back, pool)
        self.assertEqual(json.loads(mote.encode(router.AddRoutee(path="/user/b"))),
                         {"path": "/user/b"})
        self.assertEqual(mote.kind_of(router.RemoveRoutee), "router.remove-routee")
        self.assertEqual(mote.encode(router.GetRoutees()), b"{}")
        broadcast = router.Broadcast.of(Ping(n=3))
        self.assertEqual(json.loads(mote.encode(broadcast)),
                         {"kind": "Ping", "body": {"n": 3}, "bytes": None})
        self.assertEqual(broadcast.message(), ("Ping", b'{"n":3}'))
        binary = router.Broadcast(kind="bin", bytes=b"\x07\x08")
        self.assertEqual(json.loads(mote.encode(binary))["bytes"], [7, 8])
        self.assertEqual(mote.decode_as(router.Broadcast, mote.encode(binary)), binary)
        routees = mote.decode_as(router.Routees, b'{"routees":["/user/a","/user/r/routee-0"],'
                                                 b'"routed":7}')
        self.assertEqual((routees.routees, routees.routed), (["/user/a", "/user/r/routee-0"], 7))

    def test_circuit_breaker_config_and_state(self):
        from mote.patterns import circuit_breaker as cb
        from mote.patterns import init

        config = cb.Config(target="/user/db", max_reset_timeout_ms=60000,
                           failure_kinds=["db.error"])
        self.assertEqual(json.loads(init(config)),
                         {"target": "/user/db", "max_failures": 5, "call_timeout_ms": 1000,
                          "reset_timeout_ms": 10000, "max_reset_timeout_ms": 60000,
                          "failure_kinds": ["db.error"], "max_pending": 1000})
        self.assertEqual(mote.kind_of(cb.GetState), "circuit-breaker.get-state")
        self.assertEqual(mote.encode(cb.GetState()), b"{}")
        status = mote.decode_as(cb.Status, b'{"state":"half-open","failures":0,"pending":1,'
                                           b'"retry_in_ms":0,"reset_timeout_ms":20000,'
                                           b'"passed":9,"refused":4,"opened":2}')
        self.assertEqual((status.state, status.opened), (cb.HALF_OPEN, 2))
        self.assertEqual(mote.kind_of(cb.Status), "circuit-breaker.state")
        self.assertEqual(mote.decode_as(cb.Open, b'{"retry_in_ms":250}').retry_in_ms, 250)
        self.assertEqual(mote.decode_as(cb.Failed, b'{"reason":"timeout"}').reason, "timeout")

    def test_reaper_gather_and_its_replies(self):
        from mote.patterns import init, reaper

        self.assertEqual(json.loads(init(reaper.Config(reduce=reaper.Reduce(reaper.COUNT)))),
                         {"max_gathers": 1000, "max_targets": 1000, "max_asks": 1000,
                          "deadline_ms": 5000, "reduce": {"op": "count"}})
        gather = reaper.Gather.of(["/user/a", "/user/b"], Ping(n=1), deadline_ms=500, want=1,
                                  reduce=reaper.Reduce("sum", "n"))
        self.assertEqual(json.loads(mote.encode(gather)),
                         {"targets": ["/user/a", "/user/b"], "kind": "Ping", "body": {"n": 1},
                          "base64": None, "deadline_ms": 500, "want": 1,
                          "reduce": {"op": "sum", "field": "n"}})
        self.assertEqual(mote.decode_as(reaper.Gather, mote.encode(gather)), gather)
        self.assertEqual(reaper.payload(b"\x02\x05"), (None, "AgU="))
        self.assertEqual(reaper.payload(b'{"n": 1}'), ({"n": 1}, None))
        gathered = mote.decode_as(reaper.Gathered, json.dumps({
            "replies": [{"from": "/user/a", "kind": "Ping", "body": {"n": 2}},
                        {"from": "/user/b", "kind": "raw", "base64": "AgU="}],
            "timed_out": ["/user/c"], "failed": [{"target": "x", "error": "bad path"}],
            "complete": False}).encode())
        first, second = gathered.replies
        self.assertEqual((first.from_, first.decode(Ping)), ("/user/a", Ping(n=2)))
        self.assertEqual(second.payload_bytes(), b"\x02\x05")
        self.assertEqual((gathered.timed_out, gathered.failed[0].error, gathered.complete),
                         (["/user/c"], "bad path", False))
        self.assertEqual(gathered.to_json()["replies"][0]["from"], "/user/a")
        reduced = mote.decode_as(reaper.Reduced, b'{"value":5.5,"from":3,"timed_out":[],'
                                                 b'"complete":true}')
        self.assertEqual((reduced.value, reduced.from_, reduced.failed), (5.5, 3, []))
        refused = mote.decode_as(reaper.Refused, b'{"bound":"max_targets","limit":2,'
                                                 b'"reason":"3 targets"}')
        self.assertEqual(refused.limit, 2)
        self.assertEqual(mote.decode_as(reaper.Status, b'{"gathering":1,"asks_pending":2,'
                                                       b'"gathered":3,"refused":0}').gathered, 3)

    def test_service_manager_config_and_replies(self):
        from mote.patterns import init, service_manager as sm

        config = sm.Config(module="w", init="7", strategy=sm.RESTART, max_restarts=1)
        self.assertEqual(json.loads(init(config)),
                         {"module": "w", "init": "7", "max_workers": 16, "queue": 1000,
                          "worker_timeout_ms": 30000, "strategy": "restart",
                          "max_restarts": 1})
        self.assertEqual(mote.encode(sm.GetStatus()), b"{}")
        failed = mote.decode_as(sm.Failed, b'{"failure":"timeout","reason":"no reply in 30s"}')
        self.assertEqual(failed.failure, "timeout")
        status = mote.decode_as(sm.Status, b'{"running":2,"queued":0,"served":10,"failed":1,'
                                           b'"refused":0,"peak":4}')
        self.assertEqual((status.served, status.peak), (10, 4))

    def test_pipeline_and_its_supervision(self):
        from mote.patterns import init, pipeline
        from mote.patterns.supervision import Supervision

        config = pipeline.Config(stages=[pipeline.Stage("stage", {"add": 1}),
                                         pipeline.Stage("upper")], sink="/user/out")
        self.assertEqual(json.loads(init(config)),
                         {"stages": [{"module": "stage", "init": {"add": 1}},
                                     {"module": "upper", "init": None}],
                          "sink": "/user/out", "stage_timeout_ms": 5000, "max_in_flight": 1000,
                          "strategy": {"directive": "restart", "max_restarts": 3,
                                       "within_ms": 10000, "backoff_min_ms": 10,
                                       "backoff_max_ms": 1000}})
        named = pipeline.Config(stages=[pipeline.Stage("s")], strategy="resume")
        self.assertEqual(json.loads(init(named))["strategy"], "resume")
        back = mote.decode_as(pipeline.Config, b'{"stages": [{"module": "s"}], '
                                               b'"strategy": {"directive": "stop", '
                                               b'"max_restarts": 9}}')
        self.assertEqual(back.strategy, Supervision("stop", max_restarts=9))
        self.assertEqual(mote.decode_as(pipeline.Config, init(config)), config)
        self.assertEqual(mote.decode_as(pipeline.Config, b'{"stages": [{"module": "s"}], '
                                                         b'"strategy": "resume"}').strategy,
                         Supervision("resume"))
        self.assertEqual(json.loads(mote.encode(pipeline.Failed(reason="no"))),
                         {"reason": "no", "input": 0, "stage": 0})
        self.assertEqual(mote.decode_as(pipeline.Failed, b'{"reason": "no"}'),
                         pipeline.Failed(reason="no"))
        self.assertEqual(mote.kind_of(pipeline.DropInput), "pipeline.drop")
        status = mote.decode_as(pipeline.Status, b'{"stages":2,"in_flight":1,"completed":5,'
                                                  b'"failed":0,"dropped":1,"refused":0}')
        self.assertEqual((status.stages, status.completed), (2, 5))

    def test_pipeline_builder_build_is_flat(self):
        from mote.patterns import init, pipeline, pipeline_builder as pb

        self.assertEqual(json.loads(init(pb.Config(strategy="stop"))),
                         {"module": "pipeline", "max_pipelines": 100, "ready_timeout_ms": 5000,
                          "strategy": "stop"})
        build = pb.Build.of("p", pipeline.Config(stages=[pipeline.Stage("upper", "")]))
        wire = json.loads(mote.encode(build))
        self.assertEqual((wire["name"], wire["stages"]), ("p", [{"module": "upper", "init": ""}]))
        self.assertEqual(mote.decode_as(pb.Build, mote.encode(build)), build)
        self.assertEqual(mote.kind_of(pb.List), "pipeline-builder.list")
        self.assertEqual(json.loads(mote.encode(pb.TearDown(name="p"))), {"name": "p"})
        built = mote.decode_as(pb.Built, b'{"name":"p","path":"/user/builder/p"}')
        self.assertEqual(built.path, "/user/builder/p")
        self.assertEqual(mote.decode_as(pb.TornDown, b'{"name":"p","existed":true}').existed,
                         True)
        self.assertEqual(mote.decode_as(pb.Pipelines, b'{"pipelines":["a","p"]}').pipelines,
                         ["a", "p"])

    def test_pod_manager_config_and_delivery(self):
        from mote.patterns import init, pod_manager as pm
        from mote.patterns.supervision import Supervision

        config = pm.Config(module="counter", init={"start": 1},
                           strategy=Supervision("restart", max_restarts=5, within_ms=1000),
                           create_on_dead_letter=False)
        self.assertEqual(json.loads(init(config)),
                         {"module": "counter", "init": {"start": 1}, "max_pods": 1000,
                          "strategy": {"directive": "restart", "max_restarts": 5,
                                       "within_ms": 1000, "backoff_min_ms": 10,
                                       "backoff_max_ms": 1000},
                          "create_on_dead_letter": False})
        note = pm.Deliver.of("a", Order(customer="ada", amount=3))
        self.assertEqual(json.loads(mote.encode(note)),
                         {"pod": "a", "kind": "order", "body": {"customer": "ada", "amount": 3},
                          "bytes": None})
        self.assertEqual(note.body_bytes(), b'{"customer":"ada","amount":3}')
        binary = pm.Deliver(pod="b", kind="bin", bytes=b"\x07")
        self.assertEqual(json.loads(mote.encode(binary))["bytes"], [7])
        self.assertEqual(mote.decode_as(pm.Deliver, b'{"pod": "c", "kind": "k"}').body_bytes(),
                         b"")
        self.assertEqual(json.loads(mote.encode(pm.Create(pod="a"))), {"pod": "a"})
        created = mote.decode_as(pm.Created, b'{"pod":"a","path":"/user/pods/a","new":true}')
        self.assertEqual((created.path, created.new), ("/user/pods/a", True))
        self.assertEqual(mote.decode_as(pm.Pods, b'{"pods":["a","b"]}').pods, ["a", "b"])
        self.assertEqual(mote.decode_as(pm.Removed, b'{"pod":"a","existed":false}').existed,
                         False)
        self.assertTrue(pm.valid_pod_name("acme-1"))
        for bad in ["", ".", "..", "a/b", "a#1", "a\n", "x" * 129]:
            self.assertFalse(pm.valid_pod_name(bad), bad)


if __name__ == "__main__":
    unittest.main()
