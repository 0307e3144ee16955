/* The dashboard page: one plain script, no build step, no library.
 *
 * Memory contents are untrusted (anyone who talks to the bot writes them), so every piece of data
 * reaches the page through textContent or an attribute set by el(); innerHTML is never used.
 * Every request goes through api(): same-origin cookie plus the X-CSRF-Token from the page's meta tag,
 * and a JSON error ({"error", "detail"}) becomes an ApiError whose message the page shows as is.
 * memories.js (the table, inline edit, delete with undo, search), views.js (snapshot, people, reflections,
 * guilds, audit, settings) and graph.js build on what is here (window.Dash).
 */
"use strict";

const Dash = (window.Dash = {});

const TYPES = ["semantic", "episodic", "procedural"];
const KINDS = ["profile", "relationship", "preference", "project", "guidance", "behavioral", "event", "goal", "todo", "other"];

let csrf = document.querySelector('meta[name="csrf-token"]').content;

// -- small DOM helpers ----------------------------------------------------------------------------
/** el("td", {class: "x", text: "y", onclick: f, "aria-label": "z"}, child...): text only, never markup. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** A heading takes its column's alignment: over figures (td.num, right-aligned) it is .num too. */
function table(headers, rows, caption) {
  const first = [rows].flat(Infinity)[0];
  const numeric = (i) => Boolean(first && first.cells && first.cells[i] && first.cells[i].classList.contains("num"));
  const head = el("thead", {}, el("tr", {}, headers.map((h, i) => el("th", { scope: "col", class: numeric(i) && "num", text: h }))));
  return el("table", { class: "data" }, caption ? el("caption", { class: "sr-only", text: caption }) : null, head, el("tbody", {}, rows));
}

/** counted(1, "call") is "1 call", counted(1200, "call") "1,200 calls": a count as a person writes it. */
function counted(n, noun, plural) {
  return `${Number(n).toLocaleString("en")} ${n === 1 ? noun : plural || noun + "s"}`;
}

function empty(text) {
  return el("p", { class: "empty", text });
}

function formatDate(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().slice(0, 16).replace("T", " ");
}

function timeCell(iso) {
  return el("time", { datetime: iso || "", title: iso || "", text: formatDate(iso) });
}

function splitTags(text) {
  return String(text || "")
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);
}

function tierOf(m) {
  if (m.tier) return m.tier;
  const i = Number(m.importance) || 0;
  return i >= 8 ? "Critical" : i >= 6 ? "Important" : i >= 4 ? "Useful" : "Trivial";
}

function fillSelect(select, values) {
  if (select.dataset.any) select.append(el("option", { value: "", text: select.dataset.any }));
  for (const v of values) select.append(el("option", { value: v, text: v }));
}

function formValues(form) {
  const out = {};
  for (const [k, v] of new FormData(form)) if (String(v).trim() !== "") out[k] = String(v).trim();
  return out;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

// -- the API ----------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, message, detail) {
    super(message);
    this.status = status;
    this.detail = detail;
  }
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json", "X-CSRF-Token": csrf } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, `The dashboard server did not answer (${err.message}).`);
  }
  const data = (res.headers.get("Content-Type") || "").includes("json") ? await res.json().catch(() => null) : null;
  if (res.ok) return data;
  if (res.status === 401) throw new ApiError(401, "You are not logged in any more: log in again.", data && data.detail);
  const message = (data && data.error) || `${res.status} ${res.statusText || "error"} from ${path}`;
  throw new ApiError(res.status, message, data && data.detail);
}

/** The lines of an error: its one-line message, then each validation problem ("top_k: must be >= 1"). */
function errorLines(err) {
  const lines = [err.message || String(err)];
  const detail = err.detail;
  if (Array.isArray(detail)) {
    for (const item of detail) lines.push(problemLine(item));
  } else if (detail && typeof detail === "object" && detail.id && detail.content) {
    lines.push(`already stored: "${detail.content}"`); // a duplicate (409) names the memory it matched
  } else if (detail && typeof detail === "object") {
    for (const [k, v] of Object.entries(detail)) lines.push(`${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`);
  } else if (detail) {
    lines.push(String(detail));
  }
  return lines;
}

/** One validation problem: {"field", "problem"} from this API, or pydantic's {"loc", "msg"}. */
function problemField(item) {
  if (!item || typeof item !== "object") return "";
  return item.field !== undefined ? String(item.field) : (item.loc || []).join(".");
}

function problemLine(item) {
  if (!item || typeof item !== "object") return String(item);
  const text = item.problem || item.msg;
  if (!text) return JSON.stringify(item);
  const field = problemField(item);
  return field ? `${field}: ${text}` : text;
}

function showError(err, target) {
  const box = target || document.getElementById("banner");
  box.replaceChildren();
  errorLines(err).forEach((line, i) => box.append(el(i ? "div" : "strong", { class: i ? "detail" : "", text: line })));
  if (err.status === 401) box.append(" ", el("a", { href: "/login", text: "Log in" }));
  if (!target) box.append(el("button", { type: "button", class: "close", "aria-label": "Dismiss", text: "×", onclick: () => (box.hidden = true) }));
  box.hidden = false;
}

function clearError(target) {
  const box = target || document.getElementById("banner");
  box.hidden = true;
  box.replaceChildren();
}

/** A toast: text, an optional action button, gone after `ms` (the action cancels nothing by itself). */
function toast(text, { ms = 4000, action, onAction, kind = "info" } = {}) {
  const box = el("div", { class: `toast toast-${kind}`, role: "status" }, el("span", { text }));
  const close = () => box.remove();
  if (action) box.append(el("button", { type: "button", class: "toast-action", text: action, onclick: () => (close(), onAction()) }));
  const bar = el("div", { class: "toast-bar" });
  bar.style.animationDuration = `${ms}ms`;
  box.append(bar);
  document.getElementById("toasts").append(box);
  const timer = setTimeout(close, ms);
  return { element: box, close: () => (clearTimeout(timer), close()) };
}

// -- views, session, start ------------------------------------------------------------------------------
const loaders = {}; // view name -> what (re)loads it when it is shown
const inits = []; // each script's set-up, run once the page is parsed

function showView(name) {
  clearError();
  for (const tab of document.querySelectorAll(".tab")) {
    if (tab.dataset.view === name) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${name}`;
  if (loaders[name]) loaders[name]();
  if (location.hash !== `#${name}`) history.replaceState(null, "", `${location.pathname}${location.search}#${name}`);
}

async function initSession() {
  try {
    const session = await api("GET", "/api/session");
    if (csrf.startsWith("{{")) csrf = session.csrf; // a page served without its placeholder filled
    const who = document.getElementById("who");
    who.textContent = session.who || "";
    who.title = session.who ? `signed in as ${session.who}` : "";
  } catch (err) {
    showError(err);
  }
}

async function logout() {
  try {
    if (Dash.flushDeletes) await Dash.flushDeletes();
    await api("POST", "/logout");
  } catch (err) {
    if (err.status !== 0) showError(err);
  }
  location.href = "/login";
}

function start() {
  document.querySelectorAll(".type-select").forEach((s) => fillSelect(s, TYPES));
  document.querySelectorAll(".kind-select").forEach((s) => fillSelect(s, KINDS));
  document.querySelector('#new-form [name="kind"] option[value="other"]').defaultSelected = true;
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.dataset.view));
  document.getElementById("logout").addEventListener("click", logout);
  inits.forEach((init) => init());
  initSession();
  const first = location.hash.slice(1);
  showView(document.getElementById(`view-${first}`) ? first : "memories");
}

Object.assign(Dash, { TYPES, KINDS, el, table, counted, empty, api, ApiError, errorLines, problemField, showError, clearError, toast, timeCell, splitTags, tierOf, fillSelect, formValues, query, loaders, inits, showView });
Dash.csrf = () => csrf;
document.addEventListener("DOMContentLoaded", start);
