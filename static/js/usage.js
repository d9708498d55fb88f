// A session's usage as the agent reported it: the totals and each answer's tokens and cost (/usage).

import { getJSON } from "./api.js";
import { ask } from "./dialog.js";
import { el } from "./dom.js";
import { compactCount, costLabel } from "./usage_labels.js";

export async function showUsage(sessionId) {
  const data = await getJSON("/api/session/usage", { session_id: sessionId });
  const totals = data.totals;
  const body = el("div", "usage-report");
  const sum = el("p", "usage-total");
  const cost = costLabel(totals.estimated_cost);
  sum.textContent =
    `${Number(totals.input_tokens).toLocaleString("en")} tokens in, ${Number(totals.output_tokens).toLocaleString("en")} out` +
    (cost ? `, about ${cost}` : "") +
    ` over ${data.turns.length} answer${data.turns.length === 1 ? "" : "s"}.`;
  body.append(sum);
  if (data.turns.length) {
    const table = el("table", "usage-table");
    const head = el("tr");
    for (const label of ["Answer", "Model", "In", "Out", "Cost"]) head.append(el("th", null, label));
    table.append(head);
    data.turns.forEach((turn, i) => {
      const row = el("tr");
      row.append(
        el("td", null, String(i + 1)),
        el("td", null, turn.model || "—"),
        el("td", null, compactCount(turn.usage.input_tokens)),
        el("td", null, compactCount(turn.usage.output_tokens)),
        el("td", null, costLabel(turn.usage.estimated_cost_usd) || "—"),
      );
      table.append(row);
    });
    body.append(table);
  }
  await ask({ title: "Usage of this session", body, cancelLabel: "Close" });
  return true;
}
