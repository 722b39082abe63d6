"""`Context`: what an actor can ask of the host, with the Rust SDK's names."""

from . import _wit
from ._wit import Err, types
from .codec import Malformed, decode, decode_as, encode, kind_of

__all__ = [
    "Address",
    "Context",
    "Envelope",
    "Error",
    "Strategy",
    "Recovery",
    "DeadLetter",
    "Failure",
    "ASK_PREFIX",
    "REPLAY_PAGE",
]

Address = types.Address

ASK_PREFIX = "/system/ask/"
"""The path prefix of the sender of an ask's reply or timeout: `/system/ask/<id>`."""

REPLAY_PAGE = 1024
"""How many events `Recovery.events` reads from the host at a time."""


class Error(Exception):
    """A refused host call (a send past a quota, a persistence error...): `value` is the
    contract's error variant. Unhandled, it fails the actor like any exception."""

    def __init__(self, what, value):
        super().__init__(f"{what}: {_describe(value)}")
        self.value = value


def _describe(value):
    name = type(value).__name__.split("_", 1)[-1]
    inner = getattr(value, "value", None)
    if inner is None:
        return name
    if hasattr(inner, "name"):
        inner = inner.name.lower()
    return f"{name}({inner})"


def _call(what, fn, *args):
    try:
        return fn(*args)
    except Err as e:
        raise Error(what, e.value) from None


def _send(verb, to, by_path, by_address, kind, body):
    """Sends through `by_path` to a path or `by_address` to an `Address` (the contract has one
    import of each); a refusal raises `Error` naming `verb` and the target."""
    if isinstance(to, str):
        _call(f"{verb} {to}", by_path, to, kind, body)
    else:
        _call(f"{verb} {to.path}", by_address, to, kind, body)


def _address(to):
    """An `Address` for a path (incarnation 0: whoever lives there) or an address."""
    if isinstance(to, str):
        return Address(path=to, incarnation=0)
    return to


_NO_VALUE = object()


def _kind_body(msg, value):
    """`(kind, body)` for a typed message, or for a kind and a value."""
    if isinstance(msg, str):
        return msg, encode(None if value is _NO_VALUE else value)
    if value is not _NO_VALUE:
        raise TypeError("a typed message carries its own body: pass no value")
    return kind_of(msg), encode(msg)


class Envelope:
    """A message as it arrived: `kind`, `sender` (an `Address` or None) and the raw `body`."""

    def __init__(self, kind, body=b"", sender=None):
        self.kind = kind
        self.body = bytes(body)
        self.sender = sender

    @classmethod
    def _from_wit(cls, msg):
        return cls(msg.kind, msg.body, msg.sender)

    @property
    def value(self):
        """The body's JSON value (None if empty); raises `Malformed` if it is not JSON."""
        return decode(self.body)

    def is_(self, cls):
        """Whether this message is of the `@message` class `cls`."""
        return self.kind == kind_of(cls)

    def decode(self, cls):
        """The body as an instance of `cls` (a `@message` class); `Malformed` if it is not."""
        if self.kind != kind_of(cls):
            raise Malformed(f"expected a `{kind_of(cls)}`, got a `{self.kind}`")
        return decode_as(cls, self.body)

    def __repr__(self):
        sender = self.sender.path if self.sender is not None else None
        return f"Envelope({self.kind!r} from {sender!r}: {self.body!r})"


class Strategy:
    """How an actor supervises its children: `Strategy.one_for_one(Directive.RESTART)
    .restarts(3, 1000).backoff(10, 1000)`."""

    def __init__(self, scope, directive, max_restarts=3, within_ms=1000, backoff_min_ms=0,
                 backoff_max_ms=0):
        self.scope = scope
        self.directive = directive
        self.max_restarts = max_restarts
        self.within_ms = within_ms
        self.backoff_min_ms = backoff_min_ms
        self.backoff_max_ms = backoff_max_ms

    @classmethod
    def one_for_one(cls, directive):
        return cls(types.Scope.ONE_FOR_ONE, directive)

    @classmethod
    def all_for_one(cls, directive):
        return cls(types.Scope.ALL_FOR_ONE, directive)

    def restarts(self, max_restarts, within_ms):
        """At most `max_restarts` restarts of one child within `within_ms`; one more escalates."""
        self.max_restarts, self.within_ms = max_restarts, within_ms
        return self

    def backoff(self, min_ms, max_ms):
        """Restart delays from `min_ms`, doubling per restart in the window, up to `max_ms`."""
        self.backoff_min_ms, self.backoff_max_ms = min_ms, max_ms
        return self

    def _to_wit(self):
        return types.Strategy(
            scope=self.scope,
            directive=self.directive,
            max_restarts=self.max_restarts,
            within_ms=self.within_ms,
            backoff_min_ms=self.backoff_min_ms,
            backoff_max_ms=self.backoff_max_ms,
        )


class Failure:
    """How a child failed: `kind` (a `FailureKind`), `name` (`trap`, `error`...) and `error`."""

    def __init__(self, kind, error):
        self.kind = kind
        self.error = error

    @property
    def name(self):
        return self.kind.name.lower().replace("_", "-")

    def __repr__(self):
        return f"Failure({self.name}: {self.error})"


def _varint(body, at):
    value = shift = 0
    while True:
        if at >= len(body):
            raise Malformed("dead letter: truncated length")
        byte = body[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise Malformed("dead letter: length too long")


class DeadLetter:
    """A dead letter as a subscriber of `/system/deadletters` receives it: the original
    `sender`, `target` path, `kind` and `body`."""

    def __init__(self, sender, target, kind, body):
        self.sender, self.target, self.kind, self.body = sender, target, kind, body

    @classmethod
    def decode(cls, sender, body):
        fields, at = [], 0
        for _ in range(3):
            n, at = _varint(body, at)
            if at + n > len(body):
                raise Malformed("dead letter: truncated field")
            fields.append(bytes(body[at:at + n]))
            at += n
        try:
            target, kind = fields[0].decode(), fields[1].decode()
        except UnicodeDecodeError as e:
            raise Malformed(f"dead letter: {e}") from None
        return cls(sender, target, kind, fields[2])

    def decode_original(self, cls):
        """The original body as `cls` (a `@message` class)."""
        return Envelope(self.kind, self.body).decode(cls)


class Recovery:
    """A persistent actor's durable state as `Context.recover` found it: `snapshot` (decoded,
    or None), `snapshot_seq`, and `events`, an iterator of `(seq, event)` after it, read from
    the host a page at a time."""

    def __init__(self, snapshot, snapshot_seq, event_type):
        self.snapshot = snapshot
        self.snapshot_seq = snapshot_seq
        self.last_seq = snapshot_seq
        self._event_type = event_type
        self.events = self._events()

    def _events(self):
        while True:
            page = _call("replay", _wit.persistence.replay, self.last_seq, REPLAY_PAGE)
            for event in page:
                value = decode_as(self._event_type, event.data)
                self.last_seq = event.seq
                yield event.seq, value
            if len(page) < REPLAY_PAGE:
                return

    def fold(self, init, apply):
        """The state: the snapshot (or `init()` without one), then `apply(state, event)` for
        each later event in order. `apply` returns the new state, or None having changed the
        state in place."""
        state = self.snapshot if self.snapshot is not None else init()
        for _seq, event in self.events:
            changed = apply(state, event)
            if changed is not None:
                state = changed
        return state


class Context:
    """What an actor can do, handed to each of its hooks. Sends take a typed message
    (`ctx.tell(to, Order(1, 5))`) or a kind and a JSON-able value (`ctx.tell(to, "order",
    {...})`); `to` is a path (absolute or relative) or an `Address`."""

    def __init__(self):
        self._sender = None
        self._in_message = False
        self._requests = []

    # -- host -----------------------------------------------------------------------------

    def myself(self):
        """This actor's address."""
        return _wit.host.self_address()

    def parent(self):
        """The parent's address (None for the roots)."""
        return _wit.host.parent()

    def sender(self):
        """The sender of the message being handled (None if it has none)."""
        return self._sender

    def tell(self, to, msg, value=_NO_VALUE):
        """Sends to an address or a path; this actor is the sender."""
        _send("tell", to, _wit.host.tell_path, _wit.host.tell, *_kind_body(msg, value))

    def tell_path(self, path, msg, value=_NO_VALUE):
        """Sends to a path, absolute or relative to this actor."""
        kind, body = _kind_body(msg, value)
        _call(f"tell {path}", _wit.host.tell_path, path, kind, body)

    def reply(self, msg, value=_NO_VALUE):
        """Answers the sender of the message being handled (an ask's reply too)."""
        if self._sender is None:
            raise RuntimeError("reply: the message being handled has no sender")
        self.tell(self._sender, msg, value)

    def forward(self, to, msg, value=_NO_VALUE):
        """Sends with the sender of the message being handled as the sender."""
        _send("forward", to, _wit.forwarding.forward_path, _wit.forwarding.forward,
              *_kind_body(msg, value))

    def tell_urgent(self, to, msg, value=_NO_VALUE):
        """Like `tell`, on the receiver's urgent lane."""
        _send("tell", to, _wit.priority.tell_path_urgent, _wit.priority.tell_urgent,
              *_kind_body(msg, value))

    def spawn(self, name, module, init=b""):
        """Spawns a child from a deployed module, handing it `init`; returns its address."""
        return _call(f"spawn {name}", _wit.host.spawn, name, module, _init(init))

    def stop(self, target):
        """Stops this actor or a descendant, after its current message."""
        _wit.host.stop(target)

    def stop_self(self):
        """Stops this actor after the current message."""
        _wit.host.stop(_wit.host.self_address())

    def log(self, text, level="info"):
        """Writes a line to the host log, tagged with this actor's path."""
        levels = {
            "trace": types.LogLevel.TRACE,
            "debug": types.LogLevel.DEBUG,
            "info": types.LogLevel.INFO,
            "warn": types.LogLevel.WARN,
            "error": types.LogLevel.ERROR,
        }
        _wit.host.log(levels.get(level, types.LogLevel.INFO), str(text))

    def trace(self, text):
        self.log(text, "trace")

    def debug(self, text):
        self.log(text, "debug")

    def info(self, text):
        self.log(text, "info")

    def warn(self, text):
        self.log(text, "warn")

    def error(self, text):
        self.log(text, "error")

    # -- supervision ----------------------------------------------------------------------

    def set_strategy(self, strategy):
        """Sets how this actor supervises its children."""
        _wit.supervision.set_strategy(strategy._to_wit())

    def spawn_with(self, name, module, init=b"", **limits):
        """Like `spawn`, with per-child limits: `mailbox_capacity`, `memory_limit`,
        `cpu_deadline_ms`, `mailbox_bytes`, `descendants` (a missing one takes the parent's)."""
        return _call(f"spawn {name}", _wit.supervision.spawn_with, name, module, _init(init),
                     _spawn_options(**limits))

    def spawn_on(self, node, name, module, init=b"", **limits):
        """Like `spawn_with`, on the cluster node `node` (the child stays this actor's)."""
        return _call(f"spawn {name} on {node}", _wit.supervision.spawn_on, node, name, module,
                     _init(init), _spawn_options(**limits))

    def watch(self, target):
        """Watches an incarnation: `terminated` is called once when it stops."""
        _call(f"watch {target.path}", _wit.supervision.watch, target)

    def unwatch(self, target):
        _wit.supervision.unwatch(target)

    def restart_cause(self):
        """In `start`: why this instance replaces a failed one (None on a first start)."""
        return _wit.supervision.restart_cause()

    def deactivate(self, child):
        """Pauses a child: it keeps its mailbox but handles nothing until `activate`."""
        return _wit.lifecycle.deactivate(child)

    def activate(self, child):
        return _wit.lifecycle.activate(child)

    # -- timers ---------------------------------------------------------------------------

    def schedule(self, to, msg, delay_ms, period_ms=None, value=_NO_VALUE):
        """Sends `msg` to `to` after `delay_ms`, then every `period_ms` if given; returns the
        timer's id. (For a kind and a value, pass `value=`.)"""
        kind, body = _kind_body(msg, value)
        return _call("schedule", _wit.timers.schedule, _address(to), kind, body, delay_ms,
                     period_ms)

    def schedule_self(self, msg, delay_ms, period_ms=None, value=_NO_VALUE):
        """`schedule` to this actor."""
        return self.schedule(self.myself(), msg, delay_ms, period_ms, value)

    def cancel_timer(self, timer_id):
        """Cancels a timer; False if it already fired (one-shot) or is unknown."""
        return _wit.timers.cancel(timer_id)

    # -- messaging ------------------------------------------------------------------------

    def subscribe(self, topic):
        _call(f"subscribe {topic}", _wit.messaging.subscribe, topic)

    def unsubscribe(self, topic):
        _wit.messaging.unsubscribe(topic)

    def publish(self, topic, msg, value=_NO_VALUE):
        """Publishes to a topic; returns how many subscribers it reached."""
        kind, body = _kind_body(msg, value)
        return _call(f"publish {topic}", _wit.messaging.publish, topic, kind, body)

    def join(self, group):
        _call(f"join {group}", _wit.messaging.join, group)

    def leave(self, group):
        _wit.messaging.leave(group)

    def tell_group(self, group, msg, value=_NO_VALUE):
        """Sends to the member of `group` with the shortest mailbox; False if it is empty."""
        kind, body = _kind_body(msg, value)
        return _call(f"tell group {group}", _wit.messaging.tell_group, group, kind, body)

    def broadcast_group(self, group, msg, value=_NO_VALUE):
        """Sends to every member of `group`; returns how many it reached."""
        kind, body = _kind_body(msg, value)
        return _call(f"broadcast {group}", _wit.messaging.broadcast_group, group, kind, body)

    def ask(self, to, msg, value=_NO_VALUE, timeout_ms=5000):
        """Asks `to`; returns the ask id. The reply goes to `Actor.answered` (by default handled
        like any message), or `Actor.ask_timeout` is called if the deadline passes first."""
        kind, body = _kind_body(msg, value)
        return _call("ask", _wit.messaging.ask, _address(to), kind, body, timeout_ms)

    # -- lookup and naming ----------------------------------------------------------------

    def children(self):
        return _wit.lookup.children()

    def resolve(self, path):
        return _wit.lookup.resolve(path)

    def mailbox_depth(self, path):
        """Messages waiting for the live actor at `path`, or None if none lives here."""
        return _wit.lookup.mailbox_depth(path)

    def alias(self, name):
        return _call(f"alias {name}", _wit.naming.alias, name)

    def unalias(self, name):
        return _wit.naming.unalias(name)

    # -- persistence ----------------------------------------------------------------------

    def persistence_id(self):
        return _wit.persistence.persistence_id()

    def set_persistence_id(self, pid):
        _call("set_persistence_id", _wit.persistence.set_persistence_id, pid)

    def recover(self, snapshot=None, event=None):
        """Makes this actor persistent and returns its `Recovery`; `snapshot` and `event` are
        the types to read them as (`@message` classes, `bytes`, or None for JSON values)."""
        found = _call("recover", _wit.persistence.recover)
        if found is None:
            return Recovery(None, 0, event)
        return Recovery(decode_as(snapshot, found.state), found.seq, event)

    def recover_snapshot(self, snapshot=None):
        """`recover` for an actor that keeps only a snapshot: the snapshot or None."""
        return self.recover(snapshot).snapshot

    def persist(self, event):
        """Journals an event (encoded like a body); returns its seq."""
        return _call("persist", _wit.persistence.persist, encode(event))

    def save_snapshot(self, state):
        """Replaces the snapshot, as of the latest event; returns that event's seq."""
        return _call("save_snapshot", _wit.persistence.save_snapshot, encode(state))

    def delete_events(self, through):
        _call("delete_events", _wit.persistence.delete_events, through)

    def delete_state(self):
        """Deletes the snapshot, every event and every reminder of this actor."""
        _call("delete_state", _wit.persistence.delete_state)

    def in_shutdown(self):
        """True while the host is shutting down: save what must survive."""
        return _wit.persistence.in_shutdown()

    def remind(self, msg, delay_ms, period_ms=None, value=_NO_VALUE):
        """A durable timer to this actor, kept across host restarts; returns its id."""
        kind, body = _kind_body(msg, value)
        return _call("remind", _wit.persistence.remind, kind, body, delay_ms, period_ms)

    def cancel_reminder(self, reminder_id):
        return _wit.persistence.cancel_reminder(reminder_id)

    def set_delivery(self, mode):
        """`DeliveryMode.AT_LEAST_ONCE` (the default) or `AT_MOST_ONCE`."""
        _wit.delivery.set_delivery(mode)

    def delivery(self):
        return _wit.delivery.delivery()

    # -- behaviours and the stash (take effect when the hook returns) ---------------------

    def become_(self, behavior):
        """Handles the next messages with `behavior(actor, ctx, msg)` until `unbecome`:
        behaviours stack. Write `ctx.become_(Door.open)`."""
        self._requests.append(("become", behavior))

    def unbecome(self):
        """Pops the current behaviour, back to the previous one or to `receive`."""
        self._requests.append(("unbecome", None))

    def stash(self):
        """Keeps the message being handled, with its sender, for `unstash_all`."""
        if self._in_message:
            self._requests.append(("stash", None))
        else:
            self.warn("stash ignored: this hook is not handling a message")

    def unstash_all(self):
        """Has every stashed message handled again, in order, before any new one."""
        self._requests.append(("unstash_all", None))

    def stashed(self):
        return _wit.stash.stashed()

    def peek(self, kind=None):
        """A copy of the oldest stashed message of `kind` (any kind for None), left in place."""
        found = _wit.stash.peek(kind)
        return Envelope._from_wit(found) if found is not None else None

    def take(self, kind=None):
        """Takes the oldest stashed message of `kind` (any kind for None) out of the stash."""
        found = _wit.stash.take(kind)
        return Envelope._from_wit(found) if found is not None else None

    # -- HTTP call-outs -------------------------------------------------------------------

    def http_request(self, url, method="GET", headers=(), body=b"", timeout_ms=10_000):
        """Starts an HTTP request the host makes (the module needs the `wasi:http` grant);
        returns its id. The outcome comes to `Actor.http_response`."""
        request = _wit.callouts.Request(method=method, url=url, headers=list(headers),
                                        body=_init(body), timeout_ms=timeout_ms)
        return _call(f"http {url}", _wit.callouts.http_request, request)

    # -- clock ----------------------------------------------------------------------------

    def since_start(self):
        """Nanoseconds since this actor was spawned."""
        return _wit.clock.since_start()

    def cpu_time(self):
        """Nanoseconds this actor's calls have been running."""
        return _wit.clock.cpu_time()


def _spawn_options(mailbox_capacity=None, memory_limit=None, cpu_deadline_ms=None,
                   mailbox_bytes=None, descendants=None):
    return types.SpawnOptions(
        mailbox_capacity=mailbox_capacity,
        memory_limit=memory_limit,
        cpu_deadline_ms=cpu_deadline_ms,
        mailbox_bytes=mailbox_bytes,
        descendants=descendants,
    )


def _init(init):
    return init.encode() if isinstance(init, str) else bytes(init)
