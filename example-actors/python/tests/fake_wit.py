"""A fake of the componentize-py bindings (`wit_world`, `componentize_py_types`) for testing the
`mote` SDK in CPython, without wasm: each import records its call in `HOST.calls` and answers
from the state of `HOST` (a journal, a snapshot, a stash...). `install()` puts the fake modules
in `sys.modules` and the SDK's directory on the path; `reset()` gives a fresh host."""

import os
import sys
import types as pytypes
from dataclasses import dataclass
from enum import Enum
from typing import Optional


@dataclass(frozen=True)
class Err(Exception):
    value: object


@dataclass
class Ok:
    value: object


# -- wit_world.imports.types ----------------------------------------------------------------


@dataclass
class Address:
    path: str
    incarnation: int


@dataclass
class Message:
    sender: Optional[Address]
    kind: str
    body: bytes


@dataclass
class StopReason_Normal:
    pass


@dataclass
class StopReason_Failure:
    value: str


@dataclass
class StopReason_ParentFailure:
    value: str


@dataclass
class StopReason_Shutdown:
    pass


class Quota(Enum):
    TIMERS = 0
    ASKS = 5


@dataclass
class SendError_Quota:
    value: Quota


class FailureKind(Enum):
    TRAP = 0
    ERROR = 1
    MEMORY_LIMIT = 2
    CPU_DEADLINE = 3
    STACK_OVERFLOW = 4
    INSTANTIATION = 5
    COMMIT = 6
    ESCALATED = 7


class Directive(Enum):
    RESUME = 0
    RESTART = 1
    STOP = 2
    ESCALATE = 3


class Scope(Enum):
    ONE_FOR_ONE = 0
    ALL_FOR_ONE = 1


@dataclass
class Strategy:
    scope: Scope
    directive: Directive
    max_restarts: int
    within_ms: int
    backoff_min_ms: int
    backoff_max_ms: int


@dataclass
class Request:
    method: str
    url: str
    headers: list
    body: bytes
    timeout_ms: int


@dataclass
class SpawnOptions:
    mailbox_capacity: Optional[int]
    memory_limit: Optional[int]
    cpu_deadline_ms: Optional[int]
    mailbox_bytes: Optional[int]
    descendants: Optional[int]


class LogLevel(Enum):
    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


@dataclass
class Snapshot:
    seq: int
    state: bytes


@dataclass
class Event:
    seq: int
    data: bytes


@dataclass
class PersistError_NotRecovered:
    pass


@dataclass
class StashError_Full:
    pass


class DeliveryMode(Enum):
    AT_LEAST_ONCE = 0
    AT_MOST_ONCE = 1


# -- the fake host ----------------------------------------------------------------------------


class Host:
    """What the fake imports see and record."""

    def __init__(self):
        self.me = Address("/user/me", 1)
        self.calls = []
        self.snapshot = None  # a Snapshot, or None
        self.events = []  # Events, seq from 1
        self.recovered = False
        self.stash = []  # Messages
        self.stash_full = False
        self.next_id = 1
        self.refuse = set()  # names of imports that raise Err(SendError_Quota)

    def record(self, name, *args):
        self.calls.append((name, args))
        if name in self.refuse:
            raise Err(SendError_Quota(Quota.ASKS))

    def named(self, name):
        """The arguments of each recorded call of `name`, in order."""
        return [args for (n, args) in self.calls if n == name]

    def new_id(self):
        self.next_id += 1
        return self.next_id - 1


HOST = Host()


def reset():
    global HOST
    HOST = Host()
    return HOST


def _recorder(name, answer=None):
    def call(*args):
        HOST.record(name, *args)
        return answer(*args) if answer is not None else None

    call.__name__ = name
    return call


def _module(name, **attrs):
    module = pytypes.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _persist(data):
    if not HOST.recovered:
        raise Err(PersistError_NotRecovered())
    seq = (HOST.events[-1].seq if HOST.events else (HOST.snapshot.seq if HOST.snapshot else 0)) + 1
    HOST.events.append(Event(seq, bytes(data)))
    return seq


def _save_snapshot(state):
    if not HOST.recovered:
        raise Err(PersistError_NotRecovered())
    seq = HOST.events[-1].seq if HOST.events else (HOST.snapshot.seq if HOST.snapshot else 0)
    HOST.snapshot = Snapshot(seq, bytes(state))
    return seq


def _recover():
    HOST.recovered = True
    return HOST.snapshot


def _replay(after, most):
    return [e for e in HOST.events if e.seq > after][:most]


def _stash():
    if HOST.stash_full:
        raise Err(StashError_Full())


def _take(kind):
    for i, m in enumerate(HOST.stash):
        if kind is None or m.kind == kind:
            return HOST.stash.pop(i)
    return None


def install():
    """Registers the fake modules and puts the SDK (`example-actors/python`) on the path."""
    here = os.path.dirname(os.path.abspath(__file__))
    sdk = os.path.dirname(here)
    if sdk not in sys.path:
        sys.path.insert(0, sdk)
    _module("componentize_py_types", Err=Err, Ok=Ok)
    world = _module("wit_world")
    imports = _module("wit_world.imports")
    exports = _module(
        "wit_world.exports",
        Actor=type("Actor", (), {}),
        Supervisor=type("Supervisor", (), {}),
        Upgrade=type("Upgrade", (), {}),
    )
    world.imports, world.exports = imports, exports
    type_names = [
        "Address", "Message", "StopReason_Normal", "StopReason_Failure",
        "StopReason_ParentFailure", "StopReason_Shutdown", "Quota", "SendError_Quota",
        "FailureKind", "Directive", "Scope", "Strategy", "SpawnOptions", "LogLevel",
    ]
    g = globals()
    modules = {
        "types": {n: g[n] for n in type_names},
        "host": dict(
            self_address=lambda: HOST.me,
            parent=lambda: Address("/user", 0),
            tell=_recorder("tell"),
            tell_path=_recorder("tell_path"),
            spawn=_recorder("spawn", lambda name, module, init: Address(
                f"{HOST.me.path}/{name}", HOST.new_id())),
            stop=_recorder("stop"),
            log=_recorder("log"),
            reject=_recorder("reject"),
        ),
        "supervision": dict(
            set_strategy=_recorder("set_strategy"),
            spawn_with=_recorder("spawn_with", lambda name, module, init, options: Address(
                f"{HOST.me.path}/{name}", HOST.new_id())),
            spawn_on=_recorder("spawn_on", lambda node, name, module, init, options: Address(
                f"{HOST.me.path}/{name}", HOST.new_id())),
            watch=_recorder("watch"),
            unwatch=_recorder("unwatch"),
            restart_cause=lambda: None,
        ),
        "timers": dict(
            schedule=_recorder("schedule", lambda *a: HOST.new_id()),
            cancel=_recorder("cancel", lambda i: True),
        ),
        "messaging": dict(
            subscribe=_recorder("subscribe"),
            unsubscribe=_recorder("unsubscribe"),
            publish=_recorder("publish", lambda *a: 1),
            join=_recorder("join"),
            leave=_recorder("leave"),
            tell_group=_recorder("tell_group", lambda *a: True),
            broadcast_group=_recorder("broadcast_group", lambda *a: 1),
            ask=_recorder("ask", lambda *a: HOST.new_id()),
        ),
        "persistence": dict(
            Snapshot=Snapshot,
            Event=Event,
            persistence_id=lambda: HOST.me.path,
            set_persistence_id=_recorder("set_persistence_id"),
            recover=_recorder("recover", _recover),
            replay=_recorder("replay", _replay),
            save_snapshot=_recorder("save_snapshot", _save_snapshot),
            persist=_recorder("persist", _persist),
            delete_events=_recorder("delete_events"),
            delete_state=_recorder("delete_state"),
            in_shutdown=lambda: False,
            remind=_recorder("remind", lambda *a: HOST.new_id()),
            cancel_reminder=_recorder("cancel_reminder", lambda i: True),
        ),
        "stash": dict(
            stash=_recorder("stash", _stash),
            unstash_all=_recorder("unstash_all", lambda: len(HOST.stash)),
            stashed=lambda: len(HOST.stash),
            peek=lambda kind: next(
                (m for m in HOST.stash if kind is None or m.kind == kind), None),
            take=_recorder("take", _take),
        ),
        "forwarding": dict(forward=_recorder("forward"), forward_path=_recorder("forward_path")),
        "priority": dict(tell_urgent=_recorder("tell_urgent"),
                         tell_path_urgent=_recorder("tell_path_urgent")),
        "lookup": dict(children=lambda: [], resolve=lambda path: None, mailbox_depth=lambda path: None),
        "naming": dict(alias=_recorder("alias", lambda n: "/system/alias/" + n),
                       unalias=_recorder("unalias", lambda n: True)),
        "lifecycle": dict(deactivate=_recorder("deactivate", lambda c: True),
                          activate=_recorder("activate", lambda c: True)),
        "delivery": dict(DeliveryMode=DeliveryMode, set_delivery=_recorder("set_delivery"),
                         delivery=lambda: DeliveryMode.AT_LEAST_ONCE),
        "clock": dict(since_start=lambda: 5, cpu_time=lambda: 3),
        "callouts": dict(Request=Request,
                         http_request=_recorder("http_request", lambda r: HOST.new_id()),
                         http_response=_recorder("http_response", lambda i: Ok("response"))),
    }
    for name, attrs in modules.items():
        setattr(imports, name, _module(f"wit_world.imports.{name}", **attrs))


def message(kind, body=b"", sender=None):
    """A message as the host hands it to `receive`; `sender` a path or an Address."""
    if isinstance(sender, str):
        sender = Address(sender, 7)
    if isinstance(body, str):
        body = body.encode()
    return Message(sender=sender, kind=kind, body=body)
