// The live tables: a row per peer, per builder, per run, from /state.

export const fmt = (x, digits = 0) => (x === undefined || x === null ? '' :
  Number(x).toLocaleString('en', { maximumFractionDigits: digits }));

export function us(ns) {
  return ns === undefined || ns === null ? '' : `${(ns / 1000).toFixed(1)} µs`;
}

const MB = 1e6;

function bytes(n) {
  if (n === undefined || n === null) return '';
  if (n >= 1e12) return `${(n / 1e12).toFixed(2)} TB`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} GB`;
  return `${(n / MB).toFixed(1)} MB`;
}

function row(tbody, cells, cls) {
  const tr = document.createElement('tr');
  if (cls) tr.className = cls;
  for (const c of cells) {
    const td = document.createElement('td');
    if (c && typeof c === 'object' && !(c instanceof Node)) {
      td.textContent = c.text;
      td.className = c.cls || '';
      if (c.title) td.title = c.title;
    } else if (c instanceof Node) {
      td.append(c);
    } else {
      td.textContent = c;
    }
    tr.append(td);
  }
  tbody.append(tr);
  return tr;
}

// A counter's rate from successive polls: per key the last (time, value).
class Rates {
  constructor() { this.last = new Map(); }

  // The rate of value since the last poll of key (per second), or null.
  rate(key, value, now) {
    const prev = this.last.get(key);
    this.last.set(key, { t: now, n: value });
    if (!prev || value === undefined || value === null || now <= prev.t || value < prev.n)
      return null;
    return (value - prev.n) / ((now - prev.t) / 1000);
  }
}

const frameRates = new Rates();
const writeRates = new Rates();

// A reader's credits (the admission limit a hub of one builder last sent it
// and how many), its holds and the frames it verified; a builder's tokens.
function creditsText(l) {
  if (l.role === 'reader') {
    const parts = [];
    if (l.credit_limit !== undefined)
      parts.push(`limit ${fmt(l.credit_limit)} (${fmt(l.credits_sent)} credits)`);
    if (l.held_count !== undefined)
      parts.push(`held ${fmt(l.held_count)}× ${Number(l.held_s || 0).toFixed(1)} s`);
    if (l.frames_verified !== undefined) parts.push(`${fmt(l.frames_verified)} verified`);
    return parts.join(', ');
  }
  if (l.role === 'builder' && (l.tokens !== undefined || l.tokens_sent !== undefined))
    return `tokens: ${fmt(l.tokens)} held, ${fmt(l.tokens_sent)} sent`;
  return '';
}

// A source's last event sent (its STATS, taken at each whole second of
// the run, the same instants for every source), against the others' of the
// same second: highlighted when it is more than the window behind the
// source furthest on. newest: the latest second any source reported;
// furthest: the furthest event sent at it.
export function lastEventCell(l, live, newest, furthest) {
  if (l.last_event_sent === undefined) return '';
  const text = `${fmt(l.last_event_sent)} at ${l.run_second} s`;
  if (l.run_second !== newest) return { text, cls: 'last-event', title: 'not yet at the latest second' };
  const behind = furthest - l.last_event_sent;
  const apart = behind > live.window_events;
  return {
    text,
    cls: apart ? 'last-event disagree' : 'last-event',
    title: apart ? `${fmt(behind)} events behind the source furthest on; the window is ` +
      `${fmt(live.window_events)}` : `window ${fmt(live.window_events)}`,
  };
}

export function renderPeers(tbody, st) {
  tbody.textContent = '';
  const livePeers = (st.live && st.live.peers) || [];
  const live = new Map(livePeers.map((p) => [`${p.role}.${p.id}`, p]));
  const sent = livePeers.filter((p) => p.last_event_sent !== undefined);
  const newest = Math.max(0, ...sent.map((p) => p.run_second));
  const furthest = Math.max(0, ...sent.filter((p) => p.run_second === newest)
    .map((p) => p.last_event_sent));
  const now = Date.now();
  for (const p of st.peers) {
    const l = live.get(`${p.role}.${p.id}`) || {};
    const clock = l.clock_offset_ns !== undefined ? `${us(l.clock_offset_ns)} ± ${us(l.clock_bound_ns)}` : '';
    let rate = '';
    if (l.events_per_s !== undefined) {
      rate = `${fmt(l.events_per_s)} ev/s`;
    } else if (l.frames_received !== undefined) {
      const r = frameRates.rate(`${p.role}.${p.id}`, l.frames_received, now);
      rate = r === null ? '' : `${fmt(r)} frames/s`;
    }
    const trouble = l.lost || l.stalled || l.stuck;
    const error = l.stalled ? 'stalled' : l.stuck ? 'stuck' : l.lost ? 'control link lost' :
      (p.state === 'error' ? 'error' : '');
    row(tbody, [p.role, p.id, p.host, p.pid, p.state, p.run || '', clock, rate, creditsText(l),
                lastEventCell(l, st.live || {}, newest, furthest),
                l.last_heard_ms_ago !== undefined ? `${l.last_heard_ms_ago} ms ago` : '', error],
        trouble ? 'bad' : '');
  }
}

// The event files' cells of a builder: files closed, MB/s written since
// the last poll, free space where they go.
function recordingCells(key, rec, now) {
  if (!rec) return ['', '', ''];
  const r = writeRates.rate(key, rec.data_bytes_written, now);
  return [fmt(rec.data_files), r === null ? '' : `${(r / MB).toFixed(1)} MB/s`,
          bytes(rec.data_free_bytes)];
}

export function renderBuilders(tbody, summary, st) {
  tbody.textContent = '';
  const s = st.live && st.live.status;
  if (!s) {
    summary.textContent = 'no run object: the figures come with a configured or running run';
    return;
  }
  const live = st.live;
  summary.textContent = `run ${s.run} ${s.phase}: ${fmt(s.events_per_s, 1)} events/s, ` +
    `${fmt(s.events_complete)} complete, ${fmt(s.events_expired)} expired, ` +
    `${fmt(s.events_pending)} pending, decided below ${fmt(live.decided_below)}, ` +
    `completeness ${(100 * s.completeness).toFixed(1)} %, ` +
    `p50 ${us(live.latency_p50_ns)}, p99 ${us(s.latency_p99_ns)}, ${s.frames_read} frames read, ` +
    `${s.errors} errors${live.last_error ? ` (last: ${live.last_error})` : ''}`;
  const now = Date.now();
  if (!s.builders) {
    // One builder, in the hub's own process.
    row(tbody, ['0 (in the hub)', fmt(s.events_per_s), fmt(s.events_complete), '', '', '',
                ...recordingCells('hub', live.recording, now), '']);
    return;
  }
  const peers = new Map((live.peers || []).filter((p) => p.role === 'builder').map((p) => [p.id, p]));
  for (const b of s.builders) {
    const p = peers.get(b.id) || {};
    row(tbody, [b.id, fmt(b.events_complete_per_s), fmt(b.events_complete), b.tokens,
                `${b.in_flight} / ${b.backlog_cap}`, fmt(b.decided_per_s),
                ...recordingCells(`builder.${b.id}`, p.recording, now), b.dead ? 'dead' : ''],
        b.dead ? 'bad' : '');
  }
}

// The bytes the run's builders have written so far (null: none records).
export function bytesWritten(live) {
  if (!live) return null;
  if (live.recording) return live.recording.data_bytes_written;
  const recs = (live.peers || []).filter((p) => p.recording).map((p) => p.recording.data_bytes_written);
  return recs.length ? recs.reduce((a, b) => a + b, 0) : null;
}

export function renderRuns(tbody, st) {
  tbody.textContent = '';
  for (const r of [...st.runs].reverse()) {
    const ms = (x) => (x === null || x === undefined ? '' : `${x.toFixed(1)} ms`);
    const link = document.createElement('a');
    link.href = `#run-${r.run}`;
    link.className = 'report-link';
    link.dataset.run = r.run;
    link.textContent = 'report';
    row(tbody, [r.run, { text: r.balanced ? 'balanced' : 'NOT balanced', cls: 'verdict' },
                r.status, fmt(r.events_decided), ms(r.start_to_first_event_ms),
                ms(r.stop_to_books_ms), r.ended_by, r.out, link],
        r.balanced && r.status === 0 ? 'good' : 'bad');
  }
}
