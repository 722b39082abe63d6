// A pipeline stage in JavaScript (the `pipeline` pattern's stage protocol, as
// `example-actors/stage` speaks it in Rust): it replies to every message, whatever its kind,
// with a message of the same kind whose body is the same JSON object with its integer `value`
// replaced by `value * mul + add`; the other fields pass untouched. Init: `{"add": a, "mul": m}`
// (both optional: 0 and 1). A body that is not an object with an integer `value` is rejected
// (a dead letter).
import { Actor, Malformed, decode, exportActor } from './mote/index.js';

class Stage extends Actor {
  start(ctx, init) {
    const config = decode(init) ?? {};
    this.add = config.add ?? 0;
    this.mul = config.mul ?? 1;
  }

  receive(ctx, env) {
    const body = env.value;
    if (body === null || typeof body !== 'object' || !Number.isInteger(body.value)) {
      throw new Malformed('a stage takes a JSON object with an integer `value`');
    }
    body.value = body.value * this.mul + this.add;
    ctx.reply(env.kind, body);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Stage);
