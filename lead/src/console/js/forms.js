// The decision forms: a plan's (grant mode, write globs, overlap, feedback),
// a permission's, a result's or an amendment's.

import { el, post } from "./dom.js";
import { schedule } from "./state.js";

// After a decision: say so, and put the focus on what comes next in the
// queue (the queue, queue.js, says at load where it keeps that: `next` is
// the decided card's place and request).
let focusNextAfter = () => {};
export function onDecided(fn) {
  focusNextAfter = fn;
}
function decided(request, what, status) {
  // Where the card stands now: by the answer, the lead's event may have
  // taken it off the page already.
  const card = status.closest(".card");
  const at = card && card.parentNode ? [...card.parentNode.children].indexOf(card) : 0;
  const id = card ? card.dataset.requestId : "";
  return request.then(() => {
    focusNextAfter({ at: Math.max(0, at), id });
    document.getElementById("queue-status").textContent = what + ".";
    schedule();
  }).catch((e) => { status.textContent = e.message; });
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
    files.length ? null : el("p", { class: "meta", "data-testid": "grants-nothing",
      text: "The plan names no files: approving it as it is grants no writes. Add globs to grant some." }),
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

export function formOf(r) {
  return r.type === "plan_approval" ? planForm(r) : r.type === "permission" ? permissionForm(r)
    : r.type === "result" ? decideForm(r, "result", "Approve and merge") : decideForm(r, "amendment", "Approve");
}
