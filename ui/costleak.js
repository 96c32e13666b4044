// SPDX-License-Identifier: Apache-2.0
// The cost and leaks page (ui/costleak.html): the leaderboard of /api/v1/cost grouped by a label,
// its top functions (by=function), and /api/v1/leaks' growing stacks, each drawn as a small SVG
// line of its in-use value over the window. The state is in the URL (q, group_by, from, to, lq),
// so a view can be shared. window.strobeCost exposes what was drawn, for tests/browser/ui.mjs.
import {get, setAuth} from './api.js';

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const money = (d) => (d >= 100 ? `$${d.toFixed(0)}` : d >= 1 ? `$${d.toFixed(2)}` : `$${d.toFixed(4)}`);
const bytes = (v) => (Math.abs(v) >= 1048576 ? `${(v / 1048576).toFixed(2)} MiB` : Math.abs(v) >= 1024 ? `${(v / 1024).toFixed(1)} KiB` : `${Math.round(v)}`);
const hook = window.strobeCost = {idle: false, groups: [], fns: [], leaks: []};

// The tenant as the main page keeps it (in the URL), its token from this tab's sessionStorage under
// the main page's key (ui/app.js).
const tenant = new URLSearchParams(location.search).get('tenant') || '';
let tok = '';
try { tok = sessionStorage.getItem(`strobe.token:${tenant || 'anonymous'}`) || ''; } catch (_) { /* none kept */ }
setAuth(tenant, tok);

const params = new URLSearchParams(location.search);
for (const [k, id] of [['q', 'cq'], ['group_by', 'cgb'], ['from', 'from'], ['to', 'to'], ['lq', 'lq']])
  if (params.get(k)) $(id).value = params.get(k);

function status(msg, isError) {
  $('status').textContent = msg || '';
  $('status').className = isError ? 'error' : '';
}

// A line of the points [[ms, value], ...] in a w x h box, from 0 to the largest value.
function sparkline(points, w = 320, h = 60) {
  if (!points.length) return '';
  const t0 = points[0][0], t1 = points[points.length - 1][0] || t0 + 1;
  const vmax = Math.max(...points.map((p) => p[1])) || 1;
  const d = points.map((p, i) => `${i ? 'L' : 'M'}${(((p[0] - t0) / Math.max(1, t1 - t0)) * (w - 4) + 2).toFixed(1)},${(h - 2 - (p[1] / vmax) * (h - 4)).toFixed(1)}`).join(' ');
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img"><path d="${d}" fill="none" stroke="#c0392b" stroke-width="1.5"/></svg>`;
}

async function loadCost() {
  const gb = $('cgb').value, common = {query: $('cq').value, from: $('from').value, to: $('to').value};
  const [g, f] = await Promise.all([get('/api/v1/cost', {...common, group_by: gb}), get('/api/v1/cost', {...common, by: 'function', limit: 20})]);
  hook.groups = g.groups.map((x) => ({name: x.group[gb] || '(none)', dollars_per_year: x.cost.dollars_per_year}));
  $('cost-groups').tBodies[0].innerHTML = g.groups.map((x) => `<tr><td>${esc(x.group[gb] || '(none)')}</td><td>${x.cost.cores.toFixed(3)}</td><td>${x.cost.core_hours.toPrecision(4)}</td><td>${money(x.cost.dollars)}</td><td>${money(x.cost.dollars_per_year)}</td></tr>`).join('');
  hook.fns = f.functions.map((x) => ({name: x.name, self: x.self.dollars_per_year, total: x.total.dollars_per_year}));
  $('cost-fns').tBodies[0].innerHTML = f.functions.map((x) => `<tr><td>${esc(x.name)}</td><td>${money(x.self.dollars_per_year)}</td><td>${money(x.total.dollars_per_year)}</td></tr>`).join('');
  $('cnote').textContent = `$${g.price_per_core_hour} per core-hour; a year is ${g.year_factor.toFixed(1)} of these windows`;
}

async function loadLeaks() {
  const l = await get('/api/v1/leaks', {query: $('lq').value, from: $('from').value, to: $('to').value});
  hook.leaks = l.leaks.map((x) => ({leaf: x.leaf, growth_per_hour: x.growth_per_hour, points: x.points.length}));
  $('lnote').textContent = `${l.leaks.length} growing of ${l.stacks_tested} stacks, confidence ${l.confidence}`;
  $('leaks').innerHTML = l.leaks.length ? l.leaks.map((x) => `<div class="leak"><div><b>${esc(x.leaf)}</b> +${bytes(x.growth_per_hour)}/h
    <span class="note">[${bytes(x.lo_per_hour)}, ${x.hi_per_hour === null ? '∞' : bytes(x.hi_per_hour)}]</span></div>
    <div class="note">${x.stack.map(esc).join(' → ')}</div>${sparkline(x.points)}</div>`).join('') : '<p class="note">No stack grows significantly in this window.</p>';
}

async function run() {
  hook.idle = false;
  const u = new URLSearchParams({q: $('cq').value, group_by: $('cgb').value, from: $('from').value, to: $('to').value, lq: $('lq').value});
  if (tenant) u.set("tenant", tenant);
  history.replaceState(null, '', `${location.pathname}?${u}`);
  status('');
  const errs = [];
  await Promise.all([loadCost().catch((e) => errs.push(`cost: ${e.message}`)), loadLeaks().catch((e) => errs.push(`leaks: ${e.message}`))]);
  status(errs.join('; '), errs.length > 0);
  hook.idle = true;
}

$('costbar').addEventListener('submit', (e) => { e.preventDefault(); run(); });
run();
