// A fake of the componentize-js bindings of `mote:actor` (every interface in one module: their
// function names do not clash). It records calls in `fake.calls`, keeps a journal, a stash and
// ids the way the host does, returns u64s as BigInts and insists on BigInts for u64 arguments,
// as the real bindings' lifting does in effect. `fake.fail(name, payload)` makes the next call
// of `name` throw the error variant `payload` like a binding does (an error with `payload`).

class BindingError extends Error {
  constructor(payload) {
    super(`${JSON.stringify(payload)} (see error.payload)`);
    Object.defineProperty(this, 'payload', { value: payload, enumerable: true });
  }
}

const ENUMS = {
  'log-level': ['trace', 'debug', 'info', 'warn', 'error'],
  scope: ['one-for-one', 'all-for-one'],
  directive: ['resume', 'restart', 'stop', 'escalate'],
  'delivery-mode': ['at-least-once', 'at-most-once'],
};

function big(name, value) {
  if (typeof value !== 'bigint') throw new TypeError(`${name}: a u64 is passed as a BigInt, got ${typeof value}`);
  return value;
}

function bytes(name, value) {
  if (!(value instanceof Uint8Array)) throw new TypeError(`${name}: a list<u8> is a Uint8Array`);
  return value;
}

function oneOf(name, kind, value) {
  if (!ENUMS[kind].includes(value)) throw new TypeError(`"${value}" is not one of the cases of ${kind}`);
  return value;
}

function address(name, value) {
  if (typeof value?.path !== 'string') throw new TypeError(`${name}: not an address`);
  big(name, value.incarnation);
  return value;
}

export const fake = {
  reset() {
    this.calls = [];
    this.self = { path: '/user/a', incarnation: 7n };
    this.parentAddress = { path: '/user', incarnation: 1n };
    this.cause = undefined;
    this.snapshot = undefined; // { seq: bigint, state: Uint8Array }
    this.events = []; // [{ seq: bigint, data }]
    this.seq = 0n;
    this.stashBox = [];
    this.nextId = 100n;
    this.failures = new Map();
    this.shuttingDown = false;
    this.mode = 'at-least-once';
    this.responses = new Map();
  },
  /** The next call of `name` throws the error variant `payload`. */
  fail(name, payload) {
    this.failures.set(name, payload);
  },
  /** The calls of `name`, as argument lists. */
  callsOf(name) {
    return this.calls.filter(([n]) => n === name).map(([, ...args]) => args);
  },
  /** The log lines at `level`. */
  logs(level) {
    return this.callsOf('log').filter(([l]) => l === level).map(([, text]) => text);
  },
};
fake.reset();

function record(name, ...args) {
  fake.calls.push([name, ...args]);
  const payload = fake.failures.get(name);
  if (payload !== undefined) {
    fake.failures.delete(name);
    throw new BindingError(payload);
  }
}

function id() {
  fake.nextId += 1n;
  return fake.nextId;
}

// host
export const selfAddress = () => fake.self;
export const parent = () => fake.parentAddress;
export const tell = (to, kind, body) => record('tell', address('tell', to), kind, bytes('tell', body));
export const tellPath = (to, kind, body) => record('tellPath', to, kind, bytes('tellPath', body));
export function spawn(name, module, init) {
  record('spawn', name, module, bytes('spawn', init));
  return { path: `${fake.self.path}/${name}`, incarnation: id() };
}
export const stop = (target) => record('stop', address('stop', target));
export const log = (level, text) => record('log', oneOf('log', 'log-level', level), text);
export const reject = (reason) => record('reject', reason);

// supervision
export function setStrategy(strategy) {
  oneOf('setStrategy', 'scope', strategy.scope);
  oneOf('setStrategy', 'directive', strategy.directive);
  for (const f of ['withinMs', 'backoffMinMs', 'backoffMaxMs']) big(`setStrategy.${f}`, strategy[f]);
  record('setStrategy', strategy);
}
export function spawnWith(name, module, init, options) {
  record('spawnWith', name, module, bytes('spawnWith', init), options);
  return { path: `${fake.self.path}/${name}`, incarnation: id() };
}
export function spawnOn(node, name, module, init, options) {
  record('spawnOn', node, name, module, bytes('spawnOn', init), options);
  return { path: `${fake.self.path}/${name}`, incarnation: id() };
}
export const watch = (target) => record('watch', address('watch', target));
export const unwatch = (target) => record('unwatch', address('unwatch', target));
export const restartCause = () => fake.cause;

// timers
export function schedule(to, kind, body, delayMs, periodMs) {
  record('schedule', address('schedule', to), kind, bytes('schedule', body), big('delay', delayMs), periodMs === undefined ? undefined : big('period', periodMs));
  return id();
}
export function cancel(timer) {
  record('cancel', big('cancel', timer));
  return true;
}

// messaging
export const subscribe = (topic) => record('subscribe', topic);
export const unsubscribe = (topic) => record('unsubscribe', topic);
export function publish(topic, kind, body) {
  record('publish', topic, kind, bytes('publish', body));
  return 2;
}
export const join = (group) => record('join', group);
export const leave = (group) => record('leave', group);
export function tellGroup(group, kind, body) {
  record('tellGroup', group, kind, bytes('tellGroup', body));
  return true;
}
export function broadcastGroup(group, kind, body) {
  record('broadcastGroup', group, kind, bytes('broadcastGroup', body));
  return 3;
}
export function ask(to, kind, body, timeoutMs) {
  record('ask', address('ask', to), kind, bytes('ask', body), big('timeout', timeoutMs));
  return id();
}

// persistence
export const persistenceId = () => fake.self.path;
export const setPersistenceId = (pid) => record('setPersistenceId', pid);
export function recover() {
  record('recover');
  return fake.snapshot;
}
export function replay(after, max) {
  record('replay', big('after', after), max);
  return fake.events.filter((e) => e.seq > after).slice(0, max);
}
export function saveSnapshot(state) {
  record('saveSnapshot', bytes('saveSnapshot', state));
  fake.snapshot = { seq: fake.seq, state };
  return fake.seq;
}
export function persist(data) {
  record('persist', bytes('persist', data));
  fake.seq += 1n;
  fake.events.push({ seq: fake.seq, data });
  return fake.seq;
}
export const deleteEvents = (through) => record('deleteEvents', big('through', through));
export const deleteState = () => record('deleteState');
export const inShutdown = () => fake.shuttingDown;
export function remind(kind, body, delayMs, periodMs) {
  record('remind', kind, bytes('remind', body), big('delay', delayMs), periodMs === undefined ? undefined : big('period', periodMs));
  return id();
}
export function cancelReminder(reminder) {
  record('cancelReminder', big('cancelReminder', reminder));
  return true;
}

// clock
export const sinceStart = () => 1234n;
export const cpuTime = () => 56n;

// forwarding and priority
export const forward = (to, kind, body) => record('forward', address('forward', to), kind, bytes('forward', body));
export const forwardPath = (to, kind, body) => record('forwardPath', to, kind, bytes('forwardPath', body));
export const tellUrgent = (to, kind, body) => record('tellUrgent', address('tellUrgent', to), kind, bytes('tellUrgent', body));
export const tellPathUrgent = (to, kind, body) => record('tellPathUrgent', to, kind, bytes('tellPathUrgent', body));

// lookup and naming
export const children = () => [{ path: `${fake.self.path}/c0`, incarnation: 9n }];
export const resolve = (path) => (path === fake.self.path ? fake.self : undefined);
export const mailboxDepth = (path) => (path === fake.self.path ? 0 : undefined);
export function alias(name) {
  record('alias', name);
  return `/system/alias/${name}`;
}
export const unalias = (name) => name !== 'nobody';

// stash: what the host would stash is the message being handled, known to the test
export function stash() {
  record('stash');
  fake.stashBox.push(fake.handling);
}
export function unstashAll() {
  record('unstashAll');
  const n = fake.stashBox.length;
  fake.stashBox = [];
  return n;
}
export const stashed = () => fake.stashBox.length;
export const peek = (kind) => fake.stashBox.find((m) => kind === undefined || m.kind === kind);
export function take(kind) {
  const i = fake.stashBox.findIndex((m) => kind === undefined || m.kind === kind);
  return i < 0 ? undefined : fake.stashBox.splice(i, 1)[0];
}

// callouts
export function httpRequest(request) {
  big('timeoutMs', request.timeoutMs);
  bytes('body', request.body);
  record('httpRequest', request);
  return id();
}
export const httpResponse = (callout) => fake.responses.get(big('httpResponse', callout));

// lifecycle and delivery
export const deactivate = (child) => (record('deactivate', address('deactivate', child)), true);
export const activate = (child) => (record('activate', address('activate', child)), true);
export const setDelivery = (mode) => {
  fake.mode = oneOf('setDelivery', 'delivery-mode', mode);
};
export const delivery = () => fake.mode;
