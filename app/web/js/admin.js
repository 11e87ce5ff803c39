// The administration dialog, shown to admins only (the server refuses everyone else anyway):
// users with search and paging, each with its switches (disabled, admin), its own quota and a
// delete that asks first; and this month's usage per user, or per model for one user. Each
// change redraws only its user's row, from the user the server answers, so a search and the
// place in a long list survive it.

import { api } from "./api.js";
import { opener, tried } from "./dialogs.js";
import { announce, clear, formatCount, formatUsd, formatWhen, h, itemAction } from "./dom.js";
import { thisMonth, usageTable } from "./usage.js";

function quotaText(quota) {
  if (!quota) return "default quota";
  const tokens = quota.daily_tokens === null ? "unlimited" : formatCount(quota.daily_tokens);
  const cost = quota.monthly_cost_usd === null ? "unlimited" : formatUsd(quota.monthly_cost_usd);
  return `quota: ${tokens} tokens a day, ${cost} a month`;
}

/** A number field's value for the server: empty is unlimited; anything else the server judges. */
function limit(input) {
  const text = input.value.trim();
  return text === "" ? null : Number(text);
}

/** `me()` answers the signed-in user, whose own row says so. */
export function adminPanel(dialog, { me }) {
  const $ = (selector) => dialog.querySelector(selector);
  const list = $("#users-list");
  const more = $("#more-users");
  const usersError = $("#users-error");
  const usageError = $("#admin-usage-error");
  let cursor = null;
  let q = "";

  function quotaForm(user, row) {
    const tokensId = `quota-tokens-${user.id}`;
    const costId = `quota-cost-${user.id}`;
    const tokens = h("input", {
      id: tokensId,
      type: "number",
      min: "0",
      step: "1",
      class: "short",
      value: user.quota?.daily_tokens ?? "",
    });
    const cost = h("input", {
      id: costId,
      type: "number",
      min: "0",
      step: "0.01",
      class: "short",
      value: user.quota?.monthly_cost_usd ?? "",
    });
    const save = (quota) =>
      change(user, row, { quota }, quota ? "Quota saved." : "The default quota applies again.");
    return h(
      "form",
      {
        class: "row quota",
        hidden: true,
        novalidate: true,
        "aria-label": `Quota of ${user.email}`,
        onsubmit: (event) => {
          event.preventDefault();
          save({ daily_tokens: limit(tokens), monthly_cost_usd: limit(cost) });
        },
      },
      h("label", { for: tokensId, text: "Tokens a day" }),
      tokens,
      h("label", { for: costId, text: "Dollars a month" }),
      cost,
      h("span", { class: "hint", text: "empty: unlimited" }),
      h("button", { type: "submit", text: "Save quota" }),
      h("button", { type: "button", class: "secondary", text: "Use the defaults", onclick: () => save(null) }),
    );
  }

  function confirmation(user, row) {
    const keep = h("button", { type: "button", class: "secondary", text: "Keep" });
    const box = h(
      "div",
      { class: "confirm", role: "group", "aria-label": `Delete ${user.email}?`, hidden: true },
      h("p", {
        text:
          `Delete ${user.email} and everything that was theirs: chats, messages, uploads and ` +
          "their files, keys and sessions? This cannot be undone.",
      }),
      h(
        "div",
        { class: "row" },
        h("button", {
          type: "button",
          class: "danger",
          text: "Delete for good",
          onclick: () =>
            tried(usersError, async () => {
              await api.deleteUser(user.id);
              row.remove();
              announce(`${user.email} is deleted.`);
              await drawUsage();
            }),
        }),
        keep,
      ),
    );
    keep.addEventListener("click", () => {
      box.hidden = true;
      row.querySelector(".user-actions")?.removeAttribute("hidden");
    });
    return box;
  }

  function userItem(user) {
    const row = h("li", { class: "user", "data-user": user.id });
    const quota = quotaForm(user, row);
    const confirm = confirmation(user, row);
    const actions = h(
      "span",
      { class: "chat-actions user-actions" },
      itemAction(user.disabled ? "Enable" : "Disable", user.email, () =>
        change(user, row, { disabled: !user.disabled }, user.disabled ? "Enabled." : "Disabled."),
      ),
      itemAction(user.is_admin ? "Remove admin" : "Make admin", user.email, () =>
        change(user, row, { is_admin: !user.is_admin }, "Saved."),
      ),
      itemAction("Quota", user.email, () => {
        quota.hidden = !quota.hidden;
        if (!quota.hidden) quota.querySelector("input").focus();
      }),
      itemAction("Usage", user.email, () => drawUserUsage(user)),
      itemAction("Delete", user.email, () => {
        actions.hidden = true;
        confirm.hidden = false;
        confirm.querySelector("button.secondary").focus();
      }),
    );
    row.append(
      h(
        "div",
        { class: "user-line" },
        h("strong", { text: user.email }),
        user.display_name && user.display_name !== user.email
          ? h("span", { text: user.display_name })
          : null,
        user.id === me()?.id ? h("span", { class: "badge", text: "you" }) : null,
        user.is_admin ? h("span", { class: "badge badge-ready", text: "admin" }) : null,
        user.disabled ? h("span", { class: "badge badge-failed", text: "disabled" }) : null,
        h("span", { class: "hint", text: `last seen ${formatWhen(user.last_seen_at)}` }),
        h("span", { class: "hint quota-text", text: quotaText(user.quota) }),
      ),
      actions,
      quota,
      confirm,
    );
    return row;
  }

  async function change(user, row, changes, said) {
    await tried(usersError, async () => {
      const updated = await api.updateUser(user.id, changes);
      row.replaceWith(userItem(updated));
      announce(`${updated.email}: ${said}`);
    });
  }

  async function drawUsers(append = false) {
    await tried(usersError, async () => {
      const page = await api.adminUsers(q, append ? cursor : null);
      if (!append) clear(list);
      for (const user of page.items) list.append(userItem(user));
      if (!list.children.length) list.append(h("li", { class: "hint", text: "No user matches." }));
      cursor = page.next_cursor;
      more.hidden = !cursor;
    });
  }

  async function drawUsage() {
    const box = $("#admin-usage-table");
    await tried(usageError, async () => {
      const body = await api.adminUsage(thisMonth(), "user");
      clear(box);
      box.append(
        usageTable(body, {
          caption: "Usage this month per user",
          heading: "User",
          name: (item) => item.email || item.user_id,
          nothing: "Nobody has used a model this month yet.",
        }),
      );
    });
  }

  async function drawUserUsage(user) {
    const heading = $("#user-usage-heading");
    const box = $("#user-usage-table");
    await tried(usageError, async () => {
      const body = await api.adminUsage(thisMonth(), "model", user.id);
      heading.textContent = `Usage this month of ${user.email}, per model`;
      clear(box);
      box.append(
        usageTable(body, {
          caption: `Usage this month of ${user.email} per model`,
          heading: "Model",
          name: (item) => item.model,
          nothing: `${user.email} has not used a model this month.`,
        }),
      );
      heading.hidden = false;
      box.hidden = false;
      heading.scrollIntoView({ block: "nearest" });
    });
  }

  $("#user-search").addEventListener("submit", (event) => {
    event.preventDefault();
    q = $("#user-query").value.trim();
    drawUsers();
  });
  more.addEventListener("click", () => drawUsers(true));

  return opener(dialog, async () => {
    $("#user-usage-heading").hidden = true;
    $("#user-usage-table").hidden = true;
    await Promise.all([drawUsers(), drawUsage()]);
  });
}
