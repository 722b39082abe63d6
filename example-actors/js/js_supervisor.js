// The supervisor of `example-actors/supervisor` in JavaScript, for its `by-error` mode: a
// parent that decides per failure in its `supervise` hook, with a strategy and death watch.
//
// Init: `<one|all> <resume|restart|stop|escalate|by-error> <max-restarts> <within-ms>
// <children> <child-module> <report-path> [backoff-min-ms] [backoff-max-ms] [node]`, as the Rust
// one's: it sets its strategy (`by-error` has `restart` as the strategy's directive), spawns
// `c0..cN` from the module with the report path as init (on the cluster node `node` if given:
// `spawnOn`), and watches them. In `by-error` mode the first of `resume`, `restart`, `stop`, `escalate` found in
// a child's error text is the directive (none: the strategy decides). It reports (the
// protocol's `Report`, JSON) `kind:<failure kind>` for every failure and `terminated` (value:
// the incarnation) for every child that stops.
import { Actor, Directive, Strategy, exportActor, text } from './mote/index.js';

const DIRECTIVES = ['resume', 'restart', 'stop', 'escalate'];

class Parent extends Actor {
  start(ctx, init) {
    const words = text(init).trim().split(/\s+/);
    if (words.length < 7) {
      throw new Error('init: <scope> <directive> <max-restarts> <within-ms> <children> <child-module> <report-path>');
    }
    const [scope, mode, maxRestarts, withinMs, count, module, reportTo, backoffMin, backoffMax, node] =
      words;
    this.reportTo = reportTo;
    this.byError = mode === 'by-error';
    const directive = this.byError ? Directive.RESTART : mode;
    const strategy = scope === 'one' ? Strategy.oneForOne(directive) : Strategy.allForOne(directive);
    const backoff = [Number(backoffMin ?? 0), Number(backoffMax ?? 0)];
    ctx.setStrategy(strategy.restarts(Number(maxRestarts), Number(withinMs)).backoff(...backoff));
    for (let i = 0; i < Number(count); i++) {
      const child = node === undefined
        ? ctx.spawn(`c${i}`, module, reportTo)
        : ctx.spawnOn(node, `c${i}`, module, reportTo);
      ctx.watch(child);
    }
    ctx.info(`js_supervisor: ${count} children from \`${module}\`, ${mode}`);
  }

  report(ctx, from, label, value) {
    ctx.tell(this.reportTo, 'Report', { from, label, value });
  }

  supervise(ctx, child, failure) {
    this.report(ctx, child.path, `kind:${failure.kind}`, 0);
    if (!this.byError) return undefined;
    const directive = DIRECTIVES.find((d) => failure.error.includes(d));
    ctx.info(`js_supervisor: ${child.path} failed with \`${failure.error}\`: ${directive}`);
    return directive;
  }

  terminated(ctx, who) {
    // An incarnation may use all 64 bits: a BigInt, written as an exact JSON integer.
    this.report(ctx, who.path, 'terminated', who.incarnation);
  }

  receive(ctx, env) {
    ctx.warn(`unhandled message of kind \`${env.kind}\``);
  }
}

export const { actor, supervisor, upgrade } = exportActor(Parent);
