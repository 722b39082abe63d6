"""A pipeline stage in Python (the `pipeline` pattern's stage protocol, as
`example-actors/stage` speaks it in Rust): it replies to every message, whatever its kind, with
a message of the same kind whose body is the same JSON object with its integer `"value"`
replaced by `value * mul + add`; the other fields pass untouched. Init: `{"add": a, "mul": m}`
(both optional: 0 and 1). A body that is not an object with an integer `value` is rejected (a
dead letter)."""

import mote


class Stage(mote.Actor):
    def start(self, ctx, init):
        config = mote.decode(init) or {}
        self.add = int(config.get("add", 0))
        self.mul = int(config.get("mul", 1))

    def receive(self, ctx, env):
        body = env.value
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise mote.Malformed("a stage takes a JSON object with an integer `value`")
        body["value"] = value * self.mul + self.add
        ctx.reply(env.kind, body)


Actor, Supervisor, Upgrade = mote.export(Stage)
