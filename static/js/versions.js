// Versions of a message: an edit or a regenerate keeps what it replaced, and "‹ 1/2 ›" on the edited
// message switches between them (POST /api/session/version). The control is drawn from the session's
// `message_versions` ({index, count, current}); its buttons carry `data-action` like the other message actions.

import { el } from "./dom.js";

function stepButton(action, label, aria, disabled) {
  const button = el("button", "link-btn msg-version-step", label);
  button.type = "button";
  button.dataset.action = action;
  button.setAttribute("aria-label", aria);
  button.disabled = disabled;
  return button;
}

// "‹ 2/3 ›" for one group; the steps are off at either end and while a turn streams.
export function versionControl(group, { busy = false } = {}) {
  const nav = el("nav", "msg-versions");
  nav.setAttribute("aria-label", "Versions of this message");
  const label = el("span", "msg-version-label", `${group.current + 1}/${group.count}`);
  label.setAttribute("aria-live", "polite");
  label.title = `Version ${group.current + 1} of ${group.count}`;
  nav.append(
    stepButton("version-prev", "‹", "Previous version", busy || group.current <= 0),
    label,
    stepButton("version-next", "›", "Next version", busy || group.current >= group.count - 1),
  );
  return nav;
}

// The version wanted by a step of `step` (-1 or +1) from the group at `idx`; null when there is none.
export function steppedVersion(groups, idx, step) {
  const group = (groups || []).find((g) => g.index === idx);
  if (!group) return null;
  const version = group.current + step;
  return version >= 0 && version < group.count ? version : null;
}

// Puts the control on each rendered message that has versions (after its body, before its actions).
export function decorateVersions(list, groups, { readOnly, streaming }) {
  for (const old of list.querySelectorAll(".msg > .msg-versions")) old.remove();
  if (readOnly) return;
  for (const group of groups || []) {
    if (!(group.count > 1)) continue;
    const article = list.querySelector(`.msg[data-idx="${group.index}"]`);
    if (!article) continue;
    const control = versionControl(group, { busy: streaming });
    const actions = article.querySelector(":scope > .msg-actions");
    if (actions) actions.before(control);
    else article.append(control);
  }
}
