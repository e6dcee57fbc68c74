// Pages with their own address, and redrawing: every part of the page
// drawn again once a frame at most.

import { renderHistory } from "./decided.js";
import { el, refreshTimes, route } from "./dom.js";
import { renderEvents } from "./events.js";
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
