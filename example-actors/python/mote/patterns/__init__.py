"""Typed messages for the pattern components `mote` ships (`mote deploy --builtin patterns`):
one module per pattern, with the same JSON schema as the Rust SDK's `mote_guest::patterns`.
A pattern's configuration is its spawn `init`::

    from mote.patterns import init, throttle
    slow = ctx.spawn("slow", throttle.MODULE, init(throttle.Config(target="/user/mailer", rate=10)))
    ctx.tell(slow, Mail(to="ada@example.org"))      # reaches /user/mailer within the rate
"""

from ..codec import encode


def init(config):
    """The JSON `init` bytes of a pattern's configuration, for `spawn`."""
    return encode(config)


__all__ = ["init"]
