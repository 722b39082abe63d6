"""`circuit-breaker`: an actor in front of one target that passes each request on as an ask
and relays the reply; while the target keeps failing it refuses requests at once (`Open`,
`Busy`, `Failed` replies). Control kind: `GetState` (replied with `Status`); every other kind
is a request."""

from dataclasses import dataclass, field
from typing import List, Optional

from ..codec import message

MODULE = "circuit-breaker"

#: The breaker's states (`Status.state`).
CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half-open"
STATES = (CLOSED, OPEN, HALF_OPEN)


@message("circuit-breaker.config")
@dataclass
class Config:
    """The configuration (spawn `init`): the `target` and its thresholds and timeouts."""

    target: str
    max_failures: int = 5
    call_timeout_ms: int = 1000
    reset_timeout_ms: int = 10000
    max_reset_timeout_ms: Optional[int] = None
    failure_kinds: List[str] = field(default_factory=list)
    max_pending: int = 1000


@message("circuit-breaker.get-state")
@dataclass
class GetState:
    """Asks for the breaker's `Status`."""


@message("circuit-breaker.state")
@dataclass
class Status:
    """How the breaker is doing, the reply to `GetState`: `state` is one of `"closed"`,
    `"open"`, `"half-open"`."""

    state: str = CLOSED
    failures: int = 0
    pending: int = 0
    retry_in_ms: int = 0
    reset_timeout_ms: int = 0
    passed: int = 0
    refused: int = 0
    opened: int = 0


@message("circuit-breaker.open")
@dataclass
class Open:
    """The reply to a request the open breaker refused: milliseconds until a trial may pass."""

    retry_in_ms: int = 0


@message("circuit-breaker.busy")
@dataclass
class Busy:
    """The reply to a request refused because `max_pending` requests wait already."""

    pending: int = 0


@message("circuit-breaker.failed")
@dataclass
class Failed:
    """The reply to a request the target did not answer in time (a failure)."""

    reason: str
