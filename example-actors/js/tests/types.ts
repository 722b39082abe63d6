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
import {
  circuitBreaker,
  init,
  pipeline,
  pipelineBuilder,
  podManager,
  reaper,
  router,
  serviceManager,
  supervision,
  throttle,
} from '../mote/patterns.js';

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

// Every pattern's configuration, control messages and replies are typed alike.
const routerInit: Uint8Array = init(
  new router.Config({ strategy: 'smallest-mailbox', pool: new router.Pool({ module: 'counter', size: 4 }) }),
);
const hashed = new router.Config({ strategy: 'consistent-hash', hash_key: 'user', routees: ['/user/a'] });
const routed: number = router.Routees.fromJSON({ routees: [], routed: 3 }).routed;
const [broadcastKind, broadcastBody]: [string, Uint8Array] = router.Broadcast.of(new Order()).message();
const breakerState: circuitBreaker.State = circuitBreaker.Status.fromJSON({ state: 'open' }).state;
const breaker = new circuitBreaker.Config({ target: '/user/db', failure_kinds: ['db.error'] });
const gather: reaper.Gather = reaper.Gather.of(['/user/a'], new Order(), {
  want: 1,
  reduce: new reaper.Reduce({ op: 'sum', field: 'amount' }),
});
const gathered = reaper.Gathered.fromJSON({});
const firstFrom: string | undefined = gathered.replies[0]?.from;
const firstOrder: Order | undefined = gathered.replies[0]?.decode(Order);
const reducedValue: unknown = reaper.Reduced.fromJSON({}).value;
const workers = new serviceManager.Config({ module: 'w', strategy: 'restart' });
const served: number = serviceManager.Status.fromJSON({}).served;
const stages = new pipeline.Config({
  stages: [new pipeline.Stage({ module: 'stage', init: { add: 1 } }), { module: 'upper' }],
  strategy: new supervision.Supervision({ directive: 'resume' }),
});
const failedAt: number = pipeline.Failed.fromJSON({ reason: 'no' }).stage;
const build: pipelineBuilder.Build = pipelineBuilder.Build.of('p', stages);
const builtPath: string = pipelineBuilder.Built.fromJSON({}).path;
const pods = new podManager.Config({ module: 'counter', strategy: 'stop', create_on_dead_letter: false });
const delivered: Uint8Array = podManager.Deliver.of('a', new Order()).bodyBytes();
const podNames: string[] = podManager.Pods.fromJSON({}).pods;
void [routerInit, hashed, routed, broadcastKind, broadcastBody, breakerState, breaker, gather];
void [firstFrom, firstOrder, reducedValue, workers, served, failedAt, build, builtPath, pods, delivered, podNames];

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
