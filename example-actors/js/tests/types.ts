// Type-checks the SDK's declarations (mote/index.d.ts) against the way the examples use them:
// `tsc --noEmit --strict` over this file must pass (run by tests/js_sdk.rs).
import {
  Actor,
  Context,
  Directive,
  Envelope,
  Failure,
  Strategy,
  exportActor,
  fromState,
  state,
  text,
  type Address,
} from '../mote/index.js';
import { init, throttle } from '../mote/patterns.js';

// A pattern's configuration is typed, and its replies decode to their class.
const slowInit: Uint8Array = init(new throttle.Config({ target: '/user/sink', rate: 10 }));
const rate: number = new throttle.SetRate({ rate: 5 }).rate;
const queued: number = throttle.Status.fromJSON({ queued: 1 }).queued;
void [slowInit, rate, queued];

class Order {
  static kind = 'order';
  customer = '';
  amount = 0;
}

class Orders extends Actor {
  static messages = [Order];
  totals: Record<string, number> = {};

  start(ctx: Context, init: Uint8Array): void {
    ctx.setStrategy(Strategy.oneForOne(Directive.RESTART).restarts(3, 60_000));
    ctx.watch(ctx.spawn('audit', 'auditor', text(init)));
    this.totals = ctx.recover<Record<string, number>, Order>().fold(
      () => ({}),
      (totals, o) => {
        totals[o.customer] = (totals[o.customer] ?? 0) + o.amount;
      },
    );
    const id: bigint = ctx.scheduleSelf({ delayMs: 100, periodMs: 1000 }, 'tick', { n: 1 });
    ctx.cancelTimer(id);
    ctx.remind({ delayMs: 5n }, 'expire');
  }

  receive(ctx: Context, order: Order): void {
    const seq: number = ctx.persist(order);
    if (seq % 100 === 0) ctx.saveSnapshot(this.totals);
    ctx.reply('total', this.totals[order.customer]);
    ctx.ask('/user/b', 'q', { n: 1 }, { timeoutMs: 100 });
  }

  supervise(_ctx: Context, _child: Address, failure: Failure) {
    return failure.error.includes('retry') ? Directive.RESUME : undefined;
  }

  async answered(ctx: Context, askId: bigint, reply: Envelope): Promise<void> {
    ctx.info(`${askId}: ${reply.value}`);
  }

  saveState() {
    return state(this.totals);
  }

  migrate(_ctx: Context, _from: string, saved: Uint8Array): void {
    this.totals = fromState(saved);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Orders);
