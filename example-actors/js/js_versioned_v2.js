// Version 2 of the versioned counter (see `versioned.js`): migrates the state of any version.
import { exportActor } from './mote/index.js';
import { Counter } from './versioned.js';

class V2 extends Counter {
  static version = 2;
}

export const { actor, supervisor, upgrade } = exportActor(V2);
