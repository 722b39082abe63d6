"""Mote actors in Python: the guest SDK over the `mote:actor` contract, with the Rust SDK's
names (`Context`, `Actor`, `tell`/`tell_path`/`ask`/`reply`, timers, persistence, supervision,
behaviours, the stash, upgrades).

    from dataclasses import dataclass
    import mote

    @mote.message("order")
    @dataclass
    class Order:
        customer: str
        amount: int

    class Orders(mote.Actor):
        messages = [Order]

        def start(self, ctx, init):
            self.totals = ctx.recover().fold(dict, apply)   # durable: snapshot + events

        def receive(self, ctx, order):
            ctx.persist({"customer": order.customer, "amount": order.amount})
            ...

    Actor, Supervisor, Upgrade = mote.export(Orders)   # the names componentize-py looks for

Build with `componentize-py -d <wit> -w upgradable-actor-world componentize app -p <dir>`.
"""

from . import _wit
from ._wit import types
from .actor import (
    ASK_TIMEOUT,
    DEAD_LETTER,
    HTTP_RESPONSE,
    TERMINATED,
    Actor,
    Runtime,
    export,
    from_state,
    state,
)
from .codec import (
    JSON,
    Codec,
    JsonCodec,
    Malformed,
    decode,
    decode_as,
    encode,
    kind_of,
    message,
    variant,
)
from .context import (
    ASK_PREFIX,
    REPLAY_PAGE,
    Address,
    Context,
    DeadLetter,
    Envelope,
    Error,
    Failure,
    Recovery,
    Strategy,
)

Directive = types.Directive
DeliveryMode = _wit.delivery.DeliveryMode
Scope = types.Scope
FailureKind = types.FailureKind
DEAD_LETTERS_TOPIC = "/system/deadletters"

__all__ = [
    "ASK_PREFIX", "ASK_TIMEOUT", "DEAD_LETTER", "DEAD_LETTERS_TOPIC", "HTTP_RESPONSE", "JSON",
    "REPLAY_PAGE", "TERMINATED", "Actor", "Address", "Codec", "Context", "DeadLetter",
    "DeliveryMode", "Directive", "Envelope", "Error", "Failure", "FailureKind", "JsonCodec",
    "Malformed", "Recovery", "Runtime", "Scope", "Strategy", "decode", "decode_as", "encode", "export",
    "from_state", "kind_of", "message", "state", "variant",
]
