// mcpproxy's page: upstream servers (with approval), a chart of the last hour's calls, the
// live activity feed with filters, and one record's detail. Everything comes from the REST
// API with the key the user entered once (kept in localStorage). Text from records,
// upstreams and plugins is only ever set with textContent: it is never parsed as HTML.
"use strict";

const KEY_STORE = "mcpproxy.apiKey";
const VARIANTS = [
  ["call_tool_read", "#3d7dd8"],
  ["call_tool_write", "#e0a030"],
  ["call_tool_destructive", "#c0392b"],
];
const STATUSES = [
  ["error", "#8e44ad"],
  ["blocked", "#222"],
];
const FEED_ROWS = 200;

let apiKey = null;
let feed = null;
const shown = new Set();
const recent = [];

const $ = (id) => document.getElementById(id);

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

async function api(path, options = {}) {
  const headers = Object.assign({ "X-API-Key": apiKey }, options.headers || {});
  const response = await fetch("/api/v1" + path, Object.assign({}, options, { headers }));
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    throw new Error(path + " answered " + response.status);
  }
  if (!body.success) {
    const error = new Error(body.error || path + " answered " + response.status);
    error.status = response.status;
    throw error;
  }
  return body.data;
}

function filters() {
  const params = new URLSearchParams();
  for (const [id, key] of [["f-server", "server"], ["f-intent", "intent_type"], ["f-status", "status"], ["f-type", "type"]]) {
    const value = $(id).value;
    if (value) params.set(key, value);
  }
  return params;
}

function localTime(timestamp) {
  const date = new Date(timestamp);
  return isNaN(date) ? timestamp : date.toLocaleString();
}

// What the result guards did to the answer, e.g. "secret-redactor: redact 2 (github-token, jwt)".
function guardsOf(record) {
  return (record.guards || [])
    .map((g) => g.plugin + ": " + g.action + " " + g.count + " (" + (g.kinds || []).join(", ") + ")")
    .join("; ");
}

function reasonOf(record) {
  const verdict = record.verdict || {};
  if ((verdict.decision === "warn" || verdict.decision === "reject") && verdict.message) return verdict.message;
  return record.error_message || guardsOf(record);
}

function feedRow(record) {
  const row = el("tr");
  row.dataset.id = record.id;
  const status = record.dry_run ? "dry-run" : record.status;
  row.append(
    el("td", localTime(record.timestamp)),
    el("td", record.server_name),
    el("td", record.tool_name),
    el("td", record.tool_variant || record.type),
    el("td", status, "status-" + status),
    el("td", (record.duration_ms || 0) + " ms"),
    el("td", reasonOf(record), "reason"),
  );
  row.addEventListener("click", () => showDetail(record.id));
  return row;
}

function addRecords(records, atTop) {
  const body = $("feed").querySelector("tbody");
  for (const record of records) {
    if (shown.has(record.id)) continue;
    shown.add(record.id);
    const row = feedRow(record);
    if (atTop) body.prepend(row);
    else body.append(row);
    if (record.type === "tool_call") {
      recent.push(record);
    }
  }
  while (body.rows.length > FEED_ROWS) body.deleteRow(body.rows.length - 1);
  $("feed-empty").hidden = body.rows.length > 0;
  drawChart();
}

async function loadFeed() {
  if (feed) feed.close();
  shown.clear();
  $("feed").querySelector("tbody").replaceChildren();
  // No gap between the page of recent records and the live feed: the feed starts after the
  // newest record of all, read first; what both return is shown once.
  const newest = await api("/activity?limit=1");
  const stream = filters();
  stream.set("apikey", apiKey);
  if (newest.records.length) stream.set("after", newest.records[0].id);
  feed = new EventSource("/api/v1/activity/stream?" + stream.toString());
  feed.addEventListener("record", (event) => {
    try {
      addRecords([JSON.parse(event.data)], true);
    } catch (_) {
      /* a malformed event is skipped */
    }
  });
  feed.onopen = () => { $("connection").textContent = "live"; };
  feed.onerror = () => { $("connection").textContent = "reconnecting…"; };
  const params = filters();
  params.set("limit", "50");
  const page = await api("/activity?" + params.toString());
  addRecords(page.records, false);
}

async function loadChartData() {
  const since = new Date(Date.now() - 3600 * 1000).toISOString();
  const page = await api("/activity?type=tool_call&limit=1000&start_time=" + encodeURIComponent(since));
  recent.length = 0;
  recent.push(...page.records);
  drawChart();
}

function drawChart() {
  const svg = $("chart");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const now = Date.now();
  const minutes = 60;
  const counts = Array.from({ length: minutes }, () => ({ variants: {}, statuses: {} }));
  for (const record of recent) {
    const age = Math.floor((now - Date.parse(record.timestamp)) / 60000);
    if (age < 0 || age >= minutes) continue;
    const bucket = counts[minutes - 1 - age];
    const variant = record.tool_variant || "other";
    bucket.variants[variant] = (bucket.variants[variant] || 0) + 1;
    bucket.statuses[record.status] = (bucket.statuses[record.status] || 0) + 1;
  }
  const max = Math.max(1, ...counts.map((b) => Object.values(b.variants).reduce((a, n) => a + n, 0)));
  const width = 600 / minutes;
  counts.forEach((bucket, i) => {
    let y = 120;
    for (const [variant, color] of VARIANTS) {
      const n = bucket.variants[variant] || 0;
      if (!n) continue;
      const h = (n / max) * 110;
      y -= h;
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", String(i * width + 1));
      rect.setAttribute("y", String(y));
      rect.setAttribute("width", String(width - 2));
      rect.setAttribute("height", String(h));
      rect.setAttribute("fill", color);
      const title = document.createElementNS(ns, "title");
      title.textContent = n + " " + variant;
      rect.append(title);
      svg.append(rect);
    }
    let x = i * width + 1;
    for (const [status, color] of STATUSES) {
      const n = bucket.statuses[status] || 0;
      if (!n) continue;
      const mark = document.createElementNS(ns, "rect");
      mark.setAttribute("x", String(x));
      mark.setAttribute("y", "126");
      mark.setAttribute("width", String(Math.max(2, (width - 2) / 2)));
      mark.setAttribute("height", String(Math.min(12, 3 + n)));
      mark.setAttribute("fill", color);
      const title = document.createElementNS(ns, "title");
      title.textContent = n + " " + status;
      mark.append(title);
      svg.append(mark);
      x += (width - 2) / 2;
    }
  });
  const legend = $("chart-legend");
  legend.replaceChildren();
  for (const [name, color] of VARIANTS.concat(STATUSES)) {
    const item = el("span");
    const swatch = el("span", null, "swatch");
    swatch.style.background = color;
    item.append(swatch, document.createTextNode(name));
    legend.append(item);
  }
  legend.append(el("span", recent.length + " calls", "muted"));
}

async function loadUpstreams() {
  const upstreams = await api("/upstreams");
  const body = $("upstreams").querySelector("tbody");
  body.replaceChildren();
  const select = $("f-server");
  const chosen = select.value;
  select.replaceChildren(el("option", "all"));
  select.firstChild.value = "";
  for (const upstream of upstreams) {
    const state = upstream.quarantined ? "quarantined" : upstream.state;
    const pending = upstream.pending || [];
    const trust = upstream.state === "unapproved"
      ? "not started: how it starts (command, args, env, url) is not approved"
      : upstream.quarantined
      ? "quarantined: not reviewed"
      : pending.length
        ? pending.length + " tool(s) held since they changed: " + pending.join(", ")
        : "trusted";
    const row = el("tr");
    row.append(
      el("td", upstream.name),
      el("td", upstream.transport),
      el("td", upstream.state + (upstream.detail ? ": " + upstream.detail : ""), "state-" + state),
      el("td", upstream.tools),
      el("td", trust),
      el("td", sandboxText(upstream.sandbox), upstream.sandbox && !upstream.sandbox.enabled ? "state-error" : ""),
    );
    const cell = el("td");
    if (upstream.quarantined || pending.length) {
      const button = el("button", upstream.quarantined ? "Approve server" : "Approve changes");
      button.type = "button";
      button.addEventListener("click", () => approve(upstream.name, button));
      cell.append(button);
    }
    row.append(cell);
    body.append(row);
    const option = el("option", upstream.name);
    option.value = upstream.name;
    select.append(option);
  }
  select.value = chosen;
  $("upstreams-empty").hidden = upstreams.length > 0;
}

// A stdio server's sandbox in a few words: "on (network none)", "OFF"; "-" for HTTP servers.
function sandboxText(sandbox) {
  if (!sandbox) return "-";
  if (!sandbox.enabled) return "OFF: runs as you, with your files and the network";
  let text = "on (network " + sandbox.network;
  if (sandbox.write && sandbox.write.length) text += ", writes " + sandbox.write.join(", ");
  if (sandbox.missing && sandbox.missing.length) text += "; not enforced: " + sandbox.missing.join(", ");
  return text + ")";
}

async function approve(server, button) {
  if (!window.confirm("Approve " + server + "? Read its analysis first: mcpproxy upstream inspect " + server)) return;
  button.disabled = true;
  try {
    await api("/upstreams/" + encodeURIComponent(server) + "/approve", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ approved_by: "web page" }),
    });
    $("approve-result").textContent = server + " approved.";
  } catch (error) {
    $("approve-result").textContent = "Approving " + server + " failed: " + error.message;
  }
  await loadUpstreams();
}

async function showDetail(id) {
  try {
    const record = await api("/activity/" + encodeURIComponent(id));
    $("detail-id").textContent = id;
    $("detail-calls").textContent = await innerCalls(record);
    $("detail-json").textContent = JSON.stringify(record, null, 2);
    $("detail").hidden = false;
    $("detail").scrollIntoView();
  } catch (error) {
    $("detail-json").textContent = error.message;
    $("detail").hidden = false;
  }
}

// A code_execution's inner calls as a tree (their ids are in details.calls), or the
// execution an inner call belongs to. Text only: every field may come from a caller.
async function innerCalls(record) {
  if (record.parent_id) return "Inner call of code execution " + record.parent_id;
  const ids = record.details && Array.isArray(record.details.calls) ? record.details.calls : [];
  const lines = [];
  for (let i = 0; i < ids.length; i++) {
    const branch = i + 1 === ids.length ? "\u2514\u2500 " : "\u251c\u2500 ";
    try {
      const call = await api("/activity/" + encodeURIComponent(ids[i]));
      const reason = reasonOf(call);
      lines.push(branch + call.server_name + ":" + call.tool_name + " " + call.status
        + " " + call.duration_ms + " ms" + (reason ? ": " + reason : ""));
    } catch (error) {
      lines.push(branch + ids[i] + " (no record)");
    }
  }
  return lines.length ? "Inner calls:\n" + lines.join("\n") : "";
}

// The banner shown while the activity journal cannot write (calls are refused meanwhile).
function showJournal(journal) {
  const banner = $("journal-banner");
  if (!journal || journal.state !== "failing") {
    banner.hidden = true;
    banner.textContent = "";
    return;
  }
  banner.textContent = "The activity journal cannot write (" + (journal.reason || "unknown reason") + ")"
    + (journal.since ? " since " + localTime(journal.since) : "")
    + ": every call is refused until it can. It retries by itself; free disk space in the data dir.";
  banner.hidden = false;
}

async function loadStatus() {
  const status = await api("/status");
  $("version").textContent = "version " + status.version;
  showJournal(status.journal);
}

async function connect(key) {
  apiKey = key;
  try {
    await loadStatus();
  } catch (error) {
    apiKey = null;
    localStorage.removeItem(KEY_STORE);
    $("key-form").hidden = false;
    $("app").hidden = true;
    $("key-error").textContent = error.status === 401 ? "That key is not this proxy's: " + error.message : error.message;
    return;
  }
  localStorage.setItem(KEY_STORE, key);
  $("key-form").hidden = true;
  $("app").hidden = false;
  $("forget").hidden = false;
  $("connection").textContent = "connected";
  await loadUpstreams();
  await Promise.all([loadFeed(), loadChartData()]);
  setInterval(() => loadUpstreams().catch(() => {}), 5000);
  setInterval(() => loadStatus().catch(() => {}), 5000);
  setInterval(drawChart, 30000);
}

function start() {
  // A key in the address (`/#key=...`, as `mcpproxy` prints it) is taken once and removed.
  const fragment = new URLSearchParams(location.hash.slice(1));
  let key = fragment.get("key");
  for (const [id, name] of [["f-server", "server"], ["f-intent", "intent_type"], ["f-status", "status"], ["f-type", "type"]]) {
    const value = fragment.get(name);
    if (value) {
      const select = $(id);
      if (![...select.options].some((o) => o.value === value)) {
        const option = el("option", value);
        option.value = value;
        select.append(option);
      }
      select.value = value;
    }
  }
  if (key) history.replaceState(null, "", location.pathname);
  key = key || localStorage.getItem(KEY_STORE);
  $("key-entry").addEventListener("submit", (event) => {
    event.preventDefault();
    $("key-error").textContent = "";
    connect($("key").value.trim());
  });
  $("forget").addEventListener("click", () => {
    localStorage.removeItem(KEY_STORE);
    location.reload();
  });
  $("detail-close").addEventListener("click", () => { $("detail").hidden = true; });
  for (const id of ["f-server", "f-intent", "f-status", "f-type"]) {
    $(id).addEventListener("change", () => loadFeed().catch((e) => { $("connection").textContent = e.message; }));
  }
  if (key) connect(key);
  else $("key-form").hidden = false;
}

document.addEventListener("DOMContentLoaded", start);
