// A tiny stand-in for the browser DOM, enough for the web client's DOM-building modules under
// Node's test runner: createDocumentFragment / createElement / createTextNode, setAttribute,
// appendChild and textContent. The HTML-parsing entry points (innerHTML, outerHTML,
// insertAdjacentHTML) throw, so a test fails if a module ever reaches for them.

const ATTRIBUTE_NAME = /^[A-Za-z_:][-\w:.]*$/;

class FakeNode {
  constructor(nodeType) {
    this.nodeType = nodeType;
    this.childNodes = [];
    this.parentNode = null;
  }

  appendChild(node) {
    if (!(node instanceof FakeNode)) throw new TypeError('appendChild: not a node');
    if (node.nodeType === 11) {
      for (const child of node.childNodes.splice(0)) this.appendChild(child);
      return node;
    }
    if (node.parentNode) {
      const siblings = node.parentNode.childNodes;
      siblings.splice(siblings.indexOf(node), 1);
    }
    node.parentNode = this;
    this.childNodes.push(node);
    return node;
  }

  get firstChild() {
    return this.childNodes[0] ?? null;
  }

  get textContent() {
    return this.nodeType === 3 ? this.data : this.childNodes.map((c) => c.textContent).join('');
  }

  set textContent(value) {
    if (this.nodeType === 3) {
      this.data = String(value);
      return;
    }
    for (const child of this.childNodes) child.parentNode = null;
    this.childNodes = [];
    if (value !== '' && value != null) this.appendChild(new FakeText(String(value)));
  }
}

class FakeText extends FakeNode {
  constructor(data) {
    super(3);
    this.data = data;
  }
}

const forbidden = (name) => () => {
  throw new Error(`${name} must not be used`);
};

class FakeElement extends FakeNode {
  constructor(tagName) {
    super(1);
    this.tagName = tagName.toUpperCase();
    this.localName = tagName.toLowerCase();
    this.attributes = new Map();
  }

  setAttribute(name, value) {
    if (!ATTRIBUTE_NAME.test(name)) throw new Error(`InvalidCharacterError: ${name}`);
    this.attributes.set(name.toLowerCase(), String(value));
  }

  getAttribute(name) {
    return this.attributes.get(name.toLowerCase()) ?? null;
  }

  get className() {
    return this.getAttribute('class') ?? '';
  }

  set className(value) {
    this.setAttribute('class', value);
  }
}

for (const name of ['innerHTML', 'outerHTML']) {
  const throws = forbidden(name);
  Object.defineProperty(FakeElement.prototype, name, { get: throws, set: throws });
}
FakeElement.prototype.insertAdjacentHTML = forbidden('insertAdjacentHTML');

export function createDocument() {
  return {
    createDocumentFragment: () => new FakeNode(11),
    createElement: (tag) => {
      if (!/^[a-z][a-z0-9]*$/i.test(tag)) throw new Error(`InvalidCharacterError: ${tag}`);
      return new FakeElement(tag);
    },
    createTextNode: (data) => new FakeText(String(data)),
  };
}

const escapeText = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const escapeAttribute = (s) => escapeText(s).replace(/"/g, '&quot;');
const VOID = new Set(['br', 'hr', 'img', 'input']);

/** The tree as an HTML-like string: text escaped, attributes in insertion order. */
export function serialize(node) {
  if (node.nodeType === 3) return escapeText(node.data);
  const inner = node.childNodes.map(serialize).join('');
  if (node.nodeType !== 1) return inner;
  const attributes = [...node.attributes]
    .map(([name, value]) => ` ${name}="${escapeAttribute(value)}"`)
    .join('');
  if (VOID.has(node.localName)) return `<${node.localName}${attributes}>`;
  return `<${node.localName}${attributes}>${inner}</${node.localName}>`;
}

/** Every element under `node` (depth first, document order): {tag, attrs}. */
export function elements(node) {
  const out = [];
  const stack = [...node.childNodes].reverse();
  while (stack.length) {
    const n = stack.pop();
    if (n.nodeType !== 1) continue;
    out.push({ tag: n.localName, attrs: Object.fromEntries(n.attributes) });
    stack.push(...[...n.childNodes].reverse());
  }
  return out;
}
