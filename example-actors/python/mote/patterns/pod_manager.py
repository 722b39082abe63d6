"""`pod-manager`: a persistent parent of named children ("pods") of one module, each created by
the first message for it and respawned under the same name after a restart. A message reaches
pod `p` by `Deliver`, by any kind whose JSON body has a string field `"pod"`, or sent straight
to `<manager path>/p` (created from the dead letter). Control kinds: `Create` (replied with
`Created`), `Deliver`, `List` (replied with `Pods`), `Remove` (replied with `Removed`)."""

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ..codec import message
from ._wire import Wire, body_of, byte_values, json_bytes
from .supervision import MAX_CHILD_NAME, Supervision, valid_child_name

MODULE = "pod-manager"

#: The longest pod name, in bytes.
MAX_POD_NAME = MAX_CHILD_NAME


def valid_pod_name(pod):
    """Whether `pod` may name a pod: 1 to `MAX_POD_NAME` bytes, no `/`, `#` or control
    characters, not `.` or `..`."""
    return valid_child_name(pod)


@message("pod-manager.config")
@dataclass
class Config(Wire):
    """The configuration (spawn `init`): pods of `module`, each spawned with `init` (a JSON
    string as its text, `None` as nothing, any other JSON value as its JSON text)."""

    module: str
    init: Any = None
    max_pods: int = 1000
    strategy: Union[Supervision, str] = field(default_factory=Supervision)
    create_on_dead_letter: bool = True

    _nested = {"strategy": Supervision.from_json}


@message("pod-manager.create")
@dataclass
class Create:
    """Creates pod `pod` if it does not live."""

    pod: str


@message("pod-manager.created")
@dataclass
class Created:
    """The answer to `Create`: the pod's absolute path, and False if it lived already."""

    pod: str
    path: str
    new: bool


@message("pod-manager.deliver")
@dataclass
class Deliver(Wire):
    """Passes a message of `kind` to pod `pod` (created if need be) with this message's
    sender: its body is `body` (JSON), else `bytes` (an array of byte values), else empty."""

    pod: str
    kind: str
    body: Any = None
    bytes: Optional[bytes] = None

    _nested = {"bytes": byte_values}

    @classmethod
    def of(cls, pod, msg):
        """A typed message for pod `pod`: a JSON one as `body`, any other as `bytes`."""
        kind, body, data = body_of(msg)
        return cls(pod=pod, kind=kind, body=body, bytes=data)

    def body_bytes(self):
        """The body the pod receives."""
        if self.body is not None:
            return json_bytes(self.body)
        return self.bytes if self.bytes is not None else b""


@message("pod-manager.list")
@dataclass
class List:
    """Asks for the `Pods`."""


@message("pod-manager.pods")
@dataclass
class Pods:
    """The pods' names, sorted."""

    pods: list[str] = field(default_factory=list)


@message("pod-manager.remove")
@dataclass
class Remove:
    """Stops pod `pod` and forgets it (its own durable state is kept)."""

    pod: str


@message("pod-manager.removed")
@dataclass
class Removed:
    """The answer to `Remove`: whether such a pod lived."""

    pod: str
    existed: bool
