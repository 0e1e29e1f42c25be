// The event rate and the latency over the last minutes, from polled /state.
import uPlot from 'uplot';

const KEEP_S = 300;

export class Plots {
  constructor(rateEl, latencyEl) {
    this.t = [];
    this.rate = [];
    this.p50 = [];
    this.p99 = [];
    const opts = (title, series) => ({
      title, width: 560, height: 220,
      scales: { x: { time: true } },
      series: [{}, ...series],
      axes: [{}, { size: 60 }],
    });
    this.rateChart = new uPlot(opts('events/s', [{ label: 'events/s', stroke: '#1d6fa5' }]),
                               [this.t, this.rate], rateEl);
    this.latencyChart = new uPlot(opts('latency (µs)', [
      { label: 'p50 µs', stroke: '#2f8132' }, { label: 'p99 µs', stroke: '#b54708' }]),
    [this.t, this.p50, this.p99], latencyEl);
  }

  add(st) {
    const now = Date.now() / 1000;
    const s = st.live && st.live.status;
    this.t.push(now);
    this.rate.push(s ? s.events_per_s : null);
    this.p50.push(s && st.live.latency_p50_ns ? st.live.latency_p50_ns / 1000 : null);
    this.p99.push(s && s.latency_p99_ns ? s.latency_p99_ns / 1000 : null);
    while (this.t.length && this.t[0] < now - KEEP_S) {
      for (const a of [this.t, this.rate, this.p50, this.p99]) a.shift();
    }
    this.rateChart.setData([this.t, this.rate]);
    this.latencyChart.setData([this.t, this.p50, this.p99]);
  }
}
