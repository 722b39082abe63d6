"""Message bodies: typed messages, codecs (JSON by default) and the errors of decoding.

A body is bytes; the host never looks inside. This SDK encodes:

- `bytes`/`bytearray` as they are, `None` as the empty body;
- an instance of a class declared with `@message` with that class's codec (JSON unless the class
  says otherwise);
- anything else as compact UTF-8 JSON, the encoding the Rust SDK speaks for types declared with
  `json_message!` (a struct is an object, an enum variant `{"Add":5}` or `"Get"`).

Another encoding is a `Codec` subclass given to `@message(codec=...)`: `encode(obj) -> bytes`
and `decode(cls, body) -> obj`, raising `Malformed` for a body it cannot read.
"""

import dataclasses
import json

__all__ = [
    "Codec",
    "JsonCodec",
    "JSON",
    "Malformed",
    "message",
    "kind_of",
    "encode",
    "decode",
    "decode_as",
    "variant",
]


class Malformed(Exception):
    """A message body that does not decode: the sender's problem, never the receiver's.

    Raised while handling a message (by `Envelope.value`, a typed decode, or the actor itself
    for a body of the wrong shape), it rejects the message: the host makes it a dead letter
    with the reason, and the actor does not fail.
    """


class Codec:
    """How the bodies of a message class are encoded: override both methods."""

    def encode(self, obj):
        """The body for `obj` (bytes)."""
        raise NotImplementedError

    def decode(self, cls, body):
        """An instance of `cls` from `body`; raises `Malformed` if `body` is not one."""
        raise NotImplementedError


def _loads(body):
    if not body:
        return None
    try:
        return json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError) as e:
        raise Malformed(f"body is not JSON: {e}") from None


def _dumps(value):
    return json.dumps(value, separators=(",", ":")).encode()


class JsonCodec(Codec):
    """UTF-8 JSON: a dataclass is an object of its fields; a class may instead define
    `to_json(self)` and `from_json(cls, value)`."""

    def encode(self, obj):
        if hasattr(obj, "to_json"):
            return _dumps(obj.to_json())
        if dataclasses.is_dataclass(obj):
            return _dumps(dataclasses.asdict(obj))
        return _dumps(obj)

    def decode(self, cls, body):
        value = _loads(body)
        if hasattr(cls, "from_json"):
            try:
                return cls.from_json(value)
            except (TypeError, ValueError, KeyError) as e:
                raise Malformed(f"not a `{kind_of(cls)}`: {e}") from None
        if dataclasses.is_dataclass(cls):
            if value is None and not dataclasses.fields(cls):
                return cls()
            if not isinstance(value, dict):
                raise Malformed(f"not a `{kind_of(cls)}`: expected a JSON object")
            try:
                return cls(**value)
            except TypeError as e:
                raise Malformed(f"not a `{kind_of(cls)}`: {e}") from None
        return value


JSON = JsonCodec()


def message(kind=None, codec=JSON):
    """Class decorator: declares a message type, its wire kind (the class name by default) and
    its codec (JSON by default). Use it on a dataclass::

        @mote.message("order")
        @dataclass
        class Order:
            id: int
            amount: int
    """

    def declare(cls):
        cls.__mote_kind__ = kind if kind is not None else cls.__name__
        cls.__mote_codec__ = codec
        return cls

    if isinstance(kind, type):  # used bare: @mote.message
        cls, kind = kind, None
        return declare(cls)
    return declare


def kind_of(cls_or_obj):
    """The wire kind of a message class or instance declared with `@message`."""
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    kind = getattr(cls, "__mote_kind__", None)
    if kind is None:
        raise TypeError(f"{cls.__name__} is not declared with @mote.message")
    return kind


def encode(value):
    """The body for `value` (see the module's documentation)."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    codec = getattr(type(value), "__mote_codec__", None)
    if codec is not None:
        return codec.encode(value)
    return _dumps(value)


def decode(body):
    """The JSON value of `body` (None if it is empty); `Malformed` if it is not JSON."""
    return _loads(body)


def decode_as(cls, body):
    """`body` read as `cls`: a `@message` class through its codec, `bytes` as it is, `None`
    as a JSON value."""
    if cls is None:
        return _loads(body)
    if cls is bytes:
        return bytes(body)
    codec = getattr(cls, "__mote_codec__", None)
    if codec is not None:
        return codec.decode(cls, bytes(body))
    return JSON.decode(cls, bytes(body))


def variant(value):
    """Splits a Rust enum value in serde's JSON encoding into `(name, payload)`:
    `"Get"` -> `("Get", None)`, `{"Add": 5}` -> `("Add", 5)`. `Malformed` for anything else."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict) and len(value) == 1:
        ((name, payload),) = value.items()
        return name, payload
    raise Malformed(f"not an enum variant: {value!r}")
