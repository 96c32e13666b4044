// SPDX-License-Identifier: Apache-2.0
// The flame graph on a canvas: draws only frames at least `minWidth` pixels wide (a narrower
// frame is skipped with its whole subtree, and the share of the view so hidden is reported), so
// the cost of a draw follows what is visible, not the size of the profile. Hover finds the frame
// under the pointer by binary search in the drawn row, without redrawing. Flame (root at the
// bottom) or icicle (root at the top); colours by name, by package, or in a diff by change (red
// grew, blue shrank); search matches drawn in magenta with their share of the view.

const ROW = 18;
const MAX_ROWS = 1600; // a canvas taller than ~30000 px is not drawn by browsers

function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0) / 4294967296;
}

// The package part of a frame name: Go "net/http.(*conn).serve" -> "net/http", C++ and Rust
// "std::vector<int>::push" -> "std", Java "java.util.HashMap.get" -> "java.util", a library
// frame "[libc.so.6+0x1234]" -> "libc.so.6"; otherwise the name itself.
export function packageOf(name) {
  let m = /^\[([^+\]]+)/.exec(name);
  if (m) return m[1];
  const slash = name.lastIndexOf('/', name.indexOf('(') >= 0 ? name.indexOf('(') : name.length);
  const rest = name.slice(slash + 1);
  if (name.includes('::')) return name.slice(0, name.indexOf('::'));
  const dot = rest.indexOf('.');
  if (dot > 0) {
    // Java-like: keep the lower-case leading components
    m = /^((?:[a-z_][\w]*\.)+)[A-Z]/.exec(rest);
    if (m && slash < 0) return m[1].slice(0, -1);
    return name.slice(0, slash + 1 + dot);
  }
  return name;
}

function warm(v1, v2) { // flamegraph.pl's "hot" palette
  return `rgb(${205 + Math.round(50 * v2)},${Math.round(230 * v1)},${Math.round(55 * v2)})`;
}
function cool(v1, v2) { // a second palette, for package colouring to read differently
  return `rgb(${Math.round(80 + 60 * v2)},${Math.round(150 + 80 * v1)},${Math.round(190 + 50 * v2)})`;
}

// A change smaller than the table's display precision (0.05 % of the baseline: "+0.0%") is
// shown as no change: neutral colour, no sign. Normalising the baseline leaves such crumbs on
// frames that did not change, and a red "+1 ns (+0.0%)" on them reads as a regression.
export function unchanged(now, base) {
  const d = Math.abs(now - base);
  return d === 0 || (base > 0 && d < 0.0005 * base);
}

// noise: the server judged the change not significant (/api/v1/diff's noise flags): a pale tint
// keeps its direction readable without the weight of a real change.
export function diffColor(now, base, noise) {
  if (unchanged(now, base)) return 'rgb(235,235,235)';
  if (noise) return now > base ? 'rgb(246,226,226)' : 'rgb(226,226,246)';
  const r = (now - base) / Math.max(Math.abs(now), Math.abs(base));
  const c = Math.round(225 * (1 - Math.min(1, Math.abs(r) * 1.5)));
  return r > 0 ? `rgb(255,${c},${c})` : `rgb(${c},${c},255)`;
}

const NS = [[1e9, ' s'], [1e6, ' ms'], [1e3, ' µs']];
const BYTES = [[2 ** 40, ' TiB'], [2 ** 30, ' GiB'], [2 ** 20, ' MiB'], [2 ** 10, ' KiB']];
const COUNT = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
// v in the largest unit whose shown number is at least 1 once rounded as shown: 999,999,999 ns
// is "1.00 s", not "1000.00 ms" (picking the unit before rounding gave that).
function scaled(v, scales, fmt) {
  for (const [s, u] of scales) {
    const t = fmt(v / s);
    if (Math.abs(parseFloat(t)) >= 1) return t + u;
  }
  return null;
}
const fixed2 = (x) => x.toFixed(2);
// three significant digits: 1.00, 12.5, 250
const sig3 = (x) => { const a = Math.abs(x); return x.toFixed(a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2); };

// Values in the table and tooltips: two decimals in a human unit, counts exact.
export function fmtValue(v, unit) {
  if (unit === 'nanoseconds') return scaled(v, NS, fixed2) || v + ' ns';
  if (unit === 'bytes') return scaled(v, BYTES, fixed2) || v + ' B';
  return Math.round(v).toLocaleString('en-US') + (unit && unit !== 'count' ? ' ' + unit : '');
}

// Short values for axes: three significant digits in a human unit, counts with k/M/G
// ("1.00 s", "512 KiB", "3.00M"), never "1000.00 ms" or "3,000,000,000".
export function fmtShort(v, unit) {
  if (v === 0) return '0';
  if (unit === 'nanoseconds') return scaled(v, NS, sig3) || sig3(v) + ' ns';
  if (unit === 'bytes') return scaled(v, BYTES, sig3) || sig3(v) + ' B';
  const n = scaled(v, COUNT, sig3) || (Number.isInteger(v) ? String(v) : sig3(v));
  return n + (unit && unit !== 'count' ? ' ' + unit : '');
}

// The unit of a profile type "name:sample_type:sample_unit:period_type:period_unit".
export function unitOfType(type) { return (type || '').split(':')[2] || ''; }

export function pct(v, of) { return of ? (100 * v / of).toFixed(2) + '%' : '–'; }

export class FlameGraph {
  constructor(canvas, opts = {}) {
    this.canvas = canvas;
    this.tip = opts.tooltip || null;
    this.onZoom = opts.onZoom || (() => {});
    this.flame = opts.flame !== undefined ? opts.flame : true;
    this.colorMode = opts.colorMode || 'name';
    this.minWidth = opts.minWidth !== undefined ? opts.minWidth : 1;
    this.data = null;
    this.focus = 0;
    this.match = null; // Uint8Array: 1 where the frame's name matches the search
    this.rows = [];    // per depth: drawn node ids, left to right
    this.stats = {drawn: 0, hiddenShare: 0, ms: 0};
    // The canvas sits in a box as tall as the rows in view, and is allocated with spare rows
    // (flame: the spare ones above, out of the box; icicle: below): a zoom that reaches deeper
    // shows more of it instead of resizing it. Resizing reallocates and clears the canvas, and
    // the first draw after one cost 10-40 ms in chromium and Firefox, against 2-5 ms without.
    this.clip = document.createElement('div');
    this.clip.className = 'flame-clip';
    canvas.replaceWith(this.clip);
    this.clip.append(canvas);
    this.allocRows = 0;
    canvas.addEventListener('mousemove', (e) => this.hover(e));
    canvas.addEventListener('mouseleave', () => this.hideTip());
    canvas.addEventListener('click', (e) => {
      const i = this.nodeAt(e);
      if (i >= 0) this.onZoom(i);
    });
    // the width comes from the observer, so a draw never forces a layout of the page to read it
    this.width = 0;
    this.ro = new ResizeObserver((es) => {
      const w = Math.floor(es[es.length - 1].contentRect.width);
      if (w === this.width) return;
      this.width = w;
      if (this.data) this.draw();
    });
    this.ro.observe(this.clip);
  }

  setData(data) {
    this.data = data;
    this.visRows = 0;
    this.allocRows = 0;
    this.rowsKey = null;
    this.focus = 0;
    this.match = null;
    this.matchKey = null;
    this.colors = new Array(data.names.length);
    this.colorsFor = this.colorMode;
  }

  setFocus(i) { this.focus = i >= 0 && this.data && i < this.data.n ? i : 0; }

  // Marks frames whose name matches re; returns {count, share} where share is the part of the
  // focused frame's total under a match (a match inside a match is not counted twice).
  setSearch(re) {
    const d = this.data;
    if (!d || !re) { this.match = null; this.matchKey = null; return null; }
    // a zoom or redraw with the same search reuses the marks: only the share depends on the zoom
    if (this.match && this.matchKey === re.toString()) return {count: this.matchCount, share: this.matchedShare()};
    const nameMatch = new Uint8Array(d.names.length);
    for (let k = 0; k < d.names.length; k++) nameMatch[k] = re.test(d.names[k]) ? 1 : 0;
    this.match = new Uint8Array(d.n);
    let count = 0;
    for (let i = 1; i < d.n; i++) if ((this.match[i] = nameMatch[d.name[i]])) count++;
    this.matchKey = re.toString();
    this.matchCount = count;
    return {count, share: this.matchedShare()};
  }

  matchedShare() {
    const d = this.data, f = this.focus;
    if (!this.match || !d.total[f]) return 0;
    if (this.match[f]) return 1;
    let v = 0;
    for (let i = f + 1; i < d.end[f];) {
      if (this.match[i]) { v += d.total[i]; i = d.end[i]; } else i++;
    }
    return v / d.total[f];
  }

  color(i) {
    const d = this.data;
    if (this.match && this.match[i]) return 'rgb(230,0,230)';
    if (d.diff) return diffColor(d.total[i], d.btotal[i], d.noise && d.noise[i]);
    const k = d.name[i];
    let c = this.colors[k];
    if (!c) {
      const name = d.names[k];
      if (this.colorMode === 'package') {
        const p = packageOf(name);
        c = cool(hash(p), hash(p + '#'));
      } else {
        c = warm(hash(name), hash(name + '#'));
      }
      this.colors[k] = c;
    }
    return c;
  }

  // rows of the canvas (allocated), of which the last draw shows visRows
  nrows() { return this.allocRows || Math.min(this.data.maxDepth + 1, MAX_ROWS); }

  draw() {
    const t0 = performance.now();
    const d = this.data, cv = this.canvas;
    if (!d) return;
    const dpr = window.devicePixelRatio || 1;
    const W = this.width || (this.width = this.clip.clientWidth) || 800;
    // The view is as tall as the deepest frame drawn when unzoomed (so a flame's root sits at
    // the bottom of what is visible, not under a blank canvas of depths too narrow to draw),
    // taller only when a zoom reaches deeper, and then kept that tall until new data, another
    // width or min px (so that zooming in and out does not move the page under the pointer).
    const f = this.focus, scale = d.total[f] ? W / d.total[f] : 0;
    const key = `${W}|${this.minWidth}`;
    if (this.rowsKey !== key) {
      this.rowsKey = key;
      this.baseRows = this.deepest(0, d.total[0] ? W / d.total[0] : 0) + 1;
      this.visRows = 0;
      this.allocRows = 0;
    }
    const need = f ? this.deepest(f, scale) + 1 : this.baseRows;
    const rows = this.visRows = Math.min(Math.max(this.visRows, this.baseRows, need), MAX_ROWS);
    // the canvas: every row the data can have when that is at most twice what is in view
    // (then no zoom ever resizes it), else twice what is in view, doubling when outgrown
    if (rows > this.allocRows)
      this.allocRows = Math.min(MAX_ROWS, d.maxDepth + 1, Math.max(2 * rows, 2 * this.allocRows));
    const A = this.allocRows * ROW, H = rows * ROW;
    if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(A * dpr)) {
      cv.width = Math.round(W * dpr);
      cv.height = Math.round(A * dpr);
      cv.style.width = W + 'px';
      cv.style.height = A + 'px';
    }
    this.resized = this.H !== H;
    if (this.resized) this.clip.style.height = H + 'px';
    const top = this.flame ? H - A : 0; // flame: the spare rows are above the box, out of view
    if (this.top !== top) cv.style.top = (this.top = top) + 'px';
    if (this.colorsFor !== this.colorMode) { // colours are cached per name, per mode
      this.colors = new Array(d.names.length);
      this.colorsFor = this.colorMode;
    }
    const ctx = cv.getContext('2d', {alpha: false});
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, W, A);
    ctx.font = '12px ui-monospace, "DejaVu Sans Mono", monospace';
    ctx.textBaseline = 'middle';
    if (!this.charW) this.charW = ctx.measureText('MMMMMMMMMM').width / 10;
    // the per-row lists of drawn frames are emptied and reused, not reallocated: a draw that
    // allocates nothing but its labels leaves the collector little to do between frames
    while (this.rows.length < rows) this.rows.push([]);
    for (const r of this.rows) r.length = 0;
    this.W = W;
    this.H = H;
    const x0 = d.x[f];
    this.x0 = x0;
    this.scale = scale;
    let drawn = 0, hidden = 0;
    // the focused frame's ancestors span the width
    const anc = [];
    for (let a = f; a >= 0; a = d.parent[a]) anc.push(a);
    for (const a of anc.reverse()) {
      if (d.depth[a] < rows) { this.rect(ctx, a, 0, W); drawn++; }
    }
    for (let i = f + 1; i < d.end[f];) {
      const w = d.total[i] * scale;
      if (w < this.minWidth || d.depth[i] >= rows) {
        hidden += d.total[i];
        i = d.end[i];
        continue;
      }
      this.rect(ctx, i, (d.x[i] - x0) * scale, w);
      drawn++;
      i++;
    }
    this.stats = {drawn, hiddenShare: d.total[f] ? hidden / d.total[f] : 0, ms: performance.now() - t0};
  }

  deepest(f, scale) {
    const d = this.data;
    let deepest = d.depth[f];
    for (let i = f + 1; i < d.end[f];) {
      if (d.total[i] * scale < this.minWidth) { i = d.end[i]; continue; }
      if (d.depth[i] > deepest) deepest = d.depth[i];
      i++;
    }
    return deepest;
  }

  y(depth) { return this.flame ? (this.nrows() - 1 - depth) * ROW : depth * ROW; }

  rect(ctx, i, x, w) {
    const d = this.data, dep = d.depth[i], y = this.y(dep);
    this.rows[dep].push(i);
    ctx.fillStyle = this.color(i);
    ctx.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
    if (w > 3 * this.charW + 6) {
      const name = d.nodeName(i), fit = Math.floor((w - 6) / this.charW);
      ctx.fillStyle = '#000';
      ctx.fillText(name.length <= fit ? name : name.slice(0, fit - 2) + '..', x + 3, y + ROW / 2);
    }
  }

  // Pixel box of a drawn node (CSS pixels, relative to the canvas).
  box(i) {
    const d = this.data;
    const onPath = i <= this.focus && this.focus < d.end[i];
    const x = onPath ? 0 : (d.x[i] - this.x0) * this.scale;
    const w = onPath ? this.W : d.total[i] * this.scale;
    return {x, y: this.y(d.depth[i]), w, h: ROW - 1};
  }

  nodeAt(e) {
    if (!this.data) return -1;
    const r = this.canvas.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const rowFromTop = Math.floor(py / ROW);
    const depth = this.flame ? this.nrows() - 1 - rowFromTop : rowFromTop;
    const row = this.rows[depth];
    if (!row || !row.length) return -1;
    let lo = 0, hi = row.length - 1;
    while (lo <= hi) { // the last drawn node starting at or left of px
      const mid = (lo + hi) >> 1, b = this.box(row[mid]);
      if (b.x <= px) lo = mid + 1; else hi = mid - 1;
    }
    if (hi < 0) return -1;
    const b = this.box(row[hi]);
    return px < b.x + b.w ? row[hi] : -1;
  }

  hover(e) {
    const t0 = performance.now();
    const i = this.nodeAt(e);
    if (i < 0 || !this.tip) { this.hideTip(); return; }
    const d = this.data, u = d.unit, root = d.total[0], foc = d.total[this.focus];
    let html = `<b>${esc(d.nodeName(i))}</b><br>total ${fmtValue(d.total[i], u)} (${pct(d.total[i], root)}` +
      (this.focus ? `, ${pct(d.total[i], foc)} of zoom` : '') + `)<br>self ${fmtValue(d.self[i], u)} (${pct(d.self[i], root)})`;
    if (d.diff) {
      const delta = d.total[i] - d.btotal[i];
      html += `<br>base ${fmtValue(d.btotal[i], u)} → new ${fmtValue(d.total[i], u)}` +
        (unchanged(d.total[i], d.btotal[i]) ? '<br>unchanged'
          : `<br>change ${delta >= 0 ? '+' : ''}${fmtValue(delta, u)} (${d.btotal[i] ? (delta >= 0 ? '+' : '') + (100 * delta / d.btotal[i]).toFixed(1) + '%' : 'new'})`)
      if (d.noise && i && !unchanged(d.total[i], d.btotal[i]))
        html += `<br>${d.noise[i] ? 'noise' : 'significant'} at ${+(100 * d.confidence).toFixed(2)}% confidence`;
    }
    this.tip.innerHTML = html;
    this.tip.hidden = false;
    // fixed to the viewport: the graph's scroll box would clip it on a short graph
    const tw = this.tip.offsetWidth, th = this.tip.offsetHeight;
    const tx = Math.min(e.clientX + 12, window.innerWidth - tw - 4);
    const ty = e.clientY + 14 + th > window.innerHeight ? e.clientY - th - 8 : e.clientY + 14;
    this.tip.style.left = Math.max(0, tx) + 'px';
    this.tip.style.top = Math.max(0, ty) + 'px';
    this.hoverNode = i;
    this.hoverMs = performance.now() - t0;
  }

  hideTip() { if (this.tip) this.tip.hidden = true; this.hoverNode = -1; }

  // For tests and the benchmark: what the last draw put on the canvas.
  drawnNodes() {
    const d = this.data, out = [];
    if (!d) return out;
    for (const row of this.rows)
      for (const i of row) {
        const b = this.box(i);
        out.push({id: i, name: d.nodeName(i), depth: d.depth[i], self: d.self[i], total: d.total[i],
          base: d.diff ? d.btotal[i] : undefined, x: b.x, y: b.y, w: b.w, h: b.h,
          color: this.color(i)});
      }
    return out;
  }
}

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}
