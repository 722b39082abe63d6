// The ticker of `example-actors/ticker` in JavaScript: timers on demand (init: the report
// path).
//
// It speaks the example protocol's `Timer` in JSON (kind `Timer`):
// - `{"Once":{"delay_ms","tag"}}`, `{"Every":{"period_ms","tag"}}`: a timer to itself that
//   delivers `{"Fired":{"tag"}}` once or every period; a `Fired` is reported (`fired`, the tag);
// - `{"Cancel":{"tag"}}`: cancels the tag's timer, reported (`cancelled`, 1 if it was pending);
// - `{"EveryToSender":{"period_ms","tag"}}`: a `Report` `tick` straight to the sender, every
//   period;
// - `{"ReplyAfter":{"delay_ms","tag"}}`: a `Fired` to the sender after the delay.
// Reports are the protocol's `Report` {"from","label","value"} in JSON.
import { Actor, Malformed, exportActor, text, variant } from './mote/index.js';
import { Report } from './protocol.js';

const fired = (tag) => ({ Fired: { tag } });

class Ticker extends Actor {
  start(_ctx, init) {
    const [reportTo] = text(init).trim().split(/\s+/);
    if (!reportTo) throw new Error('missing init argument <report-path>');
    this.reportTo = reportTo;
    this.timers = new Map();
  }

  report(ctx, to, label, value) {
    ctx.tell(to, new Report(ctx.path(), label, value));
  }

  sender(ctx, order) {
    const sender = ctx.sender();
    if (sender === undefined) throw new Error(`\`${order}\` needs a sender`);
    return sender;
  }

  receive(ctx, env) {
    if (env.kind !== 'Timer') return ctx.warn(`unhandled message of kind \`${env.kind}\``);
    const [order, arg] = variant(env.value);
    const tag = arg?.tag;
    let timer;
    switch (order) {
      case 'Once':
        timer = ctx.scheduleSelf({ delayMs: arg.delay_ms }, 'Timer', fired(tag));
        break;
      case 'Every':
        timer = ctx.scheduleSelf({ delayMs: arg.period_ms, periodMs: arg.period_ms }, 'Timer', fired(tag));
        break;
      case 'Cancel': {
        const pending = this.timers.get(tag);
        this.timers.delete(tag);
        const cancelled = pending !== undefined && ctx.cancelTimer(pending);
        return this.report(ctx, this.reportTo, 'cancelled', cancelled ? 1 : 0);
      }
      case 'Fired':
        return this.report(ctx, this.reportTo, 'fired', tag);
      case 'EveryToSender': {
        const to = this.sender(ctx, order);
        const tick = new Report(ctx.path(), 'tick', tag);
        timer = ctx.schedule(to, { delayMs: arg.period_ms, periodMs: arg.period_ms }, tick);
        break;
      }
      case 'ReplyAfter':
        timer = ctx.schedule(this.sender(ctx, order), { delayMs: arg.delay_ms }, 'Timer', fired(tag));
        break;
      default:
        throw new Malformed(`unknown Timer order \`${order}\``);
    }
    this.timers.set(tag, timer);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Ticker);
