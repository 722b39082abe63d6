// Typed messages for the pattern components `mote` ships (`mote deploy --builtin patterns`):
// one namespace per pattern, with the same JSON schema as the Rust SDK's
// `mote_guest::patterns`. A pattern's configuration is its spawn `init`:
//
//   import { init, throttle } from './mote/patterns.js';
//   const slow = ctx.spawn('slow', throttle.MODULE, init(new throttle.Config({ target: '/user/mailer', rate: 10 })));
//   ctx.tell(slow, new Mail('ada@example.org'));   // reaches /user/mailer within the rate
import { encode } from './codec.js';

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

/** Declares a pattern message class of `kind` whose fields default to `defaults`. */
function kindOf(kind, defaults = {}) {
  return class extends PatternMessage {
    static kind = kind;

    constructor(fields = {}) {
      super({ ...defaults, ...fields });
    }
  };
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
