"""A stateful Python actor on the `mote` SDK: keeps order totals per customer, answers queries,
and forwards each order (with the customer's running total) to the path given as init, if any.

Messages (JSON bodies):
- `order` {"id", "customer", "amount"}: counted, forwarded as `order` with "total" added.
- `totals`: replies `totals` {"count", "totals": {customer: total}}.
- `fail`: raises (a supervised failure, like a Rust trap).
"""

from dataclasses import dataclass

import mote


@mote.message("order")
@dataclass
class Order:
    id: int
    customer: str
    amount: int


class Orders(mote.Actor):
    def start(self, ctx, init):
        self.next = init.decode().strip() or None
        self.count = 0
        self.totals = {}
        ctx.info(f"py_orders started (restart cause: {ctx.restart_cause()})")

    def receive(self, ctx, env):
        if env.kind == "order":
            order = env.decode(Order)
            self.count += 1
            self.totals[order.customer] = self.totals.get(order.customer, 0) + order.amount
            if self.next:
                ctx.tell(self.next, "order", dict(env.value, total=self.totals[order.customer]))
        elif env.kind == "totals":
            ctx.reply("totals", {"count": self.count, "totals": self.totals})
        elif env.kind == "fail":
            raise RuntimeError("py_orders was asked to fail")
        else:
            ctx.warn(f"unhandled {env!r}")


Actor, Supervisor, Upgrade = mote.export(Orders)
