"""Typed messages for the pattern components `mote` ships (`mote deploy --builtin patterns`):
one module per pattern, with the same JSON schema as the Rust SDK's `mote_guest::patterns`.
A pattern's configuration is its spawn `init`::

    from mote.patterns import init, throttle
    slow = ctx.spawn("slow", throttle.MODULE, init(throttle.Config(target="/user/mailer", rate=10)))
    ctx.tell(slow, Mail(to="ada@example.org"))      # reaches /user/mailer within the rate

The patterns (each module has `MODULE`, its `Config` and its control and reply messages):

- `throttle`: passes messages on to a target at a set rate;
- `router`: routes each message to one of its routees (a group of paths or a pool);
- `circuit_breaker`: stands in front of a target, refusing requests while it keeps failing;
- `reaper`: scatter-gather, asks many targets and gathers (or reduces) their replies;
- `service_manager`: a fresh worker per request, replying as the manager;
- `pipeline`: stages in order, each replying with the next stage's input;
- `pipeline_builder`: builds and tears down pipelines on request;
- `pod_manager`: named children of one module, created by their first message;
- `supervision`: the `strategy` of a pattern's children (`Supervision`), used by the last
  three.

Bodies and nested objects keep the Rust JSON conventions: Rust `Option`s are `None` (written
as `null`, which the Rust side reads as absent), enums are their serde strings, a binary body
is `bytes` (an array of byte values) or base64 text where the Rust type says so.
"""

from ..codec import encode


def init(config):
    """The JSON `init` bytes of a pattern's configuration, for `spawn`."""
    return encode(config)


__all__ = ["init"]
