// Markdown → DOM for chat messages: a tiny renderer instead of a library.
//
// Message text comes from a language model or a user, so none of it may reach the page as
// markup. This module never produces an HTML string: it builds nodes only with createElement,
// createTextNode, setAttribute and appendChild, so raw HTML in the input (`<script>`,
// `<img onerror=…>`) can only ever become text. Links are made only for http:, https: and
// mailto: (checked after dropping the control characters and spaces a browser would drop), and
// images become links, so nothing remote loads by itself. One plain ES module: no npm package,
// no build step.
//
// Text is re-rendered on every streamed delta, so partial input must look sensible (an unclosed
// ``` fence is a code block) and hostile input must stay cheap: no backtracking-prone regexes,
// one left-to-right scan per block for inline syntax plus CommonMark's delimiter-stack pass for
// emphasis, and container nesting capped at MAX_DEPTH.

const MAX_DEPTH = 12;
const LIST = /^([ \t]*)([-*+]|(\d{1,9})[.)])([ \t]+|$)/;
const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const SPECIAL = /[\\`*_~[\]!<h\n]/g;
const ESCAPABLE = /^[!-/:-@[-`{-~]$/;
const ALIGN = { ":-": "left", "::": "center", "-:": "right" };
const LINK = { rel: "noopener noreferrer nofollow", target: "_blank" };

let D; // the document of the current render (rendering is synchronous)

export function renderMarkdown(text, doc = globalThis.document) {
  D = doc;
  const frag = doc.createDocumentFragment();
  blocks(String(text ?? "").split(/\r\n?|\n/), frag, 0, false);
  return frag;
}

// A new <tag> with `attrs`, appended to `parent`.
function child(parent, tag, attrs) {
  const e = D.createElement(tag);
  for (const name in attrs) e.setAttribute(name, String(attrs[name]));
  return parent.appendChild(e);
}

const blank = (l) => !/\S/.test(l);
const ws = (c) => !c || /\s/.test(c);
const punct = (c) => !!c && /[\p{P}\p{S}]/u.test(c);
const isHr = (l) => /^ {0,3}[-*_]/.test(l) && /^(?:-{3,}|\*{3,}|_{3,})$/.test(l.replace(/[ \t]/g, ""));

// Width of the leading whitespace (a tab counts 4), and a line without its first `cols` of it.
const indent = (l) => /^[ \t]*/.exec(l)[0].replace(/\t/g, "    ").length;

function strip(l, cols) {
  let i = 0;
  for (let n = 0; n < cols && (l[i] === " " || l[i] === "\t"); i++) n += l[i] === "\t" ? 4 : 1;
  return l.slice(i);
}

function fence(l) {
  const m = FENCE.exec(l);
  return m && !(m[2][0] === "`" && m[3].includes("`")) ? m : null;
}

// Table cells: split on unescaped pipes, dropping the optional outer ones.
function cells(l) {
  const s = l.trim();
  const out = [];
  let cur = "";
  for (let i = s[0] === "|" ? 1 : 0; i < s.length; i++) {
    if (s[i] === "\\" && i + 1 < s.length) cur += s[i] + s[++i];
    else if (s[i] === "|") out.push(cur.trim()), (cur = "");
    else cur += s[i];
  }
  if (cur.trim() || s.length < 2 || !s.endsWith("|")) out.push(cur.trim());
  return out;
}

function tableStart(l, next) {
  if (!l.includes("|") || !next?.includes("-")) return false;
  const sep = cells(next);
  return sep.length === cells(l).length && sep.every((c) => /^:?-+:?$/.test(c));
}

// A line that starts with a letter (after up to three spaces) and holds no pipe opens no block:
// the common case by far, and every line of a paragraph is asked, so it is answered before the
// expressions below (a paragraph of 100,000 one-letter lines: 219 ms before, 175 ms after).
const TEXT = /^ {0,3}[A-Za-z]/;

// The block a line starts; null for paragraph text.
function kind(lines, i, depth) {
  const l = lines[i];
  if (TEXT.test(l) && !l.includes("|")) return null;
  if (blank(l)) return "blank";
  if (fence(l)) return "fence";
  if (/^ {0,3}#{1,6}(?:[ \t]|$)/.test(l)) return "heading";
  if (isHr(l)) return "hr";
  if (depth < MAX_DEPTH && /^ {0,3}>/.test(l)) return "quote";
  if (depth < MAX_DEPTH && LIST.test(l)) return "list";
  if (tableStart(l, lines[i + 1])) return "table";
  return null;
}

function blocks(lines, parent, depth, tight) {
  for (let i = 0; i < lines.length; ) {
    const l = lines[i];
    const k = kind(lines, i, depth);
    if (k === "blank") {
      i++;
    } else if (k === "fence") {
      const [, ind, f, info] = fence(l);
      const lang = info.trim().split(/[ \t]/)[0];
      const body = [];
      for (i++; i < lines.length; i++) {
        const c = CLOSE.exec(lines[i]);
        if (c && c[1][0] === f[0] && c[1].length >= f.length) {
          i++;
          break;
        }
        body.push(strip(lines[i], ind.length));
      }
      const pre = child(parent, "pre");
      child(pre, "code", /^[\w+-]+$/.test(lang) && { class: `language-${lang}` }).appendChild(
        D.createTextNode(body.join("\n"))
      );
    } else if (k === "heading") {
      const [, hashes, rest] = /^ *(#+)(.*)$/.exec(lines[i++]);
      let t = rest.trim();
      let j = t.length;
      while (j && t[j - 1] === "#") j--;
      if (!j || ws(t[j - 1])) t = t.slice(0, j).trim();
      inline(t, child(parent, `h${Math.min(hashes.length + 2, 6)}`));
    } else if (k === "hr") {
      child(parent, "hr");
      i++;
    } else if (k === "quote") {
      const body = [];
      for (; i < lines.length; i++) {
        if (/^ {0,3}>/.test(lines[i])) body.push(lines[i].replace(/^ {0,3}> ?/, ""));
        else if (!blank(body[body.length - 1]) && !kind(lines, i, depth)) body.push(lines[i]);
        else break;
      }
      blocks(body, child(parent, "blockquote"), depth + 1, false);
    } else if (k === "list") {
      i = list(lines, i, parent, depth);
    } else if (k === "table") {
      const aligns = cells(lines[i + 1]).map((c) => ALIGN[c[0] + c[c.length - 1]]);
      const table = child(parent, "table");
      const row = (line, tag, group) => {
        const tr = child(group, "tr");
        const cs = cells(line);
        aligns.forEach((align, n) => inline(cs[n] ?? "", child(tr, tag, align && { align })));
      };
      row(l, "th", child(table, "thead"));
      const body = child(table, "tbody");
      for (i += 2; i < lines.length && lines[i].includes("|") && !blank(lines[i]); i++) {
        row(lines[i], "td", body);
      }
    } else {
      const para = [l.trim()];
      for (i++; i < lines.length && !kind(lines, i, depth); i++) para.push(lines[i].trim());
      inline(para.join("\n"), tight ? parent : child(parent, "p"));
    }
  }
}

// A list starting at lines[i]; returns the index after it. A line indented 2+ columns past the
// marker belongs to the current item, so nesting works with 2- or 4-space indentation.
function list(lines, i, parent, depth) {
  const first = LIST.exec(lines[i]);
  const ordered = first[3] !== undefined;
  const base = indent(first[1]);
  const sibling = (l) => {
    const m = LIST.exec(l);
    return m && (m[3] !== undefined) === ordered && indent(m[1]) < base + 2 && !isHr(l) && m;
  };
  const items = [];
  let loose = false;
  for (let m; i < lines.length && (m = sibling(lines[i])); ) {
    const w = indent(m[1]) + m[2].length + 1;
    const item = [lines[i].slice(m[0].length)];
    for (i++; i < lines.length; i++) {
      const l = lines[i];
      if (blank(l)) {
        let j = i;
        while (j < lines.length && blank(lines[j])) j++;
        if (j < lines.length && indent(lines[j]) >= base + 2) {
          item.push("");
          i = j - 1;
          loose = true;
          continue;
        }
        loose ||= j < lines.length && !!sibling(lines[j]);
        i = j;
        break;
      }
      const ind = indent(l);
      if (ind >= base + 2) item.push(strip(l, Math.min(ind, w)));
      else if (!blank(item[item.length - 1]) && !kind(lines, i, depth)) item.push(l.trim());
      else break;
    }
    items.push(item);
  }
  const start = +first[3];
  const node = child(parent, ordered ? "ol" : "ul", ordered && start !== 1 && { start });
  for (const item of items) blocks(item, child(node, "li"), depth + 1, !loose);
  return i;
}

// The href to use, or null. Browsers drop control characters and spaces from URLs, so they are
// dropped here too before the scheme is checked, and the checked string is the one used.
function safeHref(url) {
  const href = url.replace(/[\x00-\x20\x7f]/g, "");
  return /^(?:https?:\/\/|mailto:)/i.test(href) ? href : null;
}

// `(destination "title")` at s[i] === "(" → {href, title, end} or null. The destination stops
// at whitespace and < > [ ], so a scan never runs past the next `](`: all scans stay linear.
function dest(s, i) {
  let k = i + 1;
  const skip = () => {
    while (k < s.length && ws(s[k])) k++;
  };
  skip();
  const a = k;
  for (let depth = 0; k < s.length; k++) {
    const c = s[k];
    if (c === "\\") k++;
    else if (c === "(") depth++;
    else if (c === ")" && !depth--) break;
    else if (ws(c) || "<>[]".includes(c)) break;
  }
  const url = s.slice(a, k);
  let title = "";
  skip();
  if (k > a && (s[k] === '"' || s[k] === "'")) {
    const e = s.indexOf(s[k], k + 1);
    if (e < 0) return null;
    title = s.slice(k + 1, e);
    k = e + 1;
    skip();
  }
  const href = s[k] === ")" && safeHref(url.replace(/\\([!-/:-@[-`{-~])/g, "$1"));
  return href ? { href, title, end: k + 1 } : null;
}

// Inline syntax of one block into `parent`. Nodes form a linked list (wrapping a range in <em>
// is O(1)); delimiter runs are chained in a second list, as in CommonMark's algorithm.
function inline(s, parent) {
  const root = {};
  const brackets = [];
  let top = null; // last delimiter run
  let active = 0; // brackets below this index sit inside a link: no links in links
  let txt = "";
  let ticks = null;
  const append = (n) => {
    n.prev = root.last;
    if (root.last) root.last.next = n;
    else root.first = n;
    return (root.last = n);
  };
  const flush = () => {
    if (txt) append({ t: txt });
    txt = "";
  };
  const add = (n) => (flush(), append(n));
  const unchain = (d) => {
    if (d.dprev) d.dprev.dnext = d.dnext;
    if (d.dnext) d.dnext.dprev = d.dprev;
    else top = d.dprev;
  };
  // The next run of exactly n backticks at or after `from`: runs are indexed once and the
  // pointers only move forward, so stray backticks cost linear time.
  const closing = (from, n) => {
    if (!ticks) {
      ticks = {};
      for (const m of s.matchAll(/`+/g)) (ticks[m[0].length] ??= { at: [], k: 0 }).at.push(m.index);
    }
    const r = ticks[n] ?? { at: [], k: 0 };
    while (r.k < r.at.length && r.at[r.k] < from) r.k++;
    return r.k < r.at.length ? r.at[r.k] : -1;
  };
  // Match emphasis delimiters above `bottom` ("process emphasis"). `floor` holds, per
  // character, the source position below which no opener is left, so closers never rescan the
  // same openers (a position, not a node: nodes get unchained, positions stay valid).
  const emphasis = (bottom) => {
    let c = top;
    while (c && c !== bottom && c.dprev !== bottom) c = c.dprev;
    if (c === bottom) c = null;
    const floor = { "*": -1, _: -1, "~": -1 };
    while (c) {
      let o = c.close ? c.dprev : null;
      const low = (x) => !x || x === bottom || x.at < floor[c.ch];
      while (!low(o) && !(o.ch === c.ch && o.open)) o = o.dprev;
      if (!c.close) {
        c = c.dnext;
      } else if (!low(o)) {
        const use = c.ch === "~" || (c.n > 1 && o.n > 1) ? 2 : 1;
        o.n -= use;
        c.n -= use;
        const e = { tag: c.ch === "~" ? "del" : use === 2 ? "strong" : "em", prev: o, next: c };
        if (o.next !== c) {
          e.first = o.next;
          e.first.prev = c.prev.next = null;
        }
        o.next = c.prev = e;
        o.dnext = c;
        c.dprev = o;
        if (!o.n) unchain(o);
        if (!c.n) unchain(c), (c = c.dnext);
      } else {
        floor[c.ch] = c.at;
        if (!c.open) unchain(c);
        c = c.dnext;
      }
    }
    while (top && top !== bottom) unchain(top);
  };

  const autolink = (href, text) => add({ tag: "a", attrs: { href, ...LINK }, first: { t: text } });

  for (let i = 0; i < s.length; ) {
    SPECIAL.lastIndex = i;
    const m = SPECIAL.exec(s);
    txt += s.slice(i, m ? m.index : s.length);
    if (!m) break;
    i = m.index;
    const c = s[i];
    const b = s[i - 1] ?? "";
    const e = s[i + 1] ?? "";
    let n = 1;
    if ("`*_~".includes(c)) while (s[i + n] === c) n++;
    let next = -1; // where to go on when s[i] starts something; otherwise it is a literal
    if (c === "\\" && (e === "\n" || ESCAPABLE.test(e))) {
      if (e === "\n") add({ tag: "br" });
      else txt += e;
      next = i + 2;
    } else if (c === "\n") {
      add({ tag: "br" });
      next = i + 1;
    } else if (c === "`") {
      const end = closing(i + n, n);
      if (end < 0) txt += s.slice(i, (next = i + n));
      else {
        let code = s.slice(i + n, end).replace(/\n/g, " ");
        if (code[0] === " " && code.endsWith(" ") && code.trim()) code = code.slice(1, -1);
        add({ tag: "code", first: { t: code } });
        next = end + n;
      }
    } else if ("*_~".includes(c)) {
      const a = s[i + n];
      const left = !ws(a) && (!punct(a) || ws(b) || punct(b));
      const right = !ws(b) && (!punct(b) || ws(a) || punct(a));
      const open = c === "_" ? left && (!right || punct(b)) : left;
      const close = c === "_" ? right && (!left || punct(a)) : right;
      if ((open || close) && (c !== "~" || n === 2)) {
        const d = add({ ch: c, n, open, close, at: i, dprev: top });
        if (top) top.dnext = d;
        top = d;
      } else txt += s.slice(i, i + n);
      next = i + n;
    } else if (c === "[" || (c === "!" && e === "[")) {
      brackets.push({ node: add({ t: c === "!" ? "![" : "[" }), img: c === "!", bottom: top });
      next = c === "!" ? i + 2 : i + 1;
    } else if (c === "]") {
      const o = brackets.pop();
      const d = o && (o.img || brackets.length >= active) && e === "(" && dest(s, i + 1);
      active = Math.min(active, brackets.length);
      if (d) {
        flush();
        emphasis(o.bottom);
        const a = o.node; // the "[" text node becomes the <a> and takes what follows it
        a.tag = "a";
        a.attrs = { href: d.href, ...LINK, ...(d.title && { title: d.title }) };
        if (o.img) a.attrs.class = "md-image";
        a.first = a.next ?? { t: d.href };
        a.first.prev = a.next = null;
        root.last = a;
        if (!o.img) active = brackets.length;
        next = d.end;
      }
    } else if (c === "<") {
      let end = i + 1;
      while (end < s.length && !ws(s[end]) && s[end] !== "<" && s[end] !== ">") end++;
      const href = s[end] === ">" && safeHref(s.slice(i + 1, end));
      if (href) autolink(href, s.slice(i + 1, end)), (next = end + 1);
    } else if (c === "h" && /^https?:\/\//.test(s.slice(i, i + 8)) && !/[\p{L}\p{N}]/u.test(b)) {
      // A bare URL, minus trailing punctuation (and a ")" it did not open).
      let end = i;
      while (end < s.length && !ws(s[end]) && !'<>"`[]'.includes(s[end])) end++;
      const paren = s.slice(i, end).includes("(");
      while (".,:;!?*_~'\")".includes(s[end - 1]) && !(s[end - 1] === ")" && paren)) end--;
      const url = s.slice(i, end);
      const href = /^https?:\/\/./.test(url) && safeHref(url);
      if (href) autolink(href, url), (next = end);
    }
    if (next < 0) txt += c;
    i = next < 0 ? i + 1 : next;
  }
  flush();
  emphasis(null);
  build(root.first, parent);
}

// Node list → DOM, iteratively (no recursion limit to hit). Adjacent text is merged. An <a>
// inside an <a> (an autolink in link text, an image in a link) is unwrapped, and so is any
// element nested deeper than MAX_DEPTH, which only hostile input produces.
function build(first, parent) {
  const work = [[first, parent, false, 0]];
  while (work.length) {
    let [n, p, inLink, depth] = work.pop();
    let txt = "";
    for (; n; n = n.next) {
      if (!n.tag) {
        txt += n.t ?? n.ch.repeat(n.n);
        continue;
      }
      if (txt) p.appendChild(D.createTextNode(txt));
      txt = "";
      if (n.first && ((n.tag === "a" && inLink) || depth >= MAX_DEPTH)) {
        work.push([n.next, p, inLink, depth], [n.first, p, inLink, depth]);
        break;
      }
      const e = child(p, n.tag, n.attrs);
      if (n.first) work.push([n.first, e, inLink || n.tag === "a", depth + 1]);
    }
    if (txt) p.appendChild(D.createTextNode(txt));
  }
}
