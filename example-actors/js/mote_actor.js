// Mote actors in JavaScript: a small guest SDK over the `mote:actor` WIT world, for
// componentize-js. The build puts this file in front of an actor's file (componentize-js takes
// one ES module), so an actor file uses `moteActor` without importing it:
//
//   export const actor = moteActor({
//     start(ctx, init) { this.seen = 0; },
//     receive(ctx, msg) {
//       if (msg.kind === 'greet') ctx.reply('greeting', { text: `hello ${msg.value.name}` });
//     },
//   });
//
// Bodies are JSON (UTF-8 text): `msg.value` is the decoded body (null if empty; not JSON throws
// `Malformed`, which rejects the message instead of failing the actor),
// `msg.body` the raw bytes; `ctx.tell(to, kind, value)` encodes `value` as JSON (a Uint8Array
// goes as it is). The Rust SDK speaks the same encoding for types declared with `json_message!`.
// An exception thrown by `start` or `receive` is returned to the host as the call's error: the
// actor fails and its supervisor decides, as for a Rust actor. `receive` may be async (return a
// promise): the call then ends when the promise settles.
import { selfAddress, tell, tellPath, spawn, stop, log, reject } from 'mote:actor/host@0.2.0';
import { restartCause } from 'mote:actor/supervision@0.2.0';
import { publish, subscribe, ask } from 'mote:actor/messaging@0.2.0';

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

function encodeBody(value) {
  if (value instanceof Uint8Array) return value;
  if (value === undefined || value === null) return new Uint8Array();
  return textEncoder.encode(JSON.stringify(value));
}

/**
 * A message body that does not decode: the sender's problem, never the receiver's. Thrown by
 * `msg.value` for a body that is not JSON; an actor may throw it too. `receive` then rejects
 * the message (the host makes it a dead letter with the reason) and the actor does not fail.
 */
class Malformed extends Error {}

function decodeBody(body) {
  if (!body || body.length === 0) return null;
  try {
    return JSON.parse(textDecoder.decode(body));
  } catch (e) {
    throw new Malformed(`body is not JSON: ${e.message}`);
  }
}

class Context {
  constructor() {
    this.current = undefined;
  }
  /** This actor's path. */
  myself() {
    return selfAddress().path;
  }
  /** Sends to a path (absolute or relative to this actor). */
  tell(to, kind, value) {
    tellPath(to, kind, encodeBody(value));
  }
  /** Answers the sender of the current message (an ask's reply too). */
  reply(kind, value) {
    if (!this.current || !this.current.senderAddress) throw new Error('reply: no sender');
    tell(this.current.senderAddress, kind, encodeBody(value));
  }
  /** Spawns a child from a deployed module; returns its path. */
  spawn(name, module, init = '') {
    const bytes = typeof init === 'string' ? textEncoder.encode(init) : init;
    return spawn(name, module, bytes).path;
  }
  /** Asks the actor at an absolute path; the reply arrives as a message. Returns the ask id. */
  ask(to, kind, value, timeoutMs = 5000) {
    return ask({ path: to, incarnation: 0n }, kind, encodeBody(value), BigInt(timeoutMs));
  }
  /** Publishes to a topic; returns how many subscribers it reached. */
  publish(topic, kind, value) {
    return publish(topic, kind, encodeBody(value));
  }
  /** Receives every message published to `topic` from now on. */
  subscribe(topic) {
    subscribe(topic);
  }
  /** In `start`: why this instance replaces a failed one (undefined on a first start). */
  restartCause() {
    return restartCause();
  }
  /** Stops this actor after the current message. */
  stopSelf() {
    stop(selfAddress());
  }
  /** Writes a line to the host log, tagged with this actor's path. */
  log(text, level = 'info') {
    log(level, String(text));
  }
}

function failure(e) {
  // componentize-js maps a returned { tag: 'err' } to the WIT error; a thrown Error would trap.
  const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return { tag: 'err', val: text };
}

/** The `actor` export for an actor definition with `start`, `receive` and `stopping`. */
function moteActor(definition) {
  const ctx = new Context();
  const self = Object.create(definition);
  return {
    start(init) {
      try {
        if (self.start) self.start(ctx, init);
      } catch (e) {
        return failure(e);
      }
    },
    receive(raw) {
      ctx.current = {
        kind: raw.kind,
        body: raw.body,
        get value() {
          return decodeBody(raw.body);
        },
        sender: raw.sender ? raw.sender.path : undefined,
        senderAddress: raw.sender,
      };
      const malformed = (e) => {
        reject(`malformed \`${raw.kind}\` body: ${e.message}`);
        ctx.current = undefined;
      };
      let result;
      try {
        result = self.receive ? self.receive(ctx, ctx.current) : undefined;
      } catch (e) {
        if (e instanceof Malformed) return malformed(e);
        ctx.current = undefined;
        return failure(e);
      }
      if (result && typeof result.then === 'function') {
        // An async receive (a fetch, say): componentize-js awaits the promise within the call.
        return result.then(
          () => {
            ctx.current = undefined;
          },
          (e) => {
            if (e instanceof Malformed) return malformed(e);
            ctx.current = undefined;
            return failure(e);
          },
        );
      }
      ctx.current = undefined;
    },
    stopping(reason) {
      try {
        if (self.stopping) self.stopping(ctx, reason.tag);
      } catch (e) {
        ctx.log(`stopping failed: ${e}`, 'warn');
      }
    },
  };
}
