// Message bodies: what a value becomes on the wire and back.
//
// A body is encoded by what it is:
// - a `Uint8Array` as it is;
// - `undefined`/`null` as no bytes;
// - an instance of a message class (one with a static `kind`) with its class's codec (JSON
//   unless the class sets a static `codec`);
// - anything else as compact JSON (UTF-8), as the Python SDK and the Rust SDK's
//   `json_message!` types write it. A BigInt is written as an exact JSON integer.
// Decoding never throws anything but `Malformed`: a bad body is the sender's problem.

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder('utf-8', { fatal: true });

/**
 * A body that does not decode (or has the wrong shape): the sender's problem, never the
 * receiver's. Thrown by a decode or by the actor; while handling a message it rejects that
 * message (the host makes it a dead letter with the reason) and the actor does not fail.
 */
export class Malformed extends Error {
  constructor(message) {
    super(message);
    this.name = 'Malformed';
  }
}

const BIG = '\u0000bigint:';

function replacer(_key, value) {
  return typeof value === 'bigint' ? `${BIG}${value}` : value;
}

/** `value` as compact JSON text, BigInts as exact integers. */
export function toJson(value) {
  const text = JSON.stringify(value, replacer);
  if (text === undefined) throw new TypeError(`cannot encode ${typeof value} as JSON`);
  return text.includes('\\u0000bigint:') ? text.replace(/"\\u0000bigint:(-?\d+)"/g, '$1') : text;
}

/** The JSON codec: the default of every message class. */
export const JSON_CODEC = Object.freeze({
  encode(value) {
    return textEncoder.encode(toJson(value));
  },
  decode(cls, body) {
    const value = parse(body);
    if (cls === undefined || cls === null) return value;
    if (typeof cls.fromJSON === 'function') return cls.fromJSON(value);
    // No body: a message without fields (`get`, say).
    if (value === null && (!body || body.length === 0)) return Object.create(cls.prototype);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new Malformed(`a \`${cls.kind ?? cls.name}\` is a JSON object, got ${toJson(value)}`);
    }
    return Object.assign(Object.create(cls.prototype), value);
  },
});

function parse(body) {
  if (!body || body.length === 0) return null;
  let text;
  try {
    text = textDecoder.decode(body);
  } catch (e) {
    throw new Malformed(`body is not UTF-8: ${e.message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Malformed(`body is not JSON: ${e.message}`);
  }
}

/** The wire kind of a message class or of an instance of one (its static `kind`). */
export function kindOf(clsOrValue) {
  const cls = typeof clsOrValue === 'function' ? clsOrValue : clsOrValue?.constructor;
  const kind = cls?.kind;
  if (typeof kind !== 'string') {
    throw new TypeError(`${cls?.name ?? typeof clsOrValue} is not a message class (no static kind)`);
  }
  return kind;
}

/** Whether `value` is an instance of a message class. */
export function isMessage(value) {
  return (
    value !== null &&
    typeof value === 'object' &&
    !(value instanceof Uint8Array) &&
    typeof value.constructor?.kind === 'string'
  );
}

/** `value` as body bytes (see the top of this module). */
export function encode(value) {
  if (value instanceof Uint8Array) return value;
  if (value === undefined || value === null) return new Uint8Array();
  if (isMessage(value)) return (value.constructor.codec ?? JSON_CODEC).encode(value);
  return JSON_CODEC.encode(value);
}

/** The body's JSON value (`null` if empty); `Malformed` if it is not JSON. */
export function decode(body) {
  return parse(body);
}

/**
 * `body` read as `cls`: a message class through its codec, `Uint8Array` as it is, `String`
 * as UTF-8 text, `undefined` as a JSON value.
 */
export function decodeAs(cls, body) {
  if (cls === undefined || cls === null) return parse(body);
  if (cls === Uint8Array) return body;
  if (cls === String) {
    try {
      return textDecoder.decode(body);
    } catch (e) {
      throw new Malformed(`body is not UTF-8: ${e.message}`);
    }
  }
  return (cls.codec ?? JSON_CODEC).decode(cls, body);
}

/**
 * A Rust enum as serde writes it in JSON, split into `[variant, value]`: `"Query"` gives
 * `['Query', undefined]`, `{"Append": 5}` gives `['Append', 5]`; anything else is `Malformed`.
 */
export function variant(value) {
  if (typeof value === 'string') return [value, undefined];
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1) return [keys[0], value[keys[0]]];
  }
  throw new Malformed(`not an enum variant: ${toJson(value)}`);
}

/** Text as UTF-8 bytes (for an init or a raw body). */
export function utf8(text) {
  return textEncoder.encode(text);
}

/** UTF-8 bytes as text; `Malformed` if they are not UTF-8. */
export function text(bytes) {
  return decodeAs(String, bytes);
}
