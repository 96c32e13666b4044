// SPDX-License-Identifier: Apache-2.0
// bench/ui.sh's browser part: for each pushed profile (service_name=ui_SIZE), loads the page
// RUNS times and reads the page's own timings (window.strobe.timings: from sending the query to
// the end of the draw), then times 200 hovers (the pointer handler: hit test and tooltip) and 40
// zooms (click handling: re-layout of the view, draw, breadcrumb) including the browser's style
// and layout of the changed page (forced right after, so the main thread's work of that frame is
// measured; the compositor's paint of the canvas is not). The first zoom after a load is among
// them (it pays for the code's first run and the collection of the parsed JSON), so the worst
// zoom is reported too. The app draws a zoom in the next animation frame, so the zooms are timed
// both ways, alternating: forced right away (the old measure, the old code's behaviour) and in
// the frame (that frame's work); then 40 real clicks each way, from the event's timeStamp to the
// drawn and laid-out frame (docs/BENCHMARKS.md says exactly what each column counts). Prints one
// markdown row per size. BROWSER is chromium (playwright-core)
// or firefox (puppeteer-core over WebDriver BiDi), as in tests/browser/driver.mjs.
//   node bench/ui.mjs URL BROWSER EXECUTABLE RUNS SIZE...
import path from 'node:path';
import {launch} from '../tests/browser/driver.mjs';

const [url, kind, exe, runsArg, ...sizes] = process.argv.slice(2);
const runs = +runsArg;
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const p95 = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(s.length * 0.95))]; };
const ms = (v) => `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`;

const browser = await launch(kind, exe, path.resolve('node_modules'));
const page = await browser.newPage({viewport: {width: 1400, height: 900}});
for (const size of sizes) {
  const q = new URLSearchParams({type: 'process_cpu:samples:count:samples:count', q: `service_name="ui_${size}"`,
    from: 'now-1h', to: 'now', minw: '1'});
  const loads = [];
  for (let r = 0; r < runs; r++) {
    await page.goto(`${url}/?${q}`);
    await page.waitForFunction(() => window.strobe && window.strobe.idle && window.strobe.renders > 0, null, {timeout: 120000});
    loads.push(await page.evaluate(() => window.strobe.timings));
  }
  const bytes = await page.evaluate(async (u) => (await (await fetch(u)).arrayBuffer()).byteLength,
    `/api/v1/query?format=flat&from=now-1h&to=now&query=${encodeURIComponent(`process_cpu:samples:count:samples:count{service_name="ui_${size}"}`)}`);
  const res = await page.evaluate(async () => {
    const s = window.strobe, f = s.flame, cv = f.canvas, r = f.clip.getBoundingClientRect(); // the rows in view
    const frame = () => new Promise((ok) => requestAnimationFrame(() => ok()));
    let seed = 1;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const hov = [];
    for (let k = 0; k < 200; k++) {
      const e = new MouseEvent('mousemove', {clientX: r.left + rnd() * r.width,
        clientY: r.top + Math.min(r.height, 900 - r.top) * rnd(), bubbles: true});
      const t0 = performance.now();
      cv.dispatchEvent(e);
      void document.body.offsetHeight;
      hov.push(performance.now() - t0);
    }
    // zoom into 20 frames of depth 1-4, wider than 1 %, each then back out, timing each
    const d = s.data, cand = [];
    for (let i = 1; i < d.n && cand.length < 20; i = d.depth[i] < 4 ? i + 1 : d.end[i])
      if (d.total[i] / d.total[0] > 0.01 && d.depth[i] >= 1) cand.push(i);
    // The old way (the draw forced right away) and the app's way (the draw in the next animation
    // frame: timed from the start of the app's frame callback to the end of the style and
    // layout, in a callback queued after it), alternating by frame, one zoom a frame either way.
    const zoom = [], zoomRaf = [];
    for (const i of cand) {
      for (const target of [i, 0]) {
        const t0 = performance.now();
        f.onZoom(target);
        s.flushFlame(); // the app now draws a zoom in the next frame: draw it here, as before
        void document.body.offsetHeight; // style and layout of the changed page, as the frame would
        zoom.push(performance.now() - t0);
        await frame();
      }
      for (const target of [i, 0]) {
        f.onZoom(target);
        zoomRaf.push(await new Promise((ok) => requestAnimationFrame(() => {
          void document.body.offsetHeight;
          ok(performance.now() - s.frame.start);
        })));
      }
    }
    return {hov, zoom, zoomRaf, drawn: f.stats.drawn, n: d.n, cand};
  });
  // Real clicks through the browser's input pipeline (the driver's mouse), alternating between
  // the old way (ui.drawInHandler: the draw in the click handler) and the new (the handler asks
  // for an animation frame and the draw runs in it), on the same 20 frames, in and back out (a
  // click on the root). For each click: from the event's timeStamp (when the browser took the
  // input) to the end of the draw and of the style and layout after it, measured in a frame
  // callback queued after the app's (so in the frame that presents the draw); and for the new
  // way the work done in that frame (from the start of the app's frame callback).
  await page.evaluate(() => {
    const s = window.strobe;
    s.clicks = [];
    document.addEventListener('click', (e) => { // bubbling: after the graph's own handler
      const t = e.timeStamp, inHandler = s.drawInHandler;
      requestAnimationFrame(() => {
        void document.body.offsetHeight;
        const end = performance.now();
        s.clicks.push({lat: end - t, work: inHandler ? NaN : end - s.frame.start});
      });
    });
  });
  const clickAt = async (i) => {
    const b = await page.evaluate((n) => {
      const f = window.strobe.flame, x = f.box(n);
      let r = f.canvas.getBoundingClientRect();
      const y = r.top + x.y + x.h / 2;
      if (y < 10 || y > innerHeight - 10) { // bring it into the viewport: a click lands only there
        window.scrollBy(0, y - innerHeight / 2);
        r = f.canvas.getBoundingClientRect();
      }
      return {x: r.left + x.x + Math.min(x.w / 2, 20), y: r.top + x.y + x.h / 2};
    }, i);
    const k = await page.evaluate(() => window.strobe.clicks.length);
    await page.mouse.click(b.x, b.y);
    await page.waitForFunction((n) => window.strobe.clicks.length > n, k, {timeout: 10000});
    return page.evaluate(() => window.strobe.clicks[window.strobe.clicks.length - 1]);
  };
  const real = {old: [], raf: [], work: []};
  for (const i of res.cand) {
    for (const mode of ['old', 'raf']) {
      await page.evaluate((m) => { window.strobe.drawInHandler = m === 'old'; }, mode);
      for (const target of [i, 0]) {
        const c = await clickAt(target);
        real[mode].push(c.lat);
        if (mode === 'raf') real.work.push(c.work);
      }
    }
  }
  await page.evaluate(() => { window.strobe.drawInHandler = false; });
  const tot = loads.map((l) => l.total);
  const pick = loads[loads.indexOf(loads.find((l) => l.total === med(tot)))];
  const goal = size === '100k' ? `query → drawn < 500 ms: ${med(tot) < 500 ? 'met' : 'NOT met'}; ` : '';
  console.log(`| ${kind} | ${size} | ${res.n.toLocaleString('en-US')} | ${(bytes / 1048576).toFixed(1)} MB | ${ms(med(tot))} | ` +
    `${ms(pick.fetch)} / ${ms(pick.parse)} / ${ms(pick.draw)} | ${res.drawn.toLocaleString('en-US')} | ` +
    `${ms(med(res.hov))} / ${ms(p95(res.hov))} | ${ms(med(res.zoom))} / ${ms(p95(res.zoom))} / ${ms(Math.max(...res.zoom))} | ` +
    `${ms(med(res.zoomRaf))} / ${ms(p95(res.zoomRaf))} / ${ms(Math.max(...res.zoomRaf))} | ` +
    `${ms(med(real.old))} / ${ms(p95(real.old))} | ${ms(med(real.raf))} / ${ms(p95(real.raf))} | ${ms(med(real.work))} / ${ms(p95(real.work))} | ` +
    `${goal}hover, zoom < 16 ms a frame: ${p95(res.hov) < 16 && p95(res.zoomRaf) < 16 && p95(real.work) < 16 ? 'met' : 'NOT met'} |`);
}
await browser.close();
