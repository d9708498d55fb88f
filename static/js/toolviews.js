// Human views of the common tools' calls: a terminal command and its output as a console, a file edit
// as a diff, a todo list as a checklist, a clarify question with its choices and the answer given, a change
// of the agent's memory as a note saying what it changed. The raw JSON stays one click away. Every card's
// collapsed line says what the call was about (`toolBrief`).

import { diffKind } from "./diff_view.js";
import { el } from "./dom.js";

export const HUMAN_TOOLS = new Set(["terminal", "patch", "write_file", "todo", "clarify", "memory"]);
const MAX_LINES = 400;
const BRIEF_CHARS = 120;
// The argument that says what a call is about, by how tools commonly name it; the first one present wins.
const BRIEF_KEYS = [
  "command", "path", "file_path", "filename", "query", "url", "pattern", "question", "goal", "prompt",
  "name", "action", "text", "content",
];
// What the clarify tool saves when nobody answered (api/clarify.py's no_answer_text).
const NO_ANSWER_PREFIX = "[The person did not answer";

export function parseMaybeJson(value) {
  if (typeof value !== "string") return value && typeof value === "object" ? value : null;
  try {
    const parsed = JSON.parse(value);
    return parsed && typeof parsed === "object" ? parsed : null;
  } catch {
    return null;
  }
}

function clip(lines) {
  if (lines.length <= MAX_LINES) return lines;
  return [...lines.slice(0, MAX_LINES), `… ${lines.length - MAX_LINES} more lines`];
}

function consoleView(args, result) {
  const box = el("div", "tool-view tool-console");
  if (typeof args?.command === "string") box.append(el("div", "console-command", `$ ${args.command}`));
  if (result) {
    const output = typeof result.output === "string" ? result.output : "";
    if (output) box.append(el("pre", "console-output", clip(output.split("\n")).join("\n")));
    if (typeof result.error === "string" && result.error) box.append(el("pre", "console-error", result.error));
    if (Number.isInteger(result.exit_code)) {
      box.append(el("div", `console-exit${result.exit_code === 0 ? "" : " failed"}`, `exit ${result.exit_code}`));
    }
  }
  return box;
}

function diffLines(args, result) {
  if (result && typeof result.diff === "string" && result.diff) return result.diff.split("\n");
  if (typeof args?.old_string === "string" || typeof args?.new_string === "string") {
    const before = (args.old_string || "").split("\n").map((line) => `-${line}`);
    const after = (args.new_string || "").split("\n").map((line) => `+${line}`);
    return [...before, ...after];
  }
  if (typeof args?.content === "string") return args.content.split("\n").map((line) => `+${line}`);
  if (typeof args?.patch === "string") return args.patch.split("\n");
  return [];
}

function diffView(args, result) {
  const box = el("div", "tool-view tool-diff");
  if (typeof args?.path === "string") box.append(el("div", "diff-path", args.path));
  const pre = el("pre", "diff-body");
  for (const line of clip(diffLines(args, result))) {
    pre.append(el("span", `diff-line diff-${diffKind(line)}`, `${line}\n`));
  }
  box.append(pre);
  return box;
}

const TODO_MARKS = { completed: "☑", in_progress: "◐", cancelled: "☒", pending: "☐" };

function todoView(args, result) {
  const todos = (result && Array.isArray(result.todos) && result.todos) || (Array.isArray(args?.todos) ? args.todos : []);
  const list = el("ul", "tool-view tool-todo");
  for (const item of todos) {
    if (!item || typeof item !== "object") continue;
    const status = TODO_MARKS[item.status] ? item.status : "pending";
    const row = el("li", `todo-item todo-${status}`);
    row.append(el("span", "todo-mark", TODO_MARKS[status]), el("span", "todo-text", String(item.content ?? "")));
    row.title = status.replace("_", " ");
    list.append(row);
  }
  return list;
}

const MEMORY_FILES = { memory: "MEMORY.md", user: "USER.md" };
const MEMORY_ACTIONS = { add: "added to", replace: "replaced in", remove: "removed from" };

// What a call of the agent's memory tool changed, in words: which file, what text; or that it failed.
export function memoryNote(args, result) {
  const file = MEMORY_FILES[args?.target] || MEMORY_FILES.memory;
  const action = MEMORY_ACTIONS[args?.action] || "changed in";
  if (!result) return { kind: "running", text: `Changing ${file}…` };
  if (result.success === false) return { kind: "failed", text: `Memory not changed: ${result.error || "the tool refused"}` };
  return { kind: "changed", text: `Memory changed: ${action} ${file}` };
}

function memoryView(args, result) {
  const note = memoryNote(args, result);
  const box = el("div", `tool-view tool-memory tool-memory-${note.kind}`);
  box.append(el("div", "memory-note", note.text));
  const detail = args?.action === "remove" ? args?.old_text : args?.content;
  if (typeof detail === "string" && detail) box.append(el("blockquote", "memory-entry", detail));
  return box;
}

function oneLine(text) {
  const line = String(text).replace(/\s+/g, " ").trim();
  return line.length > BRIEF_CHARS ? `${line.slice(0, BRIEF_CHARS - 1)}…` : line;
}

// One line saying what a call is about (its command, file, query…), for the collapsed card; "" when its
// arguments say nothing short.
export function toolBrief(name, rawArgs) {
  const args = parseMaybeJson(rawArgs);
  if (!args || Array.isArray(args)) return "";
  for (const key of BRIEF_KEYS) {
    const value = args[key];
    if ((typeof value === "string" && value.trim()) || typeof value === "number") return oneLine(value);
  }
  if (name === "todo" && Array.isArray(args.todos)) return `${args.todos.length} item${args.todos.length === 1 ? "" : "s"}`;
  const first = Object.values(args).find((value) => typeof value === "string" && value.trim());
  return first ? oneLine(first) : "";
}

// A clarify exchange as the person lived it: the question, the choices offered (the one picked marked),
// and the answer given, from the call's arguments and the tool's result (saved with the transcript).
export function clarifyExchange(args, result) {
  const question = String(result?.question ?? args?.question ?? "");
  const offered = Array.isArray(result?.choices_offered) ? result.choices_offered : Array.isArray(args?.choices) ? args.choices : [];
  const choices = offered.map((choice) => String(choice));
  const response = typeof result?.user_response === "string" ? result.user_response : null;
  const unanswered = response !== null && response.startsWith(NO_ANSWER_PREFIX);
  return { question, choices, answer: unanswered ? null : response, unanswered, waiting: response === null };
}

function clarifyView(args, result) {
  const exchange = clarifyExchange(args, result);
  const box = el("div", "tool-view tool-clarify");
  box.append(el("p", "clarify-question", exchange.question));
  if (exchange.choices.length) {
    const list = el("ul", "clarify-choices");
    for (const choice of exchange.choices) {
      const picked = choice === exchange.answer;
      const item = el("li", `clarify-choice${picked ? " picked" : ""}`, picked ? `✓ ${choice}` : choice);
      list.append(item);
    }
    box.append(list);
  }
  if (exchange.answer !== null) box.append(el("p", "clarify-answer", `Answer: ${exchange.answer}`));
  else if (exchange.unanswered) box.append(el("p", "clarify-answer unanswered", "No answer was given."));
  return box;
}

// The human view of one call (null for tools without one); `result` may be missing while it runs.
export function humanView(name, rawArgs, rawResult) {
  if (!HUMAN_TOOLS.has(name)) return null;
  const args = parseMaybeJson(rawArgs) || {};
  const result = parseMaybeJson(rawResult);
  if (name === "terminal") return consoleView(args, result);
  if (name === "todo") return todoView(args, result);
  if (name === "memory") return memoryView(args, result);
  if (name === "clarify") return clarifyView(args, result);
  return diffView(args, result);
}
