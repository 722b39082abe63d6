"""`reaper`: scatter-gather. A `Gather` asks each of its targets the same request and collects
the replies until all came, `want` of them came, or the deadline passed; the requester gets a
`Gathered`, or with a `Reduce` a `Reduced`, or `Refused` past a bound. Control kinds:
`Gather`, `GetStatus` (replied with `Status`).

Bodies travel inside these JSON messages as `body` (a JSON body, as its JSON value) or
`base64` (any other body, in standard base64); neither is the empty body."""

import json
from dataclasses import dataclass, field
from typing import Any, List, Optional

from ..codec import Malformed, decode_as, message
from ._wire import Wire, b64decode, b64encode, body_of, json_bytes, list_of

MODULE = "reaper"

#: Reductions (`Reduce.op`): `count` takes no field.
SUM = "sum"
COUNT = "count"
COLLECT = "collect"
FIRST = "first"
MAX = "max"
MIN = "min"
REDUCTIONS = (SUM, COUNT, COLLECT, FIRST, MAX, MIN)


def payload(data):
    """`(body, base64)` of a body as it travels: a JSON value if it is JSON text, base64
    otherwise; `(None, None)` for the empty body."""
    data = bytes(data)
    if not data:
        return None, None
    try:
        return json.loads(data), None
    except (ValueError, UnicodeDecodeError):
        return None, b64encode(data)


def payload_bytes(body, base64):
    """The body's bytes from its `body` or `base64` form (a JSON value as compact JSON)."""
    if body is not None and base64 is not None:
        raise Malformed("a body is either `body` (JSON) or `base64`, not both")
    if body is not None:
        return json_bytes(body)
    if base64 is not None:
        return b64decode(base64)
    return b""


@dataclass
class Reduce(Wire):
    """How to reduce a gather's replies to one value: `op` is one of `"sum"`, `"count"`,
    `"collect"`, `"first"`, `"max"`, `"min"`; `field` picks a value out of each JSON reply (a
    JSON pointer `/a/b`, or a top-level key; empty: the whole body). JSON `{"op", "field"}`."""

    op: str
    field: str = ""

    def to_json(self):
        return {"op": self.op} if self.op == COUNT else {"op": self.op, "field": self.field}

    @classmethod
    def from_json(cls, value):
        if not isinstance(value, dict) or value.get("op") not in REDUCTIONS:
            raise ValueError(f"not a reduction: {value!r}")
        return cls(op=value["op"], field=value.get("field", ""))


@message("reaper.config")
@dataclass
class Config(Wire):
    """The configuration (spawn `init`; `{}` takes every default): its bounds, the default
    deadline, and a reduction for gathers that name none."""

    max_gathers: int = 1000
    max_targets: int = 1000
    max_asks: int = 1000
    deadline_ms: int = 5000
    reduce: Optional[Reduce] = None

    _nested = {"reduce": Reduce.from_json}


@message("reaper.gather")
@dataclass
class Gather(Wire):
    """Asks every target (paths) the request `kind` with body `body` (JSON) or `base64`, and
    gathers the replies; `deadline_ms` defaults to the config's, `want` to every target."""

    targets: List[str]
    kind: str
    body: Any = None
    base64: Optional[str] = None
    deadline_ms: Optional[int] = None
    want: Optional[int] = None
    reduce: Optional[Reduce] = None

    _nested = {"reduce": Reduce.from_json}

    @classmethod
    def of(cls, targets, msg, deadline_ms=None, want=None, reduce=None):
        """Asks `targets` the typed request `msg`, in its own encoding."""
        kind, body, data = body_of(msg)
        return cls(targets=list(targets), kind=kind, body=body,
                   base64=None if data is None else b64encode(data),
                   deadline_ms=deadline_ms, want=want, reduce=reduce)

    def payload_bytes(self):
        """The request's body bytes."""
        return payload_bytes(self.body, self.base64)


@dataclass
class Reply(Wire):
    """One target's reply in `Gathered.replies`: its sender `from_` (JSON `from`), kind, and
    body (`body` if JSON, else `base64`)."""

    from_: str
    kind: str
    body: Any = None
    base64: Optional[str] = None

    _renamed = {"from_": "from"}

    def payload_bytes(self):
        """The reply's body bytes."""
        return payload_bytes(self.body, self.base64)

    def decode(self, cls):
        """The reply read as `cls` (as `mote.decode_as` reads a body)."""
        return decode_as(cls, self.payload_bytes())


@dataclass
class Failed(Wire):
    """A target the reaper could not ask at all, and why (in `Gathered.failed`)."""

    target: str
    error: str


@message("reaper.gathered")
@dataclass
class Gathered(Wire):
    """What a gather collected (the reply to a `Gather` without a reduction): the replies in
    arrival order, the targets that timed out or could not be asked, and whether it got all it
    wanted."""

    replies: List[Reply] = field(default_factory=list)
    timed_out: List[str] = field(default_factory=list)
    failed: List[Failed] = field(default_factory=list)
    complete: bool = False

    _nested = {"replies": list_of(Reply.from_json), "failed": list_of(Failed.from_json)}


@message("reaper.reduced")
@dataclass
class Reduced(Wire):
    """What a gather reduced its replies to (the reply to a `Gather` with a reduction):
    `value`, computed `from` this many replies (`from_` here)."""

    value: Any = None
    from_: int = 0
    timed_out: List[str] = field(default_factory=list)
    failed: List[Failed] = field(default_factory=list)
    complete: bool = False

    _renamed = {"from_": "from"}
    _nested = {"failed": list_of(Failed.from_json)}


@message("reaper.refused")
@dataclass
class Refused:
    """A gather the reaper did not take on: it would pass `bound` (`max_gathers`,
    `max_targets` or `max_asks`), whose value is `limit`."""

    bound: str
    limit: int
    reason: str


@message("reaper.get-status")
@dataclass
class GetStatus:
    """Asks for a `Status`."""


@message("reaper.status")
@dataclass
class Status:
    """How the reaper is doing: the reply to `GetStatus`."""

    gathering: int = 0
    asks_pending: int = 0
    gathered: int = 0
    refused: int = 0
