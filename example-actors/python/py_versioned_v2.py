"""Version 2 of the versioned counter (see `versioned.py`): migrates the state of any version."""

import mote
from versioned import Counter


class V2(Counter):
    version = 2


Actor, Supervisor, Upgrade = mote.export(V2)
