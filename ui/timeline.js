// SPDX-License-Identifier: Apache-2.0
// The timeline: the selected series' total per step (from /api/v1/range), stacked by a label's
// values, on a canvas; dragging across it selects a window (the flame graph then shows that
// window), and in comparison mode the two windows are drawn in their own colours. Comparing two
// selectors, the baseline's and the comparison's totals are drawn as two step lines (blue and
// red) over the same axis instead of the bars. Drawn by hand:
// a stacked area chart and a brush are a few dozen lines, smaller than any charting library.
// Stacked by a label with many values (a whole host by service: hundreds), only the TOP_N
// largest are drawn each in its own colour and the rest as one grey "other": more colours than
// that cannot be told apart, and a legend of hundreds of entries is no legend.

import {fmtValue, fmtShort} from './flame.js';

const PAD_L = 64, PAD_B = 20, PAD_T = 6;
const LINES = {base: '#2b6fd6', new: '#d62b2b'}; // baseline blue, comparison red, as the diff
// Tableau 10 with its warm grey swapped for a dark one: the light grey is "other"'s
export const TOP_N = 10;
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#4d4d4d'];
const OTHER = '#c9c9c9';

// The series to draw, largest total first: all of them when they are at most TOP_N, else the
// TOP_N largest and "other", the sum of the rest per step. [{name, color, total, points, other}]
export function topSeries(series) {
  const named = series.map((s) => {
    const g = Object.values(s.group || {})[0];
    return {name: g === undefined || g === '' ? '(none)' : g, points: s.points,
      total: s.points.reduce((a, p) => a + p[1], 0)};
  });
  named.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));
  const top = named.length > TOP_N ? named.slice(0, TOP_N) : named;
  top.forEach((s, k) => { s.color = PALETTE[k % PALETTE.length]; });
  if (named.length > TOP_N) {
    const rest = named.slice(TOP_N);
    const points = rest[0].points.map((p) => [p[0], 0]);
    for (const s of rest) s.points.forEach((p, k) => { if (points[k]) points[k][1] += p[1]; });
    top.push({name: `other (${rest.length} more)`, color: OTHER, other: true, points,
      total: rest.reduce((a, s) => a + s.total, 0)});
  }
  return top;
}

export class Timeline {
  constructor(canvas, legend, opts = {}) {
    this.canvas = canvas;
    this.legend = legend;
    this.onSelect = opts.onSelect || (() => {});
    this.onPick = opts.onPick || (() => {}); // a click on a step: its start in ms (exemplars)
    this.data = null;
    this.base = null;  // comparing two selectors: the baseline's /api/v1/range answer
    this.labels = {};  // {base, new}: the two selectors, for the legend
    this.lines = [];   // what the last draw drew as lines: [{kind, label, color, sum, peakX}]
    this.windows = []; // [{from, to, color, label}] in ms
    this.shown = [];   // the stacked series drawn (topSeries)
    this.yLabels = []; // the y axis's labels, bottom up, as drawn
    this.message = ''; // drawn in place of the chart: "Loading…", "No samples in this range"
    this.drag = null;
    canvas.addEventListener('mousedown', (e) => {
      if (!this.data) return;
      this.drag = {a: this.px(e), b: this.px(e)};
    });
    window.addEventListener('mousemove', (e) => {
      if (this.drag) { this.drag.b = this.px(e); this.draw(); } else if (e.target === canvas) this.hover(e);
    });
    window.addEventListener('mouseup', () => {
      if (!this.drag) return;
      const {a, b} = this.drag;
      this.drag = null;
      if (Math.abs(a - b) >= 3) this.onSelect(Math.round(this.t(Math.min(a, b))), Math.round(this.t(Math.max(a, b))));
      else if (this.data && this.data.series.length) { // a click: the step under it
        const pts = this.data.series[0].points, k = Math.floor((a - PAD_L) / ((this.W - PAD_L) / pts.length));
        if (k >= 0 && k < pts.length) this.onPick(pts[k][0]);
      }
      this.draw();
    });
    new ResizeObserver(() => this.draw()).observe(canvas.parentElement);
  }

  px(e) {
    const r = this.canvas.getBoundingClientRect();
    return Math.max(PAD_L, Math.min(r.width, e.clientX - r.left));
  }
  t(px) { // pixel -> unix ms
    const d = this.data;
    return d.from_ms + (px - PAD_L) / (this.W - PAD_L) * (d.to_ms - d.from_ms);
  }
  xOf(ms) {
    const d = this.data;
    return PAD_L + (ms - d.from_ms) / (d.to_ms - d.from_ms) * (this.W - PAD_L);
  }

  // d: the /api/v1/range answer to show; base (optional): the baseline selector's answer over the
  // same from, to and step, drawn with d as two lines; labels: {base, new} selector texts.
  // msg: drawn in the chart's place (no data: loading, or an empty range).
  setData(d, base, labels, msg) {
    this.data = d;
    this.base = base || null;
    this.labels = labels || {};
    this.shown = d && !this.base ? topSeries(d.series) : [];
    this.message = msg || (d && !d.series.some((s) => s.points.some((p) => p[1])) &&
      !(this.base && this.base.series.some((s) => s.points.some((p) => p[1]))) ? 'No samples in this range' : '');
    this.draw();
    this.renderLegend();
  }
  setWindows(w) { this.windows = w; this.draw(); }

  renderLegend() {
    const d = this.data;
    this.legend.textContent = '';
    if (d && this.base) {
      for (const k of ['base', 'new']) {
        const span = document.createElement('span');
        span.innerHTML = `<i style="background:${LINES[k]}"></i>`;
        span.append(`${k === 'base' ? 'baseline' : 'comparison'} {${this.labels[k] || ''}}`);
        this.legend.append(span);
      }
      return;
    }
    if (!d || this.shown.length < 2) return;
    const all = this.shown.reduce((a, s) => a + s.total, 0);
    for (const s of this.shown) {
      const span = document.createElement('span');
      span.innerHTML = `<i style="background:${s.color}"></i>`;
      span.append(s.name);
      span.title = `${s.name}: ${fmtValue(s.total, this.unit)} (${all ? (100 * s.total / all).toFixed(1) : 0}%)`;
      this.legend.append(span);
    }
  }

  draw() {
    const cv = this.canvas, dpr = window.devicePixelRatio || 1;
    const W = cv.parentElement.clientWidth || 800, H = cv.parentElement.clientHeight || 120;
    this.W = W;
    this.H = H;
    cv.width = Math.round(W * dpr);
    cv.height = Math.round(H * dpr);
    cv.style.width = W + 'px';
    cv.style.height = H + 'px';
    const ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const d = this.data;
    this.lines = [];
    this.yLabels = [];
    if (this.message) {
      ctx.fillStyle = '#777';
      ctx.font = '13px sans-serif';
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillText(this.message, PAD_L + (W - PAD_L) / 2, H / 2);
      ctx.textAlign = 'start';
    }
    if (!d || (!d.series.length && !(this.base && this.base.series.length))) return;
    let n = 0; // steps: every series of both answers has a point per step
    for (const r of [d, this.base]) if (r) for (const s of r.series) n = Math.max(n, s.points.length);
    const sumOf = (r) => {
      const v = new Float64Array(n);
      for (const s of r.series) s.points.forEach((p, k) => { if (k < n) v[k] += p[1]; });
      return v;
    };
    const sums = sumOf(d), bsums = this.base ? sumOf(this.base) : null;
    let highest = 1;
    for (let k = 0; k < n; k++) highest = Math.max(highest, sums[k], bsums ? bsums[k] : 0);
    // the y axis ends at a round tick above the highest step, with ticks a round step apart
    const ticks = yTicks(highest);
    const max = ticks[ticks.length - 1];
    const ph = H - PAD_B - PAD_T;
    const y = (v) => PAD_T + ph - v / max * ph;
    const stepW = (W - PAD_L) / n;
    const base = new Float64Array(n);
    ctx.strokeStyle = '#eee';
    ctx.beginPath();
    for (const v of ticks.slice(1)) { ctx.moveTo(PAD_L, Math.round(y(v)) + 0.5); ctx.lineTo(W, Math.round(y(v)) + 0.5); }
    ctx.stroke();
    if (bsums) {
      // two selectors: a step line each (a bucket is [t, t+step)), the baseline under the
      // comparison, each with a light fill so a lone spike still reads
      for (const [kind, v] of [['base', bsums], ['new', sums]]) {
        ctx.strokeStyle = LINES[kind];
        ctx.fillStyle = LINES[kind] + '30';
        ctx.lineWidth = 2;
        ctx.beginPath();
        ctx.moveTo(PAD_L, y(0));
        let peak = 0, sum = 0;
        for (let k = 0; k < n; k++) {
          ctx.lineTo(PAD_L + k * stepW, y(v[k]));
          ctx.lineTo(PAD_L + (k + 1) * stepW, y(v[k]));
          if (v[k] > v[peak]) peak = k;
          sum += v[k];
        }
        ctx.lineTo(W, y(0));
        ctx.fill();
        ctx.stroke();
        this.lines.push({kind, label: this.labels[kind] || '', color: LINES[kind], sum,
          peakX: PAD_L + (peak + 0.5) * stepW});
      }
      ctx.lineWidth = 1;
    }
    if (!bsums) this.shown.forEach((s) => {
      ctx.fillStyle = s.color;
      ctx.beginPath();
      // one bar per step: a step is a bucket [t, t+step), so bars say that, lines would not
      s.points.forEach((p, k) => {
        const top = y(base[k] + p[1]), bot = y(base[k]);
        if (p[1] > 0) ctx.rect(PAD_L + k * stepW, top, Math.max(stepW - (stepW > 4 ? 1 : 0), 1), bot - top);
        base[k] += p[1];
      });
      ctx.fill();
    });
    // axes
    ctx.fillStyle = '#555';
    ctx.font = '11px sans-serif';
    ctx.textBaseline = 'top';
    ctx.textBaseline = 'middle';
    for (const v of ticks) {
      const lbl = fmtShort(v, this.unit);
      this.yLabels.push(lbl);
      ctx.fillText(lbl, Math.max(2, PAD_L - 6 - ctx.measureText(lbl).width), Math.min(Math.max(y(v), PAD_T + 6), H - PAD_B - 6));
    }
    ctx.textBaseline = 'top';
    const xt = Math.max(2, Math.floor((W - PAD_L) / 140));
    for (let k = 0; k <= xt; k++) {
      const ms = d.from_ms + k / xt * (d.to_ms - d.from_ms);
      const lbl = fmtTime(ms, d.to_ms - d.from_ms);
      const x = Math.min(this.xOf(ms), W - ctx.measureText(lbl).width - 2);
      ctx.fillText(lbl, k ? x : PAD_L, H - PAD_B + 4);
    }
    ctx.strokeStyle = '#999';
    ctx.beginPath();
    ctx.moveTo(PAD_L, H - PAD_B + 0.5);
    ctx.lineTo(W, H - PAD_B + 0.5);
    ctx.stroke();
    for (const w of this.windows) this.band(ctx, this.xOf(w.from), this.xOf(w.to), w.color, w.label);
    if (this.drag) this.band(ctx, Math.min(this.drag.a, this.drag.b), Math.max(this.drag.a, this.drag.b), 'rgba(0,0,0,0.25)');
  }

  band(ctx, a, b, color, label) {
    ctx.fillStyle = color;
    ctx.fillRect(a, PAD_T, Math.max(b - a, 1), this.H - PAD_B - PAD_T);
    if (label) {
      ctx.fillStyle = '#000';
      ctx.fillText(label, a + 3, PAD_T + 2);
    }
  }

  hover(e) {
    const d = this.data;
    if (!d || !d.series.length) return;
    const px = this.px(e), n = d.series[0].points.length;
    const k = Math.floor((px - PAD_L) / ((this.W - PAD_L) / n));
    if (k < 0 || k >= n) return;
    const tot = (r) => r.series.reduce((a, s) => a + (s.points[k] ? s.points[k][1] : 0), 0);
    // stacked: the step's total, then its largest groups (as the legend, at most TOP_N + other)
    const parts = this.shown.length > 1 ? this.shown.filter((s) => s.points[k] && s.points[k][1])
      .sort((a, b) => b.points[k][1] - a.points[k][1]).map((s) => `\n${s.name}: ${fmtValue(s.points[k][1], this.unit)}`).join('') : '';
    this.canvas.title = `${new Date(d.series[0].points[k][0]).toISOString()}: ` + (this.base
      ? `baseline ${fmtValue(tot(this.base), this.unit)}, comparison ${fmtValue(tot(d), this.unit)}`
      : fmtValue(tot(d), this.unit) + parts);
  }
}

// Ticks for a y axis from 0 to at least top, about 3 of them a round step apart (1, 2 or 5 times
// a power of ten) and whole numbers (values are counts of samples, ns or bytes).
export function yTicks(top) {
  const raw = top / 3;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw));
  const t = [];
  for (let v = 0; ; v += step) { t.push(v); if (v >= top) break; }
  return t;
}

export function fmtTime(ms, span) {
  const d = new Date(ms), p = (x) => String(x).padStart(2, '0');
  const hm = `${p(d.getHours())}:${p(d.getMinutes())}`;
  if (span <= 10 * 60 * 1000) return `${hm}:${p(d.getSeconds())}`;
  if (span <= 36 * 3600 * 1000) return hm;
  return `${p(d.getMonth() + 1)}-${p(d.getDate())} ${hm}`;
}
