// Pages with their own address, and redrawing: every part of the page
// drawn again once a frame at most.

import { renderHistory } from "./decided.js";
import { el, refreshTimes, route } from "./dom.js";
import { filter, loadEvents, renderEvents } from "./events.js";
import { renderQueue } from "./queue.js";
import { requestPage } from "./request.js";
import { onSchedule, requests } from "./state.js";
import { TASK_TABS, taskPage, tasksPage } from "./tasks.js";
import { memberPage, renderTeam, teamPage } from "./team.js";

// What follows each redraw: the live layer (live.js) says it at load.
let redrawn = () => {};
export function afterRedraw(fn) {
  redrawn = fn;
}

let redraw = null;
function schedule() {
  if (redraw) return;
  redraw = requestAnimationFrame(() => {
    redraw = null;
    renderQueue(); renderTeam(); renderHistory(); renderEvents(); renderPage(); refreshTimes();
    redrawn();
  });
}
// Every module below asks for a redraw through state.js's schedule.
onSchedule(schedule);

// Pages that are sections of index.html: the event log and the decided
// requests, each on its own page.
const OWN_PAGES = { events: "events-section", decided: "history-section" };

// What a page says, but the times kept current in place ("3m ago").
function saidBy(node) {
  if (node.nodeType === Node.TEXT_NODE) return node.data;
  if (node.dataset && node.dataset.since) return "";
  let text = "";
  for (const child of node.childNodes) text += saidBy(child);
  return text;
}

let shownPage = "";
function renderPage() {
  const parts = route();
  const page = document.getElementById("page");
  const main = document.querySelector("main");
  for (const [name, id] of Object.entries(OWN_PAGES)) {
    const section = document.getElementById(id);
    if (section.hidden !== (parts[0] !== name)) section.hidden = parts[0] !== name;
  }
  // #/events/NAME: the log filtered to one member (linked from its page).
  if (parts[0] === "events" && parts[1] && filter.value !== parts[1] && [...filter.options].some((o) => o.value === parts[1])) {
    filter.value = parts[1];
    loadEvents(false).catch(() => {});
  }
  if (!parts.length || OWN_PAGES[parts[0]]) {
    page.hidden = true; main.hidden = !!parts.length; shownPage = "";
    return;
  }
  // A page is drawn again only when what it says changed (a fold opened
  // or a file scrolled to stays so); a request's page, while a decision
  // is typed in it, only when the request's state changed.
  const [what, arg] = parts;
  const content = what === "requests" ? requestPage(arg)
    : what === "tasks" ? tasksPage(TASK_TABS.includes(arg) ? arg : "all")
    : what === "members" ? memberPage(arg)
    : what === "task" ? taskPage(arg)
    : what === "team" ? teamPage()
    : [el("h2", { text: "No such page" })];
  let state = "";
  if (what === "requests") {
    const r = requests.get(arg) || {};
    state = JSON.stringify([r.status, (r.reviews || []).length, !!r.brief]);
  }
  const key = location.hash + "|" + state + "|" + content.map(saidBy).join("\n");
  if (key === shownPage) return;
  const typing = page.contains(document.activeElement) && document.activeElement !== document.body;
  if (what === "requests" && typing && shownPage.startsWith(location.hash + "|" + state + "|")) return;
  shownPage = key;
  page.replaceChildren(el("p", {}, el("a", { href: "#/", text: "← the queue" })), ...content);
  page.hidden = false; main.hidden = true;
}

window.addEventListener("hashchange", schedule);
