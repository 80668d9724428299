#!/usr/bin/env node
// Drive the wirelens page in headless Chromium (Debian's /usr/bin/chromium,
// through playwright-core; no browser download):
//
//   node e2e/run-page.mjs <page url> <screenshot.png> [deadline seconds, default 60]
//
// Opens the page, clicks "Run all", waits (under the deadline) for
// document.body.dataset.done === "true", saves a full-page screenshot and
// prints one JSON object on stdout:
//   {"results": window.wirelensResults, "console": [...], "failedRequests": [...]}
// Exit status: 0 when the page finished (whatever its calls returned), 1 otherwise.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { chromium } from "playwright-core";

const [url, screenshot, deadlineArg] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error("usage: run-page.mjs <page url> <screenshot.png> [deadline seconds]");
  process.exit(2);
}
const deadlineMs = Number(deadlineArg || 60) * 1000;
const executablePath = process.env.WIRELENS_CHROMIUM || "/usr/bin/chromium";

const profile = mkdtempSync(join(tmpdir(), "wirelens-chromium-"));
const consoleLines = [];
const failedRequests = [];
let context;
let status = 1;
try {
  // A persistent context on a fresh, empty profile: the --user-data-dir Playwright
  // insists on managing itself.
  context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    chromiumSandbox: false, // --no-sandbox: we run as root here
    timeout: deadlineMs,
    args: [
      "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
    ],
    viewport: { width: 1200, height: 700 },
  });
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (msg) => consoleLines.push(`${msg.type()}: ${msg.text()}`));
  page.on("pageerror", (err) => consoleLines.push(`pageerror: ${err.message}`));
  page.on("requestfailed", (req) => failedRequests.push(`${req.method()} ${req.url()}: ${req.failure()?.errorText}`));
  const started = Date.now();
  const left = () => Math.max(1000, deadlineMs - (Date.now() - started));

  const response = await page.goto(url, { waitUntil: "load", timeout: left() });
  if (!response || !response.ok()) {
    const hint = response && response.status() === 404
      ? " (is the /ui/ route in Envoy's config? envoy/envoy.yaml.tmpl serves build/web there)" : "";
    throw new Error(`GET ${url} answered ${response ? response.status() : "nothing"}${hint}`);
  }
  await page.click("#run-all", { timeout: left() });
  try {
    await page.waitForFunction(() => document.body.dataset.done === "true", null, { timeout: left() });
  } finally {
    mkdirSync(dirname(screenshot), { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });
  }
  const results = await page.evaluate(() => window.wirelensResults);
  process.stdout.write(JSON.stringify({ results, console: consoleLines, failedRequests }) + "\n");
  status = 0;
} catch (err) {
  console.error(`run-page: ${err.message}`);
  if (consoleLines.length) console.error(`browser console:\n  ${consoleLines.join("\n  ")}`);
  if (failedRequests.length) console.error(`failed requests:\n  ${failedRequests.join("\n  ")}`);
} finally {
  if (context) await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
process.exit(status);
