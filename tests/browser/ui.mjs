// SPDX-License-Identifier: Apache-2.0
// Drives the web UI in a headless browser (chromium through playwright-core, or firefox-esr
// through puppeteer-core over WebDriver BiDi: tests/browser/driver.mjs) against a server seeded
// by ui.sh: service api, version v1 at TB (main;work;hot 50, main;work 5, main;idle 30, gc 15:
// total 100) and v2 at TN (hot 150, work 5, idle 30, gc 15, main;new 20: total 220), a Go
// profile, and tenant "secure" (bearer token TOKEN) holding v1 again; off_cpu service waiter
// (__schedule self 90 of 100), service steady (main;a 1000000 at TB, 1000001 at TN; main;b 1000
// then 2000), service deep (one stack 60 frames deep), and tenant "fleet" with 200 services
// svc-000..svc-199 (svc-N: total (N+1)*10000, pushed at now-50m + N*15s). Each case compares what the
// page drew (window.strobe hooks: the canvas's frames and the table's rows) with the API's answer
// or these known numbers; prints ok / FAIL lines named ui/... (chromium) or ui-firefox/...
//   node ui.mjs URL chromium|firefox BROWSER TB_MS TN_MS SHOTDIR TOKEN
import path from 'node:path';
import {launch} from './driver.mjs';

const [url, kind, exe, tbMs, tnMs, shots, TOKEN] = process.argv.slice(2);
const TYPE = 'process_cpu:samples:count:samples:count';
const TB = +tbMs, TN = +tnMs, MIN = 60000;
const tag = kind === 'chromium' ? 'ui' : `ui-${kind}`;
let failed = 0;
function ok(name) { console.log(`ok ${tag}/${name}`); }
function fail(name, why) { console.log(`FAIL ${tag}/${name}: ${why}`); failed++; }
function check(name, cond, why) { if (cond) ok(name); else fail(name, why); }

const browser = await launch(kind, exe, process.env.PW_MODULES || path.resolve('node_modules'));
const errors = [];
async function open(query) {
  const page = await browser.newPage({viewport: {width: 1280, height: 800}});
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url + '/' + query);
  await idle(page);
  return page;
}
async function idle(page, minRenders = 1) {
  await page.waitForFunction((n) => window.strobe && window.strobe.idle && window.strobe.renders >= n, minRenders,
    {timeout: 15000});
}
// a zoom draws in the next animation frame (ui/app.js scheduleFlame): wait for it
const drawn = async (page) => {
  await page.waitForFunction(() => !window.strobe.framePending, null, {timeout: 15000});
  return page.evaluate(() => window.strobe.flame.drawnNodes());
};
const rows = (page) => page.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
const api = (page, p) => page.evaluate(async (u) => (await fetch(u)).json(), p);
const q = (s) => encodeURIComponent(s);
const base = `?type=${q(TYPE)}&q=${q('service_name="api"')}&from=now-1h&to=now`;

async function run(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(name, e.message.split('\n')[0]);
  }
}

let shared = null, sharedView = null;

await run('flame', async () => {
  const page = await open(base);
  const nodes = await drawn(page);
  // the API's own tree, children of the root
  const j = await api(page, `/api/v1/query?format=json&from=now-1h&to=now&query=${q(TYPE + '{service_name="api"}')}`);
  const want = j.root.children.map((c) => `${c.name}=${c.total}`).join(' ');
  const got = nodes.filter((n) => n.depth === 1).map((n) => `${n.name}=${n.total}`).join(' ');
  const root = nodes.find((n) => n.depth === 0);
  check('flame/top-frames', got === want && want === 'gc=30 main=290', `drawn ${got}, API ${want}`);
  check('flame/root', root && root.total === 320 && Math.abs(root.w - (await page.evaluate(() => window.strobe.flame.W))) < 1,
    `root ${JSON.stringify(root)}`);
  // widths proportional: main is 290/320 of the root
  const main = nodes.find((n) => n.name === 'main' && n.depth === 1);
  check('flame/widths', main && Math.abs(main.w / root.w - 290 / 320) < 0.01, `main ${main && main.w} of ${root.w}`);
  const t = await rows(page);
  // sorted by self: hot 200, idle 60, gc 30, new 20, work 10
  const top = t.slice(0, 5).map((r) => `${r[0]}:${r[1]}:${r[2]}:${r[3]}`).join(' ');
  check('table/self', top === 'hot:200:62.50%:200 idle:60:18.75%:60 gc:30:9.38%:30 new:20:6.25%:20 work:10:3.13%:210',
    `rows ${top}`);
  await page.click('#top th[data-key=total]');
  const t2 = await rows(page);
  check('table/sort-total', t2[0][0] === 'main' && t2[0][3] === '290' && t2[1][0] === 'work',
    `first rows ${JSON.stringify(t2.slice(0, 3))}`);
  await page.fill('#filter', 'or');
  const t3 = await rows(page);
  check('table/filter', t3.map((r) => r[0]).sort().join(',') === 'work', `filtered ${JSON.stringify(t3)}`);
  await page.screenshot({path: `${shots}/flame.png`});
  await page.close();
});

// exemplars: a click on the bar of TN's step lists that step's heaviest stored profiles (the
// range API's exemplars); the first opens the flame graph of that one profile: v2's 220, not
// the window's 320, and no v1 frame in it
await run('exemplars', async () => {
  const page = await open(base);
  const pos = await page.evaluate((t) => {
    const tl = window.strobe.timeline, d = tl.data, pts = d.series[0].points, n = pts.length;
    const k = pts.findIndex((p, i) => p[0] <= t && (i + 1 === n || pts[i + 1][0] > t));
    const padL = tl.xOf(d.from_ms), w = (tl.W - padL) / n;
    const r = tl.canvas.getBoundingClientRect();
    return {x: r.left + padL + (k + 0.5) * w, y: r.top + r.height / 2, k};
  }, TN);
  await page.mouse.click(pos.x, pos.y);
  await page.waitForFunction(() => document.querySelector('#exemplars button.exemplar'), null, {timeout: 5000});
  const ex = await page.$$eval('#exemplars button.exemplar', (bs) => bs.map((b) => [b.dataset.id, b.textContent]));
  const before = await page.evaluate(() => window.strobe.renders);
  await page.click('#exemplars button.exemplar');
  await idle(page, before + 1);
  const nodes = await drawn(page);
  const root = nodes.find((n) => n.depth === 0);
  const pid = await page.evaluate(() => window.strobe.state.pid);
  check('exemplars/list', ex.length === 1 && /^#\d+ /.test(ex[0][1]), `step ${pos.k}: ${JSON.stringify(ex)}`);
  check('exemplars/open', root && root.total === 220 && pid === ex[0][0] && nodes.some((n) => n.name === 'new'),
    `root total ${root && root.total} (want 220, the v2 profile alone), state.pid ${pid}`);
  await page.close();
});

await run('window', async () => {
  const page = await open(base);
  // drag on the timeline from 3 minutes before TN to 3 minutes after
  const box = await page.$eval('#timeline', (c) => { const r = c.getBoundingClientRect(); return {x: r.left, y: r.top, h: r.height}; });
  const xa = await page.evaluate((t) => window.strobe.timeline.xOf(t), TN - 3 * MIN);
  const xb = await page.evaluate((t) => window.strobe.timeline.xOf(t), TN + 3 * MIN);
  const before = await page.evaluate(() => window.strobe.renders);
  await page.mouse.move(box.x + xa, box.y + box.h / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + (xa + xb) / 2, box.y + box.h / 2);
  await page.mouse.move(box.x + xb, box.y + box.h / 2);
  await page.mouse.up();
  await idle(page, before + 1);
  const st = await page.evaluate(() => window.strobe.state.sel);
  const [a, b] = st.split('-').map(Number);
  const nodes = await drawn(page);
  const root = nodes.find((n) => n.depth === 0);
  check('window/select', a < TN && b > TN && b - a < 8 * MIN && a > TN - 5 * MIN, `sel ${st} around ${TN}`);
  check('window/flame', root && root.total === 220 && nodes.some((n) => n.name === 'new'),
    `root total ${root && root.total} (want 220, only v2)`);
  // search: "hot" is 150 of 220
  await page.fill('#search', 'hot');
  const m = await page.textContent('#matched');
  const hot = (await drawn(page)).find((n) => n.name === 'hot');
  check('search', /^1 frames match, 68\.18% of all$/.test(m) && hot.color === 'rgb(230,0,230)', `"${m}", hot ${hot && hot.color}`);
  await page.check('#regex');
  await page.fill('#search', '^(hot|idle)$');
  const m2 = await page.textContent('#matched');
  check('search/regex', /^2 frames match, 81\.82% of all$/.test(m2), `"${m2}" (want 180/220)`);
  // zoom: click "work"
  const work = (await drawn(page)).find((n) => n.name === 'work');
  const cb = await page.$eval('#flame', (c) => { const r = c.getBoundingClientRect(); return {x: r.left, y: r.top}; });
  await page.mouse.click(cb.x + work.x + work.w / 2, cb.y + work.y + work.h / 2);
  const z = await drawn(page);
  const zw = z.find((n) => n.name === 'work'), zh = z.find((n) => n.name === 'hot');
  const crumbs = await page.$$eval('#crumbs a', (as) => as.map((a) => a.textContent).join('>'));
  const focus = await page.evaluate(() => window.strobe.state.focus);
  check('zoom', focus === 'main;work' && crumbs === 'total>main>work' && Math.abs(zw.w - zh.w / (150 / 155)) < 1 &&
    !z.some((n) => n.name === 'idle'), `focus ${focus}, crumbs ${crumbs}, work ${zw && zw.w} hot ${zh && zh.w}`);
  const m3 = await page.textContent('#matched');
  check('zoom/matched-share', m3 === '2 frames match, 96.77% of the zoomed frame', `"${m3}" (150/155)`);
  await page.screenshot({path: `${shots}/zoom-search.png`});
  await page.evaluate(() => window.strobe.flushUrl());
  shared = page.url();
  sharedView = {nodes: z.map((n) => `${n.name}@${n.x.toFixed(1)}+${n.w.toFixed(1)}/${n.color}`).join(' '),
    search: await page.inputValue('#search')};
  // breadcrumb back to the root
  await page.click('#crumbs a:first-child');
  const back = await drawn(page);
  check('zoom/breadcrumb', back.some((n) => n.name === 'idle') && (await page.evaluate(() => window.strobe.state.focus)) === '',
    'idle not drawn again after clicking "total"');
  // a burst of clicks within one frame (main, then work, then hot, at their places in the root
  // view) records each and draws once, in the next frame: the view of the last click
  const burst = await page.evaluate(() => new Promise((ok) => {
    const s = window.strobe, f = s.flame, r = f.canvas.getBoundingClientRect(), before = s.flameDraws;
    for (const name of ['main', 'work', 'hot']) {
      const n = f.drawnNodes().find((m) => m.name === name);
      f.canvas.dispatchEvent(new MouseEvent('click', {clientX: r.left + n.x + n.w / 2, clientY: r.top + n.y + n.h / 2, bubbles: true}));
    }
    const sync = s.flameDraws - before;
    requestAnimationFrame(() => requestAnimationFrame(() => ok({sync, draws: s.flameDraws - before, focus: s.state.focus,
      crumbs: [...document.querySelectorAll('#crumbs a')].map((a) => a.textContent).join('>'),
      names: f.drawnNodes().map((n) => n.name)})));
  }));
  check('zoom/burst', burst.sync === 0 && burst.draws === 1 && burst.focus === 'main;work;hot' &&
    burst.crumbs === 'total>main>work>hot' && !burst.names.includes('idle'),
  `draws in the clicks' task ${burst.sync} (want 0), then ${burst.draws} (want 1), focus ${burst.focus}, crumbs ${burst.crumbs}`);
  await page.close();
});

await run('url', async () => {
  if (!shared) throw new Error('no URL from the window case');
  const page = await browser.newPage({viewport: {width: 1280, height: 800}});
  await page.goto(shared);
  await idle(page);
  const z = await drawn(page);
  const view = z.map((n) => `${n.name}@${n.x.toFixed(1)}+${n.w.toFixed(1)}/${n.color}`).join(' ');
  check('url/restores', view === sharedView.nodes && (await page.inputValue('#search')) === sharedView.search &&
    (await page.isChecked('#regex')), `restored view differs:\n  ${view}\n  ${sharedView.nodes}`);
  await page.close();
});

await run('sandwich', async () => {
  const page = await open(base);
  await page.click('#top tbody tr:first-child'); // hot
  await page.click('.tabs button[data-view=sandwich]');
  const c = await page.evaluate(() => window.strobe.callers.drawnNodes().map((n) => `${n.name}:${n.depth}:${n.total}`).join(' '));
  const e = await page.evaluate(() => window.strobe.callees.drawnNodes().map((n) => `${n.name}:${n.depth}:${n.total}`).join(' '));
  const focus = await page.evaluate(() => window.strobe.state.focus);
  check('sandwich', c === 'hot:0:200 work:1:200 main:2:200' && e === 'hot:0:200' && focus === 'main;work;hot',
    `callers ${c}; callees ${e}; focus ${focus}`);
  await page.screenshot({path: `${shots}/sandwich.png`});
  // a click on a caller makes it the sandwich's function: work's callers are main, callees hot
  const w = await page.evaluate(() => window.strobe.callers.drawnNodes().find((n) => n.name === 'work'));
  const cb = await page.$eval('#callers', (c) => { const r = c.getBoundingClientRect(); return {x: r.left, y: r.top}; });
  await page.mouse.click(cb.x + w.x + w.w / 2, cb.y + w.y + w.h / 2);
  const c2 = await page.evaluate(() => window.strobe.callers.drawnNodes().map((n) => `${n.name}:${n.total}`).join(' '));
  const e2 = await page.evaluate(() => window.strobe.callees.drawnNodes().map((n) => `${n.name}:${n.total}`).join(' '));
  check('sandwich/pick', c2 === 'work:210 main:210' && e2 === 'work:210 hot:200' &&
    (await page.textContent('#sw-fn')) === 'work', `callers ${c2}; callees ${e2}`);
  await page.close();
});

await run('diff', async () => {
  const w = (t) => `${t - 3 * MIN}-${t + 3 * MIN}`;
  const page = await open(`${base}&mode=diff&bsel=${w(TB)}&sel=${w(TN)}`);
  const nodes = await drawn(page);
  const hot = nodes.find((n) => n.name === 'hot'), idle_ = nodes.find((n) => n.name === 'idle');
  // normalised: base scaled by 220/100: hot 110 -> 150 (grew), idle 66 -> 30 (shrank)
  // red-dominant grew, blue-dominant shrank (pale or not: see diff/noise)
  const rgb = (n) => (n && /^rgb\((\d+),(\d+),(\d+)\)$/.exec(n.color) || []).slice(1).map(Number);
  const [hr, hg] = rgb(hot), [ir, , ib] = rgb(idle_);
  check('diff/colours', hot && hr > hg && hot.base === 110 && idle_ && ib > ir &&
    idle_.base === 66, `hot ${JSON.stringify(hot)}, idle ${JSON.stringify(idle_)}`);
  // 100 samples against 220: hot's +40 is inside the counting noise at 99 % (pale), "new"'s 0 -> 20
  // is not (strong red), as the API's noise flags say
  const nw = nodes.find((n) => n.name === 'new');
  check('diff/noise', hot && hot.color === 'rgb(246,226,226)' && idle_.color === 'rgb(226,226,246)' &&
    nw && /^rgb\(255,/.test(nw.color) && nw.color !== 'rgb(255,255,255)', `hot ${hot && hot.color}, idle ${idle_ && idle_.color}, new ${nw && nw.color}`);
  const t = await rows(page);
  check('diff/table', t[0][0] === 'hot' && t[0][1] === '110' && t[0][2] === '150' && t[0][3] === '+40 (+36.4%)' &&
    t[1][0] === 'idle' && t[1][3] === '-36 (-54.5%)', `rows ${JSON.stringify(t.slice(0, 3))}`);
  // the API's diff says the same
  const j = await api(page, `/api/v1/diff?format=flat&base=${q(TYPE + '{service_name="api"}')}&base_from=${TB - 3 * MIN}&base_to=${TB + 3 * MIN}` +
    `&new=${q(TYPE + '{service_name="api"}')}&new_from=${TN - 3 * MIN}&new_to=${TN + 3 * MIN}`);
  const hotIdx = j.names.indexOf('hot');
  let apiHot = null;
  for (let i = 0; i < j.nodes.length; i += j.stride) if (j.nodes[i] === hotIdx) apiHot = [j.nodes[i + 3], j.nodes[i + 5]];
  check('diff/api', apiHot && apiHot[0] === hot.total && apiHot[1] === hot.base, `API hot ${apiHot}, drawn ${hot.total}/${hot.base}`);
  await page.screenshot({path: `${shots}/diff.png`});
  const before = await page.evaluate(() => window.strobe.renders);
  await page.uncheck('#norm');
  await idle(page, before + 1);
  const t2 = await rows(page);
  // raw: main 85 -> 205 is now the largest change, then hot 50 -> 150
  check('diff/raw', t2[0][0] === 'main' && t2[0][3] === '+120 (+141.2%)' && t2[1][0] === 'hot' &&
    t2[1][3] === '+100 (+200.0%)', `rows ${JSON.stringify(t2.slice(0, 2))}`);
  await page.close();
  // two selectors over one window: version v1 against v2
  const p2 = await open(`?type=${q(TYPE)}&q=${q('version="v2"')}&bq=${q('version="v1"')}&mode=diff&norm=0`);
  const t3 = await rows(p2);
  check('diff/selectors', t3[1][0] === 'hot' && t3[1][1] === '50' && t3[1][2] === '150' && t3[0][0] === 'main' &&
    t3[0][1] === '85' && t3[0][2] === '205', `rows ${JSON.stringify(t3.slice(0, 2))}`);
  // the timeline shows both selectors' series: baseline v1 (100 at TB) in blue, comparison v2
  // (220 at TN) in red, each peaking at its own time; the canvas has those colours there
  const tl = await p2.evaluate(({tb, tn}) => {
    const t = window.strobe.timeline, c = t.canvas, dpr = window.devicePixelRatio || 1;
    const px = (x, y) => [...c.getContext('2d').getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data].slice(0, 3);
    const at = (l) => px(l.peakX, t.H - 21 - 3); // just above the axis, under the line's fill
    return {lines: t.lines.map((l) => ({...l, dx: l.peakX - t.xOf(l.kind === 'base' ? tb : tn), step: (t.W - 64) / 240, px: at(l)})),
      legend: [...document.querySelectorAll('#legend span')].map((x) => x.textContent).join(',')};
  }, {tb: TB, tn: TN});
  const [lb, ln] = tl.lines;
  const near = (l) => Math.abs(l.dx) <= 2 * l.step + 1;
  check('diff/timeline', tl.lines.length === 2 && lb.kind === 'base' && lb.sum === 100 && ln.sum === 220 && near(lb) && near(ln) &&
    lb.px[2] > lb.px[0] && ln.px[0] > ln.px[2] && tl.legend === 'baseline {version="v1"},comparison {version="v2"}',
    JSON.stringify(tl));
  await p2.screenshot({path: `${shots}/diff-selectors.png`});
  await p2.close();
});

await run('states', async () => {
  const page = await open(`?type=${q(TYPE)}&q=${q('service_name=~"(")')}`);
  const j = await api(page, `/api/v1/query?format=flat&query=${q(TYPE + '{service_name=~"("}')}`);
  const msg = await page.$eval('#flame-wrap .overlay', (o) => (o.querySelector('div') || o).textContent);
  // the API's offset counts from the start of TYPE{...}; the page's, from the start of what the
  // user typed inside the braces: there, 14 is the quote that opens the bad regex
  const apiOff = +(/offset (\d+)/.exec(j.error) || [])[1], off = apiOff - (TYPE.length + 1);
  const mark = await page.$eval('#flame-wrap .overlay', (o) => { const p = o.querySelector('pre.mark'); return p ? p.textContent : ''; });
  const at = await page.evaluate(() => window.strobe.errorAt);
  const typed = 'service_name=~"(")'; // as the page's URL has it
  check('states/error', j.error && msg.includes(j.error.replace(/^query: /, '').split(' at offset')[0]) &&
    msg.includes(`at offset ${off} of the matchers`) && off === 14 && typed[off] === '"', `overlay "${msg}", API "${j.error}"`);
  check('states/error-offset', mark === `${typed}\n${' '.repeat(off)}^` && at && at.field === 'labels' && at.off === off &&
    await page.$eval('#labels', (e) => e.classList.contains('bad') && e.selectionStart === 14),
  `mark ${JSON.stringify(mark)}, errorAt ${JSON.stringify(at)}`);
  // editing the field clears its outline (which the error put there)
  const hadBad = await page.$eval('#labels', (e) => e.classList.contains('bad'));
  await page.focus('#labels');
  await page.keyboard.press('End');
  await page.keyboard.press('Backspace');
  const hasBad = await page.$eval('#labels', (e) => e.classList.contains('bad'));
  check('states/error-edit', hadBad && !hasBad, `outline before the edit ${hadBad}, after ${hasBad}`);
  await page.screenshot({path: `${shots}/error.png`});
  await page.close();
  const p2 = await open(`?type=${q(TYPE)}&q=${q('service_name="nobody"')}`);
  const m2 = await p2.textContent('#flame-wrap .overlay');
  check('states/empty', /^No samples in this window .*nobody/.test(m2) && await p2.isVisible('#flame-wrap .overlay'), `overlay "${m2}"`);
  // the timeline says it too, in the chart's place
  const tm = await p2.evaluate(() => window.strobe.timeline.message);
  check('states/empty-range', tm === 'No samples in this range', `timeline message "${tm}"`);
  await p2.close();
  // a window selected between the pushes (TB+5m to TB+15m) of a service that has data elsewhere
  const p3 = await open(`${base}&sel=${TB + 5 * MIN}-${TB + 15 * MIN}`);
  const m3 = await p3.textContent('#flame-wrap .overlay');
  const n3 = (await rows(p3)).length;
  check('states/empty-window', /^No samples in this window \(/.test(m3) && await p3.isVisible('#flame-wrap .overlay') && n3 === 0,
    `overlay "${m3}", ${n3} table rows`);
  await p3.close();
});

await run('labels', async () => {
  const page = await open(base);
  await page.fill('#labels', '');
  await page.focus('#labels');
  await page.type('#labels', 'ver');
  // Focusing the empty field lists every name first; wait for the list of the typed prefix
  // (a timeout leaves the list as it is, and the check below names it).
  await page.waitForFunction(() => {
    const l = [...document.querySelectorAll('#suggest li')];
    return l.length > 0 && l.every((x) => x.textContent.startsWith('ver'));
  }, null, {timeout: 5000}).catch(() => {});
  const names = await page.$$eval('#suggest li', (l) => l.map((x) => x.textContent).join(','));
  await page.keyboard.press('Tab');
  await page.waitForFunction(() => document.querySelectorAll('#suggest li').length === 2);
  const vals = await page.$$eval('#suggest li', (l) => l.map((x) => x.textContent).join(','));
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Enter');
  const v = await page.inputValue('#labels');
  check('labels/autocomplete', names === 'version' && vals === 'v1,v2' && v === 'version="v2"', `names ${names}, values ${vals}, input ${v}`);
  const types = await page.$$eval('#type option', (o) => o.map((x) => x.value));
  const apiTypes = (await api(page, '/api/v1/profile_types?from=now-30d')).data;
  check('labels/types', types.join() === apiTypes.join() && types.includes(TYPE), `picker ${types}, API ${apiTypes}`);
  // the native heap and lock profiles strobe record made (ui.sh): their types are offered
  const native = ['memory:alloc_space:bytes', 'memory:inuse_space:bytes', 'mutex:delay:nanoseconds'];
  check('labels/native-types', native.every((t) => types.some((x) => x.startsWith(t))), `picker ${types}`);
  await page.close();
});

await run('extras', async () => {
  const page = await open(`${base}&group=version`);
  // timeline stacked by version: one series per value, as the API answers
  const legend = await page.$$eval('#legend span', (l) => l.map((x) => x.textContent).join(','));
  const series = await page.evaluate(() => window.strobe.range.series.map((s) => `${s.group.version}=${s.points.reduce((a, p) => a + p[1], 0)}`).join(','));
  // the legend lists the groups largest first (v2's 220 before v1's 100)
  check('timeline/group-by', legend === 'v2,v1' && series === 'v1=100,v2=220', `legend ${legend}, series ${series}`);
  // hover tooltip over "hot"
  const hot = (await drawn(page)).find((n) => n.name === 'hot');
  const cb = await page.$eval('#flame', (c) => { const r = c.getBoundingClientRect(); return {x: r.left, y: r.top}; });
  await page.mouse.move(cb.x + hot.x + hot.w / 2, cb.y + hot.y + hot.h / 2);
  const tip = await page.textContent('#flame-wrap .tip');
  check('hover', tip === 'hottotal 200 (62.50%)self 200 (62.50%)' && await page.isVisible('#flame-wrap .tip'), `tooltip "${tip}"`);
  // downloads: what the links fetch is the API's answer for the same query
  const dl = await page.evaluate(async () => {
    const get = async (id) => { const r = await fetch(document.getElementById(id).href); return [r.headers.get('content-type'), new Uint8Array(await r.arrayBuffer())]; };
    const [pt, pb] = await get('dl-pprof'), [ft, fb] = await get('dl-folded'), [st, sb] = await get('dl-svg');
    return {pt, gz: pb[0] === 0x1f && pb[1] === 0x8b, ft, folded: new TextDecoder().decode(fb), st, svg: new TextDecoder().decode(sb.slice(0, 200))};
  });
  check('downloads', dl.gz && dl.folded === 'gc 30\nmain;idle 60\nmain;new 20\nmain;work 10\nmain;work;hot 200\n' &&
    dl.st === 'image/svg+xml' && /<svg/.test(dl.svg), JSON.stringify(dl).slice(0, 300));
  // the PGO link asks /api/v1/pgo for the same query; folded samples have no start lines, which
  // the server refuses by name (never an empty file a compiler would take)
  const pgo = await page.evaluate(async () => {
    const a = document.getElementById('dl-pgo-autofdo'), r = await fetch(a.href);
    return {shown: !document.getElementById('dl-pgo').hidden, href: a.href, status: r.status, body: await r.text()};
  });
  check('download-pgo', pgo.shown && /\/api\/v1\/pgo\?.*format=autofdo/.test(pgo.href) && pgo.href.includes('query=') &&
    pgo.status === 422 && /start line/.test(pgo.body), JSON.stringify(pgo).slice(0, 300));
  // icicle: the root on top; colour by package changes colours of Go names only by package
  await page.selectOption('#orient', 'icicle');
  const root = (await drawn(page)).find((n) => n.depth === 0);
  await page.waitForFunction(() => location.search.includes('orient=icicle')); // written after a pause
  check('icicle', root.y === 0, `root y ${root.y}`);
  await page.close();
  const p2 = await open(`?type=${q(TYPE.replace('samples:count:samples:count', 'cpu:nanoseconds:cpu:nanoseconds'))}&q=${q('service_name="go"')}&color=package`);
  const g = await drawn(p2);
  const byPkg = {};
  for (const n of g) {
    const pkg = n.name.startsWith('runtime.') ? 'runtime' : n.name.startsWith('sort.') ? 'sort' : null;
    if (pkg) (byPkg[pkg] = byPkg[pkg] || new Set()).add(n.color);
  }
  check('colour/package', byPkg.runtime && byPkg.runtime.size === 1 && byPkg.sort && byPkg.sort.size === 1 &&
    [...byPkg.runtime][0] !== [...byPkg.sort][0], JSON.stringify(Object.fromEntries(Object.entries(byPkg).map(([k, v]) => [k, [...v]]))));
  // the Go profile is deeper than what is drawn: the canvas has spare rows above the box that
  // shows the drawn ones (so a zoom need not resize it); every drawn frame is inside the box and
  // the pointer finds the frame drawn under it (here the deepest drawn one, and the root)
  await p2.close();
  const p3 = await open(`?type=${q(TYPE.replace('samples:count:samples:count', 'cpu:nanoseconds:cpu:nanoseconds'))}&q=${q('service_name="go"')}&minw=60`);
  const g3 = await drawn(p3);
  const geo = await p3.evaluate(() => {
    const f = window.strobe.flame, c = f.canvas.getBoundingClientRect(), b = f.clip.getBoundingClientRect();
    return {alloc: f.allocRows, vis: f.visRows, c: {top: c.top, left: c.left}, b: {top: b.top, bottom: b.bottom}};
  });
  const inside = g3.every((n) => geo.c.top + n.y >= geo.b.top - 0.5 && geo.c.top + n.y + n.h <= geo.b.bottom + 0.5);
  const deep = g3.reduce((a, n) => (n.depth > a.depth ? n : a), g3[0]);
  const tipAt = async (n) => {
    await p3.mouse.move(geo.c.left + n.x + n.w / 2, geo.c.top + n.y + n.h / 2);
    return (await p3.textContent('#flame-wrap .tip')).split('total')[0];
  };
  const tDeep = await tipAt(deep), tRoot = await tipAt(g3.find((n) => n.depth === 0));
  check('flame/spare-rows', geo.alloc > geo.vis && inside && tDeep === deep.name && tRoot === '',
    `rows ${geo.vis} of ${geo.alloc}, all inside ${inside}, tooltip "${tDeep}" for ${deep.name}, root "${tRoot}"`);
  await p3.close();
});

await run('icicle-root', async () => {
  // service deep is 60 frames deep: taller than the graph's box, which scrolls. A flame graph
  // opens scrolled to its bottom (the root); switching to icicle must show the root (now at the
  // top), and back to flame the root again
  const page = await open(`?type=${q(TYPE)}&q=${q('service_name="deep"')}`);
  const rootSeen = async () => {
    const root = (await drawn(page)).find((n) => n.depth === 0);
    return page.evaluate((r) => {
      const c = window.strobe.flame.canvas.getBoundingClientRect(), w = document.getElementById('flame-wrap');
      const b = w.getBoundingClientRect(), top = c.top + r.y;
      return {top, bottom: top + r.h, box: [b.top, b.top + w.clientHeight], scroll: w.scrollHeight > w.clientHeight,
        inside: top >= b.top - 0.5 && top + r.h <= b.top + w.clientHeight + 0.5};
    }, root);
  };
  const f1 = await rootSeen();
  await page.selectOption('#orient', 'icicle');
  const ic = await rootSeen();
  await page.selectOption('#orient', 'flame');
  const f2 = await rootSeen();
  check('icicle/root-visible', f1.scroll && f1.inside && ic.inside && f2.inside,
    `flame ${JSON.stringify(f1)}; icicle ${JSON.stringify(ic)}; flame again ${JSON.stringify(f2)}`);
  await page.screenshot({path: `${shots}/icicle-deep.png`});
  await page.close();
});

await run('offcpu', async () => {
  // off-CPU: self time is all __schedule (90 of 100): the table sorts by total by default
  const page = await open(`?type=${q('off_cpu:samples:count:samples:count')}&q=${q('service_name="waiter"')}`);
  const t = await rows(page);
  const key = await page.$eval('#top th.sorted', (th) => th.dataset.key);
  check('offcpu/sort-total', key === 'total' && t[0][0] === 'main' && t[0][3] === '100', `sorted by ${key}, rows ${JSON.stringify(t.slice(0, 3))}`);
  await page.close();
  // a CPU profile still sorts by self
  const p2 = await open(base);
  const k2 = await p2.$eval('#top th.sorted', (th) => th.dataset.key);
  check('offcpu/cpu-self', k2 === 'self', `CPU profile sorted by ${k2}`);
  await p2.close();
});

await run('diff-unchanged', async () => {
  // raw diff of steady: a 1000000 -> 1000001 (+0.0001%) is no change; b 1000 -> 2000 grew
  const w = (t) => `${t - 3 * MIN}-${t + 3 * MIN}`;
  const page = await open(`?type=${q(TYPE)}&q=${q('service_name="steady"')}&mode=diff&norm=0&bsel=${w(TB)}&sel=${w(TN)}`);
  const cells = await page.$$eval('#top tbody tr', (trs) => Object.fromEntries(trs.map((tr) =>
    [tr.cells[0].textContent, {text: tr.cells[3].textContent, cls: tr.cells[3].className}])));
  const nodes = await drawn(page);
  const a = nodes.find((n) => n.name === 'a'), b = nodes.find((n) => n.name === 'b');
  const grey = (c) => { const m = /^rgb\((\d+),(\d+),(\d+)\)$/.exec(c); return m && m[1] === m[2] && m[2] === m[3]; };
  check('diff/unchanged', cells.a && cells.a.text === 'unchanged' && cells.a.cls === '' && a && a.total === 1000001 &&
    a.base === 1000000 && grey(a.color) && cells.b && cells.b.text === '+1,000 (+100.0%)' && cells.b.cls === 'grew' &&
    b && /^rgb\(255,/.test(b.color), `table ${JSON.stringify(cells)}, a ${a && a.color}, b ${b && b.color}`);
  // the tooltip says so too
  const cb = await page.$eval('#flame', (c) => { const r = c.getBoundingClientRect(); return {x: r.left, y: r.top}; });
  await page.mouse.move(cb.x + a.x + a.w / 2, cb.y + a.y + a.h / 2);
  const tip = await page.textContent('#flame-wrap .tip');
  check('diff/unchanged-tip', /unchanged$/.test(tip) && !/\+1 \(/.test(tip), `tooltip "${tip}"`);
  await page.close();
});

await run('units', async () => {
  // the formatter the axes use: a human unit, the unit picked after rounding, k/M/G for counts
  const page = await open(base);
  const f = await page.evaluate(async () => {
    const m = await import('/ui/flame.js');
    return [m.fmtShort(1e9, 'nanoseconds'), m.fmtShort(999999999, 'nanoseconds'), m.fmtValue(999999999, 'nanoseconds'),
      m.fmtShort(2.5e6, 'nanoseconds'), m.fmtShort(3e9, 'count'), m.fmtShort(1500, 'count'), m.fmtShort(20, 'count'),
      m.fmtShort(1.5 * 2 ** 20, 'bytes'), m.fmtShort(512 * 1024, 'bytes'), m.fmtValue(2 ** 30 - 1, 'bytes')].join('|');
  });
  check('units/format', f === '1.00 s|1.00 s|1.00 s|2.50 ms|3.00G|1.50k|20|1.50 MiB|512 KiB|1.00 GiB', f);
  await page.close();
});

await run('fleet', async () => {
  // 200 services stacked by service_name: the page keeps its width, the legend shows the 10
  // largest and "other", in distinct colours, and stays two lines high at most
  const page = await open(`?type=${q(TYPE)}&group=service_name&tenant=fleet`);
  const g = await page.evaluate(() => {
    const t = window.strobe.timeline, l = document.getElementById('legend');
    const api = window.strobe.range.series.reduce((a, s) => a + s.points.reduce((b, p) => b + p[1], 0), 0);
    return {scrollW: document.documentElement.scrollWidth, innerW: window.innerWidth, bodyW: document.body.scrollWidth,
      legend: [...l.querySelectorAll('span')].map((x) => x.textContent), legendH: l.getBoundingClientRect().height,
      legendW: l.scrollWidth, boxW: l.clientWidth, series: window.strobe.range.series.length,
      colors: (t.shown || []).map((s) => s.color), drawn: (t.shown || []).reduce((a, s) => a + s.total, 0), api,
      yLabels: t.yLabels || [], step: window.strobe.range.step_ms};
  });
  check('fleet/page-width', g.series === 200 && g.scrollW <= g.innerW && g.bodyW <= g.innerW,
    `${g.series} series; page ${g.scrollW} px (body ${g.bodyW}) in a ${g.innerW} px window`);
  const top10 = Array.from({length: 10}, (_, k) => `svc-${199 - k}`).join(',');
  check('fleet/legend', g.legend.length === 11 && g.legend.slice(0, 10).join(',') === top10 &&
    g.legend[10] === 'other (190 more)' && g.legendH <= 40 && g.legendW <= g.boxW + 1,
  `legend ${g.legend.length} entries ${JSON.stringify(g.legend.slice(0, 12))}, ${g.legendH} px high, ${g.legendW} of ${g.boxW} px wide`);
  check('fleet/colours', new Set(g.colors).size === g.colors.length && g.colors.length === 11 && g.drawn === g.api,
    `colours ${g.colors}, drawn total ${g.drawn} of ${g.api}`);
  // counts on the y axis with k/M: 15 s steps hold one service each, the largest 2,000,000
  check('fleet/y-units', g.yLabels.length >= 2 && g.yLabels[0] === '0' && g.yLabels.every((x) => /^(0|\d+(\.\d+)?[kMG])$/.test(x)) &&
    g.yLabels.includes('2.00M'), `y axis ${JSON.stringify(g.yLabels)}`);
  await page.screenshot({path: `${shots}/fleet.png`});
  // loading: while the range query runs (held back here for 1.5 s), the timeline says so and
  // shows nothing of the previous answer (title, bars, legend)
  await page.evaluate(() => {
    const f = window.fetch;
    window.fetch = (u, o) => (String(u).includes('/api/v1/range') ? new Promise((ok) => setTimeout(ok, 1500)).then(() => f(u, o)) : f(u, o));
  });
  await page.selectOption('#group', '');
  const l = await page.evaluate(() => ({title: document.getElementById('tl-title').textContent, data: window.strobe.timeline.data,
    msg: window.strobe.timeline.message, legend: document.querySelectorAll('#legend span').length, range: window.strobe.range}));
  await page.waitForFunction(() => window.strobe.range && window.strobe.idle, null, {timeout: 15000});
  const after = await page.evaluate(() => ({title: document.getElementById('tl-title').textContent, msg: window.strobe.timeline.message}));
  check('fleet/loading', l.title === 'Loading…' && l.data === null && l.msg === 'Loading…' && l.legend === 0 && l.range === null &&
    after.title.startsWith(TYPE) && after.msg === '', `while loading ${JSON.stringify(l).slice(0, 200)}; after ${JSON.stringify(after)}`);
  await page.close();
  // the step is never under the push interval (10 s), even over 5 minutes (240 steps would be 2 s)
  const p2 = await open(`?type=${q(TYPE)}&tenant=fleet&from=now-5m`);
  const st = await p2.evaluate(() => window.strobe.range.step_ms);
  check('fleet/min-step', st >= 10000, `step ${st} ms over 5 minutes`);
  await p2.close();
});

await run('tenant', async () => {
  const page = await open(`?type=${q(TYPE)}&q=${q('service_name="team"')}&tenant=team1`);
  const root = (await drawn(page)).find((n) => n.depth === 0);
  const dl = await browser.download(page, '#dl-folded');
  check('tenant', root && root.total === 100 && dl.text === 'gc 15\nmain;idle 30\nmain;work 5\nmain;work;hot 50\n' &&
    dl.filename === 'profile.folded', `root ${root && root.total}, download ${JSON.stringify(dl)}`);
  await page.close();
  const p2 = await open(`?type=${q(TYPE)}&q=${q('service_name="team"')}`);
  const m = await p2.textContent('#flame-wrap .overlay');
  check('tenant/isolated', /^No samples/.test(m), `the default tenant sees "${m}"`);
  await p2.close();
});

await run('auth', async () => {
  // tenant "secure" has a token: without it the page says so (the server's 401) and opens the
  // token field; with it the graph and the downloads work; the token is in no URL
  const page = await open(`?type=${q(TYPE)}&q=${q('service_name="vault"')}&tenant=secure`);
  const m = await page.textContent('#flame-wrap .overlay');
  check('auth/401', /refused tenant "secure" \(401\): missing or wrong bearer token for tenant 'secure'/.test(m) &&
    await page.isVisible('#flame-wrap .overlay') && await page.isVisible('#token'), `overlay "${m}"`);
  await page.screenshot({path: `${shots}/auth-401.png`});
  await page.fill('#token', TOKEN);
  const before = await page.evaluate(() => window.strobe.renders);
  await page.click('#authapply');
  await idle(page, before + 1);
  const root = (await drawn(page)).find((n) => n.depth === 0);
  await page.evaluate(() => window.strobe.flushUrl());
  const stored = await page.evaluate(() => sessionStorage.getItem('strobe.token:secure'));
  check('auth/token', root && root.total === 100 && !page.url().includes(TOKEN) && page.url().includes('tenant=secure') &&
    stored === TOKEN, `root ${root && root.total}, url ${page.url()}, stored ${stored}`);
  const dl = await browser.download(page, '#dl-folded');
  check('auth/download', dl.text === 'gc 15\nmain;idle 30\nmain;work 5\nmain;work;hot 50\n', JSON.stringify(dl));
  // a reload in the same tab keeps the token (sessionStorage); forgetting it brings the 401 back
  await page.goto(page.url());
  await idle(page);
  const r2 = (await drawn(page)).find((n) => n.depth === 0);
  const b2 = await page.evaluate(() => window.strobe.renders);
  await page.click('#authbtn'); // the bar is closed after a success: open it
  await page.click('#authforget');
  await idle(page, b2 + 1);
  const m2 = await page.textContent('#flame-wrap .overlay');
  check('auth/reload-forget', r2 && r2.total === 100 && /\(401\)/.test(m2), `after reload root ${r2 && r2.total}; after forget "${m2}"`);
  await page.close();
});

// The cost and leaks page against the API: teams ranked by dollars (payments: 1 core-hour, 3x
// discovery), the top function, and the one growing stack drawn as a line of its 12 points.
await run('cost', async () => {
  const page = await browser.newPage({viewport: {width: 1280, height: 800}});
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${url}/ui/costleak.html?group_by=team&from=now-1h&to=now&q=${q('process_cpu:cpu:nanoseconds:cpu:nanoseconds')}`);
  await page.waitForFunction(() => window.strobeCost && window.strobeCost.idle, null, {timeout: 15000});
  const h = await page.evaluate(() => window.strobeCost);
  const a = await api(page, `/api/v1/cost?group_by=team&from=now-1h&to=now&query=${q('process_cpu:cpu:nanoseconds:cpu:nanoseconds')}`);
  const cells = await page.$$eval('#cost-groups tbody tr', (trs) => trs.map((tr) => tr.cells[0].textContent));
  const pay = a.groups.find((g) => g.group.team === 'payments');
  check('cost/leaderboard', cells.slice(0, 2).join() === 'payments,discovery' && h.groups[0].name === 'payments' &&
    pay && Math.abs(pay.cost.core_hours - 1) < 1e-6 && Math.abs(h.groups[0].dollars_per_year - pay.cost.dollars_per_year) < 1e-6,
    `rows ${cells}, drawn ${JSON.stringify(h.groups.slice(0, 2))}, API payments ${pay && JSON.stringify(pay.cost)}`);
  check('cost/functions', h.fns.length > 0 && h.fns[0].name === 'marshal' && Math.abs(h.fns[0].self - pay.cost.dollars_per_year) < 1e-6,
    `functions ${JSON.stringify(h.fns.slice(0, 3))}`);
  const paths = await page.$$eval('#leaks svg path', (ps) => ps.length);
  check('leaks/lines', h.leaks.length === 1 && h.leaks[0].leaf === 'grow_site' && h.leaks[0].points === 12 && paths === 1,
    `leaks ${JSON.stringify(h.leaks)}, ${paths} lines drawn`);
  await page.screenshot({path: path.join(shots, 'costleak.png')});
  await page.close();
});

check('no-page-errors', errors.length === 0, errors.join('; '));
await browser.close();
process.exit(failed ? 1 : 0);
