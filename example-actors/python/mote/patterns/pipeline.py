"""`pipeline`: stages `stage-0` .. `stage-<n-1>` spawned from `Config.stages`; every input goes
through them in order (each stage REPLIES with the message for the next), and the last
stage's reply goes back to the original sender, or to `Config.sink`. A stage may reply
`DropInput` (the input ends there) or `Failed` (it fails). Control kind: `GetStatus` (replied
with `Status`); every other kind is an input."""

from dataclasses import dataclass, field
from typing import Any, List, Optional, Union

from ..codec import message
from ._wire import Wire, list_of
from .supervision import Supervision

MODULE = "pipeline"

#: The most stages a pipeline has.
MAX_STAGES = 64


@dataclass
class Stage(Wire):
    """One stage: a module and its init (a JSON string is passed as its text, `None` as
    nothing, any other JSON value as its JSON text)."""

    module: str
    init: Any = None


@message("pipeline.config")
@dataclass
class Config(Wire):
    """The configuration (spawn `init`): the stages in order (1 to `MAX_STAGES`), where outputs
    go instead of the sender, and how stages are timed, bounded and supervised (`strategy`:
    a `Supervision` or a directive's name)."""

    stages: List[Stage]
    sink: Optional[str] = None
    stage_timeout_ms: int = 5000
    max_in_flight: int = 1000
    strategy: Union[Supervision, str] = field(default_factory=Supervision)

    _nested = {"stages": list_of(Stage.from_json), "strategy": Supervision.from_json}


@message("pipeline.get-status")
@dataclass
class GetStatus:
    """Asks for a `Status`."""


@message("pipeline.status")
@dataclass
class Status:
    """How the pipeline is doing: the reply to `GetStatus`."""

    stages: int = 0
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    dropped: int = 0
    refused: int = 0


@message("pipeline.failed")
@dataclass
class Failed:
    """An input failed at a stage: what the original sender gets instead of an output (a stage
    may reply with it too, `reason` alone, to fail its input). `input` counts from 1, `stage`
    from 0."""

    reason: str
    input: int = 0
    stage: int = 0


@message("pipeline.drop")
@dataclass
class DropInput:
    """A stage's reply that ends an input without output."""
