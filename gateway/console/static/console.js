// The tms-hbase console: one page, a screen per hash route (#/overview, #/topics, ...). Every number
// comes from the gateway's /console/api endpoints (the library underneath); nothing here talks to HBase.
// Text from the data is only ever set as textContent, never as markup.
"use strict";

const { lineChart, ratesOf, shortNumber } = window.tmsChart;
const screen = document.getElementById("screen");
const REFRESH_MS = 5000;
let session = null;
let refreshTimer = null;
let firstScreen = true;

// -- helpers --------------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class ApiError extends Error {
  constructor(status, text) {
    super(text);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const init = { method: options.method || "GET", credentials: "same-origin", headers: {} };
  if (init.method !== "GET") init.headers["X-CSRF-Token"] = session ? session.csrf : "";
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch("/console/api" + path, init);
  if (response.status === 401) {
    location.href = "/console/login";
    throw new ApiError(401, "signed out");
  }
  const text = await response.text();
  if (!response.ok) throw new ApiError(response.status, text.trim() || response.statusText);
  return JSON.parse(text);
}

const enc = encodeURIComponent;
const topicPath = (ns, t) => `/topics/${enc(ns)}/${enc(t)}`;

function when(ms) {
  if (ms === null || ms === undefined) return "never";
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return `${ms} ms (out of range)`;
  return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function ago(ms, now) {
  if (ms === null || ms === undefined) return "";
  const s = Math.max(0, ((now || Date.now()) - ms) / 1000);
  if (s < 120) return `${s.toFixed(0)} s ago`;
  if (s < 7200) return `${(s / 60).toFixed(0)} min ago`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h ago`;
  return `${(s / 86400).toFixed(1)} d ago`;
}

function seconds(s) {
  if (s === null || s === undefined) return "";
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function bytesText(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1073741824) return `${(n / 1048576).toFixed(1)} MiB`;
  return `${(n / 1073741824).toFixed(2)} GiB`;
}

function badge(text, kind) {
  return el("span", { class: `badge ${kind || String(text).replace(/ /g, "-")}` }, text);
}

// A transaction pointer (sent as text: it is past 2^53) as the time its transaction started, in ms.
function pointerTime(pointer) {
  return Number(BigInt(pointer) / 1000000n);
}

function card(title, ...body) {
  return el("div", { class: "card" }, el("h3", {}, title), ...body);
}

function facts(pairs) {
  return el("dl", {}, pairs.filter(Boolean).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function table(headers, rows, attrs) {
  return el(
    "table",
    attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.endsWith("#") ? "num" : "" }, h.replace(/#$/, ""))))),
    el("tbody", {}, rows),
  );
}

function hexToBytes(hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(i * 2, 2), 16);
  return out;
}

function payloadAs(hex, format) {
  if (hex === null) return "";
  if (format === "hex") return hex.replace(/(..)/g, "$1 ").trim();
  const text = new TextDecoder("utf-8", { fatal: false }).decode(hexToBytes(hex));
  if (format === "json") {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch (e) {
      return "(not JSON) " + text;
    }
  }
  return text;
}

// Which screen is shown: route() counts every navigation, so a dialog knows the screen it belongs to.
let shownScreen = 0;

let dialogOpener = null; // the element focused when the dialog opened: focused again when it closes

function closeDialog() {
  const modal = document.getElementById("modal");
  if (modal.hidden) return;
  modal.hidden = true;
  document.getElementById("modal-body").replaceChildren();
  refocus(dialogOpener);
  dialogOpener = null;
}

// A selector that finds `element` again once the screen has been drawn anew (its id, a link's target or a sort
// button's column), or null.
function findAgain(element) {
  if (!element || element === document.body) return null;
  if (element.id) return `#${CSS.escape(element.id)}`;
  const href = element.getAttribute("href");
  if (href) return `${element.tagName.toLowerCase()}[href="${CSS.escape(href)}"]`;
  if (element.dataset.sort) return `${element.tagName.toLowerCase()}[data-sort="${CSS.escape(element.dataset.sort)}"]`;
  return null;
}

// Focus `element`, or the element that replaced it when the screen was drawn anew meanwhile (the refresh every
// REFRESH_MS redraws the screen: a keyboard user keeps their place).
function refocus(element) {
  if (!element) return;
  if (element.isConnected) {
    element.focus();
    return;
  }
  const selector = findAgain(element);
  const again = selector && document.querySelector(selector);
  if (again) again.focus();
}

// A confirmation of a change to `target` (named in its title, and sent with the change for the server to
// check), opened by the screen `opener` (the shownScreen when its action started): if another screen is
// shown by now it never opens, and navigating away closes it. onConfirm() runs when the user presses the button.
function confirmDialog(title, body, button, onConfirm, opener = shownScreen) {
  if (opener !== shownScreen) return;
  const modal = document.getElementById("modal");
  const box = document.getElementById("modal-body");
  const error = el("p", { class: "error", id: "modal-error", role: "alert" });
  const ok = el("button", { class: "danger", id: "confirm" }, button);
  const cancel = el("button", { class: "secondary", id: "cancel" }, "Cancel");
  box.replaceChildren(el("h2", { id: "modal-title" }, title), body, error, el("div", { class: "actions" }, cancel, ok));
  dialogOpener = document.activeElement;
  modal.hidden = false;
  cancel.addEventListener("click", closeDialog);
  ok.addEventListener("click", async () => {
    ok.disabled = true;
    try {
      await onConfirm();
      if (opener === shownScreen) closeDialog();
    } catch (e) {
      error.textContent = e.message;
      ok.disabled = false;
    }
  });
  cancel.focus();
}

function ready(name) {
  // tests and the speed check wait for this: the screen's data is on the page
  document.body.dataset.ready = name;
  if (firstScreen) {
    firstScreen = false;
    performance.mark("tms-console-ready");
  }
}

function refreshWhileOpen(fn) {
  clearInterval(refreshTimer);
  refreshTimer = setInterval(fn, REFRESH_MS);
}

// A list paged, sorted and filtered by the gateway (`path` answers {total, page, size, rows}): `columns` are
// [key, label, cell(row), number?]; a column header is a button that sorts by it (again: the other way).
function pagedList({ path, id, noun, columns, sort, rowAttrs, filterLabel, done }) {
  const state = { filter: "", sort, desc: false, page: 0 };
  const body = el("tbody");
  const count = el("span", { class: "muted", id: `${id}-count`, role: "status" });
  const error = el("p", { class: "error", id: `${id}-error`, role: "alert" });
  const progress = el("p", { class: "muted", id: `${id}-progress`, role: "status" });
  let again = null;
  const prev = el("button", { class: "secondary", id: `${id}-previous`, onclick: () => { state.page -= 1; load(); } }, "Previous");
  const next = el("button", { class: "secondary", id: `${id}-next`, onclick: () => { state.page += 1; load(); } }, "Next");
  const heads = columns.map(([key, label, , number]) => {
    const th = el("th", { class: number ? "num" : "", scope: "col" });
    th.appendChild(el("button", { class: "sort", "data-sort": key, onclick: () => {
      state.desc = state.sort === key ? !state.desc : Boolean(number);
      state.sort = key;
      state.page = 0;
      load();
    } }, label));
    return th;
  });
  let timer = null;
  const filter = el("input", { id: `${id}-filter`, type: "search", placeholder: "namespace:topic", "aria-label": filterLabel,
    oninput: () => { clearTimeout(timer); timer = setTimeout(() => { state.filter = filter.value; state.page = 0; load(); }, 200); } });
  let loads = 0;
  async function load() {
    const q = new URLSearchParams({ filter: state.filter, page: state.page, size: 50 });
    if (state.sort) q.set("sort", state.sort);
    if (state.desc) q.set("desc", "true");
    const mine = ++loads;
    let d;
    try {
      d = await api(`${path}?${q}`);
      if (mine !== loads) return; // a later request (another filter, sort or page) answers instead
      error.textContent = "";
    } catch (e) {
      if (mine !== loads) return;
      if (e.status === 401) throw e;
      error.textContent = e.message;
      body.replaceChildren();
      if (done) done();
      return;
    }
    body.replaceChildren(...d.rows.map((r) => el("tr", rowAttrs(r), columns.map(([, , cell, number]) => el("td", { class: number ? "num" : "" }, cell(r))))));
    // total null: the gateway just started and counts the topics in the background (the page came from the first ones)
    const counting = d.total === null;
    const pages = counting ? d.page + 2 : Math.max(1, Math.ceil(d.total / d.size));
    count.textContent = counting
      ? `page ${d.page + 1}; counting the ${noun}…`
      : `${d.total.toLocaleString("en")} ${noun}, page ${d.page + 1} of ${pages.toLocaleString("en")}`;
    prev.disabled = d.page === 0;
    next.disabled = d.page + 1 >= pages;
    // a sort by a number past 1,000 topics: the gateway reads their numbers in the background; ask again until done
    const reading = counting || (d.numbers_read !== undefined && d.numbers_read < d.total);
    progress.textContent = reading && !counting
      ? `Numbers read for ${d.numbers_read.toLocaleString("en")} of ${d.total.toLocaleString("en")} ${noun} so far: sorted among those, the others follow; reading the rest…`
      : "";
    clearTimeout(again);
    const opened = shownScreen;
    if (reading) again = setTimeout(() => { if (opened === shownScreen) load(); }, 2000);
    for (const th of heads) {
      const key = th.firstChild.dataset.sort;
      if (key === state.sort) th.setAttribute("aria-sort", state.desc ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    }
    if (done) done();
  }
  const node = el("div", {}, el("div", { class: "toolbar" }, el("label", {}, filterLabel, filter)),
    el("div", { class: "pager" }, prev, next, count), error, progress,
    el("table", { id }, el("thead", {}, el("tr", {}, heads)), body));
  return { node, load };
}

const topicLink = (name) => {
  const [ns, ...rest] = name.split(":");
  return el("a", { href: `#/topics/${enc(ns)}/${enc(rest.join(":"))}` }, name);
};
const subscriptionLink = (topicName, name) => {
  const [ns, ...rest] = topicName.split(":");
  return el("a", { href: `#/subscriptions/${enc(ns)}/${enc(rest.join(":"))}/${enc(name)}` }, name);
};
// A subscription's kind as the lists show it: exclusive, shared, or shared in key order.
const kindOf = (shared) => (shared ? (shared.ordering === "key" ? "shared, key order" : "shared") : "exclusive");
const maybe = (value, show) => (value === null || value === undefined ? "" : show ? show(value) : value);

// -- screens ---------------------------------------------------------------------------------------

async function overview() {
  const o = await api("/overview");
  const h = o.hbase;
  const cards = [
    card("Installation", el("div", { class: "big" }, o.prefix), facts([["HBase Thrift", h.address]])),
    card(
      "HBase",
      el("div", { class: "big" }, h.reachable ? badge("reachable", "ok") : badge("unreachable", "bad")),
      facts([h.reachable ? ["round trip", `${h.latency_ms} ms`] : ["error", h.error]]),
    ),
  ];
  if (h.reachable) {
    const tc = o.tail_cache, sw = o.sweeper, tx = o.tx_server;
    cards.push(
      card(
        "Tail cache",
        el("div", { class: "big" }, tc ? `${tc.seconds} s` : "not set"),
        facts([
          tc ? null : ["meaning", "writers trust a remembered tail for 1 s, sweepers assume 30 s"],
          tc && tc.previous !== null ? ["previous", `${tc.previous} s until ${when(tc.transition_ends)}`] : null,
        ]),
      ),
      card(
        "Sweeper",
        el("div", { class: "big" }, sw.never_swept.length ? badge(`${sw.never_swept.length} regions never swept`, "warn") : badge("all regions swept", "ok")),
        facts([
          ["last complete sweep", sw.newest_sweep ? `${when(sw.newest_sweep)} (${ago(sw.newest_sweep)})` : "never"],
          ["oldest region sweep", sw.oldest_sweep ? ago(sw.oldest_sweep) : "never"],
          ["prune bound", sw.global_bound === null ? "none" : `invalid transactions before ${when(pointerTime(sw.global_bound))} can go`],
          ["invalid / prunable", `${sw.invalid} / ${sw.prunable}`],
        ]),
      ),
      card(
        "Transaction server",
        el("div", { class: "big" }, tx.reachable ? badge(tx.status, "ok") : badge("unreachable", "bad")),
        facts(
          tx.reachable
            ? [["address", tx.address], ["in progress", tx.in_progress], ["invalid", tx.invalid], ["read pointer", tx.read_pointer]]
            : [["address", tx.address], ["error", tx.error]],
        ),
      ),
    );
  }
  const parts = [el("h1", {}, "Overview"), el("div", { class: "cards", id: "overview" }, cards)];
  const tot = o.totals;
  if (h.reachable) parts.push(...recentSweeps(o.sweeper.recent), ...openTransactions(o.open_transactions, tot && tot.held));
  if (tot) {
    parts.push(el("h2", {}, "Totals"));
    if (tot.messages === undefined) {
      const topics = tot.topics === null ? "Topics being counted (the gateway just started)" : `${tot.topics} topics`;
      parts.push(el("p", { class: "muted", id: "totals" }, `${topics}: totals are shown up to ${tot.limit} topics; the Topics screen pages through them.`));
    } else {
      parts.push(el("div", { class: "cards", id: "totals" },
        card("Topics", el("div", { class: "big" }, shortNumber(tot.topics))),
        card("Messages", el("div", { class: "big" }, shortNumber(tot.messages)), facts([["bytes", bytesText(tot.bytes)]])),
        card("Subscriptions", el("div", { class: "big" }, shortNumber(tot.subscriptions)))),
      el("h2", {}, "Slowest subscriptions"),
      tot.slowest.length
        ? table(["subscription", "topic", "kind", "lag#", "lag time#"], tot.slowest.map((s) => el("tr", {},
          el("td", {}, subscriptionLink(s.topic, s.name)), el("td", {}, topicLink(s.topic)), el("td", {}, s.kind),
          el("td", { class: "num" }, s.lag_messages), el("td", { class: "num" }, seconds(s.lag_seconds)))), { id: "slowest" })
        : el("p", { class: "muted", id: "slowest" }, "no subscriptions"));
    }
  }
  screen.replaceChildren(...parts);
  ready("overview");
}

function recentSweeps(recent) {
  return [
    el("h2", {}, "Recent sweeps"),
    recent.length
      ? table(["region", "swept completely", "rows#"], recent.map((r) => el("tr", {},
        el("td", { class: "mono" }, r.region), el("td", {}, `${when(r.completed)} (${ago(r.completed)})`),
        el("td", { class: "num" }, r.rows))), { id: "recent-sweeps" })
      : el("p", { class: "muted", id: "recent-sweeps" }, "No region has been swept completely yet: is a sweeper running (tms-sweeper)?"),
  ];
}

// The transactions in progress, and the subscriptions they hold back (undefined: not read, past the totals' limit).
function openTransactions(open, held) {
  const oldest = open.oldest.map((t) => el("li", {}, `Transaction ${t.write_pointer}, open since ${when(t.started)} (started ${ago(t.started)})`));
  const words = open.count === 0
    ? "No transaction is in progress: none holds consumers back."
    : `${open.count} transaction${open.count === 1 ? " is" : "s are"} in progress; a consumer reading committed messages waits at the first message of each.`;
  const parts = [el("h2", {}, "Open transactions"), el("div", { id: "open-transactions" }, el("p", {}, words), oldest.length ? el("ul", {}, oldest) : null,
    open.count > oldest.length ? el("p", { class: "muted" }, `and ${open.count - oldest.length} more: see `, el("a", { href: "#/transactions" }, "Transactions")) : null)];
  if (held === undefined) return parts;
  parts.push(held.length
    ? table(["subscription", "topic", "held back#", "lag#"], held.map((s) => el("tr", {},
      el("td", {}, subscriptionLink(s.topic, s.name)), el("td", {}, topicLink(s.topic)),
      el("td", { class: "num" }, `${s.held} messages wait for a transaction`), el("td", { class: "num" }, s.lag_messages))), { id: "held" })
    : el("p", { class: "muted", id: "held" }, "No subscription waits for a transaction in progress."));
  return parts;
}

async function topics() {
  const list = pagedList({
    path: "/topic-page",
    id: "topics",
    noun: "topics",
    sort: "name",
    filterLabel: "filter namespace:topic",
    rowAttrs: (t) => ({ "data-topic": t.name }),
    columns: [
      ["name", "topic", (t) => topicLink(t.name)],
      ["messages", "messages", (t) => t.messages, true],
      ["bytes", "bytes", (t) => bytesText(t.bytes), true],
      ["last_publish", "last publish", (t) => (t.last_publish ? ago(t.last_publish) : "never"), true],
      ["rate", "msg/s (1 min)", (t) => maybe(t.rate, (r) => r.toFixed(2)), true],
      ["lag_messages", "worst lag", (t) => maybe(t.lag_messages), true],
      ["lag_seconds", "worst lag time", (t) => maybe(t.lag_seconds, seconds), true],
      ["ordering", "ordering", (t) => t.ordering],
      ["tx_mode", "tx.mode", (t) => t.tx_mode],
      ["ttl", "TTL", (t) => seconds(t.ttl), true],
    ],
    done: () => ready("topics"),
  });
  const parts = [el("h1", {}, "Topics")];
  if (session.admin) parts.push(createForm());
  parts.push(el("p", { class: "muted" }, `Numbers as this gateway worker read them within the last few seconds. Sorting by a number past 1,000 topics reads their numbers in the background: the order settles when all are read.`), list.node);
  screen.replaceChildren(...parts);
  await list.load();
}

function createForm() {
  const ns = el("input", { id: "new-namespace", placeholder: "namespace", required: true });
  const name = el("input", { id: "new-topic", placeholder: "topic", required: true });
  const ttl = el("input", { id: "new-ttl", placeholder: "seconds (7 d)", type: "number", min: 1 });
  const ordering = el("select", { id: "new-ordering" }, el("option", { value: "" }, "default ordering"), el("option", {}, "sequencer"), el("option", {}, "chain"));
  const mode = el("select", { id: "new-tx-mode" }, el("option", { value: "" }, "tx.mode: any"), el("option", {}, "transactional"), el("option", {}, "non-transactional"));
  const create = () => {
    const properties = {};
    if (ttl.value) properties.ttl = ttl.value;
    if (ordering.value) properties.ordering = ordering.value;
    if (mode.value) properties["tx.mode"] = mode.value;
    const body = el("div", {}, el("p", {}, `Create topic ${ns.value}:${name.value} with`), el("pre", { class: "mono" }, JSON.stringify(properties, null, 2)));
    const target = `${ns.value}:${name.value}`;
    confirmDialog(`Create topic ${target}`, body, "Create", async () => {
      await api(topicPath(ns.value, name.value), { method: "PUT", body: { properties, target } });
      location.hash = `#/topics/${enc(ns.value)}/${enc(name.value)}`;
    });
  };
  return el(
    "form",
    { class: "toolbar", id: "create-topic", onsubmit: (e) => { e.preventDefault(); create(); } },
    el("label", {}, "namespace", ns),
    el("label", {}, "topic", name),
    el("label", {}, "TTL", ttl),
    el("label", {}, "ordering", ordering),
    el("label", {}, "tx.mode", mode),
    el("button", { type: "submit" }, "Create topic…"),
  );
}

async function topic(ns, t) {
  const d = await api(topicPath(ns, t));
  const rates = Object.entries(d.rates).map(([w, r]) => [`rate, last ${w / 60} min`, `${r.toFixed(2)} msg/s`]);
  const subs = d.subscriptions.map((s) =>
    el(
      "tr",
      {},
      el("td", {}, el("a", { href: `#/subscriptions/${enc(ns)}/${enc(t)}/${enc(s.name)}` }, s.name)),
      el("td", {}, kindOf(s.shared)),
      el("td", { class: "num" }, s.lag ? s.lag.messages : ""),
      el("td", { class: "num" }, s.lag ? seconds(s.lag.seconds) : ""),
      el("td", {}, s.owner ? badge("consuming", "ok") : s.shared ? `${s.shared.consumers} consumers` : badge("idle")),
    ),
  );
  const parts = [
    el("h1", {}, `Topic ${d.namespace}:${d.topic}`),
    el("p", { class: "muted" }, `Numbers read ${when(d.read_at)}; this screen refreshes every ${REFRESH_MS / 1000} s.`),
    el(
      "div",
      { class: "cards", id: "topic-detail" },
      card("Size", el("div", { class: "big", id: "topic-messages" }, `${d.messages} messages`),
        facts([["bytes", bytesText(d.bytes) + (d.bytes_exact ? "" : " (estimated)")], ["in transactions in progress", el("span", { id: "topic-uncommitted" }, `${d.uncommitted} messages`)], ["published to this generation", d.published ?? "unknown"]])),
      card("Publishing", facts([["last publish", d.last_publish ? `${when(d.last_publish)} (${ago(d.last_publish)})` : "never"], ...rates])),
      card("Settings", facts([["ordering", d.ordering], ["tx.mode", d.tx_mode], ["TTL", `${d.ttl} s (${seconds(d.ttl)})`], ["generation", d.generation],
        ...Object.entries(d.properties).filter(([k]) => !["ttl", "tx.mode"].includes(k)).map(([k, v]) => [k, v])])),
    ),
    el("div", { class: "split" },
      lineChart("publish rate (msg/s), from the published-messages counter", [{ name: "msg/s", points: ratesOf(d.history) }]),
      lineChart("lag (messages) of the subscriptions furthest behind", Object.entries(d.lag_history).map(([name, h]) => ({ name, points: h.map((x) => [x[0], x[1]]) })))),
    el("p", { class: "toolbar" }, el("a", { href: `#/messages/${enc(ns)}/${enc(t)}` }, "Browse messages"),
      el("a", { href: `#/tail/${enc(ns)}/${enc(t)}` }, "Live tail"), el("a", { href: `#/search/${enc(ns)}/${enc(t)}` }, "Search"),
      d.may_publish ? el("a", { href: `#/produce/${enc(ns)}/${enc(t)}`, id: "produce-link" }, "Produce a message") : null),
    el("h2", {}, "Subscriptions"),
    table(["name", "kind", "lag messages#", "lag time#", "consumer"], subs, { id: "topic-subscriptions" }),
  ];
  if (d.may_change) parts.splice(2, 0, topicActions(d));
  screen.replaceChildren(...parts);
  ready("topic");
  refreshWhileOpen(() => route(true));
}

function topicActions(d) {
  const current = { ...d.properties };
  const editor = el("textarea", { id: "properties", "aria-label": "properties (JSON)" }, JSON.stringify(current, null, 2));
  const edit = () => {
    let next;
    try {
      next = JSON.parse(editor.value);
    } catch (e) {
      alertBox(`not JSON: ${e.message}`);
      return;
    }
    const keys = [...new Set([...Object.keys(current), ...Object.keys(next)])].sort();
    const rows = keys
      .filter((k) => current[k] !== next[k])
      .map((k) => el("tr", {}, el("td", {}, k), el("td", { class: "removed" }, current[k] ?? "(unset)"), el("td", { class: "added" }, next[k] ?? "(removed)")));
    const body = rows.length
      ? el("div", { class: "diff" }, el("p", {}, "These properties change:"), table(["property", "now", "after"], rows, { id: "property-diff" }))
      : el("p", {}, "Nothing changes.");
    const target = `${d.namespace}:${d.topic}`;
    confirmDialog(`Update ${target}`, body, "Update", async () => {
      await api(topicPath(d.namespace, d.topic) + "/properties", { method: "PUT", body: { properties: next, target } });
      route();
    });
  };
  const remove = () => {
    const typed = el("input", { id: "confirm-name", placeholder: `${d.namespace}:${d.topic}` });
    const body = el("div", {}, el("p", {}, `Delete topic ${d.namespace}:${d.topic}, its ${d.messages} messages and its ${d.subscriptions.length} subscriptions? Type its name to confirm.`), typed);
    const target = `${d.namespace}:${d.topic}`;
    confirmDialog(`Delete topic ${target}`, body, "Delete", async () => {
      if (typed.value !== target) throw new Error("the name typed does not match");
      await api(topicPath(d.namespace, d.topic), { method: "DELETE", body: { target } });
      location.hash = "#/topics";
    });
  };
  return el("details", { class: "card", id: "topic-actions" },
    el("summary", {}, "Change this topic"),
    el("p", { class: "muted" }, "Properties (replaced as a whole; ordering is fixed for a generation):"),
    editor,
    el("div", { class: "toolbar" }, el("button", { id: "update-topic", onclick: edit }, "Update…"), el("button", { class: "danger", id: "delete-topic", onclick: remove }, "Delete…")));
}

function alertBox(text) {
  confirmDialog("Error", el("p", {}, text), "OK", async () => {});
}

// A topic name field whose suggestions (up to 1,000 topics) are read when it is first used, not with the screen.
function topicPicker(title, target, ns, t) {
  const names = el("datalist", { id: "topic-names" });
  const suggest = async () => {
    input.removeEventListener("focus", suggest);
    const list = await api("/topics");
    names.replaceChildren(...list.slice(0, 1000).map((x) => el("option", { value: `${x.namespace}:${x.topic}` })));
  };
  const input = el("input", { id: "topic-pick", list: "topic-names", placeholder: "namespace:topic", value: ns ? `${ns}:${t}` : "", onfocus: suggest });
  const go = (e) => {
    e.preventDefault();
    const [a, ...b] = input.value.split(":");
    location.hash = `#/${target}/${enc(a)}/${enc(b.join(":"))}`;
  };
  return el("form", { class: "toolbar", onsubmit: go }, el("label", {}, title, input), names, el("button", { type: "submit" }, "Open"));
}

// A message as the browser, the tail and the search show it (a row of a table with MESSAGE_COLUMNS).
const MESSAGE_COLUMNS = ["id", "published", "transaction", "key", "headers", "payload"];
function messageRow(r, format) {
  const headers = (r.headers || []).map(([name, value]) => `${name}: ${payloadAs(value, "text")}`).join("\n");
  return el(
    "tr",
    { "data-state": r.state || "" },
    el("td", { class: "mono" }, r.id || `position ${r.position}`),
    el("td", {}, r.publish_time ? when(r.publish_time) : ""),
    el("td", {}, r.state ? badge(r.state) : el("span", { class: "muted" }, "not transactional")),
    el("td", { class: "key" }, r.key === null || r.key === undefined ? "" : payloadAs(r.key, "text")),
    el("td", { class: "headers" }, headers),
    el("td", { class: "payload" }, r.error ? el("span", { class: "error" }, r.error) : payloadAs(r.payload, format)),
  );
}

const formatPicker = (id) => el("select", { id }, ["text", "json", "hex"].map((f) => el("option", {}, f)));

// The live tail: a long poll (the gateway answers as soon as a message arrives, or after 10 s) from the
// topic's last message on, while this screen is shown and not paused; the newest 500 rows stay.
async function tailScreen(ns, t) {
  const mine = shownScreen;
  const base = topicPath(ns, t);
  let { after } = await api(`${base}/tail`);
  let paused = false;
  const body = el("tbody");
  const status = el("p", { class: "muted", id: "tail-status", role: "status" }, "Waiting for new messages…");
  const format = formatPicker("tail-format");
  const pause = el("button", { class: "secondary", id: "tail-pause", onclick: () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    status.textContent = paused ? "Paused: nothing is read until you resume (no message is missed)." : "Waiting for new messages…";
    if (!paused) follow();
  } }, "Pause");
  screen.replaceChildren(el("h1", {}, `Live tail of ${ns}:${t}`),
    el("div", { class: "toolbar" }, pause, el("label", {}, "payload as", format)), status,
    el("table", { id: "tail" }, el("thead", {}, el("tr", {}, MESSAGE_COLUMNS.map((h) => el("th", { scope: "col" }, h)))), body));
  ready("tail");
  let following = false;
  async function follow() {
    if (following) return;
    following = true;
    try {
      while (!paused && mine === shownScreen) {
        const got = await api(`${base}/tail?${new URLSearchParams({ after, wait: 10 })}`);
        if (mine !== shownScreen || paused) break; // paused meanwhile: what it brought is read again on resume
        after = got.after;
        for (const r of got.messages) body.appendChild(messageRow(r, format.value));
        while (body.children.length > 500) body.firstChild.remove();
        if (got.messages.length && !paused) status.textContent = `Last message ${when(got.messages[got.messages.length - 1].publish_time)}.`;
      }
    } catch (e) {
      if (mine === shownScreen) status.textContent = `Stopped: ${e.message}`;
    } finally {
      following = false;
    }
  }
  follow();
}

// Search: bounded steps of the gateway's search (5,000 messages a call) one after another, with the
// progress shown, until the range ends, the scan limit is reached, or Stop is pressed.
async function searchScreen(ns, t) {
  const mine = shownScreen;
  const base = topicPath(ns, t);
  const needle = el("input", { id: "search-text", required: true });
  const where = el("select", { id: "search-in" }, ["payload", "key", "header"].map((w) => el("option", { value: w }, w)));
  const from = el("input", { id: "search-from", placeholder: "YYYY-MM-DD HH:MM:SS (UTC)" });
  const to = el("input", { id: "search-to", placeholder: "YYYY-MM-DD HH:MM:SS (UTC)" });
  const fromId = el("input", { id: "search-from-id", placeholder: "hex id" });
  const limit = el("input", { id: "search-limit", type: "number", min: 1, value: 100000 });
  const format = formatPicker("search-format");
  const progress = el("p", { class: "muted", id: "search-progress", role: "status" });
  const stop = el("button", { type: "button", class: "secondary", id: "search-stop", disabled: true }, "Stop");
  const body = el("tbody");
  const time = (v) => (v.trim() ? Date.parse(v.includes("T") ? v : v.trim().replace(" ", "T") + "Z") : null);
  let run = 0;
  stop.addEventListener("click", () => { run += 1; });
  const go = async (e) => {
    e.preventDefault();
    const mineRun = ++run;
    body.replaceChildren();
    progress.textContent = "Searching…";
    stop.disabled = false;
    let next = fromId.value.trim() || null, scanned = 0, found = 0, first = true;
    const q = { q: needle.value, in: where.value };
    const start = time(from.value), end = time(to.value);
    try {
      while (mineRun === run && mine === shownScreen && (first || next) && scanned < Number(limit.value)) {
        const p = new URLSearchParams({ ...q, scan: Math.min(5000, Number(limit.value) - scanned) });
        if (next) p.set("id", next);
        else if (start !== null) p.set("from", start);
        if (end !== null) p.set("to", end);
        const got = await api(`${base}/search?${p}`);
        first = false;
        scanned += got.scanned;
        found += got.matches.length;
        next = got.next;
        for (const r of got.matches) body.appendChild(messageRow(r, format.value));
        progress.textContent = `Scanned ${scanned} messages, found ${found}${next ? "…" : "."}`;
      }
      if (mine === shownScreen) {
        progress.textContent = `Scanned ${scanned} messages, found ${found}` + (mineRun !== run ? " (stopped)." : next ? ` (stopped at the limit; it goes on from ${next}).` : ".");
      }
    } catch (err) {
      progress.textContent = `Search failed: ${err.message}`;
    } finally {
      stop.disabled = true;
    }
  };
  screen.replaceChildren(el("h1", {}, `Search ${ns}:${t}`),
    el("form", { class: "toolbar", id: "search", onsubmit: go },
      el("label", {}, "find", needle), el("label", {}, "in", where), el("label", {}, "from a time", from),
      el("label", {}, "to a time", to), el("label", {}, "or from an id", fromId), el("label", {}, "read at most", limit),
      el("label", {}, "payload as", format), el("button", { type: "submit", id: "search-go" }, "Search"), stop),
    progress,
    el("table", { id: "search-results" }, el("thead", {}, el("tr", {}, MESSAGE_COLUMNS.map((h) => el("th", { scope: "col" }, h)))), body));
  ready("search");
}

async function messagesScreen(ns, t) {
  const picker = topicPicker("topic", "messages", ns, t);
  if (!ns) {
    screen.replaceChildren(el("h1", {}, "Message browser"), picker, el("p", { class: "muted" }, "Pick a topic."));
    ready("messages");
    return;
  }
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const mode = el("select", { id: "from-mode" }, ["last", "time", "id"].map((m) => el("option", { value: m, selected: q.get("mode") === m }, { last: "last N", time: "from a time", id: "from an id" }[m])));
  const value = el("input", { id: "from-value", value: q.get("value") || "20", placeholder: "N, YYYY-MM-DD HH:MM:SS (UTC) or hex id" });
  const format = el("select", { id: "format" }, ["text", "json", "hex"].map((f) => el("option", { selected: q.get("format") === f }, f)));
  const limit = el("input", { id: "limit", type: "number", value: q.get("limit") || "100", min: 1, max: 500 });
  const show = (e) => {
    e.preventDefault();
    const p = new URLSearchParams({ mode: mode.value, value: value.value, format: format.value, limit: limit.value });
    location.hash = `#/messages/${enc(ns)}/${enc(t)}?${p}`;
  };
  const params = new URLSearchParams({ limit: limit.value });
  const m = mode.value, v = value.value.trim();
  if (m === "last") params.set("last", v || "20");
  if (m === "time") params.set("time", String(Date.parse(v.includes("T") || v.endsWith("Z") ? v : v.replace(" ", "T") + "Z")));
  if (m === "id") params.set("id", v);
  const reading = api(`${topicPath(ns, t)}/messages?${params}`);
  const parts = [el("h1", {}, "Message browser"), picker];
  parts.push(el("form", { class: "toolbar", id: "browse", onsubmit: show },
    el("label", {}, "start", mode), el("label", {}, "value", value), el("label", {}, "show at most", limit),
    el("label", {}, "payload as", format), el("button", { type: "submit" }, "Show")));
  let data;
  try {
    data = await reading;
  } catch (e) {
    screen.replaceChildren(...parts, el("p", { class: "error", id: "browse-error" }, e.message));
    ready("messages");
    return;
  }
  const rows = data.messages.map((r) => messageRow(r, format.value));
  const download = el("button", {
    class: "secondary",
    id: "download",
    onclick: () => {
      const shown = data.messages.map((r) => ({ ...r, payload_text: r.payload === null ? null : payloadAs(r.payload, format.value) }));
      const blob = new Blob([JSON.stringify({ topic: data.topic, generation: data.generation, messages: shown }, null, 2)], { type: "application/json" });
      const a = el("a", { href: URL.createObjectURL(blob), download: `${ns}-${t}-messages.json` });
      document.body.appendChild(a);
      a.click();
      a.remove();
    },
  }, `Download these ${data.messages.length} messages (JSON)`);
  parts.push(el("div", { class: "toolbar" }, download),
    table(MESSAGE_COLUMNS, rows, { id: "messages" }));
  screen.replaceChildren(...parts);
  ready("messages");
}

async function subscriptions(ns, t, name) {
  if (name) return subscription(ns, t, name);
  const picker = topicPicker("topic", "subscriptions", ns, t);
  if (!ns) return allSubscriptions(picker);
  const d = await api(topicPath(ns, t));
  const parts = [el("h1", {}, "Subscriptions"), picker];
  {
    parts.push(el("p", { class: "muted" }, `${d.subscriptions.length} subscriptions; numbers read ${when(d.read_at)}`));
    const rows = d.subscriptions.map((s) =>
      el("tr", {},
        el("td", {}, el("a", { href: `#/subscriptions/${enc(ns)}/${enc(t)}/${enc(s.name)}` }, s.name)),
        el("td", {}, kindOf(s.shared)),
        el("td", { class: "num" }, s.lag ? s.lag.messages : ""),
        el("td", { class: "num" }, s.lag ? seconds(s.lag.seconds) : ""),
        el("td", {}, s.owner ? badge("consuming", "ok") : badge("idle")),
        el("td", { class: "mono" }, s.position || "(nothing consumed)")));
    parts.push(table(["name", "kind", "lag messages#", "lag time#", "consumer", "committed mark"], rows, { id: "subscriptions" }));
  }
  screen.replaceChildren(...parts);
  ready("subscriptions");
}

async function allSubscriptions(picker) {
  const list = pagedList({
    path: "/subscription-page",
    id: "all-subscriptions",
    noun: "subscriptions",
    sort: null,
    filterLabel: "filter by topic (namespace:topic)",
    rowAttrs: (s) => ({ "data-subscription": `${s.topic}/${s.name}` }),
    columns: [
      ["topic", "topic", (s) => topicLink(s.topic)],
      ["name", "subscription", (s) => subscriptionLink(s.topic, s.name)],
      ["kind", "kind", (s) => (s.ordering === "key" ? "shared, key order" : s.kind)],
      ["lag_messages", "lag", (s) => maybe(s.lag_messages), true],
      ["lag_seconds", "lag time", (s) => maybe(s.lag_seconds, seconds), true],
      ["consumers", "consumers", (s) => s.consumers, true],
      ["in_flight", "in flight", (s) => maybe(s.in_flight), true],
      ["dead_letters", "dead letters", (s) => maybe(s.dead_letters), true],
      ["scheduled", "scheduled", (s) => maybe(s.scheduled), true],
      ["late_acks", "late acks", (s) => maybe(s.late_acks), true],
    ],
    done: () => ready("subscriptions"),
  });
  screen.replaceChildren(el("h1", {}, "Subscriptions"), picker,
    el("p", { class: "muted" }, "Every subscription of the topics you may see; only the page's numbers are read in topic or name order. Sorting by a number reads every topic with subscriptions (at most 1,000: filter first)."),
    list.node);
  await list.load();
}

async function subscription(ns, t, name) {
  const base = `${topicPath(ns, t)}/subscriptions/${enc(name)}`;
  const s = await api(base);
  const history = s.history;
  const parts = [
    el("h1", {}, `Subscription ${name} of ${ns}:${t}`),
    el("div", { class: "cards", id: "subscription-detail" },
      card("Lag", el("div", { class: "big", id: "lag-messages" }, `${s.lag.messages} messages`), facts([["held by a transaction in progress", el("span", { id: "lag-held" }, `${s.lag.held} messages`)], ["oldest not consumed", seconds(s.lag.seconds)], ["exact", s.lag.exact ? "yes" : "no (estimated)"]])),
      card("Consumer", el("div", { class: "big" }, s.owner ? badge("consuming", "ok") : badge(s.shared ? "shared" : "no active consumer")),
        facts([s.owner ? ["lease held by", s.owner] : null, s.lease_expires ? ["lease expires", `${when(s.lease_expires)} (in ${seconds(Math.max(0, (s.lease_expires - s.now) / 1000))})`] : null,
          ["committed mark", s.position || "nothing consumed"], s.pending_tx ? ["mark pending in transaction", s.pending_tx] : null, ["created", when(s.created_at)], ["updated", when(s.updated_at)]])),
    ),
    el("div", { class: "split" },
      lineChart("lag (messages)", [{ name: "messages", points: history.map((h) => [h[0], h[1]]) }]),
      lineChart("lag (seconds)", [{ name: "seconds", points: history.map((h) => [h[0], h[2]]) }])),
  ];
  if (s.shared) {
    const sh = s.shared;
    const next = sh.next_scheduled_ms === null ? "" : ` (the next ${when(sh.next_scheduled_ms)}, in ${seconds(Math.max(0, (sh.next_scheduled_ms - s.now) / 1000))})`;
    parts.push(el("h2", {}, "Shared subscription ", sh.ordering === "key" ? badge("key order", "ok") : null),
      el("div", { class: "cards", id: "shared-numbers" },
        card("Messages", facts([["waiting", sh.waiting], ["in flight", sh.in_flight], ["due again", sh.due],
          ["scheduled", el("span", { id: "shared-scheduled" }, `${sh.scheduled}${next}`)], ["acknowledged", sh.acknowledged], ["redelivered", sh.redelivered],
          ["late settlements refused", el("span", { id: "shared-late-acks" }, sh.late_acks)]])),
        card("Dead letters", el("div", { class: "big" }, sh.dead_lettered), facts([["after deliveries", sh.max_deliveries], ["to topic", sh.dead_letter || "none (counted only)"], ["ack timeout", `${sh.ack_timeout_seconds} s`],
          ["order", el("span", { id: "shared-ordering" }, sh.ordering === "key" ? "by key: a key's next message waits for the one before to settle" : "none")]]))),
      el("h2", {}, "In flight"),
      table(["id", "holder", "deliveries#", "deadline", "state"], s.in_flight.map((p) =>
        el("tr", {}, el("td", { class: "mono" }, p.id), el("td", {}, p.owner || ""), el("td", { class: "num" }, p.deliveries), el("td", {}, when(p.deadline)), el("td", {}, badge(p.state)))), { id: "in-flight" }));
    if (s.dead_letters_error) parts.push(el("h2", {}, `Dead letters in ${sh.dead_letter}`), el("p", { class: "error", id: "dead-letters" }, s.dead_letters_error));
    if (s.dead_letters) {
      parts.push(el("h2", {}, `Dead letters in ${sh.dead_letter} not replayed yet`),
        s.dead_letters.length
          ? table(["id", "deliveries#", "published", "payload"], s.dead_letters.map((d) =>
            el("tr", {}, el("td", { class: "mono" }, d.id), el("td", { class: "num" }, d.deliveries), el("td", {}, when(d.publish_time)),
              el("td", { class: "payload" }, payloadAs(d.payload, "text")))), { id: "dead-letters" })
          : el("p", { class: "muted", id: "dead-letters" }, "nothing left to replay"),
        s.may_replay && s.dead_letters.length
          ? el("div", { class: "toolbar" }, el("button", { id: "replay", onclick: () => replayDialog(base, sh.dead_letter, `${ns}:${t}`, name).catch((e) => alertBox(e.message)) }, "Replay…"))
          : el("p", { class: "muted" }, `To publish them to ${ns}:${t} again: tms-admin sub dead-letters ${ns}:${t} ${name} --replay`));
    }
  }
  if (s.may_change) parts.push(resetForm(base, s, `${ns}:${t}/${name}`));
  screen.replaceChildren(...parts);
  ready("subscription");
  refreshWhileOpen(() => route(true));
}

// Replay: what it would publish to the subscription's topic and what it refuses (a dry run), then the replay.
async function replayDialog(base, deadLetterTopic, topic, name) {
  const opener = shownScreen;
  const p = await api(base + "/replay/preview", { method: "POST", body: {} });
  const rows = p.letters.map((d) => el("tr", {}, el("td", { class: "mono" }, d.id), el("td", {}, d.subscription), el("td", { class: "payload" }, payloadAs(d.payload, "text"))));
  const refused = p.refused.map((d) => el("tr", {}, el("td", { class: "mono" }, d.id), el("td", {}, d.reason)));
  const box = el("div", { id: "replay-preview" },
    el("p", {}, p.letters.length
      ? `Publishes these ${p.letters.length} dead letters of ${deadLetterTopic} back to ${topic}, each as a new message (at least once):`
      : "Nothing left to replay."),
    rows.length ? table(["id", "subscription", "payload"], rows) : null,
    refused.length ? el("p", { class: "error" }, `Refuses ${refused.length} dead letters that name another topic (never published; the replay passes over them):`) : null,
    refused.length ? table(["id", "why"], refused, { id: "replay-refused" }) : null);
  const target = `${topic}/${name}`;
  confirmDialog(`Replay the dead letters of ${target} from ${deadLetterTopic}`, box, "Replay", async () => {
    await api(base + "/replay", { method: "POST", body: { target } });
    route();
  }, opener);
}

function resetForm(base, s, target) {
  const mode = el("select", { id: "reset-mode" }, ["earliest", "latest", "time", "id"].map((m) => el("option", { value: m }, m === "time" ? "a time (UTC)" : m === "id" ? "a message id" : m)));
  const value = el("input", { id: "reset-value", placeholder: "YYYY-MM-DD HH:MM:SS or hex id" });
  const force = el("input", { type: "checkbox", id: "reset-force" });
  const start = () => {
    if (mode.value === "time") return Date.parse(value.value.includes("T") ? value.value : value.value.replace(" ", "T") + "Z");
    if (mode.value === "id") return value.value.trim();
    return mode.value;
  };
  const preview = async (e) => {
    e.preventDefault();
    const opener = shownScreen;
    const body = { start: start(), force: force.checked, target };
    const p = await api(base + "/preview", { method: "POST", body: { start: body.start } });
    const what = p.redeliver
      ? `delivers again ${p.redeliver}${p.exact ? "" : "+"} messages already consumed`
      : p.skip
        ? `skips ${p.skip}${p.exact ? "" : "+"} messages not consumed yet`
        : "changes nothing that will be delivered";
    const sample = p.sample.map((m) => el("tr", {}, el("td", { class: "mono" }, m.id), el("td", {}, when(m.publish_time)), el("td", { class: "payload" }, payloadAs(m.payload, "text"))));
    const box = el("div", { id: "reset-preview" }, el("p", {}, `A reset of ${target} to ${typeof body.start === "number" ? when(body.start) : body.start} ${what}.`),
      sample.length ? el("div", {}, el("p", { class: "muted" }, p.redeliver ? "The first of them:" : "The first skipped:"), table(["id", "published", "payload"], sample)) : null,
      s.owner && !force.checked ? el("p", { class: "error" }, "A consumer holds it: the reset is refused unless forced.") : null);
    confirmDialog(`Reset subscription ${target}`, box, "Reset", async () => {
      await api(base + "/reset", { method: "POST", body });
      route();
    }, opener);
  };
  return el("form", { class: "card", id: "reset", onsubmit: preview },
    el("h3", {}, "Reset"),
    el("div", { class: "toolbar" }, el("label", {}, "to", mode), el("label", {}, "time or id", value),
      el("label", {}, "take it from a consumer", force), el("button", { type: "submit", id: "preview" }, "Preview…")));
}

// Produce: one message typed here (payload as text, JSON or base64; key and headers as text), confirmed
// with its target named, for a principal with publish on the topic.
async function produceScreen(ns, t) {
  const d = await api(topicPath(ns, t));
  const target = `${d.namespace}:${d.topic}`;
  const parts = [el("h1", {}, `Produce to ${target}`)];
  if (!d.may_publish) {
    screen.replaceChildren(...parts, el("p", { class: "error", id: "produce-refused" }, `${session.principal} may not publish to ${target}.`));
    ready("produce");
    return;
  }
  const payload = el("textarea", { id: "produce-payload", "aria-label": "payload" });
  const encoding = el("select", { id: "produce-encoding" }, ["text", "json", "base64"].map((x) => el("option", { value: x }, x)));
  const key = el("input", { id: "produce-key", placeholder: "none" });
  const headers = el("textarea", { id: "produce-headers", "aria-label": "headers, one name: value a line", placeholder: "name: value (one a line)" });
  const transactional = el("input", { type: "checkbox", id: "produce-tx" });
  const result = el("p", { id: "produce-result", role: "status" });
  const send = (e) => {
    e.preventDefault();
    const lines = headers.value.split("\n").filter((line) => line.trim());
    const bad = lines.find((line) => !line.includes(":"));
    if (bad !== undefined) {
      result.textContent = `a header line needs "name: value": ${bad}`;
      return;
    }
    const body = {
      target, payload: payload.value, encoding: encoding.value, key: key.value || null, transactional: transactional.checked,
      headers: lines.map((line) => [line.slice(0, line.indexOf(":")).trim(), line.slice(line.indexOf(":") + 1).trim()]),
    };
    const box = el("div", { id: "produce-preview" },
      el("p", {}, `Publishes one message to ${target}${body.transactional ? " in a transaction of its own" : ""}:`),
      facts([["payload", `${body.payload.length} characters as ${body.encoding}`], ["key", body.key ?? "none"], ["headers", String(body.headers.length)]]));
    confirmDialog(`Publish to ${target}`, box, "Publish", async () => {
      const done = await api(topicPath(ns, t) + "/publish", { method: "POST", body });
      result.textContent = `Published message ${done.id}${done.transaction ? ` in transaction ${done.transaction}` : ""}.`;
    });
  };
  parts.push(el("form", { class: "card", id: "produce", onsubmit: send },
    el("label", { class: "block" }, "payload", payload),
    el("div", { class: "toolbar" }, el("label", {}, "payload as", encoding), el("label", {}, "key (text)", key),
      el("label", {}, "in a transaction", transactional)),
    el("label", { class: "block" }, "headers", headers),
    el("div", { class: "toolbar" }, el("button", { type: "submit", id: "produce-send" }, "Publish…"))), result);
  screen.replaceChildren(...parts);
  ready("produce");
}

async function transactions() {
  const d = await api("/transactions");
  const rows = d.in_progress.map((tx) =>
    el("tr", {},
      el("td", { class: "mono" }, String(tx.write_pointer)),
      el("td", {}, `${when(tx.started)} (${ago(tx.started)})`),
      el("td", {}, tx.holds_back.length
        ? el("ul", {}, tx.holds_back.map((h) => el("li", {}, el("a", { href: `#/topics/${h.topic.split(":").map(enc).join("/")}` }, h.topic),
          ` since ${when(h.since)} (${ago(h.since)}), position ${h.position}: `,
          h.subscriptions.length ? `holds back transactional readers of ${h.subscriptions.join(", ")}` : "no subscription behind it")))
        : el("span", { class: "muted" }, "wrote to no topic"))));
  const invalid = d.invalid.map((tx) => el("tr", {}, el("td", { class: "mono" }, String(tx.write_pointer)), el("td", {}, when(tx.started))));
  screen.replaceChildren(
    el("h1", {}, "Transactions"),
    el("p", { class: "muted" }, `Read pointer ${d.read_pointer}. A transactional reader stops at the first message of an open transaction, so every subscription behind it waits.`),
    el("h2", {}, `In progress (${d.in_progress.length})`),
    table(["write pointer", "started", "holds back"], rows, { id: "in-progress" }),
    el("h2", {}, `Invalid (${d.invalid.length})`),
    table(["write pointer", "started"], invalid, { id: "invalid" }),
  );
  ready("transactions");
}

async function sweeper() {
  const d = await api("/sweeper");
  const p = d.pruning;
  const rows = d.regions.map((r) =>
    el("tr", {},
      el("td", { class: "mono" }, r.region),
      el("td", {}, r.completed ? `${when(r.completed)} (${ago(r.completed)})` : badge("never", "warn")),
      el("td", { class: "num" }, r.rows),
      el("td", { class: "mono" }, r.checkpoint || "-"),
      el("td", { class: "mono" }, r.prune_bound === null ? "-" : String(r.prune_bound))));
  screen.replaceChildren(
    el("h1", {}, "Sweeper"),
    el("div", { class: "cards" },
      card("Invalid-list prune bound", el("div", { class: "big", id: "prune-bound" }, p.global_bound === null ? "none" : when(pointerTime(p.global_bound))),
        facts([p.global_bound === null ? null : ["as a pointer", el("span", { class: "mono" }, p.global_bound)],["invalid transactions", p.invalid.length], ["prunable now", p.prunable.length], ["blocking regions", p.blocking.length ? p.blocking.join(", ") : "none"]]))),
    el("h2", {}, "Regions"),
    table(["region", "last complete sweep", "rows#", "checkpoint", "prune bound"], rows, { id: "regions" }),
  );
  ready("sweeper");
}

// -- routing ---------------------------------------------------------------------------------------

const SCREENS = {
  overview: () => overview(),
  topics: (ns, t) => (ns ? topic(ns, t) : topics()),
  messages: (ns, t) => messagesScreen(ns, t),
  subscriptions: (ns, t, s) => subscriptions(ns, t, s),
  produce: (ns, t) => produceScreen(ns, t),
  tail: (ns, t) => tailScreen(ns, t),
  search: (ns, t) => searchScreen(ns, t),
  transactions: () => transactions(),
  sweeper: () => sweeper(),
};

async function route(refresh) {
  const [path] = location.hash.replace(/^#\/?/, "").split("?");
  const [name, ...args] = path.split("/").map(decodeURIComponent);
  const show = SCREENS[name] || SCREENS.overview;
  if (!refresh) {
    clearInterval(refreshTimer);
    shownScreen += 1;
    closeDialog(); // a dialog belongs to the screen that opened it
  }
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.screen === (SCREENS[name] ? name : "overview"));
  if (refresh && !document.getElementById("modal").hidden) return; // never redraw under an open dialog
  if (refresh && document.activeElement && ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) return;
  const focused = refresh ? document.activeElement : null;
  try {
    await show(...args.filter((a) => a !== ""));
    if (focused && !focused.isConnected && (!document.activeElement || document.activeElement === document.body)) refocus(focused);
  } catch (e) {
    if (e.status === 401) return;
    screen.replaceChildren(el("h1", {}, "Error"), el("p", { class: "error", id: "screen-error" }, e.message));
    ready("error");
  }
}

async function start() {
  session = await api("/session");
  document.getElementById("principal").textContent = session.open ? "open gateway" : session.principal;
  const logout = document.getElementById("logout");
  logout.hidden = session.open;
  logout.addEventListener("click", async () => {
    await fetch("/console/logout", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": session.csrf } });
    location.href = "/console/login";
  });
  window.addEventListener("hashchange", () => route());
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") closeDialog();
  });
  await route();
}

start();
