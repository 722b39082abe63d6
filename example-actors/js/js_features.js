// The features actor (the spec is `features_work_through_mote` in tests/src/scenarios.rs): the
// contract's messaging, stash, behaviours, reminders, forwarding, priorities, lookup and clock,
// spoken in JSON. Init: the report path.
import { Actor, DeliveryMode, UNHANDLED, exportActor, text } from './mote/index.js';
import { Report } from './protocol.js';

class Features extends Actor {
  start(ctx, init) {
    this.reportTo = text(init).trim();
    this.total = 0;
    this.asks = new Map(); // ask id -> what it was for
    ctx.recover(); // durable, so it may set reminders
    ctx.subscribe('features');
    ctx.join('workers');
  }

  report(ctx, label, value) {
    ctx.tell(this.reportTo, new Report(ctx.path(), label, value));
  }

  receive(ctx, env) {
    const n = env.value?.n;
    switch (env.kind) {
      case 'ask-self':
        this.asks.set(ctx.ask(ctx.myself(), 'echo', { n }, { timeoutMs: 2000 }), 'echo');
        break;
      case 'echo':
        ctx.reply('echoed', { n: n + 1 });
        break;
      case 'ask-silent':
        this.asks.set(ctx.ask(ctx.myself(), 'silent', {}, { timeoutMs: 100 }), 'silent');
        break;
      case 'silent':
        break;
      case 'publish':
        this.report(ctx, 'published', ctx.publish('features', 'news', { n }));
        break;
      case 'news':
        this.report(ctx, 'news', n);
        break;
      case 'broadcast':
        this.report(ctx, 'broadcast', ctx.broadcastGroup('workers', 'work', { n }));
        break;
      case 'group':
        this.report(ctx, 'grouped', ctx.tellGroup('workers', 'work', { n }) ? 1 : 0);
        break;
      case 'work':
        this.report(ctx, 'work', n);
        break;
      case 'close':
        ctx.become(this.closed);
        break;
      case 'add':
        this.total += n;
        this.report(ctx, 'total', this.total);
        break;
      case 'remind':
        ctx.remind({ delayMs: env.value.delay_ms }, 'reminded', { n: 1 });
        break;
      case 'remind-cancel': {
        const id = ctx.remind({ delayMs: env.value.delay_ms }, 'reminded', { n: 1 });
        this.report(ctx, 'reminder-cancelled', ctx.cancelReminder(id) ? 1 : 0);
        break;
      }
      case 'reminded':
        this.report(ctx, 'reminded', n);
        break;
      case 'forward':
        ctx.forward(this.reportTo, new Report(ctx.path(), 'forwarded', n));
        break;
      case 'urgent':
        ctx.tellUrgent(this.reportTo, new Report(ctx.path(), 'urgent', n));
        break;
      case 'alias':
        this.report(ctx, 'aliased', ctx.alias('feat') === '/system/alias/feat' ? 1 : 0);
        break;
      case 'unalias':
        this.report(ctx, 'unaliased', ctx.unalias('feat') ? 1 : 0);
        break;
      case 'delivery': {
        ctx.setDelivery(DeliveryMode.AT_MOST_ONCE);
        const mode = ctx.delivery();
        ctx.setDelivery(DeliveryMode.AT_LEAST_ONCE);
        this.report(ctx, 'delivery', mode === DeliveryMode.AT_MOST_ONCE ? 1 : 0);
        break;
      }
      case 'inspect': {
        const me = ctx.myself();
        const found = ctx.resolve(me.path);
        this.report(ctx, 'resolved', found?.incarnation === me.incarnation ? 1 : 0);
        this.report(ctx, 'clock', ctx.sinceStart() > 0 ? 1 : 0);
        const depth = ctx.mailboxDepth(me.path);
        const nobody = ctx.mailboxDepth('/user/nobody');
        this.report(ctx, 'depth', depth !== undefined && nobody === undefined ? 1 : 0);
        break;
      }
      default:
        ctx.warn(`unhandled message of kind \`${env.kind}\``);
    }
  }

  /** The behaviour after `close`: adds wait in the stash until `open`. */
  closed(ctx, env) {
    if (env.kind === 'add') {
      ctx.stash();
      this.report(ctx, 'stashed', env.value.n);
    } else if (env.kind === 'open') {
      ctx.unbecome();
      ctx.unstashAll();
    } else {
      this.receive(ctx, env);
    }
  }

  // An ask's endpoint (`/system/ask/<id>`) is the sender of both the request and the reply:
  // asking itself, this actor gets its own `echo` request here first, to handle as a message.
  answered(ctx, askId, reply) {
    if (reply.kind !== 'echoed') return UNHANDLED;
    if (this.asks.get(askId) === 'echo') this.report(ctx, 'answered', reply.value.n);
    this.asks.delete(askId);
    return undefined;
  }

  askTimeout(ctx, askId) {
    if (this.asks.delete(askId)) this.report(ctx, 'ask-timeout', 1);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Features);
