// SPDX-License-Identifier: Apache-2.0
// One browser API for the UI's tests and benchmark, over two drivers: Debian's chromium through
// playwright-core, and Debian's firefox-esr through puppeteer-core over WebDriver BiDi (playwright
// drives only its own patched Firefox builds, which Debian does not package). The tests are
// written against playwright's Page; for Firefox, BidiPage below gives the same calls on a
// puppeteer page, so every check runs unchanged in both browsers. Downloads differ most: one
// helper, download(page, selector) -> {text, filename}, hides how each browser saves a file.
//   const b = await launch('firefox', '/usr/bin/firefox-esr', modulesDir);
import {createRequire} from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export async function launch(kind, exe, modules) {
  const require = createRequire(path.join(modules, 'x.js'));
  if (kind === 'chromium') {
    const {chromium} = require('playwright-core');
    const browser = await chromium.launch({executablePath: exe, args: ['--no-sandbox']});
    return {
      kind,
      version: browser.version(),
      newPage: (opts) => browser.newPage({...opts, acceptDownloads: true}),
      close: () => browser.close(),
      async download(page, selector) {
        const [dl] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
        return {text: fs.readFileSync(await dl.path(), 'utf8'), filename: dl.suggestedFilename()};
      },
    };
  }
  if (kind === 'firefox') {
    const puppeteer = require('puppeteer-core');
    // downloads go to a folder of our own, without a dialog (Firefox's own preferences)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'strobe-ff-dl.'));
    const browser = await puppeteer.launch({
      browser: 'firefox', protocol: 'webDriverBiDi', executablePath: exe, headless: true,
      extraPrefsFirefox: {
        'browser.download.folderList': 2, 'browser.download.dir': dir, 'browser.download.useDownloadDir': true,
        'browser.download.always_ask_before_handling_new_types': false,
        'browser.helperApps.neverAsk.saveToDisk': 'application/octet-stream,text/plain,image/svg+xml,application/gzip',
      },
    });
    return {
      kind,
      version: await browser.version(),
      async newPage(opts = {}) {
        const p = await browser.newPage();
        if (opts.viewport) await p.setViewport(opts.viewport);
        return new BidiPage(p);
      },
      async close() { await browser.close(); fs.rmSync(dir, {recursive: true, force: true}); },
      async download(page, selector) {
        for (const f of fs.readdirSync(dir)) fs.rmSync(path.join(dir, f), {force: true});
        await page.click(selector);
        // the file is complete once Firefox has renamed it from its .part name
        for (let k = 0; k < 200; k++) {
          const done = fs.readdirSync(dir).filter((f) => !f.endsWith('.part'));
          if (done.length && !fs.readdirSync(dir).some((f) => f.endsWith('.part')))
            return {text: fs.readFileSync(path.join(dir, done[0]), 'utf8'), filename: done[0]};
          await new Promise((ok) => setTimeout(ok, 50));
        }
        throw new Error(`no file saved in ${dir} after clicking ${selector}`);
      },
    };
  }
  throw new Error(`unknown browser ${kind} (chromium or firefox)`);
}

// The part of playwright's Page the tests use, on a puppeteer page.
class BidiPage {
  constructor(p) {
    this.p = p;
    this.mouse = p.mouse;
    this.keyboard = p.keyboard;
  }
  on(ev, fn) { this.p.on(ev, fn); }
  goto(url) { return this.p.goto(url); }
  url() { return this.p.url(); }
  close() { return this.p.close(); }
  screenshot(o) { return this.p.screenshot(o); }
  evaluate(fn, arg) { return this.p.evaluate(fn, arg); }
  $eval(sel, fn, arg) { return this.p.$eval(sel, fn, arg); }
  $$eval(sel, fn, arg) { return this.p.$$eval(sel, fn, arg); }
  waitForFunction(fn, arg, opts = {}) { return this.p.waitForFunction(fn, {timeout: opts.timeout || 30000}, arg); }
  click(sel) { return this.p.click(sel); }
  focus(sel) { return this.p.focus(sel); }
  type(sel, text) { return this.p.type(sel, text); }
  textContent(sel) { return this.p.$eval(sel, (e) => e.textContent); }
  inputValue(sel) { return this.p.$eval(sel, (e) => e.value); }
  isChecked(sel) { return this.p.$eval(sel, (e) => e.checked); }
  isVisible(sel) {
    return this.p.$eval(sel, (e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
    });
  }
  async check(sel) { if (!(await this.isChecked(sel))) await this.p.click(sel); }
  async uncheck(sel) { if (await this.isChecked(sel)) await this.p.click(sel); }
  selectOption(sel, value) { return this.p.select(sel, value); }
  // As playwright's fill: replace the field's text with real key input (so 'input' events fire
  // as a user's typing makes them).
  async fill(sel, value) {
    await this.p.$eval(sel, (e) => { e.focus(); e.select(); });
    if (value === '') await this.p.keyboard.press('Backspace');
    else await this.p.keyboard.type(value);
  }
}
