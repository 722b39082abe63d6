// `node --import ./tests/fake/register.js`: resolves the `mote:actor/*` imports of the SDK to
// the fake host in `wit.js`, so the SDK runs in Node.js without wasm.
import { register } from 'node:module';

register('./loader.js', import.meta.url);
