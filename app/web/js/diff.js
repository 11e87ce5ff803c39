// Line diff for showing file edits, as a plain ES module (no library, no build step).
//
// Common leading and trailing lines are trimmed first, then Myers' O(ND) algorithm runs on the
// rest, so a small edit to a large file costs about the size of the edit. Past MAX_D edits or
// a work budget it gives up on minimality and reports the middle as deleted then added,
// rather than hang the page. renderDiff builds nodes with createTextNode only: file content
// is never parsed as markup. A final newline does not make an extra empty line.

const MAX_D = 2000;
const BUDGET = 2e7;

const lines = (t) => {
  if (!t) return [];
  const l = String(t).split(/\r?\n/);
  if (l[l.length - 1] === '') l.pop();
  return l;
};

// Edit ops for a → b as [op, index] pairs, or null past the limits.
function myers(a, b) {
  const n = a.length;
  const m = b.length;
  const off = n + m + 1;
  const v = new Int32Array(2 * off + 1);
  const trace = [];
  let work = 0;
  for (let d = 0; d <= Math.min(n + m, MAX_D); d++) {
    trace.push(v.slice(off - d, off + d + 1));
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]);
      let x = down ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      const x0 = x;
      while (x < n && y < m && a[x] === b[y]) x++, y++;
      work += x - x0 + 1;
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(trace, n, m);
    }
    if (work > BUDGET) return null;
  }
  return null;
}

function backtrack(trace, x, y) {
  const out = [];
  for (let d = trace.length - 1; d > 0; d--) {
    const v = trace[d];
    const k = x - y;
    const down = k === -d || (k !== d && v[k - 1 + d] < v[k + 1 + d]);
    const pk = down ? k + 1 : k - 1;
    const px = v[pk + d];
    const sx = down ? px : px + 1;
    while (x > sx) out.push(['same', --x]), y--;
    if (down) out.push(['add', --y]);
    else out.push(['del', --x]);
  }
  while (x > 0) out.push(['same', --x]);
  return out.reverse();
}

/** [{op: 'same' | 'add' | 'del', text}], one per line, in order. */
export function diffLines(oldText, newText) {
  const a = lines(oldText);
  const b = lines(newText);
  let p = 0;
  while (p < a.length && p < b.length && a[p] === b[p]) p++;
  let s = 0;
  while (s < a.length - p && s < b.length - p && a[a.length - 1 - s] === b[b.length - 1 - s]) s++;
  const am = a.slice(p, a.length - s);
  const bm = b.slice(p, b.length - s);
  const ops = myers(am, bm) ?? [
    ...am.map((_, i) => ['del', i]),
    ...bm.map((_, i) => ['add', i]),
  ];
  const same = (text) => ({ op: 'same', text });
  return [
    ...a.slice(0, p).map(same),
    ...ops.map(([op, i]) => ({ op, text: op === 'add' ? bm[i] : am[i] })),
    ...a.slice(a.length - s).map(same),
  ];
}

const PREFIX = { same: '  ', add: '+ ', del: '- ' };

/** <pre class="diff"> with one <div class="diff-add|diff-del|diff-same"> per line. */
export function renderDiff(oldText, newText, doc = globalThis.document) {
  const pre = doc.createElement('pre');
  pre.setAttribute('class', 'diff');
  for (const { op, text } of diffLines(oldText, newText)) {
    const line = doc.createElement('div');
    line.setAttribute('class', `diff-${op}`);
    line.appendChild(doc.createTextNode(PREFIX[op] + text));
    pre.appendChild(line);
  }
  return pre;
}
