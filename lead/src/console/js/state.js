// What the page knows of the team: the members, the requests, the tasks and
// what each model user used, as the state at load and the events since have
// said it.

export const members = new Map();   // name -> member
export const requests = new Map();  // request_id -> request
export const tasks = new Map();     // task_id -> task
// What each model user used, by name (members and others, like the lead's
// reviewer): { tokens, calls, budget }. `usageBase` is what the team's total
// holds beyond them (members the lead no longer lists).
export const usage = new Map();
export let usageBase = 0;
// The state at load sets it.
export function setUsageBase(n) {
  usageBase = n;
}

// How a member's commands run, in words: "landlock (reads, writes, ...)",
// "UNCONFINED (--sandbox none)", or that it did not say.
export function sandboxWords(m) {
  const s = m && m.sandbox;
  if (!s) return "not said (counts as unconfined)";
  if (s.kind === "none") return "UNCONFINED (--sandbox none)";
  if (s.kind === "unavailable") return "no sandbox works there: commands are not offered";
  return (s.confines || []).length ? `${s.kind} (${s.confines.join(", ")})` : s.kind;
}

// How a member's model's replies are held to one call, in words: "qwen on
// llama.cpp — replies held by a JSON schema (why)", or that no model said.
const CONSTRAIN_WORDS = {
  schema: "replies held by a JSON schema",
  "tool-choice": "replies held by the server's tool choice",
  off: "replies not held (tools offered, free to answer otherwise)",
};
export function decodingWords(m) {
  const d = m && m.decoding;
  if (!d) return "not said (no model drives it, or it did not say)";
  const how = CONSTRAIN_WORDS[d.constrain] || d.constrain;
  return `${d.model} on ${d.server} — ${how}` + (d.why ? ` (${d.why})` : "");
}

export const KIND_NAMES = { plan_approval: "Plan", permission: "Permission", shutdown: "Shutdown", result: "Result", amendment: "Amendment" };

// A request only moves forward: pending, then decided; its history only grows.
export function newer(old, now) {
  if (!old) return true;
  if (old.status !== "pending" && now.status === "pending") return false;
  return (now.reviews || []).length >= (old.reviews || []).length;
}

// The tokens a usage report counts: what went in and what came out.
export function tokensOf(u) {
  return u ? (u.prompt_tokens || 0) + (u.completion_tokens || 0) : 0;
}

// What the model users the page knows of used, together.
export function usageSum() {
  let sum = 0;
  for (const u of usage.values()) sum += u.tokens;
  return sum;
}

// Redrawing, asked for from anywhere: the router (router.js) says at load
// how it redraws; a module below it asks through here rather than importing
// it.
let redrawer = null;
export function onSchedule(fn) {
  redrawer = fn;
}
export function schedule() {
  if (redrawer) redrawer();
}
