// The account settings dialog: the password, the sessions signed in as this user, and API keys.
// A new key is shown once, in the answer that made it: the box holding it is emptied when the
// dialog closes, and the list shows only the name and the visible prefix, as the server does.

import { ApiError, api } from "./api.js";
import { opener, tried } from "./dialogs.js";
import { announce, clear, formatWhen, h, itemAction } from "./dom.js";

/** A short name for a session's browser: the user agent as sent, or a plain word when none was. */
function client(session) {
  return session.user_agent || "an unnamed client";
}

/**
 * `onEverywhere` is called once every session, this one included, has been signed out.
 */
export function settingsPanel(dialog, { onEverywhere }) {
  const $ = (selector) => dialog.querySelector(selector);
  const sessions = $("#sessions-list");
  const sessionsError = $("#sessions-error");
  const keys = $("#keys-list");
  const keysError = $("#keys-error");
  const newKey = $("#new-key");
  const newKeyValue = $("#new-key-value");
  const copyButton = $("#copy-key");

  function sessionItem(session) {
    return h(
      "li",
      {},
      h("span", { class: "grow ellipsis", title: client(session), text: client(session) }),
      session.current ? h("span", { class: "badge badge-ready", text: "this browser" }) : null,
      h("span", { class: "hint", text: `signed in ${formatWhen(session.created_at)}` }),
      h("span", { class: "hint", text: `last seen ${formatWhen(session.last_seen_at)}` }),
      session.current
        ? null
        : itemAction("Sign out", `the session of ${client(session)}`, () =>
            tried(sessionsError, async () => {
              await api.revokeSession(session.id);
              announce("That session is signed out.");
              await drawSessions();
            }),
          ),
    );
  }

  async function drawSessions() {
    await tried(sessionsError, async () => {
      const items = await api.sessions();
      clear(sessions);
      for (const session of items) sessions.append(sessionItem(session));
    });
  }

  function keyItem(key) {
    const expiry = key.expires_at ? `expires ${formatWhen(key.expires_at)}` : "never expires";
    return h(
      "li",
      {},
      h("span", { class: "grow", text: key.name }),
      h("code", { text: `${key.prefix}…` }),
      h("span", { class: "hint", text: `made ${formatWhen(key.created_at)}` }),
      h("span", { class: "hint", text: `last used ${formatWhen(key.last_used_at)}` }),
      h("span", { class: "hint", text: expiry }),
      itemAction("Revoke", `the key ${key.name}`, () =>
        tried(keysError, async () => {
          await api.revokeKey(key.id);
          announce(`The key ${key.name} is revoked.`);
          await drawKeys();
        }),
      ),
    );
  }

  async function drawKeys() {
    await tried(keysError, async () => {
      const items = await api.keys();
      clear(keys);
      for (const key of items) keys.append(keyItem(key));
      if (!items.length) keys.append(h("li", { class: "hint", text: "No API keys yet." }));
    });
  }

  function forgetNewKey() {
    newKey.hidden = true;
    newKeyValue.value = "";
    copyButton.textContent = "Copy";
  }

  $("#password-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    const done = $("#password-done");
    const errorBox = $("#password-error");
    done.textContent = "";
    const current = $("#current-password").value;
    const next = $("#new-password").value;
    if (!current || next.length < 8) {
      errorBox.textContent = current
        ? "Choose a new password of at least 8 characters."
        : "Enter your current password.";
      return;
    }
    errorBox.textContent = "";
    try {
      await api.changePassword(current, next);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        try {
          await api.stillSignedIn();
        } catch {
          return; // the session has ended: the page is back at the sign-in form
        }
        errorBox.textContent = "That is not your current password.";
      } else {
        errorBox.textContent = error.message;
      }
      return;
    }
    form.reset();
    done.textContent = "Your password is changed, and your other sessions are signed out.";
    await drawSessions();
  });

  $("#logout-all").addEventListener("click", async () => {
    const signedOut = await tried(sessionsError, () => api.logoutAll());
    if (signedOut) {
      dialog.close();
      onEverywhere();
    }
  });

  $("#key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = $("#key-name").value.trim();
    const days = $("#key-days").value;
    forgetNewKey();
    if (!name) {
      keysError.textContent = "Give the key a name, such as the script that will use it.";
      return;
    }
    await tried(keysError, async () => {
      const made = await api.createKey(name, days ? Number(days) : null);
      event.target.reset();
      newKeyValue.value = made.key;
      newKey.hidden = false;
      newKeyValue.focus();
      newKeyValue.select();
      await drawKeys();
    });
  });

  copyButton.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(newKeyValue.value);
    } catch {
      newKeyValue.select(); // no clipboard access (an insecure origin): the older way
      document.execCommand("copy");
    }
    copyButton.textContent = "Copied";
    announce("The key is copied.");
  });

  dialog.addEventListener("close", () => {
    forgetNewKey();
    for (const box of dialog.querySelectorAll(".error, .done")) box.textContent = "";
    $("#password-form").reset();
  });

  return opener(dialog, async () => {
    await Promise.all([drawSessions(), drawKeys()]);
  });
}
