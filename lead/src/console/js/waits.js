// How long reviews take: the review queue's figures (GET /api/stats), on
// the queue's page.

import { el } from "./dom.js";
import { KIND_NAMES } from "./state.js";

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
export async function loadStats() {
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
export function statsMayChange() {
  if (statsDue) return;
  statsDue = setTimeout(() => loadStats().catch(() => {}), 1000);
}
