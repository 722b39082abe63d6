"""The versioned counter of the hot swap tests (`VersionedCounter` in example-actors/protocol),
shared by `py_versioned_v1..v3`: counts `Add`s per stream, answers `Get` with its state and
version, and carries its state to the next version through `save_state`/`migrate`.

It speaks the protocol's `Versioned` in JSON (kind `Versioned`): `{"Add":{"stream","n"}}`,
`"Get"` (replies a `VersionedState`), `"Crash"`.
"""

import bisect

import mote


class Counter(mote.Actor):
    version = 0  # set by each module

    def start(self, ctx, init):
        self.count = 0
        self.sum = 0
        self.last = []  # [stream, last value], sorted by stream
        self.out_of_order = 0
        self.migrated_from = ""

    def add(self, stream, n):
        self.count += 1
        self.sum += n
        streams = [s for s, _ in self.last]
        i = bisect.bisect_left(streams, stream)
        if i < len(streams) and streams[i] == stream:
            if n != (self.last[i][1] + 1) & 0xFFFFFFFF:
                self.out_of_order += 1
            self.last[i][1] = n
        else:
            if n != 0:
                self.out_of_order += 1
            self.last.insert(i, [stream, n])

    def receive(self, ctx, env):
        order, arg = mote.variant(env.value)
        if order == "Add":
            self.add(arg["stream"], arg["n"])
        elif order == "Get":
            ctx.reply("VersionedState", {
                "version": self.version,
                "count": self.count,
                "sum": self.sum,
                "last": self.last,
                "out_of_order": self.out_of_order,
                "migrated_from": self.migrated_from,
            })
        elif order == "Crash":
            raise RuntimeError(f"versioned v{self.version}: crash requested")
        else:
            raise mote.Malformed(f"unknown Versioned order `{order}`")

    def save_state(self):
        return mote.state({
            "count": self.count,
            "sum": self.sum,
            "last": self.last,
            "out_of_order": self.out_of_order,
        })

    def migrate(self, ctx, from_version, state):
        self.start(ctx, b"")
        core = mote.from_state(state)
        self.count, self.sum = core["count"], core["sum"]
        self.last, self.out_of_order = core["last"], core["out_of_order"]
        self.migrated_from = from_version
        ctx.info(f"v{self.version}: migrated from `{from_version}` at count {self.count}")
