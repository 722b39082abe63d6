"""`service-manager`: every request is handled by a fresh worker spawned for it from
`Config.module`; the worker's reply goes to the requester from the manager itself. A failed or
late worker costs its requester a `Failed` reply. Control kind: `GetStatus` (replied with
`Status`); every other kind is a request."""

from dataclasses import dataclass

from ..codec import message

MODULE = "service-manager"

#: What a worker's failure leads to (`Config.strategy`).
STOP = "stop"
RESTART = "restart"
ESCALATE = "escalate"
STRATEGIES = (STOP, RESTART, ESCALATE)


@message("service-manager.config")
@dataclass
class Config:
    """The configuration (spawn `init`): workers of `module`; `strategy` is one of `"stop"`
    (default), `"restart"` (up to `max_restarts` times per request), `"escalate"`."""

    module: str
    init: str = ""
    max_workers: int = 16
    queue: int = 1000
    worker_timeout_ms: int = 30000
    strategy: str = STOP
    max_restarts: int = 3


@message("service-manager.failed")
@dataclass
class Failed:
    """A request that got no reply from its worker: `failure` is `trap`, `error`, `timeout`,
    `spawn` or `stopped`."""

    failure: str
    reason: str


@message("service-manager.get-status")
@dataclass
class GetStatus:
    """Asks for a `Status`."""


@message("service-manager.status")
@dataclass
class Status:
    """How the manager is doing: the reply to `GetStatus`."""

    running: int = 0
    queued: int = 0
    served: int = 0
    failed: int = 0
    refused: int = 0
    peak: int = 0
