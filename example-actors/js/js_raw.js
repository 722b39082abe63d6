// js_raw: `js_events`'s `stats` query answered straight on the componentize-js bindings, no SDK:
// the baseline `mote-bench languages` measures the SDK's per-call overhead against.
import { tell } from 'mote:actor/host@0.2.0';

const encoder = new TextEncoder();
let transformed = 0;

export const actor = {
  start(_init) {
    transformed = 0;
  },
  receive(msg) {
    if (msg.kind === 'stats' && msg.sender !== undefined) {
      tell(msg.sender, 'stats', encoder.encode(JSON.stringify({ transformed })));
    }
  },
  stopping(_reason) {},
};

export const supervisor = {
  supervise(_child, _kind, _error) {
    return undefined;
  },
};

export const upgrade = {
  saveState() {
    return undefined;
  },
  migrate(fromVersion, _state) {
    return { tag: 'err', val: `js_raw keeps no state from ${fromVersion}` };
  },
};
