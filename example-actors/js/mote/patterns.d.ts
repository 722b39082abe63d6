// Types of `mote/patterns`: the pattern components' messages (see patterns.js).

import type { Decodable } from './index.js';

/** The JSON `init` bytes of a pattern's configuration, for `spawn`. */
export function init(config: object): Uint8Array;

/** A pattern message class: built from an object of its fields. */
export interface PatternMessageClass<T> {
  readonly kind: string;
  new (fields?: Partial<T>): T;
  fromJSON(value: unknown): T;
}

export namespace throttle {
  interface Config {
    target: string;
    rate: number;
    per_ms: number;
    burst?: number;
    queue: number;
  }
  interface SetRate {
    rate: number;
    per_ms: number;
  }
  interface GetStatus {}
  interface Status {
    queued: number;
    forwarded: number;
    refused: number;
    rate: number;
    per_ms: number;
  }
}

export const throttle: {
  readonly MODULE: 'throttle';
  readonly Config: PatternMessageClass<throttle.Config>;
  readonly SetRate: PatternMessageClass<throttle.SetRate>;
  readonly GetStatus: PatternMessageClass<throttle.GetStatus>;
  readonly Status: PatternMessageClass<throttle.Status>;
};

/** A class of a nested structure (no message of its own): built from an object of its fields. */
export interface PatternStructClass<T> {
  new (fields?: Partial<T>): T;
  fromJSON(value: unknown): T;
}

/** `bytes` in standard base64, with padding. */
export function base64Encode(bytes: Uint8Array): string;
/** The bytes of standard base64 text (padding optional); `Malformed` if it is not base64. */
export function base64Decode(text: string): Uint8Array;

export namespace supervision {
  /** What happens to a child that fails (one-for-one). */
  type Directive = 'restart' | 'resume' | 'stop' | 'escalate';
  /** A strategy for a pattern's children, as its object form. */
  interface Supervision {
    directive: Directive;
    max_restarts: number;
    within_ms: number;
    backoff_min_ms: number;
    backoff_max_ms: number;
  }
  /** A configuration's `strategy`: a directive's name or the object form. */
  type Strategy = Directive | Supervision;
}

export const supervision: {
  readonly DIRECTIVES: readonly supervision.Directive[];
  readonly Supervision: PatternStructClass<supervision.Supervision>;
  readonly MAX_CHILD_NAME: 128;
  validChildName(name: string): boolean;
};

export namespace router {
  type Strategy = 'round-robin' | 'random' | 'consistent-hash' | 'smallest-mailbox';
  type Directive = 'restart' | 'resume' | 'stop' | 'escalate';
  /** Routees the router spawns as its children. */
  interface Pool {
    module: string;
    size: number;
    init: string;
    directive: Directive;
    max_restarts: number;
    within_ms: number;
  }
  interface Config {
    strategy: Strategy;
    hash_key?: string;
    routees: string[];
    pool?: Partial<Pool> & { module: string; size: number };
    max_routees: number;
  }
  interface AddRoutee {
    path: string;
  }
  interface RemoveRoutee {
    path: string;
  }
  interface GetRoutees {}
  interface Routees {
    routees: string[];
    routed: number;
  }
  /** One message to every routee: `body` (JSON) or `bytes`, exactly one. */
  interface Broadcast {
    kind: string;
    body?: unknown;
    bytes?: Uint8Array;
    /** `[kind, body bytes]` of the message to send. */
    message(): [string, Uint8Array];
  }
}

export const router: {
  readonly MODULE: 'router';
  readonly STRATEGIES: readonly router.Strategy[];
  readonly Pool: PatternStructClass<router.Pool>;
  readonly Config: PatternMessageClass<router.Config>;
  readonly AddRoutee: PatternMessageClass<router.AddRoutee>;
  readonly RemoveRoutee: PatternMessageClass<router.RemoveRoutee>;
  readonly GetRoutees: PatternMessageClass<router.GetRoutees>;
  readonly Routees: PatternMessageClass<router.Routees>;
  readonly Broadcast: PatternMessageClass<router.Broadcast> & {
    /** A broadcast of a typed message, in its own encoding. */
    of(msg: object): router.Broadcast;
  };
};

export namespace circuitBreaker {
  type State = 'closed' | 'open' | 'half-open';
  interface Config {
    target: string;
    max_failures: number;
    call_timeout_ms: number;
    reset_timeout_ms: number;
    max_reset_timeout_ms?: number;
    failure_kinds: string[];
    max_pending: number;
  }
  interface GetState {}
  interface Status {
    state: State;
    failures: number;
    pending: number;
    retry_in_ms: number;
    reset_timeout_ms: number;
    passed: number;
    refused: number;
    opened: number;
  }
  interface Open {
    retry_in_ms: number;
  }
  interface Busy {
    pending: number;
  }
  interface Failed {
    reason: string;
  }
}

export const circuitBreaker: {
  readonly MODULE: 'circuit-breaker';
  readonly STATES: readonly circuitBreaker.State[];
  readonly Config: PatternMessageClass<circuitBreaker.Config>;
  readonly GetState: PatternMessageClass<circuitBreaker.GetState>;
  readonly Status: PatternMessageClass<circuitBreaker.Status>;
  readonly Open: PatternMessageClass<circuitBreaker.Open>;
  readonly Busy: PatternMessageClass<circuitBreaker.Busy>;
  readonly Failed: PatternMessageClass<circuitBreaker.Failed>;
};

export namespace reaper {
  type Op = 'sum' | 'count' | 'collect' | 'first' | 'max' | 'min';
  /** How to reduce a gather's replies to one value (`count` ignores `field`). */
  interface Reduce {
    op: Op;
    field: string;
  }
  interface Config {
    max_gathers: number;
    max_targets: number;
    max_asks: number;
    deadline_ms: number;
    reduce?: Reduce;
  }
  /** A request asked of every target: its body `body` (JSON) or `base64`. */
  interface Gather {
    targets: string[];
    kind: string;
    body?: unknown;
    base64?: string;
    deadline_ms?: number;
    want?: number;
    reduce?: Reduce;
    /** The request's body bytes. */
    payloadBytes(): Uint8Array;
  }
  interface GatherOptions {
    deadline_ms?: number;
    want?: number;
    reduce?: Reduce;
  }
  /** One target's reply. */
  interface Reply {
    from: string;
    kind: string;
    body?: unknown;
    base64?: string;
    /** The reply's body bytes. */
    payloadBytes(): Uint8Array;
    /** The reply read as `cls`. */
    decode<T>(cls: Decodable<T>): T;
  }
  interface Failed {
    target: string;
    error: string;
  }
  interface Gathered {
    replies: Reply[];
    timed_out: string[];
    failed: Failed[];
    complete: boolean;
  }
  interface Reduced {
    value: unknown;
    from: number;
    timed_out: string[];
    failed: Failed[];
    complete: boolean;
  }
  interface Refused {
    bound: 'max_gathers' | 'max_targets' | 'max_asks';
    limit: number;
    reason: string;
  }
  interface GetStatus {}
  interface Status {
    gathering: number;
    asks_pending: number;
    gathered: number;
    refused: number;
  }
}

export const reaper: {
  readonly MODULE: 'reaper';
  readonly REDUCTIONS: readonly reaper.Op[];
  /** `[body, base64]` of a body as it travels: JSON as its value, other bytes as base64. */
  payload(bytes: Uint8Array): [unknown, string | undefined];
  readonly Reduce: PatternStructClass<reaper.Reduce>;
  readonly Config: PatternMessageClass<reaper.Config>;
  readonly Gather: PatternMessageClass<reaper.Gather> & {
    /** Asks `targets` the typed request `msg`, in its own encoding. */
    of(targets: Iterable<string>, msg: object, options?: reaper.GatherOptions): reaper.Gather;
  };
  readonly Reply: PatternStructClass<reaper.Reply>;
  readonly Failed: PatternStructClass<reaper.Failed>;
  readonly Gathered: PatternMessageClass<reaper.Gathered>;
  readonly Reduced: PatternMessageClass<reaper.Reduced>;
  readonly Refused: PatternMessageClass<reaper.Refused>;
  readonly GetStatus: PatternMessageClass<reaper.GetStatus>;
  readonly Status: PatternMessageClass<reaper.Status>;
};

export namespace serviceManager {
  type Strategy = 'stop' | 'restart' | 'escalate';
  interface Config {
    module: string;
    init: string;
    max_workers: number;
    queue: number;
    worker_timeout_ms: number;
    strategy: Strategy;
    max_restarts: number;
  }
  interface Failed {
    failure: string;
    reason: string;
  }
  interface GetStatus {}
  interface Status {
    running: number;
    queued: number;
    served: number;
    failed: number;
    refused: number;
    peak: number;
  }
}

export const serviceManager: {
  readonly MODULE: 'service-manager';
  readonly STRATEGIES: readonly serviceManager.Strategy[];
  readonly Config: PatternMessageClass<serviceManager.Config>;
  readonly Failed: PatternMessageClass<serviceManager.Failed>;
  readonly GetStatus: PatternMessageClass<serviceManager.GetStatus>;
  readonly Status: PatternMessageClass<serviceManager.Status>;
};

export namespace pipeline {
  /** A stage: a module and its init (a string is its text, absent nothing, other JSON its JSON text). */
  interface Stage {
    module: string;
    init?: unknown;
  }
  interface Config {
    stages: Stage[];
    sink?: string;
    stage_timeout_ms: number;
    max_in_flight: number;
    strategy: supervision.Strategy;
  }
  interface GetStatus {}
  interface Status {
    stages: number;
    in_flight: number;
    completed: number;
    failed: number;
    dropped: number;
    refused: number;
  }
  interface Failed {
    reason: string;
    input: number;
    stage: number;
  }
  interface DropInput {}
}

export const pipeline: {
  readonly MODULE: 'pipeline';
  readonly MAX_STAGES: 64;
  readonly Stage: PatternStructClass<pipeline.Stage>;
  readonly Config: PatternMessageClass<pipeline.Config>;
  readonly GetStatus: PatternMessageClass<pipeline.GetStatus>;
  readonly Status: PatternMessageClass<pipeline.Status>;
  readonly Failed: PatternMessageClass<pipeline.Failed>;
  readonly DropInput: PatternMessageClass<pipeline.DropInput>;
};

export namespace pipelineBuilder {
  interface Config {
    module: string;
    max_pipelines: number;
    ready_timeout_ms: number;
    strategy: supervision.Strategy;
  }
  /** The pipeline's name beside its configuration's fields. */
  interface Build extends pipeline.Config {
    name: string;
  }
  interface Built {
    name: string;
    path: string;
  }
  interface Refused {
    name: string;
    reason: string;
  }
  interface TearDown {
    name: string;
  }
  interface TornDown {
    name: string;
    existed: boolean;
  }
  interface List {}
  interface Pipelines {
    pipelines: string[];
  }
}

export const pipelineBuilder: {
  readonly MODULE: 'pipeline-builder';
  readonly Config: PatternMessageClass<pipelineBuilder.Config>;
  readonly Build: PatternMessageClass<pipelineBuilder.Build> & {
    /** Builds pipeline `name` of a pipeline configuration. */
    of(name: string, config: pipeline.Config): pipelineBuilder.Build;
  };
  readonly Built: PatternMessageClass<pipelineBuilder.Built>;
  readonly Refused: PatternMessageClass<pipelineBuilder.Refused>;
  readonly TearDown: PatternMessageClass<pipelineBuilder.TearDown>;
  readonly TornDown: PatternMessageClass<pipelineBuilder.TornDown>;
  readonly List: PatternMessageClass<pipelineBuilder.List>;
  readonly Pipelines: PatternMessageClass<pipelineBuilder.Pipelines>;
};

export namespace podManager {
  interface Config {
    module: string;
    init?: unknown;
    max_pods: number;
    strategy: supervision.Strategy;
    create_on_dead_letter: boolean;
  }
  interface Create {
    pod: string;
  }
  interface Created {
    pod: string;
    path: string;
    new: boolean;
  }
  /** A message for a pod: `body` (JSON), else `bytes`, else empty. */
  interface Deliver {
    pod: string;
    kind: string;
    body?: unknown;
    bytes?: Uint8Array;
    /** The body the pod receives. */
    bodyBytes(): Uint8Array;
  }
  interface List {}
  interface Pods {
    pods: string[];
  }
  interface Remove {
    pod: string;
  }
  interface Removed {
    pod: string;
    existed: boolean;
  }
}

export const podManager: {
  readonly MODULE: 'pod-manager';
  readonly MAX_POD_NAME: 128;
  validPodName(pod: string): boolean;
  readonly Config: PatternMessageClass<podManager.Config>;
  readonly Create: PatternMessageClass<podManager.Create>;
  readonly Created: PatternMessageClass<podManager.Created>;
  readonly Deliver: PatternMessageClass<podManager.Deliver> & {
    /** A typed message for pod `pod`: a JSON one as `body`, any other as `bytes`. */
    of(pod: string, msg: object): podManager.Deliver;
  };
  readonly List: PatternMessageClass<podManager.List>;
  readonly Pods: PatternMessageClass<podManager.Pods>;
  readonly Remove: PatternMessageClass<podManager.Remove>;
  readonly Removed: PatternMessageClass<podManager.Removed>;
};
