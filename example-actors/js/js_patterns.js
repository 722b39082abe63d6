// Patterns from JavaScript, through the SDK's typed messages (`mote/patterns.js`). Init:
// `{"report": <path>}`. At start it spawns, as its children, a service manager of one-shot
// `echo_worker`s and a reaper. `gather` `{"n": k}` asks the reaper to square k with three
// workers of the manager; the reaper's `reaper.gathered` comes back here, and it reports the
// sum of the squares as `Report` `squares` (and how many answered as `answered`).
import { Actor, decodeAs, exportActor } from './mote/index.js';
import { init, reaper, serviceManager } from './mote/patterns.js';
import { Report } from './protocol.js';

class Square {
  static kind = 'square';
  constructor(n) {
    this.n = n;
  }
}

class Patterns extends Actor {
  start(ctx, initBytes) {
    this.reportTo = decodeAs(undefined, initBytes).report;
    const workers = ctx.spawn(
      'sm',
      serviceManager.MODULE,
      init(new serviceManager.Config({ module: 'echo_worker' })),
    );
    this.workers = workers.path;
    this.reaper = ctx.spawn('r', reaper.MODULE, init(new reaper.Config()));
  }

  receive(ctx, env) {
    if (env.kind === 'gather') {
      const targets = [this.workers, this.workers, this.workers];
      ctx.tell(this.reaper, reaper.Gather.of(targets, new Square(env.value.n), { deadline_ms: 20000 }));
    } else if (env.kind === reaper.Gathered.kind) {
      const gathered = decodeAs(reaper.Gathered, env.body);
      const sum = gathered.replies.reduce((total, reply) => total + reply.body.n, 0);
      ctx.tell(this.reportTo, new Report(ctx.path(), 'answered', gathered.replies.length));
      ctx.tell(this.reportTo, new Report(ctx.path(), 'squares', sum));
    }
  }
}

export const { actor, supervisor, upgrade } = exportActor(Patterns);
