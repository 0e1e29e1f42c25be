// The operator's console (docs/RUNCONTROL.md "The console"): polls the
// hub's /state, shows what it says, and sends the transitions it offers,
// signed with the run key, as the operator in control.
import 'uplot/dist/uPlot.min.css';
import './console.css';
import { Hub, reasonOf } from './hub.js';
import { keyBytes } from './sign.js';
import { Plots } from './plots.js';
import { renderPeers, renderBuilders, renderRuns } from './tables.js';

const POLL_MS = 500;
const $ = (id) => document.getElementById(id);
const hub = new Hub();
const plots = new Plots($('plot-rate'), $('plot-latency'));
let last = null;            // the last /state
let polling = false;
let configureBody = null;   // the configure dialog's body

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
  plots.add(st);
}

async function poll() {
  if (!hub.key) return false;
  const { status, answer } = await hub.state();
  if (status !== 200) {
    say($('key-status'), reasonOf(answer, status), 'refused');
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
