"""The features actor of every guest SDK, in Python (its spec is `features_work_through_mote` in
tests/src/scenarios.rs): asks, topics, groups, the stash, behaviours, reminders, forwarding, the
urgent lane, lookup and the clock, spoken in JSON.

Init: the path R to report to. `start` recovers (reminders need a persistent actor), subscribes
to topic `features` and joins group `workers`. Each report is the protocol's `Report` in JSON,
{"from": <its path>, "label", "value"}, told to R.
- `ask-self` {"n"} asks itself `echo` {"n"} (2 s); the reply reaches `answered`: `answered` n
  (the reply's);
- `echo` {"n"} replies `echoed` {"n": n + 1};
- `ask-silent` asks itself `silent` (100 ms), which it ignores: `ask_timeout` reports
  `ask-timeout` 1;
- `publish` {"n"} publishes `news` {"n"} to `features` (`published`, subscribers reached);
  `news` {"n"} is reported `news` n;
- `broadcast` {"n"} sends `work` {"n"} to every member of `workers` (`broadcast`, members
  reached), `group` {"n"} to one (`grouped` 1 if one got it); `work` {"n"} is reported `work` n;
- `close` becomes `closed`: there `add` is stashed (`stashed` n) and `open` unbecomes and
  unstashes all; `add` {"n"} adds n to the total, reported `total` (the new total);
- `remind` {"delay_ms"} sets a reminder `reminded` {"n": 1}, reported `reminded` n when it
  comes; `remind-cancel` {"delay_ms"} sets one and cancels it at once (`reminder-cancelled` 1 if
  the cancel found it);
- `forward` {"n"} forwards a Report `forwarded` n to R (the sender stays the original one);
- `urgent` {"n"} tells R a Report `urgent` n on its urgent lane;
- `alias` takes the alias `feat` (`aliased` 1 if it got `/system/alias/feat`), `unalias` gives
  it up (`unaliased` 1 if it held it); `delivery` sets at-most-once delivery, reads it back and
  sets at-least-once again (`delivery` 1 if it read at-most-once);
- `inspect` reports `resolved` 1 if its own path resolves to its own incarnation, `depth` 1 if
  its own mailbox has a depth and a path nobody lives at has none, and `clock` 1
  if its clock has advanced since `start`.
"""

import mote


class Features(mote.Actor):
    def start(self, ctx, init):
        self.report_to = init.decode().strip()
        if not self.report_to:
            raise ValueError("init: the path to report to is missing")
        self.me = ctx.myself()
        self.started_at = ctx.since_start()
        self.total = 0
        # The asks it made (only of itself): ask id -> whether its request was handled yet.
        # An ask's endpoint is the sender of both the request and the reply, so the first
        # message from it is the request and the second the reply.
        self.asks = {}
        ctx.recover()
        ctx.subscribe("features")
        ctx.join("workers")

    def report(self, ctx, label, value, send=None):
        """Tells R the Report `label` `value` (or sends it with `send`: forward, tell_urgent)."""
        report = {"from": self.me.path, "label": label, "value": int(value)}
        (send or ctx.tell)(self.report_to, "Report", report)

    def receive(self, ctx, env):
        body = env.value if env.body else {}
        n = body.get("n", 0)
        match env.kind:
            case "ask-self":
                self.asks[ctx.ask(self.me.path, "echo", {"n": n}, timeout_ms=2000)] = False
            case "echo":
                ctx.reply("echoed", {"n": n + 1})
            case "ask-silent":
                self.asks[ctx.ask(self.me.path, "silent", {}, timeout_ms=100)] = False
            case "silent" | "open":
                pass
            case "publish":
                self.report(ctx, "published", ctx.publish("features", "news", {"n": n}))
            case "broadcast":
                self.report(ctx, "broadcast", ctx.broadcast_group("workers", "work", {"n": n}))
            case "group":
                self.report(ctx, "grouped", ctx.tell_group("workers", "work", {"n": n}))
            case "news" | "work" | "reminded":
                self.report(ctx, env.kind, n)
            case "close":
                ctx.become_(Features.closed)
            case "add":
                self.total += n
                self.report(ctx, "total", self.total)
            case "remind":
                ctx.remind("reminded", body["delay_ms"], value={"n": 1})
            case "remind-cancel":
                reminder = ctx.remind("reminded", body["delay_ms"], value={"n": 1})
                self.report(ctx, "reminder-cancelled", ctx.cancel_reminder(reminder))
            case "forward":
                self.report(ctx, "forwarded", n, send=ctx.forward)
            case "urgent":
                self.report(ctx, "urgent", n, send=ctx.tell_urgent)
            case "alias":
                self.report(ctx, "aliased", ctx.alias("feat") == "/system/alias/feat")
            case "unalias":
                self.report(ctx, "unaliased", ctx.unalias("feat"))
            case "delivery":
                ctx.set_delivery(mote.DeliveryMode.AT_MOST_ONCE)
                mode = ctx.delivery()
                ctx.set_delivery(mote.DeliveryMode.AT_LEAST_ONCE)
                self.report(ctx, "delivery", mode == mote.DeliveryMode.AT_MOST_ONCE)
            case "inspect":
                found = ctx.resolve(self.me.path)
                mine = found is not None and found.incarnation == self.me.incarnation
                self.report(ctx, "resolved", mine)
                self.report(ctx, "clock", ctx.since_start() > self.started_at)
                depth = ctx.mailbox_depth(self.me.path)
                nobody = ctx.mailbox_depth("/user/nobody")
                self.report(ctx, "depth", depth is not None and nobody is None)
            case _:
                ctx.warn(f"unhandled message of kind `{env.kind}`")

    def closed(self, ctx, env):
        """The behaviour after `close`: adds wait in the stash until `open`. The stash and the
        unbecome take effect when it returns, so the stashed adds come back to `receive`."""
        if env.kind == "add":
            ctx.stash()
            self.report(ctx, "stashed", env.value["n"])
        elif env.kind == "open":
            ctx.unbecome()
            ctx.unstash_all()
        else:
            self.receive(ctx, env)

    def answered(self, ctx, ask_id, reply):
        handled = self.asks.get(ask_id)
        if handled is None:  # a request another actor asked of this one
            return NotImplemented
        if not handled:  # its own request to itself: `receive` handles it
            self.asks[ask_id] = True
            return NotImplemented
        del self.asks[ask_id]
        self.report(ctx, "answered", reply.value["n"])
        return None

    def ask_timeout(self, ctx, ask_id):
        if self.asks.pop(ask_id, None) is not None:
            self.report(ctx, "ask-timeout", 1)


Actor, Supervisor, Upgrade = mote.export(Features)
