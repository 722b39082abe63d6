"""The ticker of `example-actors/ticker` in Python: timers on demand (init: the report path).

It speaks the example protocol's `Timer` in JSON (kind `Timer`):
- `{"Once":{"delay_ms","tag"}}`, `{"Every":{"period_ms","tag"}}`: a timer to itself that
  delivers `{"Fired":{"tag"}}` once or every period; a `Fired` is reported (`fired`, the tag);
- `{"Cancel":{"tag"}}`: cancels the tag's timer, reported (`cancelled`, 1 if it was pending);
- `{"EveryToSender":{"period_ms","tag"}}`: a `Report` `tick` straight to the sender, every period;
- `{"ReplyAfter":{"delay_ms","tag"}}`: a `Fired` to the sender after the delay.
Reports are the protocol's `Report` {"from","label","value"} in JSON.
"""

from dataclasses import dataclass

import mote


@mote.message
@dataclass
class Report:
    label: str
    value: int
    # `from` is a Python keyword: the field is named `from_` here, `from` on the wire.
    from_: str = ""

    def to_json(self):
        return {"from": self.from_, "label": self.label, "value": self.value}


def fired(tag):
    return {"Fired": {"tag": tag}}


class Ticker(mote.Actor):
    def start(self, ctx, init):
        words = init.decode().split()
        if not words:
            raise ValueError("missing init argument <report-path>")
        self.report_to = words[0]
        self.timers = {}

    def report(self, ctx, to, label, value):
        ctx.tell(to, Report(label, value, ctx.myself().path))

    def sender(self, ctx, order):
        if ctx.sender() is None:
            raise RuntimeError(f"`{order}` needs a sender")
        return ctx.sender()

    def receive(self, ctx, env):
        if env.kind != "Timer":
            return ctx.warn(f"unhandled message of kind `{env.kind}`")
        order, arg = mote.variant(env.value)
        tag = arg["tag"]
        if order == "Once":
            timer = ctx.schedule_self("Timer", arg["delay_ms"], value=fired(tag))
        elif order == "Every":
            period = arg["period_ms"]
            timer = ctx.schedule_self("Timer", period, period, value=fired(tag))
        elif order == "Cancel":
            timer = self.timers.pop(tag, None)
            cancelled = timer is not None and ctx.cancel_timer(timer)
            return self.report(ctx, self.report_to, "cancelled", int(cancelled))
        elif order == "Fired":
            return self.report(ctx, self.report_to, "fired", tag)
        elif order == "EveryToSender":
            to, period = self.sender(ctx, order), arg["period_ms"]
            tick = Report("tick", tag, ctx.myself().path)
            timer = ctx.schedule(to, tick, period, period)
        elif order == "ReplyAfter":
            to = self.sender(ctx, order)
            timer = ctx.schedule(to, "Timer", arg["delay_ms"], value=fired(tag))
        else:
            raise mote.Malformed(f"unknown Timer order `{order}`")
        self.timers[tag] = timer


Actor, Supervisor, Upgrade = mote.export(Ticker)
