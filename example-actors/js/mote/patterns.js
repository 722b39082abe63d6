// Typed messages for the pattern components `mote` ships (`mote deploy --builtin patterns`):
// one namespace per pattern, with the same JSON schema as the Rust SDK's
// `mote_guest::patterns`. A pattern's configuration is its spawn `init`:
//
//   import { init, throttle } from './mote/patterns.js';
//   const slow = ctx.spawn('slow', throttle.MODULE, init(new throttle.Config({ target: '/user/mailer', rate: 10 })));
//   ctx.tell(slow, new Mail('ada@example.org'));   // reaches /user/mailer within the rate
//
// Namespaces: `throttle`, `router`, `circuitBreaker`, `reaper`, `serviceManager`, `pipeline`,
// `pipelineBuilder`, `podManager`, and `supervision` (a pattern's `strategy` for its children).
// Fields keep the wire's snake_case names and the Rust defaults; a Rust `Option` left unset is
// `undefined` (not written); a binary body is a `Uint8Array` (`bytes`, written as an array of
// byte values) or base64 text (`base64`, the reaper's), as the Rust type says.
import { JSON_CODEC, Malformed, decodeAs, encode, kindOf as kindOfMessage, toJson, utf8 } from './codec.js';

/** The JSON `init` bytes of a pattern's configuration, for `spawn`. */
export function init(config) {
  return encode(config);
}

/** A pattern message: its fields from one object, and back from its JSON. */
class PatternMessage {
  constructor(fields = {}) {
    Object.assign(this, fields);
  }

  static fromJSON(value) {
    return new this(value ?? {});
  }
}

/**
 * Declares a pattern message class of `kind` (or, with `kind` null, a nested structure that is
 * no message) whose fields default to `defaults` (a function there is a factory, called for
 * each instance: `() => []`); `nested` maps a field to the converter `fromJSON` applies to its
 * JSON value (when not null).
 */
function kindOf(kind, defaults = {}, nested = {}) {
  const cls = class extends PatternMessage {
    constructor(fields = {}) {
      const initial = {};
      for (const [key, value] of Object.entries(defaults)) {
        if (fields[key] === undefined) initial[key] = typeof value === 'function' ? value() : value;
      }
      super({ ...initial, ...fields });
    }

    static fromJSON(value) {
      if (value !== null && value !== undefined && (typeof value !== 'object' || Array.isArray(value))) {
        throw new Malformed(`a \`${kind ?? 'pattern structure'}\` is a JSON object, got ${toJson(value)}`);
      }
      const fields = { ...(value ?? {}) };
      for (const [key, convert] of Object.entries(nested)) {
        if (fields[key] === undefined || fields[key] === null) continue;
        try {
          fields[key] = convert(fields[key]);
        } catch (e) {
          throw e instanceof Malformed ? e : new Malformed(`bad \`${key}\`: ${e.message}`);
        }
      }
      return new this(fields);
    }
  };
  if (kind !== null) cls.kind = kind;
  return cls;
}

/** A converter of a JSON array, each element with `convert`. */
const listOf = (convert) => (values) => {
  if (!Array.isArray(values)) throw new Malformed(`expected a JSON array, got ${toJson(values)}`);
  return values.map(convert);
};

/** serde's `Vec<u8>` (an array of byte values) as a `Uint8Array`. */
const byteValues = (values) => Uint8Array.from(listOf(Number)(values));

/** A copy of `obj`'s fields for JSON, with its `bytes` field (a `Uint8Array`) as an array. */
function withByteValues(obj) {
  const out = { ...obj };
  if (out.bytes instanceof Uint8Array) out.bytes = Array.from(out.bytes);
  return out;
}

/** `[kind, body, bytes]` of a typed message: a JSON one as its JSON value, any other as bytes. */
function bodyOf(msg) {
  const kind = kindOfMessage(msg);
  const bytes = encode(msg);
  if ((msg.constructor.codec ?? JSON_CODEC) === JSON_CODEC) {
    return [kind, bytes.length ? JSON.parse(new TextDecoder().decode(bytes)) : undefined, undefined];
  }
  return [kind, undefined, bytes];
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** `bytes` in standard base64, with padding. */
export function base64Encode(bytes) {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    const left = bytes.length - i;
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
    out += left > 1 ? B64[(n >> 6) & 63] : '=';
    out += left > 2 ? B64[n & 63] : '=';
  }
  return out;
}

/** The bytes of standard base64 text (padding optional); `Malformed` if it is not base64. */
export function base64Decode(text) {
  const digits = text.replace(/=+$/, '');
  const out = [];
  let acc = 0;
  let bits = 0;
  for (const c of digits) {
    const digit = B64.indexOf(c);
    if (digit < 0) throw new Malformed(`bad base64 character ${JSON.stringify(c)}`);
    acc = ((acc << 6) | digit) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) throw new Malformed('truncated base64');
  return Uint8Array.from(out);
}

/** The bytes of a body carried as `body` (JSON) or `base64`, either or neither. */
function payloadBytes(body, base64) {
  if (body !== undefined && body !== null && base64 !== undefined && base64 !== null) {
    throw new Malformed('a body is either `body` (JSON) or `base64`, not both');
  }
  if (body !== undefined && body !== null) return utf8(toJson(body));
  if (base64 !== undefined && base64 !== null) return base64Decode(base64);
  return new Uint8Array();
}

/** `throttle`: passes messages on to its target at a set rate, in order, with their sender. */
export const throttle = Object.freeze({
  MODULE: 'throttle',
  /** `{target, rate, per_ms = 1000, burst = rate, queue = 1000}` */
  Config: kindOf('throttle.config', { per_ms: 1000, queue: 1000 }),
  /** `{rate, per_ms = 1000}`: a new rate from now on. */
  SetRate: kindOf('throttle.set-rate', { per_ms: 1000 }),
  /** Asks for a `Status`. */
  GetStatus: kindOf('throttle.get-status'),
  /** `{queued, forwarded, refused, rate, per_ms}`: the reply to `GetStatus`. */
  Status: kindOf('throttle.status'),
});

/**
 * How a pattern supervises its children (a pipeline's stages, a pod manager's pods, a
 * builder's pipelines): the `strategy` of their configuration, a directive's name or an object.
 */
const Supervision = kindOf(null, {
  directive: 'restart',
  max_restarts: 3,
  within_ms: 10000,
  backoff_min_ms: 10,
  backoff_max_ms: 1000,
});
const supervisionFromObject = Supervision.fromJSON;
/** Either JSON form: a directive's name (`'resume'`) or an object. */
Supervision.fromJSON = function fromJSON(value) {
  if (typeof value === 'string') {
    if (!supervision.DIRECTIVES.includes(value)) throw new Malformed(`unknown directive ${JSON.stringify(value)}`);
    return new Supervision({ directive: value });
  }
  return supervisionFromObject.call(this, value);
};

/** The longest child name a pattern gives (a pod, a pipeline), in bytes. */
const MAX_CHILD_NAME = 128;

/** Whether `name` may name a pattern's child: 1 to 128 bytes, no `/`, `#` or control characters, not `.` or `..`. */
function validChildName(name) {
  const length = utf8(name).length;
  // eslint-disable-next-line no-control-regex
  if (length === 0 || length > MAX_CHILD_NAME || name === '.' || name === '..') return false;
  return !/[/#\u0000-\u001f\u007f-\u009f]/.test(name);
}

/** `supervision`: the `strategy` of a pattern's children. */
export const supervision = Object.freeze({
  /** `'restart'` (the default), `'resume'`, `'stop'`, `'escalate'`. */
  DIRECTIVES: Object.freeze(['restart', 'resume', 'stop', 'escalate']),
  /** `{directive = 'restart', max_restarts = 3, within_ms = 10000, backoff_min_ms = 10, backoff_max_ms = 1000}` */
  Supervision,
  MAX_CHILD_NAME,
  validChildName,
});

/** A router's pool: routees it spawns as its children. */
const Pool = kindOf(null, { init: '', directive: 'restart', max_restarts: 3, within_ms: 10000 });
/** One message to every routee. */
const Broadcast = kindOf('router.broadcast', {}, { bytes: byteValues });
Broadcast.prototype.toJSON = function toJSON() {
  return withByteValues(this);
};
/** `[kind, body bytes]` of the message to send. */
Broadcast.prototype.message = function message() {
  const hasBody = this.body !== undefined && this.body !== null;
  const hasBytes = this.bytes !== undefined && this.bytes !== null;
  if (hasBody === hasBytes) throw new Malformed('router.broadcast: give exactly one of `body` and `bytes`');
  return [this.kind, hasBody ? utf8(toJson(this.body)) : this.bytes];
};
/** A broadcast of a typed message, in its own encoding. */
Broadcast.of = function of(msg) {
  const [kind, body, bytes] = bodyOf(msg);
  return new Broadcast({ kind, body, bytes });
};

/** `router`: routes each message to one of its routees (paths, or a pool it spawns). */
export const router = Object.freeze({
  MODULE: 'router',
  /** `'round-robin'`, `'random'`, `'consistent-hash'` (needs `hash_key`), `'smallest-mailbox'`. */
  STRATEGIES: Object.freeze(['round-robin', 'random', 'consistent-hash', 'smallest-mailbox']),
  /** `{module, size, init = '', directive = 'restart', max_restarts = 3, within_ms = 10000}`: routees the router spawns. */
  Pool,
  /** `{strategy, hash_key?, routees = [], pool?, max_routees = 1000}` */
  Config: kindOf('router.config', { routees: () => [], max_routees: 1000 }, { pool: (p) => Pool.fromJSON(p) }),
  /** `{path}`: adds a routee. */
  AddRoutee: kindOf('router.add-routee'),
  /** `{path}`: removes a routee, spelled as `Routees` lists it. */
  RemoveRoutee: kindOf('router.remove-routee'),
  /** Asks for the `Routees`. */
  GetRoutees: kindOf('router.get-routees'),
  /** `{routees, routed}`: the reply to `GetRoutees`. */
  Routees: kindOf('router.routees', { routees: () => [], routed: 0 }),
  /** `{kind, body?, bytes?}`: one message to every routee, its body JSON or bytes (exactly one). */
  Broadcast,
});

/** `circuit-breaker`: in front of a target, refusing requests while it keeps failing. */
export const circuitBreaker = Object.freeze({
  MODULE: 'circuit-breaker',
  /** `'closed'`, `'open'`, `'half-open'`. */
  STATES: Object.freeze(['closed', 'open', 'half-open']),
  /** `{target, max_failures = 5, call_timeout_ms = 1000, reset_timeout_ms = 10000, max_reset_timeout_ms?, failure_kinds = [], max_pending = 1000}` */
  Config: kindOf('circuit-breaker.config', {
    max_failures: 5,
    call_timeout_ms: 1000,
    reset_timeout_ms: 10000,
    failure_kinds: () => [],
    max_pending: 1000,
  }),
  /** Asks for the breaker's `Status`. */
  GetState: kindOf('circuit-breaker.get-state'),
  /** `{state, failures, pending, retry_in_ms, reset_timeout_ms, passed, refused, opened}`: the reply to `GetState` (kind `circuit-breaker.state`). */
  Status: kindOf('circuit-breaker.state'),
  /** `{retry_in_ms}`: a request refused while open. */
  Open: kindOf('circuit-breaker.open'),
  /** `{pending}`: a request refused because `max_pending` wait already. */
  Busy: kindOf('circuit-breaker.busy'),
  /** `{reason}`: a request the target did not answer in time. */
  Failed: kindOf('circuit-breaker.failed'),
});

/** How a gather reduces its replies to one value. */
const Reduce = kindOf(null, { field: '' });
Reduce.prototype.toJSON = function toJSON() {
  return this.op === 'count' ? { op: this.op } : { op: this.op, field: this.field };
};
/** One target's reply, in a `Gathered`. */
const Reply = kindOf(null);
/** The reply's body bytes. */
Reply.prototype.payloadBytes = function bytes() {
  return payloadBytes(this.body, this.base64);
};
/** The reply read as `cls` (as `decodeAs` reads a body). */
Reply.prototype.decode = function decode(cls) {
  return decodeAs(cls, this.payloadBytes());
};
/** A target the reaper could not ask. */
const ReaperFailed = kindOf(null);
const reduce = (r) => Reduce.fromJSON(r);
/** Asks every target and gathers the replies. */
const Gather = kindOf('reaper.gather', {}, { reduce });
/** The request's body bytes. */
Gather.prototype.payloadBytes = function bytes() {
  return payloadBytes(this.body, this.base64);
};
/** Asks `targets` the typed request `msg`, in its own encoding; `options` sets `deadline_ms`, `want`, `reduce`. */
Gather.of = function of(targets, msg, options = {}) {
  const [kind, body, bytes] = bodyOf(msg);
  return new Gather({ targets: [...targets], kind, body, base64: bytes && base64Encode(bytes), ...options });
};

/** `[body, base64]` of a body as it travels: a JSON value if it is JSON text, base64 otherwise. */
function payload(bytes) {
  if (bytes.length === 0) return [undefined, undefined];
  try {
    return [JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)), undefined];
  } catch {
    return [undefined, base64Encode(bytes)];
  }
}

/** `reaper`: scatter-gather, asks many targets and gathers (or reduces) their replies. */
export const reaper = Object.freeze({
  MODULE: 'reaper',
  /** `'sum'`, `'count'` (no field), `'collect'`, `'first'`, `'max'`, `'min'`. */
  REDUCTIONS: Object.freeze(['sum', 'count', 'collect', 'first', 'max', 'min']),
  payload,
  /** `{op, field = ''}`: how to reduce the replies to one value (`field`: a JSON pointer or a top-level key). */
  Reduce,
  /** `{max_gathers = 1000, max_targets = 1000, max_asks = 1000, deadline_ms = 5000, reduce?}` */
  Config: kindOf('reaper.config', { max_gathers: 1000, max_targets: 1000, max_asks: 1000, deadline_ms: 5000 }, { reduce }),
  /** `{targets, kind, body? | base64?, deadline_ms?, want?, reduce?}`: asks every target, gathers the replies. */
  Gather,
  /** `{from, kind, body? | base64?}`: one target's reply. */
  Reply,
  /** `{target, error}`: a target the reaper could not ask. */
  Failed: ReaperFailed,
  /** `{replies, timed_out, failed, complete}`: the reply to a `Gather` without a reduction. */
  Gathered: kindOf(
    'reaper.gathered',
    { replies: () => [], timed_out: () => [], failed: () => [], complete: false },
    { replies: listOf((r) => Reply.fromJSON(r)), failed: listOf((f) => ReaperFailed.fromJSON(f)) },
  ),
  /** `{value, from, timed_out, failed, complete}`: the reply to a `Gather` with a reduction. */
  Reduced: kindOf(
    'reaper.reduced',
    { value: null, from: 0, timed_out: () => [], failed: () => [], complete: false },
    { failed: listOf((f) => ReaperFailed.fromJSON(f)) },
  ),
  /** `{bound, limit, reason}`: a gather past a bound (`max_gathers`, `max_targets`, `max_asks`). */
  Refused: kindOf('reaper.refused'),
  /** Asks for a `Status`. */
  GetStatus: kindOf('reaper.get-status'),
  /** `{gathering, asks_pending, gathered, refused}`: the reply to `GetStatus`. */
  Status: kindOf('reaper.status'),
});

/** `service-manager`: a fresh worker per request, replying as the manager. */
export const serviceManager = Object.freeze({
  MODULE: 'service-manager',
  /** `'stop'` (the default), `'restart'`, `'escalate'`. */
  STRATEGIES: Object.freeze(['stop', 'restart', 'escalate']),
  /** `{module, init = '', max_workers = 16, queue = 1000, worker_timeout_ms = 30000, strategy = 'stop', max_restarts = 3}` */
  Config: kindOf('service-manager.config', {
    init: '',
    max_workers: 16,
    queue: 1000,
    worker_timeout_ms: 30000,
    strategy: 'stop',
    max_restarts: 3,
  }),
  /** `{failure, reason}`: a request that got no reply from its worker. */
  Failed: kindOf('service-manager.failed'),
  /** Asks for a `Status`. */
  GetStatus: kindOf('service-manager.get-status'),
  /** `{running, queued, served, failed, refused, peak}`: the reply to `GetStatus`. */
  Status: kindOf('service-manager.status'),
});

/** One pipeline stage: a module and its init. */
const Stage = kindOf(null);
const strategy = (s) => Supervision.fromJSON(s);
const stages = listOf((s) => Stage.fromJSON(s));
/** The fields of a pipeline's configuration beside its `stages`, with their defaults. */
const PIPELINE_DEFAULTS = Object.freeze({ stage_timeout_ms: 5000, max_in_flight: 1000, strategy: () => new Supervision() });

/** `pipeline`: stages in order, each replying with the next stage's input. */
export const pipeline = Object.freeze({
  MODULE: 'pipeline',
  /** The most stages a pipeline has. */
  MAX_STAGES: 64,
  /** `{module, init?}`: a stage (`init`: a string is its text, absent nothing, other JSON its JSON text). */
  Stage,
  /** `{stages, sink?, stage_timeout_ms = 5000, max_in_flight = 1000, strategy = Supervision}` */
  Config: kindOf('pipeline.config', PIPELINE_DEFAULTS, { stages, strategy }),
  /** Asks for a `Status`. */
  GetStatus: kindOf('pipeline.get-status'),
  /** `{stages, in_flight, completed, failed, dropped, refused}`: the reply to `GetStatus`. */
  Status: kindOf('pipeline.status'),
  /** `{reason, input = 0, stage = 0}`: an input failed at a stage. */
  Failed: kindOf('pipeline.failed', { input: 0, stage: 0 }),
  /** A stage's reply that ends an input without output (kind `pipeline.drop`). */
  DropInput: kindOf('pipeline.drop'),
});

/** Builds a pipeline: its name beside its configuration's fields. */
const Build = kindOf('pipeline-builder.build', PIPELINE_DEFAULTS, { stages, strategy });
/** Builds pipeline `name` of a `pipeline.Config`. */
Build.of = function of(name, config) {
  const { stages: s, sink, stage_timeout_ms, max_in_flight, strategy: st } = config;
  return new Build({ name, stages: s, sink, stage_timeout_ms, max_in_flight, strategy: st });
};

/** `pipeline-builder`: builds and tears down pipelines on request. */
export const pipelineBuilder = Object.freeze({
  MODULE: 'pipeline-builder',
  /** `{module = 'pipeline', max_pipelines = 100, ready_timeout_ms = 5000, strategy = Supervision}` */
  Config: kindOf(
    'pipeline-builder.config',
    { module: 'pipeline', max_pipelines: 100, ready_timeout_ms: 5000, strategy: () => new Supervision() },
    { strategy },
  ),
  /** `{name, stages, sink?, ...}`: builds pipeline `name`, its configuration's fields beside it. */
  Build,
  /** `{name, path}`: a pipeline was built and answers. */
  Built: kindOf('pipeline-builder.built'),
  /** `{name, reason}`: a build that did not happen. */
  Refused: kindOf('pipeline-builder.refused'),
  /** `{name}`: stops a pipeline and forgets it. */
  TearDown: kindOf('pipeline-builder.tear-down'),
  /** `{name, existed}`: the answer to `TearDown`. */
  TornDown: kindOf('pipeline-builder.torn-down'),
  /** Asks for the `Pipelines`. */
  List: kindOf('pipeline-builder.list'),
  /** `{pipelines}`: the built pipelines' names, sorted. */
  Pipelines: kindOf('pipeline-builder.pipelines', { pipelines: () => [] }),
});

/** Passes a message to a pod, created if need be. */
const Deliver = kindOf('pod-manager.deliver', {}, { bytes: byteValues });
Deliver.prototype.toJSON = function toJSON() {
  return withByteValues(this);
};
/** The body the pod receives. */
Deliver.prototype.bodyBytes = function bodyBytes() {
  if (this.body !== undefined && this.body !== null) return utf8(toJson(this.body));
  return this.bytes ?? new Uint8Array();
};
/** A typed message for pod `pod`: a JSON one as `body`, any other as `bytes`. */
Deliver.of = function of(pod, msg) {
  const [kind, body, bytes] = bodyOf(msg);
  return new Deliver({ pod, kind, body, bytes });
};

/** `pod-manager`: named children of one module, created by their first message. */
export const podManager = Object.freeze({
  MODULE: 'pod-manager',
  /** The longest pod name, in bytes. */
  MAX_POD_NAME: MAX_CHILD_NAME,
  /** Whether `pod` may name a pod. */
  validPodName: validChildName,
  /** `{module, init?, max_pods = 1000, strategy = Supervision, create_on_dead_letter = true}` */
  Config: kindOf(
    'pod-manager.config',
    { max_pods: 1000, strategy: () => new Supervision(), create_on_dead_letter: true },
    { strategy },
  ),
  /** `{pod}`: creates a pod if it does not live. */
  Create: kindOf('pod-manager.create'),
  /** `{pod, path, new}`: the answer to `Create`. */
  Created: kindOf('pod-manager.created'),
  /** `{pod, kind, body? | bytes?}`: passes a message to a pod, created if need be. */
  Deliver,
  /** Asks for the `Pods`. */
  List: kindOf('pod-manager.list'),
  /** `{pods}`: the pods' names, sorted. */
  Pods: kindOf('pod-manager.pods', { pods: () => [] }),
  /** `{pod}`: stops a pod and forgets it. */
  Remove: kindOf('pod-manager.remove'),
  /** `{pod, existed}`: the answer to `Remove`. */
  Removed: kindOf('pod-manager.removed'),
});
