// An unattended scan from the console (docs/RUNCONTROL.md, "The console"):
// the points `daqctl --session DIR scan FILE --print-bodies` printed
// (daq-scan-plan/1: daqctl's own expansion of the scan file, every run's
// configure body built by deploy/daqlib's scan.prepare_run), run one after
// another as daqctl scan runs them: configure, start, the point's stop
// condition (the run's own end after its events, or a drained stop after
// its seconds), the books, the hub idle again; then a table with a row per
// point, as JSON and CSV.

export const PLAN_FORMAT = 'daq-scan-plan/1';
export const TABLE_FORMAT = 'daq-console-scan/1';
const POLL_MS = 100;

// doc as a plan to run, or an Error naming what is wrong with it.
export function checkPlan(doc) {
  const bad = (why) => new Error(`not a scan plan: ${why} (daqctl scan FILE --print-bodies ` +
                                 `prints one)`);
  if (!doc || typeof doc !== 'object' || doc.format !== PLAN_FORMAT)
    throw bad(`its format is not ${PLAN_FORMAT}`);
  if (!Array.isArray(doc.points) || doc.points.length === 0) throw bad('no points');
  if (!Array.isArray(doc.keys)) throw bad('no keys');
  for (const p of doc.points) {
    const stop = p && p.stop && Object.entries(p.stop);
    if (!stop || stop.length !== 1 || !['events', 'seconds'].includes(stop[0][0]) ||
        !(stop[0][1] > 0))
      throw bad(`point ${p && p.point}: no stop condition`);
    if (!Array.isArray(p.runs) || p.runs.length === 0) throw bad(`point ${p.point}: no runs`);
    for (const r of p.runs) {
      if (!Number.isInteger(r.run) || !r.body || typeof r.body.args !== 'object' ||
          r.body.run !== r.run)
        throw bad(`point ${p.point}: a run without its configure body`);
    }
  }
  return doc;
}

export class ScanStopped extends Error {}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The hub's reason of a refused request.
const reasonOf = (answer, status) => answer.reason || answer.error || `HTTP ${status}`;

export class ScanRunner {
  // hub: a Hub; operator: who asks; timeoutS: a run not over this long
  // after its start is reset and its point failed; progress(what) is
  // called with {point, points, run, runFraction, text, rows}.
  constructor(hub, plan, { operator, timeoutS, progress }) {
    this.hub = hub;
    this.plan = plan;
    this.operator = operator;
    this.timeoutS = timeoutS;
    this.progress = progress;
    this.rows = [];
    this.stopping = false;
  }

  // Ends the scan after the run in progress.
  stop() { this.stopping = true; }

  async state() {
    const { status, answer } = await this.hub.state();
    if (status !== 200) throw new ScanStopped(`GET /state: ${reasonOf(answer, status)}`);
    return answer;
  }

  async post(path, doc) {
    const { status, answer } = await this.hub.post(path, { ...doc, operator: this.operator });
    if (status === 0) throw new ScanStopped(reasonOf(answer, status));
    return { ok: status === 200 && answer.accepted, reason: reasonOf(answer, status) };
  }

  async wait(done, what) {
    const deadline = Date.now() + this.timeoutS * 1000;
    for (;;) {
      const st = await this.state();
      if (done(st)) return st;
      if (Date.now() > deadline)
        throw new ScanStopped(`${what}: the hub is still ${st.state} after ${this.timeoutS} s`);
      await sleep(POLL_MS);
    }
  }

  async reset() {
    await this.post('/reset', {});
    await this.wait((s) => s.state === 'idle' || s.state === 'error', 'reset');
  }

  // How far the run is towards its point's stop condition, 0 .. 1.
  static fraction(point, st, elapsedS) {
    if (point.stop.seconds !== undefined) return Math.min(1, elapsedS / point.stop.seconds);
    const s = st.live && st.live.status;
    return s ? Math.min(1, (s.events_complete + s.events_expired) / point.stop.events) : 0;
  }

  // One run: configured, started, ended as its point says, its books.
  async oneRun(point, run, say) {
    const n = run.run;
    let { ok, reason } = await this.post('/configure', run.body);
    if (ok) {
      const st = await this.wait((s) => ['configured', 'error', 'idle'].includes(s.state),
                                 `run ${n}: configure`);
      ok = st.state === 'configured';
      reason = st.error || st.state;
    }
    if (ok) ({ ok, reason } = await this.post('/start', { run: n }));
    if (!ok) {
      await this.reset();
      return { run: n, failed: `run ${n}: ${reason}` };
    }
    const t0 = Date.now();
    const startedAt = t0 / 1000;
    let stopped = false;
    let st;
    let done;
    for (;;) {
      st = await this.state();
      done = st.runs.filter((r) => r.run === n);
      if (done.length && (st.state === 'idle' || st.state === 'error')) break;
      const elapsed = (Date.now() - t0) / 1000;
      say(ScanRunner.fraction(point, st, elapsed));
      if (!stopped && point.stop.seconds !== undefined && elapsed >= point.stop.seconds) {
        await this.post('/stop', { run: n });
        stopped = true;
      }
      if (elapsed > this.timeoutS) {
        await this.reset();
        return { run: n, failed: `run ${n}: not over after ${this.timeoutS} s; reset` };
      }
      await sleep(POLL_MS);
    }
    const endedAt = Date.now() / 1000;
    if (st.state === 'error') await this.reset();
    const { status, answer } = await this.hub.request('GET', `/runs/${n}/metrics.json`);
    return { ...done[done.length - 1], started_at: startedAt, ended_at: endedAt,
             seconds: endedAt - startedAt, metrics: status === 200 ? answer : {} };
  }

  // Every point in turn; this.rows holds the points done when it throws.
  async run() {
    const points = this.plan.points;
    for (const [i, point] of points.entries()) {
      const runs = [];
      for (const [k, run] of point.runs.entries()) {
        if (this.stopping) throw new ScanStopped('stopped by the operator');
        const say = (f) => this.progress({
          point: i, points: points.length, runFraction: (k + f) / point.runs.length,
          text: `point ${i + 1}/${points.length} (${point.label}): run ${run.run}` +
            `${point.runs.length > 1 ? ` (${k + 1} of ${point.runs.length})` : ''}, ` +
            `${Math.round(100 * f)} % of ${stopText(point.stop)}`,
          rows: this.rows,
        });
        say(0);
        runs.push(await this.oneRun(point, run, say));
      }
      this.rows.push(pointRow(point, this.plan.keys, runs));
      this.progress({ point: i + 1, points: points.length, runFraction: 0,
                      text: `point ${i + 1}/${points.length}: ${this.rows[i].verdict}`,
                      rows: this.rows });
    }
    return this.rows;
  }
}

function stopText(stop) {
  return stop.events !== undefined ? `${stop.events} events` : `${stop.seconds} s`;
}

function median(values) {
  const v = values.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  if (!v.length) return null;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

function latencyUs(m, name) {
  const w = m.latency && m.latency.with_uncertainty && m.latency.with_uncertainty[name];
  return w ? w.value_ns / 1000 : null;
}

// A point's row: its keys, its runs' verdict and the median of their figures.
export function pointRow(point, keys, runs) {
  const failed = runs.filter((r) => r.failed).map((r) => r.failed);
  const balanced = failed.length === 0 && runs.every((r) => r.balanced);
  const m = runs.map((r) => r.metrics || {});
  const [[kind, n]] = Object.entries(point.stop);
  const row = { point: point.point, runs: runs.map((r) => r.run) };
  for (const k of keys) row[k] = point.values[k] === undefined ? null : point.values[k];
  Object.assign(row, {
    stop: `${kind}=${n}`,
    verdict: failed.length ? failed[0] : (balanced ? 'balanced' : 'NOT balanced'),
    balanced,
    status: failed.length ? null : Math.max(...runs.map((r) => (r.status === undefined ? 1 : r.status))),
    events_decided: median(runs.map((r) => r.events_decided)),
    offered_events_per_s: median(m.map((x) => x.rates && x.rates.offered_events_per_s)),
    accepted_events_per_s: median(m.map((x) => x.rates && x.rates.accepted_events_per_s)),
    p50_us: median(m.map((x) => latencyUs(x, 'p50'))),
    p99_us: median(m.map((x) => latencyUs(x, 'p99'))),
    start_to_first_event_ms: median(runs.map((r) => r.start_to_first_event_ms)),
    stop_to_books_ms: median(runs.map((r) => r.stop_to_books_ms)),
    seconds: median(runs.map((r) => r.seconds)),
    started_at: runs[0].started_at === undefined ? null : runs[0].started_at,
    ended_at: runs[runs.length - 1].ended_at === undefined ? null : runs[runs.length - 1].ended_at,
  });
  for (const [k, v] of Object.entries(row))
    if (typeof v === 'number' && !Number.isInteger(v)) row[k] = Math.round(v * 1000) / 1000;
  return row;
}

// The table as JSON: the plan's scan and keys and the rows.
export function tableJson(plan, rows) {
  return JSON.stringify({ format: TABLE_FORMAT, scan: plan.scan, topology: plan.topology,
                          repeats: plan.repeats, keys: plan.keys, rows }, null, 1) + '\n';
}

// The rows as CSV, as daqctl writes its table's: runs joined by spaces,
// an absent figure empty.
export function tableCsv(rows) {
  const columns = rows.length ? Object.keys(rows[0]) : ['point'];
  const cell = (v) => {
    const t = Array.isArray(v) ? v.join(' ') : v === null || v === undefined ? '' : String(v);
    return /[",\r\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
  };
  return [columns.join(','), ...rows.map((r) => columns.map((c) => cell(r[c])).join(','))]
    .join('\r\n') + '\r\n';
}
