// The journal actor of `example-actors/journal` in JavaScript: a durable list of values, kept
// as events with a snapshot every N (init: N, 0 for none), recovered after any restart.
//
// It speaks the example protocol's `Journal` in JSON (kind `Journal`): `{"Append":5}`,
// `{"AppendRange":{"from":1,"count":3}}`, `"Query"` (replies a `JournalState`), `"Forget"`
// (deletes its state and stops) and `"Crash"` (throws).
import { Actor, Malformed, exportActor, text, variant } from './mote/index.js';

class Journal extends Actor {
  start(ctx, init) {
    const [every] = text(init).trim().split(/\s+/);
    this.snapshotEvery = Number(every || 0);
    const recovery = ctx.recover();
    this.recoveredFromSnapshot = recovery.snapshot !== undefined;
    this.replayed = 0;
    this.values = recovery.fold(
      () => [],
      (values, value) => {
        values.push(value);
        this.replayed += 1;
      },
    );
    ctx.debug(`recovered ${this.values.length} values, ${this.replayed} replayed`);
  }

  receive(ctx, env) {
    if (env.kind !== 'Journal') return ctx.warn(`unhandled message of kind \`${env.kind}\``);
    const [order, arg] = variant(env.value);
    switch (order) {
      case 'Append':
        return this.append(ctx, arg);
      case 'AppendRange':
        for (let value = arg.from; value < arg.from + arg.count; value++) this.append(ctx, value);
        return undefined;
      case 'Query':
        if (ctx.sender() === undefined) return ctx.debug('ignoring a Query without a sender');
        return ctx.reply('JournalState', {
          values: this.values,
          recovered_from_snapshot: this.recoveredFromSnapshot,
          replayed: this.replayed,
        });
      case 'Forget':
        ctx.deleteState();
        return ctx.stopSelf();
      case 'Crash':
        throw new Error('journal: crash requested');
      default:
        throw new Malformed(`unknown Journal order \`${order}\``);
    }
  }

  append(ctx, value) {
    if (!Number.isSafeInteger(value) || value < 0) throw new Malformed(`not a value: ${value}`);
    const seq = ctx.persist(value);
    this.values.push(value);
    if (this.snapshotEvery && seq % this.snapshotEvery === 0) ctx.saveSnapshot(this.values);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Journal);
