// The JavaScript SDK in Node.js against the fake host (tests/fake/wit.js): run with
// `node --import ./tests/fake/register.js --test tests/` from example-actors/js.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { fake } from './fake/wit.js';
import {
  Actor,
  DeadLetter,
  Directive,
  Malformed,
  MoteError,
  REPLAY_PAGE,
  Strategy,
  UNHANDLED,
  decode,
  decodeAs,
  encode,
  exportActor,
  fromState,
  state,
  text,
  toJson,
  utf8,
  variant,
} from '../mote/index.js';

beforeEach(() => fake.reset());

const json = (bytes) => JSON.parse(new TextDecoder().decode(bytes));
const bob = { path: '/user/bob', incarnation: 3n };

/** A message as componentize-js hands it to `receive`. */
function msg(kind, value, sender = bob) {
  const body = value instanceof Uint8Array ? value : encode(value);
  const m = { sender, kind, body };
  fake.handling = m;
  return m;
}

class Order {
  static kind = 'order';
  constructor(customer, amount) {
    this.customer = customer;
    this.amount = amount;
  }
  total() {
    return this.amount * 2;
  }
}

test('bodies: bytes as they are, typed messages and values as JSON, BigInts exact', () => {
  const raw = new Uint8Array([1, 2, 3]);
  assert.equal(encode(raw), raw);
  assert.equal(encode(undefined).length, 0);
  assert.deepEqual(json(encode(new Order('ann', 5))), { customer: 'ann', amount: 5 });
  assert.equal(text(encode({ id: 2n ** 64n - 1n, n: 1 })), '{"id":18446744073709551615,"n":1}');
  assert.equal(toJson(['x', 5n]), '["x",5]');
  const order = decodeAs(Order, utf8('{"customer":"bob","amount":4}'));
  assert.ok(order instanceof Order);
  assert.equal(order.total(), 8, 'a decoded message has its class methods');
  assert.deepEqual(variant('Query'), ['Query', undefined]);
  assert.deepEqual(variant({ Append: 5 }), ['Append', 5]);
  assert.throws(() => variant({ a: 1, b: 2 }), Malformed);
  assert.throws(() => decode(utf8('{nope')), Malformed);
  assert.throws(() => decode(new Uint8Array([0xff, 0xfe])), Malformed);
  assert.throws(() => decodeAs(Order, utf8('[1]')), Malformed);
  assert.equal(decode(new Uint8Array()), null);
});

test('a message class may bring its own codec', () => {
  class Pair {
    static kind = 'pair';
    static codec = {
      encode: (p) => new Uint8Array([p.a, p.b]),
      decode: (_cls, body) => Object.assign(new Pair(), { a: body[0], b: body[1] }),
    };
  }
  const bytes = encode(Object.assign(new Pair(), { a: 1, b: 2 }));
  assert.deepEqual([...bytes], [1, 2]);
  assert.deepEqual({ ...decodeAs(Pair, bytes) }, { a: 1, b: 2 });
});

test('typed messages reach receive decoded; other kinds go to unhandled', () => {
  const got = [];
  class Shop extends Actor {
    static messages = [Order];
    receive(ctx, order) {
      got.push(order);
      ctx.reply('total', order.total());
    }
  }
  const { actor } = exportActor(Shop);
  assert.deepEqual(fake.calls, [], 'exporting (at pre-initialisation) calls no host function');
  assert.equal(actor.start(new Uint8Array()), undefined);
  assert.equal(actor.receive(msg('order', new Order('ann', 5))), undefined);
  assert.ok(got[0] instanceof Order);
  const [[to, kind, body]] = fake.callsOf('tell');
  assert.deepEqual([to, kind, json(body)], [bob, 'total', 10]);
  assert.equal(actor.receive(msg('other', {})), undefined);
  assert.deepEqual(fake.logs('warn'), ['unhandled message of kind `other`']);
});

test('a malformed body is rejected, a dead letter, and the actor goes on', () => {
  class Shop extends Actor {
    static messages = [Order];
    receive(ctx, order) {
      if (typeof order.amount !== 'number') throw new Malformed('amount is not a number');
      ctx.info(`ok ${order.amount}`);
    }
  }
  const { actor } = exportActor(Shop);
  actor.start(new Uint8Array());
  assert.equal(actor.receive(msg('order', utf8('{not json'))), undefined);
  assert.equal(actor.receive(msg('order', { customer: 'x', amount: 'lots' })), undefined);
  const rejects = fake.callsOf('reject').map(([r]) => r);
  assert.equal(rejects.length, 2);
  assert.match(rejects[0], /^malformed `order` body: body is not JSON/);
  assert.equal(rejects[1], 'malformed `order` body: amount is not a number');
  actor.receive(msg('order', new Order('y', 3)));
  assert.deepEqual(fake.logs('info'), ['ok 3']);
});

test('a throw is the failure returned to the host, never a trap; async hooks are awaited', async () => {
  class Fragile extends Actor {
    receive(ctx, env) {
      if (env.kind === 'boom') throw new Error('boom');
      if (env.kind === 'later') {
        return Promise.resolve().then(() => ctx.reply('done', { after: 'await' }));
      }
      if (env.kind === 'reject') return Promise.reject(new TypeError('async boom'));
      return undefined;
    }
  }
  const { actor } = exportActor(Fragile);
  actor.start(new Uint8Array());
  const failed = actor.receive(msg('boom', {}));
  assert.equal(failed.tag, 'err');
  assert.match(failed.val, /^Error: boom/);
  assert.equal(await actor.receive(msg('later', {})), undefined);
  assert.deepEqual(json(fake.callsOf('tell')[0][2]), { after: 'await' }, 'the reply after an await still has its sender');
  const rejected = await actor.receive(msg('reject', {}));
  assert.equal(rejected.tag, 'err');
  assert.match(rejected.val, /^TypeError: async boom/);
  class BadStart extends Actor {
    start() {
      throw new Malformed('a bad init is a failure, not a dead letter');
    }
  }
  assert.equal(exportActor(BadStart).actor.start(new Uint8Array()).tag, 'err');
});

test('behaviours stack and take effect when the hook returns, not if it fails', () => {
  const seen = [];
  class Door extends Actor {
    receive(ctx, env) {
      seen.push(`open:${env.kind}`);
      if (env.kind === 'close') ctx.become(this.closed);
      if (env.kind === 'close-and-fail') {
        ctx.become(this.closed);
        throw new Error('no');
      }
    }
    closed(ctx, env) {
      seen.push(`closed:${env.kind}`);
      assert.ok(this instanceof Door, 'a behaviour runs with the actor as this');
      if (env.kind === 'open') ctx.unbecome();
    }
  }
  const { actor } = exportActor(Door);
  actor.start(new Uint8Array());
  actor.receive(msg('close-and-fail', {}));
  actor.receive(msg('knock', {}));
  actor.receive(msg('close', {}));
  actor.receive(msg('knock', {}));
  actor.receive(msg('open', {}));
  actor.receive(msg('knock', {}));
  assert.deepEqual(seen, ['open:close-and-fail', 'open:knock', 'open:close', 'closed:knock', 'closed:open', 'open:knock']);
});

test('the stash keeps the message being handled and gives it back in order', () => {
  class Gate extends Actor {
    receive(ctx, env) {
      if (env.kind === 'item') ctx.stash();
      if (env.kind === 'flush') {
        ctx.info(`stashed ${ctx.stashed()}, first ${ctx.peek().kind}`);
        ctx.unstashAll();
      }
    }
  }
  const { actor } = exportActor(Gate);
  actor.start(new Uint8Array());
  const first = msg('item', { n: 1 });
  actor.receive(first);
  actor.receive(msg('item', { n: 2 }));
  assert.equal(fake.stashBox.length, 2);
  assert.equal(fake.stashBox[0], first);
  actor.receive(msg('flush', {}));
  assert.deepEqual(fake.logs('info'), ['stashed 2, first item']);
  assert.equal(fake.callsOf('unstashAll').length, 1);
  fake.fail('stash', { tag: 'full' });
  actor.receive(msg('item', { n: 3 }));
  assert.deepEqual(fake.callsOf('reject').at(-1), ['cannot stash: full']);
});

test('recovery folds the snapshot and every event after it, a page at a time', () => {
  fake.snapshot = { seq: 2n, state: encode([1, 2]) };
  for (let i = 3; i <= REPLAY_PAGE + 10; i++) fake.events.push({ seq: BigInt(i), data: encode(i) });
  fake.seq = BigInt(REPLAY_PAGE + 10);
  let values;
  class Journal extends Actor {
    start(ctx) {
      const recovery = ctx.recover();
      assert.equal(recovery.snapshotSeq, 2);
      values = recovery.fold(() => [], (vs, v) => void vs.push(v));
      assert.equal(recovery.lastSeq, REPLAY_PAGE + 10);
    }
  }
  assert.equal(exportActor(Journal).actor.start(new Uint8Array()), undefined);
  assert.equal(values.length, REPLAY_PAGE + 10);
  assert.deepEqual(values.slice(0, 4), [1, 2, 3, 4]);
  assert.equal(fake.callsOf('replay').length, 2, 'two pages');
  assert.deepEqual(fake.callsOf('replay')[0], [2n, REPLAY_PAGE]);
});

test('persist, snapshots, deletes and reminders speak numbers and give back ids', () => {
  class Durable extends Actor {
    start(ctx) {
      ctx.recover();
      assert.equal(ctx.persist({ n: 1 }), 1, 'a seq is a number');
      assert.equal(ctx.saveSnapshot({ total: 1 }), 1);
      ctx.deleteEvents(1);
      const reminder = ctx.remind({ delayMs: 60_000, periodMs: 1000 }, 'expire', { cart: 4 });
      assert.equal(typeof reminder, 'bigint', 'an id is a BigInt');
      assert.equal(ctx.cancelReminder(reminder), true);
      assert.equal(ctx.inShutdown(), false);
      ctx.deleteState();
    }
  }
  assert.equal(exportActor(Durable).actor.start(new Uint8Array()), undefined);
  const [[kind, body, delay, period]] = fake.callsOf('remind');
  assert.deepEqual([kind, json(body), delay, period], ['expire', { cart: 4 }, 60000n, 1000n]);
  assert.deepEqual(fake.callsOf('deleteEvents'), [[1n]]);
  assert.equal(fake.callsOf('deleteState').length, 1);
});

test('a refused host call is a MoteError with the contract variant', () => {
  let caught;
  class Sender extends Actor {
    start(ctx) {
      fake.fail('tellPath', { tag: 'quota', val: 'asks' });
      try {
        ctx.tell('/user/x', 'hi', {});
      } catch (e) {
        caught = e;
      }
      fake.fail('persist', { tag: 'not-recovered' });
      ctx.persist(1);
    }
  }
  const result = exportActor(Sender).actor.start(new Uint8Array());
  assert.ok(caught instanceof MoteError);
  assert.equal(caught.message, 'tell /user/x: quota(asks)');
  assert.deepEqual(caught.value, { tag: 'quota', val: 'asks' });
  assert.equal(result.tag, 'err', 'unhandled, it fails the actor');
  assert.match(result.val, /^MoteError: persist: not-recovered/);
});

test('asks: the id is a BigInt, the reply reaches answered, a timeout askTimeout', () => {
  const events = [];
  class Asker extends Actor {
    receive(ctx, env) {
      if (env.kind === 'go') this.id = ctx.ask('/user/b', 'q', { n: 1 }, { timeoutMs: 250 });
      else events.push(`message:${env.kind}`);
    }
    answered(ctx, askId, reply) {
      events.push(`answered:${askId === this.id}:${reply.value.n}`);
    }
    askTimeout(ctx, askId) {
      events.push(`timeout:${askId === this.id}`);
    }
  }
  const { actor } = exportActor(Asker);
  actor.start(new Uint8Array());
  actor.receive(msg('go', {}));
  const [[to, kind, , timeout]] = fake.callsOf('ask');
  assert.deepEqual([to, kind, timeout], [{ path: '/user/b', incarnation: 0n }, 'q', 250n]);
  const id = fake.nextId;
  const from = { path: `/system/ask/${id}`, incarnation: id };
  actor.receive(msg('a', { n: 7 }, from));
  actor.receive(msg('mote.ask-timeout', undefined, from));
  assert.deepEqual(events, ['answered:true:7', 'timeout:true']);

  class Plain extends Actor {
    receive(_ctx, env) {
      events.push(`plain:${env.kind}`);
    }
  }
  const plain = exportActor(Plain).actor;
  plain.start(new Uint8Array());
  plain.receive(msg('reply', {}, from));
  assert.equal(events.at(-1), 'plain:reply', 'by default a reply is handled like any message');
  assert.equal(typeof UNHANDLED, 'symbol');
});

test('pub/sub, groups, forwarding, priorities, lookup, naming and the clock', () => {
  class Busy extends Actor {
    start(ctx) {
      ctx.subscribe('t');
      assert.equal(ctx.publish('t', 'news', { n: 1 }), 2);
      ctx.join('g');
      assert.equal(ctx.tellGroup('g', 'work', {}), true);
      assert.equal(ctx.broadcastGroup('g', 'work', {}), 3);
      ctx.leave('g');
      ctx.unsubscribe('t');
      ctx.forward('/user/next', new Order('a', 1));
      ctx.tellUrgent({ path: '/user/x', incarnation: 4n }, 'now', {});
      assert.equal(ctx.resolve('/user/a').incarnation, 7n);
      assert.equal(ctx.children().length, 1);
      assert.equal(ctx.alias('front'), '/system/alias/front');
      assert.equal(ctx.sinceStart(), 1234);
      assert.equal(ctx.cpuTime(), 56);
      assert.equal(ctx.parent().path, '/user');
    }
  }
  assert.equal(exportActor(Busy).actor.start(new Uint8Array()), undefined);
  assert.deepEqual(fake.callsOf('forwardPath')[0].slice(0, 2), ['/user/next', 'order']);
  assert.deepEqual(fake.callsOf('tellUrgent')[0][0], { path: '/user/x', incarnation: 4n });
  assert.deepEqual(fake.callsOf('subscribe'), [['t']]);
});

test('timers: numbers in, BigInt ids out, to itself or another', () => {
  class Clock extends Actor {
    start(ctx) {
      const once = ctx.scheduleSelf({ delayMs: 100 }, 'tick', { n: 1 });
      const every = ctx.schedule('/user/b', { delayMs: 5, periodMs: 50 }, new Order('t', 1));
      assert.equal(typeof once, 'bigint');
      assert.equal(ctx.cancelTimer(every), true);
      assert.throws(() => ctx.scheduleSelf({ delayMs: -1 }, 'tick'), TypeError);
      assert.throws(() => ctx.scheduleSelf({ delayMs: 1.5 }, 'tick'), TypeError);
    }
  }
  assert.equal(exportActor(Clock).actor.start(new Uint8Array()), undefined);
  const [self, other] = fake.callsOf('schedule');
  assert.deepEqual([self[0], self[1], self[3], self[4]], [fake.self, 'tick', 100n, undefined]);
  assert.deepEqual([other[0].path, other[1], other[3], other[4]], ['/user/b', 'order', 5n, 50n]);
});

test('supervision: strategy, spawn with limits, watch, and the supervise hook', () => {
  class Parent extends Actor {
    start(ctx) {
      ctx.setStrategy(Strategy.allForOne(Directive.RESTART).restarts(5, 2000).backoff(10, 100));
      const child = ctx.spawnWith('w', 'worker', 'init', { memoryLimit: 1 << 20, mailboxCapacity: 8 });
      ctx.watch(child);
      ctx.spawnOn('b', 'remote', 'worker', new Uint8Array([1]));
    }
    supervise(ctx, child, failure) {
      if (failure.error.includes('crash')) throw new Error('supervise broke');
      return failure.kind === 'trap' ? Directive.STOP : undefined;
    }
    terminated(ctx, who) {
      ctx.info(`gone ${who.path}#${who.incarnation}`);
    }
  }
  const { actor, supervisor } = exportActor(Parent);
  assert.equal(actor.start(new Uint8Array()), undefined);
  assert.deepEqual(fake.callsOf('setStrategy')[0][0], {
    scope: 'all-for-one',
    directive: 'restart',
    maxRestarts: 5,
    withinMs: 2000n,
    backoffMinMs: 10n,
    backoffMaxMs: 100n,
  });
  const [[, , init, options]] = fake.callsOf('spawnWith');
  assert.equal(text(init), 'init');
  assert.deepEqual(options, { mailboxCapacity: 8, memoryLimit: 1048576n, cpuDeadlineMs: undefined, mailboxBytes: undefined, descendants: undefined });
  assert.equal(fake.callsOf('watch').length, 1);
  assert.equal(fake.callsOf('spawnOn')[0][0], 'b');
  const child = { path: '/user/a/w', incarnation: 101n };
  assert.equal(supervisor.supervise(child, 'trap', 'unreachable'), 'stop');
  assert.equal(supervisor.supervise(child, 'error', 'oops'), undefined);
  assert.equal(supervisor.supervise(child, 'error', 'crash'), undefined, 'a broken hook defers');
  assert.match(fake.logs('warn')[0], /supervise failed, deferring to the strategy: Error: supervise broke/);
  actor.receive(msg('mote.terminated', undefined, child));
  assert.deepEqual(fake.logs('info'), ['gone /user/a/w#101']);
});

test('upgrades: saveState hands the state over, migrate takes it or refuses', () => {
  class V1 extends Actor {
    start() {
      this.count = 41;
    }
    saveState() {
      return state({ count: this.count, big: 2n ** 60n });
    }
  }
  class V2 extends Actor {
    migrate(ctx, from, saved) {
      const core = fromState(saved);
      this.count = core.count + 1;
      ctx.info(`from ${from}: ${this.count}`);
    }
  }
  class V3 extends Actor {}
  const v1 = exportActor(V1);
  v1.actor.start(new Uint8Array());
  const saved = v1.upgrade.saveState();
  assert.equal(text(saved), '{"count":41,"big":1152921504606846976}');
  assert.equal(exportActor(V2).upgrade.migrate('1', saved), undefined);
  assert.deepEqual(fake.logs('info'), ['from 1: 42']);
  const refused = exportActor(V3).upgrade.migrate('2', saved);
  assert.equal(refused.tag, 'err');
  assert.match(refused.val, /does not migrate state from version `2`/);
  assert.equal(exportActor(V3).upgrade.saveState(), undefined, 'no instance, no state');
});

test('stopping gets the reason by name; dead letters decode', () => {
  const reasons = [];
  class Stopper extends Actor {
    stopping(ctx, reason) {
      reasons.push(reason);
      if (reason === 'shutdown') throw new Error('cannot fail a stop');
    }
    deadLetter(ctx, letter) {
      reasons.push(`${letter.target}:${letter.kind}:${letter.decodeOriginal(Order).customer}`);
    }
  }
  const { actor } = exportActor(Stopper);
  actor.start(new Uint8Array());
  actor.stopping({ tag: 'failure', val: 'boom' });
  actor.stopping({ tag: 'shutdown' });
  const body = encode(new Order('zed', 1));
  const target = utf8('/user/gone');
  const kind = utf8('order');
  const letter = new Uint8Array([target.length, ...target, kind.length, ...kind, body.length, ...body]);
  actor.receive(msg('mote.deadletter', letter));
  assert.deepEqual(reasons, ['failure', 'shutdown', '/user/gone:order:zed']);
  assert.throws(() => DeadLetter.decode(undefined, new Uint8Array([5, 1])), Malformed);
});

test('http call-outs: the request goes out, the outcome comes to httpResponse', () => {
  const outcomes = [];
  class Caller extends Actor {
    start(ctx) {
      this.id = ctx.httpRequest({ url: 'http://127.0.0.1:1/x', body: 'hi', timeoutMs: 500 });
    }
    httpResponse(_ctx, id, outcome) {
      outcomes.push([id === this.id, outcome.tag, outcome.val.status]);
    }
  }
  const { actor } = exportActor(Caller);
  actor.start(new Uint8Array());
  const [[request]] = fake.callsOf('httpRequest');
  assert.deepEqual([request.method, request.url, text(request.body), request.timeoutMs], ['GET', 'http://127.0.0.1:1/x', 'hi', 500n]);
  const id = fake.nextId;
  fake.responses.set(id, { tag: 'ok', val: { status: 200, headers: [], body: new Uint8Array() } });
  const idBytes = new Uint8Array(8);
  new DataView(idBytes.buffer).setBigUint64(0, id, true);
  actor.receive(msg('mote.http.response', idBytes, undefined));
  assert.deepEqual(outcomes, [[true, 'ok', 200]]);
});

test('pattern messages keep the Rust schema: a configuration is the JSON init', async () => {
  const { init, throttle } = await import('../mote/patterns.js');
  const config = new throttle.Config({ target: '/user/sink', rate: 10, burst: 2 });
  assert.deepEqual(json(init(config)), {
    per_ms: 1000,
    queue: 1000,
    target: '/user/sink',
    rate: 10,
    burst: 2,
  });
  assert.equal(throttle.SetRate.kind, 'throttle.set-rate');
  assert.deepEqual(json(encode(new throttle.GetStatus())), {});
  const status = decodeAs(throttle.Status, encode({ queued: 1, forwarded: 2, refused: 0, rate: 10, per_ms: 1000 }));
  assert.ok(status instanceof throttle.Status);
  assert.deepEqual([status.queued, status.forwarded], [1, 2]);
});

class Ping {
  static kind = 'ping';
  constructor(n) {
    this.n = n;
  }
}

class Bin {
  static kind = 'bin';
  static codec = { encode: (v) => Uint8Array.of(v.n), decode: (_cls, body) => Object.assign(new Bin(), { n: body[0] }) };
  constructor(n) {
    this.n = n;
  }
}

const SUPERVISION = { directive: 'restart', max_restarts: 3, within_ms: 10000, backoff_min_ms: 10, backoff_max_ms: 1000 };

test('router: group and pool configurations, broadcasts, routees', async () => {
  const { init, router } = await import('../mote/patterns.js');
  const group = new router.Config({ strategy: 'consistent-hash', hash_key: 'user', routees: ['/user/a'] });
  assert.deepEqual(json(init(group)), { strategy: 'consistent-hash', hash_key: 'user', routees: ['/user/a'], max_routees: 1000 });
  const pool = new router.Config({ strategy: 'smallest-mailbox', pool: new router.Pool({ module: 'counter', size: 4 }) });
  assert.deepEqual(json(init(pool)), {
    strategy: 'smallest-mailbox',
    routees: [],
    pool: { module: 'counter', size: 4, init: '', directive: 'restart', max_restarts: 3, within_ms: 10000 },
    max_routees: 1000,
  });
  const back = decodeAs(router.Config, utf8('{"strategy": "smallest-mailbox", "pool": {"module": "counter", "size": 4}}'));
  assert.ok(back.pool instanceof router.Pool);
  assert.deepEqual(json(init(back)), json(init(pool)));
  assert.notEqual(new router.Config({ strategy: 'random' }).routees, new router.Config({ strategy: 'random' }).routees);
  assert.deepEqual(json(encode(new router.AddRoutee({ path: '/user/b' }))), { path: '/user/b' });
  assert.equal(router.RemoveRoutee.kind, 'router.remove-routee');
  assert.deepEqual(json(encode(new router.GetRoutees())), {});
  const broadcast = router.Broadcast.of(new Ping(3));
  assert.deepEqual(json(encode(broadcast)), { kind: 'ping', body: { n: 3 } });
  assert.deepEqual(broadcast.message(), ['ping', utf8('{"n":3}')]);
  const binary = router.Broadcast.of(new Bin(7));
  assert.deepEqual(json(encode(binary)), { kind: 'bin', bytes: [7] });
  assert.deepEqual(decodeAs(router.Broadcast, encode(binary)).message(), ['bin', Uint8Array.of(7)]);
  assert.throws(() => new router.Broadcast({ kind: 'x' }).message(), Malformed);
  const routees = decodeAs(router.Routees, utf8('{"routees":["/user/a","/user/r/routee-0"],"routed":7}'));
  assert.deepEqual([routees.routees, routees.routed], [['/user/a', '/user/r/routee-0'], 7]);
});

test('circuit breaker: configuration and state', async () => {
  const { init, circuitBreaker: cb } = await import('../mote/patterns.js');
  const config = new cb.Config({ target: '/user/db', max_reset_timeout_ms: 60000, failure_kinds: ['db.error'] });
  assert.deepEqual(json(init(config)), {
    target: '/user/db',
    max_failures: 5,
    call_timeout_ms: 1000,
    reset_timeout_ms: 10000,
    max_reset_timeout_ms: 60000,
    failure_kinds: ['db.error'],
    max_pending: 1000,
  });
  assert.deepEqual(json(encode(new cb.GetState())), {});
  assert.equal(cb.Status.kind, 'circuit-breaker.state');
  const status = decodeAs(
    cb.Status,
    utf8('{"state":"half-open","failures":0,"pending":1,"retry_in_ms":0,"reset_timeout_ms":20000,"passed":9,"refused":4,"opened":2}'),
  );
  assert.deepEqual([status.state, status.opened], ['half-open', 2]);
  assert.equal(decodeAs(cb.Open, utf8('{"retry_in_ms":250}')).retry_in_ms, 250);
  assert.equal(decodeAs(cb.Failed, utf8('{"reason":"timeout"}')).reason, 'timeout');
});

test('reaper: gathers with bodies as JSON or base64, replies decoded', async () => {
  const { init, reaper, base64Encode, base64Decode } = await import('../mote/patterns.js');
  assert.deepEqual(json(init(new reaper.Config({ reduce: new reaper.Reduce({ op: 'count' }) }))), {
    max_gathers: 1000,
    max_targets: 1000,
    max_asks: 1000,
    deadline_ms: 5000,
    reduce: { op: 'count' },
  });
  const gather = reaper.Gather.of(['/user/a', '/user/b'], new Ping(1), { deadline_ms: 500, want: 1, reduce: new reaper.Reduce({ op: 'sum', field: 'n' }) });
  assert.deepEqual(json(encode(gather)), {
    targets: ['/user/a', '/user/b'],
    kind: 'ping',
    body: { n: 1 },
    deadline_ms: 500,
    want: 1,
    reduce: { op: 'sum', field: 'n' },
  });
  const back = decodeAs(reaper.Gather, encode(gather));
  assert.ok(back.reduce instanceof reaper.Reduce);
  assert.deepEqual(back.payloadBytes(), utf8('{"n":1}'));
  assert.deepEqual(json(encode(reaper.Gather.of(['/user/a'], new Bin(2)))), { targets: ['/user/a'], kind: 'bin', base64: 'Ag==' });
  for (const [bytes, text] of [[[], ''], [[102], 'Zg=='], [[102, 111], 'Zm8='], [[102, 111, 111], 'Zm9v'], [[0xff, 0xfe, 1, 2], '//4BAg==']]) {
    assert.equal(base64Encode(Uint8Array.from(bytes)), text);
    assert.deepEqual(base64Decode(text), Uint8Array.from(bytes));
  }
  assert.throws(() => base64Decode('Zm9v!'), Malformed);
  assert.deepEqual(reaper.payload(Uint8Array.of(2, 5)), [undefined, 'AgU=']);
  assert.deepEqual(reaper.payload(utf8('{"n": 1}')), [{ n: 1 }, undefined]);
  const gathered = decodeAs(
    reaper.Gathered,
    encode({
      replies: [
        { from: '/user/a', kind: 'ping', body: { n: 2 } },
        { from: '/user/b', kind: 'raw', base64: 'AgU=' },
      ],
      timed_out: ['/user/c'],
      failed: [{ target: 'x', error: 'bad path' }],
      complete: false,
    }),
  );
  const [first, second] = gathered.replies;
  assert.ok(first instanceof reaper.Reply && gathered.failed[0] instanceof reaper.Failed);
  assert.equal(first.from, '/user/a');
  assert.deepEqual(first.decode(undefined), { n: 2 });
  assert.deepEqual(second.payloadBytes(), Uint8Array.of(2, 5));
  assert.deepEqual([gathered.timed_out, gathered.failed[0].error, gathered.complete], [['/user/c'], 'bad path', false]);
  const reduced = decodeAs(reaper.Reduced, utf8('{"value":5.5,"from":3,"timed_out":[],"complete":true}'));
  assert.deepEqual([reduced.value, reduced.from, reduced.failed], [5.5, 3, []]);
  assert.equal(decodeAs(reaper.Refused, utf8('{"bound":"max_targets","limit":2,"reason":"3 targets"}')).limit, 2);
  assert.equal(decodeAs(reaper.Status, utf8('{"gathering":1,"asks_pending":2,"gathered":3,"refused":0}')).gathered, 3);
});

test('service manager: configuration and replies', async () => {
  const { init, serviceManager: sm } = await import('../mote/patterns.js');
  assert.deepEqual(json(init(new sm.Config({ module: 'w', init: '7', strategy: 'restart', max_restarts: 1 }))), {
    module: 'w',
    init: '7',
    max_workers: 16,
    queue: 1000,
    worker_timeout_ms: 30000,
    strategy: 'restart',
    max_restarts: 1,
  });
  assert.deepEqual(json(encode(new sm.GetStatus())), {});
  assert.equal(decodeAs(sm.Failed, utf8('{"failure":"timeout","reason":"no reply"}')).failure, 'timeout');
  const status = decodeAs(sm.Status, utf8('{"running":2,"queued":0,"served":10,"failed":1,"refused":0,"peak":4}'));
  assert.deepEqual([status.served, status.peak], [10, 4]);
});

test('pipeline and its builder: stages, supervision in either form, flat builds', async () => {
  const { init, pipeline, pipelineBuilder: pb, supervision } = await import('../mote/patterns.js');
  const config = new pipeline.Config({
    stages: [new pipeline.Stage({ module: 'stage', init: { add: 1 } }), new pipeline.Stage({ module: 'upper' })],
    sink: '/user/out',
  });
  assert.deepEqual(json(init(config)), {
    stages: [{ module: 'stage', init: { add: 1 } }, { module: 'upper' }],
    sink: '/user/out',
    stage_timeout_ms: 5000,
    max_in_flight: 1000,
    strategy: SUPERVISION,
  });
  assert.equal(json(init(new pipeline.Config({ stages: [{ module: 's' }], strategy: 'resume' }))).strategy, 'resume');
  const back = decodeAs(pipeline.Config, utf8('{"stages": [{"module": "s"}], "strategy": {"directive": "stop", "max_restarts": 9}}'));
  assert.ok(back.stages[0] instanceof pipeline.Stage && back.strategy instanceof supervision.Supervision);
  assert.deepEqual({ ...back.strategy }, { ...SUPERVISION, directive: 'stop', max_restarts: 9 });
  assert.equal(decodeAs(pipeline.Config, utf8('{"stages": [{"module": "s"}], "strategy": "resume"}')).strategy.directive, 'resume');
  assert.throws(() => decodeAs(pipeline.Config, utf8('{"stages": [], "strategy": "reboot"}')), Malformed);
  assert.deepEqual(json(encode(new pipeline.Failed({ reason: 'no' }))), { reason: 'no', input: 0, stage: 0 });
  assert.equal(pipeline.DropInput.kind, 'pipeline.drop');
  const status = decodeAs(pipeline.Status, utf8('{"stages":2,"in_flight":1,"completed":5,"failed":0,"dropped":1,"refused":0}'));
  assert.deepEqual([status.stages, status.completed], [2, 5]);

  assert.deepEqual(json(init(new pb.Config({ strategy: 'stop' }))), { module: 'pipeline', max_pipelines: 100, ready_timeout_ms: 5000, strategy: 'stop' });
  const build = pb.Build.of('p', new pipeline.Config({ stages: [new pipeline.Stage({ module: 'upper', init: '' })] }));
  assert.deepEqual(json(encode(build)), {
    name: 'p',
    stages: [{ module: 'upper', init: '' }],
    stage_timeout_ms: 5000,
    max_in_flight: 1000,
    strategy: SUPERVISION,
  });
  assert.deepEqual(json(encode(new pb.TearDown({ name: 'p' }))), { name: 'p' });
  assert.equal(pb.List.kind, 'pipeline-builder.list');
  assert.equal(decodeAs(pb.Built, utf8('{"name":"p","path":"/user/builder/p"}')).path, '/user/builder/p');
  assert.equal(decodeAs(pb.TornDown, utf8('{"name":"p","existed":true}')).existed, true);
  assert.deepEqual(decodeAs(pb.Pipelines, utf8('{"pipelines":["a","p"]}')).pipelines, ['a', 'p']);
});

test('pod manager: configuration and deliveries of JSON or binary bodies', async () => {
  const { init, podManager: pm, supervision } = await import('../mote/patterns.js');
  const config = new pm.Config({
    module: 'counter',
    init: { start: 1 },
    strategy: new supervision.Supervision({ max_restarts: 5, within_ms: 1000 }),
    create_on_dead_letter: false,
  });
  assert.deepEqual(json(init(config)), {
    module: 'counter',
    init: { start: 1 },
    max_pods: 1000,
    strategy: { ...SUPERVISION, max_restarts: 5, within_ms: 1000 },
    create_on_dead_letter: false,
  });
  const note = pm.Deliver.of('a', new Ping(4));
  assert.deepEqual(json(encode(note)), { pod: 'a', kind: 'ping', body: { n: 4 } });
  assert.deepEqual(note.bodyBytes(), utf8('{"n":4}'));
  const binary = pm.Deliver.of('b', new Bin(7));
  assert.deepEqual(json(encode(binary)), { pod: 'b', kind: 'bin', bytes: [7] });
  assert.deepEqual(decodeAs(pm.Deliver, encode(binary)).bodyBytes(), Uint8Array.of(7));
  assert.deepEqual(decodeAs(pm.Deliver, utf8('{"pod": "c", "kind": "k"}')).bodyBytes(), new Uint8Array());
  assert.deepEqual(json(encode(new pm.Create({ pod: 'a' }))), { pod: 'a' });
  const created = decodeAs(pm.Created, utf8('{"pod":"a","path":"/user/pods/a","new":true}'));
  assert.deepEqual([created.path, created.new], ['/user/pods/a', true]);
  assert.deepEqual(decodeAs(pm.Pods, utf8('{"pods":["a","b"]}')).pods, ['a', 'b']);
  assert.equal(decodeAs(pm.Removed, utf8('{"pod":"a","existed":false}')).existed, false);
  assert.ok(pm.validPodName('acme-1'));
  for (const bad of ['', '.', '..', 'a/b', 'a#1', 'a\n', 'x'.repeat(129)]) assert.ok(!pm.validPodName(bad), bad);
});
