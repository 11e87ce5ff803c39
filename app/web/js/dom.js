// A tiny element builder. The page builds every node through it (or through markdown.js), with
// text as text nodes and attributes set one by one, so no server or model string is ever parsed
// as HTML: the client never hands a string to the HTML parser.

export function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") element.textContent = String(value);
    else if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "hidden" || name === "disabled" || name === "open") element[name] = true;
    else element.setAttribute(name === "className" ? "class" : name, value === true ? "" : value);
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

/** A small text button acting on one item of a list, named for screen readers "Rename Foo". */
export function itemAction(label, itemName, onclick) {
  return h("button", {
    type: "button",
    class: "link",
    "aria-label": `${label} ${itemName}`,
    text: label,
    onclick,
  });
}

export function clear(element) {
  while (element.firstChild) element.removeChild(element.firstChild);
}

/** Say something to screen readers without moving focus. */
export function announce(message) {
  const status = document.getElementById("status");
  if (status) status.textContent = message;
}

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

const COUNT = new Intl.NumberFormat("en-US");

/** A whole number with thousands separators: 12,345. */
export function formatCount(value) {
  return COUNT.format(value);
}

/** US dollars, to the cent from a dollar up and to a hundredth of a cent below; null: unpriced. */
export function formatUsd(value) {
  if (value === null || value === undefined) return "no price";
  return `$${value.toFixed(value >= 1 ? 2 : 4)}`;
}

/** A server time (ISO 8601) in the reader's own locale and zone; null: never. */
export function formatWhen(iso, never = "never") {
  return iso ? new Date(iso).toLocaleString() : never;
}
