// The decided requests (#/decided/N), newest first, a page at a time.

import { cardTitle, linksOf } from "./content.js";
import { el, requestLink, route, since } from "./dom.js";
import { requestSentence } from "./events.js";
import { KIND_NAMES, members, requests } from "./state.js";

// The decided requests, newest first, on their own page (#/decided/N),
// DECIDED_PAGE at a time; each said in words, linked to its page, its
// sender and its task.
const DECIDED_PAGE = 50;
export function renderHistory() {
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
