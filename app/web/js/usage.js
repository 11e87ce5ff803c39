// Usage as tables: requests, tokens of each kind and their cost, one row per model (the user's
// own view) or per user (the administrators'). The figures are the server's, computed from its
// request log and the models' pricing; the page only formats them. "This month" is the UTC
// calendar month the server counts quotas in, so what the table shows is what a quota sees.

import { api } from "./api.js";
import { opener, tried } from "./dialogs.js";
import { clear, formatCount, formatUsd, h } from "./dom.js";

const COLUMNS = [
  ["requests", "Requests"],
  ["input_tokens", "Input"],
  ["output_tokens", "Output"],
  ["cache_read_tokens", "Cache read"],
  ["cache_write_tokens", "Cache write"],
];

const isoDay = (date) => date.toISOString().slice(0, 10);

/** From the first of this UTC month to today, both included. */
export function thisMonth(now = new Date()) {
  const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return { from: isoDay(first), to: isoDay(now) };
}

/** Tokens as a quota counts them: every kind together. */
const tokens = (figures) =>
  figures.input_tokens + figures.output_tokens + figures.cache_read_tokens + figures.cache_write_tokens;

function cells(tag, figures) {
  return [
    ...COLUMNS.map(([name]) => h(tag, { class: "num", text: formatCount(figures[name]) })),
    h(tag, { class: "num", text: formatCount(tokens(figures)) }),
    h(tag, {
      class: "num",
      text: formatUsd(figures.cost_usd),
      title: figures.cost_usd === null ? "This model has no pricing in providers.yaml" : null,
    }),
  ];
}

/**
 * A table of `body` (`{items, total}` from a usage route), one row per item named by `name`,
 * and the total beneath; `nothing` is said when there are no rows.
 */
export function usageTable(body, { caption, heading, name, nothing }) {
  if (!body.items.length) return h("p", { class: "hint", text: nothing });
  return h(
    "table",
    { class: "figures" },
    h("caption", { class: "visually-hidden", text: caption }),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col", text: heading }),
        COLUMNS.map(([, label]) => h("th", { scope: "col", class: "num", text: label })),
        h("th", { scope: "col", class: "num", text: "Tokens" }),
        h("th", { scope: "col", class: "num", text: "Cost" }),
      ),
    ),
    h(
      "tbody",
      {},
      body.items.map((item) => h("tr", {}, h("th", { scope: "row", text: name(item) }), cells("td", item))),
    ),
    h("tfoot", {}, h("tr", {}, h("th", { scope: "row", text: "Total" }), cells("td", body.total))),
  );
}

/** The signed-in user's usage this month, per model. */
export function usagePanel(dialog) {
  const box = dialog.querySelector("#usage-table");
  const range = dialog.querySelector("#usage-range");
  const errorBox = dialog.querySelector("#usage-error");

  async function draw() {
    const month = thisMonth();
    range.textContent = `From ${month.from} to ${month.to} (UTC), per model.`;
    await tried(errorBox, async () => {
      const body = await api.usage(month, "model");
      clear(box);
      box.append(
        usageTable(body, {
          caption: "Your usage this month per model",
          heading: "Model",
          name: (item) => item.model,
          nothing: "Nothing used this month yet.",
        }),
      );
    });
  }

  return opener(dialog, draw);
}
