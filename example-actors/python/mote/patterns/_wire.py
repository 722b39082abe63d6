"""What the pattern modules share: JSON of nested structures (with serde's conventions) and
message bodies carried inside a JSON message."""

import base64 as _base64
import dataclasses
import json

from ..codec import JsonCodec, Malformed, encode, kind_of


def json_value(value):
    """`value` as a JSON value: an object's own `to_json`, a dataclass's fields, `bytes` as an
    array of byte values (serde's `Vec<u8>`), lists and dicts recursively."""
    if hasattr(value, "to_json") and not isinstance(value, type):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


def list_of(convert):
    """A converter of a JSON array, each element with `convert`."""

    def each(values):
        if not isinstance(values, list):
            raise ValueError(f"expected a JSON array, got {values!r}")
        return [convert(v) for v in values]

    return each


def byte_values(values):
    """serde's `Vec<u8>` (an array of byte values) as `bytes`."""
    return bytes(list_of(int)(values))


class Wire:
    """Mixin for a dataclass whose JSON needs more than `dataclasses.asdict`: nested pattern
    types (`_nested`: field -> converter from JSON) and Python-reserved names (`_renamed`:
    attribute -> JSON key). Unknown keys are ignored on decode, as serde does."""

    _nested = {}
    _renamed = {}

    def to_json(self):
        return {
            self._renamed.get(f.name, f.name): json_value(getattr(self, f.name))
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_json(cls, value):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {value!r}")
        names = {cls._renamed.get(f.name, f.name): f.name for f in dataclasses.fields(cls)}
        fields = {}
        for key, v in value.items():
            name = names.get(key)
            if name is None:
                continue
            convert = cls._nested.get(name)
            fields[name] = convert(v) if convert is not None and v is not None else v
        return cls(**fields)


def body_of(msg):
    """`(kind, body, data)` of a typed message: a JSON one as its JSON value in `body`, any
    other as its encoded bytes in `data` (the other is None)."""
    kind = kind_of(msg)
    data = encode(msg)
    if isinstance(getattr(type(msg), "__mote_codec__", None), JsonCodec):
        return kind, (json.loads(data) if data else None), None
    return kind, None, data


def json_bytes(value):
    """A JSON value as compact UTF-8 JSON text, as serde_json writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def b64encode(data):
    """`data` in standard base64, with padding."""
    return _base64.b64encode(bytes(data)).decode("ascii")


def b64decode(text):
    """The bytes of standard base64 text (padding optional); `Malformed` if it is not."""
    try:
        return _base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (ValueError, TypeError) as e:
        raise Malformed(f"bad base64: {e}") from None
