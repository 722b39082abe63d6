// The durable, supervised example of the README's "Write an actor in JavaScript" runs as shown,
// against the fake host.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { fake } from './fake/wit.js';
import { encode, exportActor } from '../mote/index.js';

beforeEach(() => fake.reset());

const here = fileURLToPath(new URL('.', import.meta.url));

/** The README's example as a module file importing the SDK of this checkout. */
function readmeExample() {
  const readme = readFileSync(join(here, '..', '..', '..', 'README.md'), 'utf8');
  const section = readme.indexOf('## Write an actor in JavaScript');
  const start = readme.indexOf('```js\n', section) + '```js\n'.length;
  const source = readme.slice(start, readme.indexOf('```', start));
  const sdk = pathToFileURL(join(here, '..', 'mote', 'index.js')).href;
  assert.ok(source.includes("from './mote/index.js'"), 'the example imports the SDK by path');
  const file = join(mkdtempSync(join(tmpdir(), 'mote-readme-')), 'app.js');
  // Its exports, plus the runtime behind them, to start a second instance of the same class.
  const exports = 'export const { actor, supervisor, upgrade } = exportActor(';
  assert.ok(source.includes(exports), 'the example exports what componentize-js looks for');
  const patched = source
    .replace("'./mote/index.js'", `'${sdk}'`)
    .replace(exports, 'export const { actor, supervisor, upgrade, runtime } = exportActor(');
  writeFileSync(file, patched);
  return import(pathToFileURL(file).href);
}

test('the README example recovers, replies and supervises', async () => {
  const app = await readmeExample();
  assert.equal(app.actor.start(new Uint8Array()), undefined);
  assert.deepEqual(fake.callsOf('spawn')[0].slice(0, 2), ['audit', 'auditor']);
  assert.equal(fake.callsOf('watch').length, 1);
  const sender = { path: '/system/p', incarnation: 1n };
  for (const amount of [5, 2]) {
    const body = encode({ customer: 'ann', amount });
    assert.equal(app.actor.receive({ sender, kind: 'order', body }), undefined);
  }
  const replies = fake.callsOf('tell').map(([, , body]) => new TextDecoder().decode(body));
  assert.deepEqual(replies, ['5', '7']);
  // A second instance of the same class recovers the totals from the journal.
  const again = exportActor(app.runtime.cls);
  assert.equal(again.actor.start(new Uint8Array()), undefined);
  assert.deepEqual(again.runtime.actor.totals, { ann: 7 }, 'recovered from the journal');
  const child = { path: '/user/me/audit', incarnation: 2n };
  assert.equal(app.supervisor.supervise(child, 'error', 'please retry'), 'resume');
  assert.equal(app.supervisor.supervise(child, 'error', 'other'), undefined);
});
