// `node:fs` with `globSync`, for the conformance package on Node.js 20 (see `register.mjs`).
//
// The CLI uses it to collect result files (`globSync('**/checks.json', {cwd})`), so this does
// what Node 22's does for such patterns: it walks `cwd` (default: the working directory) and
// returns the paths below it, files and directories, relative to `cwd` with the platform's
// separators, that match a pattern. Patterns know `**` (any number of whole segments, none
// included), `*` and `?` within a segment, `[...]` / `[!...]` classes and `{a,b}` alternatives;
// `exclude` is a function of the path, or a list of patterns. Like Node's, `*` and `**` do
// not step into names that begin with a dot unless the pattern spells the dot.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export * from 'node:fs';
export default fs;

export function globSync(pattern, options = {}) {
  const patterns = (Array.isArray(pattern) ? pattern : [pattern]).map(globToRegExp);
  const exclude = options.exclude;
  const excluded =
    typeof exclude === 'function'
      ? exclude
      : Array.isArray(exclude)
        ? (entry) => exclude.some((p) => globToRegExp(p).test(toPosix(entry)))
        : () => false;
  const cwd = options.cwd instanceof URL ? fileURLToPath(options.cwd) : (options.cwd ?? '.');
  let entries;
  try {
    entries = fs.readdirSync(cwd, { recursive: true });
  } catch (error) {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return [];
    throw error;
  }
  const found = entries
    .map(String)
    .filter((entry) => patterns.some((re) => re.test(toPosix(entry))) && !excluded(entry))
    .sort();
  if (!options.withFileTypes) return found;
  return found.map((entry) => {
    const stats = fs.lstatSync(path.join(cwd, entry));
    return Object.assign(stats, {
      name: path.basename(entry),
      parentPath: path.resolve(cwd, path.dirname(entry)),
    });
  });
}

function toPosix(entry) {
  return entry.split(path.sep).join('/');
}

export function globToRegExp(glob) {
  const segments = glob.replace(/^\.\//, '').split('/');
  let source = '';
  segments.forEach((segment, index) => {
    const last = index === segments.length - 1;
    if (segment === '**') {
      // Any number of segments not starting with a dot; at the end, at least one.
      source += last ? '(?!\\.)[^/]*(?:/(?!\\.)[^/]*)*' : '(?:(?!\\.)[^/]*/)*';
      return;
    }
    source += segmentToRegExp(segment) + (last ? '' : '/');
  });
  return new RegExp(`^${source}$`);
}

function segmentToRegExp(segment, guardDot = !segment.startsWith('.')) {
  let source = guardDot ? '(?!\\.)' : '';
  for (let i = 0; i < segment.length; i++) {
    const char = segment[i];
    if (char === '*') {
      source += '[^/]*';
    } else if (char === '?') {
      source += '[^/]';
    } else if (char === '[') {
      const end = segment.indexOf(']', i + 2);
      if (end === -1) {
        source += '\\[';
        continue;
      }
      let body = segment.slice(i + 1, end);
      const negated = body[0] === '!' || body[0] === '^';
      if (negated) body = body.slice(1);
      source += `[${negated ? '^' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`;
      i = end;
    } else if (char === '{') {
      const end = segment.indexOf('}', i);
      if (end === -1) {
        source += '\\{';
        continue;
      }
      const choices = segment.slice(i + 1, end).split(',');
      source += `(?:${choices.map((choice) => segmentToRegExp(choice, false)).join('|')})`;
      i = end;
    } else {
      source += char.replace(/[.+^$()|\\]/g, '\\$&');
    }
  }
  return source;
}
