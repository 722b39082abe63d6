"""The supervisor of `example-actors/supervisor` in Python, for its `by-error` mode: a parent
that decides per failure in its `supervise` hook, with a strategy and death watch.

Init: `<one|all> <resume|restart|stop|escalate|by-error> <max-restarts> <within-ms> <children>
<child-module> <report-path> [backoff-min-ms] [backoff-max-ms] [node]`, as the Rust one's: it
sets its strategy (`by-error` has `restart` as the strategy's directive), spawns `c0..cN` from
the module with the report path as init (on the cluster node `node` if given: `spawn_on`), and
watches them.
In `by-error` mode the first of `resume`, `restart`, `stop`, `escalate` found in a child's error
text is the directive (none: the strategy decides). It reports (the protocol's `Report`, JSON)
`kind:<failure kind>` for every failure and `terminated` (value: the incarnation) for every
child that stops.
"""

import mote

DIRECTIVES = {
    "resume": mote.Directive.RESUME,
    "restart": mote.Directive.RESTART,
    "stop": mote.Directive.STOP,
    "escalate": mote.Directive.ESCALATE,
}


class Parent(mote.Actor):
    def start(self, ctx, init):
        words = init.decode().split()
        if len(words) < 7:
            raise ValueError("init: <scope> <directive> <max-restarts> <within-ms> <children> "
                             "<child-module> <report-path>")
        scope, mode, max_restarts, within_ms, count, module, self.report_to = words[:7]
        self.by_error = mode == "by-error"
        directive = mote.Directive.RESTART if self.by_error else DIRECTIVES[mode]
        strategy = (mote.Strategy.one_for_one(directive) if scope == "one"
                    else mote.Strategy.all_for_one(directive))
        backoff_min = int(words[7]) if len(words) > 7 else 0
        backoff_max = int(words[8]) if len(words) > 8 else 0
        node = words[9] if len(words) > 9 else None
        strategy = strategy.restarts(int(max_restarts), int(within_ms))
        ctx.set_strategy(strategy.backoff(backoff_min, backoff_max))
        for i in range(int(count)):
            if node is None:
                child = ctx.spawn(f"c{i}", module, self.report_to)
            else:
                child = ctx.spawn_on(node, f"c{i}", module, self.report_to)
            ctx.watch(child)
        ctx.info(f"py_supervisor: {count} children from `{module}`, {mode}")

    def report(self, ctx, frm, label, value):
        ctx.tell(self.report_to, "Report", {"from": frm, "label": label, "value": value})

    def supervise(self, ctx, child, failure):
        self.report(ctx, child.path, f"kind:{failure.name}", 0)
        if not self.by_error:
            return None
        directive = next((d for name, d in DIRECTIVES.items() if name in failure.error), None)
        ctx.info(f"py_supervisor: {child.path} failed with `{failure.error}`: {directive}")
        return directive

    def terminated(self, ctx, who):
        self.report(ctx, who.path, "terminated", who.incarnation)

    def receive(self, ctx, env):
        ctx.warn(f"unhandled message of kind `{env.kind}`")


Actor, Supervisor, Upgrade = mote.export(Parent)
