// The entity of `example-actors/entity` in JavaScript: a virtual actor (init: its id) whose
// total lives in a snapshot, so it passivates and comes back, even after a host restart, with
// it.
//
// It speaks the protocol's `Entity` in JSON (kind `Entity`): `{"Add":k}`, `"Get"` (replies an
// `EntityValue` {"id","total","activations"}), `"Retire"` (deletes its state and stops),
// `"Stop"`.
import { Actor, Malformed, exportActor, text, variant } from './mote/index.js';

/** The snapshot: a typed message class (JSON `{"total","activations"}`). */
class Durable {
  static kind = 'Durable';
  total = 0;
  activations = 0;
}

class Entity extends Actor {
  start(ctx, init) {
    this.id = text(init).trim();
    if (!this.id) throw new Error('missing init argument <entity-id>');
    this.durable = ctx.recoverSnapshot(Durable) ?? new Durable();
    this.durable.activations += 1;
    ctx.saveSnapshot(this.durable);
    this.retired = false;
  }

  receive(ctx, env) {
    const [order, arg] = variant(env.value);
    switch (order) {
      case 'Add':
        this.durable.total += arg;
        return ctx.saveSnapshot(this.durable);
      case 'Get':
        return ctx.reply('EntityValue', {
          id: this.id,
          total: this.durable.total,
          activations: this.durable.activations,
        });
      case 'Retire':
        ctx.deleteState();
        this.retired = true;
        return ctx.stopSelf();
      case 'Stop':
        return ctx.stopSelf();
      default:
        throw new Malformed(`unknown Entity order \`${order}\``);
    }
  }

  stopping(ctx, _reason) {
    if (ctx.inShutdown() && !this.retired) ctx.saveSnapshot(this.durable);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Entity);
