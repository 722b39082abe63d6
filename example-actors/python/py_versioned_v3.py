"""Version 3 of the versioned counter (see `versioned.py`), with a deliberate bug: it refuses
every state handed to it, so an upgrade to it fails and the old version keeps serving."""

import mote
from versioned import Counter


class V3(Counter):
    version = 3

    def migrate(self, ctx, from_version, state):
        raise RuntimeError(f"versioned v3: cannot migrate from `{from_version}` (deliberate bug)")


Actor, Supervisor, Upgrade = mote.export(V3)
