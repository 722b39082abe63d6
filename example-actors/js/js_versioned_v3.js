// Version 3 of the versioned counter (see `versioned.js`), with a deliberate bug: it refuses
// every state handed to it, so an upgrade to it fails and the old version keeps serving.
import { exportActor } from './mote/index.js';
import { Counter } from './versioned.js';

class V3 extends Counter {
  static version = 3;

  migrate(_ctx, fromVersion, _saved) {
    throw new Error(`versioned v3: cannot migrate from \`${fromVersion}\` (deliberate bug)`);
  }
}

export const { actor, supervisor, upgrade } = exportActor(V3);
