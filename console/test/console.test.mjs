// The console in a real browser (tests/e2e/test_console.py starts the hub
// and its peers with daqrun --serve and runs this): Debian's chromium,
// headless, driven by playwright-core against the serving hub.
//
//   node console/test/console.test.mjs   (settings from the environment:)
//   HUB_URL      the hub's control endpoint, http://HOST:PORT
//   KEY_FILE     the run key
//   BODY_FILE    a configure body, from daqctl configure TOPOLOGY --print-body
//   RUN          its run number
//   PLAN_FILE    a scan's runs, from daqctl scan FILE --print-bodies
//   SCREENSHOT   where to save the screenshot
//   CHROMIUM     the browser (default /usr/bin/chromium)
//
// Prints one JSON line of what it saw (the requests the pages made, the
// refusals as shown) and exits 0, or names the first failed check, exit 1.
import { chromium } from 'playwright-core';
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { authorization } from '../src/sign.js';
import { lastEventCell } from '../src/tables.js';

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
const HUB = env('HUB_URL');
const RUN = Number(env('RUN'));
const origin = new URL(HUB).origin;
const TIMEOUT = 30000;

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

// The page's fallback HMAC (@noble/hashes, for plain-HTTP pages off loopback)
// and WebCrypto's agree on random keys and messages of every length that
// matters (a block, around the padding boundary, a long key).
async function checkFallbackHmac() {
  for (const [klen, mlen] of [[16, 0], [32, 55], [32, 56], [64, 64], [100, 119], [4096, 1000]]) {
    const key = randomBytes(klen), msg = randomBytes(mlen);
    const k = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    const want = Buffer.from(await crypto.subtle.sign('HMAC', k, msg)).toString('hex');
    check(Buffer.from(hmac(sha256, key, msg)).toString('hex') === want,
          `fallback HMAC of a ${klen}-byte key, ${mlen}-byte message`);
  }
  // The header is "es-hmac MS NONCE HEX" over METHOD\nPATH\nMS\nNONCE\nBODY.
  const key = new TextEncoder().encode('k'.repeat(16));
  const h = await authorization(key, 'POST', '/start', '{"run":1}', 1700000000000, '0'.repeat(32));
  const want = createHmac('sha256', key)
    .update(`POST\n/start\n1700000000000\n${'0'.repeat(32)}\n{"run":1}`).digest('hex');
  check(h === `es-hmac 1700000000000 ${'0'.repeat(32)} ${want}`, `the header ${h}`);
}

// The rule the peers table highlights a source by: more than the window
// behind the source furthest on at the same second of the run.
function checkDisagreement() {
  const live = { window_events: 1000 };
  const cell = (last, second = 7) => lastEventCell({ last_event_sent: last, run_second: second },
                                                   live, 7, 9000);
  check(cell(9000).cls === 'last-event', 'the furthest source is not highlighted');
  check(cell(8000).cls === 'last-event', 'a source a window behind is not highlighted');
  check(cell(7999).cls === 'last-event disagree', 'a source more than a window behind is');
  check(cell(7999).text === '7,999 at 7 s', `the cell's text: ${cell(7999).text}`);
  check(cell(10, 6).cls === 'last-event', 'a second behind the others: not compared');
  check(lastEventCell({}, live, 7, 9000) === '', 'no STATS yet: nothing shown');
}

async function open(browser, requests, name) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1500 },
                                             acceptDownloads: true });
  context.on('request', (r) => requests.push({ page: name, method: r.method(), url: r.url() }));
  context.on('requestfailed', (r) => requests.push({ page: name, failed: r.failure()?.errorText, url: r.url() }));
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // The refusals the test provokes (401, 409) are logged by the browser
  // as failed loads; anything else is an error of the page.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of (401|409) /.test(m.text())) errors.push(m.text());
  });
  await page.goto(HUB, { waitUntil: 'load' });
  return { context, page, errors };
}

async function text(page, sel) {
  return (await page.locator(sel).textContent()).trim();
}

// Polls from here: the page's Content-Security-Policy forbids the
// evaluated scripts waitForFunction would run in it, and stays on.
async function until(fn, what, timeout = TIMEOUT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitText(page, sel, want, what) {
  const ok = (t) => (want instanceof RegExp ? want.test(t) : t === want);
  await until(async () => ok(await text(page, sel)), what).catch(async () => {
    throw new Error(`${what}: ${sel} shows '${await text(page, sel)}', not '${want}'`);
  });
}

async function waitState(page, state) {
  await waitText(page, '#system-state', state, `the hub's state ${state}`);
}

async function actions(page) {
  return page.locator('#actions [data-action]').evaluateAll((els) => els.map((e) => e.dataset.action));
}

async function giveKey(page, operator, how) {
  await page.fill('#operator', operator);
  if (how.file) await page.setInputFiles('#key-file', how.file);
  else await page.fill('#key-text', how.text);
  await page.click('#key-use');
}

async function cells(page, sel) {
  return page.locator(sel).evaluateAll((rows) => rows.map((r) => Array.from(r.cells, (c) => c.textContent)));
}

// A download the page offers: its file name and text.
async function download(page, sel) {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(sel)]);
  return { name: d.suggestedFilename(), text: readFileSync(await d.path(), 'utf8') };
}

async function main() {
  await checkFallbackHmac();
  checkDisagreement();
  const seen = { requests: [] };
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--no-first-run'],
  });
  try {
    const a = await open(browser, seen.requests, 'A');
    await waitText(a.page, '#key-status', 'no key: give the run key to see the hub and act', 'no key yet');

    // A wrong key: the hub's refusal, word for word.
    await giveKey(a.page, 'alice', { text: randomBytes(32).toString('hex') });
    await waitText(a.page, '#key-status', /^wrong proof: /, 'a wrong key refused');
    seen.wrong_key = await text(a.page, '#key-status');
    check(await text(a.page, '#system-state') === 'key refused', 'the badge says the key was refused');

    // The right key, from its file.
    await giveKey(a.page, 'alice', { file: env('KEY_FILE') });
    await waitText(a.page, '#key-status', 'key accepted by the hub', 'the key accepted');
    await waitState(a.page, 'idle');
    check(JSON.stringify(await actions(a.page)) === '["configure","shutdown"]', 'idle offers configure, shutdown');
    check(await a.page.locator('#actions button:enabled').count() === 0, 'no action before control');

    await a.page.click('#take-control');
    await waitText(a.page, '#control-status', "you ('alice') are in control", 'alice in control');
    await until(async () => (await a.page.locator('#actions button:enabled').count()) === 2, 'actions enabled');

    // Configure from the body daqctl built from the topology.
    await a.page.click('#actions [data-action="configure"] button');
    await a.page.setInputFiles('#configure-file', env('BODY_FILE'));
    await waitText(a.page, '#configure-error', /^arguments for hub, /, 'the body read');
    check(Number(await a.page.inputValue('#configure-run')) === RUN, 'the body\'s run number');
    await a.page.click('#configure-send');
    await waitState(a.page, 'configured');
    await until(async () => JSON.stringify(await actions(a.page)) === '["start","reset","shutdown"]',
                'the actions of configured');
    check(JSON.stringify(await actions(a.page)) === '["start","reset","shutdown"]', 'configured offers start, reset, shutdown');

    // A refused transition: start another run than the configured one.
    await a.page.fill('#actions [data-action="start"] input[name="run"]', String(RUN + 1));
    await a.page.click('#actions [data-action="start"] button');
    await waitText(a.page, '#action-result', /^start refused: /, 'a refused start');
    seen.refused_start = await text(a.page, '#action-result');
    check(await text(a.page, '#system-state') === 'configured', 'the refusal changed nothing');

    await a.page.fill('#actions [data-action="start"] input[name="run"]', String(RUN));
    await a.page.click('#actions [data-action="start"] button');
    await waitState(a.page, 'running');

    // Rates rise: the builder's events/s from the live view.
    const rate = async () => {
      const m = (await text(a.page, '#builder-summary')).match(/: ([\d,.]+) events\/s/);
      return m ? Number(m[1].replace(/,/g, '')) : 0;
    };
    await until(async () => (await rate()) > 0, 'events/s above 0');
    seen.rate_running = await rate();
    const peerRows = await a.page.locator('#peers tbody tr').count();
    check(peerRows >= 3, `a row per peer (${peerRows})`);
    seen.peer_rows = await cells(a.page, '#peers tbody tr');
    check(seen.peer_rows.every((r) => /±/.test(r[6])), 'every peer\'s clock offset ± bound');
    // The sources' STATS (every second): each one's last event sent, in
    // step with the other; the reader's credits; the builder's files.
    await until(async () => (await cells(a.page, '#peers tbody tr'))
      .filter((r) => r[0] === 'source' && /^[\d,]+ at \d+ s$/.test(r[9])).length === 2,
                'each source\'s last event sent');
    await until(async () => (await cells(a.page, '#peers tbody tr'))
      .some((r) => r[0] === 'reader' && /^limit [\d,]+ \([\d,]+ credits\), held .* verified$/.test(r[8])),
                'the reader\'s credits');
    await until(async () => /MB\/s$/.test((await cells(a.page, '#builders tbody tr'))[0][7]),
                'the builder\'s write rate');
    seen.peer_rows = await cells(a.page, '#peers tbody tr');
    seen.builder_rows = await cells(a.page, '#builders tbody tr');
    check(await a.page.locator('#peers td.disagree').count() === 0, 'sources in step: none highlighted');
    check(/ (MB|GB|TB)$/.test(seen.builder_rows[0][8]), `disk free: ${seen.builder_rows[0][8]}`);

    // A second operator: sees everything, can change nothing.
    const b = await open(browser, seen.requests, 'B');
    await giveKey(b.page, 'bob', { text: readFileSync(env('KEY_FILE'), 'utf8') });
    await waitState(b.page, 'running');
    await waitText(b.page, '#control-status', "held by 'alice'", 'bob sees alice in control');
    check(await b.page.locator('#peers tbody tr').count() === peerRows, 'bob sees every peer');
    check(await b.page.locator('#actions button').count() === 3, 'bob sees the actions');
    check(await b.page.locator('#actions button:enabled').count() === 0, 'bob can press none');
    check(await text(b.page, '#action-result') === "read only: control is held by 'alice'", 'bob is told why');
    await b.page.click('#take-control');
    await waitText(b.page, '#control-result', /^control is held by 'alice'/, 'bob refused control');
    seen.bob_refused = await text(b.page, '#control-result');
    check(!(await b.page.locator('#take-over').isHidden()), 'bob is offered the explicit take-over');
    check(await text(b.page, '#system-state') === 'running', 'still running');

    await a.page.waitForTimeout(2500);      // the plots fill
    await a.page.screenshot({ path: env('SCREENSHOT'), fullPage: true });

    await a.page.click('#actions [data-action="stop"] button');
    await waitState(a.page, 'idle');
    await waitText(a.page, '#runs tbody tr:first-child td:first-child', String(RUN), 'the run in the history');
    seen.history = await a.page.locator('#runs tbody tr:first-child td').evaluateAll((c) => c.map((x) => x.textContent));
    check(seen.history[1] === 'balanced', `the run balanced (${seen.history})`);
    await waitText(b.page, '#runs tbody tr:first-child td:nth-child(2)', 'balanced', 'bob sees the run balanced');

    // The run's report, from its books.
    await a.page.click('#runs tbody tr:first-child a.report-link');
    await waitText(a.page, '#report-view h3', `Run ${RUN}: books balanced, status ok (exit 0)`,
                   'the run\'s report');
    seen.report_equations = await text(a.page, '#report-view .equations-ok');
    seen.report_figures = await cells(a.page, '#report-view table.figures tr');
    await a.page.click('#report-html');
    await waitText(a.page, '#report-result', /^run \d+'s report.html: \d+ bytes$/, 'report.html fetched');
    seen.report_html = await download(a.page, '#report-html-link');
    await a.page.click('#report-close');

    // A scan from its plan: three points, run after run, to its table.
    await a.page.setInputFiles('#scan-file', env('PLAN_FILE'));
    await waitText(a.page, '#scan-status', /^3 points, 3 runs from run /, 'the plan read');
    await until(async () => a.page.locator('#scan-run').isEnabled(), 'the scan may start');
    await a.page.click('#scan-run');
    const progress = new Set();
    await until(async () => {
      progress.add(await text(a.page, '#scan-point-text'));
      return /^scan (PASS|FAIL|stopped)/.test(await text(a.page, '#scan-status'));
    }, 'the scan over', 180000);
    seen.scan_status = await text(a.page, '#scan-status');
    seen.scan_progress = [...progress].filter((t) => / % of /.test(t));
    seen.scan_points_bar = [await a.page.locator('#scan-points').getAttribute('max'),
                            await a.page.locator('#scan-points').evaluate((e) => e.value)];
    seen.scan_rows_shown = await cells(a.page, '#scan-table tbody tr');
    const json = await download(a.page, '#scan-json');
    const csv = await download(a.page, '#scan-csv');
    seen.scan_table = { json_name: json.name, csv_name: csv.name, json: JSON.parse(json.text),
                        csv: csv.text };
    await waitText(b.page, '#runs tbody tr:first-child td:first-child',
                   String(seen.scan_table.json.rows[2].runs[0]), 'bob sees the scan\'s runs');

    await a.page.click('#release-control');
    await waitText(a.page, '#control-status', 'nobody holds control', 'control released');
    seen.errors = [...a.errors, ...b.errors];
    check(seen.errors.length === 0, `no error in the pages: ${seen.errors}`);
  } finally {
    await browser.close();
  }
  const outside = seen.requests.filter((r) => new URL(r.url).origin !== origin || r.failed);
  check(outside.length === 0, `every request to the hub and answered: ${JSON.stringify(outside)}`);
  seen.paths = [...new Set(seen.requests.map((r) => `${r.method} ${new URL(r.url).pathname}`))].sort();
  seen.request_count = seen.requests.length;
  delete seen.requests;
  console.log(JSON.stringify(seen));
}

main().catch((e) => {
  console.error(`console test: ${e.message}`);
  process.exit(1);
});
