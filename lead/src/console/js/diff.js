// Diffs as the console shows them, read like a pull request: a revision's
// lines against the plan it supersedes, a write against the file now, a
// result's diff file by file (a file list with +/- linking to each file,
// hunks with old and new line numbers, the changed words of a changed line
// marked, unchanged runs folded). The mark of a line (+, -) sits in a
// column of its own, so a wrapped line never starts with one.

import { el, list } from "./dom.js";

// The lines of `was` and `now` in order, each kept, removed or added: a
// longest-common-subsequence diff (plans' lists and bodies are short), so a
// reworded step shows in its place, its old words then its new. Above
// `LCS_CELLS` cells (a long file), the common head and tail are matched
// and the middle is removed then added.
const LCS_CELLS = 4_000_000;
function lineDiff(was, now) {
  let head = 0;
  while (head < was.length && head < now.length && was[head] === now[head]) head++;
  let tail = 0;
  while (tail < was.length - head && tail < now.length - head
    && was[was.length - 1 - tail] === now[now.length - 1 - tail]) tail++;
  const a = was.slice(head, was.length - tail), b = now.slice(head, now.length - tail);
  const out = was.slice(0, head).map((l) => [" ", l]);
  const n = a.length, m = b.length;
  if (n * m > LCS_CELLS) {
    out.push(...a.map((l) => ["-", l]), ...b.map((l) => ["+", l]));
  } else {
    const common = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
      }
    }
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
      else if (i < n && (j === m || common[i + 1][j] >= common[i][j + 1])) { out.push(["-", a[i]]); i++; }
      else { out.push(["+", b[j]]); j++; }
    }
  }
  out.push(...was.slice(was.length - tail).map((l) => [" ", l]));
  return out;
}

// A line's words and the spaces and marks between them.
function tokens(line) {
  return line.match(/\s+|[A-Za-z0-9_]+|[^\sA-Za-z0-9_]/g) || [];
}

// `text` as code-cell content, the part from `from` to `to` (in tokens)
// marked as what changed.
function marked(parts, from, to, cls) {
  const before = parts.slice(0, from).join(""), middle = parts.slice(from, to).join(""), after = parts.slice(to).join("");
  return [before, middle ? el("mark", { class: cls, text: middle }) : "", after].filter((p) => p !== "");
}

// A removed line and the added line that replaces it, with the changed
// words of each marked: the two lines' common head and tail of words are
// left plain (a one-letter fix shows as one marked word).
function wordPair(was, now) {
  const a = tokens(was), b = tokens(now);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  // Lines with nothing in common are two lines, not a change of words.
  if (head === 0 && tail === 0) return [null, null];
  return [marked(a, head, a.length - tail, "word-gone"), marked(b, head, b.length - tail, "word-new")];
}

// Rows as they are numbered: [mark, text, old number, new number].
// The changed words of each removed line followed by its replacement.
function withWords(rows) {
  const words = new Array(rows.length).fill(null);
  for (let i = 0; i < rows.length;) {
    if (rows[i][0] !== "-") { i++; continue; }
    let j = i;
    while (j < rows.length && rows[j][0] === "-") j++;
    let k = j;
    while (k < rows.length && rows[k][0] === "+") k++;
    for (let x = 0; x < Math.min(j - i, k - j); x++) {
      const [gone, added] = wordPair(rows[i + x][1], rows[j + x][1]);
      words[i + x] = gone;
      words[j + x] = added;
    }
    i = k;
  }
  return words;
}

const CLASS = { "+": "added", "-": "removed", " ": "same" };

// One line of a diff: its old and new numbers (where numbered), its mark
// and its text.
function row([mark, text, old, now], words, numbered) {
  const cells = numbered
    ? [el("td", { class: "num", text: old == null ? "" : String(old) }), el("td", { class: "num", text: now == null ? "" : String(now) })]
    : [];
  cells.push(el("td", { class: "mark", text: mark === " " ? "" : mark }),
    el("td", { class: "code" }, ...(words || [text === "" ? "\u200b" : text])));
  return el("tr", { class: CLASS[mark] || "same" }, ...cells);
}

// Unchanged lines kept around a change; a longer unchanged run is folded
// where the fold hides at least FOLD_LEAST lines.
const CONTEXT = 3;
const FOLD_LEAST = 4;

// A fold: "N unchanged lines", opened in place on a click.
function fold(rows, words, numbered) {
  const count = rows.length;
  const button = el("button", { class: "unfold", type: "button", "data-testid": "unfold",
    text: `⋯ ${count} unchanged line${count === 1 ? "" : "s"}` });
  const tr = el("tr", { class: "fold" }, el("td", { colspan: numbered ? "4" : "2" }, button));
  button.addEventListener("click", () => tr.replaceWith(...rows.map((r, i) => row(r, words[i], numbered))));
  return tr;
}

// The rows of a table: the changed lines, CONTEXT unchanged lines around
// each change, each longer unchanged run folded.
function rowsOf(rows, numbered) {
  const words = withWords(rows);
  const out = [];
  for (let i = 0; i < rows.length;) {
    if (rows[i][0] !== " ") { out.push(row(rows[i], words[i], numbered)); i++; continue; }
    let j = i;
    while (j < rows.length && rows[j][0] === " ") j++;
    const keepHead = i === 0 ? 0 : CONTEXT, keepTail = j === rows.length ? 0 : CONTEXT;
    if (j - i - keepHead - keepTail >= FOLD_LEAST) {
      for (let x = i; x < i + keepHead; x++) out.push(row(rows[x], null, numbered));
      out.push(fold(rows.slice(i + keepHead, j - keepTail), words.slice(i + keepHead, j - keepTail), numbered));
      for (let x = j - keepTail; x < j; x++) out.push(row(rows[x], null, numbered));
    } else {
      for (let x = i; x < j; x++) out.push(row(rows[x], null, numbered));
    }
    i = j;
  }
  return out;
}

// The columns' widths (a fixed layout takes them from here, not from a
// hunk's header row that spans them all).
function columns(numbered) {
  const cols = numbered ? ["num", "num", "mark", "code"] : ["mark", "code"];
  return el("colgroup", {}, ...cols.map((c) => el("col", { class: c })));
}

function table(rows, numbered) {
  return el("div", { class: "code-scroll" }, el("table", { class: "code-diff" + (numbered ? " numbered" : "") }, columns(numbered), el("tbody", {}, ...rowsOf(rows, numbered))));
}

// A line diff as code is read: indentation kept, each line marked + or -
// in a column of its own (and coloured), none struck through; unchanged
// runs folded. `numbered`: a file's lines, numbered old and new.
export function diffLines(label, was, now, numbered = false) {
  const lines = lineDiff(was, now);
  if (lines.every(([mark]) => mark === " ")) return null;
  let old = 1, next = 1;
  const rows = lines.map(([mark, text]) => [mark, text, mark === "+" ? null : old++, mark === "-" ? null : next++]);
  return el("div", { class: "line-diff" }, el("div", { text: label + ":" }), table(rows, numbered));
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

// A git path in a header, without its a/ or b/ (and its quotes).
function gitPath(path) {
  const bare = path.startsWith('"') && path.endsWith('"') ? path.slice(1, -1) : path;
  return bare.replace(/^[ab]\//, "");
}

// `git diff`'s text as files: each its path (and the path it had), what
// happened to it, its hunks of numbered lines, and its counts.
export function parseDiff(text) {
  const files = [];
  for (const chunk of text.split(/^(?=diff --git )/m)) {
    if (!chunk.trim()) continue;
    const lines = chunk.replace(/\n$/, "").split("\n");
    const head = lines[0].match(/^diff --git (\S+|"[^"]*") (\S+|"[^"]*")$/);
    const file = { path: head ? gitPath(head[2]) : lines[0], was: null, status: "changed", binary: false, added: 0, removed: 0, hunks: [] };
    let hunk = null, old = 0, now = 0;
    for (const line of lines.slice(1)) {
      const at = line.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/);
      if (at) {
        old = Number(at[1]); now = Number(at[2]);
        hunk = { header: line, context: at[3].trim(), rows: [] };
        file.hunks.push(hunk);
      } else if (!hunk) {
        if (line.startsWith("new file mode")) file.status = "new";
        else if (line.startsWith("deleted file mode")) file.status = "deleted";
        else if (line.startsWith("rename from ")) { file.was = line.slice(12); file.status = "renamed"; }
        else if (line.startsWith("rename to ")) file.path = line.slice(10);
        else if (line.startsWith("Binary files") || line.startsWith("GIT binary patch")) file.binary = true;
        else if (line.startsWith("+++ ") && line !== "+++ /dev/null") file.path = gitPath(line.slice(4));
      } else if (line.startsWith("+")) { hunk.rows.push(["+", line.slice(1), null, now++]); file.added++; }
      else if (line.startsWith("-")) { hunk.rows.push(["-", line.slice(1), old++, null]); file.removed++; }
      else if (line.startsWith("\\")) { /* "\ No newline at end of file" */ }
      else { hunk.rows.push([" ", line.slice(1), old++, now++]); }
    }
    files.push(file);
  }
  return files;
}

// The most lines of one file drawn at first; the rest on a click (a
// generated file of thousands of lines is not drawn until asked for).
const SHOWN_LINES = 400;

// "+3 −1" as a pull request's file list shows it.
function counts(file) {
  return file.binary ? "binary" : `+${file.added} −${file.removed}`;
}

function fileBody(file) {
  if (file.binary) return [el("p", { class: "meta", text: "a binary file: not shown" })];
  if (!file.hunks.length) return [el("p", { class: "meta", text: file.status === "renamed" ? "renamed, no change to its lines" : "no change to its lines" })];
  const tbody = el("tbody", {});
  let drawn = 0;
  const rest = [];
  for (const hunk of file.hunks) {
    const rows = hunk.rows;
    if (drawn >= SHOWN_LINES) { rest.push(hunk); continue; }
    tbody.append(el("tr", { class: "hunk" }, el("td", { colspan: "4", text: hunk.header })));
    const cut = drawn + rows.length > SHOWN_LINES ? SHOWN_LINES - drawn : rows.length;
    tbody.append(...rowsOf(rows.slice(0, cut), true));
    drawn += cut;
    if (cut < rows.length) rest.push({ header: null, rows: rows.slice(cut) });
  }
  const out = [el("div", { class: "code-scroll" }, el("table", { class: "code-diff numbered" }, columns(true), tbody))];
  if (rest.length) {
    const left = rest.reduce((sum, h) => sum + h.rows.length, 0);
    const more = el("button", { type: "button", "data-testid": "more-lines", text: `show ${left} more line${left === 1 ? "" : "s"}` });
    more.addEventListener("click", () => {
      for (const hunk of rest) {
        if (hunk.header) tbody.append(el("tr", { class: "hunk" }, el("td", { colspan: "4", text: hunk.header })));
        tbody.append(...rowsOf(hunk.rows, true));
      }
      more.remove();
    });
    out.push(more);
  }
  return out;
}

// A result's diff like a pull request's files: how much changed, a file
// list with +/- that leads to each file, then each file (its path whole,
// what happened to it) with its numbered hunks.
export function diffFiles(diffText) {
  const files = parseDiff(diffText);
  const wrap = el("div", { class: "diff pr", "data-testid": "diff" });
  if (!files.length) {
    wrap.append(el("p", { class: "meta", text: "no change" }));
    return wrap;
  }
  const added = files.reduce((s, f) => s + f.added, 0), removed = files.reduce((s, f) => s + f.removed, 0);
  wrap.append(el("p", { class: "meta", "data-testid": "diff-stat",
    text: `${files.length} file${files.length === 1 ? "" : "s"} changed, +${added} −${removed}` }));
  const index = el("ul", { class: "diff-files", "data-testid": "diff-files" });
  wrap.append(index);
  for (const file of files) {
    const what = file.status === "renamed" ? `renamed from ${file.was}` : file.status === "changed" ? "" : file.status;
    const section = el("details", { open: "", class: "diff-file", "data-testid": "diff-file", "data-path": file.path },
      el("summary", {}, el("code", { text: file.path }), " ",
        el("span", { class: "counts", text: counts(file) }), what ? el("span", { class: "meta", text: " " + what }) : ""),
      ...fileBody(file));
    const go = el("button", { type: "button", class: "link", text: file.path });
    go.addEventListener("click", () => { section.open = true; section.scrollIntoView({ block: "start" }); });
    index.append(el("li", {}, go, " ", el("span", { class: "counts", text: counts(file) }), what ? el("span", { class: "meta", text: " " + what }) : ""));
    wrap.append(section);
  }
  return wrap;
}
