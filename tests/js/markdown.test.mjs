// app/web/js/markdown.js under Node's test runner, on the fake DOM of fake-dom.mjs.
// Run: node --test tests/js/markdown.test.mjs

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import { renderMarkdown } from '../../app/web/js/markdown.js';
import { createDocument, elements, serialize } from './fake-dom.mjs';

const doc = createDocument();
const html = (text) => serialize(renderMarkdown(text, doc));
const is = (text, expected) => assert.equal(html(text), expected);
const tags = (text) => elements(renderMarkdown(text, doc));
const REL = 'noopener noreferrer nofollow';
const A = `rel="${REL}" target="_blank"`;
const link = (href, text) => `<a href="${href}" ${A}>${text}</a>`;
const auto = (url) => link(url, url);

describe('blocks', () => {
  test('ATX headings map to h3..h6 and drop closing hashes', () => {
    assert.equal(
      html('# One\n## Two\n### Three\n#### Four\n##### Five ##\n###### Six'),
      '<h3>One</h3><h4>Two</h4><h5>Three</h5><h6>Four</h6><h6>Five</h6><h6>Six</h6>'
    );
    is('#hashtag', '<p>#hashtag</p>');
    is('####### seven', '<p>####### seven</p>');
    is('# C#', '<h3>C#</h3>');
    is('## *it*', '<h4><em>it</em></h4>');
  });

  test('paragraphs split on blank lines; single newlines become <br>', () => {
    is('one\ntwo\n\n\nthree', '<p>one<br>two</p><p>three</p>');
    is('  padded  \r\nline', '<p>padded<br>line</p>');
    is('', '');
    assert.equal(html(null), '');
    assert.equal(html(undefined), '');
  });

  test('fenced code blocks keep their text verbatim, with a safe language class', () => {
    assert.equal(
      html('```python\nif a < b and c > d:\n    print("&")\n```\nafter'),
      '<pre><code class="language-python">' +
        'if a &lt; b and c &gt; d:\n    print("&amp;")</code></pre>' +
        '<p>after</p>'
    );
    is('~~~\n**not bold**\n~~~', '<pre><code>**not bold**</code></pre>');
    is('```c++\nx\n```', '<pre><code class="language-c++">x</code></pre>');
    is('````\n```\n````', '<pre><code>```</code></pre>');
    for (const info of ['"><script>', 'a b', 'x"y', 'java script:']) {
      const out = tags(`\`\`\`${info}\ncode\n\`\`\``);
      const code = out.find((e) => e.tag === 'code');
      assert.ok(!code.attrs.class || /^language-[\w+-]+$/.test(code.attrs.class), info);
    }
    assert.equal(
      tags('```"><img src=x>\ncode\n```').find((e) => e.tag === 'code').attrs.class,
      undefined
    );
  });

  test('an unclosed fence renders as a code block to the end', () => {
    is(
      'text\n```js\nlet x = 1;\n\nlet y',
      '<p>text</p><pre><code class="language-js">let x = 1;\n\nlet y</code></pre>'
    );
    is('```', '<pre><code></code></pre>');
  });

  test('inline triple backticks on one line are code, not a fence', () => {
    is('```x``` y', '<p><code>x</code> y</p>');
  });

  test('unordered lists with -, * and +, nested by indentation', () => {
    assert.equal(
      html('- a\n- b\n  - b1\n  - b2\n    - b2x\n- c'),
      '<ul><li>a</li><li>b<ul><li>b1</li><li>b2<ul><li>b2x</li></ul></li></ul></li><li>c</li></ul>'
    );
    is('* x\n* y', '<ul><li>x</li><li>y</li></ul>');
    is('+ x\n+ y', '<ul><li>x</li><li>y</li></ul>');
    is('- a\n    - four spaces', '<ul><li>a<ul><li>four spaces</li></ul></li></ul>');
  });

  test('ordered lists with . and ), a start number, and mixed nesting', () => {
    assert.equal(
      html('1. one\n2. two\n   - sub\n3) three'),
      '<ol><li>one</li><li>two<ul><li>sub</li></ul></li><li>three</li></ol>'
    );
    is('3. c\n4. d', '<ol start="3"><li>c</li><li>d</li></ol>');
    is('- a\n  1. x\n  2. y', '<ul><li>a<ol><li>x</li><li>y</li></ol></li></ul>');
  });

  test('lists: loose items get <p>, lazy continuation, interrupting a paragraph', () => {
    is('- a\n\n- b', '<ul><li><p>a</p></li><li><p>b</p></li></ul>');
    is('- a\n\n  more', '<ul><li><p>a</p><p>more</p></li></ul>');
    is('- a\ncontinued', '<ul><li>a<br>continued</li></ul>');
    is('Steps:\n1. go\n2. stop', '<p>Steps:</p><ol><li>go</li><li>stop</li></ol>');
    is('- a\n\nafter', '<ul><li>a</li></ul><p>after</p>');
    is('- a\n- b\n1. c', '<ul><li>a</li><li>b</li></ul><ol><li>c</li></ol>');
    is('- ```\n  code\n  ```', '<ul><li><pre><code>code</code></pre></li></ul>');
  });

  test('blockquotes, nested and holding other blocks', () => {
    is('> quoted\n> more', '<blockquote><p>quoted<br>more</p></blockquote>');
    assert.equal(
      html('> # h\n> - item\n>\n> > inner'),
      '<blockquote><h3>h</h3><ul><li>item</li></ul>' +
        '<blockquote><p>inner</p></blockquote></blockquote>'
    );
    is('> a\nlazy', '<blockquote><p>a<br>lazy</p></blockquote>');
  });

  test('horizontal rules', () => {
    is('a\n\n---\n\n***\n* * *\n___', '<p>a</p><hr><hr><hr><hr>');
    is('--', '<p>--</p>');
  });

  test('GFM tables with alignment, inline content, escaped pipes and ragged rows', () => {
    assert.equal(
      html('| a | *b* | c |\n|:--|:-:|--:|\n| 1 | `x\\|y` | 3 |\n| only |\nafter'),
      '<table><thead><tr><th align="left">a</th><th align="center"><em>b</em></th>' +
        '<th align="right">c</th></tr></thead><tbody><tr><td align="left">1</td>' +
        '<td align="center"><code>x\\|y</code></td><td align="right">3</td></tr>' +
        '<tr><td align="left">only</td><td align="center"></td><td align="right"></td></tr>' +
        '</tbody></table><p>after</p>'
    );
    assert.equal(
      html('a | b\n--- | ---\n1 | 2'),
      '<table><thead><tr><th>a</th><th>b</th></tr></thead>' +
        '<tbody><tr><td>1</td><td>2</td></tr></tbody></table>'
    );
    is('a | b\n--- | --- | ---', '<p>a | b<br>--- | --- | ---</p>');
    assert.deepEqual(
      tags('| a |\n|---|\n| <script>x</script> |').map((e) => e.tag),
      ['table', 'thead', 'tr', 'th', 'tbody', 'tr', 'td']
    );
  });
});

describe('inline', () => {
  test('emphasis, strong, strike, inline code', () => {
    assert.equal(
      html('*i* _i_ **b** __b__ ~~s~~ `c` ***bi***'),
      '<p><em>i</em> <em>i</em> <strong>b</strong> <strong>b</strong> <del>s</del> ' +
        '<code>c</code> <em><strong>bi</strong></em></p>'
    );
    is('**bold *and italic* inside**', '<p><strong>bold <em>and italic</em> inside</strong></p>');
    is('snake_case_name and 2 * 3 * 4', '<p>snake_case_name and 2 * 3 * 4</p>');
    is('~one tilde~', '<p>~one tilde~</p>');
    is('`` a ` b ``', '<p><code>a ` b</code></p>');
    is('`<b>` and `*x*`', '<p><code>&lt;b&gt;</code> and <code>*x*</code></p>');
  });

  test('links, autolinks and bare URLs carry rel and target', () => {
    is('[text](https://example.com)', `<p>${link('https://example.com', 'text')}</p>`);
    assert.equal(
      html('[t](http://x.org/a_(b) "Title")'),
      `<p><a href="http://x.org/a_(b)" ${A} title="Title">t</a></p>`
    );
    is('<https://a.b/c?d=e>', `<p>${auto('https://a.b/c?d=e')}</p>`);
    is('<mailto:me@x.org>', `<p>${auto('mailto:me@x.org')}</p>`);
    is('[mail](MAILTO:me@x.org)', `<p>${link('MAILTO:me@x.org', 'mail')}</p>`);
    assert.equal(
      html('see https://x.org/p. (or http://y.org/q), done'),
      `<p>see ${auto('https://x.org/p')}. (or ${auto('http://y.org/q')}), done</p>`
    );
    is('**https://x.org**', `<p><strong>${auto('https://x.org')}</strong></p>`);
    is(
      '[**b** `c`](https://x.org)',
      `<p>${link('https://x.org', '<strong>b</strong> <code>c</code>')}</p>`
    );
    is('[](https://x.org)', `<p>${auto('https://x.org')}</p>`);
    is('xhttps://x.org', '<p>xhttps://x.org</p>');
    is('`https://x.org`', '<p><code>https://x.org</code></p>');
  });

  test('links never nest', () => {
    is('[https://a.org](https://b.org)', `<p>${link('https://b.org', 'https://a.org')}</p>`);
    is('[<https://a.org>](https://b.org)', `<p>${link('https://b.org', 'https://a.org')}</p>`);
    is(
      '[a [b](https://b.org) c](https://c.org)',
      `<p>[a ${link('https://b.org', 'b')} c](${auto('https://c.org')})</p>`
    );
    const out = tags('[![badge](https://img.org/b.svg)](https://site.org)');
    assert.deepEqual(
      out,
      [
        { tag: 'p', attrs: {} },
        { tag: 'a', attrs: { href: 'https://site.org', rel: REL, target: '_blank' } },
      ]
    );
  });

  test('images become links with their alt text, never <img>', () => {
    assert.equal(
      html('![a cat](https://x.org/cat.png)'),
      `<p><a href="https://x.org/cat.png" ${A} class="md-image">a cat</a></p>`
    );
    is(
      '![](https://x.org/i.png)',
      `<p><a href="https://x.org/i.png" ${A} class="md-image">https://x.org/i.png</a></p>`
    );
    is('![x](javascript:alert(1))', '<p>![x](javascript:alert(1))</p>');
  });

  test('backslash escapes', () => {
    is(
      '\\*a\\* \\_b\\_ \\`c\\` \\[d\\](https://x.org) \\# \\\\ \\q',
      '<p>*a* _b_ `c` [d](' + auto('https://x.org') + ') # \\ \\q</p>'
    );
    is('\\# not a heading', '<p># not a heading</p>');
    is('a\\\nb', '<p>a<br>b</p>');
    is('\\<b>', '<p>&lt;b&gt;</p>');
  });
});

describe('security', () => {
  test('the modules never reach for an HTML parser', () => {
    for (const name of ['markdown.js', 'diff.js']) {
      const source = readFileSync(new URL(`../../app/web/js/${name}`, import.meta.url), 'utf8');
      const parsers =
        /innerHTML|outerHTML|insertAdjacentHTML|DOMParser|createContextualFragment|document\.write/;
      assert.doesNotMatch(source, parsers, name);
      assert.doesNotMatch(source, /\beval\b|new Function/, name);
    }
  });

  const ALLOWED = new Set([
    'p', 'br', 'h3', 'h4', 'h5', 'h6', 'em', 'strong', 'del', 'code', 'pre', 'a', 'ul', 'ol',
    'li', 'blockquote', 'hr', 'table', 'thead', 'tbody', 'tr', 'th', 'td',
  ]);
  const ATTRIBUTES = new Set(['href', 'rel', 'target', 'title', 'class', 'align', 'start']);
  const hostile = [
    '<script>alert(1)</script>',
    '<img src=x onerror=alert(1)>',
    '<iframe src="https://evil.org"></iframe>',
    '<style>body{display:none}</style>',
    '<a href="javascript:alert(1)">x</a>',
    '<svg onload=alert(1)>',
    '[x](javascript:alert(1))',
    '[x]( JaVaScRiPt:alert(1))',
    '[x](java\tscript:alert(1))',
    '[x](java\nscript:alert(1))',
    '[x](\x01javascript:alert(1))',
    '[x](jav&#x09;ascript:alert(1))',
    '[x](javascript&colon;alert(1))',
    '[x](data:text/html;base64,PHNjcmlwdD4=)',
    '[x](vbscript:msgbox(1))',
    '[x](//evil.org)',
    '[x](/relative)',
    '[x](file:///etc/passwd)',
    '<javascript:alert(1)>',
    '<data:text/html,<script>alert(1)</script>>',
    '![x](https://evil/img.png)',
    '![x](javascript:alert(1))',
    '[x](https://ok.org" onmouseover="alert(1))',
    '[x](https://ok.org "a\\" onclick=\\"alert(1)")',
    'onerror=alert(1) style="x" href="javascript:alert(1)"',
    '```"><script>alert(1)</script>\nx\n```',
    '| <b>a</b> |\n|---|\n| <img src=x> |',
    '> <script>x</script>\n- <iframe>',
    '# <script>alert(1)</script>',
    '`<script>`',
    '**<script>**',
    '[<img src=x onerror=alert(1)>](https://ok.org)',
  ];

  test('hostile input never yields an unexpected element, attribute or href', () => {
    for (const input of hostile) {
      for (const { tag, attrs } of tags(input)) {
        assert.ok(ALLOWED.has(tag), `${JSON.stringify(input)} produced <${tag}>`);
        for (const name of Object.keys(attrs)) {
          assert.ok(ATTRIBUTES.has(name), `${JSON.stringify(input)}: attribute ${name}`);
          assert.ok(!/^on/i.test(name), input);
        }
        if (attrs.href !== undefined) {
          assert.equal(tag, 'a');
          const message = `${JSON.stringify(input)}: href ${attrs.href}`;
          assert.match(attrs.href, /^(?:https?:\/\/|mailto:)/i, message);
          assert.ok(!/[\x00-\x20\x7f]/.test(attrs.href), input);
          assert.equal(attrs.rel, 'noopener noreferrer nofollow');
          assert.equal(attrs.target, '_blank');
        }
        if (attrs.class !== undefined) assert.match(attrs.class, /^(?:language-[\w+-]+|md-image)$/);
      }
    }
  });

  test('raw HTML and unsafe links appear as literal text', () => {
    is('<script>alert(1)</script>', '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
    is('<img src=x onerror=alert(1)>', '<p>&lt;img src=x onerror=alert(1)&gt;</p>');
    is('<b>bold?</b> & 1 < 2 > 0', '<p>&lt;b&gt;bold?&lt;/b&gt; &amp; 1 &lt; 2 &gt; 0</p>');
    is('[x](javascript:alert(1))', '<p>[x](javascript:alert(1))</p>');
    is('[x]( JaVaScRiPt:alert(1))', '<p>[x]( JaVaScRiPt:alert(1))</p>');
    is('[x](data:text/html,hi)', '<p>[x](data:text/html,hi)</p>');
    const fragment = renderMarkdown('<b>x</b> & <i>', doc);
    assert.equal(fragment.textContent, '<b>x</b> & <i>');
  });

  test('link and autolink text keeps < > & as text', () => {
    is(
      '[a<b>&c](https://x.org/?a=1&b=2)',
      `<p>${link('https://x.org/?a=1&amp;b=2', 'a&lt;b&gt;&amp;c')}</p>`
    );
  });
});

describe('streaming and robustness', () => {
  test('partial input renders without throwing', () => {
    const full =
      '# Title\n\nSome **bold** and *it* with `code` and [a link](https://x.org "t").\n\n' +
      '- item one\n  - nested\n1. first\n\n> quote\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n' +
      '```js\nconst x = "<b>";\n```\n\n![img](https://x.org/i.png) <https://y.org> ~~s~~ \\* ---\n';
    for (let n = 0; n <= full.length; n++) {
      const out = tags(full.slice(0, n));
      assert.ok(out.every((e) => e.tag !== 'script' && e.tag !== 'img'));
    }
  });

  test('random mixes of Markdown punctuation never throw nor yield unsafe output', () => {
    const pieces = ['*', '_', '~~', '`', '``', '[', ']', '(', ')', '![', '<', '>', 'https://x',
      'mailto:', 'javascript:', '\\', ' ', '\n', '\n\n', '- ', '1. ', '  ', '# ', '> ', '|',
      '---', '```', 'a', '"', '\t', ':', '<script>', 'onerror='];
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 5_000; round++) {
      let input = '';
      for (let n = Math.floor(random() * 40); n > 0; n--) {
        input += pieces[Math.floor(random() * pieces.length)];
      }
      for (const { tag, attrs } of tags(input)) {
        assert.notEqual(tag, 'script', input);
        if (attrs.href) assert.match(attrs.href, /^(?:https?:\/\/|mailto:)/i, input);
      }
    }
  });

  test('specific partial forms', () => {
    is('```py\nprint(1', '<pre><code class="language-py">print(1</code></pre>');
    is('some **bold', '<p>some **bold</p>');
    is(
      'a [half a link](https://exa',
      `<p>a [half a link](${auto('https://exa')}</p>`
    );
    is('a [half', '<p>a [half</p>');
    is('`unclosed', '<p>`unclosed</p>');
    is('| a | b |\n|--', '<p>| a | b |<br>|--</p>');
    is('- ', '<ul><li></li></ul>');
  });

  test('hostile sizes render in well under a second each', () => {
    const cases = {
      'stars': '*'.repeat(100_000),
      'stars in text': `a${'*'.repeat(100_000)}b`,
      'brackets': '['.repeat(100_000),
      'backticks': '`'.repeat(50_000),
      'backticks in text': `a${'`'.repeat(50_000)}`,
      'alternating backticks': '` a '.repeat(25_000),
      'unbalanced ticks': Array.from({ length: 300 }, (_, n) => '`'.repeat(n + 1)).join(' x '),
      'openers': '*a '.repeat(50_000),
      'closers': 'a* '.repeat(50_000),
      'mixed emphasis': '*a _b '.repeat(20_000) + 'c* d_ '.repeat(20_000),
      'unmatched under matched': '*x '.repeat(20_000) + '*y z_ y* '.repeat(20_000),
      'unmatched under matched _': '_x '.repeat(20_000) + '_y z* y_ '.repeat(20_000),
      'intraword': 'a*'.repeat(50_000),
      'link openers': '[a]('.repeat(25_000),
      'link destinations': '[a](b '.repeat(20_000),
      'parens': `[a](${'('.repeat(100_000)}`,
      'titles': '[a](u "'.repeat(20_000),
      'angle': '<'.repeat(100_000),
      'autolink-ish': '<http://a'.repeat(20_000),
      'urls': 'https://'.repeat(20_000),
      'url dots': `https://x${'.'.repeat(100_000)}`,
      'escapes': '\\'.repeat(100_000),
      'quotes': '>'.repeat(100_000),
      'nested lists': Array.from({ length: 2000 }, (_, n) => `${' '.repeat(2 * n)}- x`).join('\n'),
      'list markers': '- '.repeat(50_000) + 'x',
      'pipes': `${'|'.repeat(50_000)}\n${'|-'.repeat(25_000)}`,
      'table': `|a|b|\n|-|-|\n${'|1|2|\n'.repeat(20_000)}`,
      'spaces heading': `# a${' '.repeat(100_000)}#`,
      'lines': 'x\n'.repeat(100_000),
      'blank lines in a list': `- a${'\n'.repeat(300_000)}  b`,
      'fences': '```\n'.repeat(50_000),
    };
    for (const [name, input] of Object.entries(cases)) {
      const start = performance.now();
      renderMarkdown(input, doc);
      const ms = performance.now() - start;
      if (process.env.MD_TIMINGS) console.log(name, ms.toFixed(1));
      assert.ok(ms < 1000, `${name}: ${ms.toFixed(0)} ms`);
    }
  });

  test('deep nesting is capped instead of recursing without bound', () => {
    const depth = (node) => {
      let deepest = 0;
      const stack = [[node, 0]];
      while (stack.length) {
        const [n, d] = stack.pop();
        deepest = Math.max(deepest, d);
        for (const c of n.childNodes) if (c.nodeType === 1) stack.push([c, d + 1]);
      }
      return deepest;
    };
    const quotes = renderMarkdown(`${'>'.repeat(10_000)} x`, doc);
    assert.ok(depth(quotes) <= 16, `quotes: ${depth(quotes)}`);
    assert.match(quotes.textContent, /^>+ x$/);
    const lists = renderMarkdown(`${'- '.repeat(10_000)}x`, doc);
    assert.ok(depth(lists) <= 40, `lists: ${depth(lists)}`);
    const input = '*a _b '.repeat(5_000) + 'c* d_ '.repeat(5_000);
    const emphasis = renderMarkdown(input, doc);
    assert.ok(depth(emphasis) <= 20, `emphasis: ${depth(emphasis)}`);
    const letters = (text) => text.replace(/[*_]/g, '').trim();
    assert.equal(letters(emphasis.textContent), letters(input));
    assert.equal(depth(renderMarkdown('*'.repeat(100_000), doc)), 1);
  });
});
