// SPDX-License-Identifier: Apache-2.0
/*
 * Drives a flame graph's own embedded script the way a person would in a browser: hover, click
 * to zoom, reset, search, and checks what the picture then shows. The script is what makes the
 * SVG interactive and nothing else tests it: this catches a tooltip format the script no longer
 * parses, a zoom that keeps siblings, or a search that counts nested matches twice.
 * In chromium (playwright-core, when CHROMIUM names one) the SVG is opened as a browser opens
 * it; otherwise in a DOM (jsdom), where the embedded script is run by hand.
 *
 *   [CHROMIUM=/usr/bin/chromium] node flame.js CASE FILE.svg
 *   (prints "ok NAME" / "FAIL NAME: why" lines; exit 1 on a FAIL)
 */
'use strict';
const fs = require('fs');
const path = require('path');

const [kind, file] = process.argv.slice(2);

// Runs inside the SVG's window (jsdom's or chromium's): no closure over this file's scope.
function checks(kind) {
  const doc = document;
  const lines = [];
  function check(name, cond, why) {
    lines.push(cond ? `ok browser/${kind}/${name}` : `FAIL browser/${kind}/${name}: ${why}`);
  }
  const F = window.strobeFlame;
  const vis = () => F.visible();
  const byName = (n) => vis().filter((f) => f.name === n)[0];
  const near = (a, b) => Math.abs(a - b) < 0.15;
  function hover(name) {
    const g = Array.from(doc.querySelectorAll('g.f')).filter((e) =>
      e.querySelector('title').textContent.startsWith(name + ' ('))[0];
    g.querySelector('rect').dispatchEvent(new window.MouseEvent('mouseover', { bubbles: true }));
    return doc.getElementById('details').textContent;
  }
  const matched = () => doc.getElementById('matched').textContent;

  if (kind === 'plain') {
    // main;hot 60 (with hot;hot inside), main;warm 30, main;cold 10 at width 1200 (1180 px).
    const names = vis().map((f) => f.name).sort().join(',');
    check('names-parsed', names === 'all,cold,hot,hot,main,warm', `names: ${names}`);
    const d = hover('hot');
    check('hover-details', d === 'Function: hot (60 samples, 60.00%)', `details: '${d}'`);
    F.zoom('warm');
    const v = vis().map((f) => f.name).sort().join(',');
    check('zoom-hides-siblings', v === 'all,main,warm', `visible after zoom: ${v}`);
    const w = byName('warm');
    check('zoom-fills-width', w && near(w.x, 10) && near(w.width, 1180),
      `warm at x=${w && w.x} width=${w && w.width}`);
    const m = byName('main');
    check('zoom-keeps-ancestors', m && near(m.width, 1180), `main width ${m && m.width}`);
    check('zoom-label-fits', w && w.text === 'warm', `label '${w && w.text}'`);
    F.reset();
    check('reset', vis().length === 6 && near(byName('warm').width, 354),
      `visible ${vis().length}, warm width ${byName('warm') && byName('warm').width}`);
    // hot and the hot inside it both match: 60%, not 60% + the inner one.
    let p = F.search('^hot$');
    check('search-nested-once', matched() === 'Matched: 60.00%', `${matched()} (${p})`);
    const hot = vis().filter((f) => f.name === 'hot');
    check('search-highlights', hot.length === 2 && hot.every((f) => f.fill === 'rgb(230,0,230)'),
      JSON.stringify(hot));
    p = F.search('o');
    check('search-union', near(p, 70) && matched() === 'Matched: 70.00%', `${matched()} (${p})`);
    F.zoom('main');
    p = F.search('cold');
    check('search-relative-to-zoom', near(p, 10), `matched ${p} in main`);
    F.zoom('warm');
    p = F.search('cold');
    check('search-outside-zoom', near(p, 0), `matched ${p} in warm`);
    F.clearSearch();
    check('search-cleared', vis().every((f) => f.fill !== 'rgb(230,0,230)'), 'still purple');
    F.toggleCase();
    F.reset();
    p = F.search('WARM');
    check('ignore-case', near(p, 30), `matched ${p}`);
  } else if (kind === 'diff') {
    const names = vis().map((f) => f.name).sort().join(',');
    check('names-parsed', names === 'all,cold,gone,hot,hot,main,warm', `names: ${names}`);
    F.zoom('gone');
    const g = byName('gone');
    check('zoom-base-only', g && near(g.width, 1180), `gone ${JSON.stringify(g)}`);
    const d = hover('gone');
    check('hover-details', d.startsWith('Function: gone (total: base 40, new 0, delta -40'), d);
  } else if (kind === 'countname') {
    // A unit with regular expression characters in it still leaves the bare names.
    const names = vis().map((f) => f.name).sort().join(',');
    check('names-parsed', names === 'a.b (c),all,x[1]', `names: ${names}`);
  }

  return lines;
}

async function main() {
  let lines;
  if (process.env.CHROMIUM) {
    const { chromium } = require('playwright-core');
    const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
    const page = await browser.newPage({ viewport: { width: 1300, height: 800 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto('file://' + path.resolve(file));
    lines = await page.evaluate(checks, kind);
    if (errors.length) lines.push(`FAIL browser/${kind}/script-errors: ${errors.join('; ')}`);
    await browser.close();
  } else {
    const { JSDOM } = require('jsdom');
    const dom = new JSDOM(fs.readFileSync(file, 'utf8'), { contentType: 'image/svg+xml', runScripts: 'outside-only' });
    // jsdom does not run <script> inside SVG documents: run the embedded one in the window.
    dom.window.eval(dom.window.document.querySelector('script').textContent);
    lines = dom.window.eval(`(${checks})(${JSON.stringify(kind)})`);
  }
  for (const l of lines) console.log(l);
  process.exit(lines.some((l) => l.startsWith('FAIL')) ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL browser/${kind}: ${e.message.split('\n')[0]}`); process.exit(1); });
