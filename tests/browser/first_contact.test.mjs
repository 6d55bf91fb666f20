// A real browser (Debian's Chromium, headless, driven by playwright-core) against a real sbxd:
// a page from an allowed origin gets a terminal ticket and opens the terminal; a page from a
// refused origin fails the way docs/api-contract.md says; a preview link to
// `python3 -m http.server` works across clicks. Started by tests/e2e/test_browser.py, which
// passes everything through the environment.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const env = process.env;
const API = env.SBX_API;           // http://127.0.0.1:PORT
const KEY = env.SBX_KEY;
const SANDBOX = env.SBX_SANDBOX;
const GOOD = env.SBX_GOOD_ORIGIN;  // a page server whose origin sbxd allows
const BAD = env.SBX_BAD_ORIGIN;    // one it does not
const PREVIEW = env.SBX_PREVIEW_LINK;

let browser;

before(async () => {
  browser = await chromium.launch({
    executablePath: env.SBX_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
});

after(async () => {
  await browser?.close();
});

// What a browser app does: fetch a ticket with the key, then open the WebSocket and type.
async function openTerminal(page, origin) {
  await page.goto(origin + '/app.html');
  return page.evaluate(async ({ api, key, sandbox }) => {
    let r;
    try {
      r = await fetch(`${api}/v1/sandboxes/${sandbox}/terminal-ticket`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: '{}',
      });
    } catch (e) {
      return { blocked: true, error: String(e) };
    }
    const { ticket } = await r.json();
    const ws = new WebSocket(`${api.replace('http', 'ws')}/v1/sandboxes/${sandbox}/terminal?ticket=${ticket}`);
    ws.binaryType = 'arraybuffer';
    return await new Promise((resolve) => {
      let text = '';
      const timer = setTimeout(() => resolve({ status: r.status, text, timeout: true }), 20000);
      ws.onmessage = (m) => {
        if (typeof m.data === 'string') {
          if (JSON.parse(m.data).type === 'ready') ws.send(new TextEncoder().encode('echo hi-$((6*7))\r'));
          return;
        }
        text += new TextDecoder().decode(m.data);
        if (text.includes('hi-42')) {
          clearTimeout(timer);
          ws.close();
          resolve({ status: r.status, text });
        }
      };
      ws.onclose = (e) => { clearTimeout(timer); resolve({ status: r.status, text, closed: e.code }); };
    });
  }, { api: API, key: KEY, sandbox: SANDBOX });
}

test('a page from an allowed origin gets a ticket and types into the terminal', async () => {
  const page = await browser.newPage();
  const got = await openTerminal(page, GOOD);
  assert.equal(got.status, 200, JSON.stringify(got));
  assert.match(got.text, /hi-42/);
  await page.close();
});

test('a page from a refused origin cannot call the API', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('console', (m) => errors.push(m.text()));
  const got = await openTerminal(page, BAD);
  assert.equal(got.blocked, true, JSON.stringify(got));
  assert.match(got.error, /Failed to fetch/);
  assert.ok(errors.some((e) => /CORS/.test(e)), errors.join('\n'));
  await page.close();
});

test('a preview link keeps working from link to link', async () => {
  const page = await browser.newPage();
  const first = await page.goto(PREVIEW);
  assert.equal(first.status(), 200);
  assert.ok(!page.url().includes('sbx_preview='), page.url()); // the token became a cookie
  await page.click('text=docs/');
  await page.waitForURL(/docs\/$/);
  await page.click('text=note.txt');
  await page.waitForURL(/note\.txt$/);
  assert.equal((await page.textContent('body')).trim(), 'hello from a file');
  const cookies = await page.context().cookies();
  const c = cookies.find((x) => x.name === 'sbx_preview');
  assert.ok(c && c.httpOnly && c.sameSite === 'Lax', JSON.stringify(cookies));
  await page.close();
});
