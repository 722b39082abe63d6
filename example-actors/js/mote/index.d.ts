// TypeScript types of the Mote guest SDK for JavaScript (see index.js).
//
// Durations, counts and sequence numbers are numbers; identities that may use all 64 bits (an
// address's incarnation, ask, timer, reminder and call-out ids) are bigints. A u64 parameter
// takes either.

/** A number or a bigint, for a u64 parameter. */
export type U64 = number | bigint;

/** An actor's address: its path and the incarnation living there (0n: whoever lives there). */
export interface Address {
  path: string;
  incarnation: bigint;
}

/** A path (absolute or relative to this actor) or an address. */
export type Target = string | Address;

/** A message class: a class with a static `kind`, and optionally a static `codec`. */
export interface MessageClass<T = any> {
  new (...args: any[]): T;
  readonly kind: string;
  readonly codec?: Codec<T>;
  fromJSON?(value: unknown): T;
}

/** How the bodies of a message class are encoded (JSON unless a class sets its own). */
export interface Codec<T = any> {
  encode(value: T): Uint8Array;
  decode(cls: MessageClass<T>, body: Uint8Array): T;
}

/** What a hook may return: nothing, or a promise the call awaits. */
export type HookResult = void | Promise<void>;

/** The contract's error variant, as a refused host call carries it. */
export interface Variant {
  tag: string;
  val?: unknown;
}

/** A body that does not decode (or has the wrong shape): rejects the message, a dead letter. */
export class Malformed extends Error {}

/** A host call the host refused; `value` is the contract's error variant. */
export class MoteError extends Error {
  readonly value: Variant;
}

/** A message as it arrived. */
export class Envelope {
  readonly kind: string;
  readonly body: Uint8Array;
  readonly sender: Address | undefined;
  /** The body's JSON value (`null` if empty); throws `Malformed` if it is not JSON. */
  readonly value: any;
  /** Whether this message is of the message class `cls`. */
  is(cls: MessageClass): boolean;
  /** The body as `cls`; throws `Malformed` if it is not one. */
  decode<T>(cls: MessageClass<T>): T;
}

/** A supervisor's directive. */
export type DirectiveName = 'resume' | 'restart' | 'stop' | 'escalate';
/** The directives by name. */
export const Directive: {
  readonly RESUME: 'resume';
  readonly RESTART: 'restart';
  readonly STOP: 'stop';
  readonly ESCALATE: 'escalate';
};

/** How a durable actor's messages are delivered. */
export type DeliveryModeName = 'at-least-once' | 'at-most-once';
/** The delivery modes by name. */
export const DeliveryMode: {
  readonly AT_LEAST_ONCE: 'at-least-once';
  readonly AT_MOST_ONCE: 'at-most-once';
};

/** How a child failed. */
export type FailureKind =
  | 'trap'
  | 'error'
  | 'memory-limit'
  | 'cpu-deadline'
  | 'stack-overflow'
  | 'instantiation'
  | 'commit'
  | 'escalated';

/** Why an actor stops. */
export type StopReason = 'normal' | 'failure' | 'parent-failure' | 'shutdown';

/** A child's failure as the `supervise` hook sees it. */
export class Failure {
  readonly kind: FailureKind;
  readonly error: string;
}

/** How an actor supervises its children. */
export class Strategy {
  static oneForOne(directive: DirectiveName): Strategy;
  static allForOne(directive: DirectiveName): Strategy;
  /** At most `maxRestarts` restarts of one child within `withinMs`; one more escalates. */
  restarts(maxRestarts: number, withinMs: U64): this;
  /** Restart delays from `minMs`, doubling per restart in the window, up to `maxMs`. */
  backoff(minMs: U64, maxMs: U64): this;
}

/** Per-child limits for `spawnWith`/`spawnOn` (a missing one takes the parent's). */
export interface Limits {
  mailboxCapacity?: number;
  memoryLimit?: U64;
  cpuDeadlineMs?: U64;
  mailboxBytes?: U64;
  descendants?: number;
}

/** When a timer or reminder fires: after `delayMs`, then every `periodMs` if given. */
export interface Timing {
  delayMs: U64;
  periodMs?: U64;
}

/** A dead letter as a subscriber of `/system/deadletters` receives it. */
export class DeadLetter {
  readonly sender: Address | undefined;
  readonly target: string;
  readonly kind: string;
  readonly body: Uint8Array;
  decodeOriginal<T>(cls: MessageClass<T>): T;
}

/** A persistent actor's durable state as `Context.recover` found it. */
export class Recovery<S = any, E = any> {
  readonly snapshot: S | undefined;
  readonly snapshotSeq: number;
  readonly lastSeq: number;
  /** The events after the snapshot, in order, read a page at a time. */
  events(): Generator<[number, E]>;
  /** The snapshot (or `init`), then `apply` for each later event in order. */
  fold(init: S | (() => S), apply: (state: S, event: E) => S | void): S;
}

/** An HTTP request made by the host for this actor. */
export interface HttpRequest {
  method?: string;
  url: string;
  headers?: [string, string][];
  body?: string | Uint8Array;
  timeoutMs?: U64;
}

/** An HTTP call-out's outcome. */
export type HttpOutcome =
  | { tag: 'ok'; val: { status: number; headers: [string, string][]; body: Uint8Array } }
  | { tag: 'err'; val: Variant };

/** A type for decoding: a message class, `Uint8Array`, `String`, or `undefined` for JSON. */
export type Decodable<T> = MessageClass<T> | typeof Uint8Array | typeof String | undefined;

/** What an actor can do, handed to each of its hooks. */
export class Context {
  myself(): Address;
  path(): string;
  parent(): Address | undefined;
  sender(): Address | undefined;
  tell(to: Target, msg: object): void;
  tell(to: Target, kind: string, value?: unknown): void;
  tellPath(path: string, msg: object): void;
  tellPath(path: string, kind: string, value?: unknown): void;
  reply(msg: object): void;
  reply(kind: string, value?: unknown): void;
  forward(to: Target, msg: object): void;
  forward(to: Target, kind: string, value?: unknown): void;
  tellUrgent(to: Target, msg: object): void;
  tellUrgent(to: Target, kind: string, value?: unknown): void;
  spawn(name: string, module: string, init?: string | Uint8Array): Address;
  stop(target: Target): void;
  stopSelf(): void;
  log(text: unknown, level?: 'trace' | 'debug' | 'info' | 'warn' | 'error'): void;
  trace(text: unknown): void;
  debug(text: unknown): void;
  info(text: unknown): void;
  warn(text: unknown): void;
  error(text: unknown): void;

  setStrategy(strategy: Strategy): void;
  spawnWith(name: string, module: string, init?: string | Uint8Array, limits?: Limits): Address;
  spawnOn(node: string, name: string, module: string, init?: string | Uint8Array, limits?: Limits): Address;
  watch(target: Target): void;
  unwatch(target: Target): void;
  restartCause(): string | undefined;
  deactivate(child: Target): boolean;
  activate(child: Target): boolean;

  schedule(to: Target, timing: Timing, msg: object): bigint;
  schedule(to: Target, timing: Timing, kind: string, value?: unknown): bigint;
  scheduleSelf(timing: Timing, msg: object): bigint;
  scheduleSelf(timing: Timing, kind: string, value?: unknown): bigint;
  cancelTimer(id: U64): boolean;

  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
  publish(topic: string, msg: object): number;
  publish(topic: string, kind: string, value?: unknown): number;
  join(group: string): void;
  leave(group: string): void;
  tellGroup(group: string, msg: object): boolean;
  tellGroup(group: string, kind: string, value?: unknown): boolean;
  broadcastGroup(group: string, msg: object): number;
  broadcastGroup(group: string, kind: string, value?: unknown): number;
  ask(to: Target, msg: object | string, value?: unknown, options?: { timeoutMs?: U64 }): bigint;

  children(): Address[];
  resolve(path: string): Address | undefined;
  mailboxDepth(path: string): number | undefined;
  alias(name: string): string;
  unalias(name: string): boolean;

  persistenceId(): string;
  setPersistenceId(id: string): void;
  recover<S = any, E = any>(types?: { snapshot?: Decodable<S>; event?: Decodable<E> }): Recovery<S, E>;
  recoverSnapshot<S = any>(snapshot?: Decodable<S>): S | undefined;
  persist(event: unknown): number;
  saveSnapshot(state: unknown): number;
  deleteEvents(through: U64): void;
  deleteState(): void;
  inShutdown(): boolean;
  remind(timing: Timing, msg: object): bigint;
  remind(timing: Timing, kind: string, value?: unknown): bigint;
  cancelReminder(id: U64): boolean;
  setDelivery(mode: DeliveryModeName): void;
  delivery(): DeliveryModeName;

  become(behavior: (ctx: Context, msg: any) => HookResult): void;
  unbecome(): void;
  stash(): void;
  unstashAll(): void;
  stashed(): number;
  peek(kind?: string): Envelope | undefined;
  take(kind?: string): Envelope | undefined;

  httpRequest(request: HttpRequest): bigint;

  sinceStart(): number;
  cpuTime(): number;
}

/** A JavaScript actor: override `start` and `receive`; the other hooks have defaults. */
export class Actor {
  /** The message classes `receive` gets decoded; other kinds go to `unhandled`. */
  static messages?: MessageClass[];
  start(ctx: Context, init: Uint8Array): HookResult;
  receive(ctx: Context, msg: any): HookResult;
  unhandled(ctx: Context, env: Envelope): HookResult;
  supervise(ctx: Context, child: Address, failure: Failure): DirectiveName | undefined | void;
  terminated(ctx: Context, who: Address): HookResult;
  deadLetter(ctx: Context, letter: DeadLetter): HookResult;
  answered(ctx: Context, askId: bigint, reply: Envelope): HookResult | typeof UNHANDLED;
  askTimeout(ctx: Context, askId: bigint): HookResult;
  httpResponse(ctx: Context, calloutId: bigint, outcome: HttpOutcome): HookResult;
  stopping(ctx: Context, reason: StopReason): void;
  saveState(): Uint8Array | unknown | undefined;
  migrate(ctx: Context, fromVersion: string, state: Uint8Array): HookResult;
}

/** What `answered` returns to have a reply handled like any other message. */
export const UNHANDLED: unique symbol;

/** The three exports componentize-js looks for (world `upgradable-actor-world`). */
export function exportActor(cls: new () => Actor): {
  actor: object;
  supervisor: object;
  upgrade: object;
  runtime: unknown;
};

/** Upgrade state: `value` encoded like a body. */
export function state(value: unknown): Uint8Array;
/** Upgrade state read back: a JSON value, or as `cls`. */
export function fromState<T = any>(body: Uint8Array, cls?: Decodable<T>): T;

export const TERMINATED: 'mote.terminated';
export const DEAD_LETTER: 'mote.deadletter';
export const ASK_TIMEOUT: 'mote.ask-timeout';
export const HTTP_RESPONSE: 'mote.http.response';
export const DEAD_LETTERS_TOPIC: '/system/deadletters';
export const ASK_PREFIX: '/system/ask/';
export const REPLAY_PAGE: number;
export const JSON_CODEC: Codec;

/** A u64 parameter checked and made a bigint. */
export function u64(value: U64): bigint;
/** `value` as body bytes. */
export function encode(value: unknown): Uint8Array;
/** The body's JSON value (`null` if empty). */
export function decode(body: Uint8Array): any;
/** `body` read as `cls`. */
export function decodeAs<T>(cls: Decodable<T>, body: Uint8Array): T;
/** The wire kind of a message class or instance. */
export function kindOf(clsOrValue: unknown): string;
/** Whether `value` is an instance of a message class. */
export function isMessage(value: unknown): boolean;
/** A Rust enum in serde's JSON as `[variant, value]`. */
export function variant(value: unknown): [string, any];
/** `value` as compact JSON, bigints as exact integers. */
export function toJson(value: unknown): string;
/** Text as UTF-8 bytes. */
export function utf8(text: string): Uint8Array;
/** UTF-8 bytes as text. */
export function text(bytes: Uint8Array): string;

/** One actor instance and what the SDK keeps beside it (for unit tests). */
export class Runtime {
  constructor(cls: new () => Actor);
  readonly ctx: Context;
  readonly actor: Actor | undefined;
}
