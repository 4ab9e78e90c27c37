// The operator's console: one page, plain JavaScript, talking only to the public API with the person's token.
//
// Everything shown comes from the API and is put in the page as text (never as HTML: proposals are written by
// agents). Everything kind-specific comes from the pending item (its labels, its decision path and words) or, for
// an item that does not carry them, from the kind registry at /console/kinds.json. Signing in: a pasted token, or
// the organisation's OpenID Connect issuer when /console/config.json names one (oidc.js).

import * as oidc from "./oidc.js";

const TOKEN_KEY = "assent.console.token";
const main = document.getElementById("main");
const announcer = document.getElementById("announce");
let registry = { sections: [], kinds: {} };
let operations = {}; // path template -> methods, from the public API's own document (/openapi.json)
let leaving = () => {}; // what the current view stops (its live stream) when another view opens
let signInMessage = null; // why the sign-in page shows, when a token was refused
let generation = 0; // the current view's number: a view that a later one replaced starts no stream
let config = { oidc: null }; // /console/config.json: the issuer to sign in with, if any

// --- small helpers ------------------------------------------------------------------------------------------

/** An element: h("button", {type: "button", onclick}, "text", child...). Strings become text nodes. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function announce(text) {
  announcer.textContent = "";
  // A new text node after a tick, so that a screen reader reads a repeated message again.
  setTimeout(() => { announcer.textContent = text; }, 50);
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

class ApiError extends Error {
  constructor(status, body) {
    super(typeof body?.detail === "string" ? body.detail : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** Call the public API with the token; the parsed JSON body, or ApiError. A refused token signs out. */
async function api(method, path, body, headers = {}) {
  const response = await fetch(path, {
    method,
    headers: {
      Authorization: `Bearer ${token()}`,
      Accept: "application/json",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = { detail: text }; }
  if (response.status === 401) {
    tokenRefused();
    throw new ApiError(401, parsed);
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

/** The API refused the token: back to the sign-in page, which says why. */
function tokenRefused() {
  sessionStorage.removeItem(TOKEN_KEY);
  signInMessage = "The token was refused (it may have expired): sign in again.";
  location.hash = "#/sign-in";
}

/** Download what the API answers at ``path`` (with the token, which a link cannot send): the body becomes a Blob
 * that the browser saves under the name the answer gives (else ``fallback``). Answers the name and the size. */
async function download(path, fallback) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${token()}` } });
  if (!response.ok) {
    let parsed = null;
    try { parsed = await response.json(); } catch { /* not JSON */ }
    if (response.status === 401) tokenRefused();
    throw new ApiError(response.status, parsed);
  }
  const blob = await response.blob();
  const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "")?.[1] || fallback;
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return { name, size: blob.size };
}

function detailOf(error) {
  if (!(error instanceof ApiError)) return String(error);
  const detail = error.body?.detail;
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
  return `${error.message} (${error.status})`;
}

function idempotencyKey() {
  return crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

function when(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

/** A time as a ``<time>`` element: how long ago in words ("3 minutes ago", the browser's language), and the date
 * and time in the browser's own locale and zone as its title (and ``datetime``, the machine's). */
function timeAgo(value) {
  const date = new Date(value);
  if (!value || Number.isNaN(date.getTime())) return value ? String(value) : "";
  const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" }).format(date);
  return h("time", { datetime: date.toISOString(), title: absolute }, ago(value));
}

function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/** The lifetimes a login grant offers (an ISO 8601 duration each; none: until the session closes). */
const LIFETIMES = [["", "Until the session closes"], ["PT1H", "1 hour"], ["PT8H", "8 hours"], ["P1D", "1 day"]];

/** A labelled choice of a grant's lifetime; ``.value`` is the duration chosen ("" for none). */
function lifetimeChoice(id, label) {
  const select = h("select", { id, class: "lifetime", "aria-label": label },
    LIFETIMES.map(([value, text]) => h("option", { value }, text)));
  return select;
}

/** How long a grant with an expiry has left ("expires in 3 hours"), or that it lapsed. */
function expiresIn(value, now = Date.now()) {
  const left = new Date(value).getTime() - now;
  if (Number.isNaN(left)) return "";
  if (left <= 0) return `lapsed ${when(value)}`;
  const minutes = Math.ceil(left / 60_000);
  if (minutes < 60) return `expires in ${plural(minutes, "minute")}`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `expires in ${plural(hours, "hour")}`;
  return `expires in ${plural(Math.round(hours / 24), "day")}`;
}

/** What the Logins popover says of a login's grant: who granted it, when, and until when; or that it lapsed or was
 * revoked. */
function grantLine(c) {
  if (c.granted) {
    return `Granted by ${c.granted_by} ${when(c.granted_at)}${c.expires_at ? ` · ${expiresIn(c.expires_at)}` : " · until the session closes"}`;
  }
  if (c.revoked_by) return `Revoked by ${c.revoked_by} ${when(c.revoked_at)}`;
  if (c.expires_at) return `Granted by ${c.granted_by}, lapsed ${when(c.expires_at)}`;
  return "Not granted";
}

/** A unified diff as coloured lines: additions, removals, hunk headers and context, each marked for a reader. */
function diffBlock(diff, label) {
  const lines = (diff || "").replace(/\n$/, "").split("\n");
  const pre = h("pre", { class: "diff", tabindex: "0", "aria-label": label });
  for (const line of lines) {
    let cls = "ctx";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    const sign = { add: "added: ", del: "removed: " }[cls];
    pre.append(h("span", { class: `line ${cls}` }, sign ? h("span", { class: "visually-hidden" }, sign) : null, line || " "));
  }
  return pre;
}

// --- review: unified and side-by-side diffs with word-level highlights ----------------------------------------
//
// The owner sends each field's unified diff; the word-level highlights inside a changed line are computed here, by a
// longest-common-subsequence over the line's words (a few dozen tokens a line: no library needed, nothing to vendor).

const DIFF_VIEW_KEY = "assent.console.diffView";

function diffView() {
  return localStorage.getItem(DIFF_VIEW_KEY) === "split" ? "split" : "unified";
}

/** A line's tokens: runs of word characters, runs of spaces, and single other characters. */
function tokens(text) {
  return text.match(/\w+|\s+|[^\w\s]/gu) || [];
}

/** Which tokens of ``a`` and of ``b`` are not in their longest common subsequence: two arrays of booleans. */
function wordChanges(a, b) {
  const n = a.length, m = b.length;
  if (n * m > 250_000) return [a.map(() => true), b.map(() => true)]; // a very long line: marked whole
  const table = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const inA = a.map(() => true), inB = b.map(() => true);
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { inA[i] = false; inB[j] = false; i++; j++; }
    else if (table[i + 1][j] >= table[i][j + 1]) i++;
    else j++;
  }
  return [inA, inB];
}

/** A line's text with its changed words in ``<mark>`` (``cls``: word-add or word-del). */
function markedText(text, toks, changedFlags, cls) {
  if (!changedFlags) return [text || " "];
  const out = [];
  toks.forEach((t, k) => {
    if (changedFlags[k] && t.trim()) out.push(h("mark", { class: cls }, t));
    else if (typeof out[out.length - 1] === "string") out[out.length - 1] += t;
    else out.push(t);
  });
  return out.length ? out : [" "];
}

/** A unified diff as rows: {type: file|hunk|ctx|del|add, text, pair}; each removed line of a run is paired with the
 * added line at the same place of the run that follows it (their word changes are computed together). */
function diffRows(diff) {
  const rows = (diff || "").replace(/\n$/, "").split("\n").map((line) => {
    let type = "ctx";
    if (line.startsWith("+++") || line.startsWith("---")) type = "file";
    else if (line.startsWith("@@")) type = "hunk";
    else if (line.startsWith("+")) type = "add";
    else if (line.startsWith("-")) type = "del";
    return { type, line, text: type === "ctx" || type === "add" || type === "del" ? line.slice(1) : line };
  });
  for (let k = 0; k < rows.length; k++) {
    if (rows[k].type !== "del" || (k > 0 && rows[k - 1].type === "del")) continue;
    let end = k;
    while (end < rows.length && rows[end].type === "del") end++;
    let addEnd = end;
    while (addEnd < rows.length && rows[addEnd].type === "add") addEnd++;
    for (let x = 0; x < Math.min(end - k, addEnd - end); x++) {
      const del = rows[k + x], add = rows[end + x];
      const a = tokens(del.text), b = tokens(add.text);
      const [ca, cb] = wordChanges(a, b);
      Object.assign(del, { toks: a, changes: ca, pair: add });
      Object.assign(add, { toks: b, changes: cb, pair: del });
    }
  }
  return rows;
}

/** Lines added and removed in a unified diff (its ``+++``/``---`` header apart): what the tray's ``lines`` count. */
function diffCounts(rows) {
  return { added: rows.filter((r) => r.type === "add").length, removed: rows.filter((r) => r.type === "del").length };
}

/** The unified view: one line a row, a removed or added line's changed words marked. */
function unifiedDiff(rows, label) {
  const pre = h("pre", { class: "diff", tabindex: "0", "aria-label": label });
  for (const r of rows) {
    const sign = { add: "added: ", del: "removed: " }[r.type];
    const body = r.type === "add" || r.type === "del"
      ? [r.line[0], ...markedText(r.text, r.toks, r.changes, `word-${r.type}`)] : [r.line || " "];
    pre.append(h("span", { class: `line ${r.type}` }, sign ? h("span", { class: "visually-hidden" }, sign) : null, ...body));
  }
  return pre;
}

/** The side-by-side view: a table, the text before on the left and after on the right, a changed line facing its
 * new version with the changed words marked. */
function splitDiff(rows, label) {
  const body = [];
  for (let k = 0; k < rows.length; k++) {
    const r = rows[k];
    if (r.type === "file") continue;
    if (r.type === "hunk") { body.push(h("tr", { class: "hunk" }, h("td", { colspan: "2" }, r.line))); continue; }
    if (r.type === "ctx") { body.push(h("tr", {}, h("td", { class: "ctx" }, r.text || " "), h("td", { class: "ctx" }, r.text || " "))); continue; }
    // A run of removed lines and the added ones after it, side by side.
    const dels = [], adds = [];
    while (k < rows.length && rows[k].type === "del") dels.push(rows[k++]);
    while (k < rows.length && rows[k].type === "add") adds.push(rows[k++]);
    k--;
    for (let x = 0; x < Math.max(dels.length, adds.length); x++) {
      const d = dels[x], a = adds[x];
      body.push(h("tr", {},
        d ? h("td", { class: "del" }, h("span", { class: "visually-hidden" }, "removed: "), ...markedText(d.text, d.toks, d.changes, "word-del")) : h("td", { class: "empty" }),
        a ? h("td", { class: "add" }, h("span", { class: "visually-hidden" }, "added: "), ...markedText(a.text, a.toks, a.changes, "word-add")) : h("td", { class: "empty" })));
    }
  }
  return h("div", { class: "split-wrap", tabindex: "0", role: "group", "aria-label": `${label}, side by side` },
    h("table", { class: "diff split" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Before"), h("th", { scope: "col" }, "After"))),
      h("tbody", {}, body)));
}

/** A card's changed fields for review: the Unified / Side by side switch (remembered in localStorage), an outline
 * with each field's +/− counts linking to its section (where there are several), and each field's diff. */
function reviewView(fields, prefix) {
  const parsed = fields.map((f, i) => ({ field: f, rows: diffRows(f.diff), id: `${prefix}-field-${i}` }));
  const sections = h("div", { class: "review" });
  const draw = () => {
    const split = diffView() === "split";
    sections.replaceChildren(...parsed.map(({ field, rows, id }) => {
      const label = field.name ? `Changes to ${field.name}` : "Changes";
      return h("section", { id, tabindex: "-1" },
        field.name ? h("h4", {}, `${field.name} `, h("span", { class: "count" }, counts(field.lines || diffCounts(rows)))) : null,
        split ? splitDiff(rows, label) : unifiedDiff(rows, label));
    }));
  };
  const buttons = [["unified", "Unified"], ["split", "Side by side"]].map(([value, text]) =>
    h("button", { type: "button", class: "chip", "aria-pressed": String(diffView() === value), dataset: { view: value },
      onclick: () => {
        localStorage.setItem(DIFF_VIEW_KEY, value);
        for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.view === value));
        draw();
      } }, text));
  const parts = [h("div", { class: "toolbar view-switch", role: "group", "aria-label": "Diff view" }, ...buttons)];
  if (parsed.length > 1) {
    const total = parsed.reduce((sum, p) => {
      const c = diffCounts(p.rows);
      return { added: sum.added + c.added, removed: sum.removed + c.removed };
    }, { added: 0, removed: 0 });
    parts.push(h("nav", { class: "outline", "aria-label": "Changed fields" },
      h("p", { class: "hint outline-total", dataset: { added: total.added, removed: total.removed } },
        `${plural(parsed.length, "field")} changed · ${counts(total)}`),
      h("ul", { class: "plain" }, parsed.map(({ field, rows, id }) => {
        const c = diffCounts(rows);
        return h("li", { dataset: { added: c.added, removed: c.removed } },
          h("a", { href: `#${id}`, onclick: (event) => {
            event.preventDefault();
            const target = document.getElementById(id);
            target?.scrollIntoView({ block: "start" });
            target?.focus();
          } }, field.name || "Changes"), " ", h("span", { class: "count" }, counts(c)));
      }))));
  }
  draw();
  return [...parts, sections];
}

function counts(lines) {
  if (!lines) return "";
  return `+${lines.added ?? 0} −${lines.removed ?? 0}`;
}

function labelOf(target) {
  if (!target) return "";
  return target.label || target.ref || target.id || JSON.stringify(target);
}

function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, detailOf(error));
}

function heading(text) {
  document.title = `${text} · Assent console`;
  return h("h1", { id: "page-title" }, text);
}

let firstView = true;

/** Put a page's content in place. A later page takes the focus (a reader hears the new page); the first leaves it
 * at the document's start, so that the first Tab reaches the skip link. A part a page does not have (null, as
 * ``h`` takes it) is left out: the DOM would write it as the text "null". */
function show(...children) {
  main.replaceChildren(...children.filter((child) => child !== undefined && child !== null && child !== false));
  if (!firstView) main.focus({ preventScroll: true });
  firstView = false;
}

// --- sign in ------------------------------------------------------------------------------------------------

/** Why the API refuses a token (its words and status), or null when it takes it: any read proves a token. */
async function refusal(candidate) {
  const response = await fetch("/api/activity?limit=1", { headers: { Authorization: `Bearer ${candidate}` } });
  if (response.ok) return null;
  let detail = `HTTP ${response.status}`;
  try { detail = `${(await response.json()).detail} (${response.status})`; } catch { /* not JSON */ }
  return detail;
}

function signIn() {
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true,
    "aria-describedby": "token-hint" });
  const problem = h("p", { class: "error", role: "alert" }, signInMessage || "");
  signInMessage = null;
  const form = h("form", {
    class: "card narrow",
    onsubmit: async (event) => {
      event.preventDefault();
      const candidate = input.value.trim();
      // Asked directly, so that a refusal stays on this page with its reason.
      const detail = await refusal(candidate);
      if (detail) {
        problem.textContent = detail;
        input.focus();
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, candidate);
      announce("Signed in");
      // On to the page asked for (a link to a session opens it after signing in), else the sessions.
      if (["", "#", "#/sign-in"].includes(location.hash)) location.hash = "#/sessions";
      else route();
    },
  },
  h("label", { for: "token" }, "Access token"), input,
  h("p", { class: "hint", id: "token-hint" },
    "Paste a bearer token (an access token of the organisation's identity provider). It is kept in this tab only."),
  h("button", { type: "submit", class: config.oidc ? null : "primary" }, "Sign in"));
  const issuer = config.oidc ? h("div", { class: "card narrow" },
    h("button", {
      type: "button",
      id: "sign-in-issuer",
      class: "primary",
      onclick: async (event) => {
        const button = event.currentTarget;
        button.disabled = true;
        try {
          await oidc.start(config.oidc, ["", "#", "#/sign-in"].includes(location.hash) ? "#/sessions" : location.hash);
        } catch (error) {
          problem.textContent = error.message;
          button.disabled = false;
        }
      },
    }, `Sign in with ${config.oidc.name}`),
    h("p", { class: "hint" }, "Or paste an access token below.")) : null;
  show(heading("Sign in"), problem, issuer, form);
}

/** The page loaded as the issuer's redirect back: the code and state leave the address bar (and the history)
 * first; then the code becomes a token, which the API must take. A failure shows on the sign-in page. */
async function returnFromIssuer(answer) {
  history.replaceState(null, "", `${location.pathname}#/sign-in`);
  try {
    const { token: candidate, back } = await oidc.finish(config.oidc, answer);
    const detail = await refusal(candidate);
    if (detail) throw new Error(`The API refused the issuer's token: ${detail}`);
    sessionStorage.setItem(TOKEN_KEY, candidate);
    history.replaceState(null, "", `${location.pathname}${back || "#/sessions"}`);
    announce("Signed in");
  } catch (error) {
    sessionStorage.removeItem(TOKEN_KEY);
    signInMessage = error.message;
  }
}

// --- the names of a session --------------------------------------------------------------------------------

/** An id as shown: its first characters (the ``ses_`` prefix and eight more), the whole one when it is that short. */
function shortId(id) {
  const keep = id.startsWith("ses_") ? 12 : 8;
  return id.length > keep + 1 ? `${id.slice(0, keep)}…` : id;
}

/** How people name a session: its agents and its coach ("ada, bob · Support coach"), else its short id. */
function sessionName(names, sessionId) {
  const parts = [];
  if (names?.agents?.length) parts.push(names.agents.join(", "));
  if (names?.coach?.name) parts.push(names.coach.name);
  return parts.length ? parts.join(" · ") : `Session ${shortId(sessionId)}`;
}

/** The session's id, short, with a button that copies it whole (where the clipboard is refused, the whole id is
 * shown selected instead, for the person to copy). */
function sessionIdChip(sessionId) {
  const code = h("code", { class: "session-id", title: sessionId }, shortId(sessionId));
  const word = h("span", {}, "Copy");
  const button = h("button", {
    type: "button",
    class: "quiet copy",
    dataset: { copy: sessionId },
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(sessionId);
        word.textContent = "Copied";
        announce("Session id copied");
        setTimeout(() => { word.textContent = "Copy"; }, 2000);
      } catch {
        code.textContent = sessionId;
        const range = document.createRange();
        range.selectNodeContents(code);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        announce("The clipboard is not available: the whole id is selected");
      }
    },
  }, word, h("span", { class: "visually-hidden" }, ` session id ${sessionId}`));
  return h("span", { class: "id-chip" }, code, button);
}

/** A page that names a session that does not exist (or is another organisation's): no actions. */
function noSuchSession(sessionId) {
  show(heading("No such session"),
    h("p", {}, "There is no session ", h("code", { class: "session-id" }, sessionId), " in your organisation."),
    h("p", {}, h("a", { href: "#/sessions" }, "Back to the sessions")));
}

// --- the desk's keyboard ------------------------------------------------------------------------------------

const SHORTCUTS = [
  ["j", "Next request"],
  ["k", "Previous request"],
  ["a", "Apply the current request"],
  ["d", "Decline the current request"],
  ["o", "Show or hide its changes"],
  ["?", "This list"],
];

/** Whether a key press is someone typing (in a field), which no shortcut takes. */
function typing(event) {
  const target = event.target;
  return event.ctrlKey || event.metaKey || event.altKey || target instanceof HTMLInputElement
    || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement || target?.isContentEditable;
}

/** The dialog that lists the shortcuts: modal (the page behind is inert, the focus stays in it), Escape closes. */
function shortcutsDialog() {
  const close = h("button", { type: "button", onclick: () => dialog.close() }, "Close");
  const dialog = h("dialog", { id: "shortcuts", class: "shortcuts", role: "dialog", "aria-modal": "true",
    "aria-labelledby": "shortcuts-title" },
  h("h2", { id: "shortcuts-title" }, "Keyboard shortcuts"),
  h("dl", {}, SHORTCUTS.flatMap(([key, what]) => [h("dt", {}, h("kbd", {}, key)), h("dd", {}, what)])),
  h("p", { class: "hint" }, "They work on this page, except while typing in a field."),
  close);
  dialog.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    // The close button is the one stop: the focus stays in the dialog.
    event.preventDefault();
    close.focus();
  });
  return dialog;
}

/** The desk's shortcuts over the items in ``items``: j and k move the focus between them, a and d press the focused
 * one's apply and decline buttons, o its Show changes, ? lists them. Returns what removes them. */
function deskKeys(items) {
  const dialog = shortcutsDialog();
  document.body.append(dialog);
  const all = () => [...items.querySelectorAll(".item")];
  const current = () => document.activeElement?.closest?.(".item") || items.querySelector(".item.current");
  const move = (step) => {
    const list = all();
    if (!list.length) return;
    const at = list.indexOf(current());
    const next = list[at < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, at + step))];
    for (const el of list) el.classList.toggle("current", el === next);
    next.tabIndex = -1;
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  };
  const press = (selector) => {
    const button = current()?.querySelector(selector);
    if (button && !button.disabled) button.click();
  };
  const onKey = (event) => {
    if (dialog.open || typing(event)) return;
    const actions = ".actions button";
    const handlers = {
      j: () => move(1),
      k: () => move(-1),
      a: () => press(`${actions}.primary[data-decision]`),
      d: () => press(`${actions}[data-decision]:not(.primary)`),
      o: () => press(`${actions}[aria-controls$="-card"]`),
      "?": () => { dialog.showModal(); dialog.querySelector("button").focus(); },
    };
    const handler = handlers[event.key];
    if (!handler) return;
    event.preventDefault();
    handler();
  };
  document.addEventListener("keydown", onKey);
  return () => { document.removeEventListener("keydown", onKey); dialog.remove(); };
}

// --- the person signed in -----------------------------------------------------------------------------------

let me = null; // { token, answer }: who the API says the token names

/** "Signed in as … (organisation, role)" in the header, asked once per token. */
async function showIdentity() {
  const line = document.getElementById("identity");
  const current = token();
  if (!current) { line.hidden = true; line.textContent = ""; me = null; return; }
  if (me?.token !== current) {
    try { me = { token: current, answer: await api("GET", "/api/me") }; } catch { line.hidden = true; return; }
  }
  const { user_id: user, org_id: org, roles } = me.answer;
  line.textContent = `Signed in as ${user} (${org}, ${roles.length ? roles.join(", ") : "no role"})`;
  line.hidden = false;
}

// --- sessions and pending across them -----------------------------------------------------------------------

async function sessionsView() {
  const open = h("form", {
    class: "inline",
    onsubmit: (event) => {
      event.preventDefault();
      const id = new FormData(event.target).get("session_id").trim();
      if (id) location.hash = `#/sessions/${encodeURIComponent(id)}`;
    },
  },
  h("label", { for: "open-session" }, "Open a session by id"),
  h("input", { id: "open-session", name: "session_id", required: true }),
  h("button", { type: "submit" }, "Open"));
  const list = h("section", { "aria-labelledby": "sessions-title" });
  const across = h("section", { "aria-labelledby": "across-title" });
  const filters = { state: "", section: "", agent_id: "", escalated_to_me: false };
  const query = (params) => new URLSearchParams(Object.entries({ page_size: 50, ...params }).filter(([, v]) => v)).toString();
  const select = (id, label, values, key, reload) => [
    h("label", { for: id }, label),
    h("select", { id, onchange: (event) => { filters[key] = event.target.value; reload(); } },
      values.map(([value, text]) => h("option", { value, selected: filters[key] === value }, text)))];

  async function loadSessions() {
    list.replaceChildren(h("h2", { id: "sessions-title" }, "Recent sessions"),
      h("div", { class: "inline" }, select("state-filter", "State", [["", "Any"], ["open", "Open"], ["closed", "Closed"]], "state", loadSessions)));
    try {
      const page = await api("GET", `/api/studio/sessions?${query({ state: filters.state })}`);
      if (!page.items.length) { list.append(h("p", {}, "No sessions.")); return; }
      list.append(h("table", {},
        h("caption", { class: "visually-hidden" }, `${plural(page.total, "session")}, newest first`),
        h("thead", {}, h("tr", {}, ["Session", "About", "Id", "Operator", "Source guild", "State", "Waiting on", "Opened"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, page.items.map((s) => h("tr", { dataset: { session: s.session_id } },
          h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(s.session_id)}` }, sessionName(s, s.session_id))),
          h("td", { class: "about-cell" }, s.about || ""), h("td", {}, sessionIdChip(s.session_id)),
          h("td", {}, s.operator_id), h("td", {}, s.source_guild_id), h("td", {}, s.state),
          h("td", { class: "num" }, s.waiting_on), h("td", {}, when(s.opened_at)))))));
      if (page.total > page.items.length) list.append(h("p", { class: "hint" }, `The newest ${page.items.length} of ${page.total}.`));
    } catch (error) {
      list.append(error.status === 404 || error.status === 405
        ? h("p", {}, "This gateway does not list sessions; open one by its id.") : errorBox(error));
    }
  }

  async function loadPending() {
    const agent = h("input", { id: "agent-filter", value: filters.agent_id, size: 18 });
    across.replaceChildren(h("h2", { id: "across-title" }, "Waiting across sessions"),
      h("form", { class: "inline", onsubmit: (event) => { event.preventDefault(); filters.agent_id = agent.value.trim(); loadPending(); } },
        select("section-filter", "Section", [["", "Every section"], ...registry.sections.map((name) => [name, name])], "section", loadPending),
        h("label", { for: "agent-filter" }, "Agent"), agent,
        h("label", {}, h("input", { type: "checkbox", id: "escalated-filter", checked: filters.escalated_to_me,
          onchange: (event) => { filters.escalated_to_me = event.currentTarget.checked; loadPending(); } }), " Escalated to my role"),
        h("button", { type: "submit" }, "Filter")));
    try {
      const page = await api("GET", `/api/studio/pending?${query({ section: filters.section, agent_id: filters.agent_id,
        escalated_to_me: filters.escalated_to_me ? "true" : "" })}`);
      if (!page.items.length) { across.append(h("p", {}, "Nothing waits on a decision.")); return; }
      across.append(h("table", {},
        h("caption", { class: "visually-hidden" }, `${plural(page.total, "request")} waiting`),
        h("thead", {}, h("tr", {}, ["Request", "Section", "Agent", "Decide", "Proposed"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, page.items.map((item) => h("tr", {},
          h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(item.session_id)}` }, labelOf(item.target)),
            item.widens ? [" ", h("span", { class: "badge warn" }, "Widens access")] : null),
          h("td", {}, item.section), h("td", {}, item.agent_id ?? ""),
          h("td", {}, decideLink(item)), h("td", {}, timeAgo(item.proposed_at)))))));
      if (page.total > page.items.length) across.append(h("p", { class: "hint" }, `The first ${page.items.length} of ${page.total}.`));
    } catch (error) {
      across.append(error.status === 404 || error.status === 405
        ? h("p", {}, "This gateway does not list pending items across sessions.") : errorBox(error));
    }
  }

  show(heading("Sessions"), open, list, across);
  await Promise.all([loadSessions(), loadPending()]);
}

// --- a session's desk ---------------------------------------------------------------------------------------

/** How an item is decided: its own decision path and words, else the registry's endpoint and decisions. */
function decisionOf(sessionId, item) {
  const kind = registry.kinds[item.kind] || {};
  const endpoint = kind.endpoint || "edits";
  return {
    endpoint,
    path: item.decision_path || `/api/studio/sessions/${encodeURIComponent(sessionId)}/${endpoint}/${item.seq}`,
    apply: item.decisions?.apply || kind.apply || "apply",
    decline: item.decisions?.decline || kind.decline || "decline",
    // A card is whatever its endpoint answers to GET (an edit's diff, a draft's versions); an endpoint that takes
    // PUT there is edited by the operator (a draft's next version). The API's own document says which.
    hasCard: Boolean(operations[`/api/studio/sessions/{session_id}/${endpoint}/{seq}`]?.includes("get")),
    editable: Boolean(operations[`/api/studio/sessions/{session_id}/${endpoint}/{seq}`]?.includes("put")),
    onProposalsPage: kind.addressed_by === "agent",
  };
}

async function sessionView(sessionId) {
  const base = `/api/studio/sessions/${encodeURIComponent(sessionId)}`;
  const summary = h("p", { id: "summary", class: "summary" }, "Loading…");
  const sectionList = h("ul", { class: "chips", "aria-label": "Waiting per section" });
  const agentList = h("ul", { class: "chips", "aria-label": "Waiting per agent" });
  const result = h("div", { id: "bulk-result", role: "status", "aria-live": "polite" });
  const items = h("div", { id: "items" });
  const loginsButton = h("button", { type: "button", id: "logins-button", "aria-expanded": "false", "aria-controls": "logins-panel" }, "Logins");
  const loginsPanel = h("section", { id: "logins-panel", class: "popover", hidden: true, "aria-labelledby": "logins-title" });
  const state = { items: new Map(), agent: null, open: new Set() };

  const bulk = (which) => async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    try {
      // The plan first (the same planning as the action, writing nothing); nothing is sent unless confirmed.
      const plan = await api("GET", `${base}/${which}`);
      if (!(await confirmBulk(which, plan, button))) {
        button.disabled = false;
        button.focus();
        announce("Nothing was changed.");
        return;
      }
      const answer = await api("POST", `${base}/${which}`, undefined, { "Idempotency-Key": idempotencyKey() });
      result.replaceChildren(...bulkReport(which, answer, sessionId));
      announce(answer.message || `${which} done`);
    } catch (error) {
      result.replaceChildren(errorBox(error));
    } finally {
      button.disabled = false;
      await refresh();
    }
  };

  const toolbar = h("div", { class: "toolbar", role: "group", "aria-label": "Decide every request" },
    h("button", { type: "button", id: "apply-all", class: "primary", onclick: bulk("apply-all") }, "Apply all"),
    h("button", { type: "button", id: "decline-all", onclick: bulk("decline-all") }, "Decline all"),
    loginsButton,
    h("button", { type: "button", id: "continue", onclick: async () => {
      try {
        const answer = await api("POST", `${base}/continue`);
        result.replaceChildren(h("p", {}, `Continuation sent (${plural(answer.sends, "time")}).`));
      } catch (error) { result.replaceChildren(errorBox(error)); }
    } }, "Continue"));

  loginsButton.addEventListener("click", async () => {
    const opening = loginsPanel.hidden;
    loginsPanel.hidden = !opening;
    loginsButton.setAttribute("aria-expanded", String(opening));
    if (opening) { await renderLogins(); loginsPanel.querySelector("button, a")?.focus(); }
  });
  loginsPanel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      loginsPanel.hidden = true;
      loginsButton.setAttribute("aria-expanded", "false");
      loginsButton.focus();
    }
  });

  async function renderLogins() {
    loginsPanel.replaceChildren(h("h2", { id: "logins-title" }, "Logins"));
    let listed;
    try { listed = await api("GET", `${base}/connections`); } catch (error) { loginsPanel.append(errorBox(error)); return; }
    if (!listed.connections.length) { loginsPanel.append(h("p", {}, "No login is reachable from this session.")); return; }
    loginsPanel.append(h("ul", { class: "plain" }, listed.connections.map((c, i) => {
      const name = `${c.name} (${c.account})`;
      const granting = !c.granted && !listed.closed && c.connected;
      const lifetime = granting ? lifetimeChoice(`login-lifetime-${i}`, `Lifetime of ${name}`) : null;
      return h("li", { class: "login", dataset: { connection: c.connection_id } },
        h("strong", {}, c.name), ` as ${c.account} · ${c.scope}${c.scope_id ? ` ${c.scope_id}` : ""} · `,
        c.connected ? "connected" : "not connected", c.verified ? " · verified" : "",
        h("br"),
        h("span", { class: "hint" }, grantLine(c)),
        toolsLine(c),
        " ",
        lifetime,
        lifetime ? " " : null,
        h("button", {
          type: "button",
          "aria-label": `${c.granted ? "Revoke read access to" : "Grant read access to"} ${name}`,
          disabled: listed.closed || (!c.granted && !c.connected),
          onclick: async () => {
            const body = { granted: !c.granted };
            if (lifetime?.value) body.lifetime = lifetime.value;
            try {
              await api("PUT", `${base}/connections/${encodeURIComponent(c.connection_id)}`, body);
              announce(`${c.granted ? "Revoked" : "Granted"} ${name}`);
            } catch (error) { loginsPanel.append(errorBox(error)); return; }
            await renderLogins();
            loginsPanel.querySelector(`[data-connection="${CSS.escape(c.connection_id)}"] button`)?.focus();
            await refresh();
          },
        }, c.granted ? "Revoke read access" : "Grant read access"));
    })));
  }

  /** Which of a login's tools a grant makes readable, and which stay blocked (the read-only policy's rule). */
  function toolsLine(c) {
    const tools = c.tools || [];
    if (!tools.length) return null;
    const readable = tools.filter((t) => t.readable).map((t) => t.name);
    const blocked = tools.filter((t) => !t.readable).map((t) => `${t.name} (${t.changes_data ? "changes data" : "off by default"})`);
    return h("p", { class: "hint tools" },
      `Readable once granted: ${readable.length ? readable.join(", ") : "no tool"}. `,
      `Stays blocked: ${blocked.length ? blocked.join(", ") : "no tool"}.`);
  }

  function itemElement(item) {
    const how = decisionOf(sessionId, item);
    const id = `item-${item.seq}`;
    const card = h("div", { class: "card-body", id: `${id}-card`, hidden: true });
    const message = h("p", { class: "message", "aria-live": "polite" });
    // A kind whose grant takes a lifetime (a login request) offers the choice beside its buttons.
    const lifetime = registry.kinds[item.kind]?.options?.includes("lifetime") && !how.onProposalsPage
      ? lifetimeChoice(`${id}-lifetime`, `Lifetime of the grant: ${labelOf(item.target)}`) : null;
    const decide = (decision) => async (event) => {
      const buttons = event.currentTarget.parentElement.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      const body = { decision };
      if (decision === how.apply && lifetime?.value) body.lifetime = lifetime.value;
      try {
        const answer = await api("POST", how.path, body, { "Idempotency-Key": idempotencyKey() });
        if (answer?.status === "awaiting_approvals") {
          // One approval counted; the policy wants more before the request is applied (a decline still declines).
          announce(`${labelOf(item.target)}: your approval was counted`);
          message.replaceChildren(`Your approval was counted. ${answer.detail}`);
          waiting.textContent = answer.detail;
          waiting.hidden = false;
          buttons.forEach((b) => { b.disabled = b.dataset.decision !== how.decline; });
          return;
        }
        announce(`${labelOf(item.target)}: ${decision} done`);
        const link = cardLink(sessionId, item.kind, item.seq, "What happened");
        result.replaceChildren(h("p", { class: "decided" }, `${labelOf(item.target)}: ${answer?.outcome || decision}`,
          link ? " · " : "", link));
        await refresh();
      } catch (error) {
        message.replaceChildren(detailOf(error));
        buttons.forEach((b) => { b.disabled = false; });
      }
    };
    const actions = h("div", { class: "actions" });
    if (how.hasCard) {
      const toggle = h("button", { type: "button", class: "quiet", "aria-expanded": "false", "aria-controls": card.id,
        onclick: async () => {
          const opening = card.hidden;
          card.hidden = !opening;
          toggle.setAttribute("aria-expanded", String(opening));
          toggle.textContent = opening ? "Hide changes" : "Show changes";
          if (opening) { state.open.add(item.seq); await renderCard(card, how.path, how.editable); }
          else state.open.delete(item.seq);
        } }, "Show changes");
      actions.append(toggle);
    }
    if (how.onProposalsPage) {
      actions.append(h("a", { class: "button", href: `#/agents/${encodeURIComponent(item.agent_id)}/proposals` }, "Review on the Proposals page"));
    } else {
      if (lifetime) actions.append(lifetime);
      actions.append(
        h("button", { type: "button", class: "primary", dataset: { decision: how.apply }, onclick: decide(how.apply) }, item.apply_label),
        h("button", { type: "button", dataset: { decision: how.decline }, onclick: decide(how.decline) }, item.decline_label));
    }
    // Why it still waits beside a person's decision, as the organisation's policy says: the approvals it needs, when
    // it expires, whether it was escalated. Kept up to date by renderItems.
    const waiting = h("p", { class: "waiting", hidden: !item.waiting_for }, item.waiting_for || "");
    const deadline = h("p", { class: "expires", hidden: !item.expires_at },
      item.expires_at ? `Expires ${when(item.expires_at)} unless decided` : "");
    const badges = [
      item.stale ? h("span", { class: "badge warn" }, "Stale") : null,
      item.widens ? h("span", { class: "badge warn" }, "Widens access") : null,
      item.escalated_by ? h("span", { class: "badge warn", title: `rule ${item.escalated_by}` },
        item.escalated_to?.length ? `Escalated to ${item.escalated_to.map((r) => `${r}s`).join(" and ")}` : "Escalated") : null,
      item.decided_alone || registry.kinds[item.kind]?.decided_alone ? h("span", { class: "badge", title: "Apply all leaves it: it needs its own apply" }, "Apply all skips this: decide it on its own") : null,
    ];
    const el = h("li", { class: "item", id, dataset: { seq: item.seq } },
      h("article", { "aria-labelledby": `${id}-title` },
        h("h3", { id: `${id}-title` }, labelOf(item.target), " ", ...badges),
        h("p", { class: "meta" }, `${item.kind} · ${item.action}`,
          item.agent_tab ? ` · in the tab of agent ${item.agent_tab}` : item.agent_id ? ` · agent ${item.agent_id}` : "",
          item.lines?.added || item.lines?.removed ? ` · ${counts(item.lines)}` : "", item.proposed_at ? " · " : "", item.proposed_at ? timeAgo(item.proposed_at) : ""),
        item.reason ? h("p", { class: "reason" }, item.reason) : null,
        waiting, deadline, actions, message, card));
    if (state.open.has(item.seq) && how.hasCard) actions.querySelector("button")?.click();
    return el;
  }

  /** Put the tray's items in the page by seq: gone ones leave, new ones arrive, the rest stay as they are (an
   * open card and the focus are kept). */
  function renderItems(pending) {
    const sections = [...new Set([...registry.sections, ...Object.keys(pending.sections || {})])];
    const wanted = pending.items.filter((i) => !state.agent || i.agent_id === state.agent);
    // Where the focus goes when its item leaves: a decided item's buttons were disabled (which drops the focus to
    // the body), or the focus was inside an item another page decided. The tray's summary takes it.
    const focusedSeq = document.activeElement?.closest?.(".item")?.dataset.seq;
    const focusLost = !document.activeElement || document.activeElement === document.body;
    let removed = false;
    for (const [seq, el] of state.items) {
      if (!pending.items.some((i) => String(i.seq) === String(seq))) { el.remove(); state.items.delete(seq); removed = true; }
    }
    for (const name of sections) {
      const ofSection = wanted.filter((i) => i.section === name);
      const sid = `section-${name.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
      let section = document.getElementById(sid);
      if (!ofSection.length) { section?.remove(); continue; }
      if (!section) {
        section = h("section", { id: sid, "aria-labelledby": `${sid}-title` }, h("h2", { id: `${sid}-title` }), h("ul", { class: "items" }));
        items.append(section);
      }
      section.querySelector("h2").textContent = `${name} (${ofSection.length})`;
      const list = section.querySelector("ul");
      for (const item of ofSection) {
        let el = state.items.get(item.seq);
        if (!el) { el = itemElement(item); state.items.set(item.seq, el); }
        const waiting = el.querySelector(".waiting");
        if (waiting && item.waiting_for) { waiting.textContent = item.waiting_for; waiting.hidden = false; }
        if (el.parentElement !== list) list.append(el);
      }
      for (const el of [...list.children]) {
        if (!ofSection.some((i) => String(i.seq) === el.dataset.seq)) el.remove();
      }
    }
    // Keep the sections in the registry's order.
    for (const name of sections) {
      const section = document.getElementById(`section-${name.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`);
      if (section) items.append(section);
    }
    if (removed && (focusLost || (focusedSeq && !state.items.has(Number(focusedSeq))))) summary.focus();
    if (!wanted.length) items.replaceChildren(h("p", { class: "empty" }, "Nothing waits on a decision."));
    else items.querySelector(".empty")?.remove();
  }

  async function refresh(preloaded) {
    let pending = preloaded?.items ? preloaded : undefined;
    if (!pending) {
      try { pending = await api("GET", `${base}/pending`); } catch (error) { summary.replaceChildren(detailOf(error)); return; }
    }
    summary.textContent = pending.summary || `Waiting on ${plural(pending.waiting_on, "decision")}`;
    sectionList.replaceChildren(...Object.entries(pending.sections || {}).filter(([name, n]) => n || sectionDeployed(name))
      .map(([name, n]) => h("li", { class: n ? "" : "zero" }, `${name} `, h("span", { class: "count" }, n))));
    agentList.replaceChildren(
      h("li", {}, h("button", { type: "button", class: "chip", "aria-pressed": String(!state.agent),
        onclick: () => { state.agent = null; refresh(); } }, "All agents")),
      ...Object.entries(pending.agents || {}).map(([agent, n]) => h("li", {},
        h("button", { type: "button", class: "chip", "aria-pressed": String(state.agent === agent),
          onclick: () => { state.agent = agent; refresh(); } }, `${agent} `, h("span", { class: "count" }, n)))));
    renderItems(pending);
  }

  const mine = generation;
  let first;
  try { first = await api("GET", `${base}/pending`); } catch (error) {
    if (mine !== generation) return;
    if (error.status === 404) return noSuchSession(sessionId);
  }
  if (mine !== generation) return;
  const title = heading(sessionName(first?.names, sessionId));
  const about = h("p", { class: "about" }, first?.names?.about ? `About: ${first.names.about} · ` : "", "Id ",
    sessionIdChip(sessionId));
  document.title = `${title.textContent} · ${sessionId} · Assent console`;
  show(
    title,
    about,
    h("p", {}, h("a", { href: sessionHref(sessionId) }, "This session's timeline"),
      " · ", h("button", { type: "button", class: "quiet", id: "shortcuts-button",
        onclick: () => document.dispatchEvent(new KeyboardEvent("keydown", { key: "?" })) }, "Keyboard shortcuts")),
    h("section", { class: "tray", "aria-label": "Tray" }, summary, sectionList, agentList, toolbar, result, loginsPanel),
    items);
  summary.setAttribute("tabindex", "-1");
  await refresh(first);
  if (mine === generation) {
    const stopKeys = deskKeys(items);
    const stopFollow = follow(`${base}/events`, refresh);
    leaving = () => { stopFollow(); stopKeys(); };
  }
}

/** The address of the card page of the proposal of ``kind`` at ``seq`` (null where its endpoint reads none by seq). */
function cardHref(sessionId, kind, seq) {
  const endpoint = registry.kinds[kind]?.endpoint;
  if (!endpoint || !operations[`/api/studio/sessions/{session_id}/${endpoint}/{seq}`]?.includes("get")) return null;
  return `#/sessions/${encodeURIComponent(sessionId)}/${encodeURIComponent(endpoint)}/${seq}`;
}

/** Whether a section can have requests here: one of its kinds' owners is deployed beside the gateway (a registry
 * without the word: yes). A section that never has one shows no zero count. */
function sectionDeployed(section) {
  const kinds = Object.values(registry.kinds).filter((k) => k.section === section);
  return !kinds.length || kinds.some((k) => k.deployed !== false);
}

/** A link to decide a pending item: its session's tray, where its buttons are. */
function decideLink(item) {
  return h("a", { href: `#/sessions/${encodeURIComponent(item.session_id)}`, class: "button" }, `Decide request #${item.seq}`);
}

/** A link to the card page of the proposal of ``kind`` at ``seq`` (null where its endpoint reads none by seq). */
function cardLink(sessionId, kind, seq, text) {
  const href = cardHref(sessionId, kind, seq);
  return href ? h("a", { href }, text) : null;
}

/** Apply all's or Decline all's plan in a modal dialog: what it does to each request (apply, decline, or leave and
 * why), and Confirm / Cancel. The focus stays inside (Tab wraps), Escape cancels, and the focus goes back to
 * ``opener``. Resolves to whether the person confirmed. */
function confirmBulk(which, plan, opener) {
  const verb = which === "apply-all" ? "Apply all" : "Decline all";
  const resolved = plan.resolved || [];
  const skipped = plan.skipped || [];
  const rows = [
    ...resolved.map((r) => ({ seq: r.seq, text: `request #${r.seq} (${r.kind}): ${r.outcome}`, cls: "plan-do" })),
    ...skipped.map((s) => ({ seq: s.seq, text: `request #${s.seq} (${s.kind}): skip — ${s.reason}`, cls: "plan-skip" })),
  ].sort((a, b) => a.seq - b.seq);
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button", id: "bulk-cancel" }, "Cancel");
    const confirm = h("button", { type: "button", id: "bulk-confirm", class: "primary", disabled: !resolved.length },
      resolved.length ? `${verb}: ${plural(resolved.length, "request")}` : "Nothing to do");
    const dialog = h("div", { role: "dialog", "aria-modal": "true", "aria-labelledby": "bulk-title",
      "aria-describedby": "bulk-plan-summary", id: "bulk-dialog", class: "dialog" },
      h("h2", { id: "bulk-title" }, `${verb}: what it will do`),
      h("p", { id: "bulk-plan-summary" }, plan.message || ""),
      rows.length
        ? h("ul", { class: "plain", id: "bulk-plan", "aria-label": "Plan" }, rows.map((r) => h("li", { class: r.cls }, r.text)))
        : h("p", {}, "Nothing waits on a decision."),
      h("div", { class: "toolbar" }, confirm, cancel));
    const backdrop = h("div", { class: "backdrop" }, dialog);
    const close = (answer) => {
      backdrop.remove();
      opener?.focus();
      resolve(answer);
    };
    cancel.addEventListener("click", () => close(false));
    confirm.addEventListener("click", () => close(true));
    dialog.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); close(false); return; }
      if (event.key !== "Tab") return;
      const focusable = [...dialog.querySelectorAll("button:not([disabled])")];
      const first = focusable[0], last = focusable[focusable.length - 1];
      if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
      else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
    });
    document.body.append(backdrop);
    (resolved.length ? confirm : cancel).focus();
  });
}

function bulkReport(which, answer, sessionId) {
  const resolved = answer.resolved || [];
  const skipped = answer.skipped || [];
  const parts = [h("p", { class: "bulk-summary" },
    answer.message || `${which}: ${plural(resolved.length, "request")} resolved, ${skipped.length} skipped.`)];
  if (resolved.length) parts.push(h("ul", { class: "plain", id: "resolved", "aria-label": "Resolved" },
    resolved.map((r) => h("li", {}, cardLink(sessionId, r.kind, r.seq, `request #${r.seq} (${r.kind}): ${r.outcome}`)
      || `request #${r.seq} (${r.kind}): ${r.outcome}`))));
  parts.push(h("p", { id: "skipped-count" }, `Skipped: ${skipped.length}`));
  if (skipped.length) parts.push(h("ul", { class: "plain" }, skipped.map((s) => h("li", {}, `request #${s.seq} (${s.kind}): ${s.reason}`))));
  if (answer.stopped) parts.push(h("p", { class: "error" }, `Stopped at request #${answer.stopped.seq}: ${answer.stopped.status}, ${answer.stopped.detail}`));
  return parts;
}

/** A card: per field its diff (one per changed field), the before and after texts, what applying does, notes; a
 * draft's versions, the notes it needs, and its editor (each save is the next version). A card that is no longer
 * pending says first what happened (``resolutionOf``), and its texts are as they were proposed. ``card``: the card
 * read already (else it is read at ``path``). */
async function renderCard(container, path, editable = false, card = undefined) {
  if (card === undefined) {
    container.replaceChildren(h("p", {}, "Loading the card…"));
    try { card = await api("GET", path); } catch (error) { container.replaceChildren(errorBox(error)); return; }
  }
  const decided = Boolean(card.status) && card.status !== "pending";
  const parts = decided ? [resolutionOf(card, `${container.id}-resolution`)] : [];
  if (card.stale) parts.push(h("p", { class: "badge warn" }, "Stale: the target changed since it was proposed."));
  if (card.widens) parts.push(h("p", { class: "badge warn" }, "Widens access: applying it lets an agent do more than it can today."));
  if (card.version !== undefined) {
    parts.push(h("p", { class: "meta version" }, `Version ${card.version}`,
      card.versions?.length ? ` of ${card.versions.length} (${card.versions.map((v) => `${v.version} by ${v.author}`).join(", ")})` : ""));
  }
  if (card.missing_notes?.length) parts.push(h("p", { class: "badge warn" }, `Needs notes that do not exist yet: ${card.missing_notes.join(", ")}`));
  const changed = (card.fields || []).filter((f) => f.diff);
  if (changed.length) parts.push(...reviewView(changed, container.id || "card"));
  if (!changed.length && card.diff) parts.push(...reviewView([{ name: "", diff: card.diff }], container.id || "card"));
  const texts = (card.fields || []).filter((f) => f.live !== null || f.proposal !== null);
  if (texts.length) {
    parts.push(h("details", {}, h("summary", {}, "Before and after"),
      ...texts.map((f) => h("div", { class: "side-by-side" },
        h("figure", {}, h("figcaption", {}, `${f.name}: ${decided ? "when proposed" : "now"}`), h("pre", { tabindex: "0" }, f.live ?? "(none)")),
        h("figure", {}, h("figcaption", {}, `${f.name}: proposed`), h("pre", { tabindex: "0" }, f.proposal ?? "(none)"))))));
  }
  if (card.effects?.length) parts.push(h("h4", {}, "What applying does"), h("ul", {}, card.effects.map((e) => h("li", {}, e))));
  if (card.notes?.length) parts.push(h("ul", { class: "notes" }, card.notes.map((n) => h("li", {}, n))));
  if (editable && typeof card.content === "string" && card.status === "pending") parts.push(editor(container, path, card));
  container.replaceChildren(...parts);
}

/** What happened to a proposal that is no longer pending: its outcome, by whom, when and why; every decision taken
 * on it (a stale or refused attempt too); and what the coach was told. A card without a resolution (a Task draft's,
 * its owner's) tells its status and who published or discarded it. */
function resolutionOf(card, id) {
  const resolution = card.resolution || {};
  const status = resolution.status || card.status;
  const by = resolution.resolved_by || card[`${status}_by_user_id`];
  const parts = [
    h("h4", { id }, "What happened"),
    h("p", { class: "outcome" }, h("strong", {}, status[0].toUpperCase() + status.slice(1)),
      by ? ` by ${by}` : "", resolution.resolved_at ? " · " : "", resolution.resolved_at ? timeAgo(resolution.resolved_at) : ""),
    resolution.detail ? h("p", { class: "detail" }, resolution.detail) : null,
  ];
  const decisions = resolution.decisions || [];
  if (decisions.length) {
    parts.push(h("ol", { class: "decisions", "aria-label": "Decisions" }, decisions.map((d) => h("li", {},
      `${d.decision} by ${d.actor} (${d.via}) · `, timeAgo(d.decided_at), ": ", h("strong", {}, d.outcome || "no outcome yet"),
      d.detail ? h("span", { class: "hint" }, ` — ${d.detail}`) : ""))));
  }
  if (resolution.told) {
    parts.push(h("h4", {}, "What the coach was told ", h("span", { class: "hint" }, timeAgo(resolution.told.continued_at))),
      h("pre", { class: "told", tabindex: "0", "aria-label": "What the coach was told" }, resolution.told.text));
  } else if ("told" in resolution) {
    parts.push(h("p", { class: "hint" }, "The coach was told nothing yet: its turn waits on other decisions."));
  }
  return h("section", { class: "resolution", "aria-labelledby": id }, ...parts.filter(Boolean));
}

/** A proposal's own page, at the address its card is read by (``#/sessions/{id}/{endpoint}/{seq}``): its card, and
 * its buttons while it is pending, or what happened to it once it is not. */
async function cardView(sessionId, endpoint, seq) {
  const path = `/api/studio/sessions/${encodeURIComponent(sessionId)}/${encodeURIComponent(endpoint)}/${encodeURIComponent(seq)}`;
  const body = h("div", { class: "card-body", id: "card" });
  const message = h("p", { class: "message", "aria-live": "polite" });
  const back = h("p", {}, h("a", { href: `#/sessions/${encodeURIComponent(sessionId)}` }, `Session ${sessionId}`));
  let card;
  try { card = await api("GET", path); } catch (error) { show(heading(`Request #${seq}`), back, errorBox(error)); return; }
  const kind = registry.kinds[card.kind] || Object.values(registry.kinds).find((k) => k.endpoint === endpoint) || {};
  const parts = [
    heading(`${labelOf(card.target) || `Request #${seq}`}`), back,
    h("p", { class: "meta" }, [`request #${seq}`, card.kind, card.action, card.lines ? counts(card.lines) : null].filter(Boolean).join(" · ")),
    card.reason || card.rationale ? h("p", { class: "reason" }, card.reason || card.rationale) : null,
  ];
  if (card.status === "pending") {
    const decide = (decision) => async (event) => {
      const buttons = event.currentTarget.parentElement.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      try {
        const answer = await api("POST", path, { decision }, { "Idempotency-Key": idempotencyKey() });
        announce(`${labelOf(card.target) || `request #${seq}`}: ${answer?.outcome || decision}`);
        await cardView(sessionId, endpoint, seq);
      } catch (error) {
        message.replaceChildren(detailOf(error));
        buttons.forEach((b) => { b.disabled = false; });
      }
    };
    parts.push(h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: decide(kind.apply || "apply") }, card.apply_label || kind.apply || "Apply"),
      h("button", { type: "button", onclick: decide(kind.decline || "decline") }, card.decline_label || kind.decline_label || "Decline")), message);
  } else if (kind.revertible && card.status === kind.applied) {
    parts.push(revertAction(path, card));
  }
  show(...parts, body);
  await renderCard(body, path, false, card);
}

/** Revert, on an applied request's own page: the owner proposes the inverse as a new request (bound to the target as
 * it is now, in a session opened for the caller), decided as any other; the answer links to it. */
function revertAction(path, card) {
  const message = h("p", { id: "revert-result", "aria-live": "polite" });
  const button = h("button", {
    type: "button",
    onclick: async () => {
      button.disabled = true;
      try {
        const filed = await api("POST", `${path}/revert`, undefined, { "Idempotency-Key": idempotencyKey() });
        const link = cardLink(filed.session_id, filed.kind, filed.seq, `request ${filed.seq} of session ${filed.session_id}`);
        message.className = "";
        message.replaceChildren("Its revert is proposed as ", link || `request ${filed.seq} of session ${filed.session_id}`,
          ", waiting for a decision.");
        announce(`${labelOf(card.target) || "The request"}: revert proposed`);
      } catch (error) {
        message.className = "message";
        message.replaceChildren(detailOf(error));
        button.disabled = false;
      }
    },
  }, "Revert");
  return h("div", { class: "actions" }, button, message);
}

/** The operator's own version of a card's text: PUT at the card's path, bound to the version shown. */
function editor(container, path, card) {
  const id = `${container.id}-edit`;
  const area = h("textarea", { id, rows: Math.min(20, card.content.split("\n").length + 2), cols: 80 }, card.content);
  const message = h("p", { class: "message", "aria-live": "polite" });
  const form = h("form", {
    class: "decide",
    hidden: true,
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api("PUT", path, { content: area.value, expected_version: card.version });
        announce(`Saved version ${card.version + 1}`);
        await renderCard(container, path, true);
        container.querySelector(".version")?.setAttribute("tabindex", "-1");
        container.querySelector(".version")?.focus();
      } catch (error) { message.replaceChildren(detailOf(error)); }
    },
  },
  h("label", { for: id }, "Your version"), area,
  h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Save as the next version"),
    h("button", { type: "button", onclick: () => { form.hidden = true; toggle.focus(); } }, "Cancel")),
  message);
  const toggle = h("button", { type: "button", onclick: () => { form.hidden = false; area.focus(); } }, "Edit");
  return h("div", {}, toggle, form);
}

/** ``fn`` run one at a time: a call while it runs makes one more run after it (a burst of events costs two
 * re-reads, not one each); every caller's promise settles once a run that started after its call has ended. */
function coalesced(fn) {
  let running = null;
  let again = false;
  return () => {
    if (running) { again = true; return running; }
    running = (async () => {
      try { do { again = false; await fn(); } while (again); } finally { running = null; }
    })();
    return running;
  };
}

/** Follow a server-sent event stream with the token (EventSource cannot send one): each event re-reads. */
function follow(path, onEvent) {
  const controller = new AbortController();
  let retry = 0;
  (async () => {
    while (!controller.signal.aborted) {
      try {
        const response = await fetch(path, { headers: { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" }, signal: controller.signal });
        if (!response.ok) throw new Error(`events: HTTP ${response.status}`);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        retry = 0;
        await onEvent(); // what happened while the stream was down
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          let changed = false;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const name = /^event: (.*)$/m.exec(block)?.[1];
            if (name && name !== "ready") changed = true;
          }
          if (changed) await onEvent();
        }
      } catch (error) {
        if (controller.signal.aborted) return;
      }
      retry = Math.min(retry + 1, 5);
      await new Promise((resolve) => setTimeout(resolve, 500 * retry));
    }
  })();
  return () => controller.abort();
}

// --- the Proposals page -------------------------------------------------------------------------------------

function agentForm(current) {
  return h("form", {
    class: "inline",
    onsubmit: (event) => {
      event.preventDefault();
      const id = new FormData(event.target).get("agent_id").trim();
      if (id) location.hash = `#/agents/${encodeURIComponent(id)}/proposals`;
    },
  },
  h("label", { for: "agent-id" }, "Agent"),
  h("input", { id: "agent-id", name: "agent_id", required: true, value: current || "" }),
  h("button", { type: "submit" }, "Show proposals"));
}

async function proposalsView(agentId) {
  if (!agentId) {
    show(heading("Proposals"), agentForm(), h("p", { class: "hint" }, "An agent's source proposals: waiting and decided."));
    return;
  }
  const base = `/api/agents/${encodeURIComponent(agentId)}/proposals`;
  const waiting = h("section", { "aria-labelledby": "waiting-title" });
  const decided = h("section", { "aria-labelledby": "decided-title" });
  const feed = h("section", { "aria-labelledby": "activity-title" });
  const outcomes = h("section", { "aria-labelledby": "decided-items-title" });
  show(heading(`Proposals of ${agentId}`), agentForm(agentId),
    h("p", {}, h("a", { href: agentHref(agentId) }, "This agent's timeline"), " · ",
      h("a", { href: `#/history?${new URLSearchParams({ agent: agentId })}` }, "Its entries in the History table")),
    waiting, decided, outcomes, feed);

  // A hosted source has one branch (approving commits and deploys); an external one offers the branch choice.
  let repository = null;
  try { repository = await api("GET", `/api/workspace/agents/${encodeURIComponent(agentId)}/repository`); } catch { /* none yet */ }
  const branches = repository?.mode === "external";

  // A waiting proposal's element stays while the proposal is unchanged, so that a re-read (another proposal
  // arrived, or one was decided elsewhere) keeps what the operator is typing into its form.
  let waitingItems = new Map();
  const refresh = coalesced(async () => {
    await Promise.all([readProposals(), readOutcomes()]);
  });

  /** The agent's decided items, of every kind: the outcome entries of its history, newest first, each linked to its
   * card (a kind decided on this page has its card under Decided above). */
  async function readOutcomes() {
    const title = h("h2", { id: "decided-items-title" }, "Decided items");
    let page;
    try {
      page = await api("GET", `/api/history?${new URLSearchParams({ agent: agentId, type: "outcome", limit: "50" })}`);
    } catch (error) { outcomes.replaceChildren(title, errorBox(error)); return; }
    const all = `#/history?${new URLSearchParams({ agent: agentId, type: "outcome" })}`;
    outcomes.replaceChildren(...[title,
      page.entries.length ? h("ol", { class: "feed", id: "decided-items" }, page.entries.map((e) => {
        const here = registry.kinds[e.kind]?.addressed_by === "agent";
        const href = here ? null : entryHref(e);
        return h("li", { dataset: { position: e.position } },
          href ? h("a", { href }, subjectOf(e)) : h("strong", {}, subjectOf(e)),
          `: ${e.outcome ?? "resolved"}`, e.actor ? ` by ${e.actor}` : "", " · ", timeAgo(e.at),
          e.detail ? h("span", { class: "hint" }, ` — ${preview(e.detail, 140)}`) : "",
          here ? h("span", { class: "hint" }, " (its card is under Decided)") : "");
      })) : h("p", {}, "Nothing of this agent is decided yet."),
      page.next_cursor ? h("p", {}, h("a", { href: all }, "Every decided item in the History table")) : null].filter(Boolean));
  }

  async function readProposals() {
    let page;
    try { page = await api("GET", base); } catch (error) { waiting.replaceChildren(errorBox(error)); return; }
    const items = new Map(page.waiting.map((p) => {
      const key = JSON.stringify([p.proposal_id, p.actions, p.changed_since]);
      return [key, waitingItems.get(key) || proposalElement(p, true)];
    }));
    const title = waiting.querySelector("#waiting-title") || h("h2", { id: "waiting-title" });
    title.textContent = `Waiting (${page.counts.waiting})`;
    const wanted = [...items.values()];
    let list = waiting.querySelector("ul.items");
    if (!wanted.length) waiting.replaceChildren(title, h("p", {}, "No proposal waits."));
    else {
      if (!list) { list = h("ul", { class: "items" }); waiting.replaceChildren(title, list); }
      // Gone ones leave and new ones arrive in the page's order; the rest are not touched (nor the focus in them).
      for (const el of [...list.children]) if (!wanted.includes(el)) el.remove();
      wanted.forEach((el, i) => { if (list.children[i] !== el) list.insertBefore(el, list.children[i] || null); });
    }
    waitingItems = items;
    decided.replaceChildren(h("h2", { id: "decided-title" }, `Decided (${page.counts.decided})`),
      page.decided.length ? h("ul", { class: "items" }, page.decided.map((p) => proposalElement(p, false))) : h("p", {}, "None decided yet."));
    let activity;
    try { activity = await api("GET", `/api/activity?agent_id=${encodeURIComponent(agentId)}&limit=50`); } catch (error) { feed.replaceChildren(errorBox(error)); return; }
    feed.replaceChildren(h("h2", { id: "activity-title" }, "Activity"),
      activity.entries.length ? h("ol", { class: "feed" }, activity.entries.map((e) => h("li", {},
        h("strong", {}, e.what), ` by ${e.who ?? "someone"} · `, timeAgo(e.when),
        e.reason ? ` · ${e.reason}` : "", e.detail ? h("span", { class: "hint" }, ` — ${e.detail}`) : "",
        e.links?.commit ? h("span", { class: "hint" }, ` · commit ${String(e.links.commit).slice(0, 10)}`) : ""))) : h("p", {}, "No activity yet."));
  }

  function proposalElement(p, open) {
    const id = `proposal-${p.proposal_id}`;
    const message = h("p", { class: "message", "aria-live": "polite" });
    const parts = [
      h("h3", { id: `${id}-title` }, p.reason),
      h("p", { class: "meta" }, [p.from_builder_chat ? "From the builder chat" : `from ${p.origin}`, p.model,
        p.asked_by ? `asked by ${p.asked_by}` : null, p.proposed_at ? timeAgo(p.proposed_at) : null,
        p.source_version ? `on ${p.source_version.slice(0, 10)}` : null].filter(Boolean).flatMap((x, i) => (i ? [" · ", x] : [x]))),
      p.fix_for_issue ? h("p", { class: "meta" }, p.fix_for_issue.label || "Fix for an issue") : null,
    ];
    if (p.changed_since?.length) parts.push(h("p", { class: "badge warn" }, `Changed since: ${p.changed_since.join(", ")}`));
    for (const file of p.files || []) {
      parts.push(h("h4", {}, `${file.path} `, h("span", { class: "count" }, `${file.action} · ${counts(file.lines)}`)));
      parts.push(diffBlock(file.diff, `Changes to ${file.path}`));
    }
    if (open) {
      parts.push(decisionForm(p, message), message);
    } else {
      parts.push(h("p", { class: "meta" }, [p.status, p.resolved_by ? `by ${p.resolved_by}` : null, p.resolved_at ? timeAgo(p.resolved_at) : null,
        p.branch ? `branch ${p.branch}` : null, p.commit ? `commit ${p.commit.slice(0, 10)}` : null].filter(Boolean).flatMap((x, i) => (i ? [" · ", x] : [x]))));
      if (p.link) parts.push(h("p", {}, h("a", { href: p.link }, "Pull request")));
    }
    return h("li", { class: "item", id, dataset: { proposal: p.proposal_id } }, h("article", { "aria-labelledby": `${id}-title` }, ...parts));
  }

  function decisionForm(p, message) {
    const name = (suffix) => `${p.proposal_id}-${suffix}`;
    const branchName = h("input", { id: name("branch-name"), name: "branch_name", disabled: true });
    const radios = [["production", "Production branch (commit and deploy)"], ["new", "A new branch"], ["existing", "An existing branch"]]
      .map(([value, text], i) => h("div", { class: "radio" },
        h("input", { type: "radio", id: name(`branch-${value}`), name: "branch", value, checked: i === 0,
          onchange: () => { branchName.disabled = value === "production"; } }),
        h("label", { for: name(`branch-${value}`) }, text)));
    const decide = (decision) => async (event) => {
      event.preventDefault();
      const form = event.target.closest("form");
      const data = new FormData(form);
      const body = { decision };
      if (decision === "approve") {
        const kind = data.get("branch");
        if (kind && kind !== "production") body.branch = { kind, name: (data.get("branch_name") || "").trim() };
        const text = (data.get("message") || "").trim();
        if (text) body.message = text;
      }
      form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      try {
        const answer = await api("POST", `${base}/${encodeURIComponent(p.proposal_id)}`, body, { "Idempotency-Key": idempotencyKey() });
        announce(`${p.reason}: ${answer?.outcome || decision}`);
        await refresh();
        document.getElementById("waiting-title")?.setAttribute("tabindex", "-1");
        document.getElementById("waiting-title")?.focus();
      } catch (error) {
        message.replaceChildren(detailOf(error));
        form.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      }
    };
    const actions = p.actions || [];
    const approving = actions.includes("approve");
    return h("form", { class: "decide", onsubmit: (e) => e.preventDefault() },
      approving && branches ? h("fieldset", {}, h("legend", {}, `Commit onto (production: ${repository.branch})`), ...radios,
        h("label", { for: name("branch-name") }, "Branch name"), branchName) : null,
      approving && !branches ? h("p", { class: "hint" }, "Approving commits the next source version and deploys it.") : null,
      approving ? [h("label", { for: name("message") }, "Commit message (the reason when empty)"),
        h("input", { id: name("message"), name: "message" })] : null,
      h("div", { class: "actions" },
        approving ? h("button", { type: "submit", class: "primary", onclick: decide("approve") }, branches ? "Approve" : "Approve and deploy") : null,
        actions.includes("discard") ? h("button", { type: "button", onclick: decide("discard") }, "Discard") : null));
  }

  const mine = generation;
  await refresh();
  // Live: a proposal of this agent proposed or decided anywhere (another tab, the CLI, the API) re-reads the page.
  if (mine === generation) leaving = follow(`/api/agents/${encodeURIComponent(agentId)}/proposal-events`, refresh);
}

// --- the history --------------------------------------------------------------------------------------------

/** The filters of GET /api/history, named as the History page's address (``#/history?agent=…``) names them. */
const HISTORY_FILTERS = ["agent", "guild", "kind", "actor", "outcome", "session", "type", "since", "until"];
const ENTRY_TYPES = ["proposed", "decided", "approved", "outcome", "continued", "written"];
const HISTORY_PAGE = 50;

/** How long ago ``value`` was, in words ("3 minutes ago"). */
function ago(value) {
  const date = new Date(value);
  if (!value || Number.isNaN(date.getTime())) return "";
  const seconds = (date.getTime() - Date.now()) / 1000;
  const format = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  const units = [["year", 31_536_000], ["month", 2_592_000], ["week", 604_800], ["day", 86_400], ["hour", 3600], ["minute", 60]];
  for (const [unit, size] of units) if (Math.abs(seconds) >= size) return format.format(Math.round(seconds / size), unit);
  return format.format(Math.round(seconds), "second");
}

/** A time, relative ("3 minutes ago") and absolute (in the reader's own zone). */
function stamp(at) {
  return h("time", { datetime: at }, h("span", { class: "ago" }, ago(at)), h("span", { class: "hint absolute" }, when(at)));
}

function capitalised(word) {
  return word ? word[0].toUpperCase() + word.slice(1) : "";
}

/** A content hash's first digits ("sha256:" left out). */
function shortHash(hash) {
  return hash ? hash.replace(/^sha256:/, "").slice(0, 12) : "none";
}

/** The first line of ``text``, cut at ``n`` characters. */
function preview(text, n = 90) {
  const line = String(text).split("\n")[0];
  return line.length > n || String(text).includes("\n") ? `${line.slice(0, n).trimEnd()}…` : line;
}

/** Where the console shows an entry's proposal: its card's page (a proposal read by session and seq), or the agent's
 * Proposals page (a kind decided there); null for an entry of no proposal (a continuation, a direct write) or one
 * whose kind this gateway no longer has. */
function entryHref(entry) {
  if (!entry.link || !entry.proposal_id) return null;
  if (registry.kinds[entry.kind]?.addressed_by === "agent") {
    return entry.agent_id ? `#/agents/${encodeURIComponent(entry.agent_id)}/proposals` : null;
  }
  if (!entry.session_id || entry.seq === null || entry.seq === undefined) return null;
  return cardHref(entry.session_id, entry.kind, entry.seq);
}

/** What a proposal is about, as a title: its target (else its kind and action) and its request number. */
function subjectOf(entry) {
  const what = entry.target || [entry.kind, entry.action].filter(Boolean).join(" ") || "A proposal";
  return entry.seq === null || entry.seq === undefined ? what : `${what} (request #${entry.seq})`;
}

/** What an entry says happened, with who (a timeline's step). */
function whatOf(entry) {
  const via = entry.via ? ` (${entry.via})` : "";
  switch (entry.type) {
    case "proposed": return `Proposed by ${entry.actor}${via}`;
    case "decided": return `Decided: ${entry.decision ?? "a decision"} by ${entry.actor}${via}`;
    case "outcome": return `${capitalised(entry.outcome || "resolved")}${entry.actor ? ` by ${entry.actor}` : ""}`;
    case "continued": return "Continued: what the coach was told";
    case "written": return `Written by ${entry.actor}${via}, outside any proposal`;
    default: return `${capitalised(entry.type)} by ${entry.actor}`;
  }
}

/** What an entry says happened, in a word or two (the History table, where who has a column of its own). */
function typeOf(entry) {
  if (entry.type === "decided") return `Decided: ${entry.decision ?? "?"}`;
  if (entry.type === "outcome") return `Outcome: ${entry.outcome ?? "?"}`;
  return capitalised(entry.type);
}

function hashesOf(entry) {
  if (!entry.hash_before && !entry.hash_after) return null;
  return h("span", { class: "hint hashes" }, ` · content ${shortHash(entry.hash_before)} → ${shortHash(entry.hash_after)}`);
}

function sessionHref(sessionId) {
  return `#/history/session/${encodeURIComponent(sessionId)}`;
}

function agentHref(agentId) {
  return `#/history/agent/${encodeURIComponent(agentId)}`;
}

/** A time given as an RFC 3339 string, as a ``datetime-local`` field shows it (the reader's own zone). */
function localTime(value) {
  const date = new Date(value);
  if (!value || Number.isNaN(date.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** A ``datetime-local`` field's value (the reader's zone) as the API takes a time: RFC 3339, in UTC. */
function zonedTime(value) {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toISOString();
}

/** What GET /api/history/verify found, in words: it holds (how many entries), or where it breaks and why. */
function verdictOf(found) {
  const waiting = found.unlinked
    ? ` ${plural(found.unlinked, "entry", "entries")} wait to be linked (the oldest since ${when(found.oldest_unlinked_at)}).` : "";
  if (found.ok) {
    return h("p", { class: "verdict ok" }, h("strong", {}, "The chain holds: "),
      found.checked ? `${plural(found.checked, "entry", "entries")} checked, ${found.first} to ${found.last}.` : "no entry to check yet.",
      waiting);
  }
  const broken = found.first_break;
  return h("p", { class: "verdict broken" }, h("strong", {}, `The chain breaks at entry ${broken.position} (${broken.reason}): `),
    broken.detail, `. ${plural(found.checked, "entry", "entries")} before it fit.`, waiting);
}

/** The History page: the organisation's entries, newest first, filtered as the API filters them (the filters are
 * the page's address, so a filtered view can be linked to); Load more follows the cursor; the export downloads
 * with the token; Verify checks the chain. */
async function historyView(search) {
  const filters = Object.fromEntries(HISTORY_FILTERS.map((name) => [name, search.get(name) || ""]));
  const sizeOf = (value) => Math.min(500, Math.max(1, Number.parseInt(value, 10) || HISTORY_PAGE));
  let limit = sizeOf(search.get("limit"));
  let cursor = null;
  let shown = 0;
  let reading = 0; // the newest read's number: an answer to an older one (filters changed meanwhile) is dropped

  const chosen = () => Object.fromEntries(HISTORY_FILTERS.filter((name) => filters[name]).map((name) => [name, filters[name]]));
  const exportPath = (format) => `/api/history/export?${new URLSearchParams({ format, ...chosen() })}`;

  const id = (name) => `history-${name}`;
  const field = (name, label, control) => h("div", { class: "field" }, h("label", { for: id(name) }, label), control);
  const text = (name, hint) => h("input", { id: id(name), name, value: filters[name], placeholder: hint, autocomplete: "off" });
  const choice = (name, values, any) => h("select", { id: id(name), name },
    h("option", { value: "" }, any), values.map((v) => h("option", { value: v, selected: filters[name] === v }, v)));
  const moment = (name) => h("input", { id: id(name), name, type: "datetime-local", step: "1", value: localTime(filters[name]) });
  const kinds = Object.keys(registry.kinds).sort();
  if (filters.kind && !kinds.includes(filters.kind)) kinds.push(filters.kind);
  const types = filters.type && !ENTRY_TYPES.includes(filters.type) ? [...ENTRY_TYPES, filters.type] : ENTRY_TYPES;

  const form = h("form", {
    class: "filters",
    "aria-label": "Filters",
    onsubmit: async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      for (const name of HISTORY_FILTERS) {
        const value = String(data.get(name) || "").trim();
        filters[name] = value && (name === "since" || name === "until") ? zonedTime(value) : value;
      }
      limit = sizeOf(data.get("limit"));
      remember();
      await load(null);
      announce(count.textContent);
    },
  },
  field("agent", "Agent", text("agent")), field("guild", "Guild", text("guild")),
  field("kind", "Kind", choice("kind", kinds, "Any kind")), field("actor", "Actor", text("actor", "a person, a rule, coach")),
  field("outcome", "Outcome", text("outcome", "applied, declined, …")), field("session", "Session", text("session")),
  field("type", "Type", choice("type", types, "Any type")),
  field("since", "Since (inclusive)", moment("since")), field("until", "Until (exclusive)", moment("until")),
  field("limit", "Per page", h("input", { id: id("limit"), name: "limit", type: "number", min: "1", max: "500", value: limit })),
  h("div", { class: "actions" },
    h("button", { type: "submit", class: "primary" }, "Filter"),
    h("button", { type: "button", onclick: () => { form.querySelectorAll("input:not([type=number]), select").forEach((c) => { c.value = ""; }); form.requestSubmit(); } }, "Clear")));

  /** The page's address says its filters (replaced, not pushed: the Back button leaves the page). */
  function remember() {
    const query = new URLSearchParams(chosen());
    if (limit !== HISTORY_PAGE) query.set("limit", String(limit));
    const address = `#/history${String(query) ? `?${query}` : ""}`;
    if (location.hash !== address) history.replaceState(null, "", address);
    for (const link of exports) link.setAttribute("href", exportPath(link.dataset.format));
  }

  const report = h("div", { id: "history-report", role: "status" });
  const exportLink = (format, label) => h("a", {
    class: "button",
    href: exportPath(format),
    download: "",
    dataset: { format },
    onclick: async (event) => {
      event.preventDefault();
      try {
        const got = await download(exportPath(format), `history.${format}`);
        report.replaceChildren(h("p", {}, `Downloaded ${got.name} (${plural(got.size, "byte")}).`));
      } catch (error) { report.replaceChildren(errorBox(error)); }
    },
  }, label);
  const exports = [exportLink("csv", "Download CSV"), exportLink("jsonl", "Download JSON Lines")];
  const verify = h("button", {
    type: "button",
    id: "verify",
    onclick: async () => {
      verify.disabled = true;
      try { report.replaceChildren(verdictOf(await api("GET", "/api/history/verify"))); } catch (error) { report.replaceChildren(errorBox(error)); }
      verify.disabled = false;
    },
  }, "Verify");

  const rows = h("tbody");
  const problem = h("div");
  const count = h("p", { id: "history-count", class: "meta", tabindex: "-1" }, "Loading…");
  const table = h("table", { class: "history", id: "history-table", hidden: true },
    h("caption", { class: "visually-hidden" }, "History entries, newest first"),
    h("thead", {}, h("tr", {}, ["When", "What", "Actor", "Kind", "Target", "Agent", "Session · request"].map((c) => h("th", { scope: "col" }, c)))),
    rows);
  const more = h("button", {
    type: "button",
    id: "load-more",
    hidden: true,
    onclick: async () => {
      more.disabled = true;
      const added = await load(cursor);
      more.disabled = false;
      if (added !== null) announce(`${plural(added, "more entry", "more entries")}. ${count.textContent}`);
      if (more.hidden) count.focus();
    },
  }, "Load more");

  function row(entry) {
    const card = entryHref(entry);
    const seq = entry.seq === null || entry.seq === undefined ? null : `request #${entry.seq}`;
    return h("tr", { dataset: { position: entry.position, type: entry.type } },
      h("td", {}, stamp(entry.at)),
      h("td", {}, h("strong", {}, typeOf(entry)), entry.detail ? h("span", { class: "hint detail" }, preview(entry.detail)) : null),
      h("td", {}, entry.actor, entry.via ? h("span", { class: "hint" }, ` (${entry.via})`) : null),
      h("td", {}, [entry.kind, entry.action].filter(Boolean).join(" · ")),
      h("td", {}, entry.target ?? ""),
      h("td", {}, entry.agent_id ? h("a", { href: agentHref(entry.agent_id) }, entry.agent_id) : ""),
      h("td", { class: "session" }, entry.session_id
        ? [h("a", { href: sessionHref(entry.session_id) }, entry.session_id), seq ? " · " : null,
          seq ? h("span", { class: "seq" }, card ? h("a", { href: card }, seq) : seq) : null]
        : h("span", { class: "hint" }, "none")));
  }

  /** Read a page (the first, or the one at ``next``) and show it; answers how many entries it added (null: none
   * read, or an answer to an older read). */
  async function load(next) {
    const mine = ++reading;
    const query = new URLSearchParams({ ...chosen(), limit: String(limit) });
    if (next) query.set("cursor", next);
    let page;
    try { page = await api("GET", `/api/history?${query}`); } catch (error) {
      if (mine !== reading) return null;
      problem.replaceChildren(errorBox(error));
      if (!next) { rows.replaceChildren(); shown = 0; cursor = null; more.hidden = true; table.hidden = true; count.textContent = ""; }
      return null;
    }
    if (mine !== reading) return null;
    problem.replaceChildren();
    if (!next) { rows.replaceChildren(); shown = 0; }
    rows.append(...page.entries.map(row));
    shown += page.entries.length;
    cursor = page.next_cursor;
    more.hidden = !cursor;
    table.hidden = shown === 0;
    count.textContent = shown
      ? `${plural(shown, "entry", "entries")}, newest first${cursor ? "; more to load" : ""}.`
      : Object.keys(chosen()).length ? "No entry matches these filters." : "No entry yet.";
    return page.entries.length;
  }

  show(heading("History"),
    h("p", { class: "hint" }, "Every proposal, decision, outcome and continuation of the organisation, and every direct write of its workspace. ",
      "A session's or an agent's link opens its timeline."),
    form,
    h("div", { class: "toolbar", role: "group", "aria-label": "Export and verify" }, ...exports, verify),
    report,
    h("section", { "aria-labelledby": "entries-title" }, h("h2", { id: "entries-title" }, "Entries"), count, problem, table, more));
  await load(null);
}

/** Group a timeline's entries (oldest first) per proposal: a proposal's entries (proposed, decided, outcome) at the
 * place of its first; a continuation and a direct write each at its own place. */
function momentsOf(entries) {
  const moments = [];
  const proposals = new Map();
  for (const entry of entries) {
    if (entry.proposal_id && entry.type !== "continued" && entry.type !== "written") {
      const key = `${entry.kind}/${entry.proposal_id}`;
      let moment = proposals.get(key);
      if (!moment) { moment = { proposal: true, entries: [] }; proposals.set(key, moment); moments.push(moment); }
      moment.entries.push(entry);
    } else {
      moments.push({ proposal: false, entries: [entry] });
    }
  }
  return moments;
}

/** A timeline's moment: a proposal with its steps, a continuation (what the coach was told, in full), or a direct
 * write. ``scope`` is the timeline's ("session" or "agent"): the other one is linked. */
function momentElement(moment, index, scope) {
  const id = `moment-${index}`;
  const first = moment.entries[0];
  const where = [
    scope !== "session" && first.session_id ? h("a", { href: sessionHref(first.session_id) }, `session ${first.session_id}`) : null,
    scope !== "agent" && first.agent_id ? h("a", { href: agentHref(first.agent_id) }, `agent ${first.agent_id}`) : null,
  ].filter(Boolean);
  const meta = (...parts) => h("p", { class: "meta" }, parts.filter(Boolean).flatMap((part, i) => (i ? [" · ", part] : [part])));
  if (moment.proposal) {
    const href = entryHref(first);
    const title = subjectOf(first);
    return h("li", { class: "moment proposal", dataset: { proposal: first.proposal_id } },
      h("article", { "aria-labelledby": `${id}-title` },
        h("h3", { id: `${id}-title` }, href ? h("a", { href }, title) : title),
        meta([first.kind, first.action].filter(Boolean).join(" · "), ...where),
        h("ol", { class: "steps", "aria-label": `What happened to ${title}` }, moment.entries.map((entry) =>
          h("li", { class: `step ${entry.type}`, dataset: { type: entry.type, position: entry.position } },
            h("strong", {}, whatOf(entry)), " · ", stamp(entry.at), hashesOf(entry),
            entry.detail ? h("div", { class: "detail" }, entry.type === "proposed" ? `Reason: ${entry.detail}` : entry.detail) : null)))));
  }
  if (first.type === "continued") {
    return h("li", { class: "moment continued", dataset: { type: "continued", position: first.position } },
      h("article", { "aria-labelledby": `${id}-title` },
        h("h3", { id: `${id}-title` }, "The continuation the coach got"),
        meta(stamp(first.at), first.target, ...where),
        h("pre", { class: "told", tabindex: "0", "aria-label": `What the coach was told, ${when(first.at)}` }, first.detail ?? "")));
  }
  return h("li", { class: `moment ${first.type}`, dataset: { type: first.type, position: first.position } },
    h("article", { "aria-labelledby": `${id}-title` },
      h("h3", { id: `${id}-title` }, whatOf(first)),
      meta(stamp(first.at), [first.kind, first.action].filter(Boolean).join(" · "), first.target, ...where),
      hashesOf(first),
      first.detail ? h("div", { class: "detail" }, first.detail) : null));
}

/** A session's or an agent's timeline: its entries oldest first, grouped per proposal, with each continuation in
 * full at its place. The newest entries are read first; Load earlier reads back from there. */
async function timelineView(scope, subject) {
  const by = scope === "session" ? "session" : "agent";
  const enc = encodeURIComponent(subject);
  const links = scope === "session"
    ? [h("a", { href: `#/sessions/${enc}` }, "The session's desk"), h("a", { href: `#/history?session=${enc}` }, "Its entries in the History table")]
    : [h("a", { href: `#/agents/${enc}/proposals` }, "The agent's page"), h("a", { href: `#/history?agent=${enc}` }, "Its entries in the History table")];
  const list = h("ol", { class: "timeline", id: "timeline", "aria-label": "Timeline, oldest first", hidden: true });
  const count = h("p", { id: "timeline-count", class: "meta", tabindex: "-1" }, "Loading…");
  const problem = h("div");
  let entries = []; // newest first, as read
  let cursor = null;
  const earlier = h("button", {
    type: "button",
    id: "load-earlier",
    hidden: true,
    onclick: async () => {
      earlier.disabled = true;
      await load();
      earlier.disabled = false;
      if (earlier.hidden) count.focus();
      announce(count.textContent);
    },
  }, "Load earlier entries");

  async function load() {
    const query = new URLSearchParams({ [by]: subject, limit: "200" });
    if (cursor) query.set("cursor", cursor);
    let page;
    try { page = await api("GET", `/api/history?${query}`); } catch (error) { problem.replaceChildren(errorBox(error)); return; }
    problem.replaceChildren();
    entries = entries.concat(page.entries);
    cursor = page.next_cursor;
    list.replaceChildren(...momentsOf([...entries].reverse()).map((moment, i) => momentElement(moment, i, scope)));
    list.hidden = !entries.length;
    earlier.hidden = !cursor;
    count.textContent = entries.length
      ? `${plural(entries.length, "entry", "entries")}, oldest first${cursor ? "; earlier ones to load" : ""}.` : "No entry yet.";
  }

  show(heading(scope === "session" ? `Timeline of session ${subject}` : `Timeline of agent ${subject}`),
    h("p", {}, links[0], " · ", links[1]), count, earlier, problem, list);
  await load();
}

// --- the policy ---------------------------------------------------------------------------------------------

/** The organisation's policy: the version in force and who set it, its rules as JSON (an admin edits them, tries
 * them over the last requests beside what people did, and saves them as the next version, against the version
 * read: a change someone made meanwhile is refused), and its past versions. */
async function policyView() {
  const problem = h("div");
  const status = h("p", { id: "policy-status", class: "meta", tabindex: "-1" }, "Loading…");
  const editor = h("textarea", { id: "policy-json", rows: 18, cols: 90, spellcheck: "false", "aria-describedby": "policy-hint" });
  const hint = h("p", { id: "policy-hint", class: "hint" },
    "The rules as JSON, read in order (the first matching rule of each effect wins); the CLI's ",
    h("code", {}, "assent policy set"), " also takes YAML. The guide \u201cWrite a policy\u201d in the documentation "
    + "has examples.");
  const trial = h("section", { "aria-labelledby": "trial-title", hidden: true },
    h("h2", { id: "trial-title" }, "Tried over the last requests"));
  const versions = h("ol", { id: "policy-versions", "aria-label": "Versions, newest first" });
  let version = 0;

  function rules() {
    try { return JSON.parse(editor.value); } catch (error) {
      problem.replaceChildren(h("div", { role: "alert", class: "error" }, `Not JSON: ${error.message}`));
      return null;
    }
  }

  async function load() {
    let current, past;
    try {
      [current, past] = await Promise.all([api("GET", "/api/policy"), api("GET", "/api/policy/versions?limit=20")]);
    } catch (error) { problem.replaceChildren(errorBox(error)); return; }
    version = current.version;
    editor.value = JSON.stringify(current.policy, null, 2);
    status.replaceChildren(current.version
      ? `Version ${current.version}, set by ${current.set_by} `
      : "No policy is set: every request waits for one person's decision.",
    current.version && current.set_at ? when(current.set_at) : "");
    versions.replaceChildren(...past.versions.map((v) => h("li", {},
      `Version ${v.version}: ${plural(v.policy.rules.length, "rule")}, by ${v.set_by} `, when(v.set_at))));
  }

  async function tryIt() {
    const policy = rules();
    if (!policy) return;
    let result;
    try { result = await api("POST", "/api/policy/test", { policy, last: 100 }); } catch (error) {
      problem.replaceChildren(errorBox(error)); return;
    }
    problem.replaceChildren();
    const s = result.summary;
    trial.replaceChildren(h("h2", { id: "trial-title" }, "Tried over the last requests"),
      h("p", { id: "trial-summary" }, `Of ${plural(s.replayed, "request")}: the rules would have applied ${s.applied} and `
        + `declined ${s.declined} (${s.differ} unlike what people did); ${s.approvals_required} would have needed several `
        + `approvals, ${s.expired} would have expired, ${s.escalated} escalated.`),
      result.proposals.length ? h("table", {},
        h("caption", { class: "visually-hidden" }, "What the rules would have done, beside what people did"),
        h("thead", {}, h("tr", {}, ["Request", "Kind", "People", "The rules"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, result.proposals.map((r) => h("tr", { class: r.differs ? "differs" : "" },
          h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(r.session_id)}` }, r.target)),
          h("td", {}, r.kind),
          h("td", {}, r.resolved_by ? `${r.status} by ${r.resolved_by}` : r.status),
          h("td", {}, [
            r.decided ? `${r.decided} (rule ${r.decided_by})` : null,
            r.required_by ? `${r.approvals} approvals (rule ${r.required_by})` : null,
            r.expired_by ? `expired (rule ${r.expired_by})` : null,
            r.escalated_by ? `escalated (rule ${r.escalated_by})` : null,
          ].filter(Boolean).join("; ") || "a person decides"))))) : null);
    trial.hidden = false;
  }

  async function save() {
    const policy = rules();
    if (!policy) return;
    try {
      const saved = await api("PUT", "/api/policy", { policy, expected_version: version });
      problem.replaceChildren();
      announce(`Policy version ${saved.version} set`);
      await load();
      status.focus();
    } catch (error) { problem.replaceChildren(errorBox(error)); }
  }

  show(heading("Policy"), status,
    h("label", { for: "policy-json" }, "Rules"), hint, editor,
    h("div", { class: "actions" },
      h("button", { type: "button", onclick: tryIt }, "Try over the last 100 requests"),
      h("button", { type: "button", class: "primary", onclick: save }, "Save as the next version")),
    problem, trial, h("h2", {}, "Versions"), versions);
  await load();
}

// --- routing ------------------------------------------------------------------------------------------------

async function route() {
  generation += 1;
  leaving();
  leaving = () => {};
  const signedIn = Boolean(token());
  document.getElementById("sign-out").hidden = !signedIn;
  document.querySelector("header nav").hidden = !signedIn;
  showIdentity();
  const [hash, search = ""] = (location.hash.replace(/^#/, "") || "/sessions").split("?");
  const parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll("header nav a")) {
    const current = link.getAttribute("href") === `#/${parts[0]}` || (parts[0] === "agents" && link.getAttribute("href") === "#/proposals");
    if (current) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  if (!signedIn || parts[0] === "sign-in") return signIn();
  if (parts[0] === "sessions" && parts[3] !== undefined) return cardView(parts[1], parts[2], parts[3]);
  if (parts[0] === "sessions" && parts[1]) return sessionView(parts[1]);
  if (parts[0] === "sessions") return sessionsView();
  if (parts[0] === "agents" && parts[2] === "proposals") return proposalsView(parts[1]);
  if (parts[0] === "proposals") return proposalsView(null);
  if (parts[0] === "history" && ["session", "agent"].includes(parts[1]) && parts[2]) return timelineView(parts[1], parts[2]);
  if (parts[0] === "history" && !parts[1]) return historyView(new URLSearchParams(search));
  if (parts[0] === "policy") return policyView();
  return show(heading("Not found"), h("p", {}, "No such page. "), h("a", { href: "#/sessions" }, "Sessions"));
}

// The skip link moves the focus; it must not change the hash, which names the page.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
document.getElementById("sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/sign-in";
});
window.addEventListener("hashchange", route);
config = await fetch("/console/config.json").then((r) => r.json()).catch(() => config);
const answer = oidc.returned(location.search);
if (answer) await returnFromIssuer(answer);
registry = await fetch("/console/kinds.json").then((r) => r.json()).catch(() => registry);
operations = await fetch("/openapi.json").then((r) => r.json())
  .then((doc) => Object.fromEntries(Object.entries(doc.paths).map(([path, item]) => [path, Object.keys(item)])))
  .catch(() => operations);
await route();
