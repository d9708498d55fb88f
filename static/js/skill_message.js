// A message a skill's slash command sent: the agent's scaffolding ("[IMPORTANT: The user has invoked the
// "<name>" skill…", the skill's text, then the person's instruction) is what the model reads; the page
// shows the skill's name and the instruction, with the full text one click away.

const PREFIX = '[IMPORTANT: The user has invoked the "';
const INSTRUCTION = "The user has provided the following instruction alongside the skill invocation: ";
const RUNTIME_NOTE = "\n\n[Runtime note:";

// {skill, instruction} for a skill invocation (instruction "" when there was none), else null.
export function skillInvocation(text) {
  if (typeof text !== "string" || !text.startsWith(PREFIX)) return null;
  const end = text.indexOf('"', PREFIX.length);
  if (end < 0) return null;
  const skill = text.slice(PREFIX.length, end);
  const at = text.lastIndexOf(INSTRUCTION);
  if (at < 0) return { skill, instruction: "" };
  let instruction = text.slice(at + INSTRUCTION.length);
  const note = instruction.indexOf(RUNTIME_NOTE);
  if (note >= 0) instruction = instruction.slice(0, note);
  return { skill, instruction: instruction.trim() };
}
