// The slash commands, one table: name, argument hint, help and handler. The composer completes and parses
// from it, the shortcuts dialog lists it, and the app runs a command's handler; adding a command is one
// entry here.

import { api, getJSON, postJSON } from "./api.js";
import { toast } from "./toast.js";
import { showUsage } from "./usage.js";

// Undo and retry answer `{error}` when there is no turn to remove: it is said, and the command is done.
async function removeLastTurn(call, sid) {
  const data = await call(sid);
  if (!data.error) return data;
  toast(data.error);
  return null;
}

// `run(app, sid, arg)` gets the app (its chat view, composer and session list), the open session's id and
// the argument; it answers false when the composer should keep the text. `withoutSession` commands run
// with no session open.
export const COMMANDS = [
  {
    name: "compress",
    args: "[focus]",
    help: "Compress the model's context; the transcript stays",
    async run(app, sid, arg) {
      app.composer.setStatus(arg ? `Compressing the context (focus: ${arg})…` : "Compressing the context…");
      const data = await api.compress(sid, arg || null);
      const summary = data.summary || {};
      toast([summary.headline, summary.token_line].filter(Boolean).join(" — ") || "Context compressed.");
      await app.chat.reload();
      return true;
    },
  },
  {
    name: "uncompress",
    args: "",
    help: "Undo the last compression of the context",
    async run(app, sid) {
      await api.uncompress(sid);
      toast("The context from before the last compression is back.");
      await app.chat.reload();
      return true;
    },
  },
  {
    name: "undo",
    args: "",
    help: "Remove the last exchange",
    async run(app, sid) {
      const data = await removeLastTurn(api.undo, sid);
      if (!data) return true;
      toast(`Removed ${data.removed_count} message${data.removed_count === 1 ? "" : "s"}.`);
      await app.chat.reload();
      return true;
    },
  },
  {
    name: "retry",
    args: "",
    help: "Resend your last message",
    async run(app, sid) {
      const data = await removeLastTurn(api.retry, sid);
      if (!data) return true;
      await app.chat.reload();
      return app.send(data.last_user_text);
    },
  },
  {
    name: "clear",
    args: "",
    help: "Clear this conversation",
    run: (app, sid) => app.clearUndoably(sid),
  },
  {
    name: "title",
    args: "<text>",
    help: "Rename this session",
    withoutSession: true,
    async run(app, sid, arg) {
      if (!arg) {
        toast("Usage: /title <new title>");
        return false;
      }
      const target = sid || (await app.ensureSession());
      const data = await api.rename(target, arg);
      app.sessionChanged(data.session);
      return true;
    },
  },
];

// The agent's own commands the page runs (GET /api/commands names them with the agent's help text), by name.
const AGENT_RUNNERS = {
  new: { withoutSession: true, run: (app) => app.newSession().then(() => true) },
  model: {
    withoutSession: false,
    run: (app, sid, arg) => app.pickModel(arg),
  },
  help: { withoutSession: true, run: (app) => app.showHelp() },
  usage: { withoutSession: false, run: (app, sid) => showUsage(sid) },
  reasoning: { withoutSession: false, run: (app, sid, arg) => app.reasoning.choose(sid, arg) },
  // The agent's standing goal; `pause`, `status` and `clear` also while a goal turn streams.
  goal: {
    withoutSession: false,
    whileStreaming: true,
    async run(app, sid, arg) {
      const data = await postJSON("/api/session/goal", { session_id: sid, args: arg });
      toast(data.message);
      if (!app.chat.streaming) await app.chat.catchUp();
      return true;
    },
  },
  "reload-mcp": {
    withoutSession: true,
    async run() {
      await postJSON("/api/mcp/reload", {});
      toast("Reconnecting the MCP servers…");
      return true;
    },
  },
  "reload-skills": {
    withoutSession: true,
    async run() {
      const data = await postJSON("/api/skills/reload", {});
      await loadAgentCommands();
      toast(`Skills scanned again: ${data.total ?? 0} skill${data.total === 1 ? "" : "s"}.`);
      return true;
    },
  },
};

// A skill's command sends the skill, loaded by the agent, with what follows the command as the instruction.
function skillCommand(row) {
  return {
    name: row.name,
    args: row.args,
    help: row.help,
    kind: "skill",
    withoutSession: true,
    async run(app, sid, arg) {
      const data = await postJSON("/api/skills/invoke", { command: `/${row.name}`, instruction: arg });
      return app.send(data.message);
    },
  };
}

// Adds the agent's commands and skills from GET /api/commands after the page's own (which win a name clash).
export function addAgentCommands(rows) {
  COMMANDS.splice(OWN_COMMANDS);
  const taken = new Set(COMMANDS.map((c) => c.name));
  for (const row of rows || []) {
    if (!row || typeof row.name !== "string" || taken.has(row.name)) continue;
    if (row.kind === "skill") COMMANDS.push(skillCommand(row));
    else if (AGENT_RUNNERS[row.name]) COMMANDS.push({ ...AGENT_RUNNERS[row.name], name: row.name, args: row.args, help: row.help, kind: "agent" });
    else continue;
    taken.add(row.name);
  }
}

export async function loadAgentCommands() {
  const data = await getJSON("/api/commands");
  addAgentCommands(data.commands);
}

const OWN_COMMANDS = COMMANDS.length;

export function findCommand(name) {
  return COMMANDS.find((c) => c.name === name) || null;
}

// "/compress the plan" → {name: "compress", arg: "the plan"}; "/nosuch thing" → {name: "nosuch", arg:
// "thing", unknown: true}, so the composer can ask before sending it as text; null when the text is not a
// slash word at all ("/usr/bin/env is missing" is text).
export function parseSlash(text) {
  const match = /^\/([a-z][a-z0-9_-]*)(?:\s+([\s\S]*))?$/i.exec(String(text).trim());
  if (!match) return null;
  const name = match[1].toLowerCase();
  const arg = (match[2] || "").trim();
  if (!findCommand(name)) return { name, arg, unknown: true };
  return { name, arg };
}

export function completions(text) {
  const match = /^\/([a-z0-9_-]*)$/i.exec(text);
  if (!match) return [];
  const prefix = match[1].toLowerCase();
  return COMMANDS.filter((c) => c.name.startsWith(prefix));
}

// Why the command cannot run now (said in a toast), or null when it can.
export function refusal(command, { sessionId, streaming }) {
  if (!command) return "Unknown command.";
  if (!sessionId && !command.withoutSession) return "Open a session first.";
  if (streaming && !command.whileStreaming) return "Wait for the answer to finish, or stop it first.";
  return null;
}
