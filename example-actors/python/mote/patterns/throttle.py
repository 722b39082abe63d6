"""`throttle`: a relay that passes messages on to its target at a set rate, in order and with
their original sender; the surplus waits in a bounded queue (past it: dead letters)."""

from dataclasses import dataclass
from typing import Optional

from ..codec import message

MODULE = "throttle"


@message("throttle.config")
@dataclass
class Config:
    """The configuration (spawn `init`): `rate` messages per `per_ms` to `target`."""

    target: str
    rate: int
    per_ms: int = 1000
    burst: Optional[int] = None
    queue: int = 1000


@message("throttle.set-rate")
@dataclass
class SetRate:
    """A new rate from now on."""

    rate: int
    per_ms: int = 1000


@message("throttle.get-status")
@dataclass
class GetStatus:
    """Asks for a `Status`."""


@message("throttle.status")
@dataclass
class Status:
    """How the throttle is doing: the reply to `GetStatus`."""

    queued: int = 0
    forwarded: int = 0
    refused: int = 0
    rate: int = 0
    per_ms: int = 0
