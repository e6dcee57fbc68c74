// Diffs as the console shows them: a revision's lines against the plan it
// supersedes, a result's diff file by file, long file lists folded by folder.

import { el, list } from "./dom.js";

// What a revision changed from the plan it supersedes.
// The lines of `was` and `now` in order, each kept, removed or added: a
// longest-common-subsequence diff (plans' lists and bodies are short), so a
// reworded step shows in its place, its old words then its new.
function lineDiff(was, now) {
  const n = was.length, m = now.length;
  const common = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      common[i][j] = was[i] === now[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && was[i] === now[j]) { out.push([" ", was[i]]); i++; j++; }
    else if (i < n && (j === m || common[i + 1][j] >= common[i][j + 1])) { out.push(["-", was[i]]); i++; }
    else { out.push(["+", now[j]]); j++; }
  }
  return out;
}

// A line diff as code is read: indentation kept, each line marked + or -
// (and coloured), none struck through.
export function diffLines(label, was, now) {
  const lines = lineDiff(was, now);
  if (lines.every(([mark]) => mark === " ")) return null;
  const pre = el("pre", { class: "lines" });
  for (const [mark, text] of lines) {
    pre.append(el("span", { class: mark === "+" ? "added" : mark === "-" ? "removed" : "same", text: `${mark} ${text}\n` }));
  }
  return el("div", {}, el("div", { text: label + ":" }), pre);
}

// A list of files; a long one grouped by folder, each folder with its count
// (folded: a 32-file plan is a few lines until opened).
const GROUP_OVER = 8;
export function fileList(files) {
  if (files.length <= GROUP_OVER) return list(files);
  const groups = new Map();
  for (const f of files) {
    const cut = f.lastIndexOf("/");
    const dir = cut >= 0 ? f.slice(0, cut + 1) : "";
    if (!groups.has(dir)) groups.set(dir, []);
    groups.get(dir).push(f.slice(dir.length));
  }
  return el("ul", { class: "groups", "data-testid": "file-groups" }, ...[...groups].map(([dir, names]) =>
    el("li", {}, el("details", {}, el("summary", { text: `${dir || "./"} (${names.length} file${names.length === 1 ? "" : "s"})` }), list(names)))));
}

// A result's diff, file by file, each line marked added or removed.
export function diffFiles(diffText) {
  const wrap = el("div", { class: "diff", "data-testid": "diff" });
  const files = diffText.split(/^(?=diff --git )/m).filter((f) => f.trim());
  for (const f of files) {
    const head = f.split("\n", 1)[0];
    const path = (head.match(/ b\/(.*)$/) || [null, head])[1];
    const pre = el("pre", {});
    for (const line of f.split("\n").slice(1)) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
      pre.append(el("span", { class: cls, text: line + "\n" }));
    }
    wrap.append(el("details", { open: "" }, el("summary", { text: path }), pre));
  }
  return wrap;
}
