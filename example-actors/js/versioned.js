// The versioned counter of the hot swap tests (`VersionedCounter` in example-actors/protocol),
// shared by `js_versioned_v1..v3`: counts `Add`s per stream, answers `Get` with its state and
// version, and carries its state to the next version through `saveState`/`migrate`.
//
// It speaks the protocol's `Versioned` in JSON (kind `Versioned`): `{"Add":{"stream","n"}}`,
// `"Get"` (replies a `VersionedState`), `"Crash"`.
import { Actor, Malformed, fromState, state, variant } from './mote/index.js';

export class Counter extends Actor {
  /** Set by each module. */
  static version = 0;

  start(_ctx, _init) {
    this.count = 0;
    this.sum = 0;
    this.last = []; // [stream, last value], sorted by stream
    this.outOfOrder = 0;
    this.migratedFrom = '';
  }

  add(stream, n) {
    this.count += 1;
    this.sum += n;
    let i = 0;
    while (i < this.last.length && this.last[i][0] < stream) i++;
    if (i < this.last.length && this.last[i][0] === stream) {
      if (n !== (this.last[i][1] + 1) >>> 0) this.outOfOrder += 1;
      this.last[i][1] = n;
    } else {
      if (n !== 0) this.outOfOrder += 1;
      this.last.splice(i, 0, [stream, n]);
    }
  }

  receive(ctx, env) {
    const [order, arg] = variant(env.value);
    const version = this.constructor.version;
    switch (order) {
      case 'Add':
        return this.add(arg.stream, arg.n);
      case 'Get':
        return ctx.reply('VersionedState', {
          version,
          count: this.count,
          sum: this.sum,
          last: this.last,
          out_of_order: this.outOfOrder,
          migrated_from: this.migratedFrom,
        });
      case 'Crash':
        throw new Error(`versioned v${version}: crash requested`);
      default:
        throw new Malformed(`unknown Versioned order \`${order}\``);
    }
  }

  saveState() {
    return state({ count: this.count, sum: this.sum, last: this.last, out_of_order: this.outOfOrder });
  }

  migrate(ctx, fromVersion, saved) {
    this.start(ctx, new Uint8Array());
    const core = fromState(saved);
    this.count = core.count;
    this.sum = core.sum;
    this.last = core.last;
    this.outOfOrder = core.out_of_order;
    this.migratedFrom = fromVersion;
    ctx.info(`v${this.constructor.version}: migrated from \`${fromVersion}\` at count ${this.count}`);
  }
}
