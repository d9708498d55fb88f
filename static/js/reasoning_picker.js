// The header's reasoning effort: shown for a session whose model takes one (the server asks the agent's
// own rule for the route), "Default" follows the agent's config.yaml; a change applies from the next answer.

import { getJSON, postJSON } from "./api.js";
import { el } from "./dom.js";
import { toast, toastError } from "./toast.js";

// The option labels: the default names what it resolves to.
export function reasoningOptions(facts) {
  const fallback = facts.default ? `Reasoning: default (${facts.default === "none" ? "off" : facts.default})` : "Reasoning: default";
  return [["", fallback], ...facts.levels.map((level) => [level, `Reasoning: ${level === "none" ? "off" : level}`])];
}

export class ReasoningPicker {
  constructor({ root, select }) {
    this.root = root;
    this.select = select;
    this.sessionId = null;
    select.addEventListener("change", () => this.pick());
  }

  // What the session's model takes is asked per model pick (never of a session, which another tab may
  // delete meanwhile); the session's own effort comes with the session.
  async update(session) {
    const sid = session && session.session_id && !session.read_only ? session.session_id : null;
    const switched = sid !== this.sessionId;
    this.sessionId = sid;
    // A sidebar row does not carry the effort: the session's full view does.
    if (session && "reasoning_effort" in session) this.effort = session.reasoning_effort ?? null;
    else if (switched) this.effort = null;
    const pickKey = sid ? `${session.model || ""}\u0000${session.model_provider || ""}` : null;
    if (!sid) {
      this.pickKey = null;
      this.root.hidden = true;
      return;
    }
    if (pickKey === this.pickKey && this.facts) {
      this.show(this.facts);
      return;
    }
    this.pickKey = pickKey;
    try {
      const facts = await getJSON("/api/reasoning", { model: session.model || "", model_provider: session.model_provider || "" });
      if (pickKey !== this.pickKey) return;
      this.facts = facts;
      this.show(facts);
    } catch {
      this.root.hidden = true; // no agent yet (no model set up): nothing to pick
    }
  }

  show(facts) {
    this.select.replaceChildren(
      ...reasoningOptions(facts).map(([value, label]) => {
        const option = el("option", null, label);
        option.value = value;
        return option;
      }),
    );
    this.select.value = this.effort || "";
    this.root.hidden = !facts.supported;
  }

  // `/reasoning <level>` (or `default`); `/reasoning` alone opens the picker.
  async choose(sid, level) {
    if (!level) {
      if (this.root.hidden) toast("This session's model takes no reasoning effort.");
      else this.select.focus();
      return true;
    }
    const effort = level.trim().toLowerCase() === "default" ? "" : level.trim().toLowerCase();
    if (sid !== this.sessionId || ![...this.select.options].some((option) => option.value === effort)) {
      toast(`Unknown reasoning effort: ${level}.`);
      return false;
    }
    this.select.value = effort;
    await this.pick();
    return true;
  }

  async pick() {
    const sid = this.sessionId;
    const effort = this.select.value || null;
    try {
      await postJSON("/api/reasoning", { session_id: sid, effort });
      this.effort = effort;
      toast(effort ? `Reasoning effort: ${effort === "none" ? "off" : effort}, from the next answer.` : "Reasoning effort: the default.");
    } catch (err) {
      toastError(err);
    }
  }
}
