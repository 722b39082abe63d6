"""Mote actors in Python: a small guest SDK over the `mote:actor` WIT world.

Write a class with `start`, `receive` and (optionally) `stopping`, and export it::

    import mote_actor

    class Greeter(mote_actor.Actor):
        def start(self, ctx, init):
            self.greeted = 0

        def receive(self, ctx, msg):
            if msg.kind == "greet":
                self.greeted += 1
                ctx.reply("greeting", {"text": "hello " + msg.value["name"]})

    Actor = mote_actor.export(Greeter)   # the name componentize-py looks for

Bodies are JSON (UTF-8 text): `msg.value` is the decoded body (None if empty; a body that is not
JSON raises `Malformed`, which rejects the message instead of failing the actor), `msg.body` the raw
bytes; `ctx.tell(to, kind, value)` encodes `value` as JSON (bytes go as they are). The Rust SDK
speaks the same encoding for types declared with `json_message!`.

An exception raised by `start` or `receive` is returned to the host as the call's error: the
actor fails and its supervisor decides (restart, by default), as for a Rust actor's error.
"""

import json
import traceback

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, messaging, supervision, types

__all__ = ["Actor", "Context", "Message", "export"]


def encode(value):
    """The body for `value`: bytes as they are, anything else as JSON."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if value is None:
        return b""
    return json.dumps(value, separators=(",", ":")).encode()


class Malformed(Exception):
    """A message body that does not decode: the sender's problem, never the receiver's.

    Raised by `Message.value` for a body that is not JSON; an actor may raise it too (for JSON
    of the wrong shape, say). `receive` then rejects the message: the host makes it a dead
    letter with the reason, and the actor does not fail.
    """


def decode(body):
    """The JSON value of `body`, None if it is empty; `Malformed` if it is not JSON."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise Malformed(f"body is not JSON: {e}") from None


class Message:
    """One received message: `kind`, `sender` (a path string or None), `body` and `value`."""

    def __init__(self, raw):
        self.kind = raw.kind
        self.body = raw.body
        self._sender = raw.sender
        self.sender = raw.sender.path if raw.sender is not None else None

    @property
    def value(self):
        """The body's JSON value (None if empty); raises `Malformed` if it is not JSON."""
        return decode(self.body)

    def __repr__(self):
        return f"Message({self.kind!r} from {self.sender!r}: {bytes(self.body)!r})"


class Context:
    """What an actor can do: the `mote:actor` imports, with JSON bodies."""

    def __init__(self):
        self.current = None

    def myself(self):
        """This actor's path."""
        return host.self_address().path

    def tell(self, to, kind, value=None):
        """Sends to a path (absolute or relative to this actor)."""
        host.tell_path(to, kind, encode(value))

    def reply(self, kind, value=None):
        """Answers the sender of the current message (an ask's reply too)."""
        if self.current is None or self.current._sender is None:
            raise RuntimeError("reply: the current message has no sender")
        host.tell(self.current._sender, kind, encode(value))

    def spawn(self, name, module, init=b""):
        """Spawns a child from a deployed module; returns its path."""
        init = init.encode() if isinstance(init, str) else init
        return host.spawn(name, module, init).path

    def ask(self, to, kind, value=None, timeout_ms=5000):
        """Asks an actor at an absolute path; the reply (or `mote.ask-timeout`) arrives as a
        message whose sender is `/system/ask/<id>`. Returns the id."""
        address = types.Address(path=to, incarnation=0)
        return messaging.ask(address, kind, encode(value), timeout_ms)

    def publish(self, topic, kind, value=None):
        """Publishes to a topic; returns how many subscribers it reached."""
        return messaging.publish(topic, kind, encode(value))

    def subscribe(self, topic):
        """Receives every message published to `topic` from now on."""
        messaging.subscribe(topic)

    def stop_self(self):
        """Stops this actor after the current message."""
        host.stop(host.self_address())

    def restart_cause(self):
        """In `start`: why this instance replaces a failed one (None on a first start)."""
        return supervision.restart_cause()

    def log(self, text, level="info"):
        """Writes a line to the host log, tagged with this actor's path."""
        levels = {
            "trace": types.LogLevel.TRACE,
            "debug": types.LogLevel.DEBUG,
            "info": types.LogLevel.INFO,
            "warn": types.LogLevel.WARN,
            "error": types.LogLevel.ERROR,
        }
        host.log(levels.get(level, types.LogLevel.INFO), str(text))


class Actor:
    """Base class of a Python actor; override `start`, `receive` and `stopping`."""

    def start(self, ctx, init):
        """Called once, with the init bytes given at spawn."""

    def receive(self, ctx, msg):
        """Called for each message, in arrival order."""

    def stopping(self, ctx, reason):
        """Called once when the actor stops (`normal`, `failure`, `parent-failure`, `shutdown`)."""


def _failure(e):
    return Err(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")


def export(cls):
    """The class componentize-py exports for the `actor` interface, driving one `cls` instance.

    componentize-py makes a new export object per call, so the actor lives in this closure.
    """
    ctx = Context()
    state = {}

    class Exported(exports.Actor):
        def start(self, init):
            state["actor"] = cls()
            try:
                state["actor"].start(ctx, bytes(init))
            except Exception as e:  # noqa: BLE001 - any exception fails the start
                raise _failure(e)

        def receive(self, msg):
            ctx.current = Message(msg)
            try:
                state["actor"].receive(ctx, ctx.current)
            except Malformed as e:
                host.reject(f"malformed `{msg.kind}` body: {e}")
            except Exception as e:  # noqa: BLE001 - any exception is this actor's failure
                raise _failure(e)
            finally:
                ctx.current = None

        def stopping(self, reason):
            names = {
                types.StopReason_Normal: "normal",
                types.StopReason_Failure: "failure",
                types.StopReason_ParentFailure: "parent-failure",
                types.StopReason_Shutdown: "shutdown",
            }
            actor = state.get("actor")
            if actor is not None:
                try:
                    actor.stopping(ctx, names.get(type(reason), "normal"))
                except Exception as e:  # noqa: BLE001 - logged, a stopping actor cannot fail
                    ctx.log(f"stopping failed: {e}", "warn")

    return Exported
