// js_http_fetch: a JavaScript actor that makes HTTP requests, so it imports `wasi:http` (the
// build keeps it: files named js_http_* are built without `-d http`). Mote refuses it at deploy
// unless the module is granted `wasi:http` (`grant = ["wasi:http"]` in a manifest).
// `fetch` {url} is answered with `fetched` {status, body}: an async `receive`, awaited within
// the call.
import { Actor, exportActor } from './mote/index.js';

class Fetcher extends Actor {
  async receive(ctx, msg) {
    if (msg.kind !== 'fetch') return;
    const response = await fetch(msg.value.url);
    const body = await response.text();
    ctx.reply('fetched', { status: response.status, body });
  }
}

export const { actor, supervisor, upgrade } = exportActor(Fetcher);
