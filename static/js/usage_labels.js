// The short labels of what turns cost ("↑1.2k ↓340 · $0.0012"), pure: the transcript and /usage read them.

export function compactCount(value) {
  const count = Number(value) || 0;
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${(count / 1000).toFixed(count < 10_000 ? 1 : 0)}k`;
  return `${(count / 1_000_000).toFixed(1)}M`;
}

export function costLabel(usd) {
  const cost = Number(usd) || 0;
  if (!cost) return "";
  return cost < 0.01 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

// The label of one answer's usage, or "" when the agent reported none.
export function usageLabel(usage) {
  if (!usage || typeof usage !== "object") return "";
  const parts = [];
  if (usage.input_tokens || usage.output_tokens) {
    parts.push(`↑${compactCount(usage.input_tokens)} ↓${compactCount(usage.output_tokens)}`);
  }
  const cost = costLabel(usage.estimated_cost_usd);
  if (cost) parts.push(cost);
  return parts.join(" · ");
}

export function usageTitle(usage) {
  const rows = [
    ["input_tokens", "tokens in"],
    ["output_tokens", "tokens out"],
    ["cache_read_tokens", "read from the cache"],
    ["reasoning_tokens", "reasoning"],
  ];
  const lines = rows.filter(([key]) => usage[key]).map(([key, label]) => `${Number(usage[key]).toLocaleString("en")} ${label}`);
  const cost = costLabel(usage.estimated_cost_usd);
  if (cost) lines.push(`about ${cost}`);
  return lines.join("\n");
}
