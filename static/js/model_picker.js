// The header's model picker: the configured default, the custom endpoints' live models and the providers
// with keys. A pick becomes the session's model for its next turn; "Set up a model…" opens the setup form.

import { api } from "./api.js";
import { el } from "./dom.js";
import { toast, toastError } from "./toast.js";

const SETUP = "__setup__";

export class ModelPicker {
  constructor({ root, select, refreshButton, onChanged, onSetup }) {
    this.root = root;
    this.select = select;
    this.refreshButton = refreshButton;
    this.onChanged = onChanged;
    this.onSetup = onSetup;
    this.catalog = null;
    this.session = null;
    this.stale = false; // a change to show once the person leaves the select
    select.addEventListener("change", () => this.pick());
    select.addEventListener("blur", () => {
      if (this.stale) this.render();
    });
    refreshButton.addEventListener("click", () => this.load({ refresh: true }));
  }

  async load({ refresh = false, attempt = 0 } = {}) {
    this.refreshButton.disabled = true;
    try {
      const catalog = await api.models(refresh);
      if (catalog.building) {
        // The server is still building its first list (a slow endpoint, or a busy start): ask again shortly.
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.load({ refresh, attempt: attempt + 1 }), Math.min(2000 * (attempt + 1), 10000));
        return;
      }
      this.catalog = catalog;
      if (refresh) toast("The model list is up to date.");
    } catch (err) {
      toastError(err);
    } finally {
      this.refreshButton.disabled = false;
    }
    this.render();
  }

  // A change of the same session while the person is on the select (its list may be open: a native select
  // does not say, so focus stands for open) is shown when they leave it, not under their pointer.
  update(session) {
    const next = session && session.session_id && !session.read_only ? session : null;
    const same = next && this.session && next.session_id === this.session.session_id;
    this.session = next;
    if (same && document.activeElement === this.select) this.stale = true;
    else this.render();
  }

  render() {
    this.stale = false;
    this.root.hidden = !this.session || !this.catalog;
    if (this.root.hidden) return;
    const { catalog, session } = this;
    const options = [];
    const fallback = catalog.default_model ? `Default (${catalog.default_model})` : "Default (none set up)";
    options.push(new Option(fallback, ""));
    for (const group of catalog.groups || []) {
      const optgroup = el("optgroup");
      optgroup.label = group.label;
      for (const model of group.models) optgroup.append(new Option(model, JSON.stringify([group.provider, model])));
      options.push(optgroup);
    }
    const current = session.model ? JSON.stringify([session.model_provider || "", session.model]) : "";
    const known = current === "" || (catalog.groups || []).some((g) => g.provider === (session.model_provider || "") && g.models.includes(session.model));
    if (!known) options.push(new Option(`${session.model} (not listed)`, current));
    options.push(new Option("Set up a model…", SETUP));
    this.select.replaceChildren(...options);
    this.select.value = current;
    this.select.title = session.model ? `Model for the next answer: ${session.model}` : "The configured default model";
  }

  // `/model <name>` picks the model of that name (its first provider); `/model` alone opens the list.
  async pickByName(name) {
    if (!name) {
      this.select.focus();
      this.select.showPicker?.();
      return true;
    }
    const wanted = name.trim().toLowerCase();
    const option = [...this.select.options].find((opt) => {
      if (!opt.value || opt.value === SETUP) return false;
      const [provider, model] = JSON.parse(opt.value);
      return model.toLowerCase() === wanted || `${provider}/${model}`.toLowerCase() === wanted;
    });
    if (!option) {
      toast(`No model named ${name} in the list (↻ asks the endpoints again).`);
      return false;
    }
    this.select.value = option.value;
    await this.pick();
    return true;
  }

  async pick() {
    const value = this.select.value;
    if (value === SETUP) {
      this.render();
      this.onSetup();
      return;
    }
    const [provider, model] = value ? JSON.parse(value) : ["", ""];
    try {
      const data = await api.setModel(this.session.session_id, model, provider);
      this.onChanged(data.session); // comes back through update(), as the newest of this pick and the feed
      toast(`The next answer comes from ${model || "the default model"}.`);
    } catch (err) {
      toastError(err);
    }
    this.render();
  }
}
