"""The entity of `example-actors/entity` in Python: a virtual actor (init: its id) whose total
lives in a snapshot, so it passivates and comes back, even after a host restart, with it.

It speaks the protocol's `Entity` in JSON (kind `Entity`): `{"Add":k}`, `"Get"` (replies an
`EntityValue` {"id","total","activations"}), `"Retire"` (deletes its state and stops), `"Stop"`.
"""

from dataclasses import dataclass

import mote


@mote.message
@dataclass
class Durable:
    total: int = 0
    activations: int = 0


class Entity(mote.Actor):
    def start(self, ctx, init):
        self.id = init.decode().strip()
        if not self.id:
            raise ValueError("missing init argument <entity-id>")
        self.durable = ctx.recover_snapshot(Durable) or Durable()
        self.durable.activations += 1
        ctx.save_snapshot(self.durable)
        self.retired = False

    def receive(self, ctx, env):
        order, arg = mote.variant(env.value)
        if order == "Add":
            self.durable.total += arg
            ctx.save_snapshot(self.durable)
        elif order == "Get":
            ctx.reply("EntityValue", {"id": self.id, "total": self.durable.total,
                                      "activations": self.durable.activations})
        elif order == "Retire":
            ctx.delete_state()
            self.retired = True
            ctx.stop_self()
        elif order == "Stop":
            ctx.stop_self()
        else:
            raise mote.Malformed(f"unknown Entity order `{order}`")

    def stopping(self, ctx, reason):
        if ctx.in_shutdown() and not self.retired:
            ctx.save_snapshot(self.durable)


Actor, Supervisor, Upgrade = mote.export(Entity)
