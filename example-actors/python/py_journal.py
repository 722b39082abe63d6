"""The journal actor of `example-actors/journal` in Python: a durable list of values, kept as
events with a snapshot every N (init: N, 0 for none), recovered after any restart.

It speaks the example protocol's `Journal` in JSON (kind `Journal`): `{"Append":5}`,
`{"AppendRange":{"from":1,"count":3}}`, `"Query"` (replies a `JournalState`), `"Forget"`
(deletes its state and stops) and `"Crash"` (raises).
"""

import mote


class Journal(mote.Actor):
    def start(self, ctx, init):
        words = init.decode().split()
        self.snapshot_every = int(words[0]) if words else 0
        recovery = ctx.recover()
        self.recovered_from_snapshot = recovery.snapshot is not None
        self.replayed = 0

        def apply(values, value):
            values.append(value)
            self.replayed += 1

        self.values = recovery.fold(list, apply)
        ctx.debug(f"recovered {len(self.values)} values, {self.replayed} replayed")

    def receive(self, ctx, env):
        if env.kind != "Journal":
            return ctx.warn(f"unhandled message of kind `{env.kind}`")
        order, arg = mote.variant(env.value)
        if order == "Append":
            self.append(ctx, arg)
        elif order == "AppendRange":
            for value in range(arg["from"], arg["from"] + arg["count"]):
                self.append(ctx, value)
        elif order == "Query":
            if ctx.sender() is None:
                return ctx.debug("ignoring a Query without a sender")
            ctx.reply("JournalState", {
                "values": self.values,
                "recovered_from_snapshot": self.recovered_from_snapshot,
                "replayed": self.replayed,
            })
        elif order == "Forget":
            ctx.delete_state()
            ctx.stop_self()
        elif order == "Crash":
            raise RuntimeError("journal: crash requested")
        else:
            raise mote.Malformed(f"unknown Journal order `{order}`")

    def append(self, ctx, value):
        if not isinstance(value, int) or value < 0:
            raise mote.Malformed(f"not a value: {value!r}")
        seq = ctx.persist(value)
        self.values.append(value)
        if self.snapshot_every and seq % self.snapshot_every == 0:
            ctx.save_snapshot(self.values)


Actor, Supervisor, Upgrade = mote.export(Journal)
