// The form an MCP server asks the user to fill in while one of its tool calls runs. MCP keeps
// these schemas flat (strings, numbers, booleans, single and multiple choice), so a small
// builder covers them all: one field per property, its title as the label, the schema's
// default as the starting value. `formContent` reads the values back as the JSON the server
// expects (numbers as numbers, choices as arrays); hearth checks them against the schema again.

import { h } from "./dom.js";

/** The choices of a string property or of an array's items: [{value, label}], or null. */
export function choicesOf(spec) {
  if (!spec || typeof spec !== "object") return null;
  const options = spec.oneOf || spec.anyOf;
  if (Array.isArray(options) && options.every((o) => o && "const" in o)) {
    return options.map((o) => ({ value: String(o.const), label: o.title || String(o.const) }));
  }
  if (Array.isArray(spec.enum)) {
    const names = Array.isArray(spec.enumNames) ? spec.enumNames : [];
    return spec.enum.map((value, i) => ({ value: String(value), label: names[i] || String(value) }));
  }
  return null;
}

const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

function fieldFor(name, spec, required, id) {
  const label = spec.title || name;
  const hint = spec.description ? h("small", { class: "hint", text: spec.description }) : null;
  const mark = required ? " *" : "";
  if (spec.type === "array") {
    const choices = choicesOf(spec.items) || [];
    const chosen = new Set((Array.isArray(spec.default) ? spec.default : []).map(String));
    return h(
      "fieldset",
      { class: "field", "data-name": name, "data-kind": "array" },
      h("legend", { text: label + mark }),
      hint,
      choices.map((choice) =>
        h(
          "label",
          { class: "choice" },
          h("input", { type: "checkbox", value: choice.value, checked: chosen.has(choice.value) }),
          " ",
          choice.label,
        ),
      ),
    );
  }
  let control;
  const choices = choicesOf(spec);
  if (spec.type === "boolean") {
    control = h("input", { id, type: "checkbox", checked: spec.default === true });
  } else if (choices) {
    const start = spec.default === undefined ? "" : String(spec.default);
    control = h(
      "select",
      { id, required },
      required && start ? null : h("option", { value: "", text: "—" }),
      choices.map((c) => h("option", { value: c.value, text: c.label, selected: c.value === start })),
    );
  } else if (spec.type === "number" || spec.type === "integer") {
    control = h("input", {
      id,
      type: "number",
      step: spec.type === "integer" ? "1" : "any",
      min: spec.minimum ?? null,
      max: spec.maximum ?? null,
      required,
      value: spec.default ?? "",
    });
  } else {
    control = h("input", {
      id,
      type: INPUT_TYPES[spec.format] || "text",
      minlength: spec.minLength ?? null,
      maxlength: spec.maxLength ?? null,
      required,
      value: spec.default ?? "",
    });
  }
  return h(
    "div",
    { class: "field", "data-name": name, "data-kind": spec.type || "string" },
    h("label", { for: id, text: label + mark }),
    control,
    hint,
  );
}

/** What the filled form answers: the properties given a value, as their schema types. */
export function formContent(form, schema) {
  const content = {};
  for (const field of form.querySelectorAll(".field")) {
    const name = field.dataset.name;
    const kind = field.dataset.kind;
    if (kind === "array") {
      content[name] = [...field.querySelectorAll("input:checked")].map((box) => box.value);
      continue;
    }
    const control = field.querySelector("input, select");
    if (kind === "boolean") {
      content[name] = control.checked;
    } else if (control.value !== "") {
      content[name] = kind === "number" || kind === "integer" ? Number(control.value) : control.value;
    }
  }
  const choices = schema?.properties || {};
  for (const [name, value] of Object.entries(content)) {
    // A choice whose values are not strings (an enum of numbers) goes back as its own value.
    const spec = choices[name];
    const original = Array.isArray(spec?.enum) ? spec.enum.find((v) => String(v) === value) : undefined;
    if (original !== undefined) content[name] = original;
  }
  return content;
}

/**
 * The form for `call.elicitation`; `onAnswer(call, action, content)` sends the answer.
 * Accept sends the values; Decline and Cancel send none.
 */
export function elicitationForm(call, onAnswer) {
  const asked = call.elicitation;
  const schema = asked.requested_schema || {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const prefix = `form-${asked.elicitation_id}`.replace(/[^\w-]/g, "_");
  const fields = Object.entries(schema.properties || {}).map(([name, spec], index) =>
    fieldFor(name, spec || {}, required.has(name), `${prefix}-${index}`),
  );
  const answer = (action) => (event) => {
    event.preventDefault();
    if (action === "accept" && !form.reportValidity()) return;
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    const content = action === "accept" ? formContent(form, schema) : undefined;
    Promise.resolve(onAnswer(call, action, content)).finally(() => {
      for (const button of form.querySelectorAll("button")) button.disabled = false;
    });
  };
  const form = h(
    "form",
    { class: "elicitation", "aria-label": `${call.name} asks you` },
    h("p", { class: "asked", text: asked.message }),
    fields,
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit", text: "Send" }),
      h("button", { type: "button", onclick: answer("decline"), text: "Decline" }),
      h("button", { type: "button", class: "danger", onclick: answer("cancel"), text: "Cancel" }),
    ),
  );
  form.addEventListener("submit", answer("accept"));
  return form;
}
