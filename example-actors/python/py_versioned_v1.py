"""Version 1 of the versioned counter (see `versioned.py`): migrates the state of any version."""

import mote
from versioned import Counter


class V1(Counter):
    version = 1


Actor, Supervisor, Upgrade = mote.export(V1)
