// What every panel shares: a native <dialog> opened modally (focus kept inside, Escape closes,
// focus returns to the button that opened it) and drawn afresh from the API each time it opens,
// and the one way a panel shows a failed request. A 401 is not shown: the page has gone back to
// the sign-in form by then.

import { ApiError } from "./api.js";

/** Wire the dialog's Close buttons; answer the function that opens it and draws it. */
export function opener(dialog, draw) {
  for (const button of dialog.querySelectorAll("[data-close]")) {
    button.addEventListener("click", () => dialog.close());
  }
  return async () => {
    if (!dialog.open) dialog.showModal();
    await draw();
  };
}

export function failed(box, error) {
  if (!(error instanceof ApiError && error.status === 401)) box.textContent = error.message;
}

/** Run `action` with `box` cleared first and the error shown in it; answers whether it worked. */
export async function tried(box, action) {
  box.textContent = "";
  try {
    await action();
    return true;
  } catch (error) {
    failed(box, error);
    return false;
  }
}
