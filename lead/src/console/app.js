// The mesh console: the state at load, then the lead's events as they come
// (server-sent events). Peer text only ever goes into textContent.
"use strict";

const members = new Map();   // name -> member
const requests = new Map();  // request_id -> request
const tasks = new Map();     // task_id -> task
// What each model user used, by name (members and others, like the lead's
// reviewer): { tokens, calls, budget }. `usageBase` is what the team's total
// holds beyond them (members the lead no longer lists).
const usage = new Map();
let usageBase = 0;
const MAX_EVENTS = 1000;
const filter = document.getElementById("event-filter");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.round(s / 60) + "m";
  return Math.round(s / 3600) + "h";
}

// How long ago `ms` was, kept current by refreshTimes (cards are kept while
// the operator types in them, so their text is not redrawn).
function since(ms) {
  return el("span", { "data-since": String(ms), "data-testid": "waiting", text: ago(ms) });
}

function refreshTimes() {
  for (const span of document.querySelectorAll("[data-since]")) {
    const text = ago(Number(span.dataset.since));
    if (span.textContent !== text) span.textContent = text;
  }
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function list(items) {
  if (!items.length) return el("p", { class: "meta", text: "none" });
  return el("ul", {}, ...items.map((i) => el("li", { text: i })));
}

// What a revision changed from the plan it supersedes.
// The lines of `was` and `now` in order, each kept, removed or added: a
// longest-common-subsequence diff (plans' lists and bodies are short), so a
// reworded step shows in its place, its old words then its new.
function lineDiff(was, now) {
  const n = was.length, m = now.length;
  const common = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      common[i][j] = was[i] === now[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && was[i] === now[j]) { out.push([" ", was[i]]); i++; j++; }
    else if (i < n && (j === m || common[i + 1][j] >= common[i][j + 1])) { out.push(["-", was[i]]); i++; }
    else { out.push(["+", now[j]]); j++; }
  }
  return out;
}

// A line diff as code is read: indentation kept, each line marked + or -
// (and coloured), none struck through.
function diffLines(label, was, now) {
  const lines = lineDiff(was, now);
  if (lines.every(([mark]) => mark === " ")) return null;
  const pre = el("pre", { class: "lines" });
  for (const [mark, text] of lines) {
    pre.append(el("span", { class: mark === "+" ? "added" : mark === "-" ? "removed" : "same", text: `${mark} ${text}\n` }));
  }
  return el("div", {}, el("div", { text: label + ":" }), pre);
}

// A list of files; a long one grouped by folder, each folder with its count
// (folded: a 32-file plan is a few lines until opened).
const GROUP_OVER = 8;
function fileList(files) {
  if (files.length <= GROUP_OVER) return list(files);
  const groups = new Map();
  for (const f of files) {
    const cut = f.lastIndexOf("/");
    const dir = cut >= 0 ? f.slice(0, cut + 1) : "";
    if (!groups.has(dir)) groups.set(dir, []);
    groups.get(dir).push(f.slice(dir.length));
  }
  return el("ul", { class: "groups", "data-testid": "file-groups" }, ...[...groups].map(([dir, names]) =>
    el("li", {}, el("details", {}, el("summary", { text: `${dir || "./"} (${names.length} file${names.length === 1 ? "" : "s"})` }), list(names)))));
}

// Whether `path` matches the glob `glob` (*, ** and ?, as the lead's holds
// are written).
function globMatch(glob, path) {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*" && glob[i + 1] === "*") { re += ".*"; i++; if (glob[i + 1] === "/") i++; }
    else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp("^" + re + "$").test(path);
}

// Who else holds any of `files` now: [{ member, files }], from the team's
// state as the page has it (so it is true the moment a hold is taken, and
// gone the moment it ends).
function liveOverlaps(sender, files) {
  const out = [];
  for (const m of members.values()) {
    if (m.name === sender || m.status === "terminated") continue;
    const holds = m.holds || [];
    const hit = files.filter((f) => holds.some((h) => h === f || globMatch(h, f) || globMatch(f, h)));
    if (hit.length) out.push({ member: m.name, files: hit });
  }
  return out;
}

// A request's files, whatever its kind.
function filesOf(r) {
  const p = r.payload || {};
  if (r.type === "plan_approval") return (p.plan || {}).files || [];
  if (r.type === "amendment") return p.files || [];
  if (r.type === "result") return ((p.result || {}).files || []).map((f) => f.path);
  return [];
}

// The overlaps of a waiting plan or amendment as they are now, and those it
// had when it was sent that have ended; kept current in place
// (fillOverlaps), so a card being typed in is not redrawn.
function overlapsBox(r) {
  const box = el("div", { "data-overlaps": r.request_id, "data-testid": "overlaps" });
  fillOverlaps(box);
  return box;
}
function fillOverlaps(box) {
  const r = requests.get(box.dataset.overlaps);
  if (!r) return;
  const now = r.status === "pending" ? liveOverlaps(r.sender, filesOf(r)) : [];
  const p = r.payload || {};
  const then = (p.overlaps || []).map((o) => ({ member: o.member, files: o.files || [] }))
    .concat((p.held_by_others || []).map((h) => {
      // "bob: src/a.rs, src/b.rs"
      const [member, files] = String(h).split(": ");
      return { member, files: files ? files.split(", ") : [] };
    }));
  const lines = now.map((o) => el("p", { class: "overlap", "data-testid": "overlap", text: `overlaps ${o.member}: ${o.files.join(", ")} (${o.member} holds ${o.files.length === 1 ? "it" : "them"} now)` }));
  if (r.status === "pending") {
    for (const o of then) {
      if (!now.some((n) => n.member === o.member)) {
        lines.push(el("p", { class: "meta", "data-testid": "overlap-ended", text: `the overlap with ${o.member}${o.files.length ? " on " + o.files.join(", ") : ""} has ended: ${o.member} no longer holds ${o.files.length === 1 ? "it" : "them"}` }));
      }
    }
  }
  const key = lines.map((l) => l.textContent).join("|");
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...lines);
}


// The state has each request's brief (no diff, plan body or tool
// arguments): a card or page that shows one asks for it whole, once per
// load of the state (a request the lead no longer has, or a lead that is
// gone, is not asked again and again), and is drawn again when it comes.
// Until then the request as it is.
const asked = new Set();
function whole(r) {
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

// Said where a brief's content is still on its way.
function loading(what) {
  return el("p", { class: "meta", "data-testid": "loading", text: `loading ${what}…` });
}

function diff(request) {
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
    fetch("/api/file?request_id=" + encodeURIComponent(r.request_id)).then((res) => res.ok ? res.json() : null).then((file) => {
      const now = args.content.split("\n");
      if (file && file.exists) {
        box.replaceChildren(diffLines(`change to ${args.path} (against the file now)`, file.content.split("\n"), now) || el("p", { text: "no change to the file" }));
      } else {
        const unread = !file || file.readable === false;
        box.replaceChildren(diffLines(`${args.path} (${unread ? "the file now cannot be read here" : "a new file"})`, [], now));
      }
    }).catch(() => {});
    return box;
  }
  return null;
}

function historyOf(request) {
  if (!request.reviews || !request.reviews.length) return null;
  return el("div", { class: "meta", "data-testid": "reviews" }, el("span", { text: "Reviews: " }),
    list(request.reviews.map((s) => `${s.reviewer}: ${s.verdict}${s.words ? " — " + s.words : ""}`)));
}

// A link to a request's page.
function requestLink(id, text) {
  return el("a", { href: "#/requests/" + encodeURIComponent(id), text: text || id });
}

// What a request belongs to and what follows from it: its task, the plan a
// result or amendment is under, the results and revisions of a plan.
function linksOf(r) {
  const p = r.payload || {};
  const out = [];
  const task = (p.plan && p.plan.task_id) || (p.result && p.result.task_id) || p.task_id;
  if (task) {
    const t = tasks.get(task);
    out.push(el("span", {}, "For task ", el("a", { href: "#/task/" + encodeURIComponent(task), "data-testid": "task-link", text: t ? t.subject : task })));
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
        requestLink(o.request_id, `${(KIND_NAMES[o.type] || o.type).toLowerCase()}: ${titleOf(o)} (${o.status})`)])));
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
  if (plan.body) whole.push(el("pre", { text: plan.body }));
  if (r.brief) whole.push(loading("the plan's body"));
  const changed = diff(r);
  const out = [overlapsBox(r)];
  if (changed) out.push(changed, el("details", { "data-testid": "whole-plan" }, el("summary", { text: "the whole plan" }), ...whole));
  else out.push(...whole);
  out.push(grantOf(r), historyOf(r));
  return out;
}

function planForm(r) {
  const plan = (r.payload && r.payload.plan) || {};
  const id = r.request_id;
  const mode = el("select", { id: "mode-" + id, "data-testid": "mode" },
    el("option", { value: "accept-edits", text: "accept-edits" }),
    el("option", { value: "default", text: "default" }),
    el("option", { value: "bypass", text: "bypass" }));
  // One glob a line, wrapped: an operator reads every glob it grants.
  const files = plan.files || [];
  const globs = el("textarea", { id: "globs-" + id, "data-testid": "globs", class: "globs", rows: String(Math.min(Math.max(files.length, 2), 12)) });
  globs.value = files.join("\n");
  // Offered on every plan: a hold may overlap it after it was sent (another
  // plan approved since), and the lead refuses the approval then.
  const overlapOk = el("input", { type: "checkbox", id: "ov-" + id, "data-testid": "allow-overlap" });
  const feedback = el("textarea", { rows: "2", id: "fb-" + id, "data-testid": "feedback" });
  const status = el("p", { class: "error", role: "alert" });
  const act = (path, body) => decided(post(path, body).catch((e) => {
    // The lead's words name the CLI's flag; the page has a box for it.
    throw new Error(e.message.includes("--allow-overlap")
      ? e.message.split("; approve with --allow-overlap")[0] + ". Tick \"allow the overlap\" to approve it anyway."
      : e.message);
  }), path === "/api/reject" ? "rejected" : "approved", status);
  return el("div", { class: "decide" },
    el("label", { for: "mode-" + id, text: "Grant mode" }), mode,
    el("p", { class: "meta", "data-testid": "modes", text: "accept-edits: edits inside the write globs run, commands ask; "
      + "default: every write and command asks; bypass: every tool runs, unasked." }),
    el("label", { for: "globs-" + id, text: "Write globs (one a line)" }), globs,
    el("div", {}, overlapOk, el("label", { for: "ov-" + id, text: " allow the overlap, should another teammate's hold cover these files" })),
    el("label", { for: "fb-" + id, text: "Feedback (required to reject)" }), feedback,
    el("button", { class: "approve", "data-testid": "approve", text: "Approve", onclick: () => act("/api/approve", {
      request_id: id, mode: mode.value, feedback: feedback.value, allow_overlap: overlapOk.checked,
      write_paths: globs.value.split(/[\n,]/).map((g) => g.trim()).filter((g) => g) }) }),
    el("button", { class: "reject", "data-testid": "reject", text: "Reject", onclick: () => {
      if (!feedback.value.trim()) { status.textContent = "Say why: the teammate revises against the feedback."; feedback.focus(); return; }
      act("/api/reject", { request_id: id, feedback: feedback.value });
    } }),
    status);
}

// A permission request's tool and path, as its call names them.
function permissionArgs(r) {
  const p = r.payload || {};
  if (r.brief) return { path: p.path || "" };
  try { return JSON.parse(p.args_json || "{}") || {}; } catch (_) { return {}; }
}

// A permission's content: the change as a diff, the call's full arguments
// behind a disclosure.
function permissionContent(r) {
  const p = r.payload || {};
  const out = [permissionChange(r)];
  if (!r.brief) {
    let pretty = p.args_json || JSON.stringify(p);
    try { pretty = JSON.stringify(JSON.parse(p.args_json), null, 2); } catch (_) { /* shown as it came */ }
    out.push(el("details", { "data-testid": "arguments" }, el("summary", { text: `${p.tool || "the tool"}'s full arguments` }), el("pre", { text: pretty })));
  }
  return out;
}

function permissionForm(r) {
  const id = r.request_id;
  const status = el("p", { class: "error", role: "alert" });
  const reason = el("input", { type: "text", id: "why-" + id, "data-testid": "deny-reason", placeholder: "why (said to the teammate)" });
  const act = (approve) => decided(post("/api/permission", { request_id: id, approve,
    feedback: approve ? "" : (reason.value.trim() || "denied in the console") }), approve ? "allowed" : "denied", status);
  return el("div", { class: "decide" },
    el("button", { class: "approve", "data-testid": "allow", text: "Allow", onclick: () => act(true) }),
    el("label", { for: "why-" + id, text: "Reason to deny" }), reason,
    el("button", { class: "reject", "data-testid": "deny", text: "Deny", onclick: () => act(false) }),
    status);
}

// A result's diff, file by file, each line marked added or removed.
function diffFiles(diffText) {
  const wrap = el("div", { class: "diff", "data-testid": "diff" });
  const files = diffText.split(/^(?=diff --git )/m).filter((f) => f.trim());
  for (const f of files) {
    const head = f.split("\n", 1)[0];
    const path = (head.match(/ b\/(.*)$/) || [null, head])[1];
    const pre = el("pre", {});
    for (const line of f.split("\n").slice(1)) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
      pre.append(el("span", { class: cls, text: line + "\n" }));
    }
    wrap.append(el("details", { open: "" }, el("summary", { text: path }), pre));
  }
  return wrap;
}

// A decision on a result or an amendment: approve, or reject with feedback.
function decideForm(r, kind, what) {
  const id = r.request_id;
  const feedback = el("textarea", { rows: "2", id: "fb-" + id, "data-testid": "feedback" });
  const status = el("p", { class: "error", role: "alert" });
  const act = (approve) => decided(post("/api/decide", { request_id: id, kind, approve, feedback: feedback.value }),
    approve ? "approved" : "rejected", status);
  return el("div", { class: "decide" },
    el("label", { for: "fb-" + id, text: "Feedback (required to reject)" }), feedback,
    el("button", { class: "approve", "data-testid": "approve", text: what, onclick: () => act(true) }),
    el("button", { class: "reject", "data-testid": "reject", text: "Reject", onclick: () => {
      if (!feedback.value.trim()) { status.textContent = "Say why: the teammate revises against the feedback."; feedback.focus(); return; }
      act(false);
    } }),
    status);
}

function resultContent(r) {
  const p = r.payload || {};
  const result = p.result || {};
  const out = [el("p", { class: "meta", text: `against ${(result.base || "").slice(0, 12) || "?"}` })];
  if ((p.outside_grant || []).length) {
    out.push(el("p", { class: "overlap", text: `outside the grant: ${p.outside_grant.join(", ")}` }));
  }
  out.push(el("div", { text: "Files:" }), list((result.files || []).map((f) => f.binary ? `${f.path} (binary)` : `${f.path} +${f.added} -${f.removed}`)));
  out.push(r.brief ? loading("the diff") : diffFiles(result.diff || ""));
  if (result.test_output) out.push(el("div", { text: "Its test output:" }), el("pre", { text: result.test_output }));
  out.push(historyOf(r));
  return out;
}

function amendmentContent(r) {
  const p = r.payload || {};
  return [el("p", { text: p.why || "" }), overlapsBox(r),
    el("div", { text: "The grant now:" }), list(p.holds || []),
    el("div", { text: "Added:" }), list((p.files || []).map((f) => "+ " + f).concat((p.steps || []).map((s) => "+ step: " + s))),
    historyOf(r)];
}

// A request's content and its decision form, by kind.
function contentOf(r) {
  return r.type === "plan_approval" ? planContent(r) : r.type === "permission" ? permissionContent(r)
    : r.type === "result" ? resultContent(r) : r.type === "amendment" ? amendmentContent(r)
    : [el("p", { text: (r.payload || {}).reason || "" })];
}
function formOf(r) {
  return r.type === "plan_approval" ? planForm(r) : r.type === "permission" ? permissionForm(r)
    : r.type === "result" ? decideForm(r, "result", "Approve and merge") : decideForm(r, "amendment", "Approve");
}

// Whether a request came after the operator's last look (see lookedAt).
function isNew(r) {
  return lookedAt > 0 && r.created_at_unix_ms > lookedAt;
}

// A queue card: one or two lines (what, who, kind, age, files, marks),
// then, when it is the open one, its content and decision form.
const CARD_TESTIDS = { plan_approval: "plan", permission: "permission", result: "result", amendment: "amendment" };
function card(r) {
  const id = r.request_id;
  const n = filesOf(r).length;
  const head = el("h3", { onclick: (e) => { if (!e.target.closest("a")) openCard(id, true); } },
    el("button", { class: "toggle", "data-testid": "toggle", "aria-expanded": "false", "aria-controls": "body-" + id, "aria-label": "open or close", text: "▸" }),
    " ", requestLink(id, cardTitle(r)));
  const line = el("div", { class: "meta line", "data-testid": "card-line" },
    el("span", { class: "new", "data-testid": "new" }),
    `${(KIND_NAMES[r.type] || r.type).toLowerCase()} from ${r.sender} · waiting `, since(r.created_at_unix_ms),
    n ? ` · ${n} file${n === 1 ? "" : "s"}` : "",
    el("span", { class: "overlap", "data-testid": "overlap-mark" }),
    el("span", { class: "budget", "data-testid": "budget-mark" }));
  const body = el("div", { class: "body", id: "body-" + id, "data-testid": "card-body" },
    linksOf(r), ...contentOf(r), formOf(r));
  const article = el("article", { class: "card", "data-request-id": id, "data-testid": CARD_TESTIDS[r.type] || r.type }, head, line, body);
  refreshCard(article);
  return article;
}

function cardTitle(r) {
  const p = r.payload || {};
  if (r.type === "permission") {
    const path = permissionArgs(r).path;
    return `${r.sender} asks to run ${p.tool || "a tool"}${path ? " on " + path : ""}`;
  }
  if (r.type === "amendment") return `${r.sender} asks to add ${(p.files || []).join(", ")}`;
  return titleOf(r);
}

// What changes on a card without its being redrawn: its overlaps now and
// its sender's budget.
function refreshCard(article) {
  const r = requests.get(article.dataset.requestId);
  if (!r) return;
  for (const box of article.querySelectorAll("[data-overlaps]")) fillOverlaps(box);
  const mark = article.querySelector("[data-testid=overlap-mark]");
  if (mark) {
    const now = ["plan_approval", "amendment"].includes(r.type) ? liveOverlaps(r.sender, filesOf(r)) : [];
    const text = now.length ? ` · overlaps ${now.map((o) => o.member).join(", ")}` : "";
    if (mark.textContent !== text) mark.textContent = text;
  }
  const fresh = article.querySelector("[data-testid=new]");
  if (fresh) {
    const text = isNew(r) ? "new" : "";
    if (fresh.textContent !== text) fresh.textContent = text;
    fresh.hidden = !text;
  }
  const budget = article.querySelector("[data-testid=budget-mark]");
  if (budget) {
    const used = usage.get(r.sender);
    const share = used && used.budget ? used.tokens / used.budget : 0;
    const text = share >= 0.8 ? ` · ${Math.round(share * 100)}% of its token budget used` : "";
    if (budget.textContent !== text) budget.textContent = text;
  }
}

// The one open card: the operator's choice, else the first.
let openId = null;
function queueCards() {
  return [...document.querySelectorAll("#queue .card")];
}
function shownOpen() {
  const cards = queueCards();
  if (openId === "") return "";
  if (openId !== null && cards.some((c) => c.dataset.requestId === openId)) return openId;
  return cards.length ? cards[0].dataset.requestId : "";
}
function openCard(id, toggle) {
  openId = toggle && shownOpen() === id ? "" : id;
  applyOpen();
}
function applyOpen() {
  const open = shownOpen();
  for (const c of queueCards()) {
    const on = c.dataset.requestId === open;
    const body = c.querySelector(".body");
    if (body.hidden === on) body.hidden = !on;
    c.classList.toggle("open", on);
    const toggle = c.querySelector(".toggle");
    toggle.setAttribute("aria-expanded", String(on));
    toggle.textContent = on ? "▾" : "▸";
  }
}
// After a decision: say so, and put the focus on what comes next in the
// queue (the card at the same place, once the decided one is gone).
let focusAfter = null; // { at, id }: the decided card's place and request
function decided(request, what, status) {
  // Where the card stands now: by the answer, the lead's event may have
  // taken it off the page already.
  const card = status.closest(".card");
  const at = card && card.parentNode ? [...card.parentNode.children].indexOf(card) : 0;
  const id = card ? card.dataset.requestId : "";
  return request.then(() => {
    focusAfter = { at: Math.max(0, at), id };
    document.getElementById("queue-status").textContent = what + ".";
    schedule();
  }).catch((e) => { status.textContent = e.message; });
}

function focusNext() {
  if (focusAfter === null) return;
  const queue = document.getElementById("queue");
  const cards = [...queue.querySelectorAll(".card")];
  // Until the lead's event takes the decided card off, it is what is there.
  if (cards.some((c) => c.dataset.requestId === focusAfter.id)) return;
  const card = cards[Math.min(focusAfter.at, cards.length - 1)];
  focusAfter = null;
  if (card) openCard(card.dataset.requestId);
  const target = card ? card.querySelector("h3") : document.getElementById("queue-title");
  target.setAttribute("tabindex", "-1");
  target.focus();
}

function renderQueue() {
  const queue = document.getElementById("queue");
  // A teammate waits on each permission request: they come first.
  const pending = [...requests.values()]
    .filter((r) => r.status === "pending" && r.type !== "shutdown")
    .sort((a, b) => (a.type === "permission" ? 0 : 1) - (b.type === "permission" ? 0 : 1)
      || a.created_at_unix_ms - b.created_at_unix_ms);
  document.getElementById("queue-count").textContent = `(${pending.length})`;
  // Keep what the operator is typing: only cards that changed are redrawn.
  const keep = new Set(pending.map((r) => r.request_id + ":" + (r.reviews || []).length + (r.brief ? ":brief" : "")));
  for (const card of [...queue.children]) if (!keep.has(card.dataset.key)) card.remove();
  const present = new Set([...queue.children].map((c) => c.dataset.key));
  let previous = null;
  for (const r of pending) {
    const key = r.request_id + ":" + (r.reviews || []).length + (whole(r).brief ? ":brief" : "");
    let shown = [...queue.children].find((c) => c.dataset.key === key);
    if (!present.has(key)) {
      shown = card(r);
      shown.dataset.key = key;
    }
    // Moved only when out of place: a moved node loses the focus.
    if (previous ? previous.nextSibling !== shown : queue.firstChild !== shown) {
      if (previous) previous.after(shown); else queue.prepend(shown);
    }
    previous = shown;
  }
  for (const shown of queueCards()) refreshCard(shown);
  applyOpen();
  // An all-day tab says from afar how much waits.
  document.title = (document.body.classList.contains("offline") ? "(lead gone) " : "")
    + (pending.length ? `(${pending.length}) mesh console` : "mesh console");
  if (!pending.length && !queue.querySelector(".empty")) queue.append(el("p", { class: "empty", text: "Nothing waits for you." }));
  if (pending.length) queue.querySelectorAll(".empty").forEach((e) => e.remove());
  focusNext();
}

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

function tokensOf(u) {
  return u ? (u.prompt_tokens || 0) + (u.completion_tokens || 0) : 0;
}

function usageSum() {
  let sum = 0;
  for (const u of usage.values()) sum += u.tokens;
  return sum;
}

function renderUsage() {
  const others = [...usage.entries()].filter(([name]) => !members.has(name))
    .map(([name, u]) => `${name}: ${count(u.tokens)} tokens in ${count(u.calls)} calls`);
  const total = usageBase + usageSum();
  document.getElementById("team-usage").textContent =
    `Team total: ${count(total)} tokens` + (others.length ? "; " + others.join("; ") : "");
}

// A member's row: made once, then its cells' text updated in place, so that
// a reason being typed keeps its text and its focus through every redraw.
function memberRow(m) {
  const reason = el("input", { type: "text", "aria-label": `reason to shut ${m.name} down`, placeholder: "reason", "data-testid": "reason" });
  const status = el("span", { class: "meta", "data-testid": "shutdown-outcome" });
  const shut = el("td", { "data-testid": "shut", "data-label": "Shut down" }, el("div", {}, reason,
    el("button", { "data-testid": "shutdown", text: "Shut down", onclick: () =>
      post("/api/shutdown", { name: m.name, reason: reason.value }).catch((e) => { status.textContent = e.message; }) }),
    status));
  // Each cell says what it is: where the team is narrow, a row is a card.
  const cell = (testid, label) => el("td", { "data-testid": testid, "data-label": label });
  return el("tr", { "data-member": m.name },
    el("td", { text: m.name, "data-label": "Name" }), cell("role", "Role"), cell("status", "Status"),
    cell("mode", "Mode"), cell("tokens", "Tokens"), cell("budget", "Budget"), cell("holds", "Holds"), shut);
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

function renderTeam() {
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
    for (const control of row.querySelectorAll("[data-testid=shut] input, [data-testid=shut] button")) {
      control.hidden = m.status === "terminated";
    }
    if (previous ? previous.nextSibling !== row : body.firstChild !== row) {
      if (previous) previous.after(row); else body.prepend(row);
    }
    previous = row;
  }
  for (const gone of rows.values()) gone.remove();
  renderUsage();
  const names = [...members.keys()];
  const current = filter.value;
  filter.replaceChildren(el("option", { value: "", text: "everyone" }), ...names.map((n) => el("option", { value: n, text: n })));
  filter.value = current;
}

// The decided requests, newest first, on their own page (#/decided/N),
// DECIDED_PAGE at a time; each said in words, linked to its page, its
// sender and its task.
const DECIDED_PAGE = 50;
function renderHistory() {
  const parts = route();
  if (parts[0] !== "decided") return;
  const all = [...requests.values()].filter((r) => r.status !== "pending")
    .sort((a, b) => (b.resolved_at_unix_ms || b.created_at_unix_ms) - (a.resolved_at_unix_ms || a.created_at_unix_ms));
  const pages = Math.max(1, Math.ceil(all.length / DECIDED_PAGE));
  const n = Math.min(Math.max(1, Number(parts[1]) || 1), pages);
  const shown = all.slice((n - 1) * DECIDED_PAGE, n * DECIDED_PAGE);
  const key = JSON.stringify([n, shown.map((r) => r.request_id + r.status + (r.reviews || []).length), members.size]);
  const box = document.getElementById("history");
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...shown.map((r) => {
    const item = el("li", { "data-testid": "decided" }, requestLink(r.request_id, `${KIND_NAMES[r.type] || r.type}: ${cardTitle(r)}`),
      " — ", el("span", { "data-testid": "decided-said", text: requestSentence(r, new Map()) }), " ",
      el("span", { class: "meta" }, "(", since(r.resolved_at_unix_ms || r.created_at_unix_ms), " ago)"));
    const links = linksOf(r);
    if (links) item.append(links);
    return item;
  }));
  document.getElementById("decided-count").textContent = all.length
    ? `${(n - 1) * DECIDED_PAGE + 1}–${(n - 1) * DECIDED_PAGE + shown.length} of ${all.length}` : "none yet";
  const newer = document.getElementById("decided-newer");
  const older = document.getElementById("decided-older");
  newer.hidden = n <= 1; newer.href = "#/decided/" + (n - 1);
  older.hidden = n >= pages; older.href = "#/decided/" + (n + 1);
}

// What the event log last said of each member and request, so that a line
// says what changed, once: a member that joins "joined" (the lead lists it
// disconnected until its inbox opens), and a request event that adds nothing
// new says nothing.
const toldMembers = new Map();
const toldRequests = new Map();
const liveTold = { members: toldMembers, requests: toldRequests };

function memberSentence(m, toldMembers) {
  const now = m.status + "|" + m.mode;
  const before = toldMembers.get(m.name);
  toldMembers.set(m.name, now);
  if (before === now) return null;
  if (!before) return m.status === "terminated" ? `${m.name} has left the team` : `${m.name} joined as ${m.role}`;
  const [status, mode] = before.split("|");
  if (status === m.status && mode !== m.mode) {
    return m.mode === "plan" ? `${m.name} is back in plan mode` : `${m.name} may now work in ${m.mode} mode`;
  }
  if (status === "disconnected" && (m.status === "working" || m.status === "idle")) return `${m.name} is connected`;
  return {
    working: `${m.name} is working`, idle: `${m.name} is idle`,
    disconnected: `${m.name} lost its connection; it may come back`,
    shutting_down: `${m.name} was asked to shut down`, terminated: `${m.name} has left the team`,
  }[m.status] || `${m.name} is ${m.status}`;
}

function requestSentence(r, toldRequests) {
  const reviews = r.reviews || [];
  const before = toldRequests.get(r.request_id);
  toldRequests.set(r.request_id, { status: r.status, reviews: reviews.length });
  if (before && before.status === r.status) {
    if (reviews.length <= before.reviews) return null;
    const step = reviews[reviews.length - 1];
    const what = { result: "result", amendment: "amendment" }[r.type] || "plan";
    return `${step.reviewer} (${step.verdict}) on ${r.sender}'s ${what}` + (step.words ? `: ${step.words}` : "");
  }
  const who = r.sender;
  const sentences = {
    plan_approval: { pending: `${who} sent a plan for review`, approved: `${who}'s plan was approved`,
      rejected: `${who}'s plan was rejected: ${r.feedback || ""}`, expired: `${who}'s plan expired` },
    permission: { pending: `${who} asks for permission`, approved: `${who}'s permission was allowed`,
      rejected: `${who}'s permission was denied: ${r.feedback || ""}`, expired: `${who}'s permission request expired` },
    result: { pending: `${who} sent a result for review`, approved: `${who}'s result landed: ${r.feedback || ""}`,
      rejected: `${who}'s result was rejected: ${r.feedback || ""}`, expired: `${who}'s result expired` },
    amendment: { pending: `${who} asks to add to its plan`, approved: `${who}'s amendment was approved`,
      rejected: `${who}'s amendment was rejected: ${r.feedback || ""}`, expired: `${who}'s amendment expired` },
    shutdown: { pending: `the lead asked ${r.target} to shut down`, approved: `${r.target} agreed to shut down`,
      rejected: `${r.target} refused to shut down: ${r.feedback || ""}`, expired: `the shutdown request for ${r.target} expired` },
  };
  return (sentences[r.type] || {})[r.status] || `${who}'s ${r.type} request is ${r.status}`;
}

// What an event is about, to link: its request, members, task.
function aboutOf(ev) {
  const about = { request: null, members: [], task: null };
  if (ev.request) {
    about.request = ev.request.request_id;
    about.members = [ev.request.sender, ev.request.target];
    // The log keeps no payload; the page's copy of the request names its task.
    const known = requests.get(ev.request.request_id) || ev.request;
    const p = known.payload || {};
    about.task = (p.plan && p.plan.task_id) || (p.result && p.result.task_id) || p.task_id || null;
  }
  if (ev.review_note) about.request = ev.review_note.request_id || null;
  if (ev.member) about.members = [ev.member.name];
  if (ev.tool_call) about.members = [ev.tool_call.member];
  if (ev.task) { about.task = ev.task.task_id; about.members = [ev.task.owner]; }
  if (ev.usage) about.members = [ev.usage.name];
  if (ev.child_exited) about.members = [ev.child_exited.name];
  about.members = [...new Set(about.members.filter((m) => m && members.has(m)))];
  return about;
}

function aboutLinks(about) {
  const links = [];
  if (about.request) links.push(el("a", { href: "#/requests/" + encodeURIComponent(about.request), "data-testid": "event-request", text: "request" }));
  for (const m of about.members) links.push(el("a", { href: "#/members/" + encodeURIComponent(m), "data-testid": "event-member", text: m }));
  if (about.task) links.push(el("a", { href: "#/task/" + encodeURIComponent(about.task), "data-testid": "event-task", text: "task" }));
  return links.length ? el("span", { class: "about meta" }, " · ", ...links.flatMap((l, i) => (i ? [" ", l] : [l]))) : null;
}

function describe(e, told) {
  const ev = e.event || {};
  if (ev.envelope) return [ev.envelope.from + " → " + ev.envelope.to + ": " + ev.envelope.body, ev.envelope.from, ev.envelope.to];
  if (ev.request) return [requestSentence(ev.request, told.requests), ev.request.sender, ev.request.target];
  if (ev.member) return [memberSentence(ev.member, told.members), ev.member.name];
  if (ev.tool_call) return [`${ev.tool_call.member} ${ev.tool_call.allowed ? "ran" : "was refused"} ${ev.tool_call.tool}: ${ev.tool_call.outcome}`, ev.tool_call.member];
  if (ev.review_note) return [`${ev.review_note.reviewer}: ${ev.review_note.note}`];
  if (ev.task) return [`task ${ev.task.subject}: ${ev.task.status}${ev.task.owner ? " (" + ev.task.owner + ")" : ""}`, ev.task.owner];
  if (ev.usage) {
    // A process that used nothing is not news.
    if (!tokensOf(ev.usage) && !ev.usage.calls) return [null];
    return [`${ev.usage.name} used ${count(tokensOf(ev.usage))} tokens in ${count(ev.usage.calls || 0)} calls` + (ev.usage.token_budget ? ` (budget ${count(ev.usage.token_budget)})` : ""), ev.usage.name];
  }
  if (ev.child_exited) {
    const c = ev.child_exited;
    return [`${c.name} (pid ${c.pid}) ${c.how}${c.joined ? "" : " before joining" + (c.log_tail ? "; its log ends: " + c.log_tail : "")}`, c.name];
  }
  return [JSON.stringify(ev)];
}

// The event log is the lead's history (kept in its store: it survives a
// reload and a restart), a page at a time, filtered on the lead; events that
// come live and match the filters are added on top.
const kindFilter = document.getElementById("event-kind");
const sinceFilter = document.getElementById("event-since");
const searchFilter = document.getElementById("event-search");
const olderButton = document.getElementById("events-older");
let logged = [];          // { id, at, text } newest first, as shown
let nextBefore = null;    // where the next older page starts

function filters() {
  const params = new URLSearchParams();
  if (filter.value) params.set("member", filter.value);
  if (kindFilter.value) params.set("kind", kindFilter.value);
  if (sinceFilter.value) params.set("since", String(new Date(sinceFilter.value).getTime()));
  return params;
}

// The search looks in what the log shows (the sentences), not in what the
// lead stores: it is done here, over the pages the lead sends.
function searched() {
  return searchFilter.value.trim().toLowerCase();
}

// Sentences for stored events, in their order, each said once.
function sentences(entries) {
  const told = { members: new Map(), requests: new Map() };
  const out = [];
  for (const entry of [...entries].reverse()) {
    // entry.event is { at_unix_ms, event }, as the live stream sends it.
    const text = describe(entry.event, told)[0];
    if (text !== null) out.push({ id: entry.id, at: entry.event.at_unix_ms, text, ev: entry.event.event || {} });
  }
  return out.reverse();
}

// A search reads older pages until it has SEARCH_ENOUGH lines or has read
// SEARCH_PAGES pages; "Older events" goes on from there.
const SEARCH_ENOUGH = 50;
const SEARCH_PAGES = 25;
let loading_ = 0; // the newest call of loadEvents; an older one's answer is dropped
async function loadEvents(older) {
  const mine = ++loading_;
  const q = searched();
  let before = older ? nextBefore : null;
  let got = [];
  let next = null;
  for (let pages = 0; pages < (q ? SEARCH_PAGES : 1); pages++) {
    const params = filters();
    params.set("limit", "200");
    if (before) params.set("before", String(before));
    const response = await fetch("/api/history?" + params);
    if (!response.ok || mine !== loading_) return;
    const page = await response.json();
    got = got.concat(sentences(page.entries).filter((l) => !q || l.text.toLowerCase().includes(q)));
    next = page.next_before || null;
    before = next;
    if (!next || got.length >= SEARCH_ENOUGH) break;
  }
  if (mine !== loading_) return;
  const page = { next_before: next };
  // What came live while the page was asked for stays on top.
  const newest = got.length ? got[0].at : 0;
  const live = logged.filter((l) => l.id === null && l.at >= newest && !got.some((g) => g.at === l.at && g.text === l.text));
  logged = older ? logged.concat(got) : live.concat(got);
  nextBefore = page.next_before || null;
  renderEvents();
}

function kindOf(ev) {
  if (ev.request) return "request";
  if (ev.member) return "member";
  if (ev.task) return "task";
  if (ev.tool_call) return "tool";
  if (ev.child_exited) return "child";
  if (ev.usage) return "usage";
  if (ev.review_note) return "review";
  return "envelope";
}

// Whether a live event belongs in the log as it is filtered now.
function shownLive(e, text, who) {
  const kind = kindOf(e.event || {});
  if (kind === "envelope") return false;
  if (kindFilter.value && kind !== kindFilter.value) return false;
  if (filter.value && !who.includes(filter.value)) return false;
  if (sinceFilter.value && e.at_unix_ms < new Date(sinceFilter.value).getTime()) return false;
  const q = searched();
  if (q && !text.toLowerCase().includes(q)) return false;
  return !logged.some((l) => l.at === e.at_unix_ms && l.text === text);
}

// A number as people write it: 200,000.
function count(n) {
  return Number(n).toLocaleString("en-US");
}

// When, as the log shows it: the time today, the date and time on any
// other day (the log keeps days of events).
function whenText(ms) {
  const at = new Date(ms);
  return at.toDateString() === new Date().toDateString()
    ? at.toLocaleTimeString()
    : at.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" }) + " " + at.toLocaleTimeString();
}

function renderEvents() {
  document.getElementById("events").replaceChildren(...logged.map((e) =>
    el("li", { class: lookedAt && e.at > lookedAt ? "fresh" : "" }, el("time", { datetime: new Date(e.at).toISOString(), text: whenText(e.at) }), " ",
      el("span", { "data-testid": "said", text: e.text }), aboutLinks(aboutOf(e.ev || {})))));
  olderButton.hidden = !nextBefore;
}

let searching = null;
for (const control of [filter, kindFilter, sinceFilter]) control.addEventListener("change", () => loadEvents(false));
searchFilter.addEventListener("input", () => {
  clearTimeout(searching);
  searching = setTimeout(() => loadEvents(false), 250);
});
olderButton.addEventListener("click", () => loadEvents(true));

// A request only moves forward: pending, then decided; its history only grows.
function newer(old, now) {
  if (!old) return true;
  if (old.status !== "pending" && now.status === "pending") return false;
  return (now.reviews || []).length >= (old.reviews || []).length;
}

// What members hold changes with approvals, completed tasks and leaving; the
// lead says it in the team's state, read again when one of those happens.
let holdsStale = false;
function holdsMayChange(ev) {
  return (ev.request && ev.request.type === "plan_approval" && ev.request.status === "approved")
    || (ev.task && String(ev.task.status).toLowerCase() === "completed")
    || (ev.request && ["result", "amendment"].includes(ev.request.type) && ev.request.status === "approved");
}

// Only what members hold is taken from it: their status and mode come with
// the events, and an answer read before the latest event must not undo
// it (a member that left would show as connected again). Only the answer
// to the latest read is used.
let holdsRead = 0;
async function refreshMembers() {
  holdsStale = false;
  const mine = ++holdsRead;
  const response = await fetch("/api/state");
  if (!response.ok || mine !== holdsRead) return;
  const state = await response.json();
  if (mine !== holdsRead) return;
  for (const m of state.members) {
    const known = members.get(m.name);
    if (known) members.set(m.name, { ...known, holds: m.holds });
    else members.set(m.name, m);
  }
  schedule();
}

function apply(e) {
  const ev = e.event || {};
  if (holdsMayChange(ev)) holdsStale = true;
  if (ev.member) {
    members.set(ev.member.name, ev.member);
    usage.set(ev.member.name, { tokens: tokensOf(ev.member.usage), calls: (ev.member.usage || {}).calls || 0, budget: ev.member.token_budget || 0 });
  }
  if (ev.task) tasks.set(ev.task.task_id, ev.task);
  if (ev.usage) usage.set(ev.usage.name, { tokens: tokensOf(ev.usage), calls: ev.usage.calls || 0, budget: ev.usage.token_budget || 0 });
  if (ev.request && newer(requests.get(ev.request.request_id), ev.request)) {
    if (!requests.has(ev.request.request_id)) notify(ev.request);
    requests.set(ev.request.request_id, ev.request);
    statsMayChange();
  }
  const [text, ...who] = describe(e, liveTold);
  if (text === null) return;
  if (shownLive(e, text, who.filter(Boolean))) {
    logged.unshift({ id: null, at: e.at_unix_ms, text, ev: e.event || {} });
    if (logged.length > MAX_EVENTS) logged.pop();
  }
}

// The review queue's figures (GET /api/stats), read again at most once a
// second while requests change, and every ten seconds.
function humanTime(ms) {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms < 3600000) return `${Math.floor(ms / 60000)}m${String(Math.floor(ms / 1000) % 60).padStart(2, "0")}s`;
  return `${Math.floor(ms / 3600000)}h${String(Math.floor(ms / 60000) % 60).padStart(2, "0")}m`;
}
// A row's name in words: a request's kind as the queue says it, a
// reviewer's kind as it is ("human" is a person).
function waitsName(of) {
  return of === "human" ? "person" : KIND_NAMES[of] || of;
}
function waitsTable(caption, rows) {
  return el("table", { class: "waits" },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, ...["", "count", "p50", "p90", "max"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...rows.map((w) => el("tr", { "data-testid": `wait-${w.of}` },
      el("th", { scope: "row", text: waitsName(w.of) }),
      el("td", { text: String(w.count) }),
      el("td", { text: humanTime(w.p50_ms) }),
      el("td", { text: humanTime(w.p90_ms) }),
      el("td", { text: humanTime(w.max_ms) })))));
}
let statsDue = null;
async function loadStats() {
  statsDue = null;
  const response = await fetch("/api/stats");
  if (!response.ok) return;
  const stats = await response.json();
  const box = document.getElementById("waits");
  const parts = [];
  parts.push(el("p", { "data-testid": "waiting-now", text: stats.pending.length
    ? "Waiting now: " + stats.pending.map((p) => `${p.count} ${waitsName(p.kind).toLowerCase()} (${p.with_a_person} with a person, the oldest for ${humanTime(p.oldest_ms)})`).join("; ")
    : "Nothing waits now." }));
  parts.push(stats.reviewers.length ? waitsTable("Each reviewer's time on a request", stats.reviewers)
    : el("p", { text: "No reviewer has decided anything yet." }));
  if (stats.decided.length) parts.push(waitsTable("From a request's opening to its decision", stats.decided));
  box.replaceChildren(...parts);
}
function statsMayChange() {
  if (statsDue) return;
  statsDue = setTimeout(() => loadStats().catch(() => {}), 1000);
}

let redraw = null;
function schedule() {
  if (redraw) return;
  redraw = requestAnimationFrame(() => {
    redraw = null;
    renderQueue(); renderTeam(); renderHistory(); renderEvents(); renderPage(); refreshTimes();
    // Offline, it fails; the state is read again on reconnecting anyway.
    if (holdsStale) refreshMembers().catch(() => {});
  });
}

// While the lead cannot be reached, every control is disabled: a click
// would only fail.
let lastReached = Date.now();
function offline(gone) {
  if (!gone) lastReached = Date.now();
  // Said where no one can miss it: what the page shows is as of the last
  // time the lead was reached, and nothing can be decided.
  const banner = document.getElementById("gone");
  banner.hidden = !gone;
  banner.textContent = gone
    ? `The lead cannot be reached (since ${whenText(lastReached)}). What this page shows is as it was then; nothing can be decided until the lead is back.`
    : "";
  document.title = (gone ? "(lead gone) " : "") + document.title.replace(/^\(lead gone\) /, "");
  document.body.classList.toggle("offline", gone);
  for (const control of document.querySelectorAll("main button, main input, main textarea, main select, #page button, #page input, #page textarea, #page select")) {
    control.disabled = gone;
  }
}

function start() {
  const live = document.getElementById("live");
  // The state is read once the event stream is open (the lead watches for
  // this page from then on), so nothing between the two is lost; events that
  // come while it loads are applied after it.
  const source = new EventSource("/api/events");
  let early = [];
  let loaded = false;
  source.onmessage = (message) => {
    const e = JSON.parse(message.data);
    if (loaded) { apply(e); schedule(); } else early.push(e);
  };
  source.onopen = async () => {
    loaded = false;
    asked.clear();
    const response = await fetch("/api/state");
    if (response.status === 401) { location.reload(); return; }
    const state = await response.json();
    for (const m of state.members) {
      members.set(m.name, m);
      toldMembers.set(m.name, m.status + "|" + m.mode);
      usage.set(m.name, { tokens: tokensOf(m.usage), calls: (m.usage || {}).calls || 0, budget: m.token_budget || 0 });
    }
    for (const o of state.other_usage || []) usage.set(o.name, { tokens: tokensOf(o.usage), calls: (o.usage || {}).calls || 0, budget: 0 });
    usageBase = tokensOf(state.team_usage) - usageSum();
    for (const r of state.requests) {
      if (newer(requests.get(r.request_id), r)) requests.set(r.request_id, r);
      toldRequests.set(r.request_id, { status: r.status, reviews: (r.reviews || []).length });
    }
    for (const t of state.tasks || []) tasks.set(t.task_id, t);
    for (const e of early) apply(e);
    early = [];
    loaded = true;
    loadEvents(false).catch(() => {});
    loadStats().catch(() => {});
    live.textContent = "live";
    offline(false);
    schedule();
  };
  source.onerror = () => {
    live.textContent = "connection to the lead lost; reconnecting… (nothing can be decided until it is back)";
    offline(true);
  };
  setInterval(refreshTimes, 1000); // "waiting 3m" stays true
  setInterval(() => loadStats().catch(() => {}), 10000);
}

// Pages with their own address: #/requests/ID, #/tasks/STATUS, #/task/ID,
// #/members/NAME, #/team; "#/" (or none) is the queue.
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  return parts[0] ? parts : [];
}

const KIND_NAMES = { plan_approval: "Plan", permission: "Permission", shutdown: "Shutdown", result: "Result", amendment: "Amendment" };

// A permission request's path, where its call names one: " (src/a.rs)".
function permissionPath(r) {
  if (r.type !== "permission") return "";
  if (r.brief) return (r.payload || {}).path ? ` (${r.payload.path})` : "";
  try {
    const path = JSON.parse((r.payload || {}).args_json || "{}").path;
    return path ? ` (${path})` : "";
  } catch (_) { return ""; }
}

function titleOf(r) {
  const p = r.payload || {};
  if (r.type === "plan_approval") return (p.plan || {}).summary || "(no summary)";
  if (r.type === "result") return (p.result || {}).summary || "(no summary)";
  if (r.type === "amendment") return `add ${(p.files || []).join(", ")}`;
  if (r.type === "permission") return `run ${p.tool || "a tool"}`;
  if (r.type === "shutdown") return `shut down ${r.target}`;
  return r.type;
}

function at(ms) {
  return el("span", {}, el("time", { text: new Date(ms).toLocaleString() }), " (", since(ms), " ago)");
}

function requestPage(id) {
  const r = whole(requests.get(id));
  if (!r) return [el("h2", { text: "No such request" }), el("p", { text: `The lead knows no request ${id} (it may have been forgotten after --retention).` })];
  const p = r.payload || {};
  const out = [el("h2", { text: `${KIND_NAMES[r.type] || r.type}: ${cardTitle(r)}` }),
    el("p", { class: "meta", "data-testid": "request-status" }, `${r.status}, from `, memberLink(r.sender), " to ", memberLink(r.target))];
  const timeline = el("ol", { class: "timeline", "data-testid": "timeline" });
  timeline.append(el("li", {}, "submitted ", at(r.created_at_unix_ms)));
  const revises = p.supersedes;
  if (revises) timeline.append(el("li", {}, "revises ", requestLink(revises)));
  // The step that decided a request is its decision: said once, with who
  // took it.
  const steps = [...(r.reviews || [])];
  const last = r.status !== "pending" ? steps[steps.length - 1] : null;
  const decidedBy = last && ({ approve: "approved", approved: "approved", reject: "rejected", rejected: "rejected" })[String(last.verdict).toLowerCase()] === r.status ? steps.pop() : null;
  for (const s of steps) {
    timeline.append(el("li", { "data-testid": "step" }, `${s.reviewer}: ${s.verdict}${s.words ? " — " + s.words : ""}, `, at(s.at_unix_ms)));
  }
  if (r.status !== "pending") {
    const feedback = r.feedback || (decidedBy && decidedBy.words) || "";
    timeline.append(el("li", { "data-testid": "decision" }, `${r.status}${decidedBy ? " by " + decidedBy.reviewer : ""}${feedback ? ": " + feedback : ""}, `,
      at(r.resolved_at_unix_ms || (decidedBy && decidedBy.at_unix_ms) || r.created_at_unix_ms)));
  }
  out.push(el("h3", { text: "Timeline" }), timeline);
  const links = linksOf(r);
  if (links) out.push(links);
  out.push(el("h3", { text: "What it asks" }));
  if (r.brief && r.type !== "plan_approval") out.push(loading("its content"));
  else out.push(...contentOf(r)
    // The timeline above has the reviews.
    .filter((part) => part && part.dataset.testid !== "reviews"));
  if (r.status === "pending" && r.type !== "shutdown") {
    // The queue (hidden) has this form too: ids here are the page's own.
    const form = formOf(r);
    for (const node of form.querySelectorAll("[id]")) node.id = "page-" + node.id;
    for (const label of form.querySelectorAll("label[for]")) label.htmlFor = "page-" + label.htmlFor;
    out.push(el("h3", { text: "Decide" }), el("div", { class: "card decide-card", "data-request-id": r.request_id, "data-testid": "decide" }, form));
  }
  return out;
}

// A member's name, linked to its page where it is a member (not "lead").
function memberLink(name) {
  return members.has(name) ? el("a", { href: "#/members/" + encodeURIComponent(name), text: name }) : name;
}

const TASK_TABS = ["all", "pending", "blocked", "claimed", "completed"];

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

function tasksPage(tab) {
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
function taskPage(id) {
  const t = tasks.get(id);
  if (!t) return [el("h2", { text: "No such task" })];
  const blockers = (t.blocked_by || []).map((b) => el("a", { href: "#/task/" + encodeURIComponent(b), text: (tasks.get(b) || {}).subject || b }));
  const under = requestsOfTask(id);
  const landed = under.filter((r) => r.type === "result" && r.status === "approved").pop();
  return [el("h2", { text: "Task: " + t.subject }),
    el("p", { "data-testid": "task-status", text: `${taskStatus(t)}${t.owner ? " by " + t.owner : ""}; review: ${t.review || "plan"}; waits for ${taskWaits(t)}` }),
    landed ? el("p", { "data-testid": "task-landed" }, "Landed: ", requestLink(landed.request_id, landed.feedback || titleOf(landed))) : null,
    t.description ? el("p", { text: t.description }) : null,
    el("div", { text: "Files:" }), list(t.files || []),
    el("div", { text: "Waits for:" }), blockers.length ? el("p", {}, ...blockers.flatMap((b, i) => i ? [", ", b] : [b])) : el("p", { class: "meta", text: "nothing" }),
    el("p", { class: "meta", text: `created ${whenText(t.created_at_unix_ms)}; last changed ${whenText(t.updated_at_unix_ms || t.created_at_unix_ms)}` }),
    t.summary ? el("p", { text: "Summary: " + t.summary }) : null,
    el("div", { text: "Requests:" }),
    under.length ? el("ul", { "data-testid": "task-requests" }, ...under.map((r) => el("li", {}, el("a", { href: "#/requests/" + r.request_id, text: `${KIND_NAMES[r.type] || r.type}: ${titleOf(r)}` }), ` — ${r.sender}, ${r.status}`)))
      : el("p", { class: "meta", text: "none" })].filter(Boolean);
}

function memberPage(name) {
  const m = members.get(name);
  if (!m) return [el("h2", { text: "No such member" })];
  const mine = [...requests.values()].filter((r) => r.sender === name || r.target === name)
    .sort((a, b) => b.created_at_unix_ms - a.created_at_unix_ms);
  const own = [...tasks.values()].filter((t) => t.owner === name)
    .map((t) => ({ ...t, status: String(t.status || "").toLowerCase() }));
  return [el("h2", { text: name }),
    el("p", { "data-testid": "member-status", text: `${statusWords(m, waitingBySender())}, mode ${m.mode}, role ${m.role}` }),
    el("div", { text: "Holds now:" }), list(m.holds || []),
    el("div", { text: "Tasks:" }), list(own.map((t) => `${t.subject} (${t.status})`)),
    el("div", { text: "Requests:" }),
    el("ul", {}, ...mine.map((r) => el("li", {}, el("a", { href: "#/requests/" + r.request_id, text: `${KIND_NAMES[r.type] || r.type}: ${titleOf(r)}` }), ` — ${r.status}`)))];
}

// Asking a member to shut down, with a reason; how the last ask ended.
function shutdownControl(m) {
  const outcome = el("span", { class: "meta", "data-testid": "team-shutdown-outcome", text: shutdownOutcome(m.name) });
  if (m.status === "terminated") return outcome;
  const reason = el("input", { type: "text", "aria-label": `reason to shut ${m.name} down`, placeholder: "reason", "data-testid": "team-reason" });
  return el("div", {}, reason,
    el("button", { "data-testid": "team-shutdown", text: "Shut down", onclick: () =>
      post("/api/shutdown", { name: m.name, reason: reason.value }).catch((e) => { outcome.textContent = e.message; }) }),
    " ", outcome);
}

// The team at a glance: each member's status in words, mode, what it holds,
// its task, and what its model used against its budget.
function teamPage() {
  const waiting = waitingBySender();
  const head = el("tr", {}, ...["member", "role", "status", "mode", "holds", "task", "tokens", "budget", "shut down"]
    .map((h) => el("th", { text: h })));
  const rows = [...members.values()].map((m) => {
    const used = usage.get(m.name) || { tokens: 0 };
    const task = [...tasks.values()].find((t) => t.owner === m.name && String(t.status || "").toLowerCase() === "claimed");
    // Each cell names its column, for a phone, where a row is a card.
    return el("tr", { "data-testid": "team-member", "data-member": m.name },
      el("td", { "data-label": "member" }, el("a", { href: "#/members/" + encodeURIComponent(m.name), text: m.name })),
      el("td", { "data-label": "role", text: m.role }),
      el("td", { "data-label": "status", "data-testid": "team-status", text: statusWords(m, waiting) }),
      el("td", { "data-label": "mode", text: m.mode }),
      el("td", { "data-label": "holds" }, list(m.holds || [])),
      el("td", { "data-label": "task", text: task ? task.subject : "-" }),
      el("td", { "data-label": "tokens", text: count(used.tokens) }),
      el("td", { "data-label": "budget", text: used.budget ? count(used.budget) : "-" }),
      el("td", { "data-label": "shut down" }, shutdownControl(m)));
  });
  return [el("h2", { text: "Team" }),
    el("div", { class: "wide" }, el("table", { "data-testid": "team-table" }, el("thead", {}, head), el("tbody", {}, ...rows)))];
}

// Pages that are sections of index.html: the event log and the decided
// requests, each on its own page.
const OWN_PAGES = { events: "events-section", decided: "history-section" };

let shownPage = "";
function renderPage() {
  const parts = route();
  const page = document.getElementById("page");
  const main = document.querySelector("main");
  for (const [name, id] of Object.entries(OWN_PAGES)) {
    const section = document.getElementById(id);
    if (section.hidden !== (parts[0] !== name)) section.hidden = parts[0] !== name;
  }
  if (!parts.length || OWN_PAGES[parts[0]]) {
    page.hidden = true; main.hidden = !!parts.length; shownPage = "";
    return;
  }
  // Keep a decision form or a reason being typed in: a request's page is
  // redrawn when its state changed, another page when what it says did.
  const [what, arg] = parts;
  if (what === "requests") {
    const r = requests.get(arg) || {};
    const key = location.hash + "|" + JSON.stringify([r.status, (r.reviews || []).length, !!r.brief]);
    if (key === shownPage && page.contains(document.activeElement) && document.activeElement !== document.body) return;
    shownPage = key;
  }
  const content = what === "requests" ? requestPage(arg)
    : what === "tasks" ? tasksPage(TASK_TABS.includes(arg) ? arg : "all")
    : what === "members" ? memberPage(arg)
    : what === "task" ? taskPage(arg)
    : what === "team" ? teamPage()
    : [el("h2", { text: "No such page" })];
  if (what !== "requests") {
    const key = location.hash + "|" + content.map((node) => node.textContent).join("\n");
    if (key === shownPage) return;
    shownPage = key;
  }
  page.replaceChildren(el("p", {}, el("a", { href: "#/", text: "← the queue" })), ...content);
  page.hidden = false; main.hidden = true;
}

window.addEventListener("hashchange", schedule);

// The last look: when the operator last left this page (closed it or went
// to another tab). What came after it is marked new.
const LOOK_KEY = "mesh-console-looked-at";
let lookedAt = Number(localStorage.getItem(LOOK_KEY)) || 0;
function lookedAway() {
  localStorage.setItem(LOOK_KEY, String(Date.now()));
}
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "hidden") lookedAway();
  else { lookedAt = Number(localStorage.getItem(LOOK_KEY)) || lookedAt; schedule(); }
});
window.addEventListener("pagehide", lookedAway);

// Opt-in browser notifications: one when a request comes to wait for a
// person, while this page is open.
const NOTIFY_KEY = "mesh-console-notify";
const notifyButton = document.getElementById("notify");
function notifying() {
  return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(NOTIFY_KEY) === "on";
}
function showNotifyButton() {
  if (!("Notification" in window) || Notification.permission === "denied") { notifyButton.hidden = true; return; }
  notifyButton.hidden = false;
  notifyButton.textContent = notifying() ? "Notifications on (turn off)" : "Notify me when something waits";
  notifyButton.setAttribute("aria-pressed", String(notifying()));
}
notifyButton.addEventListener("click", async () => {
  if (notifying()) localStorage.setItem(NOTIFY_KEY, "off");
  else if (await Notification.requestPermission() === "granted") localStorage.setItem(NOTIFY_KEY, "on");
  showNotifyButton();
});
showNotifyButton();
function notify(r) {
  if (r.status !== "pending" || r.type === "shutdown" || !notifying()) return;
  const note = new Notification(`${r.sender}'s ${(KIND_NAMES[r.type] || r.type).toLowerCase()} waits for you`,
    { body: cardTitle(r), tag: r.request_id });
  note.onclick = () => { window.focus(); location.hash = "#/requests/" + encodeURIComponent(r.request_id); };
}

// Keys on the queue: j/k move between cards, a approves, r rejects (with
// the feedback typed), o opens the card's page.
document.addEventListener("keydown", (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement && document.activeElement.tagName);
  if (typing) return;
  const cards = [...document.querySelectorAll("#queue .card, #page .card")].filter((c) => c.offsetParent !== null);
  if (!cards.length) return;
  const current = document.activeElement && document.activeElement.closest(".card");
  let at = cards.indexOf(current);
  // Moving to a card opens it (and closes the one open before).
  const focus = (card) => {
    if (card.closest("#queue")) openCard(card.dataset.requestId);
    const h = card.querySelector("h3") || card;
    h.setAttribute("tabindex", "-1"); h.focus();
  };
  if (e.key === "j") { focus(cards[Math.min(at + 1, cards.length - 1)]); e.preventDefault(); }
  else if (e.key === "k") { focus(cards[Math.max(at - 1, 0)]); e.preventDefault(); }
  else if (at >= 0 && e.key === "a") { const b = current.querySelector("[data-testid=approve], [data-testid=allow]"); if (b) b.click(); e.preventDefault(); }
  else if (at >= 0 && e.key === "r") {
    const fb = current.querySelector("[data-testid=feedback], [data-testid=deny-reason]");
    const b = current.querySelector("[data-testid=reject], [data-testid=deny]");
    if (fb && !fb.value.trim()) fb.focus(); else if (b) b.click();
    e.preventDefault();
  }
  else if (at >= 0 && e.key === "Enter" && document.activeElement.tagName === "H3") { openCard(current.dataset.requestId, true); e.preventDefault(); }
  else if (at >= 0 && e.key === "o") { location.hash = "#/requests/" + current.dataset.requestId; e.preventDefault(); }
});

start();
