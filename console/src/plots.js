// The event rate, the latency, the completeness and the rate the event
// files are written at, over the last minutes, from polled /state.
import uPlot from 'uplot';
import { bytesWritten } from './tables.js';

export const KEEP_S = 300;

export class Plots {
  constructor(rateEl, latencyEl, completenessEl, writeEl) {
    this.t = [];
    this.rate = [];
    this.p50 = [];
    this.p99 = [];
    this.complete = [];
    this.write = [];
    this.lastBytes = null;      // {t, n}: the bytes written at the last poll
    this.lastDecided = null;    // {complete, expired} at the last poll
    const opts = (title, series, y = {}) => ({
      title, width: 560, height: 220,
      scales: { x: { time: true }, y },
      series: [{}, ...series],
      axes: [{}, { size: 60 }],
    });
    this.rateChart = new uPlot(opts('events/s', [{ label: 'events/s', stroke: '#1d6fa5' }]),
                               [this.t, this.rate], rateEl);
    this.latencyChart = new uPlot(opts('latency (µs)', [
      { label: 'p50 µs', stroke: '#2f8132' }, { label: 'p99 µs', stroke: '#b54708' }]),
    [this.t, this.p50, this.p99], latencyEl);
    this.completeChart = new uPlot(opts('completeness: complete of decided (%)', [
      { label: 'complete %', stroke: '#6941c6' }], { range: [0, 100] }), [this.t, this.complete],
    completenessEl);
    this.writeChart = new uPlot(opts('event files written (MB/s)', [
      { label: 'MB/s', stroke: '#b42318' }]), [this.t, this.write], writeEl);
  }

  // MB/s written since the last poll, over every builder; null when
  // nothing records or there is no earlier poll of this run.
  writeRate(live, now) {
    const n = bytesWritten(live);
    const prev = this.lastBytes;
    this.lastBytes = n === null ? null : { t: now, n };
    if (n === null || !prev || n < prev.n || now <= prev.t) return null;
    return (n - prev.n) / (now - prev.t) / 1e6;
  }

  // Completeness since the last poll: the events built complete over the
  // events decided (complete or expired) meanwhile; null when none was.
  completeness(s) {
    const prev = this.lastDecided;
    this.lastDecided = s ? { complete: s.events_complete, expired: s.events_expired } : null;
    if (!s || !prev || s.events_complete < prev.complete || s.events_expired < prev.expired)
      return null;
    const complete = s.events_complete - prev.complete, expired = s.events_expired - prev.expired;
    return complete + expired > 0 ? (100 * complete) / (complete + expired) : null;
  }

  add(st) {
    const now = Date.now() / 1000;
    const s = st.live && st.live.status;
    this.t.push(now);
    this.rate.push(s ? s.events_per_s : null);
    this.p50.push(s && st.live.latency_p50_ns ? st.live.latency_p50_ns / 1000 : null);
    this.p99.push(s && s.latency_p99_ns ? s.latency_p99_ns / 1000 : null);
    this.complete.push(this.completeness(s));
    this.write.push(this.writeRate(st.live, now));
    while (this.t.length && this.t[0] < now - KEEP_S) {
      for (const a of [this.t, this.rate, this.p50, this.p99, this.complete, this.write]) a.shift();
    }
    this.rateChart.setData([this.t, this.rate]);
    this.latencyChart.setData([this.t, this.p50, this.p99]);
    this.completeChart.setData([this.t, this.complete]);
    this.writeChart.setData([this.t, this.write]);
  }
}
