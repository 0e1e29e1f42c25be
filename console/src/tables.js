// The live tables: a row per peer, per builder, per run, from /state.

const fmt = (x, digits = 0) => (x === undefined || x === null ? '' :
  Number(x).toLocaleString('en', { maximumFractionDigits: digits }));

function us(ns) {
  return ns === undefined || ns === null ? '' : `${(ns / 1000).toFixed(1)} µs`;
}

function row(tbody, cells, cls) {
  const tr = document.createElement('tr');
  if (cls) tr.className = cls;
  for (const c of cells) {
    const td = document.createElement('td');
    if (c && typeof c === 'object') {
      td.textContent = c.text;
      td.className = c.cls;
    } else {
      td.textContent = c;
    }
    tr.append(td);
  }
  tbody.append(tr);
  return tr;
}

// Frames per second of each reader, from successive polls.
const lastFrames = new Map();

function readerRate(p, now) {
  const key = `${p.role}.${p.id}`;
  const prev = lastFrames.get(key);
  lastFrames.set(key, { t: now, n: p.frames_received });
  if (!prev || p.frames_received === undefined || now <= prev.t || p.frames_received < prev.n)
    return '';
  return `${fmt((p.frames_received - prev.n) / ((now - prev.t) / 1000))} frames/s`;
}

export function renderPeers(tbody, st) {
  tbody.textContent = '';
  const live = new Map();
  for (const p of (st.live && st.live.peers) || []) live.set(`${p.role}.${p.id}`, p);
  const now = Date.now();
  for (const p of st.peers) {
    const l = live.get(`${p.role}.${p.id}`) || {};
    const clock = l.clock_offset_ns !== undefined ? `${us(l.clock_offset_ns)} ± ${us(l.clock_bound_ns)}` : '';
    let rate = '';
    if (l.events_per_s !== undefined) rate = `${fmt(l.events_per_s)} ev/s`;
    else if (l.frames_received !== undefined) rate = readerRate(l, now);
    const trouble = l.lost || l.stalled || l.stuck;
    const error = l.stalled ? 'stalled' : l.stuck ? 'stuck' : l.lost ? 'control link lost' :
      (p.state === 'error' ? 'error' : '');
    row(tbody, [p.role, p.id, p.host, p.pid, p.state, p.run || '', clock, rate,
                l.last_heard_ms_ago !== undefined ? `${l.last_heard_ms_ago} ms ago` : '', error],
        trouble ? 'bad' : '');
  }
}

export function renderBuilders(tbody, summary, st) {
  tbody.textContent = '';
  const s = st.live && st.live.status;
  if (!s) {
    summary.textContent = 'no run object: the figures come with a configured or running run';
    return;
  }
  summary.textContent = `run ${s.run} ${s.phase}: ${fmt(s.events_per_s, 1)} events/s, ` +
    `${fmt(s.events_complete)} complete, ${fmt(s.events_expired)} expired, ` +
    `${fmt(s.events_pending)} pending, completeness ${(100 * s.completeness).toFixed(1)} %, ` +
    `p50 ${us(st.live.latency_p50_ns)}, p99 ${us(s.latency_p99_ns)}, ${s.frames_read} frames read, ` +
    `${s.errors} errors${st.live.last_error ? ` (last: ${st.live.last_error})` : ''}`;
  for (const b of s.builders || []) {
    row(tbody, [b.id, fmt(b.events_complete_per_s), fmt(b.events_complete), b.tokens,
                `${b.in_flight} / ${b.backlog_cap}`, fmt(b.decided_per_s), b.dead ? 'dead' : ''],
        b.dead ? 'bad' : '');
  }
}

export function renderRuns(tbody, st) {
  tbody.textContent = '';
  for (const r of [...st.runs].reverse()) {
    const ms = (x) => (x === null || x === undefined ? '' : `${x.toFixed(1)} ms`);
    row(tbody, [r.run, { text: r.balanced ? 'balanced' : 'NOT balanced', cls: 'verdict' },
                r.status, fmt(r.events_decided), ms(r.start_to_first_event_ms),
                ms(r.stop_to_books_ms), r.ended_by, r.out],
        r.balanced && r.status === 0 ? 'good' : 'bad');
  }
}
