// The event log (#/events): what each event says in words, the lead's
// history a page at a time, filtered and searched, and live events on top.

import { askedBy } from "./content.js";
import { count, el, shortCommits, whenText } from "./dom.js";
import { lookedAt } from "./notify.js";
import { members, requests, tasks, tokensOf } from "./state.js";

const MAX_EVENTS = 1000;
export const filter = document.getElementById("event-filter");

// What the event log last said of each member and request, so that a line
// says what changed, once: a member that joins "joined" (the lead lists it
// disconnected until its inbox opens), and a request event that adds nothing
// new says nothing.
export const toldMembers = new Map();
export const toldRequests = new Map();
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
  const words = {
    working: `${m.name} is working`, idle: `${m.name} is idle`,
    disconnected: `${m.name} lost its connection; it may come back`,
    // The shutdown request's own line says it was asked.
    shutting_down: null, terminated: `${m.name} has left the team`,
  };
  return m.status in words ? words[m.status] : `${m.name} is ${m.status}`;
}

// Words the lead wrote for the teammate, as the log says them: a task's id
// by its subject, a request's by its first eight characters, a commit by
// its first twelve.
const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g;
export function plainWords(text) {
  return shortCommits(String(text || "")).replace(UUID, (id) => {
    const task = tasks.get(id);
    return task ? `"${task.subject}"` : id.slice(0, 8);
  });
}

export function requestSentence(r, toldRequests) {
  const reviews = r.reviews || [];
  const before = toldRequests.get(r.request_id);
  toldRequests.set(r.request_id, { status: r.status, reviews: reviews.length });
  if (before && before.status === r.status) {
    if (reviews.length <= before.reviews) return null;
    const step = reviews[reviews.length - 1];
    const what = { result: "result", amendment: "amendment" }[r.type] || "plan";
    return `${step.reviewer} (${step.verdict}) on ${r.sender}'s ${what}` + (step.words ? `: ${plainWords(step.words)}` : "");
  }
  const who = r.sender;
  const why = plainWords(r.feedback);
  const sentences = {
    plan_approval: { pending: `${who} sent a plan for review`, approved: `${who}'s plan was approved`,
      rejected: `${who}'s plan was rejected: ${why}`, expired: `${who}'s plan expired` },
    permission: { pending: `${who} asks for permission`, approved: `${who}'s permission was allowed`,
      rejected: `${who}'s permission was refused: ${why}`, expired: `${who}'s permission request expired` },
    result: { pending: `${who} sent a result for review`, approved: `${who}'s result ${why.startsWith("landed") ? why : "landed" + (why ? ": " + why : "")}`,
      rejected: `${who}'s result was rejected: ${why}`, expired: `${who}'s result expired` },
    amendment: { pending: `${who} asks to add to its plan`, approved: `${who}'s amendment was approved`,
      rejected: `${who}'s amendment was rejected: ${why}`, expired: `${who}'s amendment expired` },
    shutdown: { pending: `${askedBy(r)} asked ${r.target} to shut down`, approved: `${r.target} agreed to shut down`,
      rejected: `${r.target} refused to shut down: ${why}`, expired: `the shutdown request for ${r.target} expired` },
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

// Protocol calls a teammate also reports as tool calls: their own events
// (the task's, the request's) say them.
const SAID_ELSEWHERE = new Set(["claim_task", "complete_task", "submit_plan", "submit_result", "request_amendment", "respond_shutdown"]);

// A tool call's outcome as the log shows it: its first line, cut, on the
// line; the rest (cut too) folded under it.
const OUTCOME_ON_LINE = 80;
const OUTCOME_FOLDED = 2000;
function outcomeParts(outcome) {
  const text = String(outcome || "").trim();
  const first = text.split("\n")[0];
  const line = first.length > OUTCOME_ON_LINE ? first.slice(0, OUTCOME_ON_LINE) + "…" : first;
  if (line === text) return [line, null];
  return [line, text.length > OUTCOME_FOLDED ? text.slice(0, OUTCOME_FOLDED) + "…" : text];
}

// What an event says: its sentence (null: nothing new), who it is about,
// and what is folded under it.
function describe(e, told) {
  const ev = e.event || {};
  const said = (text, who, detail) => ({ text, who: who.filter(Boolean), detail: detail || null });
  if (ev.envelope) return said(ev.envelope.from + " → " + ev.envelope.to + ": " + ev.envelope.body, [ev.envelope.from, ev.envelope.to]);
  if (ev.request) return said(requestSentence(ev.request, told.requests), [ev.request.sender, ev.request.target]);
  if (ev.member) return said(memberSentence(ev.member, told.members), [ev.member.name]);
  if (ev.tool_call) {
    const t = ev.tool_call;
    if (SAID_ELSEWHERE.has(t.tool)) return said(null, []);
    const [line, folded] = outcomeParts(plainWords(t.outcome));
    return said(`${t.member} ${t.allowed ? "ran" : "was refused"} ${t.tool}${line ? ": " + line : ""}`, [t.member], folded);
  }
  if (ev.review_note) return said(`${ev.review_note.reviewer}: ${plainWords(ev.review_note.note)}`, []);
  if (ev.task) return said(`task ${ev.task.subject}: ${ev.task.status}${ev.task.owner ? " (" + ev.task.owner + ")" : ""}`, [ev.task.owner]);
  if (ev.usage) {
    // A process that used nothing is not news.
    if (!tokensOf(ev.usage) && !ev.usage.calls) return said(null, []);
    return said(`${ev.usage.name} used ${count(tokensOf(ev.usage))} tokens in ${count(ev.usage.calls || 0)} calls` + (ev.usage.token_budget ? ` (budget ${count(ev.usage.token_budget)})` : ""), [ev.usage.name]);
  }
  if (ev.child_exited) {
    const c = ev.child_exited;
    const [line, folded] = outcomeParts(c.log_tail);
    return said(`${c.name} (pid ${c.pid}) ${c.how}${c.joined ? "" : " before joining" + (line ? "; its log ends: " + line : "")}`, [c.name], c.joined ? null : folded);
  }
  return said(JSON.stringify(ev), []);
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
    const { text, detail } = describe(entry.event, told);
    if (text !== null) out.push({ id: entry.id, at: entry.event.at_unix_ms, text, detail, ev: entry.event.event || {} });
  }
  return out.reverse();
}

// A search reads older pages until it has SEARCH_ENOUGH lines or has read
// SEARCH_PAGES pages; "Older events" goes on from there.
const SEARCH_ENOUGH = 50;
const SEARCH_PAGES = 25;
let loading_ = 0; // the newest call of loadEvents; an older one's answer is dropped
export async function loadEvents(older) {
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

// A mark per kind of event, as a history of events shows it.
const KIND_MARKS = { request: "request", member: "member", task: "task", tool: "tool", child: "process", usage: "usage", review: "review", envelope: "message" };

export function renderEvents() {
  document.getElementById("events").replaceChildren(...logged.map((e) => {
    const kind = kindOf(e.ev || {});
    return el("li", { class: lookedAt && e.at > lookedAt ? "fresh" : "", "data-kind": kind },
      el("span", { class: "kind", "data-testid": "event-kind", text: KIND_MARKS[kind] || kind }), " ",
      el("time", { datetime: new Date(e.at).toISOString(), text: whenText(e.at) }), " ",
      el("span", { "data-testid": "said", text: e.text }), aboutLinks(aboutOf(e.ev || {})),
      e.detail ? el("details", { class: "outcome", "data-testid": "event-detail" }, el("summary", { text: "its whole output" }), el("pre", { text: e.detail })) : null);
  }));
  olderButton.hidden = !nextBefore;
}

let searching = null;
for (const control of [filter, kindFilter, sinceFilter]) control.addEventListener("change", () => loadEvents(false));
searchFilter.addEventListener("input", () => {
  clearTimeout(searching);
  searching = setTimeout(() => loadEvents(false), 250);
});
olderButton.addEventListener("click", () => loadEvents(true));

// A live event in the log, said once, where the filters show it.
export function logLive(e) {
  const { text, who, detail } = describe(e, liveTold);
  if (text === null) return;
  if (shownLive(e, text, who)) {
    logged.unshift({ id: null, at: e.at_unix_ms, text, detail, ev: e.event || {} });
    if (logged.length > MAX_EVENTS) logged.pop();
  }
}
