"""`router`: passes every message on to one of its routees, chosen by a strategy, with the
message's original sender. Routees are paths (a group) and/or a `Pool` of children the router
spawns and supervises. Control kinds: `AddRoutee`, `RemoveRoutee`, `GetRoutees` (replied with
`Routees`), `Broadcast`; every other kind is routed."""

from dataclasses import dataclass, field
from typing import Any, List, Optional

from ..codec import message
from ._wire import Wire, body_of, byte_values, json_bytes

MODULE = "router"

#: Strategies (`Config.strategy`).
ROUND_ROBIN = "round-robin"
RANDOM = "random"
CONSISTENT_HASH = "consistent-hash"
SMALLEST_MAILBOX = "smallest-mailbox"
STRATEGIES = (ROUND_ROBIN, RANDOM, CONSISTENT_HASH, SMALLEST_MAILBOX)

#: What a pool routee's failure leads to (`Pool.directive`).
DIRECTIVES = ("restart", "resume", "stop", "escalate")


@dataclass
class Pool(Wire):
    """`size` routees of `module` the router spawns (`routee-0`, ...); `directive` is one of
    `"restart"` (default), `"resume"`, `"stop"`, `"escalate"`."""

    module: str
    size: int
    init: str = ""
    directive: str = "restart"
    max_restarts: int = 3
    within_ms: int = 10000


@message("router.config")
@dataclass
class Config(Wire):
    """The configuration (spawn `init`): `strategy` is one of `"round-robin"`, `"random"`,
    `"consistent-hash"` (needs `hash_key`), `"smallest-mailbox"`."""

    strategy: str
    hash_key: Optional[str] = None
    routees: List[str] = field(default_factory=list)
    pool: Optional[Pool] = None
    max_routees: int = 1000

    _nested = {"pool": Pool.from_json}


@message("router.add-routee")
@dataclass
class AddRoutee:
    """Adds the routee at `path` (absolute or relative to the router)."""

    path: str


@message("router.remove-routee")
@dataclass
class RemoveRoutee:
    """Removes the routee at `path`, spelled as `Routees` lists it (a pool routee is stopped)."""

    path: str


@message("router.get-routees")
@dataclass
class GetRoutees:
    """Asks for the `Routees`."""


@message("router.routees")
@dataclass
class Routees:
    """The routees now, in routing order, and the messages routed so far: the reply to
    `GetRoutees`."""

    routees: List[str] = field(default_factory=list)
    routed: int = 0


@message("router.broadcast")
@dataclass
class Broadcast(Wire):
    """One message of `kind` to every routee: its body is `body` (any JSON) or `bytes` (a
    binary body, sent as an array of byte values), exactly one of them."""

    kind: str
    body: Any = None
    bytes: Optional[bytes] = None

    _nested = {"bytes": byte_values}

    @classmethod
    def of(cls, msg):
        """A broadcast of a typed message, in its own encoding."""
        kind, body, data = body_of(msg)
        return cls(kind=kind, body=body, bytes=data)

    def message(self):
        """`(kind, body bytes)` of the message to send."""
        if (self.body is None) == (self.bytes is None):
            raise ValueError("router.broadcast: give exactly one of `body` and `bytes`")
        return self.kind, json_bytes(self.body) if self.body is not None else self.bytes
