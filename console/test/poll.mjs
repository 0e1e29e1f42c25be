// An operator's console left open: Debian's chromium, headless, driven by
// playwright-core, opens the hub's page, is given the run key (so the page
// polls /state and shows everything live, as an open console does) and then
// only watches: it clicks nothing and takes no control. For
// analysis/bench_console.py (make bench-console), which measures what an
// open console costs a run.
//
//   node console/test/poll.mjs   (settings from the environment:)
//   HUB_URL      the hub's control endpoint, http://HOST:PORT
//   KEY_FILE     the run key (without it the page asks for one and polls nothing)
//   OPERATOR     the name the page shows (default: console-poll)
//   DURATION_S   how long to stay open (default: until SIGTERM or SIGINT)
//   CHROMIUM     the browser (default /usr/bin/chromium)
//
// Prints one JSON line when the page polls (the key accepted by the hub):
// {"ready": true, ...}; then, at SIGTERM, SIGINT or the end of DURATION_S,
// one JSON line of what the page asked: every request by method and path,
// those not answered 200, the page's errors, the seconds it polled, the
// /state requests and their rate. Exit 0, or 1 with the first failure.
import { chromium } from 'playwright-core';

const HUB = process.env.HUB_URL;
const TIMEOUT = 30000;
const POLLED = 'GET /state';

function fail(why) {
  console.error(`poll: ${why}`);
  process.exit(1);
}

if (!HUB) fail('HUB_URL is not set');
const origin = new URL(HUB).origin;
let stopping = null;
const stopped = new Promise((resolve) => { stopping = resolve; });
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => stopping(sig));

async function until(fn, what) {
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main() {
  const counts = {};         // "METHOD /path": requests the page made
  const refused = {};        // "METHOD /path HTTP status" or the failure: not 200
  const errors = [];
  let since = null;          // ms: the key accepted, polling from here
  let statesAtReady = 0;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--no-first-run'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 1500 } });
    context.on('request', (r) => {
      const u = new URL(r.url());
      const k = u.origin === origin ? `${r.method()} ${u.pathname}` : `elsewhere ${u.origin}`;
      counts[k] = (counts[k] || 0) + 1;
    });
    context.on('requestfailed', (r) => {
      const k = `${r.method()} ${new URL(r.url()).pathname} ${r.failure()?.errorText}`;
      refused[k] = (refused[k] || 0) + 1;
    });
    context.on('response', (r) => {
      if (r.status() !== 200) {
        const k = `${r.request().method()} ${new URL(r.url()).pathname} HTTP ${r.status()}`;
        refused[k] = (refused[k] || 0) + 1;
      }
    });
    const page = await context.newPage();
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.goto(HUB, { waitUntil: 'load' });
    if (process.env.KEY_FILE) {
      await page.fill('#operator', process.env.OPERATOR || 'console-poll');
      await page.setInputFiles('#key-file', process.env.KEY_FILE);
      await page.click('#key-use');
      const status = async () => (await page.locator('#key-status').textContent()).trim();
      await until(async () => (await status()) === 'key accepted by the hub', 'the key accepted')
        .catch(async (e) => { throw new Error(`${e.message}: the page says '${await status()}'`); });
    }
    since = Date.now();
    statesAtReady = counts[POLLED] || 0;
    console.log(JSON.stringify({ ready: true, hub: origin, key: Boolean(process.env.KEY_FILE),
                                 state_requests: statesAtReady }));
    const duration = Number(process.env.DURATION_S || 0);
    const how = await Promise.race([
      stopped,
      ...(duration > 0 ? [new Promise((r) => setTimeout(() => r('duration'), duration * 1000))] : []),
    ]);
    const seconds = (Date.now() - since) / 1000;
    const polled = (counts[POLLED] || 0) - statesAtReady;
    console.log(JSON.stringify({
      ended_by: how, seconds, requests: counts, not_ok: refused, errors,
      state_requests: counts[POLLED] || 0, state_requests_polling: polled,
      state_per_s: seconds > 0 ? polled / seconds : null,
    }));
  } finally {
    await browser.close();
  }
  if (Object.keys(counts).some((k) => k.startsWith('elsewhere '))) fail('a request went elsewhere than the hub');
  if (Object.keys(refused).length) fail(`requests not answered 200: ${JSON.stringify(refused)}`);
  if (errors.length) fail(`errors in the page: ${errors}`);
}

main().catch((e) => fail(e.message));
