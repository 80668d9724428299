#!/usr/bin/env node
// Read Jaeger's UI as a user does, in headless Chromium (Debian's /usr/bin/chromium,
// through services/web's playwright-core, as tests/e2e/test_browser.py does), and
// print what the page's DOM shows as one JSON object on stdout.
//
//   node jaeger_ui.mjs trace  <trace page url>  <screenshot.png> <deadline seconds> [spans] [service]
//       Opens /trace/<id> (reloading until it shows at least <spans> spans, default 1),
//       clicks open the first span of <service> (default wirelens-envoy: the proxy's span)
//       and its Tags section, and prints
//       {"spans": [{"service", "operation", "depth"}], "title", "tags": {key: {"value", "kind"}}}
//       read from the span rows in the page's tree order (depth: from the row's indent
//       guides, one per ancestor and one for the span; 0 for a root) and the tags table (kind: the json-markup class
//       of the value: string, number, bool).
//   node jaeger_ui.mjs search <search page url> <screenshot.png> <deadline seconds> <expected count>
//       Opens the search page (its query in the URL: service, tags, lookback, limit)
//       and prints {"count", "results": [{"title", "href"}]} from the result list.
//
// Spans reach Jaeger a moment after the call, so the page is reloaded until it shows
// what it should (the span; at least <expected count> results) or the deadline passes.
// The screenshot is taken either way. Exit status 0 when the page showed it, 1 otherwise.
import { createRequire } from "node:module";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(resolve(here, "../../services/web/package.json"));
const { chromium } = require("playwright-core");

const [mode, url, screenshot, deadlineArg, expectedArg, serviceArg] = process.argv.slice(2);
if (!["trace", "search"].includes(mode) || !url || !screenshot) {
  console.error("usage: jaeger_ui.mjs trace|search <url> <screenshot.png> [deadline seconds] [expected count]");
  process.exit(2);
}
const deadlineMs = Number(deadlineArg || 60) * 1000;
const expected = Number(expectedArg || 1);
const openService = serviceArg || "wirelens-envoy";
const started = Date.now();
const left = () => Math.max(1000, deadlineMs - (Date.now() - started));
const attemptMs = () => Math.min(5000, left());

async function openUntil(page, ready) {
  // Load (or reload) the page until ready(page) holds within one attempt, under the deadline.
  let last;
  for (;;) {
    await page.goto(url, { waitUntil: "load", timeout: left() });
    try {
      return await ready(page);
    } catch (err) {
      last = err;
    }
    if (Date.now() - started > deadlineMs) throw new Error(`${url} did not show it in ${deadlineMs / 1000}s: ${last.message}`);
  }
}

async function readTrace(page) {
  await openUntil(page, async (p) => {
    await p.locator(".span-name").first().waitFor({ timeout: attemptMs() });
    await p.waitForFunction((n) => document.querySelectorAll(".span-name-wrapper").length >= n, expected,
                            { timeout: attemptMs() });
    return true;
  });
  const spans = await page.$$eval(".span-name-wrapper", (nodes) => nodes.map((n) => ({
    service: n.querySelector(".span-svc-name")?.innerText.trim(),
    operation: n.querySelector(".span-name")?.innerText.replace(n.querySelector(".span-svc-name")?.innerText ?? "", "").trim(),
    // One indent guide per ancestor and one for the span itself (a root has one).
    depth: n.querySelectorAll(".SpanTreeOffset--indentGuide").length - 1,
  })));
  const title = (await page.locator(".TracePageHeader--titleLink, h1").first().innerText({ timeout: left() })).trim();
  // Open the span's details, then its Tags section: a key/value table.
  await page.locator(".span-name", { has: page.locator(".span-svc-name", { hasText: openService }) }).first()
    .click({ timeout: left() });
  await page.locator(".AccordianKeyValues--header").first().click({ timeout: left() });
  await page.locator(".KeyValueTable--row").first().waitFor({ timeout: left() });
  const tags = await page.$$eval(".KeyValueTable--row", (rows) => Object.fromEntries(rows.map((row) => {
    const key = row.querySelector(".KeyValueTable--keyColumn").innerText.trim();
    const markup = row.querySelector(".KeyValueTable--valueColumn .json-markup [class^='json-markup-']");
    const kind = (markup?.className.match(/json-markup-(\w+)/) || [, "unknown"])[1];
    return [key, { value: markup ? markup.innerText.trim() : row.innerText.trim(), kind }];
  })));
  // The screenshot shows the wirelens tags: scroll the tags table to them (a span without them fails here).
  await page.locator(".KeyValueTable--row", { hasText: "wirelens.operation" }).first()
    .scrollIntoViewIfNeeded({ timeout: left() });
  return { spans, title, tags };
}

async function readSearch(page) {
  await openUntil(page, async (p) => {
    await p.waitForFunction((n) => document.querySelectorAll(".ResultItem").length >= n, expected,
                            { timeout: attemptMs() });
    return true;
  });
  const results = await page.$$eval(".ResultItem", (items) => items.map((item) => ({
    title: item.querySelector(".ResultItemTitle--title, h3")?.innerText.trim() ?? item.innerText.split("\n")[0],
    href: item.querySelector("a[href*='/trace/']")?.getAttribute("href"),
  })));
  return { count: results.length, results };
}

const profile = mkdtempSync(join(tmpdir(), "wirelens-jaeger-ui-"));
const consoleLines = [];
let context;
let status = 1;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.WIRELENS_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    chromiumSandbox: false, // --no-sandbox: we run as root here
    timeout: deadlineMs,
    args: ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
    viewport: { width: 1400, height: 1000 },
  });
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (msg) => { if (msg.type() === "error") consoleLines.push(msg.text().split("\n")[0]); });
  page.on("pageerror", (err) => consoleLines.push(`pageerror: ${err.message}`));
  try {
    const out = mode === "trace" ? await readTrace(page) : await readSearch(page);
    process.stdout.write(JSON.stringify({ ...out, console: consoleLines }) + "\n");
    status = 0;
  } finally {
    mkdirSync(dirname(screenshot), { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });
  }
} catch (err) {
  console.error(`jaeger_ui: ${err.message}`);
  if (consoleLines.length) console.error(`browser console errors:\n  ${consoleLines.join("\n  ")}`);
} finally {
  if (context) await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
process.exit(status);
