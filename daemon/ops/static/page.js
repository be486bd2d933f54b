// The status page: fetches page.json twice a second and draws it; between answers, the
// countdowns and idle times run on locally. It only ever reads (GET), and writes what it got
// as text, never as markup. No framework: see daemon/ops/page.py.
"use strict";

const POLL_MS = 500;
const TICK_MS = 200;
const FETCH_TIMEOUT_MS = 3000;

let shown = null; // the last document
let shownAt = 0; // performance.now() when it arrived
let unreachableSince = null;

const $ = (id) => document.getElementById(id);

function duration(seconds) {
  if (seconds == null) return "–";
  if (seconds < 10) return `${seconds.toFixed(1)}s`;
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${String(Math.floor(seconds % 60)).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

function renderDaemon(doc) {
  setText("version", doc.version);
  setText("status", doc.status);
  setText("pid", String(doc.pid));
  setText("uptime", duration(doc.uptime_seconds));
  setText("server", doc.server || "–");
  setText("circuit", doc.circuit);
  setText("outbox", `${doc.outbox_depth} reports waiting`);
  const { used, total } = doc.slots;
  setText("slots", `${used} used, ${Math.max(0, total - used)} free of ${total}`);
  setText("agents", doc.agents.map((a) => `${a.name} ${a.version}`.trim()).join(", ") || "none");
  const d = doc.disk;
  setText("disk", d ? `${d.task_dirs} task dirs ${bytes(d.task_bytes)}, ${d.repo_caches} repo caches `
    + `${bytes(d.repo_cache_bytes)} (measured ${d.measured_at})` : "not measured yet");
  setText("failures", doc.provider_failures.map((f) => `${f.backend}: ${f.reason} at ${f.at}`
    + (f.resets ? `, resets ${f.resets}` : "")).join("; ") || "none");
}

function renderChart(id, values, peakId, unit) {
  const svg = $(id);
  const peak = Math.max(0, ...values);
  const top = peak > 0 ? peak * 1.1 : 1;
  const step = values.length > 1 ? 300 / (values.length - 1) : 0;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(40 - (v / top) * 38).toFixed(1)}`);
  svg.querySelector("polyline").setAttribute("points", points.join(" "));
  setText(peakId, unit(peak));
}

function renderRunning(runs) {
  const body = document.createElement("tbody");
  for (const run of runs) {
    const row = body.insertRow();
    row.dataset.label = run.label;
    row.dataset.state = run.state;
    cell(row, run.label, "label");
    cell(row, run.backend);
    cell(row, duration(run.age_seconds), "num age");
    cell(row, run.state, `state state-${run.state.replaceAll(" ", "-")}`);
    cell(row, run.tools.map((t) => `${t.name} for ${duration(t.running_seconds)}`).join(", ") || "–",
      "tool");
    cell(row, duration(run.idle_seconds), "num idle");
    cell(row, run.window ? `${run.window} ${duration(run.window_seconds)}` : "–", "window");
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.append(document.createElement("div"), document.createElement("span"));
    cell(row, "", "fires").append(bar);
    cell(row, String(run.attempts), "num attempts");
    cell(row, String(run.resumes), "num resumes");
  }
  $("running").tBodies[0].replaceWith(body);
  setText("running-count", `(${runs.length})`);
}

function renderFinished(tasks) {
  const body = document.createElement("tbody");
  for (const task of tasks) {
    const row = body.insertRow();
    row.dataset.label = task.label;
    row.dataset.outcome = task.outcome;
    cell(row, task.label, "label");
    cell(row, task.backend);
    cell(row, task.outcome, `outcome outcome-${task.outcome}`);
    cell(row, task.reason || "–", "reason");
    cell(row, duration(task.duration_seconds), "num");
    cell(row, `${task.usage.input_tokens} / ${task.usage.output_tokens}`, "num");
    cell(row, String(task.attempts), "num");
    cell(row, `${duration(task.ended_seconds_ago)} ago`, "num");
  }
  $("finished").tBodies[0].replaceWith(body);
  setText("finished-count", `(last ${tasks.length})`);
}

// Between answers the clock runs on: idle time and tool time grow, the countdown shrinks.
function tick() {
  if (!shown) return;
  const since = (performance.now() - shownAt) / 1000;
  const rows = $("running").tBodies[0].rows;
  shown.running.forEach((run, i) => {
    const row = rows[i];
    if (!row) return;
    row.querySelector(".age").textContent = duration(run.age_seconds + since);
    row.querySelector(".idle").textContent = duration(run.idle_seconds + since);
    const bar = row.querySelector(".bar");
    const left = run.fires_in_seconds == null ? null : Math.max(0, run.fires_in_seconds - since);
    row.dataset.firesIn = left == null ? "" : left.toFixed(1);
    bar.firstChild.style.width = left == null ? "0" : `${(100 * left) / run.window_seconds}%`;
    bar.dataset.level = left == null ? "off" : left === 0 ? "due" : left < run.window_seconds / 4 ? "low" : "ok";
    bar.lastChild.textContent = left == null ? "cannot fire" : left === 0 ? "due" : duration(left);
  });
}

function render(doc) {
  renderDaemon(doc);
  renderRunning(doc.running);
  renderFinished(doc.finished);
  renderChart("cpu-chart", doc.chart.cpu_percent, "cpu-peak", (v) => `${v.toFixed(1)} %`);
  renderChart("lag-chart", doc.chart.lag_seconds, "lag-peak", (v) => `${v.toFixed(2)} s`);
  setText("chart-span", duration(doc.chart.span_seconds));
  tick();
}

function setLink(state, text) {
  $("link").dataset.state = state;
  document.body.dataset.link = state; // the style greys out what an unreachable daemon last said
  setText("link", text);
}

async function poll() {
  try {
    const answer = await fetch("page.json", {
      cache: "no-store",
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
    shown = await answer.json();
    shownAt = performance.now();
    unreachableSince = null;
    render(shown);
    setLink("live", "live");
  } catch (error) {
    unreachableSince ??= Date.now();
    const out = duration((Date.now() - unreachableSince) / 1000);
    setLink("offline", `daemon unreachable for ${out} (${error.message}); retrying`);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

setInterval(tick, TICK_MS);
poll();
