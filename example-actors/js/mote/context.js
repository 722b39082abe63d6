// `Context`: what an actor can ask of the host, with the Rust SDK's names in camelCase.
//
// Numbers: durations, counts and sequence numbers are plain numbers; identities that may use
// all 64 bits (an address's incarnation, ask, timer and reminder ids) are BigInts, compared
// with `===`. Any u64 parameter takes a number or a BigInt.
import * as wit from './wit.js';
import { Malformed, decode, decodeAs, encode, isMessage, kindOf, utf8 } from './codec.js';

/** The path prefix of the sender of an ask's reply or timeout: `/system/ask/<id>`. */
export const ASK_PREFIX = '/system/ask/';

/** How many events `Recovery.events` reads from the host at a time. */
export const REPLAY_PAGE = 1024;

/** A supervisor's directives. */
export const Directive = Object.freeze({
  RESUME: 'resume',
  RESTART: 'restart',
  STOP: 'stop',
  ESCALATE: 'escalate',
});

/** `DeliveryMode.AT_LEAST_ONCE` (the default of a durable actor) or `AT_MOST_ONCE`. */
export const DeliveryMode = Object.freeze({
  AT_LEAST_ONCE: 'at-least-once',
  AT_MOST_ONCE: 'at-most-once',
});

const LOG_LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

/**
 * A host call the host refused (a send past a quota, a persistence error...): `value` is the
 * contract's error variant (`{ tag: 'quota', val: 'asks' }`). Unhandled, it fails the actor.
 */
export class MoteError extends Error {
  constructor(what, value) {
    super(`${what}: ${describe(value)}`);
    this.name = 'MoteError';
    this.value = value;
  }
}

function describe(value) {
  if (value && typeof value === 'object' && 'tag' in value) {
    return value.val === undefined ? value.tag : `${value.tag}(${value.val})`;
  }
  return String(value);
}

/** Calls a host function, turning the binding's thrown error variant into a `MoteError`. */
function call(what, fn, ...args) {
  try {
    return fn(...args);
  } catch (e) {
    if (e && Object.prototype.hasOwnProperty.call(e, 'payload')) throw new MoteError(what, e.payload);
    throw e;
  }
}

/** A u64 parameter: a non-negative integer number or a BigInt. */
export function u64(value) {
  if (typeof value === 'bigint') return BigInt.asUintN(64, value);
  if (Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw new TypeError(`expected a non-negative integer, got ${value}`);
}

/** An optional u64 parameter. */
function u64opt(value) {
  return value === undefined || value === null ? undefined : u64(value);
}

/** An address for a path (incarnation 0: whoever lives there) or an address. */
function addressOf(to) {
  if (typeof to === 'string') return { path: to, incarnation: 0n };
  if (to && typeof to.path === 'string') return { path: to.path, incarnation: u64(to.incarnation ?? 0n) };
  throw new TypeError(`not a path or an address: ${to}`);
}

/** `[kind, body]` for a message (typed, or a kind and a value). */
function kindBody(msg, value, hasValue) {
  if (typeof msg === 'string') return [msg, encode(value)];
  if (isMessage(msg)) {
    if (hasValue) throw new TypeError('a typed message carries its own body: pass no value');
    return [kindOf(msg), encode(msg)];
  }
  throw new TypeError('a message is a kind (string) and a value, or a message class instance');
}

/** Init or body bytes: text as UTF-8, anything else encoded like a body. */
function bytesOf(init) {
  return typeof init === 'string' ? utf8(init) : encode(init);
}

/**
 * Sends through `byPath` to a path or `byAddress` to an address (the contract has one import
 * of each); a refusal throws a `MoteError` naming `verb` and the target.
 */
function send(verb, to, byPath, byAddress, kind, body) {
  if (typeof to === 'string') call(`${verb} ${to}`, byPath, to, kind, body);
  else call(`${verb} ${to.path}`, byAddress, addressOf(to), kind, body);
}

/** A message as it arrived: `kind`, `sender` (an address or `undefined`) and the raw `body`. */
export class Envelope {
  constructor(kind, body = new Uint8Array(), sender = undefined) {
    this.kind = kind;
    this.body = body;
    this.sender = sender;
  }

  /** The body's JSON value (`null` if empty); `Malformed` if it is not JSON. */
  get value() {
    return decode(this.body);
  }

  /** Whether this message is of the message class `cls`. */
  is(cls) {
    return this.kind === kindOf(cls);
  }

  /** The body as `cls` (a message class); `Malformed` if it is not one. */
  decode(cls) {
    if (this.kind !== kindOf(cls)) {
      throw new Malformed(`expected a \`${kindOf(cls)}\`, got a \`${this.kind}\``);
    }
    return decodeAs(cls, this.body);
  }
}

/**
 * How an actor supervises its children:
 * `Strategy.oneForOne(Directive.RESTART).restarts(3, 1000).backoff(10, 1000)`.
 */
export class Strategy {
  constructor(scope, directive) {
    this.scope = scope;
    this.directive = directive;
    this.maxRestarts = 3;
    this.withinMs = 1000;
    this.backoffMinMs = 0;
    this.backoffMaxMs = 0;
  }

  /** Each failed child is handled alone. */
  static oneForOne(directive) {
    return new Strategy('one-for-one', directive);
  }

  /** A failed child's directive applies to all its siblings too. */
  static allForOne(directive) {
    return new Strategy('all-for-one', directive);
  }

  /** At most `maxRestarts` restarts of one child within `withinMs`; one more escalates. */
  restarts(maxRestarts, withinMs) {
    this.maxRestarts = maxRestarts;
    this.withinMs = withinMs;
    return this;
  }

  /** Restart delays from `minMs`, doubling per restart in the window, up to `maxMs`. */
  backoff(minMs, maxMs) {
    this.backoffMinMs = minMs;
    this.backoffMaxMs = maxMs;
    return this;
  }

  /** The contract's record. */
  toWit() {
    return {
      scope: this.scope,
      directive: this.directive,
      maxRestarts: this.maxRestarts >>> 0,
      withinMs: u64(this.withinMs),
      backoffMinMs: u64(this.backoffMinMs),
      backoffMaxMs: u64(this.backoffMaxMs),
    };
  }
}

/** How a child failed: `kind` (`trap`, `error`, `memory-limit`...) and the `error` text. */
export class Failure {
  constructor(kind, error) {
    this.kind = kind;
    this.error = error;
  }
}

function varint(body, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    if (at >= body.length) throw new Malformed('dead letter: truncated length');
    const byte = body[at++];
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [value, at];
    shift += 7;
    if (shift > 49) throw new Malformed('dead letter: length too long');
  }
}

/**
 * A dead letter as a subscriber of `/system/deadletters` receives it: the original `sender`,
 * `target` path, `kind` and `body`.
 */
export class DeadLetter {
  constructor(sender, target, kind, body) {
    this.sender = sender;
    this.target = target;
    this.kind = kind;
    this.body = body;
  }

  /** Reads the host's encoding (three length-prefixed fields: target, kind, body). */
  static decode(sender, body) {
    const fields = [];
    let at = 0;
    for (let i = 0; i < 3; i++) {
      let n;
      [n, at] = varint(body, at);
      if (at + n > body.length) throw new Malformed('dead letter: truncated field');
      fields.push(body.subarray(at, at + n));
      at += n;
    }
    return new DeadLetter(sender, decodeAs(String, fields[0]), decodeAs(String, fields[1]), fields[2]);
  }

  /** The original body as `cls` (a message class). */
  decodeOriginal(cls) {
    return new Envelope(this.kind, this.body).decode(cls);
  }
}

/**
 * A persistent actor's durable state as `Context.recover` found it: `snapshot` (decoded, or
 * `undefined`), `snapshotSeq`, and `events()`, a generator of `[seq, event]` after it, read
 * from the host a page at a time.
 */
export class Recovery {
  constructor(snapshot, snapshotSeq, eventType) {
    this.snapshot = snapshot;
    this.snapshotSeq = snapshotSeq;
    this.lastSeq = snapshotSeq;
    this.eventType = eventType;
  }

  /** The events after the snapshot, in order, as `[seq, event]`. */
  *events() {
    for (;;) {
      const page = call('replay', wit.persistence.replay, u64(this.lastSeq), REPLAY_PAGE);
      for (const event of page) {
        const value = decodeAs(this.eventType, event.data);
        this.lastSeq = Number(event.seq);
        yield [this.lastSeq, value];
      }
      if (page.length < REPLAY_PAGE) return;
    }
  }

  /**
   * The state: the snapshot (or `init()` without one; `init` may be a plain value), then
   * `apply(state, event)` for each later event in order. `apply` returns the new state, or
   * `undefined` having changed the state in place.
   */
  fold(init, apply) {
    let state = this.snapshot !== undefined ? this.snapshot : typeof init === 'function' ? init() : init;
    for (const [, event] of this.events()) {
      const changed = apply(state, event);
      if (changed !== undefined) state = changed;
    }
    return state;
  }
}

/**
 * What an actor can do, handed to each of its hooks. Sends take a typed message
 * (`ctx.tell(to, new Order('ann', 5))`) or a kind and a JSON-able value
 * (`ctx.tell(to, 'order', { customer: 'ann' })`); `to` is a path (absolute or relative to this
 * actor) or an address.
 */
export class Context {
  constructor() {
    this.current = undefined;
    this.requests = [];
  }

  // -- host ------------------------------------------------------------------------------

  /** This actor's address. */
  myself() {
    return wit.host.selfAddress();
  }

  /** This actor's path. */
  path() {
    return wit.host.selfAddress().path;
  }

  /** The parent's address (`undefined` for the roots). */
  parent() {
    return wit.host.parent();
  }

  /** The sender of the message being handled (`undefined` if it has none). */
  sender() {
    return this.current?.sender;
  }

  /** Sends to an address or a path; this actor is the sender. */
  tell(to, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    send('tell', to, wit.host.tellPath, wit.host.tell, kind, body);
  }

  /** Sends to a path, absolute or relative to this actor. */
  tellPath(path, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    call(`tell ${path}`, wit.host.tellPath, path, kind, body);
  }

  /** Answers the sender of the message being handled (an ask's reply too). */
  reply(msg, value) {
    const sender = this.sender();
    if (!sender) throw new Error('reply: the message being handled has no sender');
    const [kind, body] = kindBody(msg, value, arguments.length > 1);
    call(`reply ${sender.path}`, wit.host.tell, sender, kind, body);
  }

  /** Sends with the sender of the message being handled as the sender. */
  forward(to, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    send('forward', to, wit.forwarding.forwardPath, wit.forwarding.forward, kind, body);
  }

  /** Like `tell`, on the receiver's urgent lane (ahead of its ordinary messages). */
  tellUrgent(to, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    send('tell', to, wit.priority.tellPathUrgent, wit.priority.tellUrgent, kind, body);
  }

  /** Spawns a child from a deployed module, handing it `init` (text or bytes); its address. */
  spawn(name, module, init) {
    return call(`spawn ${name}`, wit.host.spawn, name, module, bytesOf(init));
  }

  /** Stops this actor or a descendant, after its current message. */
  stop(target) {
    wit.host.stop(addressOf(target));
  }

  /** Stops this actor after the current message. */
  stopSelf() {
    wit.host.stop(wit.host.selfAddress());
  }

  /** Writes a line to the host log, tagged with this actor's path. */
  log(text, level = 'info') {
    wit.host.log(LOG_LEVELS.has(level) ? level : 'info', String(text));
  }

  /** `log` at level trace. */
  trace(text) {
    this.log(text, 'trace');
  }

  /** `log` at level debug. */
  debug(text) {
    this.log(text, 'debug');
  }

  /** `log` at level info. */
  info(text) {
    this.log(text, 'info');
  }

  /** `log` at level warn. */
  warn(text) {
    this.log(text, 'warn');
  }

  /** `log` at level error. */
  error(text) {
    this.log(text, 'error');
  }

  // -- supervision -----------------------------------------------------------------------

  /** Sets how this actor supervises its children (a `Strategy`). */
  setStrategy(strategy) {
    wit.supervision.setStrategy(strategy.toWit());
  }

  /**
   * Like `spawn`, with per-child limits (`{ mailboxCapacity, memoryLimit, cpuDeadlineMs,
   * mailboxBytes, descendants }`; a missing one takes the parent's).
   */
  spawnWith(name, module, init, limits = {}) {
    return call(`spawn ${name}`, wit.supervision.spawnWith, name, module, bytesOf(init), spawnOptions(limits));
  }

  /** Like `spawnWith`, on the cluster node `node` (the child stays this actor's child). */
  spawnOn(node, name, module, init, limits = {}) {
    return call(`spawn ${name} on ${node}`, wit.supervision.spawnOn, node, name, module, bytesOf(init), spawnOptions(limits));
  }

  /** Watches an incarnation: the `terminated` hook is called once when it stops. */
  watch(target) {
    call(`watch ${target.path}`, wit.supervision.watch, addressOf(target));
  }

  /** Stops watching an incarnation. */
  unwatch(target) {
    wit.supervision.unwatch(addressOf(target));
  }

  /** In `start`: why this instance replaces a failed one (`undefined` on a first start). */
  restartCause() {
    return wit.supervision.restartCause();
  }

  /** Pauses a child: it keeps its mailbox but handles nothing until `activate`. */
  deactivate(child) {
    return wit.lifecycle.deactivate(addressOf(child));
  }

  /** Resumes a child paused by `deactivate`. */
  activate(child) {
    return wit.lifecycle.activate(addressOf(child));
  }

  // -- timers ----------------------------------------------------------------------------

  /**
   * Sends a message to `to` after `delayMs`, then every `periodMs` if given; returns the
   * timer's id: `ctx.schedule(to, { delayMs: 100 }, 'tick', { n: 1 })`.
   */
  schedule(to, timing, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 3);
    const { delayMs, periodMs } = timing ?? {};
    return call('schedule', wit.timers.schedule, addressOf(to), kind, body, u64(delayMs ?? 0), u64opt(periodMs));
  }

  /** `schedule` to this actor. */
  scheduleSelf(timing, ...message) {
    return this.schedule(wit.host.selfAddress(), timing, ...message);
  }

  /** Cancels a timer; false if it already fired (one-shot) or is unknown. */
  cancelTimer(id) {
    return wit.timers.cancel(u64(id));
  }

  // -- messaging -------------------------------------------------------------------------

  /** Receives every message published to `topic` from now on. */
  subscribe(topic) {
    call(`subscribe ${topic}`, wit.messaging.subscribe, topic);
  }

  /** Stops receiving `topic`. */
  unsubscribe(topic) {
    wit.messaging.unsubscribe(topic);
  }

  /** Publishes to a topic; returns how many subscribers it reached. */
  publish(topic, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    return call(`publish ${topic}`, wit.messaging.publish, topic, kind, body);
  }

  /** Joins a group (load-balanced sends and broadcasts). */
  join(group) {
    call(`join ${group}`, wit.messaging.join, group);
  }

  /** Leaves a group. */
  leave(group) {
    wit.messaging.leave(group);
  }

  /** Sends to the member of `group` with the shortest mailbox; false if it is empty. */
  tellGroup(group, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    return call(`tell group ${group}`, wit.messaging.tellGroup, group, kind, body);
  }

  /** Sends to every member of `group`; returns how many it reached. */
  broadcastGroup(group, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    return call(`broadcast ${group}`, wit.messaging.broadcastGroup, group, kind, body);
  }

  /**
   * Asks `to`; returns the ask id (a BigInt). The reply goes to the `answered` hook (by
   * default handled like any message), or `askTimeout` is called if the deadline passes
   * first. For a typed message pass `undefined` as the value to give options.
   */
  ask(to, msg, value, { timeoutMs = 5000 } = {}) {
    const [kind, body] = kindBody(msg, value, value !== undefined);
    return call(`ask ${typeof to === 'string' ? to : to.path}`, wit.messaging.ask, addressOf(to), kind, body, u64(timeoutMs));
  }

  // -- lookup and naming -----------------------------------------------------------------

  /** This actor's children's addresses. */
  children() {
    return wit.lookup.children();
  }

  /** The address living at `path` (absolute or relative), or `undefined`. */
  resolve(path) {
    return wit.lookup.resolve(path);
  }

  /** Messages waiting for the live actor at `path`, or `undefined` if none lives here. */
  mailboxDepth(path) {
    return wit.lookup.mailboxDepth(path);
  }

  /** Gives this actor the second name `/system/alias/<name>`; returns that path. */
  alias(name) {
    return call(`alias ${name}`, wit.naming.alias, name);
  }

  /** Drops an alias of this actor; false if it had none of that name. */
  unalias(name) {
    return wit.naming.unalias(name);
  }

  // -- persistence -----------------------------------------------------------------------

  /** This actor's persistence id (its path unless set). */
  persistenceId() {
    return wit.persistence.persistenceId();
  }

  /** Sets the persistence id (before `recover`). */
  setPersistenceId(id) {
    call('setPersistenceId', wit.persistence.setPersistenceId, id);
  }

  /**
   * Makes this actor persistent and returns its `Recovery`; `snapshot` and `event` are the
   * types to read them as (message classes, `Uint8Array`, `String`, or `undefined` for JSON).
   */
  recover({ snapshot, event } = {}) {
    const found = call('recover', wit.persistence.recover);
    if (found === undefined) return new Recovery(undefined, 0, event);
    return new Recovery(decodeAs(snapshot, found.state), Number(found.seq), event);
  }

  /** `recover` for an actor that keeps only a snapshot: the snapshot or `undefined`. */
  recoverSnapshot(snapshot) {
    return this.recover({ snapshot }).snapshot;
  }

  /** Journals an event (encoded like a body), committed with this step; returns its seq. */
  persist(event) {
    return Number(call('persist', wit.persistence.persist, encode(event)));
  }

  /** Replaces the snapshot, as of the latest event; returns that event's seq. */
  saveSnapshot(state) {
    return Number(call('saveSnapshot', wit.persistence.saveSnapshot, encode(state)));
  }

  /** Deletes the events up to and including `through`. */
  deleteEvents(through) {
    call('deleteEvents', wit.persistence.deleteEvents, u64(through));
  }

  /** Deletes the snapshot, every event and every reminder of this actor. */
  deleteState() {
    call('deleteState', wit.persistence.deleteState);
  }

  /** True while the host is shutting down: save what must survive. */
  inShutdown() {
    return wit.persistence.inShutdown();
  }

  /**
   * A durable timer to this actor, kept across host restarts; returns its id:
   * `ctx.remind({ delayMs: 60_000 }, 'expire', { cart: 42 })`.
   */
  remind({ delayMs, periodMs } = {}, msg, value) {
    const [kind, body] = kindBody(msg, value, arguments.length > 2);
    return call('remind', wit.persistence.remind, kind, body, u64(delayMs ?? 0), u64opt(periodMs));
  }

  /** Cancels a reminder; false if it is unknown (or a one-shot that fired). */
  cancelReminder(id) {
    return wit.persistence.cancelReminder(u64(id));
  }

  /** Sets how this durable actor's incoming messages are delivered (`DeliveryMode`). */
  setDelivery(mode) {
    wit.delivery.setDelivery(mode);
  }

  /** The delivery mode. */
  delivery() {
    return wit.delivery.delivery();
  }

  // -- behaviours and the stash (take effect when the hook returns) ----------------------

  /**
   * Handles the next messages with `behavior(ctx, msg)` (called with the actor as `this`)
   * until `unbecome`: behaviours stack. Write `ctx.become(this.closed)`.
   */
  become(behavior) {
    if (typeof behavior !== 'function') throw new TypeError('become: a behaviour is a function');
    this.requests.push(['become', behavior]);
  }

  /** Pops the current behaviour, back to the previous one or to `receive`. */
  unbecome() {
    this.requests.push(['unbecome']);
  }

  /** Keeps the message being handled, with its sender, for `unstashAll`. */
  stash() {
    if (this.current) this.requests.push(['stash']);
    else this.warn('stash ignored: this hook is not handling a message');
  }

  /** Has every stashed message handled again, in order, before any new one. */
  unstashAll() {
    this.requests.push(['unstashAll']);
  }

  /** How many messages are stashed. */
  stashed() {
    return wit.stash.stashed();
  }

  /** A copy of the oldest stashed message of `kind` (any kind if omitted), left in place. */
  peek(kind) {
    const found = wit.stash.peek(kind);
    return found === undefined ? undefined : new Envelope(found.kind, found.body, found.sender);
  }

  /** Takes the oldest stashed message of `kind` (any kind if omitted) out of the stash. */
  take(kind) {
    const found = wit.stash.take(kind);
    return found === undefined ? undefined : new Envelope(found.kind, found.body, found.sender);
  }

  // -- HTTP call-outs --------------------------------------------------------------------

  /**
   * Starts an HTTP request made by the host (the module needs the `wasi:http` grant):
   * `{ method, url, headers: [[name, value]], body, timeoutMs }`. Returns its id; the outcome
   * arrives in the `httpResponse` hook.
   */
  httpRequest({ method = 'GET', url, headers = [], body, timeoutMs = 10_000 }) {
    return call(`http ${url}`, wit.callouts.httpRequest, {
      method,
      url,
      headers,
      body: bytesOf(body),
      timeoutMs: u64(timeoutMs),
    });
  }

  // -- clock -----------------------------------------------------------------------------

  /** Nanoseconds since this actor was spawned (a number). */
  sinceStart() {
    return Number(wit.clock.sinceStart());
  }

  /** Nanoseconds this actor's calls have been running (a number). */
  cpuTime() {
    return Number(wit.clock.cpuTime());
  }
}

function spawnOptions({ mailboxCapacity, memoryLimit, cpuDeadlineMs, mailboxBytes, descendants } = {}) {
  return {
    mailboxCapacity: mailboxCapacity === undefined ? undefined : mailboxCapacity >>> 0,
    memoryLimit: u64opt(memoryLimit),
    cpuDeadlineMs: u64opt(cpuDeadlineMs),
    mailboxBytes: u64opt(mailboxBytes),
    descendants: descendants === undefined ? undefined : descendants >>> 0,
  };
}

