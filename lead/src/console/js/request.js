// A request's page (#/requests/ID): its timeline, its content and, while
// it waits, its decision form.

import { askedBy, cardTitle, contentOf, linksOf, outcomeOf, titleOf, whole } from "./content.js";
import { at, el, loading, memberLink, requestLink, shortCommits } from "./dom.js";
import { formOf } from "./forms.js";
import { KIND_NAMES, requests } from "./state.js";

export function requestPage(id) {
  const r = whole(requests.get(id));
  if (!r) return [el("h2", { text: "No such request" }), el("p", { text: `The lead knows no request ${id} (it may have been forgotten after --retention).` })];
  const p = r.payload || {};
  const out = [el("h2", { text: `${KIND_NAMES[r.type] || r.type}: ${cardTitle(r)}` }),
    el("p", { class: "meta", "data-testid": "request-status" }, `${outcomeOf(r)}, from `, memberLink(r.sender), " to ", memberLink(r.target))];
  const timeline = el("ol", { class: "timeline", "data-testid": "timeline" });
  timeline.append(el("li", { "data-testid": "opened" }, r.type === "shutdown" ? `asked by ${askedBy(r)} ` : "submitted ", at(r.created_at_unix_ms)));
  const revises = p.supersedes;
  if (revises) {
    // Named by what it was, its whole id on hover.
    const old = requests.get(revises);
    const link = requestLink(revises, old ? titleOf(old) : revises.slice(0, 8));
    link.title = revises;
    timeline.append(el("li", {}, "revises ", link));
  }
  // The step that decided a request is its decision: said once, with who
  // took it.
  const steps = [...(r.reviews || [])];
  const last = r.status !== "pending" ? steps[steps.length - 1] : null;
  const decidedBy = last && ({ approve: "approved", approved: "approved", reject: "rejected", rejected: "rejected" })[String(last.verdict).toLowerCase()] === r.status ? steps.pop() : null;
  for (const s of steps) {
    timeline.append(el("li", { "data-testid": "step" }, `${s.reviewer}: ${s.verdict}${s.words ? " — " + s.words : ""} `,
      el("span", { class: "meta" }, "· ", at(s.at_unix_ms))));
  }
  if (r.status !== "pending") {
    const feedback = shortCommits(r.feedback || (decidedBy && decidedBy.words) || "");
    // "landed on the team branch as d81e4ade": the word is said once.
    const outcome = outcomeOf(r);
    const said = feedback.toLowerCase().startsWith(outcome) ? feedback
      : `${outcome}${decidedBy ? " by " + decidedBy.reviewer : ""}${feedback ? ": " + feedback : ""}`;
    timeline.append(el("li", { "data-testid": "decision" }, said + " ",
      el("span", { class: "meta" }, "· ", at(r.resolved_at_unix_ms || (decidedBy && decidedBy.at_unix_ms) || r.created_at_unix_ms))));
  }
  out.push(el("h3", { text: "Timeline" }), timeline);
  const links = linksOf(r);
  if (links) out.push(links);
  // Headed by what it is: what waits asks; what was decided asked; a
  // result that landed is what landed; a shutdown gives its reason.
  out.push(el("h3", { "data-testid": "content-heading", text: r.type === "shutdown" ? "Its reason"
    : r.status === "pending" ? "What it asks"
    : r.type === "result" && r.status === "approved" ? "What landed" : "What it asked" }));
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
