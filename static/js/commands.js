// The slash commands, one table: name, argument hint, help and handler. The composer completes and parses
// from it, the shortcuts dialog lists it, and the app runs a command's handler; adding a command is one
// entry here.

import { api } from "./api.js";
import { toast } from "./toast.js";

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

export function findCommand(name) {
  return COMMANDS.find((c) => c.name === name) || null;
}

// "/compress the plan" → {name: "compress", arg: "the plan"}; null when the text is not a known command.
export function parseSlash(text) {
  const match = /^\/([a-z]+)(?:\s+([\s\S]*))?$/i.exec(String(text).trim());
  if (!match) return null;
  const name = match[1].toLowerCase();
  if (!findCommand(name)) return null;
  return { name, arg: (match[2] || "").trim() };
}

export function completions(text) {
  const match = /^\/([a-z]*)$/i.exec(text);
  if (!match) return [];
  const prefix = match[1].toLowerCase();
  return COMMANDS.filter((c) => c.name.startsWith(prefix));
}

// Why the command cannot run now (said in a toast), or null when it can.
export function refusal(command, { sessionId, streaming }) {
  if (!command) return "Unknown command.";
  if (!sessionId && !command.withoutSession) return "Open a session first.";
  if (streaming) return "Wait for the answer to finish, or stop it first.";
  return null;
}
