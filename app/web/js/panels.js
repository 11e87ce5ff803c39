// Two side panels (dialogs.js says how a panel opens): the user's files with their indexing
// status, and the catalogue of tool groups a model can activate.

import { api } from "./api.js";
import { failed, opener } from "./dialogs.js";
import { clear, formatSize, h, itemAction } from "./dom.js";

const INGESTION_TEXT = {
  pending: "indexing…",
  ready: "searchable",
  failed: "not searchable",
};

export function filesPanel(dialog) {
  const list = dialog.querySelector("#files-list");
  const more = dialog.querySelector("#more-files");
  const errorBox = dialog.querySelector("#files-error");
  let cursor = null;

  function item(upload) {
    const ingestion = upload.ingestion;
    const status = ingestion
      ? h("span", { class: `badge badge-${ingestion.status}`, text: INGESTION_TEXT[ingestion.status] })
      : null;
    const act = (label, action) =>
      itemAction(label, upload.filename, async () => {
        errorBox.textContent = "";
        try {
          await action();
          await draw();
        } catch (error) {
          failed(errorBox, error);
        }
      });
    return h(
      "li",
      {},
      h("a", { href: upload.url, target: "_blank", rel: "noopener", text: upload.filename }),
      h("span", { class: "file-size", text: formatSize(upload.size) }),
      status,
      ingestion?.error ? h("span", { class: "error", text: ingestion.error }) : null,
      h(
        "span",
        { class: "chat-actions" },
        ingestion ? act("Index again", () => api.reindex(upload.id)) : null,
        act("Delete", () => api.deleteUpload(upload.id)),
      ),
    );
  }

  async function draw(append = false) {
    errorBox.textContent = "";
    try {
      const page = await api.uploads(append ? cursor : null);
      if (!append) clear(list);
      for (const upload of page.items) list.append(item(upload));
      if (!list.children.length) list.append(h("li", { class: "hint", text: "No files yet." }));
      cursor = page.next_cursor;
      more.hidden = !cursor;
    } catch (error) {
      failed(errorBox, error);
    }
  }

  more.addEventListener("click", () => draw(true));
  return opener(dialog, () => draw());
}

/**
 * Connect or Disconnect for a group each user signs in to with their own account. Connecting is
 * a page visit: hearth sends the browser to the server's sign-in page, which sends it back here.
 */
function connection(group, redraw, errorBox) {
  const name = encodeURIComponent(group.group);
  if (group.status === "needs_connection") {
    return h(
      "p",
      { class: "row" },
      h("a", { href: `/api/mcp/${name}/connect`, class: "button", text: `Connect ${group.group}` }),
      h("span", { class: "hint", text: "Sign in with your own account to use these tools." }),
    );
  }
  const disconnect = async (event) => {
    event.target.disabled = true;
    try {
      await api.disconnect(group.group);
      await redraw();
    } catch (error) {
      failed(errorBox, error);
      event.target.disabled = false;
    }
  };
  return h(
    "p",
    { class: "row" },
    h("span", { class: "hint", text: "Connected with your account." }),
    h("button", { type: "button", class: "secondary", onclick: disconnect, text: `Disconnect ${group.group}` }),
  );
}

export function toolsPanel(dialog) {
  const list = dialog.querySelector("#tools-list");
  const errorBox = dialog.querySelector("#tools-error");

  async function draw() {
    errorBox.textContent = "";
    try {
      const groups = await api.tools();
      clear(list);
      for (const group of groups) {
        list.append(
          h(
            "li",
            {},
            h(
              "details",
              {},
              h(
                "summary",
                {},
                h("span", { class: "tool-name", text: group.group }),
                " ",
                h("span", { class: `badge badge-${group.status}`, text: group.status }),
                " ",
                h("span", { class: "hint", text: group.description }),
              ),
              group.connectable ? connection(group, draw, errorBox) : null,
              h(
                "ul",
                {},
                group.tools.map((tool) =>
                  h("li", {}, h("code", { text: tool.name }), ` — ${tool.description}`),
                ),
              ),
            ),
          ),
        );
      }
      if (!groups.length) list.append(h("li", { class: "hint", text: "No tool groups are configured." }));
    } catch (error) {
      failed(errorBox, error);
    }
  }

  return opener(dialog, draw);
}
