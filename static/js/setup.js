// The setup form: with no model configured, point the agent at an OpenAI-compatible endpoint or a known
// provider, test the connection, and save into the agent's own config. Keys go to the server only.

import { api } from "./api.js";
import { toast, toastError } from "./toast.js";

const $ = (id) => document.getElementById(id);

export class SetupDialog {
  constructor({ onSaved }) {
    this.dialog = $("setup-dialog");
    this.form = $("setup-form");
    this.result = $("setup-result");
    this.notice = $("no-model-notice");
    this.onSaved = onSaved;
    this.providers = [];
    for (const radio of this.form.elements.kind) radio.addEventListener("change", () => this.showKind());
    $("setup-provider-id").addEventListener("change", () => {
      this.setResult("");
      this.showKeyHint();
    });
    $("setup-test").addEventListener("click", () => this.test());
    $("setup-cancel").addEventListener("click", () => this.dialog.close());
    // "Set up a model" buttons anywhere on the page: the notice, a failed turn's message.
    document.addEventListener("click", (event) => {
      if (event.target.closest("[data-action=open-setup]")) this.open();
    });
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
  }

  // Opens the form when the agent has no working model yet.
  async offerIfNeeded() {
    try {
      const status = await api.onboardingStatus();
      this.showNotice(status.configured);
      if (!status.configured) this.open(status);
    } catch (err) {
      toastError(err);
    }
  }

  async open(status) {
    try {
      status = status || (await api.onboardingStatus());
    } catch (err) {
      toastError(err);
      return;
    }
    this.showNotice(status.configured);
    this.providers = status.providers || [];
    const select = $("setup-provider-id");
    select.replaceChildren(...this.providers.map((p) => new Option(p.label, p.id)));
    $("setup-lead").hidden = status.configured;
    $("setup-vision").checked = Boolean(status.supports_vision);
    this.setResult("");
    this.showKind();
    if (!this.dialog.open) this.dialog.showModal();
    $(this.kind() === "custom" ? "setup-base-url" : "setup-provider-id").focus();
  }

  // Without a model the page says so until one is set up, whether or not the form is open ("Later").
  showNotice(configured) {
    this.notice.hidden = Boolean(configured);
  }

  kind() {
    return this.form.elements.kind.value;
  }

  // A test's answer belongs to the endpoint it tested: another kind (or provider) starts without one.
  showKind() {
    const custom = this.kind() === "custom";
    $("setup-custom").hidden = !custom;
    $("setup-provider").hidden = custom;
    $("setup-vision-row").hidden = !custom;
    $("setup-models").replaceChildren();
    this.setResult("");
    this.showKeyHint();
  }

  showKeyHint() {
    const provider = this.providers.find((p) => p.id === $("setup-provider-id").value);
    const hint = $("setup-key-hint");
    if (this.kind() === "custom") hint.textContent = "(if the endpoint needs one)";
    else if (provider && provider.has_key) hint.textContent = `(${provider.key_env} is set; leave empty to keep it)`;
    else hint.textContent = provider ? `(saved as ${provider.key_env})` : "";
  }

  fields() {
    const fields = { kind: this.kind(), api_key: $("setup-key").value.trim(), model: $("setup-model").value.trim() };
    if (fields.kind === "custom") {
      fields.base_url = $("setup-base-url").value.trim();
      fields.supports_vision = $("setup-vision").checked;
    } else fields.provider = $("setup-provider-id").value;
    return fields;
  }

  setResult(text, ok = null) {
    this.result.textContent = text;
    this.result.classList.toggle("ok", ok === true);
    this.result.classList.toggle("bad", ok === false);
  }

  async test() {
    const button = $("setup-test");
    button.disabled = true;
    this.setResult("Testing…");
    try {
      const { model, supports_vision: _vision, ...fields } = this.fields();
      const answer = await api.onboardingProbe(fields);
      this.setResult(answer.message, answer.ok);
      const models = answer.models || [];
      $("setup-models").replaceChildren(...models.map((id) => new Option(id, id)));
      if (answer.ok && !model && models.length) $("setup-model").value = models[0];
    } catch (err) {
      this.setResult(err.message, false);
    } finally {
      button.disabled = false;
    }
  }

  async save() {
    const button = $("setup-save");
    button.disabled = true;
    try {
      const status = await api.onboardingSetup(this.fields());
      $("setup-key").value = "";
      this.showNotice(status.configured);
      this.dialog.close();
      toast(`Hermes now answers with ${status.default_model}.`);
      this.onSaved(status);
    } catch (err) {
      this.setResult(err.message, false);
    } finally {
      button.disabled = false;
    }
  }
}
