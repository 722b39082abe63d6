"""How a pattern supervises the children it spawns (a pipeline's stages, a pod manager's pods,
a builder's pipelines): the `strategy` field of their configuration. In JSON either a
directive's name (`"restart"`) or an object, every field but `directive` defaulted."""

from dataclasses import dataclass

from ._wire import Wire

RESTART = "restart"
RESUME = "resume"
STOP = "stop"
ESCALATE = "escalate"
#: What happens to a child that fails (one-for-one), as the JSON names it.
DIRECTIVES = (RESTART, RESUME, STOP, ESCALATE)

#: The longest child name a pattern gives (a pod, a pipeline), in bytes.
MAX_CHILD_NAME = 128


@dataclass
class Supervision(Wire):
    """A strategy for a pattern's children: `directive` is one of `"restart"` (the default),
    `"resume"`, `"stop"`, `"escalate"`; restarts and backoff default to the host's."""

    directive: str = RESTART
    max_restarts: int = 3
    within_ms: int = 10000
    backoff_min_ms: int = 10
    backoff_max_ms: int = 1000

    @classmethod
    def from_json(cls, value):
        """Either JSON form: a directive's name or an object."""
        if isinstance(value, str):
            if value not in DIRECTIVES:
                raise ValueError(f"unknown directive {value!r}")
            return cls(directive=value)
        return super().from_json(value)


def valid_child_name(name):
    """Whether `name` may name a pattern's child: 1 to `MAX_CHILD_NAME` bytes, no `/`, `#` or
    control characters, not `.` or `..`."""
    return (
        0 < len(name.encode()) <= MAX_CHILD_NAME
        and name not in (".", "..")
        and not any(c in "/#" or _control(c) for c in name)
    )


def _control(c):
    o = ord(c)
    return o < 0x20 or 0x7F <= o <= 0x9F
