// A finished run's report from its books, GET /runs/N/metrics.json
// (docs/METRICS.md): the verdict, the equations that failed, the errors,
// the rates and the latency. Everything shown is set as text.
import { fmt, us } from './tables.js';

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function list(items) {
  const ul = el('ul');
  for (const t of items) ul.append(el('li', t));
  return ul;
}

function figures(rows) {
  const table = el('table', undefined, 'figures');
  for (const [name, value] of rows) {
    if (value === '' || value === null || value === undefined) continue;
    const tr = el('tr');
    tr.append(el('th', name), el('td', String(value)));
    table.append(tr);
  }
  return table;
}

const ms = (x) => (x === null || x === undefined ? '' : `${x.toFixed(1)} ms`);

function latency(m, name) {
  const w = m.latency && m.latency.with_uncertainty && m.latency.with_uncertainty[name];
  return w ? `${us(w.value_ns)} ± ${us(w.uncertainty_ns)}` : '';
}

// The report of run (its number) from m, its metrics.json, into box.
export function renderReport(box, run, m) {
  box.textContent = '';
  const eqs = m.equations || [];
  const failed = eqs.filter((e) => !e.ok);
  const verdict = m.balanced ? 'balanced' : 'NOT balanced';
  box.append(el('h3', `Run ${run}: books ${verdict}, status ${m.status} (exit ${m.exit_status})`,
                m.balanced ? 'verdict good' : 'verdict bad'));
  box.append(el('h4', 'Equations'));
  if (failed.length === 0) {
    box.append(el('p', `all ${eqs.length} equations balanced`, 'equations-ok'));
  } else {
    box.append(el('p', `${failed.length} of ${eqs.length} equations failed:`, 'equations-failed'));
    box.append(list(failed.map((e) => `${e.name}: ${fmt(e.lhs)} ≠ ${fmt(e.rhs)}` +
                                      (e.note ? ` (${e.note})` : ''))));
  }
  const impossible = m.impossible_counters || [];
  if (impossible.length) {
    box.append(el('h4', 'Impossible counters'));
    box.append(list(impossible));
  }
  if ((m.errors || []).length) {
    box.append(el('h4', 'Errors'));
    box.append(list(m.errors));
  }
  const r = m.rates || {};
  const c = (m.counters && m.counters.builder) || {};
  const losses = m.losses || {};
  box.append(el('h4', 'Figures'));
  box.append(figures([
    ['events generated', fmt(r.events_generated)],
    ['events complete', fmt(c.events_complete)],
    ['events expired', fmt(c.events_expired)],
    ['offered', r.offered_events_per_s !== undefined ? `${fmt(r.offered_events_per_s)} events/s` : ''],
    ['accepted', r.accepted_events_per_s !== undefined ? `${fmt(r.accepted_events_per_s)} events/s` : ''],
    ['build duration', r.build_duration_s !== undefined ? `${fmt(r.build_duration_s, 3)} s` : ''],
    ['latency p50', latency(m, 'p50')],
    ['latency p99', latency(m, 'p99')],
    ['latency max', latency(m, 'max')],
    ['start → first event', ms(m.start_to_first_event_ms)],
    ['stop → books', ms(m.stop_to_books_ms)],
    ['fragments cut by the stop', losses.fragments_cut_by_stop ? fmt(losses.fragments_cut_by_stop) : ''],
    ['peers gone', (losses.peers_gone || []).map((p) => `${p.role} ${p.id} (${p.how})`).join(', ')],
    ['event files', c.data_recording ? `${fmt(c.data_files)} files, ${fmt(c.data_events_written)} ` +
      `events, ${fmt(c.data_bytes_written / 1e6, 1)} MB` : ''],
    ['CPU per fragment', m.cpu && m.cpu.us_per_fragment !== undefined
      ? `${fmt(m.cpu.us_per_fragment, 2)} µs` : ''],
  ]));
}
