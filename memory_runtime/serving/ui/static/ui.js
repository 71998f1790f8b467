// The memory page of memlm (memory_runtime/serving/ui.py). Plain JavaScript, no dependencies.
//
// Safety rules this file keeps:
// - the API key is kept in sessionStorage (this tab only) and sent only as the Authorization
//   header of fetch calls to this server's JSON API: never in a URL, never in a cookie;
// - every text from the memory or the model is put in the page with textContent (el() below),
//   never as HTML.
"use strict";

const KEY_ITEM = "memlm-api-key";
const NAMESPACE_ITEM = "memlm-namespace"; // the namespace chosen for a key that may act in several
const PAGE = 50; // facts per page
const SHOWN = 500; // search results shown at most
const ROOT = document.body.dataset.root || "";
const state = { key: null, namespace: null, offset: 0, total: 0, mode: "list", lastTurn: null, shown: 0, turns: 0 };

const $ = (id) => document.getElementById(id);

// An element with text children only: strings become text nodes, never markup.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// An error whose message is a sentence for the person using the page (sentence() shows only these).
class Problem extends Error {}

class ApiError extends Problem {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// What the page says about an error: its sentence, never a script's own text ("x.map is not a function").
function sentence(err) {
  if (err instanceof Problem) return err.message;
  console.error(err); // a fault of the page itself: the details are for whoever debugs it
  return "Something went wrong in the page; nothing was changed by it. Reload the page and try again.";
}

function apiUrl(path, params) {
  const url = new URL(ROOT + path, window.location.origin);
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, value);
  }
  return url;
}

// A call to the JSON API with the key in the Authorization header; errors raise ApiError.
async function api(path, { method = "GET", params, body, raw = false } = {}) {
  const headers = { Authorization: "Bearer " + state.key };
  const acting = sessionStorage.getItem(NAMESPACE_ITEM);
  if (acting) headers["Memlm-Namespace"] = acting; // the server checks that the key may act there
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(apiUrl(path, params), {
      method,
      headers,
      body: body === undefined || body instanceof Blob ? body : JSON.stringify(body), // a Blob (a file): as it is
      credentials: "omit",
      cache: "no-store",
    });
  } catch (_) {
    throw new Problem("The server could not be reached: is memlm still running?");
  }
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try {
      message = (await response.json()).error.message;
    } catch (_) {
      /* not an API error body */
    }
    if (response.status === 401 && state.key) signOut(message);
    throw new ApiError(message, response.status);
  }
  return raw ? response : response.json();
}

const pad = (n, width = 2) => String(n).padStart(width, "0");
// A unix time as the page writes every time: YYYY-MM-DD HH:MM:SS, 24-hour, local (year 1 is 0001).
function when(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const d = new Date(seconds * 1000);
  return `${pad(d.getFullYear(), 4)}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
const triplet = (t) => (Array.isArray(t) ? t : [t.subject, t.relation, t.object]).join(" · ");
const count = (n, what) => `${n.toLocaleString("en")} ${what}${n === 1 ? "" : "s"}`;

function say(text, kind) {
  const status = $("status");
  status.textContent = text;
  status.className = "status" + (kind ? " " + kind : "");
}

// Long work (a search, an export, an import, a save): its controls are disabled and, past a glance
// (150 ms), the status says what is being done, until it ends; a click is never silently ignored
// nor sent twice. The work's own message (or error) replaces the busy one.
async function busy(ids, message, work) {
  const controls = ids.map($).filter(Boolean);
  for (const control of controls) control.disabled = true;
  $("memory").setAttribute("aria-busy", "true");
  const shown = setTimeout(() => say(message, "busy"), 150);
  try {
    return await work();
  } finally {
    clearTimeout(shown);
    for (const control of controls) control.disabled = false;
    $("memory").removeAttribute("aria-busy");
  }
}

const AS_OF = /^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?$/;

// The as-of field as a unix time (null: now). It takes what the table shows: a date alone (the start
// of that day) or a date and a 24-hour time, local; anything else is refused with a sentence.
function asOf() {
  const field = $("as-of");
  const value = field.value.trim();
  field.removeAttribute("aria-invalid");
  if (!value) return null;
  const m = AS_OF.exec(value);
  const [year, month, day, hour, minute, second] = m ? m.slice(1).map((part) => Number(part || 0)) : [];
  const d = new Date(2000, 0, 1);
  d.setFullYear(year, month - 1, day); // setFullYear: years 0-99 are not taken for 1900-1999
  d.setHours(hour, minute, second, 0);
  const exact =
    m && d.getFullYear() === year && d.getMonth() === month - 1 && d.getDate() === day && d.getHours() === hour;
  if (!exact || minute > 59 || second > 59) {
    field.setAttribute("aria-invalid", "true");
    throw new Problem(`“${value}” is not a date the page can read: write it as YYYY-MM-DD or YYYY-MM-DD HH:MM (24-hour).`);
  }
  return d.getTime() / 1000;
}

// ------------------------------------------------------------------ signing in and out

async function signIn(key) {
  state.key = key;
  state.offset = 0;
  try {
    await showFacts();
  } catch (err) {
    state.key = null;
    if (err.status === 403 && sessionStorage.getItem(NAMESPACE_ITEM)) {
      sessionStorage.removeItem(NAMESPACE_ITEM); // the namespace chosen before is not this key's (any more)
      return signIn(key);
    }
    $("sign-in-error").textContent = err.status === 401 ? "This key is not known to the server." : sentence(err);
    return;
  }
  sessionStorage.setItem(KEY_ITEM, key);
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("who").hidden = false;
  $("sign-out").hidden = false;
  loadRelations();
  loadNamespaces();
  warmIndex();
}

// The fuzzy indexes of the memory shown are built while the person reads the table, not at their
// first search with a typo (7 s at 100,000 facts); a search before it is done waits for the same build.
function warmIndex() {
  api("/v1/memory/index", { method: "POST" })
    .then(() => performance.mark("memlm:fuzzy-ready"))
    .catch(() => {}); /* a search builds them itself, and says so if it fails */
}

function signOut(message) {
  sessionStorage.removeItem(KEY_ITEM);
  sessionStorage.removeItem(NAMESPACE_ITEM);
  $("namespace-switch").hidden = true;
  state.key = null;
  state.namespace = null;
  $("key").value = "";
  $("app").hidden = true;
  $("who").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = typeof message === "string" ? message : "";
  $("facts").tBodies[0].replaceChildren();
  const turns = $("turns");
  if (turns) turns.replaceChildren();
}

// ------------------------------------------------------------------ facts

// Each listing or search takes a number; an answer that arrives after a later one's request is dropped
// (two quick clicks on "Older" must not leave the first page's rows under the second page's label).
async function showFacts() {
  state.mode = "list";
  const asked = ++state.shown;
  const offset = state.offset;
  const page = await api("/v1/memory/facts", {
    params: {
      limit: PAGE,
      offset,
      order: "newest",
      relation: $("filter-relation").value.trim(),
      as_of: asOf(),
    },
  });
  if (asked !== state.shown) return;
  if (!page.data.length && offset > 0 && page.total > 0) {
    state.offset = Math.floor((page.total - 1) / PAGE) * PAGE; // past the end (facts were forgotten): the last page
    return showFacts();
  }
  state.total = page.total;
  state.namespace = page.namespace;
  $("namespace").textContent = page.namespace;
  $("fuzzy").replaceChildren();
  renderFacts(page.data);
  const first = page.data.length ? offset + 1 : 0;
  $("page-info").textContent = `${first.toLocaleString("en")}–${(offset + page.data.length).toLocaleString("en")} of ${page.total.toLocaleString("en")}`;
  $("prev").disabled = offset === 0;
  $("next").disabled = offset + page.data.length >= page.total;
  $("pager").hidden = false;
  const at = asOf();
  say(
    (at === null ? count(page.total, "current fact") : `${count(page.total, "fact")} valid at ${when(at)}`) +
      ($("filter-relation").value.trim() ? ` of “${$("filter-relation").value.trim()}”` : ""),
  );
  performance.mark("memlm:facts-shown");
}

async function search() {
  const params = {
    subject: $("q-subject").value.trim(),
    relation: $("q-relation").value.trim(),
    object: $("q-object").value.trim(),
    as_of: asOf(),
  };
  if (!params.subject && !params.relation && !params.object) return showFacts();
  performance.mark("memlm:search-start");
  const asked = ++state.shown;
  const found = await api("/v1/memory/search", { params });
  if (asked !== state.shown) return;
  state.mode = "search";
  renderFacts(found.data.slice(0, SHOWN));
  $("fuzzy").replaceChildren(
    ...found.fuzzy.map((m) =>
      el("li", {}, `fuzzy ${m.field}: “${m.asked}” → “${m.matched}” (similarity ${m.score.toFixed(2)})`),
    ),
  );
  $("pager").hidden = true;
  const shown = found.data.length > SHOWN ? ` (the first ${SHOWN} shown)` : "";
  say(
    found.data.length ? `${count(found.data.length, "fact")} found${shown}` : "Nothing found, exactly or fuzzily.",
    found.data.length ? "" : "warn",
  );
  performance.mark("memlm:search-shown");
  performance.measure("memlm:search", "memlm:search-start", "memlm:search-shown");
}

function refresh() {
  return (state.mode === "search" ? search() : showFacts()).catch((err) => say(sentence(err), "error"));
}

function renderFacts(facts) {
  const rows = facts.map((f) => {
    const actions = el("td", { class: "actions", dataset: { label: "" } });
    actions.append(el("button", { type: "button", class: "quiet", onclick: () => showHistory(f) }, "History"));
    if (f.valid_to === null) {
      actions.append(
        el("button", { type: "button", class: "quiet", onclick: () => openFactDialog(f) }, "Correct"),
        el("button", { type: "button", class: "quiet danger", onclick: () => confirmForget(actions, f, false) }, "Forget"),
        el("button", { type: "button", class: "quiet danger", onclick: () => confirmForget(actions, f, true) }, "Purge"),
      );
    }
    return el(
      "tr",
      { dataset: { id: f.id }, class: f.valid_to === null ? "" : "ended" },
      el("td", { dataset: { label: "subject" } }, entity(f.subject)),
      el("td", { dataset: { label: "relation" } }, f.relation),
      el("td", { dataset: { label: "object" } }, entity(f.object)),
      el("td", { dataset: { label: "since" }, class: "time" }, when(f.valid_from)),
      sourceCell(f.source),
      el("td", { dataset: { label: "until" }, class: "time until" }, f.valid_to === null ? "" : `${when(f.valid_to)} (${f.ended_by})`),
      actions,
    );
  });
  $("facts").classList.toggle("with-until", facts.some((f) => f.valid_to !== null)); // a column for ended facts only
  if (!rows.length) rows.push(el("tr", { class: "empty" }, el("td", { colspan: "7" }, "No facts here.")));
  $("facts").tBodies[0].replaceChildren(...rows);
}

// What wrote a fact: a turn of this tab's chat (a link to it), another chat turn (its id's end),
// or what else wrote it ("import", "page", "correction", "restore", "chat" for memlm chat, "cli" for
// memlm memory write); nothing for facts written before sources were kept.
function sourceCell(source) {
  const cell = el("td", { dataset: { label: "source" }, class: "source" });
  if (!source) return cell;
  if (!source.startsWith("chatcmpl-")) {
    cell.append(source);
    return cell;
  }
  const turn = [...document.querySelectorAll(".turn")].find((t) => t.dataset.source === source);
  if (turn) {
    const show = () => {
      turn.scrollIntoView({ block: "center" });
      turn.classList.add("flash");
      setTimeout(() => turn.classList.remove("flash"), 1500);
    };
    cell.append(el("button", { type: "button", class: "link", title: source, onclick: show }, `turn ${turn.dataset.turn}`));
  } else {
    cell.append(el("span", { title: source }, `chat …${source.slice(-6)}`));
  }
  return cell;
}

function confirmForget(cell, fact, purge) {
  const keep = [...cell.childNodes];
  const back = () => cell.replaceChildren(...keep);
  cell.replaceChildren(
    el("span", { class: "ask" }, purge ? "Erase every version for good?" : "Forget (kept in history)?"),
    el("button", { type: "button", class: "danger", onclick: () => forget(fact, purge) }, purge ? "Erase" : "Yes, forget"),
    el("button", { type: "button", class: "quiet", onclick: back }, "No"),
  );
}

async function forget(fact, purge) {
  try {
    const done = await api("/v1/memory/facts", {
      method: "DELETE",
      params: { subject: fact.subject, relation: fact.relation, object: fact.object, purge: purge ? "true" : "" },
    });
    await refresh();
    if (!done.forgotten) say(`Nothing to ${purge ? "erase" : "forget"}: ${triplet(fact)} is no longer in memory.`, "warn");
    else if (purge) say(`Erased ${count(done.forgotten, "version")} for good: ${triplet(fact)}`, "ok");
    else say(`Forgot ${count(done.forgotten, "fact")}: ${triplet(fact)} (kept in history)`, "ok");
    if (!purge && done.forgotten) offerUndo(fact);
    loadRelations();
  } catch (err) {
    say(sentence(err), "error");
  }
}

async function showHistory(fact) {
  try {
    const versions = await api("/v1/memory/history", { params: { subject: fact.subject, relation: fact.relation } });
    $("history-title").textContent = `History of ${fact.subject} · ${fact.relation}`;
    $("history-list").replaceChildren(
      ...versions.data.map((v) =>
        el(
          "li",
          { class: v.valid_to === null ? "current" : "ended" },
          el("span", { class: "object" }, v.object),
          el("span", { class: "muted" }, ` since ${when(v.valid_from)}` + (v.source ? ` (${v.source.startsWith("chatcmpl-") ? "chat" : v.source})` : "")),
          v.valid_to === null ? el("span", { class: "tag" }, "current") : el("span", { class: "muted" }, ` until ${when(v.valid_to)} (${v.ended_by})`),
          v.ended_by === "forgotten" ? el("button", { type: "button", class: "quiet", onclick: () => restore(v) }, "Restore") : null,
        ),
      ),
    );
    $("history").hidden = false;
    $("history").scrollIntoView({ block: "nearest" });
  } catch (err) {
    say(sentence(err), "error");
  }
}

async function loadRelations() {
  try {
    const relations = await api("/v1/memory/relations");
    $("relations").replaceChildren(...relations.data.map((r) => el("option", { value: r.relation }, `${r.facts} facts`)));
  } catch (_) {
    /* the filter still takes any relation typed */
  }
}

// ------------------------------------------------------------------ undo, namespaces, the graph

// After a forget: Undo beside the message, until the next message replaces it.
function offerUndo(fact) {
  const slot = $("undo");
  slot.replaceChildren(el("button", { type: "button", class: "quiet", onclick: () => restore(fact) }, "Undo"));
  slot.hidden = false;
  const next = new MutationObserver(() => {
    slot.hidden = true;
    next.disconnect();
  });
  next.observe($("status"), { childList: true, characterData: true, subtree: true });
}

// A forgotten fact current again, as a new version (the forget stays in its history); the server
// refuses, saying why, where a newer fact took its place or the fact was purged.
async function restore(fact) {
  try {
    const done = await api("/v1/memory/facts/restore", { method: "POST", body: { id: fact.id } });
    await refresh();
    say(`Restored ${triplet(done.restored)} (its history keeps the forget)`, "ok");
    if (!$("history").hidden) showHistory(done.restored);
    loadRelations();
  } catch (err) {
    say(sentence(err), "error");
  }
}

// A key that may act in several namespaces gets a select of them; any other key sees its own only.
async function loadNamespaces() {
  try {
    const found = await api("/v1/memory/namespaces");
    const names = found.data.includes(found.namespace) ? found.data : [...found.data, found.namespace];
    $("namespace-select").replaceChildren(...names.map((name) => el("option", { value: name }, name)));
    $("namespace-select").value = found.namespace;
    $("namespace-switch").hidden = names.length < 2 && !found.any;
  } catch (_) {
    $("namespace-switch").hidden = true;
  }
}

function switchNamespace(name) {
  sessionStorage.setItem(NAMESPACE_ITEM, name);
  state.offset = 0;
  state.lastTurn = null; // feedback is on the last reply of a namespace: this chat was in another
  $("history").hidden = true;
  $("graph").hidden = true;
  const turns = $("turns");
  if (turns) turns.replaceChildren();
  refresh();
  loadRelations();
}

// A subject or object in the table: a button that shows the name's facts as a graph.
function entity(name) {
  return el("button", { type: "button", class: "link entity", title: "its facts as a graph", onclick: () => showGraph(name) }, name);
}

const SVG_NS = "http://www.w3.org/2000/svg";
const GRAPH = { width: 760, height: 420, rx: 200, ry: 150, neighbours: 24 };

// An SVG element with text children only, as el(): attributes are set one by one, nothing is parsed.
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const shortened = (text, n = 24) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

// One person's or organisation's facts (current, or valid at the as-of time) as a star: the name
// in the middle, a node per other name it is related to, each edge labelled with its relations and
// pointing from subject to object. A click on another name centres the graph on it.
async function showGraph(name) {
  try {
    const at = asOf();
    const [out, into] = await Promise.all(
      ["subject", "object"].map((field) => api("/v1/memory/search", { params: { [field]: name, as_of: at } })),
    );
    const exact = (found) => (found.fuzzy.length ? [] : found.data); // a fuzzy match is another name's facts
    const linked = new Map(); // "out|name" or "in|name" -> {other, outgoing, relations}
    for (const [facts, outgoing] of [[exact(out), true], [exact(into), false]]) {
      for (const f of facts) {
        const other = outgoing ? f.object : f.subject;
        const link = linked.get(`${outgoing}|${other}`) || { other, outgoing, relations: [] };
        if (!link.relations.includes(f.relation)) link.relations.push(f.relation);
        linked.set(`${outgoing}|${other}`, link);
      }
    }
    const links = [...linked.values()];
    const shown = links.slice(0, GRAPH.neighbours);
    const n = exact(out).length + exact(into).length;
    $("graph-title").textContent = `Facts of ${name}`;
    $("graph-note").textContent =
      (n ? count(n, at === null ? "current fact" : `fact valid at ${when(at)}`) : "No facts here.") +
      (links.length > shown.length ? `; the first ${shown.length} of ${links.length} names shown` : "") +
      (n ? " · a click on a name shows its facts" : "");
    drawGraph(name, shown);
    $("graph").hidden = false;
    $("graph").scrollIntoView({ block: "nearest" });
  } catch (err) {
    say(sentence(err), "error");
  }
}

function drawGraph(name, links) {
  const { width, height, rx, ry } = GRAPH;
  const [cx, cy] = [width / 2, height / 2];
  const title = shortened(name, 32);
  const [hw, hh] = [title.length * 4 + 12, 14]; // half the name's box in the middle (13px text, bold)
  const arrow = svg(
    "marker",
    { id: "graph-arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }),
  );
  const edges = [];
  const nodes = [];
  links.forEach((link, i) => {
    const angle = (2 * Math.PI * i) / links.length - Math.PI / 2;
    const [cos, sin] = [Math.cos(angle), Math.sin(angle)];
    const [x, y] = [cx + rx * cos, cy + ry * sin];
    const length = Math.hypot(x - cx, y - cy);
    const [ux, uy] = [(x - cx) / length, (y - cy) / length];
    const out = Math.min(hw / Math.abs(ux), hh / Math.abs(uy)) + 2; // where the line leaves the box
    const [near, far] = [[cx + ux * out, cy + uy * out], [x - ux * 8, y - uy * 8]];
    const [from, to] = link.outgoing ? [near, far] : [far, near]; // from subject to object
    const label = link.relations.join(", ");
    const [lx, ly] = [cx + (x - cx) * 0.6, cy + (y - cy) * 0.6 - 4];
    edges.push(
      svg(
        "g",
        { class: "edge" },
        svg("title", {}, label),
        svg("line", { x1: from[0], y1: from[1], x2: to[0], y2: to[1], "marker-end": "url(#graph-arrow)" }),
        svg("text", { class: "edge-label", x: lx, y: ly, "text-anchor": "middle" }, shortened(label, 28)),
      ),
    );
    const anchor = cos > 0.3 ? "start" : cos < -0.3 ? "end" : "middle";
    const dx = anchor === "start" ? 10 : anchor === "end" ? -10 : 0;
    const dy = anchor !== "middle" ? 4 : sin < 0 ? -12 : 20;
    const node = svg(
      "g",
      { class: "node", tabindex: "0", role: "button", "aria-label": `facts of ${link.other}` },
      svg("title", {}, link.other),
      svg("circle", { cx: x, cy: y, r: 6 }),
      svg("text", { x: x + dx, y: y + dy, "text-anchor": anchor }, shortened(link.other)),
    );
    node.addEventListener("click", () => showGraph(link.other));
    node.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        showGraph(link.other);
      }
    });
    nodes.push(node);
  });
  const centre = svg(
    "g",
    { class: "node centre" },
    svg("title", {}, name),
    svg("rect", { x: cx - hw, y: cy - hh, width: 2 * hw, height: 2 * hh, rx: hh }),
    svg("text", { x: cx, y: cy + 4.5, "text-anchor": "middle" }, title),
  );
  $("graph-svg").replaceChildren(svg("defs", {}, arrow), ...edges, ...nodes, centre);
}

// ------------------------------------------------------------------ adding and correcting

let replacing = null;

function openFactDialog(fact) {
  replacing = fact || null;
  $("fact-title").textContent = fact ? "Correct a fact" : "Add a fact";
  $("fact-replaces").textContent = fact ? `Replaces ${triplet(fact)} (kept in history).` : "";
  $("f-subject").value = fact ? fact.subject : "";
  $("f-relation").value = fact ? fact.relation : "";
  $("f-object").value = fact ? fact.object : "";
  $("fact-error").textContent = "";
  $("fact-dialog").showModal();
}

// What a write did, in one sentence: added, replaced (the old fact kept in history) or unchanged.
function whatChanged(written, replaced, unchanged) {
  const facts = (list) => list.map(triplet).join("; ");
  if (replaced.length) return `Replaced ${facts(replaced)} with ${facts(written)} (kept in history).`;
  return unchanged ? `Unchanged: ${facts(written)} is already in memory.` : `Added ${facts(written)}.`;
}

async function saveFact() {
  const body = { subject: $("f-subject").value, relation: $("f-relation").value, object: $("f-object").value };
  if (replacing) body.replaces = { subject: replacing.subject, relation: replacing.relation, object: replacing.object };
  try {
    const done = await api("/v1/memory/facts", { method: "POST", body });
    $("fact-dialog").close();
    await refresh();
    say(whatChanged(done.written, [...done.superseded, ...done.ended], done.status === "duplicate"), "ok");
    loadRelations();
  } catch (err) {
    $("fact-error").textContent = sentence(err);
  }
}

// ------------------------------------------------------------------ export and import

async function exportMemory() {
  try {
    const response = await api("/v1/memory/export", { raw: true });
    const parts = []; // read as it streams, so the status can say how far it is
    let bytes = 0;
    for (const reader = response.body.getReader(); ; ) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      bytes += value.length;
      say(`Exporting… ${(bytes / 1e6).toFixed(1)} MB so far`, "busy");
    }
    const blob = new Blob(parts, { type: "application/json" });
    const link = el("a", { href: URL.createObjectURL(blob), download: `memlm-${state.namespace}.json` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    say(`Exported ${(bytes / 1e6).toFixed(1)} MB: ${link.download}`, "ok");
  } catch (err) {
    say(sentence(err), "error");
  }
}

// A file sent once, as it is (an export, or a list of {subject, relation, object}): the server
// checks all of it and stores all of it, history and dates included, or nothing, and says in a
// sentence what it stored or what is wrong and where in the file.
async function importMemory(file) {
  const limit = Number(document.body.dataset.maxImportBytes) || Infinity;
  if (file.size > limit) {
    const mb = (n) => (n / 2 ** 20).toLocaleString("en", { maximumFractionDigits: 1 });
    say(`${file.name} is ${mb(file.size)} MB, more than this server takes in an import (${mb(limit)} MB): nothing was imported. memlm memory import takes it where the memory is.`, "error");
    return;
  }
  let done;
  try {
    done = await api("/v1/memory/import", { method: "POST", body: file });
  } catch (err) {
    say(`${file.name} was not imported, nothing was stored: ${sentence(err)}`, "error");
    return;
  }
  await refresh();
  say(`Imported ${file.name}: ${done.message}`, "ok");
  loadRelations();
}

// ------------------------------------------------------------------ chat with the trace

function callKind(call) {
  if (call.kind !== "error") return call.kind;
  if (call.status.startsWith("held back")) return "held";
  if (call.status.startsWith("refused")) return "refused";
  return "error";
}
const KIND_LABEL = { read: "read", write: "write", held: "held back", refused: "refused", error: "not stored" };

function renderTrace(trace, number) {
  const calls = trace.calls.map((call) => {
    const kind = callKind(call);
    const item = el(
      "li",
      { class: "call " + kind },
      el("span", { class: "badge" }, KIND_LABEL[kind]),
      el("code", {}, call.text),
      el("span", { class: "call-status" }, call.status),
    );
    const notes = [];
    if (call.kind === "read") {
      notes.push(...(call.results.length ? call.results.map((t) => "→ " + triplet(t)) : ["→ nothing"]));
    }
    for (const m of call.fuzzy || []) notes.push(`fuzzy ${m.field}: “${m.asked}” → “${m.matched}” (${m.score.toFixed(2)})`);
    for (const t of call.superseded || []) notes.push("supersedes " + triplet(t));
    const scores = Object.entries(call.scores || {});
    if (scores.length) notes.push("scores " + scores.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", "));
    if (call.run) notes.push(`proposed by sampled run ${call.run} (generation.propose)`);
    if (notes.length) item.append(el("ul", { class: "notes" }, notes.map((n) => el("li", {}, n))));
    return item;
  });
  const ms = Math.round(trace.timings.wall_seconds * 1000);
  return el(
    "details",
    { class: "trace", open: "" },
    el("summary", {}, `turn ${number} · ${count(trace.calls.length, "memory call")} · ${trace.status} · ${ms} ms`),
    calls.length ? el("ol", { class: "calls" }, calls) : el("p", { class: "muted" }, "No memory calls."),
    trace.repeated_wrong ? el("p", { class: "warn" }, "This answer was marked wrong before: please correct it.") : null,
  );
}

function feedbackBar(turn) {
  const result = el("p", { class: "feedback-result", role: "status" });
  const input = el("input", { class: "correction", placeholder: "No, Dorothea works for BMW now.", "aria-label": "correction" });
  const form = el("form", { class: "correct-form", hidden: "" }, input, el("button", { type: "submit" }, "Send correction"));
  const send = async (body) => {
    try {
      const done = await api("/v1/feedback", { method: "POST", body });
      if (body.rating === "good") {
        result.textContent = !done.kept
          ? "Noted (this server keeps no feedback: its feedback_dir is not set)."
          : done.record
            ? `Kept for review (${done.record}): memlm feedback list`
            : "Noted.";
      }
      else if (body.rating === "bad") {
        result.textContent = !done.kept
          ? "Marked wrong (this server keeps no feedback: its feedback_dir is not set)."
          : `Marked wrong; kept for review as an example of what not to do${done.record ? ` (${done.record})` : ""}: memlm feedback list`;
      }
      else {
        result.textContent = done.writes && done.writes.length
          ? whatChanged(done.writes, [...(done.superseded || []), ...(done.ended || [])], false)
          : "No fact found in the correction: nothing stored.";
        form.hidden = true;
        refresh();
      }
    } catch (err) {
      result.textContent = sentence(err);
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) send({ correction: input.value.trim() });
  });
  const bar = el(
    "div",
    { class: "feedback" },
    el("button", { type: "button", class: "quiet", onclick: () => send({ rating: "good" }) }, "Good"),
    el("button", { type: "button", class: "quiet", onclick: () => send({ rating: "bad" }) }, "Bad"),
    el("button", { type: "button", class: "quiet", onclick: () => { form.hidden = !form.hidden; input.focus(); } }, "Correct…"),
    form,
    result,
  );
  turn.feedback = bar;
  return bar;
}

async function chat(text) {
  if (state.lastTurn) state.lastTurn.feedback.querySelectorAll("button, input").forEach((b) => (b.disabled = true));
  const reply = el("p", { class: "msg assistant", "aria-live": "polite" });
  const item = el("li", { class: "turn" }, el("p", { class: "msg user" }, text), reply);
  $("turns").append(item);
  item.scrollIntoView({ block: "end" });
  item.dataset.turn = ++state.turns;
  let trace;
  try {
    trace = await streamReply(text, reply, item);
  } catch (err) {
    reply.textContent = sentence(err);
    reply.classList.add("error");
    return;
  }
  if (trace && trace.reply !== reply.textContent) {
    // the stream showed the reply as generated; the turn's final reply says what really happened
    // ("I could not store that." when a write the model acknowledged was refused or held back)
    reply.textContent = trace.reply;
    reply.title = "the reply as streamed was corrected when the turn ended";
  }
  if (!reply.textContent) reply.textContent = "(no answer)";
  const turn = {};
  if (trace) item.append(renderTrace(trace, item.dataset.turn));
  item.append(feedbackBar(turn));
  state.lastTurn = turn;
  item.scrollIntoView({ block: "end" });
  refresh();
  loadRelations();
}

// Send one user turn and stream the visible reply into `reply`; returns the trace of the last chunk.
// The turn's id (every chunk's) is kept on `item`: the facts the turn stored name it as their source.
async function streamReply(text, reply, item) {
  const response = await api("/v1/chat/completions", {
    method: "POST",
    raw: true,
    body: { model: "memlm", stream: true, messages: [{ role: "user", content: text }], memlm: { trace: true } },
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let trace = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6));
      if (chunk.error) throw new ApiError(chunk.error.message, 500);
      if (chunk.id) item.dataset.source = chunk.id;
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && delta.content) reply.textContent += delta.content;
      if (chunk.memlm) trace = chunk.memlm;
    }
  }
  return trace;
}

// ------------------------------------------------------------------ wiring

function on(id, event, handler) {
  const node = $(id);
  if (node) node.addEventListener(event, handler);
}

function submitted(id, handler) {
  on(id, "submit", (event) => {
    event.preventDefault(); // nothing is ever submitted by the browser itself: the key stays out of URLs
    handler();
  });
}

submitted("sign-in-form", () => {
  $("sign-in-error").textContent = "";
  signIn($("key").value.trim());
});
on("sign-out", "click", () => signOut());
submitted("search-form", () =>
  busy(["search", "search-clear"], "Searching…", search).catch((err) => say(sentence(err), "error")),
);
on("search-clear", "click", () => {
  for (const id of ["q-subject", "q-relation", "q-object"]) $(id).value = "";
  state.offset = 0;
  refresh();
});
on("filter-relation", "change", () => {
  state.offset = 0;
  showFacts().catch((err) => say(sentence(err), "error"));
});
on("as-of", "change", () => {
  state.offset = 0;
  refresh();
});
on("as-of", "keydown", (event) => {
  if (event.key === "Enter") $("as-of").dispatchEvent(new Event("change"));
});
on("as-of-now", "click", () => {
  $("as-of").value = "";
  state.offset = 0;
  refresh();
});
on("prev", "click", () => {
  state.offset = Math.max(0, state.offset - PAGE);
  refresh();
});
on("next", "click", () => {
  state.offset += PAGE;
  refresh();
});
on("history-close", "click", () => ($("history").hidden = true));
on("graph-close", "click", () => ($("graph").hidden = true));
on("namespace-select", "change", (event) => switchNamespace(event.target.value));
on("add-fact", "click", () => openFactDialog(null));
submitted("fact-form", () => busy(["fact-save"], "Saving…", saveFact));
on("fact-cancel", "click", () => $("fact-dialog").close());
on("export", "click", () => busy(["export"], "Exporting…", exportMemory));
on("import-file", "change", (event) => {
  const file = event.target.files[0];
  event.target.value = "";
  if (file) busy(["import-file"], `Importing ${file.name}…`, () => importMemory(file));
});
submitted("chat-form", () => {
  const input = $("chat-input");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  $("send").disabled = true;
  chat(text)
    .catch((err) => say(sentence(err), "error"))
    .finally(() => ($("send").disabled = false));
});
on("chat-input", "keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("chat-form").requestSubmit();
  }
});

const saved = sessionStorage.getItem(KEY_ITEM);
if (saved) signIn(saved);
