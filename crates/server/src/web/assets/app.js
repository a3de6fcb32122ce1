// mcpproxy's page: upstream servers (a quarantined one waits for approval, given only after
// its security analysis is shown), a chart of the last hour's calls (each counted once), the
// live activity feed with filters and the plugin and guard decisions of each record (this
// replica's, live; or the whole cluster's, read from the cluster journal every 5 s), and one
// record's detail. Everything comes from the REST
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
// The last hour's tool calls for the chart, by id: the chart's page and the live feed may
// both bring a record, and it counts once.
const recent = new Map();

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

// The feed's decision filter (allow, warn, reject): the REST API has no such filter, so it
// is applied to what arrives.
function decisionOf(record) {
  return (record.verdict && record.verdict.decision) || "allow";
}

function matchesDecision(record) {
  const wanted = $("f-decision").value;
  return !wanted || decisionOf(record) === wanted;
}

// Who decided: the validator that rejected or warned, and what the result guards did.
function decidedBy(record) {
  const verdict = record.verdict || {};
  const parts = [];
  if (verdict.plugin) parts.push(verdict.plugin + ": " + decisionOf(record));
  else if (record.type === "tool_call") parts.push(decisionOf(record));
  const guards = guardsOf(record);
  if (guards) parts.push(guards);
  return parts.join("; ");
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
    el("td", decidedBy(record), "decision decision-" + decisionOf(record)),
    el("td", reasonOf(record), "reason"),
  );
  row.addEventListener("click", () => showDetail(record.id));
  return row;
}

function addRecords(records, atTop) {
  const body = $("feed").querySelector("tbody");
  for (const record of records) {
    // A new call counts in the chart whatever the feed's filters show.
    if (atTop && record.type === "tool_call") recent.set(record.id, record);
    if (shown.has(record.id) || !matchesDecision(record)) continue;
    shown.add(record.id);
    const row = feedRow(record);
    if (atTop) body.prepend(row);
    else body.append(row);
  }
  while (body.rows.length > FEED_ROWS) body.deleteRow(body.rows.length - 1);
  $("feed-empty").hidden = body.rows.length > 0;
  drawChart();
}

// The feed's scope: this replica's journal (live), or the whole cluster's (`cluster=true`:
// the cluster journal every replica delivers to, read again every few seconds).
let clusterTimer = null;

function clusterScope() {
  return $("f-scope").value === "cluster";
}

// `?cluster=true` when the feed shows the whole cluster, for reading one record.
function scopeQuery() {
  return clusterScope() ? "?cluster=true" : "";
}

async function loadClusterPage() {
  const params = filters();
  params.set("cluster", "true");
  params.set("limit", "50");
  const page = await api("/activity?" + params.toString());
  shown.clear();
  $("feed").querySelector("tbody").replaceChildren();
  addRecords(page.records, false);
}

async function loadFeed() {
  if (feed) feed.close();
  feed = null;
  if (clusterTimer) clearInterval(clusterTimer);
  clusterTimer = null;
  shown.clear();
  $("feed").querySelector("tbody").replaceChildren();
  if (clusterScope()) {
    $("connection").textContent = "whole cluster (every 5 s)";
    await loadClusterPage();
    clusterTimer = setInterval(() => loadClusterPage().catch((e) => {
      $("connection").textContent = e.message;
    }), 5000);
    return;
  }
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
  for (const record of page.records) recent.set(record.id, record);
  drawChart();
}

function drawChart() {
  const svg = $("chart");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const now = Date.now();
  const minutes = 60;
  const counts = Array.from({ length: minutes }, () => ({ variants: {}, statuses: {} }));
  for (const [id, record] of recent) {
    const age = Math.floor((now - Date.parse(record.timestamp)) / 60000);
    if (age >= minutes) recent.delete(id);
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
  const total = counts.reduce((sum, b) => sum + Object.values(b.variants).reduce((a, n) => a + n, 0), 0);
  const count = el("span", total + " calls", "muted");
  count.id = "chart-count";
  legend.append(count);
  svg.dataset.calls = String(total);
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
    // A quarantined server is connected but serves nothing until a person approves it.
    const state = upstream.quarantined ? "waiting" : upstream.state;
    const pending = upstream.pending || [];
    const stateText = upstream.quarantined
      ? "waiting for approval"
      : upstream.state + (upstream.detail ? ": " + upstream.detail : "");
    const tools = upstream.quarantined
      ? upstream.tools + " held"
      : pending.length
        ? upstream.tools + " (" + pending.length + " held)"
        : String(upstream.tools);
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
      el("td", stateText, "state-" + state),
      el("td", tools),
      el("td", trust),
      el("td", sandboxText(upstream.sandbox), upstream.sandbox && !upstream.sandbox.enabled ? "state-error" : ""),
    );
    const cell = el("td");
    if (upstream.quarantined || pending.length) {
      const button = el("button", upstream.quarantined ? "Review and approve" : "Review changes");
      button.type = "button";
      button.dataset.server = upstream.name;
      button.addEventListener("click", () => review(upstream.name));
      cell.append(button);
    }
    if (upstream.state === "login_required" || upstream.state === "authenticating") {
      const button = el("button", upstream.state === "authenticating" ? "Log in again" : "Log in");
      button.type = "button";
      button.dataset.login = upstream.name;
      button.addEventListener("click", () => logIn(upstream.name, button));
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

// Starts an OAuth login to `server` and opens the authorization server's page in a new
// tab; the browser comes back to this proxy's /oauth/callback, which finishes the login.
async function logIn(server, button) {
  button.disabled = true;
  try {
    const login = await api("/upstreams/" + encodeURIComponent(server) + "/login", { method: "POST" });
    const url = new URL(login.authorization_url);
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw new Error("the authorization server gave a " + url.protocol + " address");
    }
    window.open(url.href, "_blank", "noopener");
  } catch (error) {
    alert("Cannot start the login to " + server + ": " + error.message);
  } finally {
    button.disabled = false;
    loadUpstreams().catch(() => {});
  }
}

// A stdio server's sandbox in a few words: "on (network none)", "OFF"; "-" for HTTP servers.
function sandboxText(sandbox) {
  if (!sandbox) return "-";
  if (!sandbox.enabled) return "OFF: runs as you, with your files and the network";
  let text = "on (network " + sandbox.network;
  if (sandbox.inferred_read && sandbox.inferred_read.length) text += ", reads " + sandbox.inferred_read.join(", ") + " (inferred)";
  if (sandbox.write && sandbox.write.length) text += ", writes " + sandbox.write.join(", ");
  if (sandbox.missing && sandbox.missing.length) text += "; not enforced: " + sandbox.missing.join(", ");
  return text + ")";
}

// The security analysis of a server (`mcpproxy upstream inspect`) in a dialog: how it
// starts, the scanner's findings per held tool, what changed. Approve is only offered here,
// after it was shown.
async function review(server) {
  const dialog = $("analysis");
  $("analysis-server").textContent = server;
  $("analysis-result").textContent = "";
  const body = $("analysis-body");
  body.replaceChildren(el("p", "Loading the analysis…", "muted"));
  const approveButton = $("analysis-approve");
  approveButton.disabled = true;
  approveButton.dataset.server = server;
  delete approveButton.dataset.fingerprint;
  if (!dialog.open) dialog.showModal();
  let analysis;
  try {
    analysis = await api("/upstreams/" + encodeURIComponent(server) + "/analysis");
  } catch (error) {
    body.replaceChildren(el("p", "The analysis is not available: " + error.message, "error"));
    return;
  }
  body.replaceChildren(...analysisView(analysis));
  // Approve names the launch shown here: one changed since is refused, not approved unseen.
  approveButton.dataset.fingerprint = analysis.launch_fingerprint || "";
  approveButton.disabled = false;
}

function analysisView(analysis) {
  const nodes = [];
  // Held tools, those with findings first.
  const held = analysis.tools
    .filter((t) => analysis.quarantined || t.standing !== "trusted")
    .sort((a, b) => b.findings.length - a.findings.length);
  nodes.push(el("p", analysis.quarantined
    ? "Quarantined: none of its " + analysis.tools.length + " tools is served until you approve it."
    : held.length + " tool(s) held since they are new or changed."));
  if (analysis.launch) {
    nodes.push(el("p", "Starts as: " + analysis.launch + (analysis.launch_approved ? "" : " (not approved yet)")));
    const fingerprint = el("p", "Launch fingerprint: " + analysis.launch_fingerprint, "muted");
    fingerprint.id = "analysis-fingerprint";
    nodes.push(fingerprint);
  }
  for (const change of analysis.launch_changes || []) nodes.push(el("p", "Launch change: " + change, "error"));
  nodes.push(el("p", analysis.scanner
    ? "Scanned by " + analysis.scanner + "."
    : "Not scanned: " + (analysis.scanner_error || "no scanner"), analysis.scanner ? "muted" : "error"));
  const findings = analysis.tools.reduce((n, t) => n + t.findings.length, 0);
  nodes.push(el("p", findings ? findings + " finding(s)" : "No findings.", findings ? "error" : "muted"));
  const table = el("table");
  table.id = "analysis-tools";
  const head = el("tr");
  for (const title of ["Tool", "Standing", "Annotations", "Findings"]) head.append(el("th", title));
  table.append(head);
  for (const tool of held) {
    const row = el("tr");
    const annotations = tool.annotations || {};
    const flags = [];
    if (annotations.readOnlyHint) flags.push("ro");
    if (annotations.destructiveHint) flags.push("destructive");
    const cell = el("td");
    for (const finding of tool.findings) {
      cell.append(el("div", finding.severity + " " + finding.kind + ": " + finding.detail, "finding-" + finding.severity));
    }
    if (!tool.findings.length) cell.textContent = "none";
    row.append(el("td", tool.name), el("td", tool.standing), el("td", flags.join(", ") || "-"), cell);
    table.append(row);
  }
  nodes.push(table);
  for (const name of analysis.removed || []) nodes.push(el("p", "Removed since approval: " + name, "muted"));
  return nodes;
}

async function approveReviewed() {
  const button = $("analysis-approve");
  const server = button.dataset.server;
  const approval = { approved_by: "web page" };
  if (button.dataset.fingerprint) approval.fingerprint = button.dataset.fingerprint;
  button.disabled = true;
  try {
    await api("/upstreams/" + encodeURIComponent(server) + "/approve", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(approval),
    });
    $("approve-result").textContent = server + " approved.";
    $("analysis").close();
  } catch (error) {
    $("analysis-result").textContent = "Approving " + server + " failed: " + error.message;
    button.disabled = false;
  }
  await loadUpstreams();
}

async function showDetail(id) {
  try {
    const record = await api("/activity/" + encodeURIComponent(id) + scopeQuery());
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
      const call = await api("/activity/" + encodeURIComponent(ids[i]) + scopeQuery());
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
  $("analysis-approve").addEventListener("click", () => approveReviewed());
  $("analysis-cancel").addEventListener("click", () => $("analysis").close());
  for (const id of ["f-server", "f-intent", "f-status", "f-type", "f-decision", "f-scope"]) {
    $(id).addEventListener("change", () => loadFeed().catch((e) => { $("connection").textContent = e.message; }));
  }
  if (key) connect(key);
  else $("key-form").hidden = false;
}

document.addEventListener("DOMContentLoaded", start);
