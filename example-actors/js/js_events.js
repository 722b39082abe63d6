// js_events: a JavaScript actor that transforms order events. Init: "<topic> <next-path>".
// It subscribes to <topic> and also takes orders told to it directly; each `order` event
// {id, customer, amount, total} becomes {..., customer: upper-cased, tier: "gold" when the
// customer's running total is at least 10, else "standard", via: "js"} and is told to
// <next-path>. `stats` is answered with {transformed}. `throw` throws (a supervised failure).
import { Actor, exportActor, text } from './mote/index.js';

class Events extends Actor {
  start(ctx, init) {
    const [topic, next] = text(init).trim().split(/\s+/);
    this.next = next;
    this.transformed = 0;
    if (topic) ctx.subscribe(topic);
    ctx.info(`js_events started: topic ${topic}, next ${next}, restart cause ${ctx.restartCause()}`);
  }

  receive(ctx, msg) {
    switch (msg.kind) {
      case 'order': {
        const order = msg.value;
        const out = {
          ...order,
          customer: String(order.customer).toUpperCase(),
          tier: (order.total ?? order.amount) >= 10 ? 'gold' : 'standard',
          via: 'js',
        };
        this.transformed += 1;
        if (this.next) ctx.tell(this.next, 'order', out);
        break;
      }
      case 'stats':
        ctx.reply('stats', { transformed: this.transformed });
        break;
      case 'throw':
        throw new Error('js_events was asked to throw');
      default:
        ctx.warn(`ignoring ${msg.kind}`);
    }
  }
}

export const { actor, supervisor, upgrade } = exportActor(Events);
