// SPDX-License-Identifier: Apache-2.0
// Written by scripts/embed-editor-page from Sources/settings-editor/Page/: change those files and run it.

extension Page {
    /// `Page/index.html`.
    static let htmlTemplate = ##"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{{csrf}}">
<meta name="start-dir" content="{{directory}}">
<title>Settings</title>
<link rel="stylesheet" href="/editor.css">
<script src="/editor.js" defer></script>
</head>
<body>
<div id="top">
<header>
  <h1>Settings</h1>
  <input id="search" type="search" aria-label="Search names, summaries and descriptions" placeholder="Search names, summaries, descriptions" autocomplete="off" spellcheck="false">
  <label class="filter"><input id="modified" type="checkbox"> Modified only</label>
  <span id="live" role="status" aria-live="polite"></span>
</header>
<div id="pending" role="region" aria-label="Pending changes" hidden>
  <strong id="pending-count"></strong>
  <ul id="pending-list"></ul>
  <button id="apply" type="button">Apply</button>
  <button id="discard" type="button">Discard</button>
  <span id="apply-error" class="error" role="alert"></span>
</div>
</div>
<div id="layout">
  <nav aria-label="Directories"><ul id="tree" role="tree" aria-label="Directories"></ul></nav>
  <main id="main" tabindex="-1"><p>Loading…</p></main>
</div>
</body>
</html>
"""##

    /// `Page/editor.js`.
    static let script = ##"""
// SPDX-License-Identifier: Apache-2.0
// The settings editor's page. Served by settings-editor as its own file (the Content-Security-Policy allows
// no inline script); it builds every element with textContent, never with HTML from data.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const startDir = document.querySelector('meta[name="start-dir"]').content;
const main = document.getElementById("main");
const tree = document.getElementById("tree");
const search = document.getElementById("search");
const modifiedOnly = document.getElementById("modified");
const live = document.getElementById("live");
const pendingBox = document.getElementById("pending");
const pendingList = document.getElementById("pending-list");
const pendingCount = document.getElementById("pending-count");
const applyError = document.getElementById("apply-error");

// Changes made on the page, sent together by Apply: key → {text, shown, serial}; resets: path → {serial}.
const pending = new Map();
const pendingResets = new Map();
// The serial of the last change of each key the page was told of (a pending change of it is compared with
// what the page showed, not with what it read first).
const seenSerial = new Map();
// What the page shows: {kind: "dir"|"key"|"search", path}.
let view = null;
let viewSerial = 0;
// How many times the main part was drawn (data-renders, for tests waiting for a redraw).
let renders = 0;

function drawn() {
  main.dataset.renders = String(++renders);
}

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

async function request(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  const type = response.headers.get("Content-Type") || "";
  const data = type.startsWith("application/json") ? await response.json() : await response.text();
  if (!response.ok) {
    const failure = new Error(data && data.message ? data.message : String(data));
    failure.name = data && data.error ? data.error : "HTTP " + response.status;
    failure.key = data && data.key;
    throw failure;
  }
  return data;
}

function query(params) {
  return Object.entries(params).map(([k, v]) => k + "=" + encodeURIComponent(v)).join("&");
}

function cssPath(path) {
  return path.replace(/["\\]/g, "\\$&");
}

function keyElements(key) {
  return document.querySelectorAll('#main [data-key="' + cssPath(key) + '"]');
}

// GVariant text of a string: single quotes, with \ ' and control characters escaped.
function gvQuote(text) {
  let out = "'";
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (ch === "\\" || ch === "'") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (code < 0x20 || code === 0x7f) out += "\\u" + code.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + "'";
}

// ---- The tree ----

function dirName(path) {
  const parts = path.split("/").filter(Boolean);
  return parts.length ? parts[parts.length - 1] + "/" : "/";
}

function treeItem(path, count) {
  const group = el("ul", { role: "group", hidden: true });
  const toggle = el("button", { type: "button", class: "toggle", "aria-label": "Expand " + path, text: "▸" });
  const label = el("a", { href: "#" + path, class: "dir-link" }, dirName(path), " ",
    el("span", { class: "count", title: count + " keys", text: String(count) }));
  const item = el("li", { role: "treeitem", "data-dir": path, "aria-expanded": "false" }, toggle, label, group);
  toggle.addEventListener("click", (event) => { event.stopPropagation(); expand(item, item.getAttribute("aria-expanded") !== "true"); });
  item.addEventListener("click", (event) => {
    if (event.target.closest("li") !== item) return;
    if (event.target === label || label.contains(event.target)) return; // the link opens the directory
    event.preventDefault();
    location.hash = "#" + path;
  });
  return item;
}

async function expand(item, open) {
  const group = item.querySelector(":scope > ul");
  const toggle = item.querySelector(":scope > .toggle");
  item.setAttribute("aria-expanded", open ? "true" : "false");
  toggle.textContent = open ? "▾" : "▸";
  toggle.setAttribute("aria-label", (open ? "Collapse " : "Expand ") + item.dataset.dir);
  group.hidden = !open;
  if (open && !group.dataset.loaded) {
    group.dataset.loaded = "1";
    const data = await request("/api/dir?" + query({ path: item.dataset.dir }));
    for (const dir of data.dirs) group.append(treeItem(dir.path, dir.count));
    if (!data.dirs.length) toggle.classList.add("leaf");
  }
}

async function revealInTree(path) {
  const parts = path.split("/").filter(Boolean);
  let current = "/";
  let item = tree.querySelector('[data-dir="/"]');
  for (const part of parts) {
    if (!item) return;
    await expand(item, true);
    current += part + "/";
    item = tree.querySelector('[data-dir="' + cssPath(current) + '"]');
  }
  for (const marked of tree.querySelectorAll("[aria-current]")) marked.removeAttribute("aria-current");
  if (item) item.setAttribute("aria-current", "true");
}

// ---- Editors ----

const numberTypes = new Set(["y", "n", "q", "i", "u", "x", "t", "d"]);

function editorFor(info, readonlyReason) {
  const key = info.key;
  const value = info.value;
  const type = info.type || "";
  let editor;
  const onChange = (text, shown) => setPending(key, text, shown);
  if (info.secret && !value) {
    return el("span", { class: "hidden-value", text: "hidden" });
  }
  if (type === "b") {
    editor = el("input", { type: "checkbox", role: "switch", "aria-label": key });
    editor.checked = value && value.plain === "true";
    editor.addEventListener("change", () => onChange(editor.checked ? "true" : "false", editor.checked ? "true" : "false"));
  } else if (info.choices && !type.startsWith("a")) {
    // A set of flags (an array whose elements are among the choices) takes the list editor below.
    editor = el("select", { "aria-label": key });
    for (const choice of info.choices) {
      const option = el("option", { value: choice.plain, text: choice.string !== undefined ? choice.string : choice.plain });
      if (value && value.plain === choice.plain) option.selected = true;
      editor.append(option);
    }
    if (!value) editor.selectedIndex = -1;
    editor.addEventListener("change", () => onChange(editor.value, editor.selectedOptions[0].textContent));
  } else if (numberTypes.has(type)) {
    editor = el("input", { type: "number", "aria-label": key, step: type === "d" ? "any" : "1", inputmode: type === "d" ? "decimal" : "numeric" });
    if (info.range) { editor.min = info.range.min.plain; editor.max = info.range.max.plain; }
    editor.value = value ? value.plain : "";
    editor.addEventListener("input", () => { if (editor.value !== "") onChange(editor.value, editor.value); });
  } else if (type === "s") {
    editor = el("input", { type: "text", "aria-label": key, spellcheck: "false" });
    editor.value = value && value.string !== undefined ? value.string : "";
    editor.addEventListener("input", () => onChange(gvQuote(editor.value), editor.value));
  } else if (type === "as") {
    editor = listEditor(key, value && value.strings ? value.strings : [], onChange);
  } else {
    editor = el("textarea", { "aria-label": key, rows: "1", spellcheck: "false" });
    editor.value = value ? value.text : "";
    let timer = null;
    editor.addEventListener("input", () => {
      onChange(editor.value, editor.value);
      clearTimeout(timer);
      timer = setTimeout(() => checkText(key, editor.value), 150);
    });
  }
  editor.classList.add("editor");
  editor.dataset.editor = key;
  if (readonlyReason) editor.title = readonlyReason;
  return editor;
}

function listEditor(key, items, onChange) {
  const box = el("div", { class: "list-editor", role: "group", "aria-label": key });
  const rows = el("ol");
  const changed = () => {
    const values = [...rows.querySelectorAll("input")].map((input) => input.value);
    onChange("[" + values.map(gvQuote).join(", ") + "]", JSON.stringify(values));
  };
  const addRow = (text) => {
    const input = el("input", { type: "text", spellcheck: "false" });
    input.value = text;
    input.addEventListener("input", changed);
    const remove = el("button", { type: "button", class: "small", text: "✕" });
    const row = el("li", {}, input, remove);
    remove.addEventListener("click", () => { row.remove(); relabel(); changed(); });
    rows.append(row);
    relabel();
    return input;
  };
  const relabel = () => {
    [...rows.children].forEach((row, index) => {
      row.querySelector("input").setAttribute("aria-label", key + " item " + (index + 1));
      row.querySelector("button").setAttribute("aria-label", "Remove item " + (index + 1) + " of " + key);
    });
  };
  for (const item of items) addRow(item);
  const add = el("button", { type: "button", class: "small", "aria-label": "Add an item to " + key, text: "Add" });
  add.addEventListener("click", () => { addRow("").focus(); changed(); });
  box.append(rows, add);
  box.setValue = (strings) => { rows.replaceChildren(); for (const item of strings) addRow(item); };
  return box;
}

const checks = new Map();
async function checkText(key, text) {
  const sequence = (checks.get(key) || 0) + 1;
  checks.set(key, sequence);
  let message = "";
  try {
    await request("/api/parse", { key, text });
  } catch (failure) {
    message = failure.name + ": " + failure.message;
  }
  if (checks.get(key) !== sequence) return; // a later check answers for a later text
  for (const element of keyElements(key)) {
    const error = element.querySelector(".error");
    if (!error) continue;
    if (message) { error.textContent = message; error.dataset.kind = "parse"; }
    else if (error.dataset.kind === "parse") { error.textContent = ""; delete error.dataset.kind; }
  }
}

function setEditorValue(element, value) {
  const editor = element.querySelector("[data-editor]");
  if (!editor || !value) return;
  if (editor.type === "checkbox") editor.checked = value.plain === "true";
  else if (editor.classList.contains("list-editor")) editor.setValue(value.strings || []);
  else if (editor.tagName === "SELECT") editor.value = value.plain;
  else if (editor.tagName === "TEXTAREA") editor.value = value.text;
  else if (editor.type === "text") editor.value = value.string !== undefined ? value.string : value.plain;
  else editor.value = value.plain;
}

// ---- Keys ----

function badges(info) {
  const box = el("span", { class: "badges" });
  if (info.locked) box.append(el("span", { class: "badge lock", title: "locked by the administrator: " + info.locked, text: "🔒 locked" }));
  if (info.modified) box.append(el("span", { class: "badge modified", title: "your value differs from the default", text: "modified" }));
  if (info.secret) box.append(el("span", { class: "badge secret", title: "a secret key", text: "secret" }));
  if (!info.registered) box.append(el("span", { class: "badge", title: "no schema: any type is accepted", text: "no schema" }));
  return box;
}

function sourceText(source) {
  return { user: "your value", administrator: "the administrator's default", schema: "the schema's default", none: "no value" }[source] || source || "unknown";
}

function keyBlock(info, full) {
  const valueText = el("code", { class: "value-text", text: info.secret && !info.value ? "hidden" : (info.value ? info.value.text : "unset") });
  const block = el(full ? "section" : "div", { class: full ? "key key-page" : "key", "data-key": info.key, "aria-label": info.key });
  const head = el(full ? "h2" : "div", { class: "key-head" },
    full ? info.key : el("a", { href: "#" + info.key, class: "key-name", text: info.name }),
    " ", el("span", { class: "type", title: "type", text: info.type || "?" }), " ", badges(info));
  block.append(head);
  if (info.summary) block.append(el("p", { class: "summary", text: info.summary }));
  const editorBox = el("div", { class: "editor-box" });
  const reason = info.locked ? "locked by the administrator (" + info.locked + "): the broker refuses writes" : null;
  editorBox.append(editorFor(info, reason));
  if (info.secret && !info.value) {
    const reveal = el("button", { type: "button", text: "Reveal", title: "Show the value of " + info.key });
    reveal.addEventListener("click", async () => {
      try {
        const data = await request("/api/reveal", { key: info.key });
        info.value = data.value;
        block.replaceWith(keyBlock(info, full));
      } catch (failure) {
        block.querySelector(".error").textContent = failure.name + ": " + failure.message;
      }
    });
    editorBox.append(" ", reveal);
  }
  block.append(editorBox);
  if (!full) block.append(el("div", { class: "current" }, "now ", valueText));
  block.append(el("div", { class: "note", role: "status" }));
  block.append(el("div", { class: "error", role: "alert" }));
  if (full) {
    const details = el("dl", { class: "details" });
    const row = (name, value) => { if (value !== null && value !== undefined && value !== "") details.append(el("dt", { text: name }), el("dd", {}, value)); };
    row("Value", valueText);
    row("Type", info.type);
    row("Default", info.default ? el("code", { text: info.default.text }) : "none");
    row("Comes from", sourceText(info.source));
    if (info.range) row("Range", el("code", { text: info.range.min.text + " … " + info.range.max.text }));
    if (info.choices) row("Choices", el("code", { text: info.choices.map((c) => c.text).join(", ") }));
    row("Summary", info.summary);
    row("Description", info.description);
    if (info.locked) row("Lock", el("span", { title: "locked", text: "🔒 locked: " + info.locked }));
    row("Writable", info.writable ? "yes" : "no");
    if (info.problem) row("Problem", info.problem);
    block.append(details);
  }
  const actions = el("div", { class: "actions" });
  const reset = el("button", { type: "button", text: "Reset", title: "Reset " + info.key + " to its default (pending until Apply)" });
  reset.addEventListener("click", () => addReset(info.key));
  const history = el("button", { type: "button", text: "History", title: "History of " + info.key });
  history.addEventListener("click", () => showHistory(info.key));
  actions.append(reset, history);
  block.append(actions);
  const change = pending.get(info.key);
  if (change) markPending(block, change);
  return block;
}

// ---- Pending changes ----

function setPending(key, text, shown) {
  const existing = pending.get(key);
  pending.set(key, { text, shown, serial: existing ? existing.serial : Math.max(viewSerial, seenSerial.get(key) || 0) });
  for (const element of keyElements(key)) markPending(element, pending.get(key));
  renderPending();
}

function markPending(element, change) {
  element.classList.add("is-pending");
  const error = element.querySelector(".error");
  if (error && error.dataset.kind !== "parse") error.textContent = "";
}

function addReset(path) {
  pendingResets.set(path, { serial: viewSerial });
  pending.delete(path);
  renderPending();
}

function renderPending() {
  const count = pending.size + pendingResets.size;
  pendingBox.hidden = count === 0;
  pendingCount.textContent = count === 1 ? "1 pending change" : count + " pending changes";
  pendingList.replaceChildren();
  for (const [key, change] of pending) {
    const drop = el("button", { type: "button", class: "small", "aria-label": "Drop the change of " + key, text: "✕" });
    drop.addEventListener("click", () => { pending.delete(key); for (const e of keyElements(key)) e.classList.remove("is-pending"); renderPending(); refresh(); });
    pendingList.append(el("li", { "data-pending": key }, el("code", { text: key }), " = ", el("code", { text: change.text }), " ", drop));
  }
  for (const path of pendingResets.keys()) {
    const drop = el("button", { type: "button", class: "small", "aria-label": "Drop the reset of " + path, text: "✕" });
    drop.addEventListener("click", () => { pendingResets.delete(path); renderPending(); });
    pendingList.append(el("li", { "data-pending": path }, "reset ", el("code", { text: path }), " ", drop));
  }
  if (!count) applyError.textContent = "";
}

async function apply() {
  const serials = [...pending.values(), ...pendingResets.values()].map((c) => c.serial);
  const body = {
    ifSerial: Math.min(...serials),
    sets: [...pending].map(([key, change]) => ({ key, text: change.text })),
    resets: [...pendingResets.keys()],
  };
  applyError.textContent = "";
  try {
    const data = await request("/api/apply", body);
    const keys = [...pending.keys()];
    pending.clear();
    pendingResets.clear();
    renderPending();
    for (const key of keys) for (const e of keyElements(key)) e.classList.remove("is-pending");
    live.textContent = "Applied as commit " + data.serial;
    await refresh();
  } catch (failure) {
    const text = failure.name + ": " + failure.message;
    applyError.textContent = text;
    const keys = failure.key ? [failure.key] : [...pending.keys()];
    for (const key of keys) for (const element of keyElements(key)) element.querySelector(".error").textContent = text;
    if (failure.name === "Conflict") {
      // Another process changed a key since the page read it: its value is shown, and the next Apply (a
      // decision taken after seeing it) is compared with what the page reads now.
      const now = await refresh(true);
      for (const change of pending.values()) change.serial = now;
      for (const change of pendingResets.values()) change.serial = now;
    }
  }
}

// ---- Views ----

async function refresh(keepErrors) {
  if (!view) return viewSerial;
  const errors = new Map();
  if (keepErrors) for (const e of document.querySelectorAll("#main [data-key] .error")) errors.set(e.closest("[data-key]").dataset.key, e.textContent);
  if (view.kind === "dir") await showDir(view.path, true);
  else if (view.kind === "key") await showKey(view.path, true);
  else await runSearch();
  for (const [key, text] of errors) for (const e of keyElements(key)) { const error = e.querySelector(".error"); if (error && text) error.textContent = text; }
  return viewSerial;
}

async function showDir(path, again) {
  const data = await request("/api/dir?" + query({ path }));
  view = { kind: "dir", path };
  viewSerial = data.serial;
  const heading = el("h2", {}, path, " ", el("span", { class: "count", text: data.count + " keys" }));
  const actions = el("div", { class: "actions" });
  const reset = el("button", { type: "button", text: "Reset", title: "Reset every key under " + path + " (pending until Apply)" });
  reset.addEventListener("click", () => addReset(path));
  const history = el("button", { type: "button", text: "History", title: "History of " + path });
  history.addEventListener("click", () => showHistory(path));
  const exportButton = el("button", { type: "button", text: "Export", title: "Export " + path + " as settingsctl dump prints it" });
  exportButton.addEventListener("click", () => showExport(path));
  actions.append(reset, history, exportButton);
  const section = el("section", { class: "directory", "data-dir": path, "aria-label": "Directory " + path }, heading, actions, el("div", { id: "panel" }));
  if (data.dirs.length) {
    const list = el("ul", { class: "subdirs" });
    for (const dir of data.dirs) list.append(el("li", {}, el("a", { href: "#" + dir.path, text: dirName(dir.path) }), " ", el("span", { class: "count", text: String(dir.count) })));
    section.append(list);
  }
  const keys = el("div", { class: "keys" });
  for (const info of data.keys) keys.append(keyBlock(info, false));
  if (!data.keys.length && !data.dirs.length) keys.append(el("p", { text: "Nothing here." }));
  section.append(keys);
  main.replaceChildren(section);
  drawn();
  if (!again) { revealInTree(path); document.title = path + " — Settings"; }
}

async function showKey(key, again) {
  const info = await request("/api/key?" + query({ key }));
  view = { kind: "key", path: key };
  viewSerial = info.serial;
  const parent = key.slice(0, key.lastIndexOf("/") + 1);
  main.replaceChildren(el("nav", { class: "crumbs" }, el("a", { href: "#" + parent, text: "↑ " + parent })), el("div", { id: "panel" }), keyBlock(info, true));
  drawn();
  if (!again) { revealInTree(parent); document.title = key + " — Settings"; }
}

let searchSequence = 0;
async function runSearch() {
  const text = search.value.trim();
  const sequence = ++searchSequence;
  const data = await request("/api/search?" + query({ q: text, under: "/", modified: modifiedOnly.checked ? "1" : "0" }));
  if (sequence !== searchSequence) return;
  view = { kind: "search", path: text };
  const what = modifiedOnly.checked ? (text ? "modified keys matching “" + text + "”" : "modified keys") : "keys matching “" + text + "”";
  const heading = el("h2", { id: "results-heading" }, data.total + " " + what);
  const list = el("ul", { class: "results", "aria-labelledby": "results-heading" });
  for (const item of data.keys) {
    list.append(el("li", { class: "result", "data-key": item.key },
      el("a", { href: "#" + item.key, text: item.key }), item.summary ? el("span", { class: "summary", text: " — " + item.summary }) : null));
  }
  const notes = [];
  if (data.total > data.keys.length) notes.push("showing the first " + data.keys.length);
  if (data.described < data.known) notes.push("summaries read for " + data.described + " of " + data.known + " keys so far");
  main.replaceChildren(heading, notes.length ? el("p", { class: "hint", text: notes.join("; ") }) : "", list);
  drawn();
}

function route() {
  const path = decodeURIComponent(location.hash.slice(1)) || startDir;
  if (search.value.trim() || modifiedOnly.checked) { search.value = ""; modifiedOnly.checked = false; }
  (path.endsWith("/") ? showDir(path) : showKey(path)).catch(showFailure);
}

function showFailure(failure) {
  main.replaceChildren(el("p", { class: "error", role: "alert", text: failure.name + ": " + failure.message }));
}

// ---- History and export ----

function panel() {
  let box = document.getElementById("panel");
  if (!box) { box = el("div", { id: "panel" }); main.prepend(box); }
  return box;
}

function formatTime(ms) {
  const date = new Date(ms);
  return date.toLocaleString();
}

async function showHistory(path) {
  const box = panel();
  try {
    const data = await request("/api/history?" + query({ path }));
    const list = el("ol", { class: "history" });
    for (const commit of data.commits) {
      const changes = el("ul", { class: "changes" });
      for (const change of commit.changes) {
        changes.append(el("li", {}, el("code", { text: change.key }), ": ",
          change.omitted ? "(" + change.omitted + ")" : el("span", {},
            el("code", { class: "old", text: change.old ? change.old.text : "unset" }), " → ",
            el("code", { class: "new", text: change.new ? change.new.text : "unset" }))));
      }
      const undo = el("button", { type: "button", text: "Undo", title: "Undo commit " + commit.serial });
      const error = el("span", { class: "error", role: "alert" });
      undo.addEventListener("click", async () => {
        try {
          const result = await request("/api/undo", { serial: commit.serial });
          live.textContent = "Undid commit " + commit.serial + " as commit " + result.serial;
          await refresh();
          await showHistory(path);
        } catch (failure) {
          error.textContent = failure.name + ": " + failure.message;
        }
      });
      const who = commit.process ? commit.process + (commit.pid ? " (" + commit.pid + ")" : "") : commit.writer;
      list.append(el("li", { class: "commit", "data-serial": String(commit.serial) },
        el("div", { class: "commit-head" }, "#" + commit.serial + " · " + formatTime(commit.time) + " · " + who), changes, undo, " ", error));
    }
    const close = el("button", { type: "button", class: "small", "aria-label": "Close the history", text: "✕" });
    close.addEventListener("click", () => box.replaceChildren());
    box.replaceChildren(el("section", { class: "history-panel", "aria-label": "History of " + path },
      el("h3", {}, "History of " + path + " ", close),
      data.commits.length ? list : el("p", { text: "No change of it is in the history." })));
  } catch (failure) {
    box.replaceChildren(el("p", { class: "error", role: "alert", text: failure.name + ": " + failure.message }));
  }
}

async function showExport(path) {
  const box = panel();
  try {
    const text = await request("/api/export?" + query({ dir: path }));
    const close = el("button", { type: "button", class: "small", "aria-label": "Close the export", text: "✕" });
    close.addEventListener("click", () => box.replaceChildren());
    const save = el("a", { href: "/api/export?" + query({ dir: path }), download: "settings.dump", text: "Save as a file" });
    box.replaceChildren(el("section", { class: "export-panel", "aria-label": "Export of " + path },
      el("h3", {}, "Export of " + path + " ", close), el("p", {}, save, " — load it with settingsctl load " + path),
      el("pre", { id: "export", tabindex: "0", text: text })));
  } catch (failure) {
    box.replaceChildren(el("p", { class: "error", role: "alert", text: failure.name + ": " + failure.message }));
  }
}

// ---- Live updates ----

function listen() {
  const events = new EventSource("/api/events");
  events.addEventListener("open", () => { live.dataset.state = "live"; live.title = "Following changes as they happen"; });
  events.addEventListener("error", () => { live.dataset.state = "reconnecting"; });
  events.addEventListener("message", (message) => {
    const change = JSON.parse(message.data);
    let unseen = false;
    const touched = Object.entries(change.values).map(([key, value]) => [key, value]).concat(change.removed.map((key) => [key, null]));
    for (const [key, value] of touched) {
      const elements = keyElements(key);
      if (!elements.length && view && view.kind === "dir" && key.startsWith(view.path) && !key.slice(view.path.length).includes("/")) unseen = true;
      for (const element of elements) {
        const shown = element.querySelector(".value-text");
        if (shown && !(shown.textContent === "hidden")) shown.textContent = value ? value.text : "unset";
        element.classList.add("just-changed");
        setTimeout(() => element.classList.remove("just-changed"), 1500);
        const note = element.querySelector(".note");
        if (!pending.has(key)) seenSerial.set(key, change.serial);
        if (pending.has(key) || pendingResets.has(key)) {
          if (note) note.textContent = "Changed elsewhere to " + (value ? value.text : "unset") + " while you edited: Apply will be refused, so that it is not overwritten.";
        } else {
          if (note) note.textContent = "";
          if (value) setEditorValue(element, value);
        }
      }
    }
    // A key whose value is not sent (a secret, or one the editor has not described yet): shown again as the
    // server now gives it, a secret hidden until Reveal.
    for (const key of change.withheld || []) {
      const elements = keyElements(key);
      if (!elements.length && view && view.kind === "dir" && key.startsWith(view.path) && !key.slice(view.path.length).includes("/")) unseen = true;
      for (const element of elements) {
        element.classList.add("just-changed");
        setTimeout(() => element.classList.remove("just-changed"), 1500);
        const note = element.querySelector(".note");
        if (!pending.has(key)) seenSerial.set(key, change.serial);
        if (pending.has(key) || pendingResets.has(key)) {
          if (note) note.textContent = "Changed elsewhere while you edited: Apply will be refused, so that it is not overwritten.";
        } else {
          unseen = true;
        }
      }
    }
    live.textContent = "Last change: commit " + change.serial;
    if (unseen || change.resync) refresh(true);
  });
}

// ---- Start ----

document.getElementById("apply").addEventListener("click", apply);
document.getElementById("discard").addEventListener("click", () => {
  pending.clear(); pendingResets.clear(); renderPending(); refresh();
});
search.addEventListener("input", () => {
  if (search.value.trim() || modifiedOnly.checked) runSearch().catch(showFailure); else route();
});
modifiedOnly.addEventListener("change", () => {
  if (search.value.trim() || modifiedOnly.checked) runSearch().catch(showFailure); else route();
});
document.addEventListener("keydown", (event) => {
  if (event.key === "/" && document.activeElement === document.body) { event.preventDefault(); search.focus(); }
  if (event.key === "Escape" && document.activeElement === search) { search.value = ""; route(); }
});
window.addEventListener("hashchange", route);
window.addEventListener("beforeunload", (event) => { if (pending.size || pendingResets.size) event.preventDefault(); });
tree.append(treeItem("/", 0));
request("/api/dir?" + query({ path: "/" })).then((data) => {
  tree.querySelector('[data-dir="/"] .count').textContent = String(data.count);
}).catch(() => {});
listen();
route();
"""##

    /// `Page/editor.css`.
    static let style = ##"""
/* SPDX-License-Identifier: Apache-2.0 */
/* The settings editor's page: one column under 700 px, tree and keys side by side above. */
:root { color-scheme: light dark; --accent: #2a6fdb; --muted: #6b7280; --line: #d0d4da; --pending: #fff4d6; --bad: #b3261e; }
@media (prefers-color-scheme: dark) { :root { --line: #3a3f47; --pending: #3b3219; --bad: #ff8a80; --muted: #9aa3ad; } }
* { box-sizing: border-box; }
/* A control scrolled to by the keyboard stays clear of the bar at the top. */
html { scroll-padding-top: 7rem; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; }
#top { position: sticky; top: 0; z-index: 2; background: Canvas; }
header { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; padding: .6rem 1rem; border-bottom: 1px solid var(--line); }
h1 { font-size: 1.1rem; margin: 0; }
#search { flex: 1 1 14rem; min-width: 0; padding: .4rem .6rem; font: inherit; }
#live { color: var(--muted); font-size: .85rem; }
#live[data-state="live"]::before { content: "● "; color: #2e9d4f; }
#pending { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; padding: .5rem 1rem; background: var(--pending); border-bottom: 1px solid var(--line); }
#pending[hidden] { display: none; }
#pending ul { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: .25rem .75rem; flex: 1 1 12rem; }
#layout { display: grid; grid-template-columns: minmax(12rem, 22rem) 1fr; }
nav { border-right: 1px solid var(--line); padding: .5rem; overflow: auto; }
main { padding: .75rem 1rem 3rem; min-width: 0; }
ul[role="tree"], ul[role="group"] { list-style: none; margin: 0; padding-left: .9rem; }
ul[role="tree"] { padding-left: 0; }
li[role="treeitem"] { white-space: nowrap; }
li[aria-current] > a { font-weight: 600; }
.toggle { border: 0; background: none; font: inherit; width: 1.4rem; cursor: pointer; color: inherit; }
.toggle.leaf { visibility: hidden; }
.count { color: var(--muted); font-size: .8rem; }
a { color: var(--accent); }
button { font: inherit; padding: .25rem .7rem; cursor: pointer; }
button.small { padding: 0 .4rem; }
:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
.key { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .7rem; margin: .5rem 0; }
.key.is-pending { background: var(--pending); }
.key.just-changed { box-shadow: 0 0 0 2px #2e9d4f; transition: box-shadow .3s; }
.key-head { font-weight: 600; overflow-wrap: anywhere; }
h2.key-head { font-size: 1.1rem; }
.type { font: .8rem ui-monospace, monospace; color: var(--muted); }
.badge { font-size: .75rem; border: 1px solid var(--line); border-radius: 1rem; padding: 0 .45rem; margin-left: .3rem; font-weight: normal; }
.badge.lock { border-color: #c98a00; }
.badge.modified { border-color: var(--accent); }
.summary { color: var(--muted); margin: .2rem 0; }
.editor-box { margin: .35rem 0; }
.editor-box input[type="text"], .editor-box input[type="number"], .editor-box select, .editor-box textarea { font: .95rem ui-monospace, monospace; padding: .25rem .4rem; max-width: 100%; }
.editor-box input[type="text"], .editor-box textarea { width: 100%; }
.editor-box textarea { min-height: 2.2rem; resize: vertical; }
.list-editor ol { margin: 0 0 .3rem; padding-left: 1.6rem; }
.list-editor li { display: flex; gap: .3rem; margin: .15rem 0; }
.list-editor li input { flex: 1; min-width: 0; }
.current { font-size: .85rem; color: var(--muted); overflow-wrap: anywhere; }
.note { color: #a15c00; font-size: .9rem; }
.error { color: var(--bad); font-weight: 600; overflow-wrap: anywhere; }
.actions { display: flex; flex-wrap: wrap; gap: .4rem; margin-top: .3rem; }
.details { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: .6rem 0; }
.details dt { color: var(--muted); }
.details dd { margin: 0; overflow-wrap: anywhere; }
.subdirs { columns: 14rem; padding-left: 1rem; }
.results { padding-left: 1rem; }
.results li { margin: .2rem 0; overflow-wrap: anywhere; }
.hint { color: var(--muted); }
#panel:empty { display: none; }
#panel { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .8rem; margin: .5rem 0; }
.history { padding-left: 1.2rem; }
.commit { margin: .4rem 0; }
.commit-head { color: var(--muted); font-size: .85rem; }
.changes { padding-left: 1rem; margin: .1rem 0; overflow-wrap: anywhere; }
pre#export { overflow: auto; max-height: 20rem; padding: .5rem; border: 1px solid var(--line); }
@media (max-width: 700px) {
  #layout { grid-template-columns: 1fr; }
  nav { position: static; max-height: 12rem; border-right: 0; border-bottom: 1px solid var(--line); }
  .details { grid-template-columns: 1fr; }
  .details dd { margin-bottom: .3rem; }
}
"""##

}
