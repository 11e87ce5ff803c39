// app/web/js/diff.js under Node's test runner, on the fake DOM of fake-dom.mjs.
// Run: node --test tests/js/diff.test.mjs

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { diffLines, renderDiff } from '../../app/web/js/diff.js';
import { createDocument, elements, serialize } from './fake-dom.mjs';

const numbered = (n, prefix = 'line') => Array.from({ length: n }, (_, i) => `${prefix} ${i}`);
const ops = (result) => result.map(({ op }) => op);
const texts = (result, ...kept) => result.filter(({ op }) => kept.includes(op)).map((r) => r.text);

/** The diff must replay: old = same + del lines, new = same + add lines, in order. */
function assertReplays(oldText, newText, result) {
  const lines = (t) => {
    const all = t ? t.split('\n') : [];
    return all.at(-1) === '' ? all.slice(0, -1) : all;
  };
  assert.deepEqual(texts(result, 'same', 'del'), lines(oldText));
  assert.deepEqual(texts(result, 'same', 'add'), lines(newText));
}

function lcsLength(a, b) {
  const row = new Array(b.length + 1).fill(0);
  for (const x of a) {
    let diagonal = 0;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j];
      row[j] = x === b[j - 1] ? diagonal + 1 : Math.max(row[j], row[j - 1]);
      diagonal = above;
    }
  }
  return row[b.length];
}

test('identical texts are all "same"', () => {
  const text = 'a\nb\nc\n';
  assert.deepEqual(diffLines(text, text), [
    { op: 'same', text: 'a' },
    { op: 'same', text: 'b' },
    { op: 'same', text: 'c' },
  ]);
  assert.deepEqual(diffLines('', ''), []);
});

test('add-only and delete-only', () => {
  assert.deepEqual(ops(diffLines('a\nc', 'a\nb\nc')), ['same', 'add', 'same']);
  assert.deepEqual(diffLines('a\nc', 'a\nb\nc')[1], { op: 'add', text: 'b' });
  assert.deepEqual(ops(diffLines('a\nb\nc', 'a\nc')), ['same', 'del', 'same']);
  assert.deepEqual(ops(diffLines('x', '')), ['del']);
  assert.deepEqual(ops(diffLines('a\nb', 'a\nb\nc\nd')), ['same', 'same', 'add', 'add']);
  assert.deepEqual(ops(diffLines('z\na\nb', 'a\nb')), ['del', 'same', 'same']);
});

test('a new file (null, undefined or empty old text) is all "add"', () => {
  for (const old of [null, undefined, '']) {
    assert.deepEqual(diffLines(old, 'one\ntwo\n'), [
      { op: 'add', text: 'one' },
      { op: 'add', text: 'two' },
    ]);
  }
  assert.deepEqual(diffLines('gone\n', null), [{ op: 'del', text: 'gone' }]);
});

test('one changed line in the middle of 2000 is one del and one add', () => {
  const before = numbered(2000);
  const after = [...before];
  after[1000] = 'changed';
  const result = diffLines(before.join('\n'), after.join('\n'));
  assert.equal(result.length, 2001);
  assert.deepEqual(result.filter((r) => r.op === 'del'), [{ op: 'del', text: 'line 1000' }]);
  assert.deepEqual(result.filter((r) => r.op === 'add'), [{ op: 'add', text: 'changed' }]);
  assert.equal(result.filter((r) => r.op === 'same').length, 1999);
  assert.deepEqual(ops(result.slice(999, 1002)), ['same', 'del', 'add']);
  assertReplays(before.join('\n'), after.join('\n'), result);
});

test('edits near both ends of a large file stay minimal and cheap', () => {
  const before = numbered(100_000);
  const after = [...before];
  after[3] = 'first edit';
  after.splice(99_990, 1);
  after.splice(50_000, 0, 'inserted');
  const start = performance.now();
  const result = diffLines(before.join('\n'), after.join('\n'));
  assert.ok(performance.now() - start < 1000);
  assert.deepEqual(ops(result.filter((r) => r.op !== 'same')), ['del', 'add', 'add', 'del']);
  assertReplays(before.join('\n'), after.join('\n'), result);
});

test('a trailing newline does not add an empty line; CRLF reads as LF', () => {
  assert.deepEqual(diffLines('a\nb', 'a\nb\n'), [
    { op: 'same', text: 'a' },
    { op: 'same', text: 'b' },
  ]);
  assert.deepEqual(ops(diffLines('a\r\nb\r\n', 'a\nb\n')), ['same', 'same']);
  assert.deepEqual(diffLines('a\n\n', 'a\n'), [
    { op: 'same', text: 'a' },
    { op: 'del', text: '' },
  ]);
  assert.deepEqual(diffLines('\n', ''), [{ op: 'del', text: '' }]);
});

test('random small inputs replay and are minimal (LCS-length "same" lines)', () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const make = () =>
    Array.from({ length: Math.floor(random() * 14) }, () => 'abcd'[Math.floor(random() * 4)]);
  for (let round = 0; round < 1500; round++) {
    const a = make();
    const b = make();
    const result = diffLines(a.join('\n'), b.join('\n'));
    assert.deepEqual(texts(result, 'same', 'del'), a, `${a} → ${b}`);
    assert.deepEqual(texts(result, 'same', 'add'), b, `${a} → ${b}`);
    assert.equal(texts(result, 'same').length, lcsLength(a, b), `${a} → ${b}`);
  }
});

test('very large, entirely different inputs fall back quickly and still replay', () => {
  for (const [before, after] of [
    [numbered(20_000, 'old'), numbered(20_000, 'new')],
    [numbered(6_000, 'old'), numbered(5_000, 'new')],
    // Repetitive lines: long diagonal snakes, the costly case for Myers.
    [
      Array.from({ length: 30_000 }, (_, i) => (i % 2 ? 'x' : 'y')),
      Array.from({ length: 30_000 }, (_, i) => (i % 3 ? 'x' : 'y')),
    ],
  ]) {
    const start = performance.now();
    const result = diffLines(before.join('\n'), after.join('\n'));
    const ms = performance.now() - start;
    assert.ok(ms < 2000, `${ms.toFixed(0)} ms`);
    assertReplays(before.join('\n'), after.join('\n'), result);
  }
  const result = diffLines(numbered(20_000, 'old').join('\n'), numbered(20_000, 'new').join('\n'));
  assert.deepEqual(ops(result.slice(0, 2)), ['del', 'del']);
  assert.equal(result[20_000].op, 'add');
});

test('renderDiff builds <pre class="diff"> with one prefixed line element each, as text', () => {
  const doc = createDocument();
  const before = 'keep\n<script>alert(1)</script>\n';
  const pre = renderDiff(before, 'keep\n<img src=x onerror=alert(1)>\n', doc);
  assert.equal(
    serialize(pre),
    '<pre class="diff"><div class="diff-same">  keep</div>' +
      '<div class="diff-del">- &lt;script&gt;alert(1)&lt;/script&gt;</div>' +
      '<div class="diff-add">+ &lt;img src=x onerror=alert(1)&gt;</div></pre>'
  );
  assert.deepEqual(
    elements({ childNodes: [pre] }).map((e) => e.tag),
    ['pre', 'div', 'div', 'div']
  );
  assert.equal(pre.childNodes[2].textContent, '+ <img src=x onerror=alert(1)>');
  assert.equal(serialize(renderDiff(null, '', doc)), '<pre class="diff"></pre>');
  const classes = renderDiff(null, 'a\nb', doc).childNodes.map((n) => n.className);
  assert.deepEqual(classes, ['diff-add', 'diff-add']);
});
