"""py_raw: `py_orders`'s `totals` query answered straight on the componentize-py bindings, no
SDK: the baseline `mote-bench languages` measures the SDK's per-call overhead against."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host

count = 0
totals = {}


class Actor(exports.Actor):
    def start(self, init):
        pass

    def receive(self, msg):
        if msg.kind == "totals" and msg.sender is not None:
            body = json.dumps({"count": count, "totals": totals}, separators=(",", ":"))
            host.tell(msg.sender, "totals", body.encode())

    def stopping(self, reason):
        pass


class Supervisor(exports.Supervisor):
    def supervise(self, child, kind, error):
        return None


class Upgrade(exports.Upgrade):
    def save_state(self):
        return None

    def migrate(self, from_version, state):
        raise Err(f"py_raw keeps no state from {from_version}")
