"""`pipeline-builder`: makes pipelines dynamically. A `Build` names a pipeline beside its
configuration; the builder spawns it as its child and replies `Built` (with its path) or
`Refused`. Control kinds: `Build`, `TearDown` (replied with `TornDown`), `List` (replied with
`Pipelines`)."""

from dataclasses import dataclass, field
from typing import Optional, Union

from ..codec import message
from ._wire import Wire, list_of
from .pipeline import Stage
from .supervision import Supervision

MODULE = "pipeline-builder"


@message("pipeline-builder.config")
@dataclass
class Config(Wire):
    """The configuration (spawn `init`; empty means every default): the pipelines' module,
    how many at once, how long one may take to answer, and how a built one is supervised."""

    module: str = "pipeline"
    max_pipelines: int = 100
    ready_timeout_ms: int = 5000
    strategy: Union[Supervision, str] = field(default_factory=Supervision)

    _nested = {"strategy": Supervision.from_json}


@message("pipeline-builder.build")
@dataclass
class Build(Wire):
    """Builds pipeline `name`: the name beside the fields of a `pipeline.Config` (flattened,
    as the Rust type writes it)."""

    name: str
    stages: list[Stage]
    sink: Optional[str] = None
    stage_timeout_ms: int = 5000
    max_in_flight: int = 1000
    strategy: Union[Supervision, str] = field(default_factory=Supervision)

    _nested = {"stages": list_of(Stage.from_json), "strategy": Supervision.from_json}

    @classmethod
    def of(cls, name, config):
        """Builds pipeline `name` of a `pipeline.Config`."""
        return cls(name=name, stages=config.stages, sink=config.sink,
                   stage_timeout_ms=config.stage_timeout_ms,
                   max_in_flight=config.max_in_flight, strategy=config.strategy)


@message("pipeline-builder.built")
@dataclass
class Built:
    """A pipeline was built and answers: send inputs to its absolute `path`."""

    name: str
    path: str


@message("pipeline-builder.refused")
@dataclass
class Refused:
    """A build that did not happen, and why."""

    name: str
    reason: str


@message("pipeline-builder.tear-down")
@dataclass
class TearDown:
    """Stops a pipeline and forgets it."""

    name: str


@message("pipeline-builder.torn-down")
@dataclass
class TornDown:
    """The answer to `TearDown`: whether the builder had such a pipeline."""

    name: str
    existed: bool


@message("pipeline-builder.list")
@dataclass
class List:
    """Asks for the `Pipelines`."""


@message("pipeline-builder.pipelines")
@dataclass
class Pipelines:
    """The built pipelines' names, sorted."""

    pipelines: list[str] = field(default_factory=list)
