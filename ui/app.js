// SPDX-License-Identifier: Apache-2.0
// The page: state kept in the URL (so a link reproduces the view), the query bar with label
// autocomplete, and the wiring between the timeline, the flame graph, the top table and the
// sandwich view. Every change of state rewrites the URL (history.replaceState) and redraws
// what depends on it; only a change of what is queried goes back to the server.

import {get, setAuth, apiUrl, ApiError, download, hasAuth} from './api.js';
import {FlameData} from './flamedata.js';
import {FlameGraph, fmtValue, pct, esc, unitOfType} from './flame.js';
import {Timeline} from './timeline.js';
import {TopTable} from './table.js';
import {renderExemplars, EXEMPLARS_PER_STEP} from './exemplars.js';

const $ = (id) => document.getElementById(id);

// Every key here is a URL parameter; defaults are left out of the URL.
const DEFAULTS = {
  type: '', q: '', from: 'now-1h', to: 'now', sel: '', group: '', mode: 'single', bq: '',
  bsel: '', norm: '1', brush: 'new', view: 'flame', focus: '', search: '', regex: '0',
  orient: 'flame', color: 'name', minw: '1', fn: '', sort: '', filter: '', tenant: '',
  pid: '', span: '', // one stored profile (an exemplar's id) or one span instead of the window's
};
const state = {...DEFAULTS};
const ui = window.strobe = {state, idle: false, renders: 0, timings: {}, error: ''};

function readUrl() {
  const p = new URLSearchParams(location.search);
  for (const k of Object.keys(DEFAULTS)) state[k] = p.has(k) ? p.get(k) : DEFAULTS[k];
}
// The URL is rewritten a moment after the last change, not on each: history.replaceState costs
// milliseconds (and browsers throttle many calls), which would show in every zoom and keystroke.
let urlTimer = 0;
function flushUrl() {
  clearTimeout(urlTimer);
  urlTimer = 0;
  const p = new URLSearchParams();
  for (const k of Object.keys(DEFAULTS)) if (state[k] !== DEFAULTS[k]) p.set(k, state[k]);
  const s = p.toString();
  if (location.search !== (s ? '?' + s : '')) history.replaceState(null, '', s ? '?' + s : location.pathname);
}
function writeUrl() {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(flushUrl, 150);
}
window.addEventListener('pagehide', flushUrl);
ui.flushUrl = flushUrl;

const selector = (labels) => `${state.type}{${labels}}`;
const win = (s) => { // "a-b" (unix ms) -> {from, to}, or null
  const m = /^(\d+)-(\d+)$/.exec(s || '');
  return m ? {from: m[1], to: m[2]} : null;
};
const windowOf = (s) => win(s) || {from: state.from, to: state.to};

// ---- status and overlays ----------------------------------------------------------------------
function status(msg, isError) {
  const s = $('status');
  s.textContent = msg;
  s.className = isError ? 'error' : '';
  if (isError) ui.error = msg;
}
// mark (optional): {text, off}: the user's matchers, shown under the message with a caret at off
function overlay(msg, isError, mark) {
  const o = document.querySelector('#flame-wrap .overlay');
  o.hidden = !msg;
  o.textContent = '';
  const p = document.createElement('div');
  p.textContent = msg || '';
  o.append(p);
  if (mark) {
    const pre = document.createElement('pre');
    pre.className = 'mark';
    pre.textContent = `${mark.text}\n${' '.repeat(mark.off)}^`;
    o.append(pre);
  }
  o.className = 'overlay' + (isError ? ' error' : '');
}

// The server's selector errors give an offset into the whole selector it was sent, TYPE{...};
// the user typed only what is inside the braces. Say the offset in their text, mark it, and put
// the field's cursor there: {msg, mark, field} (mark null when the error has no offset).
function matcherError(msg) {
  const m = /^(query|base|new): selector: .*?offset (\d+)/.exec(msg);
  if (!m) return {msg, mark: null};
  const field = m[1] === 'base' && state.bq ? 'blabels' : 'labels';
  const text = field === 'blabels' ? state.bq : state.q;
  const off = +m[2] - (state.type.length + 1);
  if (off < 0 || off > text.length) return {msg, mark: null};
  const out = msg.replace(/^\w+: /, '').replace(`offset ${m[2]}`, `offset ${off} of the matchers`);
  return {msg: out, mark: {text, off}, field};
}

// ---- widgets ----------------------------------------------------------------------------------
const flame = new FlameGraph($('flame'), {
  tooltip: document.querySelector('#flame-wrap .tip'),
  onZoom: (i) => { state.focus = ui.data.path(i); writeUrl(); scheduleFlame(); },
});

// A zoom (a click in the graph or on the breadcrumb) only records the new focus and asks for one
// draw in the next animation frame: clicks faster than frames cost one draw, of the last state,
// and the draw runs at the start of a frame, when the browser has presented the one before. In
// Firefox a draw straight in the click handler could wait 8-25 ms on its first canvas call for
// the compositor to release the canvas still shown (docs/BENCHMARKS.md, "Web UI").
// ui.frame says when the last such draw was asked for (the first input it serves), started and
// ended; ui.flushFlame() draws a pending one now (the tests, and the benchmark's old measure).
// ui.drawInHandler = true draws in the handler instead, as before: only for bench/ui.mjs to
// compare the two on the same page.
let frameReq = 0;
ui.framePending = false;
ui.drawInHandler = false;
function scheduleFlame() {
  if (ui.drawInHandler) { renderFlame(); return; }
  if (frameReq) return;
  ui.framePending = true;
  const asked = performance.now();
  frameReq = requestAnimationFrame((ts) => drawFrame(asked, ts));
}
function drawFrame(asked, ts) {
  frameReq = 0;
  const start = performance.now();
  renderFlame();
  ui.framePending = false;
  ui.frame = {asked, vsync: ts, start, end: performance.now()};
}
ui.flushFlame = () => {
  if (!frameReq) return;
  cancelAnimationFrame(frameReq);
  drawFrame(performance.now(), performance.now());
};
// In the sandwich, a click on a caller or callee makes it the sandwich's function.
const swPick = (g) => (i) => {
  if (!i) return;
  state.fn = g.data.nodeName(i);
  table.picked = state.fn;
  table.render();
  writeUrl();
  renderSandwich();
};
const callers = new FlameGraph($('callers'), {tooltip: document.querySelector('#callers-wrap .tip'), flame: true});
const callees = new FlameGraph($('callees'), {tooltip: document.querySelector('#callees-wrap .tip'), flame: false});
callers.onZoom = swPick(callers);
callees.onZoom = swPick(callees);
const timeline = new Timeline($('timeline'), $('legend'), {
  onPick: (ms) => renderExemplars($('exemplars'), ui.range, ms, timeline.unit, (kind, id) => {
    state.pid = kind === 'profile' ? id : '';
    state.span = kind === 'span' ? id : '';
    state.focus = '';
    writeUrl();
    showWindows();
    loadProfile();
  }),
  onSelect: (a, b) => {
    if (state.mode === 'diff' && state.brush === 'base') state.bsel = `${a}-${b}`;
    else state.sel = `${a}-${b}`;
    state.focus = '';
    writeUrl();
    showWindows();
    loadProfile();
  },
});
const table = new TopTable($('top'), $('rowcount'), {
  onPick: (name) => {
    state.fn = name;
    // focus the function's heaviest outermost call in the graph
    const occ = ui.data.outermost(name);
    let best = -1;
    for (const i of occ) if (best < 0 || ui.data.total[i] > ui.data.total[best]) best = i;
    state.focus = best > 0 ? ui.data.path(best) : '';
    writeUrl();
    renderFlame();
    if (state.view === 'sandwich') renderSandwich();
  },
  onSort: (key) => { state.sort = key; writeUrl(); },
});
ui.flame = flame;
ui.timeline = timeline;
ui.callers = callers;
ui.callees = callees;
ui.table = table;

// ---- loading ----------------------------------------------------------------------------------
let pending = 0;
function busy(delta) {
  pending += delta;
  ui.idle = pending === 0;
}

let typesError = null;
async function loadTypes() {
  const sel = $('type');
  let types = [];
  typesError = null;
  try {
    types = (await get('/api/v1/profile_types', {from: 'now-30d', to: 'now'})).data || [];
  } catch (e) {
    typesError = e;
    status(`profile types: ${e.message}`, true);
  }
  if (state.type && !types.includes(state.type)) types.unshift(state.type);
  sel.textContent = '';
  for (const t of types) sel.append(new Option(t, t));
  if (!state.type && types.length)
    state.type = types.find((t) => /^process_cpu:cpu:/.test(t)) || types.find((t) => /cpu/.test(t)) || types[0];
  sel.value = state.type;
  return types.length > 0;
}

async function loadGroups() {
  try {
    const r = await get('/api/v1/labels', {query: selector(''), from: state.from, to: state.to});
    const g = $('group');
    const keep = state.group;
    g.textContent = '';
    g.append(new Option('(none)', ''));
    for (const n of r.data || []) g.append(new Option(n, n));
    if (keep && !(r.data || []).includes(keep)) g.append(new Option(keep, keep));
    g.value = keep;
  } catch (_) { /* the timeline shows the error */ }
}

// Never a step shorter than the agents' push interval (10 s by default): the data has one point
// per series per push, so a shorter step leaves most bars empty and the rest tall. The range API
// does not say the data's interval, so this is the default's.
const MIN_STEP_S = 10;
function stepFor(fromMs, toMs) {
  const s = Math.max(MIN_STEP_S, Math.ceil((toMs - fromMs) / 1000 / 240));
  const nice = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  return (nice.find((n) => n >= s) || s) + 's';
}

async function loadTimeline() {
  busy(1);
  // the previous query's chart, legend and title go at once: left up while the new query runs,
  // they read as its answer
  $('tl-title').textContent = 'Loading…';
  $('timeline-box').classList.add('loading');
  ui.range = ui.rangeBase = null;
  timeline.setData(null, null, null, 'Loading…');
  try {
    // the step needs the window in ms: the server resolves relative times, ask it once with a
    // coarse step, then again with a step that gives ~240 bars
    // comparing two selectors: both series, over the same steps, as two lines (not stacked)
    const two = state.mode === 'diff' && state.bq !== '' && state.bq !== state.q;
    const q = {query: selector(state.q), from: state.from, to: state.to, group_by: two ? undefined : state.group || undefined};
    const probe = await get('/api/v1/range', {...q, step: '1d'}, 'range');
    const steps = {from: probe.from_ms, to: probe.to_ms, step: stepFor(probe.from_ms, probe.to_ms)};
    const [r, rb] = await Promise.all([get('/api/v1/range', {...q, ...steps, exemplars: two ? undefined : EXEMPLARS_PER_STEP}, 'range'),
      two ? get('/api/v1/range', {...q, query: selector(state.bq), ...steps}, 'range-base') : null]);
    timeline.unit = unitOfType(r.type || state.type); // known before the profile's answer
    timeline.setData(r, rb, {base: state.bq, new: state.q});
    ui.range = r;
    ui.rangeBase = rb;
    $('tl-title').textContent = two ? `baseline ${selector(state.bq)} and comparison ${selector(state.q)} over ${state.from} → ${state.to}`
      : `${selector(state.q)} over ${state.from} → ${state.to}`;
    showWindows();
    $('timeline-box').classList.remove('loading');
  } catch (e) {
    if (e.name === 'AbortError') return; // a newer query's load owns the timeline now
    $('timeline-box').classList.remove('loading');
    $('tl-title').textContent = `${selector(state.q)}: no timeline`;
    timeline.setData(null, null, null, 'The range query failed (see above)');
    status(`timeline: ${e.message}`, true);
  } finally {
    busy(-1);
  }
}

function showWindows() {
  const w = [];
  const ns = win(state.sel), bs = win(state.bsel);
  if (state.mode === 'diff') {
    if (bs) w.push({from: +bs.from, to: +bs.to, color: 'rgba(60,120,255,0.22)', label: 'baseline'});
    if (ns) w.push({from: +ns.from, to: +ns.to, color: 'rgba(255,60,60,0.22)', label: 'comparison'});
  } else if (ns) {
    w.push({from: +ns.from, to: +ns.to, color: 'rgba(90,128,200,0.25)'});
  }
  timeline.setWindows(w);
  const fmt = (s) => { const x = win(s); return x ? `${new Date(+x.from).toISOString()} → ${new Date(+x.to).toISOString()}` : 'whole range'; };
  $('window').textContent = state.mode === 'diff' ? `baseline: ${fmt(state.bsel)}; comparison: ${fmt(state.sel)}` :
    ns ? `window: ${fmt(state.sel)}` : '';
  $('clearsel').hidden = !(ns || bs || state.pid || state.span);
  if (state.pid || state.span) $('window').textContent = state.pid ? `profile #${state.pid}` : `span ${state.span}`;
}

async function loadProfile() {
  busy(1);
  const t0 = performance.now();
  overlay('Loading…');
  status('');
  ui.error = '';
  ui.errorAt = null;
  $('labels').classList.remove('bad');
  $('blabels').classList.remove('bad');
  let path, params;
  const nw = windowOf(state.sel);
  if (state.mode === 'diff') {
    const bw = windowOf(state.bsel);
    path = '/api/v1/diff';
    params = {format: 'flat', base: selector(state.bq || state.q), base_from: bw.from, base_to: bw.to,
      new: selector(state.q), new_from: nw.from, new_to: nw.to, normalize: state.norm === '1' ? 'true' : 'false'};
  } else {
    path = '/api/v1/query';
    params = {format: 'flat', query: selector(state.q), from: nw.from, to: nw.to,
      profile_id: state.pid || undefined, span_id: state.span || undefined};
  }
  setDownloads(nw);
  try {
    const json = await get(path, params, 'profile');
    const t1 = performance.now();
    const data = new FlameData(json);
    const t2 = performance.now();
    ui.data = data;
    flame.setData(data);
    if (!data.total[0] && data.diff && data.btotal[0]) {
      overlay(`The comparison (${params.new}) has no samples in its window; the baseline has ` +
        `${fmtValue(data.btotal[0], data.unit)}. Frame widths are the comparison's: pick another window.`);
      status('empty comparison');
    } else if (!data.total[0]) {
      const w = win(state.sel) ? `${new Date(+nw.from).toISOString()} → ${new Date(+nw.to).toISOString()}` : `${nw.from} → ${nw.to}`;
      overlay(`No samples in this window (${w}) for ${params.query || params.new}. Pick a wider window or other labels.`);
      status('no samples in this window');
    } else {
      overlay('');
    }
    renderFlame();
    const t3 = performance.now();
    // the table after the graph is on screen: its rows cost a layout the graph need not wait for
    await new Promise((ok) => setTimeout(ok, 0));
    if (ui.data !== data) return;
    table.setData(data, state.sort || defaultSort(data), state.filter);
    if (state.view === 'sandwich') renderSandwich();
    ui.timings = {fetch: t1 - t0, parse: t2 - t1, draw: flame.stats.ms, total: t3 - t0, nodes: data.n};
    if (data.total[0] || (data.diff && data.btotal[0]))
      status(`${data.n.toLocaleString('en-US')} nodes, total ${fmtValue(data.total[0], data.unit)}` +
        (data.diff ? ` (baseline ${fmtValue(data.btotal[0], data.unit)}${state.norm === '1' ? ', normalised' : ''})` : '') +
        ` — ${Math.round(t3 - t0)} ms`);
    ui.renders++;
  } catch (e) {
    if (e.name === 'AbortError') return;
    ui.data = null;
    flame.data = null;
    const me = e instanceof ApiError && e.status === 400 ? matcherError(e.message) : {msg: e.message, mark: null};
    const msg = e instanceof ApiError && e.status === 401 ? authMessage(e)
      : e instanceof ApiError ? `The server answered: ${me.msg}` : String(e.message || e);
    overlay(msg, true, me.mark);
    status(msg, true);
    if (me.mark) {
      const f = $(me.field);
      f.classList.add('bad');
      f.setSelectionRange(me.mark.off, me.mark.off);
      ui.errorAt = {field: me.field, off: me.mark.off};
    }
    table.setData(null);
    ui.renders++;
  } finally {
    busy(-1);
  }
}

// Off-CPU and lock profiles sort the table by total: their self time all sits in the frame
// that waits (__schedule, futex_wait, runtime.park), which says nothing about who waited.
const WAIT = /^(off_cpu|offcpu|blocked|block|mutex|lock|contentions|delay)$/;
function defaultSort(data) {
  if (data.diff) return ''; // a diff ranks by change
  const [name, sample] = state.type.split(':');
  return WAIT.test(name) || WAIT.test(sample || '') ? 'total' : '';
}

function setDownloads(nw) {
  const q = {query: selector(state.q), from: nw.from, to: nw.to};
  $('dl-pprof').href = apiUrl('/api/v1/query', {...q, format: 'pprof'});
  $('dl-pprof').download = 'profile.pb.gz';
  $('dl-folded').href = apiUrl('/api/v1/query', {...q, format: 'folded'});
  $('dl-folded').download = 'profile.folded';
  if (state.mode === 'diff') {
    const bw = windowOf(state.bsel);
    $('dl-svg').href = apiUrl('/api/v1/diff', {format: 'svg', base: selector(state.bq || state.q), base_from: bw.from,
      base_to: bw.to, new: selector(state.q), new_from: nw.from, new_to: nw.to,
      normalize: state.norm === '1' ? 'true' : 'false'});
    $('dl-svg').download = 'diff.svg';
  } else {
    $('dl-svg').href = apiUrl('/api/v1/query', {...q, format: 'svg'});
    $('dl-svg').download = 'flamegraph.svg';
  }
  // PGO inputs (GET /api/v1/pgo): CPU profiles only; the server explains any refusal
  $('dl-pgo').hidden = state.mode === 'diff' || !/cpu/.test(state.type || '');
  for (const [f, name] of [['go', 'default.pgo'], ['autofdo', 'profile.afdo'], ['bolt', 'profile.fdata']]) {
    $(`dl-pgo-${f}`).href = apiUrl('/api/v1/pgo', {...q, format: f});
    $(`dl-pgo-${f}`).download = name;
  }
}

// ---- rendering --------------------------------------------------------------------------------
function searchRe() {
  if (!state.search) return null;
  try {
    return state.regex === '1' ? new RegExp(state.search) : new RegExp(state.search.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  } catch (e) {
    $('matched').textContent = `bad regex: ${e.message}`;
    return undefined;
  }
}

function renderFlame() {
  const d = ui.data;
  if (!d) return;
  if (frameReq) { // this draw is of the current state: a pending one has nothing left to do
    cancelAnimationFrame(frameReq);
    frameReq = 0;
    ui.framePending = false;
  }
  ui.flameDraws = (ui.flameDraws || 0) + 1;
  flame.flame = state.orient === 'flame';
  flame.colorMode = state.color;
  flame.minWidth = Math.max(0, parseFloat(state.minw) || 0);
  const f = d.findPath(state.focus);
  flame.setFocus(f < 0 ? 0 : f);
  const re = searchRe();
  const m = re === undefined ? null : flame.setSearch(re);
  if (re) $('matched').textContent = `${m.count} frames match, ${(100 * m.share).toFixed(2)}% of ${flame.focus ? 'the zoomed frame' : 'all'}`;
  else if (re === null) $('matched').textContent = '';
  ui.matched = m;
  flame.draw();
  if (flame.resized) { // keep the root in sight: at the bottom of a flame, the top of an icicle
    const w = $('flame-wrap');
    w.scrollTop = flame.flame ? w.scrollHeight : 0;
  }
  renderCrumbs();
  $('hidden-share').textContent = flame.stats.hiddenShare > 0
    ? `${(100 * flame.stats.hiddenShare).toFixed(2)}% of the view is in frames narrower than ${flame.minWidth}px (hidden); ${flame.stats.drawn.toLocaleString('en-US')} frames drawn`
    : `${flame.stats.drawn.toLocaleString('en-US')} frames drawn`;
}

function renderCrumbs() {
  const c = $('crumbs'), d = ui.data;
  c.textContent = '';
  const chain = [];
  for (let i = flame.focus; i >= 0; i = d.parent[i]) chain.push(i);
  for (const i of chain.reverse()) {
    const a = document.createElement('a');
    a.textContent = d.nodeName(i);
    a.onclick = () => { state.focus = d.path(i); writeUrl(); scheduleFlame(); };
    c.append(a);
  }
}

function renderSandwich() {
  const d = ui.data;
  const fn = state.fn;
  $('sw-fn').textContent = fn || '(pick a function in the table)';
  if (!d || !fn) { callers.data = callees.data = null; return; }
  const sw = d.sandwich(fn);
  for (const [g, fd] of [[callers, sw.callers], [callees, sw.callees]]) {
    g.setData(fd);
    g.colorMode = state.color;
    g.minWidth = flame.minWidth;
    g.draw();
  }
}

function setView(v) {
  state.view = v;
  document.querySelectorAll('.tabs button').forEach((b) => b.classList.toggle('on', b.dataset.view === v));
  $('flame-wrap').hidden = v !== 'flame';
  $('crumbs').hidden = v !== 'flame';
  $('sandwich').hidden = v !== 'sandwich';
  if (v === 'sandwich') renderSandwich();
}

for (const id of ['dl-pprof', 'dl-folded', 'dl-svg', 'dl-pgo-go', 'dl-pgo-autofdo', 'dl-pgo-bolt']) {
  $(id).addEventListener('click', (e) => {
    if (!hasAuth()) return; // a plain link does it
    e.preventDefault();
    download(e.currentTarget).catch((err) => status(`download: ${err.message}`, true));
  });
}

// ---- tenant and token -------------------------------------------------------------------------
// The tenant is part of the view (in the URL); its token is a secret: kept per tenant in this
// tab's sessionStorage (gone when the tab closes, never in a link, the history or a log).
const tokenKey = (t) => `strobe.token:${t || 'anonymous'}`;
function storedToken(t) {
  try { return sessionStorage.getItem(tokenKey(t)) || ''; } catch (_) { return ''; }
}
function applyAuth() {
  setAuth(state.tenant, storedToken(state.tenant));
  $('tenant').value = state.tenant;
  $('token').value = '';
  $('token').placeholder = storedToken(state.tenant) ? 'token set (type to replace)' : 'bearer token';
  $('authbtn').textContent = `tenant: ${state.tenant || 'anonymous'}${storedToken(state.tenant) ? ', token set' : ''}`;
}
// A 401 names the tenant and opens the token field, so the way out is on screen.
function authMessage(e) {
  $('authbar').hidden = false;
  $('authbtn').classList.add('needed');
  return `The server refused tenant "${state.tenant || 'anonymous'}" (401): ${e.message}. ` +
    'Enter the tenant and its bearer token in the bar above and press Use.';
}
$('authbtn').addEventListener('click', () => { $('authbar').hidden = !$('authbar').hidden; });
$('authbar').addEventListener('submit', (e) => {
  e.preventDefault();
  state.tenant = $('tenant').value.trim();
  const tok = $('token').value.trim();
  try {
    if (tok) sessionStorage.setItem(tokenKey(state.tenant), tok);
  } catch (_) { /* storage refused: the token lives until the page is left */ }
  applyAuth();
  if (tok) setAuth(state.tenant, tok);
  $('authbtn').classList.remove('needed');
  writeUrl();
  start(true);
});
$('authforget').addEventListener('click', () => {
  try { sessionStorage.removeItem(tokenKey(state.tenant)); } catch (_) { /* nothing kept */ }
  applyAuth();
  start(true);
});

// ---- query bar --------------------------------------------------------------------------------
function syncInputs() {
  $('labels').value = state.q;
  $('blabels').value = state.bq;
  $('from').value = state.from;
  $('to').value = state.to;
  $('mode').checked = state.mode === 'diff';
  $('difbar').hidden = state.mode !== 'diff';
  $('norm').checked = state.norm === '1';
  document.querySelectorAll('input[name=brush]').forEach((r) => { r.checked = r.value === state.brush; });
  $('search').value = state.search;
  $('regex').checked = state.regex === '1';
  $('color').value = state.color;
  $('orient').value = state.orient;
  $('minw').value = state.minw;
  $('filter').value = state.filter;
  document.querySelectorAll('.presets button').forEach((b) => b.classList.toggle('on', state.from === 'now-' + b.dataset.range && state.to === 'now'));
  setView(state.view);
}

function runQuery() {
  state.q = $('labels').value.trim();
  state.bq = $('blabels').value.trim();
  state.from = $('from').value.trim() || DEFAULTS.from;
  state.to = $('to').value.trim() || DEFAULTS.to;
  state.type = $('type').value;
  state.pid = state.span = ''; // an exemplar belongs to the query it came from
  $('exemplars').hidden = true;
  writeUrl();
  syncInputs();
  loadGroups();
  loadTimeline();
  loadProfile();
}

$('querybar').addEventListener('submit', (e) => { e.preventDefault(); hideSuggest(); runQuery(); });
$('type').addEventListener('change', () => { state.focus = ''; runQuery(); });
document.querySelectorAll('.presets button').forEach((b) => b.addEventListener('click', () => {
  $('from').value = 'now-' + b.dataset.range;
  $('to').value = 'now';
  state.sel = state.bsel = '';
  state.focus = '';
  runQuery();
}));
$('mode').addEventListener('change', () => {
  state.mode = $('mode').checked ? 'diff' : 'single';
  state.focus = '';
  writeUrl();
  syncInputs();
  showWindows();
  loadTimeline();
  loadProfile();
});
$('blabels').addEventListener('change', () => { state.bq = $('blabels').value.trim(); writeUrl(); loadTimeline(); loadProfile(); });
$('norm').addEventListener('change', () => { state.norm = $('norm').checked ? '1' : '0'; writeUrl(); loadProfile(); });
document.querySelectorAll('input[name=brush]').forEach((r) => r.addEventListener('change', () => { state.brush = r.value; writeUrl(); }));
$('group').addEventListener('change', () => { state.group = $('group').value; writeUrl(); loadTimeline(); });
$('clearsel').addEventListener('click', () => { state.sel = state.bsel = state.pid = state.span = ''; state.focus = ''; $('exemplars').hidden = true; writeUrl(); showWindows(); loadProfile(); });
$('search').addEventListener('input', () => { state.search = $('search').value; writeUrl(); renderFlame(); });
$('regex').addEventListener('change', () => { state.regex = $('regex').checked ? '1' : '0'; writeUrl(); renderFlame(); });
$('color').addEventListener('change', () => { state.color = $('color').value; writeUrl(); renderFlame(); if (state.view === 'sandwich') renderSandwich(); });
$('orient').addEventListener('change', () => {
  state.orient = $('orient').value;
  writeUrl();
  renderFlame();
  // the root moved to the other end of the graph: scroll it into view (a flame graph's box was
  // scrolled to its bottom, where the root was, and would show an icicle's deepest frames)
  const w = $('flame-wrap');
  w.scrollTop = state.orient === 'flame' ? w.scrollHeight : 0;
});
$('minw').addEventListener('change', () => { state.minw = $('minw').value; writeUrl(); renderFlame(); });
$('filter').addEventListener('input', () => { state.filter = $('filter').value; writeUrl(); table.setFilter(state.filter); });
document.querySelectorAll('.tabs button').forEach((b) => b.addEventListener('click', () => { setView(b.dataset.view); writeUrl(); }));

// Label autocomplete: after `{` or `,` suggest label names, inside `name="...` its values.
let sugg = [], suggOn = -1, suggCtx = null;
function hideSuggest() { $('suggest').hidden = true; sugg = []; }
async function suggest(input) {
  const v = input.value, pos = input.selectionStart, before = v.slice(0, pos);
  const mv = /([A-Za-z_][\w.]*)\s*(=~|!~|!=|=)\s*"([^"]*)$/.exec(before);
  const mn = /(?:^|,)\s*([A-Za-z_][\w.]*)?$/.exec(before);
  let items = [], ctx;
  try {
    if (mv) {
      const r = await get(`/api/v1/label/${encodeURIComponent(mv[1])}/values`,
        {query: selector(''), from: state.from, to: state.to}, 'suggest');
      items = (r.data || []).filter((x) => x.startsWith(mv[3]));
      ctx = {start: pos - mv[3].length, kind: 'value'};
    } else if (mn) {
      const typed = mn[1] || '';
      const r = await get('/api/v1/labels', {query: selector(''), from: state.from, to: state.to}, 'suggest');
      items = (r.data || []).filter((x) => x.startsWith(typed));
      ctx = {start: pos - typed.length, kind: 'name'};
    }
  } catch (e) {
    if (e.name === 'AbortError') return; // a newer keystroke's request replaced this one
    items = [];
  }
  sugg = items.slice(0, 50);
  suggCtx = {...ctx, input, end: pos};
  suggOn = sugg.length ? 0 : -1;
  const ul = $('suggest');
  ul.textContent = '';
  sugg.forEach((s, k) => {
    const li = document.createElement('li');
    li.textContent = s;
    if (k === suggOn) li.className = 'on';
    li.onmousedown = (e) => { e.preventDefault(); pick(k); };
    ul.append(li);
  });
  ul.hidden = !sugg.length || document.activeElement !== input;
}
function pick(k) {
  const {input, start, end, kind} = suggCtx, v = input.value;
  const ins = kind === 'name' ? sugg[k] + '="' : sugg[k] + '"';
  input.value = v.slice(0, start) + ins + v.slice(end).replace(/^[^",]*"?/, '');
  const p = start + ins.length;
  input.setSelectionRange(p, p);
  hideSuggest();
  input.focus();
  if (kind === 'name') suggest(input);
}
for (const id of ['labels', 'blabels']) {
  const input = $(id);
  // editing the field clears the error's outline: the next query's answer judges the new text
  input.addEventListener('input', () => { input.classList.remove('bad'); suggest(input); });
  input.addEventListener('focus', () => suggest(input));
  input.addEventListener('blur', () => setTimeout(hideSuggest, 150));
  input.addEventListener('keydown', (e) => {
    if ($('suggest').hidden || !sugg.length) return;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      suggOn = (suggOn + (e.key === 'ArrowDown' ? 1 : sugg.length - 1)) % sugg.length;
      [...$('suggest').children].forEach((li, k) => li.classList.toggle('on', k === suggOn));
    } else if ((e.key === 'Tab' || e.key === 'Enter') && suggOn >= 0) {
      e.preventDefault();
      pick(suggOn);
    } else if (e.key === 'Escape') {
      hideSuggest();
    }
  });
}

// ---- start ------------------------------------------------------------------------------------
async function start(again) {
  if (!again) readUrl();
  applyAuth();
  syncInputs();
  busy(1);
  const any = await loadTypes();
  busy(-1);
  if (!any) {
    if (typesError && typesError.status === 401) {
      const msg = authMessage(typesError);
      overlay(msg, true);
      status(msg, true);
    } else {
      overlay('No profiles stored yet. Push some (POST /api/v1/push, see docs/server.md) or scrape targets, then reload.');
      status('no profile types in the last 30 days');
    }
    ui.renders++;
    return;
  }
  writeUrl();
  loadGroups();
  loadTimeline();
  loadProfile();
}
ui.reload = () => { readUrl(); syncInputs(); runQuery(); };
ui.esc = esc;
ui.pct = pct;
start();
