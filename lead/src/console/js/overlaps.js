// Overlaps: who else holds the files a waiting plan or amendment names,
// now, and the overlaps it was sent with that have ended.

import { el } from "./dom.js";
import { members, requests } from "./state.js";

// Whether `path` matches the glob `glob` (*, ** and ?, as the lead's holds
// are written).
function globMatch(glob, path) {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*" && glob[i + 1] === "*") { re += ".*"; i++; if (glob[i + 1] === "/") i++; }
    else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp("^" + re + "$").test(path);
}

// Who else holds any of `files` now: [{ member, files }], from the team's
// state as the page has it (so it is true the moment a hold is taken, and
// gone the moment it ends).
export function liveOverlaps(sender, files) {
  const out = [];
  for (const m of members.values()) {
    if (m.name === sender || m.status === "terminated") continue;
    const holds = m.holds || [];
    const hit = files.filter((f) => holds.some((h) => h === f || globMatch(h, f) || globMatch(f, h)));
    if (hit.length) out.push({ member: m.name, files: hit });
  }
  return out;
}

// A request's files, whatever its kind.
export function filesOf(r) {
  const p = r.payload || {};
  if (r.type === "plan_approval") return (p.plan || {}).files || [];
  if (r.type === "amendment") return p.files || [];
  if (r.type === "result") return ((p.result || {}).files || []).map((f) => f.path);
  return [];
}

// The overlaps of a waiting plan or amendment as they are now, and those it
// had when it was sent that have ended; kept current in place
// (fillOverlaps), so a card being typed in is not redrawn.
export function overlapsBox(r) {
  const box = el("div", { "data-overlaps": r.request_id, "data-testid": "overlaps" });
  fillOverlaps(box);
  return box;
}
export function fillOverlaps(box) {
  const r = requests.get(box.dataset.overlaps);
  if (!r) return;
  const now = r.status === "pending" ? liveOverlaps(r.sender, filesOf(r)) : [];
  const p = r.payload || {};
  const then = (p.overlaps || []).map((o) => ({ member: o.member, files: o.files || [] }))
    .concat((p.held_by_others || []).map((h) => {
      // "bob: src/a.rs, src/b.rs"
      const [member, files] = String(h).split(": ");
      return { member, files: files ? files.split(", ") : [] };
    }));
  const lines = now.map((o) => el("p", { class: "overlap", "data-testid": "overlap", text: `overlaps ${o.member}: ${o.files.join(", ")} (${o.member} holds ${o.files.length === 1 ? "it" : "them"} now)` }));
  if (r.status === "pending") {
    for (const o of then) {
      if (!now.some((n) => n.member === o.member)) {
        lines.push(el("p", { class: "meta", "data-testid": "overlap-ended", text: `the overlap with ${o.member}${o.files.length ? " on " + o.files.join(", ") : ""} has ended: ${o.member} no longer holds ${o.files.length === 1 ? "it" : "them"}` }));
      }
    }
  }
  const key = lines.map((l) => l.textContent).join("|");
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...lines);
}
