// The lead, live: the state at load, then its events as they come; what
// members hold read again when it may have changed; the page offline while
// the lead cannot be reached.

import { asked } from "./content.js";
import { refreshTimes, whenText } from "./dom.js";
import { loadEvents, logLive, toldMembers, toldRequests } from "./events.js";
import { showMe } from "./me.js";
import { notify } from "./notify.js";
import { afterRedraw } from "./router.js";
import { members, newer, requests, schedule, setUsageBase, tasks, tokensOf, usage, usageSum } from "./state.js";
import { loadStats, statsMayChange } from "./waits.js";

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

// Each redraw reads what members hold again when it may have changed.
// Offline, it fails; the state is read again on reconnecting anyway.
afterRedraw(() => {
  if (holdsStale) refreshMembers().catch(() => {});
});

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
  logLive(e);
}

// While the lead cannot be reached, every control is disabled: a click
// would only fail. The lead was last reached when its last event or
// heartbeat (every 15 s) came, not when the page connected (a tab opened
// in the morning).
let lastReached = Date.now();
function reached() {
  lastReached = Date.now();
}
function offline(gone) {
  if (!gone) reached();
  // Said once, where no one can miss it: what the page shows is as of the
  // last time the lead was reached (and greyed), and nothing can be
  // decided.
  const banner = document.getElementById("gone");
  banner.hidden = !gone;
  banner.dataset.at = gone ? String(lastReached) : "";
  banner.textContent = gone
    ? `The lead cannot be reached (last heard from at ${whenText(lastReached)}). What this page shows is as it was then; nothing can be decided until the lead is back.`
    : "";
  document.title = (gone ? "(lead gone) " : "") + document.title.replace(/^\(lead gone\) /, "");
  document.body.classList.toggle("offline", gone);
  for (const control of document.querySelectorAll("main button, main input, main textarea, main select, #page button, #page input, #page textarea, #page select")) {
    control.disabled = gone;
  }
}

export function start() {
  showMe().catch(() => {});
  // On a phone the review times start folded: the team comes next.
  if (window.matchMedia("(max-width: 600px)").matches) document.getElementById("waits-section").open = false;
  const live = document.getElementById("live");
  // The state is read once the event stream is open (the lead watches for
  // this page from then on), so nothing between the two is lost; events that
  // come while it loads are applied after it.
  const source = new EventSource("/api/events");
  let early = [];
  let loaded = false;
  source.addEventListener("heartbeat", reached);
  source.onmessage = (message) => {
    reached();
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
    setUsageBase(tokensOf(state.team_usage) - usageSum());
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
    // The banner says what it means; the header only that it is offline.
    live.textContent = "offline; reconnecting…";
    offline(true);
  };
  setInterval(refreshTimes, 1000); // "waiting 3m" stays true
  setInterval(() => loadStats().catch(() => {}), 10000);
}
