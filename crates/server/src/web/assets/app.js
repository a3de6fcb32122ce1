// mcpproxy's page: upstream servers (a quarantined one waits for approval, given only after
// its security analysis is shown), a chart of the last hour's calls (each counted once) on a
// time axis, the live activity feed with filters and who decided each record (this
// replica's, live; or the whole cluster's, read from the cluster journal every 5 s), and one
// record's detail. Everything comes from the REST API with the key the user entered once
// (kept in localStorage); the feed's records are asked for at once, beside the key check, so
// the page shows them as soon as it is up (`#feed[data-loaded]` marks that). Text from
// records, upstreams and plugins is only ever set with textContent: it is never parsed as
// HTML.
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

// The record types the policy judges: with no plugin named, its validators allowed them.
const JUDGED = ["tool_call", "resource_read", "prompt_get", "completion", "subscription", "code_execution"];

// Who or what decided, never why (that is the Reason column): the validator that rejected
// or warned (or the proxy itself), the result guards that changed the answer, the person
// who approved, who changed a server, the network allow-list of a sandboxed server.
function decidedBy(record) {
  const verdict = record.verdict || {};
  const details = record.details || {};
  const parts = [];
  if (verdict.plugin) parts.push(verdict.plugin + ": " + decisionOf(record));
  else if (verdict.decision === "reject" || verdict.decision === "warn") parts.push("mcpproxy: " + verdict.decision);
  for (const guard of record.guards || []) parts.push(guard.plugin + ": " + guard.action);
  if (record.type === "approval") parts.push("approved by " + (details.approved_by || record.source || "?"));
  else if (record.type === "server_change") {
    const who = record.identity && record.identity.subject;
    parts.push((details.actor || record.source || "?") + (who ? " " + who : ""));
  } else if (record.type === "egress") parts.push("network allow-list");
  else if (record.type === "alert") parts.push("mcpproxy");
  else if (!parts.length && JUDGED.includes(record.type)) parts.push("policy: " + decisionOf(record));
  return parts.join("; ") || "-";
}

// A record's time: the clock time for today's, the date too for older ones.
function localTime(timestamp) {
  const date = new Date(timestamp);
  if (isNaN(date)) return timestamp;
  return date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
}

// What the result guards did to the answer, e.g. "redact 2 (github-token, jwt)"; which
// guard did it is in Decided by.
function guardsOf(record) {
  return (record.guards || [])
    .map((g) => g.action + " " + g.count + " (" + (g.kinds || []).join(", ") + ")")
    .join("; ");
}

function reasonOf(record) {
  const verdict = record.verdict || {};
  const details = record.details || {};
  if ((verdict.decision === "warn" || verdict.decision === "reject") && verdict.message) return verdict.message;
  if (record.error_message) return record.error_message;
  if (record.type === "approval") {
    const tools = details.tools || [];
    return details.unquarantined ? "the server (quarantine lifted)" : tools.length ? "tools: " + tools.join(", ") : "";
  }
  if (record.type === "server_change" && typeof details.summary === "string") return details.summary;
  return guardsOf(record);
}

// The variant without its common prefix (`read` for call_tool_read), or the record's type.
function variantOf(record) {
  return record.tool_variant ? record.tool_variant.replace(/^call_tool_/, "") : record.type;
}

function feedRow(record) {
  const row = el("tr");
  row.dataset.id = record.id;
  const status = record.dry_run ? "dry-run" : record.status;
  row.append(
    el("td", localTime(record.timestamp)),
    el("td", record.server_name),
    el("td", record.tool_name),
    el("td", variantOf(record)),
    el("td", status, "status-" + status),
    el("td", (record.duration_ms || 0) + " ms"),
    el("td", decidedBy(record), "decision decision-" + decisionOf(record)),
    el("td", reasonOf(record), "reason"),
  );
  row.cells[0].title = record.timestamp;
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

// The feed's page (the newest 50 records its filters match), in its scope.
function feedPage() {
  const params = filters();
  if (clusterScope()) params.set("cluster", "true");
  params.set("limit", "50");
  return api("/activity?" + params.toString());
}

// The feed's first page, and the record its live feed starts after: the newest record of
// all, read before the page, so the live feed brings whatever the page did not have (and
// scans only records newer than it). Without filters the page's newest is that record.
async function feedStart() {
  const newest = filters().toString() && !clusterScope() ? await api("/activity?limit=1") : null;
  const page = await feedPage();
  const top = (newest || page).records[0];
  return { page, after: top ? top.id : null };
}

// Shows a page of records in place of the feed's rows, and marks the feed `data-loaded`
// once the records that were there when it was asked for are shown.
function showPage(page) {
  shown.clear();
  $("feed").querySelector("tbody").replaceChildren();
  addRecords(page.records, false);
  $("feed").dataset.loaded = "true";
}

// Counts the feed's loads: a load that a newer one (other filters) overtook while it waited
// shows nothing.
let feedLoads = 0;

// `first`: the feed's start (`feedStart`), when it was already asked for (with the key
// check, at load).
async function loadFeed(first) {
  const load = ++feedLoads;
  if (feed) feed.close();
  feed = null;
  if (clusterTimer) clearInterval(clusterTimer);
  clusterTimer = null;
  delete $("feed").dataset.loaded;
  shown.clear();
  $("feed").querySelector("tbody").replaceChildren();
  const start = await (first || feedStart());
  if (load !== feedLoads) return;
  showPage(start.page);
  if (clusterScope()) {
    $("connection").textContent = "whole cluster (every 5 s)";
    clusterTimer = setInterval(() => feedPage().then((page) => {
      if (load === feedLoads) showPage(page);
    }).catch((e) => {
      $("connection").textContent = e.message;
    }), 5000);
    return;
  }
  // No gap between the page shown and the live feed: the feed starts after the newest
  // record read before the page; what both bring is shown once. When the journal was empty,
  // the live feed starts after its newest record when it opens, and the page is read again
  // once it is open, for what came in between.
  const stream = filters();
  stream.set("apikey", apiKey);
  if (start.after) stream.set("after", start.after);
  let caughtUp = Boolean(start.after);
  feed = new EventSource("/api/v1/activity/stream?" + stream.toString());
  feed.addEventListener("record", (event) => {
    try {
      addRecords([JSON.parse(event.data)], true);
    } catch (_) {
      /* a malformed event is skipped */
    }
  });
  feed.onopen = () => {
    $("connection").textContent = "live";
    if (caughtUp) return;
    caughtUp = true;
    feedPage().then((page) => {
      if (load === feedLoads) addRecords(page.records, false);
    }).catch(() => {});
  };
  feed.onerror = () => { $("connection").textContent = "reconnecting…"; };
}

async function loadChartData() {
  const since = new Date(Date.now() - 3600 * 1000).toISOString();
  const page = await api("/activity?type=tool_call&limit=1000&start_time=" + encodeURIComponent(since));
  for (const record of page.records) recent.set(record.id, record);
  drawChart();
}

// The chart's geometry, in pixels (its viewBox is its width on screen, so text is not
// stretched): bars above BAR_BASE, the error and blocked marks below them, then the time
// axis with a labelled tick every 10 minutes of the clock.
const CHART = { height: 150, barBase: 108, barTop: 6, marks: 112, axis: 126, labels: 142 };
const MINUTE = 60000;

function svgNode(tag, attributes, title) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (title) {
    const tip = document.createElementNS("http://www.w3.org/2000/svg", "title");
    tip.textContent = title;
    node.append(tip);
  }
  return node;
}

// The last hour's calls per minute of the clock (the last bucket is the minute now going).
function chartBuckets(minutes, start) {
  const counts = Array.from({ length: minutes }, () => ({ variants: {}, statuses: {} }));
  for (const [id, record] of recent) {
    const at = Date.parse(record.timestamp);
    if (isNaN(at) || at < start) {
      recent.delete(id);
      continue;
    }
    // A record from a clock a little ahead of this one counts in the minute now going.
    const bucket = counts[Math.min(minutes - 1, Math.floor((at - start) / MINUTE))];
    const variant = record.tool_variant || "other";
    bucket.variants[variant] = (bucket.variants[variant] || 0) + 1;
    bucket.statuses[record.status] = (bucket.statuses[record.status] || 0) + 1;
  }
  return counts;
}

function drawChart() {
  const svg = $("chart");
  svg.replaceChildren();
  const width = Math.max(300, svg.clientWidth || 600);
  svg.setAttribute("viewBox", "0 0 " + width + " " + CHART.height);
  const minutes = 60;
  const start = Math.floor(Date.now() / MINUTE) * MINUTE - (minutes - 1) * MINUTE;
  const counts = chartBuckets(minutes, start);
  const max = Math.max(1, ...counts.map((b) => Object.values(b.variants).reduce((a, n) => a + n, 0)));
  const step = width / minutes;
  const barHeight = CHART.barBase - CHART.barTop;
  counts.forEach((bucket, i) => {
    let y = CHART.barBase;
    for (const [variant, color] of VARIANTS) {
      const n = bucket.variants[variant] || 0;
      if (!n) continue;
      const h = (n / max) * barHeight;
      y -= h;
      svg.append(svgNode("rect", { x: i * step + 1, y, width: Math.max(1, step - 2), height: h, fill: color }, n + " " + variant));
    }
    let x = i * step + 1;
    for (const [status, color] of STATUSES) {
      const n = bucket.statuses[status] || 0;
      if (!n) continue;
      const w = Math.max(2, (step - 2) / 2);
      svg.append(svgNode("rect", { x, y: CHART.marks, width: w, height: Math.min(10, 3 + n), fill: color }, n + " " + status));
      x += w;
    }
  });
  drawAxis(svg, width, step, start, minutes, max);
  drawLegend(counts);
}

// The time axis: a line, and a tick labelled with the clock time (the user's locale, hours
// and minutes) at each 10 minutes; the busiest minute's count at the top left.
function drawAxis(svg, width, step, start, minutes, max) {
  svg.append(svgNode("line", { x1: 0, y1: CHART.axis, x2: width, y2: CHART.axis, class: "axis" }));
  for (let i = 0; i < minutes; i++) {
    const at = new Date(start + i * MINUTE);
    if (at.getMinutes() % 10 !== 0) continue;
    const x = i * step;
    svg.append(svgNode("line", { x1: x, y1: CHART.axis, x2: x, y2: CHART.axis + 4, class: "axis" }));
    const anchor = x < 30 ? "start" : x > width - 30 ? "end" : "middle";
    const label = svgNode("text", { x, y: CHART.labels, "text-anchor": anchor, class: "tick" });
    label.textContent = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    label.dataset.time = at.toISOString();
    svg.append(label);
  }
  svg.append(svgNode("line", { x1: 0, y1: CHART.barTop, x2: width, y2: CHART.barTop, class: "grid" }));
  const scale = svgNode("text", { x: 4, y: CHART.barTop + 12, class: "scale" });
  scale.textContent = max + " per minute";
  svg.append(scale);
}

function drawLegend(counts) {
  const svg = $("chart");
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
  // One block per held tool, its name on a line of its own and its findings below it at
  // the dialog's full width: neither a long name nor a long finding squeezes the other.
  const list = el("div");
  list.id = "analysis-tools";
  for (const tool of held) {
    const annotations = tool.annotations || {};
    const flags = [];
    if (annotations.readOnlyHint) flags.push("read-only");
    if (annotations.destructiveHint) flags.push("destructive");
    const item = el("div", null, "tool");
    item.append(
      el("div", tool.name, "tool-name"),
      el("div", tool.standing + "; annotations: " + (flags.join(", ") || "none"), "tool-meta muted"),
    );
    // A held tool of a running, approved server can be approved on its own, in the form
    // shown here; a quarantined server is approved whole (the dialog's Approve).
    if (!analysis.quarantined && analysis.launch_approved !== false && tool.standing !== "trusted") {
      const approveTool = el("button", "Approve this tool", "approve-tool");
      approveTool.type = "button";
      approveTool.dataset.tool = tool.name;
      approveTool.addEventListener("click", () => approveHeldTool(approveTool));
      item.append(approveTool);
    }
    if (tool.findings.length) {
      const findings = el("ul", null, "findings");
      for (const finding of tool.findings) {
        findings.append(el("li", finding.severity + " " + finding.kind + ": " + finding.detail, "finding-" + finding.severity));
      }
      item.append(findings);
    } else {
      item.append(el("div", "no findings", "tool-meta muted"));
    }
    list.append(item);
  }
  nodes.push(list);
  for (const name of analysis.removed || []) nodes.push(el("p", "Removed since approval: " + name, "muted"));
  return nodes;
}

// POST /upstreams/NAME/approve with `approval` (who, the fingerprint shown, maybe tools).
function postApproval(server, approval) {
  return api("/upstreams/" + encodeURIComponent(server) + "/approve", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(approval),
  });
}

// Approves one held tool (REST `tools: [name]`, with the launch fingerprint the dialog
// showed), then shows the analysis again: that tool is served, the others stay held.
async function approveHeldTool(button) {
  const server = $("analysis-approve").dataset.server;
  const tool = button.dataset.tool;
  const approval = { approved_by: "web page", tools: [tool] };
  const fingerprint = $("analysis-approve").dataset.fingerprint;
  if (fingerprint) approval.fingerprint = fingerprint;
  button.disabled = true;
  try {
    await postApproval(server, approval);
    $("approve-result").textContent = server + ":" + tool + " approved.";
    await review(server);
    $("analysis-result").textContent = "Approved " + tool + ".";
  } catch (error) {
    $("analysis-result").textContent = "Approving " + tool + " failed: " + error.message;
    button.disabled = false;
  }
  await loadUpstreams();
}

async function approveReviewed() {
  const button = $("analysis-approve");
  const server = button.dataset.server;
  const approval = { approved_by: "web page" };
  if (button.dataset.fingerprint) approval.fingerprint = button.dataset.fingerprint;
  button.disabled = true;
  try {
    await postApproval(server, approval);
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

// The calls a rule of `approvals` makes wait for a person: a row each with Approve and
// Deny, and a badge in the header with their number.
async function loadApprovals() {
  const pending = await api("/approvals");
  const body = $("approvals-table").querySelector("tbody");
  body.replaceChildren();
  for (const call of pending) {
    const row = el("tr");
    row.dataset.approval = call.id;
    const caller = call.caller || call.client || "unnamed";
    row.append(
      el("td", localTime(call.asked_at)),
      el("td", call.server + ":" + call.tool),
      el("td", call.class + " (" + call.variant + ")"),
      el("td", JSON.stringify(call.arguments), "mono"),
      el("td", caller),
      el("td", localTime(call.expires_at)),
    );
    const cell = el("td");
    for (const [label, verb] of [["Approve", "approve"], ["Deny", "deny"]]) {
      const button = el("button", label);
      button.type = "button";
      button.dataset.answer = verb;
      button.addEventListener("click", () => answerApproval(call, verb, cell));
      cell.append(button);
    }
    row.append(cell);
    body.append(row);
  }
  $("approvals").hidden = pending.length === 0;
  const badge = $("approvals-badge");
  badge.hidden = pending.length === 0;
  badge.textContent = pending.length + " waiting for approval";
}

async function answerApproval(call, verb, cell) {
  for (const button of cell.querySelectorAll("button")) button.disabled = true;
  try {
    await api("/approvals/" + encodeURIComponent(call.id) + "/" + verb, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ by: "page" }),
    });
    $("approvals-result").textContent = (verb === "approve" ? "Approved " : "Denied ") + call.server + ":" + call.tool;
  } catch (error) {
    $("approvals-result").textContent = error.message;
  }
  await loadApprovals().catch(() => {});
}

async function loadStatus() {
  const status = await api("/status");
  $("version").textContent = "version " + status.version;
  showJournal(status.journal);
}

async function connect(key) {
  apiKey = key;
  // The feed's records are asked for at once, beside the key check: the first rendering
  // of the feed shows them, without waiting for the other parts of the page.
  const first = feedStart();
  first.catch(() => {});
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
  const report = (e) => { $("connection").textContent = e.message; };
  await Promise.all([loadFeed(first).catch(report), loadChartData().catch(report), loadUpstreams().catch(report), loadApprovals().catch(report)]);
  setInterval(() => loadApprovals().catch(() => {}), 2000);
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
  // The chart is drawn at its width on screen: again when that changes.
  let resizing = false;
  window.addEventListener("resize", () => {
    if (resizing || $("app").hidden) return;
    resizing = true;
    requestAnimationFrame(() => {
      resizing = false;
      drawChart();
    });
  });
  if (key) connect(key);
  else $("key-form").hidden = false;
}

document.addEventListener("DOMContentLoaded", start);
