// Lets the pinned conformance CLI run on Node.js 20: `node --import ./register.mjs <cli> ...`.
//
// Its build imports `globSync` from `fs`, which Node.js has only from 22 on, so on Node 20 the
// import fails before any scenario runs. On such a Node the hooks below give that one package an
// `fs` with a `globSync` of its own (`fs.mjs`); every other importer, and any Node that has the
// function, gets the real module untouched.
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  register('./hooks.mjs', import.meta.url);
}
