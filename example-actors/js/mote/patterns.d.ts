// Types of `mote/patterns`: the pattern components' messages (see patterns.js).

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
