// A request's content, by kind, as its card and its page show it: asked
// for whole once, linked to its task and its plan, its reviews.

import { diffFiles, diffLines, fileList } from "./diff.js";
import { el, list, loading, requestLink } from "./dom.js";
import { overlapsBox } from "./overlaps.js";
import { KIND_NAMES, members, newer, requests, sandboxWords, schedule, tasks } from "./state.js";

// The state has each request's brief (no diff, plan body or tool
// arguments): a card or page that shows one asks for it whole, once per
// load of the state (a request the lead no longer has, or a lead that is
// gone, is not asked again and again), and is drawn again when it comes.
// Until then the request as it is.
export const asked = new Set();
export function whole(r) {
  if (!r || !r.brief || asked.has(r.request_id)) return r;
  asked.add(r.request_id);
  fetch("/api/request?request_id=" + encodeURIComponent(r.request_id))
    .then((res) => (res.ok ? res.json() : null))
    .then((full) => {
      const now = requests.get(r.request_id);
      if (full && (!now || now.brief || newer(now, full))) {
        requests.set(r.request_id, full);
        schedule();
      }
    })
    .catch(() => {});
  return r;
}

export function diff(request) {
  const old = whole(requests.get(request.payload && request.payload.supersedes));
  if (!old || !old.payload || !old.payload.plan) return null;
  const before = old.payload.plan, after = request.payload.plan;
  const box = el("div", { class: "diff", "data-testid": "diff" },
    el("strong", {}, "Changes from the rejected plan (",
      el("a", { href: "#/requests/" + old.request_id, text: "see it" }), ")"));
  if (old.feedback) box.append(el("p", { text: "It answers: " + old.feedback }));
  const parts = [
    diffLines("summary", [before.summary || ""], [after.summary || ""]),
    ...["steps", "files", "tests"].map((key) => diffLines(key, before[key] || [], after[key] || [])),
    old.brief || request.brief ? null
      : diffLines("body", (before.body || "").split("\n").filter((l) => l), (after.body || "").split("\n").filter((l) => l)),
  ];
  for (const part of parts) if (part) box.append(part);
  return box;
}

// The file a write_file permission would replace, as the lead reads it:
// asked once per request (a page is built again on every event, and its
// text is compared before it is drawn).
const filesNow = new Map();
function fileNow(id) {
  if (!filesNow.has(id)) {
    filesNow.set(id, fetch("/api/file?request_id=" + encodeURIComponent(id))
      .then((res) => (res.ok ? res.json() : null))
      .catch(() => null));
  }
  return filesNow.get(id);
}

// What a permission request's write would change: edit_file's old and new
// text, line by line; write_file's content against the file as it is now,
// where the lead can read it (a teammate it spawned), else the content.
function permissionChange(r) {
  if (r.brief) return loading("the change");
  const p = r.payload || {};
  let args = {};
  try { args = JSON.parse(p.args_json || "{}"); } catch (_) { return null; }
  if (p.tool === "edit_file" && typeof args.old === "string" && typeof args.new === "string") {
    return diffLines(`change to ${args.path || "?"}`, args.old.split("\n"), args.new.split("\n"));
  }
  if (p.tool === "write_file" && typeof args.content === "string") {
    const box = el("div", { "data-testid": "write-diff" }, el("div", { class: "meta", text: `writes ${args.path || "?"}` }));
    fileNow(r.request_id).then((file) => {
      const now = args.content.split("\n");
      if (file && file.exists) {
        box.replaceChildren(diffLines(`change to ${args.path} (against the file now)`, file.content.split("\n"), now, true) || el("p", { text: "no change to the file" }));
      } else {
        const unread = !file || file.readable === false;
        box.replaceChildren(diffLines(`${args.path} (${unread ? "the file now cannot be read here" : "a new file"})`, [], now, true));
      }
    }).catch(() => {});
    return box;
  }
  return null;
}

// Whom a request under owners rules still waits for, and its reviews: two
// parts (either may be null; the request page leaves out the reviews, which
// its timeline has).
function historyOf(request) {
  const owed = request.waits_for && request.waits_for.length
    ? el("div", { class: "meta", "data-testid": "waits-for", text: "Waits for its owners: " + request.waits_for.join(", ") })
    : null;
  if (!request.reviews || !request.reviews.length) return [owed, null];
  return [owed, el("div", { class: "meta", "data-testid": "reviews" }, el("span", { text: "Reviews: " }),
    list(request.reviews.map((s) => `${s.reviewer}: ${s.verdict}${s.words ? " — " + s.words : ""}`)))];
}

// One word per outcome, the same on every page: approved or rejected for
// plans, results and amendments (a result approved is landed), allowed or
// refused for permissions, agreed or refused for shutdowns; expired and
// pending as they are.
export function outcomeOf(r) {
  if (r.status === "approved") {
    return r.type === "permission" ? "allowed" : r.type === "shutdown" ? "agreed" : r.type === "result" ? "landed" : "approved";
  }
  if (r.status === "rejected") return ["permission", "shutdown"].includes(r.type) ? "refused" : "rejected";
  return r.status;
}

// What a request belongs to and what follows from it: its task, the plan a
// result or amendment is under, the results and revisions of a plan.
export function linksOf(r) {
  const p = r.payload || {};
  const out = [];
  const task = (p.plan && p.plan.task_id) || (p.result && p.result.task_id) || p.task_id;
  if (task) {
    const t = tasks.get(task);
    const href = "#/task/" + encodeURIComponent(task);
    // A plan named as its task (made from it) is not headed by the task again.
    if (t && r.type === "plan_approval" && ((p.plan || {}).summary || "").trim() === t.subject.trim()) {
      out.push(el("span", {}, "Made from ", el("a", { href, "data-testid": "task-link", text: "its task" })));
    } else {
      out.push(el("span", {}, "For task ", el("a", { href, "data-testid": "task-link", text: t ? t.subject : task })));
    }
  }
  if (p.plan_id) {
    const plan = requests.get(p.plan_id);
    out.push(el("span", {}, "under the plan ", el("a", { href: "#/requests/" + encodeURIComponent(p.plan_id), "data-testid": "plan-link",
      text: plan ? titleOf(plan) : p.plan_id })));
  }
  if (r.type === "plan_approval") {
    const after = [...requests.values()].filter((o) => (o.payload || {}).plan_id === r.request_id || (o.payload || {}).supersedes === r.request_id)
      .sort((a, b) => a.created_at_unix_ms - b.created_at_unix_ms);
    if (after.length) {
      out.push(el("span", { "data-testid": "followed-by" }, "followed by ", ...after.flatMap((o, i) => [i ? ", " : "",
        requestLink(o.request_id, `${(KIND_NAMES[o.type] || o.type).toLowerCase()}: ${titleOf(o)} (${outcomeOf(o)})`)])));
    }
  }
  if (!out.length) return null;
  return el("p", { class: "meta", "data-testid": "links" }, ...out.flatMap((part, i) => (i ? ["; ", part] : [part])));
}

// What an approved plan was granted, in full: its mode and every path it
// may write, a wrapped list.
function grantOf(r) {
  if (!r.grant) return null;
  const named = r.grant.write_paths || [];
  const paths = named.length ? named : ((r.payload || {}).plan || {}).files || [];
  return el("div", { class: "grant", "data-testid": "grant" },
    el("div", { text: `Granted: ${r.grant.mode} mode; it may write${named.length ? "" : " the plan's files"}:` }), list(paths));
}

// A plan's content: its overlaps now, what a revision changed (the rest
// folded), or the whole plan, and what was granted.
function planContent(r) {
  const plan = (r.payload && r.payload.plan) || {};
  const whole = [el("div", { text: "Steps:" }), list(plan.steps || []),
    el("div", { text: "Files:" }), fileList(plan.files || []),
    el("div", { text: "Tests:" }), list(plan.tests || [])];
  // A plan made from its task has the task's description as its step and
  // as its body: said once.
  const said = (plan.steps || []).map((step) => String(step).trim());
  if (plan.body && !said.includes(plan.body.trim())) whole.push(el("pre", { "data-testid": "plan-body", text: plan.body }));
  if (r.brief) whole.push(loading("the plan's body"));
  const changed = diff(r);
  const out = [overlapsBox(r)];
  if (changed) out.push(changed, el("details", { "data-testid": "whole-plan" }, el("summary", { text: "the whole plan" }), ...whole));
  else out.push(...whole);
  out.push(grantOf(r), ...historyOf(r));
  return out;
}

// A permission request's tool and path, as its call names them.
function permissionArgs(r) {
  const p = r.payload || {};
  if (r.brief) return { path: p.path || "", command: p.command || "" };
  try { return JSON.parse(p.args_json || "{}") || {}; } catch (_) { return {}; }
}

// What a permission's call serves: its sender's claimed task and the
// approved plan it works under (a permission names neither itself).
function servesOf(r) {
  const task = [...tasks.values()].find((t) => t.owner === r.sender && String(t.status || "").toLowerCase() === "claimed");
  const plan = [...requests.values()]
    .filter((o) => o.type === "plan_approval" && o.sender === r.sender && o.status === "approved" && o.created_at_unix_ms <= r.created_at_unix_ms)
    .sort((a, b) => a.created_at_unix_ms - b.created_at_unix_ms).pop();
  const parts = [];
  if (task) parts.push("for the task ", el("a", { href: "#/task/" + encodeURIComponent(task.task_id), text: task.subject }));
  if (plan) parts.push(parts.length ? ", " : "", "under the plan ", requestLink(plan.request_id, titleOf(plan)));
  return el("p", { class: "meta", "data-testid": "serves" }, `${r.sender} asks it `, ...(parts.length ? parts : ["with no claimed task or approved plan"]));
}

// A permission's content: the change as a diff, the call's full arguments
// behind a disclosure.
function permissionContent(r) {
  const p = r.payload || {};
  const out = [servesOf(r), permissionChange(r)];
  if (p.tool === "run_command") {
    const m = members.get(r.sender);
    const command = permissionArgs(r).command;
    out.unshift(
      el("pre", { class: "command", "data-testid": "command", text: command || "(no command given)" }),
      el("p", { class: "meta", "data-testid": "command-where",
        text: `in ${r.sender}'s workspace, as ${r.sender} works now: ${m ? m.mode + " mode" : "mode not known"}` }),
      el("p", { "data-testid": "command-sandbox", text: `It runs under: ${sandboxWords(m)}` }));
  }
  if (!r.brief) {
    let pretty = p.args_json || JSON.stringify(p);
    try { pretty = JSON.stringify(JSON.parse(p.args_json), null, 2); } catch (_) { /* shown as it came */ }
    out.push(el("details", { "data-testid": "arguments" }, el("summary", { text: `${p.tool || "the tool"}'s full arguments` }), el("pre", { text: pretty })));
  }
  return out;
}

// Whether a result stays inside its sender's grant: "inside alice's
// grant: 3 of 3 files", or the files outside it named.
function grantLine(r) {
  const p = r.payload || {};
  const files = ((p.result || {}).files || []).length;
  const outside = p.outside_grant || [];
  const of = `${files} file${files === 1 ? "" : "s"}`;
  if (!p.scope) {
    return el("p", { class: "meta", "data-testid": "grant-line", text: `no grant to hold it to: ${r.sender} had no approved plan for this task` });
  }
  if (!outside.length) {
    return el("p", { class: "inside", "data-testid": "grant-line", text: `inside ${r.sender}'s grant: ${files} of ${of}` });
  }
  return el("p", { class: "overlap", "data-testid": "grant-line",
    text: `outside ${r.sender}'s grant: ${outside.length} of ${of} (${outside.join(", ")})` });
}

function resultContent(r) {
  const p = r.payload || {};
  const result = p.result || {};
  const base = result.base || "";
  const against = el("code", { text: base.slice(0, 12) || "?" });
  if (base) against.title = base;
  const out = [el("p", { class: "meta" }, "against ", against), grantLine(r)];
  if (r.brief) {
    out.push(list((result.files || []).map((f) => f.binary ? `${f.path} (binary)` : `${f.path} +${f.added} −${f.removed}`)), loading("the diff"));
  } else {
    out.push(diffFiles(result.diff || ""));
  }
  if (result.test_output) out.push(el("div", { text: "Its test output:" }), el("pre", { text: result.test_output }));
  out.push(...historyOf(r));
  return out;
}

function amendmentContent(r) {
  const p = r.payload || {};
  return [el("p", { text: p.why || "" }), overlapsBox(r),
    el("div", { text: "The grant now:" }), list(p.holds || []),
    el("div", { text: "Added:" }), list((p.files || []).map((f) => "+ " + f).concat((p.steps || []).map((s) => "+ step: " + s))),
    ...historyOf(r)];
}

// A request's content and its decision form, by kind.
export function contentOf(r) {
  return r.type === "plan_approval" ? planContent(r) : r.type === "permission" ? permissionContent(r)
    : r.type === "result" ? resultContent(r) : r.type === "amendment" ? amendmentContent(r)
    : [el("p", { text: (r.payload || {}).reason || "" })];
}

// What a permission's call does to what: "run `make`", "write src/a.rs".
function actionOf(r) {
  const p = r.payload || {};
  const args = permissionArgs(r);
  if (p.tool === "run_command") return args.command ? `run \`${args.command}\`` : "run a command";
  if ((p.tool === "write_file" || p.tool === "edit_file") && args.path) {
    return `${p.tool === "write_file" ? "write" : "edit"} ${args.path}`;
  }
  return `run ${p.tool || "a tool"}${args.path ? " on " + args.path : ""}`;
}

// Who asked a shutdown, as the lead recorded them ("operator (console)",
// "operator alice"; "the lead" when it stops, or for a request from a lead
// that did not record it).
export function askedBy(r) {
  const by = (r.payload && r.payload.asked_by) || "lead";
  return by === "lead" ? "the lead" : by;
}

export function cardTitle(r) {
  const p = r.payload || {};
  if (r.type === "permission") return `${r.sender} asks to ${actionOf(r)}`;
  if (r.type === "amendment") return `${r.sender} asks to add ${(p.files || []).join(", ")}`;
  return titleOf(r);
}

// A permission request's path, where its call names one: " (src/a.rs)".
function permissionPath(r) {
  if (r.type !== "permission") return "";
  if (r.brief) return (r.payload || {}).path ? ` (${r.payload.path})` : "";
  try {
    const path = JSON.parse((r.payload || {}).args_json || "{}").path;
    return path ? ` (${path})` : "";
  } catch (_) { return ""; }
}

export function titleOf(r) {
  const p = r.payload || {};
  if (r.type === "plan_approval") return (p.plan || {}).summary || "(no summary)";
  if (r.type === "result") return (p.result || {}).summary || "(no summary)";
  if (r.type === "amendment") return `add ${(p.files || []).join(", ")}`;
  if (r.type === "permission") return actionOf(r);
  if (r.type === "shutdown") return `shut down ${r.target}`;
  return r.type;
}
