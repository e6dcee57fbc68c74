// The queue (#/): the requests waiting for a decision, as cards, one open;
// what comes next after a decision; the keys on it.

import { cardTitle, contentOf, linksOf, whole } from "./content.js";
import { el, requestLink, since } from "./dom.js";
import { formOf, onDecided } from "./forms.js";
import { lookedAt } from "./notify.js";
import { filesOf, fillOverlaps, liveOverlaps } from "./overlaps.js";
import { KIND_NAMES, requests, usage } from "./state.js";

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
// After a decision (forms.js says when): the focus goes on what comes next
// in the queue (the card at the same place, once the decided one is gone).
let focusAfter = null; // { at, id }: the decided card's place and request
onDecided((next) => { focusAfter = next; });

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

export function renderQueue() {
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
