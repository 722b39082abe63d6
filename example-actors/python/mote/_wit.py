"""The componentize-py bindings of the `mote:actor` world, imported in one place (the unit tests
put a fake `wit_world` on the path instead)."""

from componentize_py_types import Err  # noqa: F401
from wit_world import exports  # noqa: F401
from wit_world.imports import (  # noqa: F401
    callouts,
    clock,
    delivery,
    forwarding,
    host,
    lifecycle,
    lookup,
    messaging,
    naming,
    persistence,
    priority,
    stash,
    supervision,
    timers,
    types,
)
