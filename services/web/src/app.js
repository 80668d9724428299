// The wirelens browser page: one row per (operation, protocol), a "Run all"
// button, the run id from ?run=<id> sent as x-wirelens-run on every call.
// When a run is over: document.body.dataset.done = "true" and
// window.wirelensResults = [{operation, protocol, ok, status, ms}, ...].
import descriptor from "wirelens:descriptor";
import { PROTOCOLS, call, loadOperations } from "./operations.js";

const operations = loadOperations(descriptor);
const params = new URLSearchParams(location.search);
const runId = params.get("run") || `browser-${Date.now().toString(36)}`;
const origin = location.origin; // same origin: every call goes through the Envoy that served the page

const rows = new Map(); // "operation protocol" -> <tr>

function cell(row, className, text) {
  const td = row.querySelector(`td.${className}`);
  td.textContent = text;
}

function setRow(operation, protocol, state, status, ms, reply) {
  const row = rows.get(`${operation} ${protocol}`);
  row.className = state;
  cell(row, "result", state === "pending" ? "…" : state === "ok" ? "ok" : "FAILED");
  cell(row, "status", status === undefined ? "" : String(status));
  cell(row, "ms", ms === undefined ? "" : ms.toFixed(1));
  const text = typeof reply === "string" ? reply : JSON.stringify(reply);
  cell(row, "reply", text === undefined ? "" : text.length > 120 ? text.slice(0, 117) + "…" : text);
}

function renderTable() {
  const body = document.getElementById("results");
  for (const op of operations) {
    for (const protocol of PROTOCOLS) {
      const row = document.createElement("tr");
      for (const name of ["operation", "protocol", "result", "status", "ms", "reply"]) {
        const td = document.createElement("td");
        td.className = name + (name === "ms" || name === "status" ? " num" : "");
        row.appendChild(td);
      }
      cell(row, "operation", op.name);
      cell(row, "protocol", protocol);
      body.appendChild(row);
      rows.set(`${op.name} ${protocol}`, row);
    }
  }
}

async function runAll() {
  const button = document.getElementById("run-all");
  button.disabled = true;
  document.body.dataset.done = "false";
  const results = [];
  // One call at a time: each row's time is that call alone.
  for (const op of operations) {
    for (const protocol of PROTOCOLS) {
      setRow(op.name, protocol, "pending");
      const t0 = performance.now();
      const { reply, status, ok } = await call(origin, op, protocol, runId);
      const ms = performance.now() - t0;
      setRow(op.name, protocol, ok ? "ok" : "fail", status, ms, reply);
      results.push({ operation: op.name, protocol, ok, status, ms: Math.round(ms * 10) / 10 });
    }
  }
  const failed = results.filter((r) => !r.ok).length;
  document.getElementById("summary").textContent =
    `${results.length} calls, ${results.length - failed} ok, ${failed} failed`;
  window.wirelensResults = results;
  document.body.dataset.done = "true";
  button.disabled = false;
}

document.getElementById("run-id").textContent = runId;
renderTable();
document.getElementById("run-all").addEventListener("click", runAll);
