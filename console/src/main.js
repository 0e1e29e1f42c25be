// The operator's console (docs/RUNCONTROL.md "The console"): polls the
// hub's /state, shows what it says, and sends the transitions it offers,
// signed with the run key, as the operator in control.
import 'uplot/dist/uPlot.min.css';
import './console.css';
import { Hub, reasonOf } from './hub.js';
import { keyBytes } from './sign.js';
import { Plots } from './plots.js';
import { renderReport } from './report.js';
import { checkPlan, ScanRunner, tableCsv, tableJson } from './scan.js';
import { renderPeers, renderBuilders, renderRuns } from './tables.js';

const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);
const hub = new Hub();
const plots = new Plots($('plot-rate'), $('plot-latency'), $('plot-completeness'), $('plot-write'));
let last = null;            // the last /state
let polling = false;
let configureBody = null;   // the configure dialog's body
let scanPlan = null;        // the scan panel's plan, checked
let scan = null;            // the scan running, if any

const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const fromHex = (h) => new Uint8Array(h.match(/../g).map((x) => parseInt(x, 16)));

function say(el, text, kind) {
  el.textContent = text;
  el.className = `message ${kind || ''}`;
}

function operator() {
  return $('operator').value.trim();
}

// ---- the key, kept for this browser tab's session only -------------------
function useKey(bytes) {
  try {
    const k = keyBytes(bytes);
    hub.key = k;
    sessionStorage.setItem('daq.key', toHex(k));
    say($('key-status'), 'key given; checking it with the hub ...');
    startPolling();
  } catch (e) {
    say($('key-status'), e.message, 'refused');
  }
}

$('key-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  sessionStorage.setItem('daq.operator', operator());
  const f = $('key-file').files[0];
  if (f) useKey(new Uint8Array(await f.arrayBuffer()));
  else useKey(new TextEncoder().encode($('key-text').value));
  $('key-text').value = '';
  $('key-file').value = '';
});

$('key-forget').addEventListener('click', () => {
  hub.key = null;
  sessionStorage.removeItem('daq.key');
  say($('key-status'), 'no key: give the run key to see the hub and act');
});

$('operator').addEventListener('change', () => sessionStorage.setItem('daq.operator', operator()));

// ---- control ----------------------------------------------------------------
async function control(path, doc, el) {
  const { status, answer } = await hub.post(path, doc);
  if (status === 200 && answer.accepted) say(el, `${path.slice(1)}: accepted`, 'ok');
  else say(el, reasonOf(answer, status), 'refused');
  $('take-over').hidden = !(status === 409 && path === '/control' && !doc.take_over);
  await poll();
}

$('take-control').addEventListener('click', () =>
  control('/control', { operator: operator(), take_over: false }, $('control-result')));
$('take-over').addEventListener('click', () =>
  control('/control', { operator: operator(), take_over: true }, $('control-result')));
$('release-control').addEventListener('click', () =>
  control('/release', { operator: operator() }, $('control-result')));

function inControl(st) {
  return st && st.control && st.control.operator === operator();
}

// ---- actions: exactly those /state offers now ---------------------------
function defaultRun(st, action) {
  if (action === 'configure') return Math.max(0, st.run || 0, ...st.runs.map((r) => r.run)) + 1;
  return st.run || '';
}

function renderActions(st) {
  const box = $('actions');
  const mine = inControl(st);
  const key = JSON.stringify([st.actions.map((a) => a.action), mine, st.run]);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.textContent = '';
  for (const a of st.actions) {
    const div = document.createElement('div');
    div.className = 'action';
    div.dataset.action = a.action;
    const inputs = {};
    for (const [name, what] of Object.entries(a.args)) {
      if (name === 'args') continue;  // configure's: the dialog's body
      const label = document.createElement('label');
      label.textContent = `${name} `;
      label.title = what;
      const input = document.createElement('input');
      input.type = name === 'run' ? 'number' : 'text';
      input.name = name;
      input.value = defaultRun(st, a.action);
      label.append(input);
      div.append(label);
      inputs[name] = input;
    }
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = a.action;
    b.title = `${a.meaning} (→ ${a.to})`;
    b.disabled = !mine;
    b.addEventListener('click', () => act(a, inputs));
    div.append(b);
    box.append(div);
  }
  if (!mine) say($('action-result'), st.control && st.control.operator
    ? `read only: control is held by '${st.control.operator}'`
    : 'read only: take control to act');
}

async function act(a, inputs) {
  const doc = { operator: operator() };
  for (const [name, input] of Object.entries(inputs))
    doc[name] = input.type === 'number' ? Number(input.value) : input.value;
  if ('args' in a.args) {
    openConfigure(doc.run);
    return;
  }
  await send(a.path, doc);
}

async function send(path, doc) {
  const { status, answer } = await hub.post(path, doc);
  if (status === 200 && answer.accepted)
    say($('action-result'), `${path.slice(1)}: accepted (${answer.state})`, 'ok');
  else
    say($('action-result'), `${path.slice(1)} refused: ${reasonOf(answer, status)}`, 'refused');
  await poll();
}

// ---- the configure dialog ---------------------------------------------------
function openConfigure(run) {
  $('configure-run').value = run || '';
  say($('configure-error'), '');
  $('configure-dialog').showModal();
}

$('configure-file').addEventListener('change', async () => {
  const f = $('configure-file').files[0];
  if (f) $('configure-body').value = await f.text();
  checkBody();
});
$('configure-body').addEventListener('input', checkBody);

function checkBody() {
  configureBody = null;
  let doc;
  try {
    doc = JSON.parse($('configure-body').value);
  } catch (e) {
    say($('configure-error'), `the body is not JSON: ${e.message}`, 'refused');
    return;
  }
  if (!doc || typeof doc !== 'object' || typeof doc.args !== 'object' || doc.args === null) {
    say($('configure-error'), 'the body is not {"run": N, "args": {...}}', 'refused');
    return;
  }
  configureBody = doc;
  if (Number.isInteger(doc.run)) $('configure-run').value = doc.run;
  say($('configure-error'), `arguments for ${Object.keys(doc.args).join(', ')}`, 'ok');
}

$('configure-form').addEventListener('submit', async (ev) => {
  if (ev.submitter && ev.submitter.value === 'cancel') return;
  ev.preventDefault();
  checkBody();
  if (!configureBody) return;
  const doc = { ...configureBody, run: Number($('configure-run').value), operator: operator() };
  $('configure-dialog').close();
  await send('/configure', doc);
});

// ---- a finished run's report (GET /runs/N/metrics.json) ---------------------
let reportRun = null;
let reportUrl = null;       // the last report.html's object URL

async function openReport(run) {
  reportRun = run;
  $('report-view').textContent = `run ${run}: reading its books ...`;
  say($('report-result'), '');
  $('report-html-link').hidden = true;
  if (!$('report-dialog').open) $('report-dialog').showModal();
  const { status, answer } = await hub.request('GET', `/runs/${run}/metrics.json`);
  if (status !== 200) {
    $('report-view').textContent = '';
    say($('report-result'), `run ${run}: ${reasonOf(answer, status)}`, 'refused');
    return;
  }
  renderReport($('report-view'), run, answer);
}

$('runs').tBodies[0].addEventListener('click', (ev) => {
  const a = ev.target.closest('a.report-link');
  if (!a) return;
  ev.preventDefault();
  openReport(Number(a.dataset.run));
});

// report.html is served signed like the books: fetched here, then offered
// as a file.
$('report-html').addEventListener('click', async () => {
  const run = reportRun;
  const { status, blob, error } = await hub.file(`/runs/${run}/report.html`);
  if (status !== 200) {
    say($('report-result'), `run ${run}'s report.html: ${error}`, 'refused');
    return;
  }
  if (reportUrl) URL.revokeObjectURL(reportUrl);
  reportUrl = URL.createObjectURL(blob);
  const link = $('report-html-link');
  link.href = reportUrl;
  link.download = `run-${run}-report.html`;
  link.hidden = false;
  say($('report-result'), `run ${run}'s report.html: ${blob.size} bytes`, 'ok');
});

// ---- the scan panel -----------------------------------------------------------
function readPlan() {
  scanPlan = null;
  const text = $('scan-plan').value.trim();
  if (!text) {
    say($('scan-status'), '');
    return;
  }
  try {
    scanPlan = checkPlan(JSON.parse(text));
    const runs = scanPlan.points.reduce((n, p) => n + p.runs.length, 0);
    say($('scan-status'), `${scanPlan.points.length} points, ${runs} runs from run ` +
        `${scanPlan.first_run} (${scanPlan.scan})`, 'ok');
  } catch (e) {
    say($('scan-status'), e instanceof SyntaxError ? `the plan is not JSON: ${e.message}`
      : e.message, 'refused');
  }
  renderScanButtons(last);
}

$('scan-file').addEventListener('change', async () => {
  const f = $('scan-file').files[0];
  if (f) $('scan-plan').value = await f.text();
  readPlan();
});
$('scan-plan').addEventListener('input', readPlan);

function renderScanButtons(st) {
  $('scan-run').disabled = !scanPlan || scan !== null || !inControl(st) || !st || st.state !== 'idle';
  $('scan-stop').disabled = scan === null;
}

function renderScanTable(rows) {
  const table = $('scan-table');
  table.tHead.textContent = '';
  table.tBodies[0].textContent = '';
  if (!rows.length) return;
  const columns = Object.keys(rows[0]);
  const head = document.createElement('tr');
  for (const c of columns) {
    const th = document.createElement('th');
    th.textContent = c;
    head.append(th);
  }
  table.tHead.append(head);
  for (const r of rows) {
    const tr = document.createElement('tr');
    tr.className = r.balanced ? 'good' : 'bad';
    for (const c of columns) {
      const td = document.createElement('td');
      const v = r[c];
      td.textContent = Array.isArray(v) ? v.join(' ') : v === null ? '' : String(v);
      if (c === 'verdict') td.className = 'verdict';
      tr.append(td);
    }
    table.tBodies[0].append(tr);
  }
}

function scanProgress(p) {
  $('scan-points').max = p.points;
  $('scan-points').value = p.point;
  $('scan-points-text').textContent = `${p.point} of ${p.points} points done`;
  $('scan-point').value = p.runFraction;
  $('scan-point-text').textContent = p.text;
  renderScanTable(p.rows);
}

function offerTable(plan, rows) {
  const stem = `scan-runs-${plan.first_run}`;
  for (const [id, text, type, ext] of [['scan-json', tableJson(plan, rows), 'application/json', 'json'],
                                       ['scan-csv', tableCsv(rows), 'text/csv', 'csv']]) {
    const a = $(id);
    if (a.href) URL.revokeObjectURL(a.href);
    a.href = URL.createObjectURL(new Blob([text], { type }));
    a.download = `${stem}.${ext}`;
  }
  $('scan-downloads').hidden = false;
}

$('scan-run').addEventListener('click', async () => {
  const plan = scanPlan;
  $('scan-downloads').hidden = true;
  scan = new ScanRunner(hub, plan, { operator: operator(), timeoutS: Number($('scan-timeout').value) || 300,
                                     progress: scanProgress });
  renderScanButtons(last);
  say($('scan-status'), `scan of ${plan.points.length} points running`);
  let why = null;
  try {
    await scan.run();
  } catch (e) {
    why = e.message;
  }
  const rows = scan.rows;
  scan = null;
  renderScanTable(rows);
  if (rows.length) offerTable(plan, rows);
  const bad = rows.filter((r) => !r.balanced).length;
  if (why) {
    say($('scan-status'), `scan stopped after ${rows.length} of ${plan.points.length} points: ${why}`,
        'refused');
  } else {
    say($('scan-status'), `scan ${bad ? 'FAIL' : 'PASS'}: ${rows.length - bad} of ${rows.length} ` +
        'points balanced', bad ? 'refused' : 'ok');
  }
  renderScanButtons(last);
});

$('scan-stop').addEventListener('click', () => {
  if (scan) scan.stop();
  say($('scan-status'), 'the scan ends after the run in progress');
});

// ---- the live view ----------------------------------------------------------
function render(st) {
  const badge = $('system-state');
  badge.textContent = st.state;
  badge.className = `badge ${st.state}`;
  $('run-now').textContent = st.run ? `run ${st.run}` : '';
  const c = st.control || {};
  $('control-holder').textContent = c.operator ? `in control: ${c.operator}` : 'nobody in control';
  $('control-status').textContent = c.operator
    ? (inControl(st) ? `you ('${c.operator}') are in control` : `held by '${c.operator}'`)
    : 'nobody holds control';
  $('take-over').hidden = !(c.operator && !inControl(st));
  $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  say($('hub-error'), st.error ? `hub error: ${st.error}` : '', st.error ? 'refused' : '');
  $('missing').textContent = st.missing.length ? `missing: ${st.missing.join(', ')}` : '';
  renderActions(st);
  renderPeers($('peers').tBodies[0], st);
  renderBuilders($('builders').tBodies[0], $('builder-summary'), st);
  renderRuns($('runs').tBodies[0], st);
  renderScanButtons(st);
  plots.add(st);
}

async function poll() {
  if (!hub.key) return false;
  const { status, answer } = await hub.state();
  if (status !== 200) {
    const why = reasonOf(answer, status);
    say($('key-status'), why, 'refused');
    // A request sent twice on the way is no wrong key: the next is signed anew.
    if (status === 401 && why.startsWith('replayed request')) return true;
    $('system-state').textContent = status === 401 ? 'key refused' : 'unreachable';
    $('system-state').className = 'badge error';
    return status !== 401;
  }
  if (!last) say($('key-status'), 'key accepted by the hub', 'ok');
  last = answer;
  render(answer);
  return true;
}

async function startPolling() {
  last = null;
  if (polling) return;
  polling = true;
  while (hub.key) {
    const t0 = Date.now();
    if (!(await poll())) break;   // a refused key: wait for another
    await new Promise((r) => setTimeout(r, Math.max(0, POLL_MS - (Date.now() - t0))));
  }
  polling = false;
}

$('operator').value = sessionStorage.getItem('daq.operator') ||
  `console-${toHex(crypto.getRandomValues(new Uint8Array(2)))}`;
const kept = sessionStorage.getItem('daq.key');
if (kept) {
  hub.key = fromHex(kept);
  startPolling();
} else {
  say($('key-status'), 'no key: give the run key to see the hub and act');
}
