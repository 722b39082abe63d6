"""A stateful Python actor: keeps order totals per customer, answers queries, and forwards each
order (with the customer's running total) to the path given as init, if any.

Messages (JSON bodies):
- `order` {"id", "customer", "amount"}: counted, forwarded as `order` with "total" added.
- `totals`: replies `totals` {"count", "totals": {customer: total}}.
- `fail`: raises (a supervised failure, like a Rust trap).
"""

import mote_actor


class Orders(mote_actor.Actor):
    def start(self, ctx, init):
        self.next = init.decode().strip() or None
        self.count = 0
        self.totals = {}
        cause = ctx.restart_cause()
        ctx.log(f"py_orders started (restart cause: {cause})")

    def receive(self, ctx, msg):
        if msg.kind == "order":
            order = msg.value
            customer = order["customer"]
            self.count += 1
            self.totals[customer] = self.totals.get(customer, 0) + order["amount"]
            if self.next:
                ctx.tell(self.next, "order", dict(order, total=self.totals[customer]))
        elif msg.kind == "totals":
            ctx.reply("totals", {"count": self.count, "totals": self.totals})
        elif msg.kind == "fail":
            raise RuntimeError("py_orders was asked to fail")
        else:
            ctx.log(f"unhandled {msg!r}", "warn")


Actor = mote_actor.export(Orders)
