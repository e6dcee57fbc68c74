// Helpers every page draws with: elements (peer text only ever in
// textContent), times and numbers as people read them, links, posting to
// the lead.

import { members } from "./state.js";

export function el(tag, attrs, ...children) {
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
export function since(ms) {
  return el("span", { "data-since": String(ms), "data-testid": "waiting", text: ago(ms) });
}

export function refreshTimes() {
  for (const span of document.querySelectorAll("[data-since]")) {
    const text = ago(Number(span.dataset.since));
    if (span.textContent !== text) span.textContent = text;
  }
}

// The session's CSRF token, which every POST carries (the lead refuses a
// session's change without it).
function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

export async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-csrf-token": csrfToken() },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

export function list(items) {
  if (!items.length) return el("p", { class: "meta", text: "none" });
  return el("ul", {}, ...items.map((i) => el("li", { text: i })));
}

// Said where a brief's content is still on its way.
export function loading(what) {
  return el("p", { class: "meta", "data-testid": "loading", text: `loading ${what}…` });
}

// Text with each whole commit id (40 hex digits) cut to its first 12: the
// whole one goes on hover (a link's title).
export function shortCommits(text) {
  return String(text).replace(/\b([0-9a-f]{12})[0-9a-f]{28}\b/g, "$1");
}

// A link to a request's page.
export function requestLink(id, text) {
  return el("a", { href: "#/requests/" + encodeURIComponent(id), text: text || id });
}

// A number as people write it: 200,000.
export function count(n) {
  return Number(n).toLocaleString("en-US");
}

// When, as the log shows it: the time today, the date and time on any
// other day (the log keeps days of events).
export function whenText(ms) {
  const at = new Date(ms);
  return at.toDateString() === new Date().toDateString()
    ? at.toLocaleTimeString()
    : at.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" }) + " " + at.toLocaleTimeString();
}

// The console's tests ask for it by name.
window.whenText = whenText;

// When, on a page's timeline: as the log says it (no "11/29/2026, " that
// reads on from the words before it), the whole time on hover.
export function at(ms) {
  const when = new Date(ms);
  return el("span", {}, el("time", { datetime: when.toISOString(), title: when.toString(), text: whenText(ms) }), " (", since(ms), " ago)");
}

// Pages with their own address: #/requests/ID, #/tasks/STATUS, #/task/ID,
// #/members/NAME, #/team; "#/" (or none) is the queue.
export function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  return parts[0] ? parts : [];
}

// A member's name, linked to its page where it is a member (not "lead").
export function memberLink(name) {
  return members.has(name) ? el("a", { href: "#/members/" + encodeURIComponent(name), text: name }) : name;
}
