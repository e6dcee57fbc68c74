// The team: the queue page's table (a row a member, kept in place), the
// team's page (#/team) and a member's page (#/members/NAME); usage and
// shutting down.

import { titleOf } from "./content.js";
import { count, el, list, post } from "./dom.js";
import { filter } from "./events.js";
import { KIND_NAMES, decodingWords, members, requests, sandboxWords, tasks, usage, usageBase, usageSum } from "./state.js";

// How the last shutdown request to `name` ended.
function shutdownOutcome(name) {
  const asked = [...requests.values()]
    .filter((r) => r.type === "shutdown" && r.target === name)
    .sort((a, b) => b.created_at_unix_ms - a.created_at_unix_ms)[0];
  if (!asked) return "";
  switch (asked.status) {
    case "pending": return "asked; waiting";
    case "approved": return "agreed" + (asked.feedback ? ": " + asked.feedback : "");
    case "rejected": return "refused: " + asked.feedback;
    default: return "expired";
  }
}

function renderUsage() {
  const others = [...usage.entries()].filter(([name]) => !members.has(name))
    .map(([name, u]) => `${name}: ${count(u.tokens)} tokens in ${count(u.calls)} calls`);
  const total = usageBase + usageSum();
  const said = document.getElementById("team-usage");
  said.textContent = `Team total: ${count(total)} tokens` + (others.length ? "; " + others.join("; ") : "");
  // Where no model is used there are no tokens to count.
  said.hidden = !modelsUsed();
}

// Asking `name` to shut down: a menu of its own on each row (a reason
// and the button, folded until opened), so that a row is one line wide.
function shutdownMenu(name, testids, outcome) {
  const reason = el("input", { type: "text", "aria-label": `reason to shut ${name} down`, placeholder: "reason (optional)", "data-testid": testids.reason });
  return el("details", { class: "menu", "data-testid": testids.menu },
    el("summary", { text: "Shut down…", "aria-label": `shut ${name} down` }),
    el("div", { class: "menu-body" }, reason,
      el("button", { "data-testid": testids.button, text: `Shut ${name} down`, onclick: () =>
        post("/api/shutdown", { name, reason: reason.value }).catch((e) => { outcome.textContent = e.message; }) })));
}

// A member's row: made once, then its cells' text updated in place, so that
// a reason being typed keeps its text and its focus through every redraw.
function memberRow(m) {
  const status = el("span", { class: "meta", "data-testid": "shutdown-outcome" });
  const shut = el("td", { "data-testid": "shut", "data-label": "Shut down" },
    shutdownMenu(m.name, { reason: "reason", button: "shutdown", menu: "shut-menu" }, status), status);
  // Each cell says what it is: where the team is narrow, a row is a card.
  const cell = (testid, label) => el("td", { "data-testid": testid, "data-label": label });
  const name = el("td", { "data-label": "Name" }, el("a", { href: "#/members/" + encodeURIComponent(m.name), text: m.name }));
  return el("tr", { "data-member": m.name },
    name, cell("role", "Role"), cell("status", "Status"),
    cell("mode", "Mode"), cell("tokens", "Tokens"), cell("budget", "Budget"), cell("holds", "Holds"), shut);
}

// Whether any member is driven by a model (it said how it decodes, or it
// used tokens): only then are tokens and budget shown.
function modelsUsed() {
  return [...members.values()].some((m) => m.decoding) || usageBase > 0
    || [...usage.values()].some((u) => u.tokens || u.calls || u.budget);
}

function setText(row, testid, text) {
  const cell = row.querySelector(`[data-testid=${testid}]`);
  if (cell && cell.textContent !== text) cell.textContent = text;
}

// A member's status in an operator's words: one the lead lists as working
// or idle but whose plan or permission waits for a decision is waiting
// for the operator, not working.
const STATUS_WORDS = {
  working: "working", idle: "idle", disconnected: "disconnected (it may come back)",
  shutting_down: "asked to shut down", terminated: "terminated",
};
const WAITING_WORDS = [
  ["permission", "waiting for a permission"],
  ["plan_approval", "waiting for review of its plan"],
  ["amendment", "waiting for review of its amendment"],
  ["result", "waiting for review of its result"],
];
function statusWords(m, waiting) {
  if (m.status === "working" || m.status === "idle") {
    const kinds = waiting.get(m.name);
    for (const [kind, words] of WAITING_WORDS) {
      if (kinds && kinds.has(kind)) return words;
    }
  }
  return STATUS_WORDS[m.status] || m.status;
}

// The kinds of request each member waits on a decision of, by name.
function waitingBySender() {
  const waiting = new Map();
  for (const r of requests.values()) {
    if (r.status !== "pending") continue;
    if (!waiting.has(r.sender)) waiting.set(r.sender, new Set());
    waiting.get(r.sender).add(r.type);
  }
  return waiting;
}

export function renderTeam() {
  const body = document.querySelector("#team tbody");
  const waiting = waitingBySender();
  const rows = new Map([...body.children].map((row) => [row.dataset.member, row]));
  let previous = null;
  for (const m of members.values()) {
    const row = rows.get(m.name) || memberRow(m);
    rows.delete(m.name);
    const used = usage.get(m.name) || { tokens: 0 };
    setText(row, "role", m.role);
    setText(row, "status", statusWords(m, waiting));
    setText(row, "mode", m.mode);
    setText(row, "tokens", count(used.tokens));
    setText(row, "budget", used.budget ? count(used.budget) : "-");
    setText(row, "holds", (m.holds || []).join(", "));
    setText(row, "shutdown-outcome", shutdownOutcome(m.name));
    // A terminated member cannot be asked: only how it ended stays.
    const menu = row.querySelector("[data-testid=shut-menu]");
    if (menu) menu.hidden = m.status === "terminated";
    row.classList.toggle("ended", m.status === "terminated");
    if (previous ? previous.nextSibling !== row : body.firstChild !== row) {
      if (previous) previous.after(row); else body.prepend(row);
    }
    previous = row;
  }
  for (const gone of rows.values()) gone.remove();
  // Where the panel is narrow its ended members are not listed (CSS): said
  // in a line that links the team page, which folds them.
  const ended = [...members.values()].filter((m) => m.status === "terminated").map((m) => m.name);
  const note = document.getElementById("team-ended-note");
  note.hidden = !ended.length;
  if (ended.length) {
    note.replaceChildren(`${ended.length} ended (${ended.join(", ")}): `, el("a", { href: "#/team", text: "on the team page" }));
  }
  document.getElementById("team").classList.toggle("no-model", !modelsUsed());
  renderUsage();
  const names = [...members.keys()];
  const current = filter.value;
  filter.replaceChildren(el("option", { value: "", text: "everyone" }), ...names.map((n) => el("option", { value: n, text: n })));
  filter.value = current;
}

export function memberPage(name) {
  const m = members.get(name);
  if (!m) return [el("h2", { text: "No such member" })];
  const mine = [...requests.values()].filter((r) => r.sender === name || r.target === name)
    .sort((a, b) => b.created_at_unix_ms - a.created_at_unix_ms);
  const own = [...tasks.values()].filter((t) => t.owner === name)
    .map((t) => ({ ...t, status: String(t.status || "").toLowerCase() }));
  return [el("h2", { text: name }),
    el("p", {}, el("a", { href: "#/events/" + encodeURIComponent(name), "data-testid": "member-events", text: `${name}'s events` })),
    el("p", { "data-testid": "member-status", text: `${statusWords(m, waitingBySender())}, mode ${m.mode}, role ${m.role}` }),
    el("p", { "data-testid": "member-sandbox", text: `Commands run under: ${sandboxWords(m)}` + (m.sandbox && m.sandbox.detail ? ` (${m.sandbox.detail})` : "") }),
    el("p", { "data-testid": "member-model", text: `Model: ${decodingWords(m)}` }),
    el("div", { text: "Holds now:" }), list(m.holds || []),
    el("div", { text: "Tasks:" }), list(own.map((t) => `${t.subject} (${t.status})`)),
    el("div", { text: "Requests:" }),
    el("ul", {}, ...mine.map((r) => el("li", {}, el("a", { href: "#/requests/" + r.request_id, text: `${KIND_NAMES[r.type] || r.type}: ${titleOf(r)}` }), ` — ${r.status}`)))];
}

// Asking a member to shut down, with a reason; how the last ask ended.
function shutdownControl(m) {
  const outcome = el("span", { class: "meta", "data-testid": "team-shutdown-outcome", text: shutdownOutcome(m.name) });
  if (m.status === "terminated") return outcome;
  return el("div", {}, shutdownMenu(m.name, { reason: "team-reason", button: "team-shutdown", menu: "team-shut-menu" }, outcome), outcome);
}

// What a member's row links to: its claimed task, and the request of its
// that waits for a decision.
function taskCell(m) {
  const task = [...tasks.values()].find((t) => t.owner === m.name && String(t.status || "").toLowerCase() === "claimed");
  const waits = [...requests.values()].filter((r) => r.sender === m.name && r.status === "pending")
    .sort((a, b) => a.created_at_unix_ms - b.created_at_unix_ms)[0];
  const parts = [];
  if (task) parts.push(el("a", { href: "#/task/" + encodeURIComponent(task.task_id), "data-testid": "team-task", text: task.subject }));
  if (waits) {
    parts.push(el("a", { href: "#/requests/" + encodeURIComponent(waits.request_id), "data-testid": "team-request",
      text: `${(KIND_NAMES[waits.type] || waits.type).toLowerCase()} waiting` }));
  }
  if (!parts.length) return el("td", { "data-label": "task", text: "-" });
  return el("td", { "data-label": "task" }, ...parts.flatMap((p, i) => (i ? [el("br", {}), p] : [p])));
}

// The team at a glance: each member's status in words, mode, what it holds,
// its task and what waits, and (where a model is used) its tokens against
// its budget; each row's shutdown a menu; ended members folded below.
export function teamPage() {
  const waiting = waitingBySender();
  const models = modelsUsed();
  const columns = ["member", "role", "status", "mode", "sandbox", "holds", "task", ...(models ? ["tokens", "budget"] : []), ""];
  const head = el("tr", {}, ...columns.map((h) => el("th", { text: h })));
  const row = (m) => {
    const used = usage.get(m.name) || { tokens: 0 };
    // Each cell names its column, for a phone, where a row is a card.
    return el("tr", { "data-testid": "team-member", "data-member": m.name },
      el("td", { "data-label": "member" }, el("a", { href: "#/members/" + encodeURIComponent(m.name), text: m.name })),
      el("td", { "data-label": "role", text: m.role }),
      el("td", { "data-label": "status", "data-testid": "team-status", text: statusWords(m, waiting) }),
      el("td", { "data-label": "mode", text: m.mode }),
      el("td", { "data-label": "sandbox", "data-testid": "team-sandbox", text: m.sandbox ? m.sandbox.kind : "-" }),
      el("td", { "data-label": "holds" }, list(m.holds || [])),
      taskCell(m),
      models ? el("td", { "data-label": "tokens", text: count(used.tokens) }) : null,
      models ? el("td", { "data-label": "budget", text: used.budget ? count(used.budget) : "-" }) : null,
      el("td", { "data-label": "shut down" }, shutdownControl(m)));
  };
  const all = [...members.values()];
  const live = all.filter((m) => m.status !== "terminated"), ended = all.filter((m) => m.status === "terminated");
  const table = (ms, testid) => el("div", { class: "wide" }, el("table", { class: "team", "data-testid": testid }, el("thead", {}, head.cloneNode(true)), el("tbody", {}, ...ms.map(row))));
  const out = [el("h2", { text: "Team" }), table(live, "team-table")];
  if (ended.length) {
    out.push(el("details", { "data-testid": "team-ended" }, el("summary", { text: `ended (${ended.length})` }), table(ended, "team-ended-table")));
  }
  return out;
}
