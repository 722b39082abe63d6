// Mote actors in JavaScript: the guest SDK over the `mote:actor` contract, with the Rust SDK's
// names in camelCase (`Actor`, `Context`, `tell`/`tellPath`/`ask`/`reply`, timers,
// persistence, supervision, behaviours, the stash, upgrades), for componentize-js.
//
//   import { Actor, exportActor } from './mote/index.js';
//
//   class Order {
//     static kind = 'order';                       // JSON body {"customer": .., "amount": ..}
//   }
//
//   class Orders extends Actor {
//     static messages = [Order];
//     start(ctx, init) {
//       this.totals = ctx.recover().fold(() => ({}), apply);   // durable: snapshot + events
//     }
//     receive(ctx, order) {
//       ctx.persist({ customer: order.customer, amount: order.amount });
//       ...
//     }
//   }
//
//   export const { actor, supervisor, upgrade } = exportActor(Orders);
export {
  Actor,
  Runtime,
  exportActor,
  state,
  fromState,
  TERMINATED,
  DEAD_LETTER,
  ASK_TIMEOUT,
  HTTP_RESPONSE,
  DEAD_LETTERS_TOPIC,
  UNHANDLED,
} from './actor.js';
export {
  Context,
  Envelope,
  Strategy,
  Failure,
  DeadLetter,
  Recovery,
  MoteError,
  Directive,
  DeliveryMode,
  ASK_PREFIX,
  REPLAY_PAGE,
  u64,
} from './context.js';
export {
  Malformed,
  JSON_CODEC,
  encode,
  decode,
  decodeAs,
  kindOf,
  isMessage,
  variant,
  toJson,
  utf8,
  text,
} from './codec.js';
