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
    sessionStorage.removeItem(TOKEN_KEY);
    signInMessage = "The token was refused (it may have expired): sign in again.";
    location.hash = "#/sign-in";
    throw new ApiError(401, parsed);
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
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

function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
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
  const filters = { state: "", section: "", agent_id: "" };
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
        h("thead", {}, h("tr", {}, ["Session", "Operator", "Source guild", "State", "Waiting on", "Opened"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, page.items.map((s) => h("tr", {},
          h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(s.session_id)}` }, s.session_id)),
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
        h("label", { for: "agent-filter" }, "Agent"), agent, h("button", { type: "submit" }, "Filter")));
    try {
      const page = await api("GET", `/api/studio/pending?${query({ section: filters.section, agent_id: filters.agent_id })}`);
      if (!page.items.length) { across.append(h("p", {}, "Nothing waits on a decision.")); return; }
      across.append(h("table", {},
        h("caption", { class: "visually-hidden" }, `${plural(page.total, "request")} waiting`),
        h("thead", {}, h("tr", {}, ["Request", "Section", "Agent", "Buttons", "Proposed"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, page.items.map((item) => h("tr", {},
          h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(item.session_id)}` }, labelOf(item.target))),
          h("td", {}, item.section), h("td", {}, item.agent_id ?? ""),
          h("td", {}, `${item.apply_label} · ${item.decline_label}`), h("td", {}, when(item.proposed_at)))))));
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
    loginsPanel.append(h("ul", { class: "plain" }, listed.connections.map((c) => {
      const name = `${c.name} (${c.account})`;
      return h("li", { class: "login", dataset: { connection: c.connection_id } },
        h("strong", {}, c.name), ` as ${c.account} · ${c.scope}${c.scope_id ? ` ${c.scope_id}` : ""} · `,
        c.connected ? "connected" : "not connected", c.verified ? " · verified" : "",
        h("br"),
        h("span", { class: "hint" }, c.granted ? `Granted by ${c.granted_by} ${when(c.granted_at)}`
          : c.revoked_by ? `Revoked by ${c.revoked_by} ${when(c.revoked_at)}` : "Not granted"),
        " ",
        h("button", {
          type: "button",
          "aria-label": `${c.granted ? "Revoke" : "Grant"} ${name}`,
          disabled: listed.closed || (!c.granted && !c.connected),
          onclick: async () => {
            try {
              await api("PUT", `${base}/connections/${encodeURIComponent(c.connection_id)}`, { granted: !c.granted });
              announce(`${c.granted ? "Revoked" : "Granted"} ${name}`);
            } catch (error) { loginsPanel.append(errorBox(error)); return; }
            await renderLogins();
            loginsPanel.querySelector(`[data-connection="${CSS.escape(c.connection_id)}"] button`)?.focus();
            await refresh();
          },
        }, c.granted ? "Revoke" : "Grant"));
    })));
  }

  function itemElement(item) {
    const how = decisionOf(sessionId, item);
    const id = `item-${item.seq}`;
    const card = h("div", { class: "card-body", id: `${id}-card`, hidden: true });
    const message = h("p", { class: "message", "aria-live": "polite" });
    const decide = (decision) => async (event) => {
      const buttons = event.currentTarget.parentElement.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      try {
        const answer = await api("POST", how.path, { decision }, { "Idempotency-Key": idempotencyKey() });
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
      actions.append(
        h("button", { type: "button", class: "primary", onclick: decide(how.apply) }, item.apply_label),
        h("button", { type: "button", onclick: decide(how.decline) }, item.decline_label));
    }
    const badges = [
      item.stale ? h("span", { class: "badge warn" }, "Stale") : null,
      item.widens ? h("span", { class: "badge warn" }, "Widens access") : null,
      item.decided_alone || registry.kinds[item.kind]?.decided_alone ? h("span", { class: "badge" }, "Decided alone") : null,
    ];
    const el = h("li", { class: "item", id, dataset: { seq: item.seq } },
      h("article", { "aria-labelledby": `${id}-title` },
        h("h3", { id: `${id}-title` }, labelOf(item.target), " ", ...badges),
        h("p", { class: "meta" }, `${item.kind} · ${item.action}`,
          item.agent_tab ? ` · in the tab of agent ${item.agent_tab}` : item.agent_id ? ` · agent ${item.agent_id}` : "",
          item.lines?.added || item.lines?.removed ? ` · ${counts(item.lines)}` : "", item.proposed_at ? ` · ${when(item.proposed_at)}` : ""),
        item.reason ? h("p", { class: "reason" }, item.reason) : null,
        actions, message, card));
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

  async function refresh() {
    let pending;
    try { pending = await api("GET", `${base}/pending`); } catch (error) { summary.replaceChildren(detailOf(error)); return; }
    summary.textContent = pending.summary || `Waiting on ${plural(pending.waiting_on, "decision")}`;
    sectionList.replaceChildren(...Object.entries(pending.sections || {}).map(([name, n]) =>
      h("li", { class: n ? "" : "zero" }, `${name} `, h("span", { class: "count" }, n))));
    agentList.replaceChildren(
      h("li", {}, h("button", { type: "button", class: "chip", "aria-pressed": String(!state.agent),
        onclick: () => { state.agent = null; refresh(); } }, "All agents")),
      ...Object.entries(pending.agents || {}).map(([agent, n]) => h("li", {},
        h("button", { type: "button", class: "chip", "aria-pressed": String(state.agent === agent),
          onclick: () => { state.agent = agent; refresh(); } }, `${agent} `, h("span", { class: "count" }, n)))));
    renderItems(pending);
  }

  show(
    heading(`Session ${sessionId}`),
    h("section", { class: "tray", "aria-label": "Tray" }, summary, sectionList, agentList, toolbar, result, loginsPanel),
    items);
  summary.setAttribute("tabindex", "-1");
  const mine = generation;
  await refresh();
  if (mine === generation) leaving = follow(`${base}/events`, refresh);
}

/** A link to the card page of the proposal of ``kind`` at ``seq`` (null where its endpoint reads none by seq). */
function cardLink(sessionId, kind, seq, text) {
  const endpoint = registry.kinds[kind]?.endpoint;
  if (!endpoint || !operations[`/api/studio/sessions/{session_id}/${endpoint}/{seq}`]?.includes("get")) return null;
  return h("a", { href: `#/sessions/${encodeURIComponent(sessionId)}/${encodeURIComponent(endpoint)}/${seq}` }, text);
}

function bulkReport(which, answer, sessionId) {
  const resolved = answer.resolved || [];
  const skipped = answer.skipped || [];
  const parts = [h("p", { class: "bulk-summary" },
    answer.message || `${which}: ${plural(resolved.length, "request")} resolved, ${skipped.length} skipped.`)];
  if (resolved.length) parts.push(h("ul", { class: "plain", id: "resolved", "aria-label": "Resolved" },
    resolved.map((r) => h("li", {}, cardLink(sessionId, r.kind, r.seq, `seq ${r.seq} (${r.kind}): ${r.outcome}`)
      || `seq ${r.seq} (${r.kind}): ${r.outcome}`))));
  parts.push(h("p", { id: "skipped-count" }, `Skipped: ${skipped.length}`));
  if (skipped.length) parts.push(h("ul", { class: "plain" }, skipped.map((s) => h("li", {}, `seq ${s.seq} (${s.kind}): ${s.reason}`))));
  if (answer.stopped) parts.push(h("p", { class: "error" }, `Stopped at seq ${answer.stopped.seq}: ${answer.stopped.status}, ${answer.stopped.detail}`));
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
  if (card.version !== undefined) {
    parts.push(h("p", { class: "meta version" }, `Version ${card.version}`,
      card.versions?.length ? ` of ${card.versions.length} (${card.versions.map((v) => `${v.version} by ${v.author}`).join(", ")})` : ""));
  }
  if (card.missing_notes?.length) parts.push(h("p", { class: "badge warn" }, `Needs notes that do not exist yet: ${card.missing_notes.join(", ")}`));
  const changed = (card.fields || []).filter((f) => f.diff);
  for (const field of changed) {
    parts.push(h("h4", {}, `${field.name} `, h("span", { class: "count" }, counts(field.lines))));
    parts.push(diffBlock(field.diff, `Changes to ${field.name}`));
  }
  if (!changed.length && card.diff) parts.push(diffBlock(card.diff, "Changes"));
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
      by ? ` by ${by}` : "", resolution.resolved_at ? ` · ${when(resolution.resolved_at)}` : ""),
    resolution.detail ? h("p", { class: "detail" }, resolution.detail) : null,
  ];
  const decisions = resolution.decisions || [];
  if (decisions.length) {
    parts.push(h("ol", { class: "decisions", "aria-label": "Decisions" }, decisions.map((d) => h("li", {},
      `${d.decision} by ${d.actor} (${d.via}) · ${when(d.decided_at)}: `, h("strong", {}, d.outcome || "no outcome yet"),
      d.detail ? h("span", { class: "hint" }, ` — ${d.detail}`) : ""))));
  }
  if (resolution.told) {
    parts.push(h("h4", {}, "What the coach was told ", h("span", { class: "hint" }, when(resolution.told.continued_at))),
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
  try { card = await api("GET", path); } catch (error) { show(heading(`Seq ${seq}`), back, errorBox(error)); return; }
  const kind = registry.kinds[card.kind] || Object.values(registry.kinds).find((k) => k.endpoint === endpoint) || {};
  const parts = [
    heading(`${labelOf(card.target) || `Seq ${seq}`}`), back,
    h("p", { class: "meta" }, [`seq ${seq}`, card.kind, card.action, card.lines ? counts(card.lines) : null].filter(Boolean).join(" · ")),
    card.reason || card.rationale ? h("p", { class: "reason" }, card.reason || card.rationale) : null,
  ];
  if (card.status === "pending") {
    const decide = (decision) => async (event) => {
      const buttons = event.currentTarget.parentElement.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      try {
        const answer = await api("POST", path, { decision }, { "Idempotency-Key": idempotencyKey() });
        announce(`${labelOf(card.target) || `seq ${seq}`}: ${answer?.outcome || decision}`);
        await cardView(sessionId, endpoint, seq);
      } catch (error) {
        message.replaceChildren(detailOf(error));
        buttons.forEach((b) => { b.disabled = false; });
      }
    };
    parts.push(h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: decide(kind.apply || "apply") }, card.apply_label || kind.apply || "Apply"),
      h("button", { type: "button", onclick: decide(kind.decline || "decline") }, card.decline_label || kind.decline_label || "Decline")), message);
  }
  show(...parts, body);
  await renderCard(body, path, false, card);
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
  show(heading(`Proposals of ${agentId}`), agentForm(agentId), waiting, decided, feed);

  // A hosted source has one branch (approving commits and deploys); an external one offers the branch choice.
  let repository = null;
  try { repository = await api("GET", `/api/workspace/agents/${encodeURIComponent(agentId)}/repository`); } catch { /* none yet */ }
  const branches = repository?.mode === "external";

  // A waiting proposal's element stays while the proposal is unchanged, so that a re-read (another proposal
  // arrived, or one was decided elsewhere) keeps what the operator is typing into its form.
  let waitingItems = new Map();
  const refresh = coalesced(async () => {
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
        h("strong", {}, e.what), ` by ${e.who ?? "someone"} · ${when(e.when)}`,
        e.reason ? ` · ${e.reason}` : "", e.detail ? h("span", { class: "hint" }, ` — ${e.detail}`) : "",
        e.links?.commit ? h("span", { class: "hint" }, ` · commit ${String(e.links.commit).slice(0, 10)}`) : ""))) : h("p", {}, "No activity yet."));
  });

  function proposalElement(p, open) {
    const id = `proposal-${p.proposal_id}`;
    const message = h("p", { class: "message", "aria-live": "polite" });
    const parts = [
      h("h3", { id: `${id}-title` }, p.reason),
      h("p", { class: "meta" }, [p.from_builder_chat ? "From the builder chat" : `from ${p.origin}`, p.model,
        p.asked_by ? `asked by ${p.asked_by}` : null, when(p.proposed_at),
        p.source_version ? `on ${p.source_version.slice(0, 10)}` : null].filter(Boolean).join(" · ")),
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
      parts.push(h("p", { class: "meta" }, [p.status, p.resolved_by ? `by ${p.resolved_by}` : null, when(p.resolved_at),
        p.branch ? `branch ${p.branch}` : null, p.commit ? `commit ${p.commit.slice(0, 10)}` : null].filter(Boolean).join(" · ")));
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

// --- routing ------------------------------------------------------------------------------------------------

async function route() {
  generation += 1;
  leaving();
  leaving = () => {};
  const signedIn = Boolean(token());
  document.getElementById("sign-out").hidden = !signedIn;
  const hash = location.hash.replace(/^#/, "") || "/sessions";
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
