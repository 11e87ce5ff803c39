// Module-resolution hooks (registered by `register.mjs` on a Node.js without `fs.globSync`):
// `fs` imported by the conformance package resolves to `fs.mjs`, the real module plus
// `globSync`. Only that package is redirected, so nothing else sees a different `fs`.
const PACKAGE = '/node_modules/@modelcontextprotocol/conformance/';
const FS_WITH_GLOB = new URL('./fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes(PACKAGE)) {
    return { url: FS_WITH_GLOB, shortCircuit: true };
  }
  return next(specifier, context);
}
