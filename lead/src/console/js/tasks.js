// The task list (#/tasks/STATUS) and a task's page (#/task/ID).

import { outcomeOf, titleOf } from "./content.js";
import { el, list, requestLink, shortCommits, whenText } from "./dom.js";
import { KIND_NAMES, requests, tasks } from "./state.js";

// The landed result's link: its words with the commit id short, whole on
// hover.
function landedLink(landed) {
  const said = landed.feedback || titleOf(landed);
  const link = requestLink(landed.request_id, shortCommits(said));
  link.title = said;
  return link;
}

export const TASK_TABS = ["all", "pending", "blocked", "claimed", "completed"];

// A task's status as the list says it: blocked while a task it waits for
// is not completed.
function taskStatus(t) {
  const status = String(t.status || "").toLowerCase();
  if (status !== "pending") return status;
  const open = (t.blocked_by || []).filter((b) => String((tasks.get(b) || {}).status || "").toLowerCase() !== "completed");
  return open.length ? "blocked" : "pending";
}

// What a task waits for, in review terms: the tasks that block it, a
// decision on a request under it, a claimant, or nothing.
function taskWaits(t) {
  const status = taskStatus(t);
  if (status === "completed") return "nothing: done";
  if (status === "withdrawn") return "nothing: withdrawn";
  if (status === "blocked") {
    return "blocked by " + (t.blocked_by || []).filter((b) => String((tasks.get(b) || {}).status || "").toLowerCase() !== "completed")
      .map((b) => (tasks.get(b) || {}).subject || b).join(", ");
  }
  if (status === "pending") return "someone to claim it";
  const under = requestsOfTask(t.task_id).filter((r) => r.status === "pending");
  const words = { plan_approval: "review of its plan", result: "review of its result", amendment: "review of its amendment" };
  for (const kind of ["result", "amendment", "plan_approval"]) {
    if (under.some((r) => r.type === kind)) return words[kind];
  }
  const owner = t.owner;
  if (owner && [...requests.values()].some((r) => r.status === "pending" && r.type === "permission" && r.sender === owner)) {
    return "a permission for " + owner;
  }
  return owner ? `${owner}, working on it` : "its claimant";
}

// What a task's page says it waits for, once: "waits for review of its
// result", "blocked by" its open blockers (linked), or that it is done.
function waitsLine(t) {
  const status = taskStatus(t);
  if (status === "completed") return ["done"];
  if (status === "withdrawn") return ["withdrawn"];
  if (status === "blocked") {
    const open = (t.blocked_by || []).filter((b) => String((tasks.get(b) || {}).status || "").toLowerCase() !== "completed");
    return ["blocked by ", ...open.flatMap((b, i) => [i ? ", " : "", el("a", { href: "#/task/" + encodeURIComponent(b), text: (tasks.get(b) || {}).subject || b })])];
  }
  return ["waits for " + taskWaits(t)];
}

export function tasksPage(tab) {
  const all = [...tasks.values()].sort((a, b) => a.created_at_unix_ms - b.created_at_unix_ms);
  const count = (s) => all.filter((t) => s === "all" || taskStatus(t) === s).length;
  const tabs = el("div", { class: "tabs", role: "tablist" }, ...TASK_TABS.map((s) =>
    el("a", { href: "#/tasks/" + s, role: "tab", "data-testid": "tab-" + s, "aria-current": s === tab ? "page" : "false", text: `${s} (${count(s)})` })));
  const shown = all.filter((t) => tab === "all" || taskStatus(t) === tab);
  const rows = shown.map((t) => el("tr", { "data-testid": "task", "data-task": t.task_id },
    el("td", {}, el("a", { href: "#/task/" + encodeURIComponent(t.task_id), text: t.subject })),
    el("td", { "data-testid": "task-state", text: taskStatus(t) }),
    el("td", {}, t.owner ? el("a", { href: "#/members/" + encodeURIComponent(t.owner), "data-testid": "task-owner", text: t.owner }) : "-"),
    el("td", { text: t.review || "plan" }),
    el("td", { "data-testid": "task-waits", text: taskWaits(t) }),
    el("td", { text: t.summary || "" })));
  return [el("h2", { text: "Tasks" }), tabs,
    el("table", { class: "tasks" }, el("thead", {}, el("tr", {}, ...["Subject", "Status", "Owner", "Review", "Waits for", "Summary"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)),
    shown.length ? null : el("p", { class: "meta", text: "none" })].filter(Boolean);
}

// The requests made under a task: plans for it, its results, amendments of
// its plans.
function requestsOfTask(id) {
  return [...requests.values()].filter((r) => {
    // A brief keeps the task's id: nothing is fetched for this.
    const p = r.payload || {};
    return ((p.plan && p.plan.task_id) || (p.result && p.result.task_id) || p.task_id) === id;
  }).sort((a, b) => a.created_at_unix_ms - b.created_at_unix_ms);
}

// One task: what it asks, its files, what blocks it, who has it, when, and
// every request under it.
export function taskPage(id) {
  const t = tasks.get(id);
  if (!t) return [el("h2", { text: "No such task" })];
  const status = taskStatus(t);
  // The tasks it waited for, once they are done (while one is not, the
  // status line says "blocked by" it).
  const blockers = status === "blocked" ? [] : (t.blocked_by || []).map((b) => el("a", { href: "#/task/" + encodeURIComponent(b), text: (tasks.get(b) || {}).subject || b }));
  const under = requestsOfTask(id);
  const landed = under.filter((r) => r.type === "result" && r.status === "approved").pop();
  return [el("h2", { text: "Task: " + t.subject }),
    el("p", { "data-testid": "task-status" }, `${status}${t.owner ? " by " + t.owner : ""}; review: ${t.review || "plan"}; `, ...waitsLine(t)),
    t.from ? el("p", { "data-testid": "task-from", text: `handed in by ${t.from}${t.context_id ? " (context " + t.context_id + ")" : ""}` }) : null,
    // "landed on the team branch as …" says the word itself.
    landed ? el("p", { "data-testid": "task-landed" }, /^landed\b/i.test(landed.feedback || "") ? "" : "Landed: ", landedLink(landed)) : null,
    t.description ? el("p", { text: t.description }) : null,
    el("div", { text: "Files:" }), list(t.files || []),
    blockers.length ? el("p", { "data-testid": "task-after" }, "After: ", ...blockers.flatMap((b, i) => i ? [", ", b] : [b])) : null,
    el("p", { class: "meta", text: `created ${whenText(t.created_at_unix_ms)}; last changed ${whenText(t.updated_at_unix_ms || t.created_at_unix_ms)}` }),
    t.summary ? el("p", { text: "Summary: " + t.summary }) : null,
    el("div", { text: "Requests:" }),
    under.length ? el("ul", { "data-testid": "task-requests" }, ...under.map((r) => el("li", {}, el("a", { href: "#/requests/" + r.request_id, text: `${KIND_NAMES[r.type] || r.type}: ${titleOf(r)}` }), ` — ${r.sender}, ${outcomeOf(r)}`)))
      : el("p", { class: "meta", text: "none" })].filter(Boolean);
}
