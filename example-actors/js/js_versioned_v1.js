// Version 1 of the versioned counter (see `versioned.js`): migrates the state of any version.
import { exportActor } from './mote/index.js';
import { Counter } from './versioned.js';

class V1 extends Counter {
  static version = 1;
}

export const { actor, supervisor, upgrade } = exportActor(V1);
