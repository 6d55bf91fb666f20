// The web console (docs/console.md) in Debian's headless Chromium against a real sbxd, as a
// new user meets it: sign in with a key, create a sandbox, run a command and watch its output
// stream in and read its receipt, type into the terminal and re-attach after a reload, upload
// and download a file, run a matplotlib cell and see its image, issue a preview link to a
// server in the sandbox, read the egress log, build a template and follow its log, use a
// volume, find all of it in the audit log; as an admin create a key (shown once), a
// configuration (variables masked, the probe's checks) with a skill whose install is followed
// live to the end, top up a wallet, list the nodes; and a viewer key that is offered no
// changes and is refused them anyway.
// Started by tests/e2e/test_console.py, which passes everything through the environment;
// a screenshot of each page goes to SBX_SHOTS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const env = process.env;
const API = env.SBX_API;
const CONSOLE = `${API}/console`;
const SHOTS = env.SBX_SHOTS;

let browser;
let page;
let sandbox;
let config;
const pageErrors = [];

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: env.SBX_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  page = await context.newPage();
  // A CSP violation or a script error shows up here and fails the last test.
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('dialog', (d) => d.accept());
});

after(async () => {
  await browser?.close();
});

const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

async function signIn(key) {
  await page.goto(CONSOLE);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForSelector('#who:not(:empty)');
}

// Presses Tab until the focus is on the element matching sel: what a keyboard user does.
async function tabTo(sel, max = 60) {
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s), sel)) return;
    await page.keyboard.press('Tab');
  }
  throw new Error(`Tab never reached ${sel}`);
}

// The page is no wider than the window: nothing to scroll sideways.
const noSideScroll = async (what) => assert.ok(
  await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), `${what} scrolls sideways`);

async function signOut() {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForSelector('#apikey');
}

test('the console is served with a strict Content-Security-Policy and no inline script', async () => {
  const r = await page.goto(CONSOLE);
  assert.equal(r.status(), 200);
  const csp = r.headers()['content-security-policy'];
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.equal(await page.locator('script:not([src])').count(), 0);
  await page.waitForSelector('#apikey');
  // A new user is told where the first key comes from, and sees no pages before signing in.
  assert.match(await page.locator('#keyhelp').textContent(), /admin key to <data-dir>\/admin\.key.*sudo cat data\/admin\.key/);
  assert.equal(await page.locator('#nav').isVisible(), false);
  assert.equal(await page.getByRole('button', { name: 'Sign out' }).isVisible(), false);
  await shot('signin');
});

test('a wrong key is refused with the API\'s code and request id', async () => {
  await page.getByLabel('API key').fill('sbx_not_a_key_at_all_000000000000');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForSelector('#error:not([hidden])');
  const text = await page.locator('#error').textContent();
  assert.match(text, /invalid_api_key/);
  assert.match(text, /req_/);
});

test('sign in (keyboard only) keeps the key in session storage only, then create a sandbox', async () => {
  await page.goto(CONSOLE);
  await page.waitForSelector('#apikey');
  // The key field has the focus: type the key and press Enter.
  assert.equal(await page.evaluate(() => document.activeElement.id), 'apikey');
  await page.keyboard.type(env.SBX_MEMBER_KEY);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#who:not(:empty)');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('sbx.console.key')), env.SBX_MEMBER_KEY);
  assert.equal(await page.evaluate(() => document.cookie), '');
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.ok(!page.url().includes(env.SBX_MEMBER_KEY));
  // No sandbox yet: the list says what to do, not just that it is empty.
  await page.waitForSelector('#sandboxes-empty');
  assert.match(await page.locator('#sandboxes-empty').textContent(), /No live sandboxes yet\. Press Create above/);
  // Every control of the create form has its label; the domains field only with "these domains…".
  const form = page.getByRole('form', { name: 'Create a sandbox' });
  const snap = await form.ariaSnapshot();
  for (const c of ['combobox "Template"', 'combobox "Configuration"', 'spinbutton "Time to live (s)"',
    'combobox "Network egress"', 'button "Create"']) assert.ok(snap.includes(c), `${c} in ${snap}`);
  assert.ok(!snap.includes('Allowed domains'), snap);
  await page.getByLabel('Network egress').selectOption('allowlist');
  assert.ok(await page.getByLabel('Allowed domains').isVisible());
  await page.getByLabel('Network egress').selectOption('');
  assert.equal(await page.getByLabel('Allowed domains').isVisible(), false);
  await shot('sandboxes-empty');
  // At 800 px wide the header and the list wrap rather than scroll sideways.
  await page.setViewportSize({ width: 800, height: 800 });
  await noSideScroll('the sandbox list at 800 px');
  await page.setViewportSize({ width: 1280, height: 800 });
  // Tab to the time to live, set it, Tab to Create, Enter.
  await tabTo('#ttl');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('900');
  await tabTo('form[aria-label="Create a sandbox"] button[type=submit]');
  await page.keyboard.press('Enter');
  await page.waitForURL(/#\/sandbox\//, { timeout: 120000 });
  // The sandbox opens on its command box, focused, which says what to do.
  await page.waitForSelector('#command');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'command');
  assert.match(await page.locator('#command-result').textContent(), /press Enter: its output streams in here/);
  assert.equal(await page.locator('#command-output').isVisible(), false);
  assert.match(await page.locator('#history tbody').textContent(), /No commands run in this sandbox yet/);
  sandbox = page.url().split('#/sandbox/')[1].split('/')[0];
  assert.ok(sandbox);
  await page.goto(`${CONSOLE}#/sandboxes`);
  await page.waitForSelector(`#sandboxes tr[data-id="${sandbox}"]`);
  assert.match(await page.locator(`tr[data-id="${sandbox}"]`).textContent(), /running/);
  await shot('sandboxes');
});

test('a command\'s output streams in before it ends (typed, then Enter)', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/command`);
  await page.waitForFunction(() => document.activeElement?.id === 'command');
  await page.keyboard.type('for i in 1 2 3; do echo line-$i; sleep 1; done; echo oops >&2');
  await page.keyboard.press('Enter');
  // line-1 is on screen while the command still runs (no exit line yet).
  await page.waitForFunction(() => (document.querySelector('#command-output')?.textContent || '').includes('line-1') &&
    (document.querySelector('#command-result')?.textContent || '').startsWith('running'), null, { timeout: 30000 });
  await page.waitForFunction(() => (document.querySelector('#command-result')?.textContent || '').startsWith('exit 0'), null, { timeout: 30000 });
  const out = await page.locator('#command-output').textContent();
  assert.match(out, /line-1\nline-2\nline-3\n/);
  assert.equal(await page.locator('#command-output .stderr').textContent(), 'oops\n');
  await page.waitForFunction(() => document.querySelectorAll('#history tbody tr').length >= 1);
  await shot('command');
});

test('typing in the terminal echoes, and a reload re-attaches to the same shell', async () => {
  // Reached from the command box with the keyboard: Tab to the Terminal tab, Enter.
  await tabTo('#tabbtn-terminal');
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/terminal$/);
  await page.waitForFunction(() => /connected to/.test((document.querySelector('#term-state')?.textContent || '')), null, { timeout: 30000 });
  const first = await page.locator('#term-state').textContent();
  // The shell's prompt is there, and the terminal has the focus: keys go to the shell.
  await page.waitForFunction(() => /\$ ?$/.test((document.querySelector('#terminal .xterm-rows')?.textContent || '').trim()), null, { timeout: 20000 });
  assert.ok(await page.evaluate(() => document.activeElement?.classList.contains('xterm-helper-textarea')));
  assert.match(await page.locator('#term-help').textContent(), /Ctrl\+\] leaves the terminal/);
  await page.keyboard.type('echo term-$((6*7))\n');
  await page.waitForFunction(() => (document.querySelector('#terminal .xterm-rows')?.textContent || '').includes('term-42'), null, { timeout: 20000 });
  await shot('terminal');
  // Tab belongs to the shell; Ctrl+] gives the focus back to the page.
  await page.keyboard.press('Control+BracketRight');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'New shell');
  await page.reload();
  await page.waitForFunction(() => /re-attached to/.test((document.querySelector('#term-state')?.textContent || '')), null, { timeout: 30000 });
  assert.equal((await page.locator('#term-state').textContent()).split(' ').pop(), first.split(' ').pop());
  await page.waitForFunction(() => (document.querySelector('#terminal .xterm-rows')?.textContent || '').includes('term-42'), null, { timeout: 20000 });
});

test('a background process\'s output is followed live', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/processes`);
  await page.getByLabel('Background command').fill('for i in 1 2 3; do echo tick-$i; sleep 1; done');
  await page.getByRole('button', { name: 'Start' }).click();
  await page.waitForFunction(() => {
    const t = document.querySelector('#proc-output')?.textContent || '';
    return t.includes('tick-1') && !t.includes('exit');
  }, null, { timeout: 30000 });
  await page.waitForFunction(() => (document.querySelector('#proc-output')?.textContent || '').includes('[completed, exit 0]'), null, { timeout: 30000 });
  assert.match(await page.locator('#proc-output').textContent(), /tick-1\ntick-2\ntick-3\n/);
  await page.waitForFunction(() => /completed/.test(document.querySelector('#processes tbody')?.textContent || ''));
  await shot('processes');
});

test('upload a file with progress, see it listed, download it back, preview its text', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/files`);
  const content = 'hello from the console\n'.repeat(20000);
  await page.getByLabel('Upload files into this directory').setInputFiles({ name: 'note.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
  await page.waitForSelector('#files tr[data-path="note.txt"]', { timeout: 30000 });
  const [dl] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download note.txt' }).click(),
  ]);
  assert.equal(dl.suggestedFilename(), 'note.txt');
  assert.equal(fs.readFileSync(await dl.path(), 'utf8'), content);
  await page.getByRole('button', { name: 'Preview note.txt' }).click();
  await page.waitForFunction(() => (document.querySelector('#preview pre')?.textContent || '').startsWith('hello from the console\n'));
  assert.equal((await page.locator('#preview pre').textContent()).length, 64 * 1024);
  await shot('files');
  // A PDF (made by the Python side) is drawn by pdf.js on a canvas, its download at hand;
  // no frame or object on the page.
  const pdf = fs.readFileSync(env.SBX_PDF);
  await page.locator('#upload').setInputFiles({ name: 'doc.pdf', mimeType: 'application/pdf', buffer: pdf });
  await page.getByRole('button', { name: 'Preview doc.pdf' }).click();
  await page.waitForSelector('#pdf-canvas[data-rendered="1"]', { timeout: 30000 });
  assert.equal(await page.locator('#pdf-page').textContent(), 'page 1 of 1');
  // The blue box is drawn: most pixels white, a good share of them blue.
  const [blue, inked] = await page.locator('#pdf-canvas').evaluate((c) => {
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let b = 0, ink = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] && (px[i] < 250 || px[i + 1] < 250 || px[i + 2] < 250)) ink++;
      if (px[i + 2] > 150 && px[i] < 80) b++;
    }
    return [b / (px.length / 4), ink / (px.length / 4)];
  });
  assert.ok(blue > 0.2 && inked < 0.6, `blue ${blue}, inked ${inked}`);
  const [pdl] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download PDF doc.pdf' }).click(),
  ]);
  assert.equal(pdl.suggestedFilename(), 'doc.pdf');
  assert.deepEqual(fs.readFileSync(await pdl.path()), pdf);
  assert.equal(await page.locator('#preview iframe, #preview object, #preview embed').count(), 0);
  await shot('files-pdf');
});

test('an artifact under out/ is listed with its MIME, SHA-256 and a clean scan', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/command`);
  await page.getByLabel('Command', { exact: true }).fill('mkdir -p out && printf artifact > out/result.txt');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.waitForFunction(() => (document.querySelector('#command-result')?.textContent || '').startsWith('exit 0'), null, { timeout: 30000 });
  await page.getByRole('tab', { name: 'Artifacts' }).click();
  const row = page.locator('#artifacts tr[data-path="result.txt"], #artifacts tr[data-path="out/result.txt"]');
  await row.waitFor({ timeout: 120000 });
  const text = await row.textContent();
  assert.match(text, /text\/plain/);
  assert.match(text, /clean/);
  // sha256("artifact")
  assert.equal(await row.locator('td[title]').getAttribute('title'),
    'c7c5c1d70c5dec4416ab6158afd0b223ef40c29b1dc1f97ed9428b94d4cadb1c');
  await shot('artifacts');
});

test('a matplotlib cell shows its plot as an image', async () => {
  // With the keyboard: Tab to the Python tab, Enter; the rebuilt page keeps the focus there.
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/files`);
  await tabTo('#tabbtn-python');
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/python$/);
  await page.waitForFunction(() => document.activeElement?.id === 'tabbtn-python');
  // The sample cell draws a plot; Ctrl+Enter in the cell runs it.
  assert.match(await page.locator('#cell-help').textContent(), /Ctrl\+Enter runs the cell/);
  await tabTo('#code');
  await page.keyboard.press('Control+Enter');
  await page.waitForSelector('#cells img', { timeout: 120000 });
  await page.setViewportSize({ width: 800, height: 800 });
  await noSideScroll('a plot at 800 px');
  await page.setViewportSize({ width: 1280, height: 800 });
  const size = await page.locator('#cells img').evaluate((img) => img.decode().then(() => [img.naturalWidth, img.naturalHeight]));
  assert.ok(size[0] > 100 && size[1] > 100, `image ${size}`);
  await shot('python');
});

test('a cell\'s HTML output is shown as a table, its script, handlers and links dropped', async () => {
  let dialogs = 0;
  const count = () => { dialogs++; };
  page.on('dialog', count);
  const before = pageErrors.length;
  await page.getByLabel('Python code').fill(`display(HTML('''<style>td { color: red }</style>
<table border="1" class="dataframe" onclick="alert(1)"><thead><tr><th>city</th><th colspan="2" style="color:red">rain</th></tr></thead>
<tbody><tr><td>Cluj</td><td><b>61</b></td><td><img src="x" onerror="alert(2)"><a href="javascript:alert(3)">mm</a></td></tr></tbody></table>
<script>alert(4)</script><iframe src="/console"></iframe>'''))`);
  await page.getByRole('button', { name: 'Run cell' }).click();
  await page.waitForSelector('#cells .rich table', { timeout: 60000 });
  const rich = page.locator('#cells .rich').first();
  assert.equal(await rich.locator('script, style, img, a, iframe').count(), 0);
  assert.equal(await rich.locator('th[colspan="2"]').textContent(), 'rain');
  assert.equal(await rich.locator('td b').textContent(), '61');
  // No attribute survives but a cell's span.
  const attrs = await rich.evaluate((el) => [...el.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((a) => a.name)));
  assert.deepEqual(attrs, ['colspan']);
  assert.match(await rich.textContent(), /^\s*city\s*rain\s*Cluj\s*61\s*mm\s*$/);
  page.off('dialog', count);
  assert.equal(dialogs, 0);
  // Chromium parses the output under the page's CSP, which refuses (and reports) the two
  // handlers as the parser meets them, before the allowlist drops them: nothing else.
  const refused = pageErrors.splice(before);
  assert.equal(refused.length, 2, String(refused));
  for (const e of refused) assert.match(e, /^Executing inline event handler violates the following Content Security Policy/);
  await shot('python-html');
});

test('an SVG output is shown as an image, its script inert; a data: image inside HTML is kept, a remote one dropped', async () => {
  let dialogs = 0;
  const count = () => { dialogs++; };
  page.on('dialog', count);
  await page.getByLabel('Python code').fill(`class Badge:
    def _repr_svg_(self):
        return ('<svg xmlns="http://www.w3.org/2000/svg" width="160" height="60">'
                '<rect width="160" height="60" rx="8" fill="#2456c7"/>'
                '<text x="80" y="37" fill="white" font-size="18" text-anchor="middle">SVG output</text>'
                '<script>alert(5)</script></svg>')
display(Badge())
import io, base64, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
f = plt.figure(figsize=(2.4, 1.4)); plt.bar(["a", "b", "c"], [3, 1, 2]); b = io.BytesIO(); f.savefig(b, format="png"); plt.close(f)
display(HTML(f'<p>A chart inside HTML:</p><img alt="bars" width="240" src="data:image/png;base64,{base64.b64encode(b.getvalue()).decode()}">'
             '<img alt="remote" src="https://example.com/x.png"><img alt="svg-link" src="javascript:alert(6)">'))`);
  await page.getByRole('button', { name: 'Run cell' }).click();
  await page.waitForSelector('#cells img.svg', { timeout: 60000 });
  const svg = page.locator('#cells img.svg').first();
  assert.match(await svg.getAttribute('src'), /^data:image\/svg\+xml/);
  assert.deepEqual(await svg.evaluate((img) => img.decode().then(() => [img.naturalWidth, img.naturalHeight])), [160, 60]);
  // Never an <svg> element in the page: its script has nowhere to run.
  assert.equal(await page.locator('#cells svg, #cells script').count(), 0);
  const rich = page.locator('#cells .rich').first();
  await rich.locator('img[alt="bars"]').waitFor();
  assert.equal(await rich.locator('img').count(), 1);
  const attrs = await rich.locator('img').evaluate((img) => [...img.attributes].map((a) => a.name).sort());
  assert.deepEqual(attrs, ['alt', 'src', 'width']);
  assert.ok(await rich.locator('img').evaluate((img) => img.decode().then(() => img.naturalWidth > 100)));
  page.off('dialog', count);
  assert.equal(dialogs, 0);
  await shot('python-svg');
});

test('the exec history opens a command\'s receipt', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/command`);
  await page.waitForSelector('#history tbody tr button');
  // The newest: the command that wrote out/result.txt (the artifacts test).
  await page.locator('#history tbody tr button').first().click();
  await page.waitForSelector('#receipt table');
  const text = await page.locator('#receipt').textContent();
  assert.match(text, /command_sha256[0-9a-f]{64}/);
  assert.match(text, /workspace generation\d+ → \d+/);
  // sha256("artifact"), as the artifacts tab showed it.
  assert.match(text, /out\/result\.txt 8 B c7c5c1d70c5dec4416ab6158afd0b223ef40c29b1dc1f97ed9428b94d4cadb1c/);
  await shot('receipt');
});

test('a preview link reaches a server started in the sandbox', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/processes`);
  await page.getByLabel('Background command').fill('mkdir -p site && echo preview-from-the-console > site/index.html && cd site && python3 -m http.server 8000');
  await page.getByRole('button', { name: 'Start' }).click();
  await page.waitForFunction(() => /running/.test(document.querySelector('#processes tbody')?.textContent || ''));
  await page.getByRole('tab', { name: 'Preview links' }).click();
  await page.getByLabel('Port').fill('8000');
  await page.getByRole('button', { name: 'Issue link' }).click();
  const link = page.locator('#preview-links li[data-port="8000"] a');
  await link.waitFor({ timeout: 30000 });
  const r = await fetch(await link.getAttribute('href'));
  assert.equal(r.status, 200);
  assert.match(await r.text(), /preview-from-the-console/);
  await page.waitForFunction(() => /8000/.test(document.querySelector('#previews tbody')?.textContent || ''));
  await shot('preview');
});

test('the egress log shows a connection the policy refused', async () => {
  await page.goto(`${CONSOLE}#/sandbox/${sandbox}/command`);
  await page.getByLabel('Command', { exact: true }).fill(
    'python3 -c "import urllib.request as u; u.urlopen(\'http://blocked.example.com/\', timeout=10)" 2>&1 | tail -1');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.waitForFunction(() => (document.querySelector('#command-result')?.textContent || '').startsWith('exit'), null, { timeout: 30000 });
  await page.getByRole('tab', { name: 'Egress log' }).click();
  await page.waitForSelector('#egress tbody tr[data-id]');
  const row = await page.locator('#egress tbody tr[data-id]').first().textContent();
  assert.match(row, /blocked\.example\.com/);
  assert.match(row, /denied/);
  assert.match(await page.locator('#egress-policy').textContent(), /none/);
  await shot('egress');
  // The policy changed on the running sandbox: an allowlist, shown as the API now has it.
  await page.getByLabel('Network egress').selectOption('allowlist');
  await page.getByLabel('Allowed domains').fill('example.org pypi.org');
  await page.getByRole('button', { name: 'Set policy' }).click();
  await page.waitForFunction(() => /allowlist: example\.org, pypi\.org/.test(document.querySelector('#egress-policy')?.textContent || ''));
  await shot('egress-change');
  await page.getByLabel('Network egress').selectOption('none');
  await page.getByRole('button', { name: 'Set policy' }).click();
  await page.waitForFunction(() => /Policy: none/.test(document.querySelector('#egress-policy')?.textContent || ''));
});

test('a template build\'s log streams in, step by step, to its end', async () => {
  await page.goto(`${CONSOLE}#/templates`);
  await page.getByLabel('Name', { exact: true }).fill('console-demo');
  await page.getByRole('button', { name: 'Add a file' }).click();
  await page.getByLabel('File 1 path').fill('/etc/console-demo.conf');
  await page.getByLabel('Content').fill('made-by-a-recipe-file\n');
  await page.getByLabel('Run', { exact: true }).fill('echo built-by-the-console > /etc/console-demo\ncat /etc/console-demo /etc/console-demo.conf; echo a-warning >&2');
  await page.getByLabel('Start command (at every boot)').fill('touch /tmp/console-started');
  await page.getByLabel('Ready check (polled until it passes)').fill('test -e /tmp/console-started');
  await page.getByRole('button', { name: 'Build', exact: true }).click();
  // A step is on screen while the build runs, then its end.
  await page.waitForFunction(() => /\(\d+\/\d+\)/.test(document.querySelector('#build-step')?.textContent || ''), null, { timeout: 60000 });
  await page.waitForFunction(() => (document.querySelector('#build-end')?.textContent || '') !== '', null, { timeout: 400000 });
  assert.match(await page.locator('#build-end').textContent(), /^Built/);
  const log = await page.locator('#build-log').textContent();
  assert.match(log, /── files[\s\S]*── run 1\/2[\s\S]*built-by-the-console\nmade-by-a-recipe-file\n[\s\S]*── ready/);
  // Each line under its own stream: stderr in red, stdout not.
  assert.deepEqual(await page.locator('#build-log span.stderr').allTextContents(), ['a-warning\n']);
  await page.waitForSelector('#templates tr[data-name="console-demo"]');
  await shot('template-build');
  await page.getByRole('button', { name: 'Delete template console-demo' }).click();
  await page.waitForSelector('#templates tr[data-name="console-demo"]', { state: 'detached' });
});

test('a volume is created, gets a file and a directory, and is deleted', async () => {
  await page.goto(`${CONSOLE}#/volumes`);
  await page.getByLabel('Name').fill('console-vol');
  await page.getByRole('button', { name: 'Create volume' }).click();
  await page.locator('#volumes tr[data-name="console-vol"] a').click();
  await page.waitForSelector('#volume-files #files');
  await page.locator('#upload').setInputFiles({ name: 'data.csv', mimeType: 'text/csv', buffer: Buffer.from('a,b\n1,2\n') });
  await page.waitForSelector('#files tr[data-path="data.csv"]', { timeout: 30000 });
  await page.getByLabel('New directory').fill('results');
  await page.getByRole('button', { name: 'Make directory' }).click();
  await page.waitForSelector('#files tr[data-path="results"]');
  await page.getByRole('button', { name: 'Preview data.csv' }).click();
  await page.waitForFunction(() => (document.querySelector('#preview pre')?.textContent || '') === 'a,b\n1,2\n');
  await shot('volume');
  await page.goto(`${CONSOLE}#/volumes`);
  await page.waitForSelector('#volumes tr[data-name="console-vol"]');
  assert.match(await page.locator('#volumes tr[data-name="console-vol"]').textContent(), /of 1\.00 GiB/);
  await shot('volumes');
  await page.getByRole('button', { name: 'Delete volume console-vol' }).click();
  await page.waitForSelector('#volumes tr[data-name="console-vol"]', { state: 'detached' });
});

test('the audit log shows what was done, filtered to the sandbox', async () => {
  await page.goto(`${CONSOLE}#/audit?sandbox_id=${sandbox}`);
  await page.waitForSelector('#audit tbody tr');
  const actions = await page.locator('#audit td.action').allTextContents();
  for (const a of ['sandbox.create', 'exec', 'terminal.open', 'file.upload', 'file.download', 'run_code', 'sandbox.preview'])
    assert.ok(actions.includes(a), `${a} not in ${actions}`);
  await shot('audit');
});

test('the usage page charts today\'s exec time', async () => {
  await page.goto(`${CONSOLE}#/usage`);
  const bars = page.locator('#usage-chart svg rect[data-series="exec"]');
  await bars.first().waitFor({ state: 'attached' });
  assert.equal(await bars.count(), 14);
  // Today's bar (the last) is the commands and cells this test ran: not empty.
  assert.ok(Number(await bars.last().getAttribute('height')) > 0);
  await shot('usage');
});

test('the templates page lists the base template with what it holds', async () => {
  await page.goto(`${CONSOLE}#/templates`);
  await page.waitForSelector('#templates tr[data-name="base"]');
  assert.match(await page.locator('#templates tr[data-name="base"]').textContent(), /Debian packages/);
  await shot('templates');
});

test('an admin creates a key and sees it once', async () => {
  await signOut();
  await signIn(env.SBX_ADMIN_KEY);
  await page.goto(`${CONSOLE}#/keys`);
  await page.getByLabel('User').fill('carol');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.waitForSelector('#newkey-secret');
  assert.match(await page.locator('#newkey-secret').textContent(), /^sbx_/);
  await page.waitForFunction(() => (document.querySelector('#keys')?.textContent || '').includes('carol'));
  await shot('keys');
  await page.goto(`${CONSOLE}#/sandboxes`);
  assert.equal(await page.locator('#newkey-secret').count(), 0);
});

test('an admin makes a configuration: variables masked, edited, probed; a taken name is an error with its request id', async () => {
  await page.goto(`${CONSOLE}#/configs`);
  await page.getByLabel('Name', { exact: true }).fill('console-cfg');
  await page.getByLabel('Description').fill('made in the console');
  await page.getByLabel(/^Configuration \(JSON/).fill(JSON.stringify({ template: 'base', env_vars: { CFG_TOKEN: 's3cret-value-42' } }));
  await page.getByRole('button', { name: 'Create configuration' }).click();
  await page.waitForURL(/#\/config\//);
  config = page.url().split('#/config/')[1];
  await page.waitForSelector('#env-vars');
  assert.match(await page.locator('#env-vars').textContent(), /CFG_TOKEN.*masked/);
  assert.ok(!(await page.content()).includes('s3cret-value-42'), 'a secret reached the page');
  await page.getByLabel('Description').fill('made and edited in the console');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.waitForFunction(() => /^Saved/.test(document.querySelector('#cfg-saved')?.textContent || ''));
  await page.getByRole('button', { name: 'Run the probe' }).click();
  await page.waitForSelector('#probe-checks tr[data-check="template"]', { timeout: 60000 });
  assert.match(await page.locator('#probe-checks tr[data-check="config"]').textContent(), /✓ ok/);
  assert.match(await page.locator('#probe-checks tr[data-check="template"]').textContent(), /✓ ok/);
  await shot('config');
  await page.goto(`${CONSOLE}#/configs`);
  await page.waitForSelector('#configs tr[data-name="console-cfg"]');
  assert.match(await page.locator('#configs tr[data-name="console-cfg"]').textContent(), /made and edited/);
  await shot('configs');
  await page.getByLabel('Name', { exact: true }).fill('console-cfg');
  await page.getByRole('button', { name: 'Create configuration' }).click();
  await page.waitForSelector('#error:not([hidden])');
  const err = await page.locator('#error').textContent();
  assert.match(err, /sandbox_config_exists/);
  assert.match(err, /request id req_/);
});

test('a skill bundle installs into the configuration, its progress and transcript followed live to the end', async () => {
  await page.goto(`${CONSOLE}#/config/${config}`);
  await page.waitForSelector('#config-skills');
  await page.locator('#skill-bundle').setInputFiles(env.SBX_SKILL_BUNDLE);
  await page.waitForSelector('#install-progress');
  // Part way: a stage past queued with its percent, before the end.
  await page.waitForFunction(() => /^(sandbox|unpack|install|snapshot) · \d+%/.test(document.querySelector('#install-stage')?.textContent || ''), null, { timeout: 120000 });
  // The script waits for guidance: sent from the page, listed, and read by the script.
  await page.getByLabel(/^Guidance to the install/).fill('proceed-from-the-console');
  await page.getByRole('button', { name: 'Send guidance' }).click();
  await page.waitForSelector('#guidance-messages li');
  assert.match(await page.locator('#guidance-messages li').first().textContent(), /^proceed-from-the-console · (queued|delivered)$/);
  await page.waitForFunction(() => /done$/.test(document.querySelector('#install-stage')?.textContent || ''), null, { timeout: 240000 });
  assert.equal(await page.locator('#install-stage').textContent(), 'ready · done');
  assert.equal(await page.locator('#install-progress').evaluate((p) => p.value), 100);
  assert.match(await page.locator('#install-log').textContent(), /install-step-1\ninstall-step-2\ninstall-step-3/);
  // A line the script wrote in two goes, read as two chunks, is one line of the log.
  assert.match(await page.locator('#install-log').textContent(), /\none-line-in-two-writes\n/);
  assert.match(await page.locator('#install-log').textContent(), /\nguided: proceed-from-the-console\n/);
  await page.waitForFunction(() => /\[guidance\] proceed-from-the-console/.test(document.querySelector('#install-transcript')?.textContent || ''));
  // The round has ended: no more guidance is taken.
  await page.waitForSelector('form[aria-label="Send guidance to the install"]', { state: 'hidden' });
  await page.waitForFunction(() => /install-step-3/.test(document.querySelector('#install-transcript')?.textContent || ''));
  assert.equal(await page.locator('#install-transcript .stderr').count(), 0);
  assert.match(await page.locator('#install').textContent(), /^Installing console-demo/);
  await page.waitForFunction(() => /ready/.test(document.querySelector('#config-skills tr[data-name="console-demo"]')?.textContent || ''));
  assert.match(await page.locator('#config-skills tr[data-name="console-demo"]').textContent(), /DEMO_TOKEN: not set/);
  await shot('skills');
  // The install's own variable, set for this configuration: shown as set, never its value.
  await page.getByRole('button', { name: 'Variables of console-demo' }).click();
  await page.getByLabel('Value of DEMO_TOKEN').fill('install-secret-9');
  await page.getByRole('button', { name: 'Save DEMO_TOKEN' }).click();
  await page.waitForFunction(() => /DEMO_TOKEN: set/.test(document.querySelector('#config-skills tr[data-name="console-demo"]')?.textContent || ''));
  assert.equal(await page.locator('#skill-vars tr[data-name="DEMO_TOKEN"] .skillvar-state').textContent(), 'set');
  assert.ok(!(await page.content()).includes('install-secret-9'), 'a value reached the page');
  await page.locator('#install-vars').scrollIntoViewIfNeeded();
  await shot('skill-vars');
  // A sandbox made from the configuration has the skill and what its install script left.
  await page.goto(`${CONSOLE}#/sandboxes`);
  await page.waitForSelector('#config option:nth-child(2)', { state: 'attached' });
  await page.getByLabel('Configuration').selectOption({ label: 'console-cfg' });
  await page.getByRole('button', { name: 'Create' }).click();
  await page.waitForURL(/#\/sandbox\//, { timeout: 120000 });
  await page.getByLabel('Command', { exact: true }).fill('cat /workspace/skills/console-demo/installed.marker; echo "token ${#CFG_TOKEN}"');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.waitForFunction(() => (document.querySelector('#command-result')?.textContent || '').startsWith('exit 0'), null, { timeout: 30000 });
  assert.equal(await page.locator('#command-output').textContent(), 'done\ntoken 15\n');
  // The configuration's page lists that sandbox, and its templates query answers.
  const made = page.url().split('#/sandbox/')[1].split('/')[0];
  await page.goto(`${CONSOLE}#/config/${config}`);
  await page.waitForSelector(`#config-sandboxes tr[data-id="${made}"]`);
  assert.match(await page.locator(`#config-sandboxes tr[data-id="${made}"]`).textContent(), /running/);
  await page.getByRole('button', { name: 'Query templates' }).click();
  await page.waitForSelector('#cfg-template-list li[data-name="base"]');
  assert.match(await page.locator('#cfg-templates').textContent(), /its template base · base: built/);
  await page.locator('#inventory').scrollIntoViewIfNeeded();
  await shot('config-inventory');
  // Asked to ensure desktop, which this cache lacks: 202, the operator's script's build
  // followed live to its end, then the query asked again finds it built.
  await page.getByLabel('Build desktop if it is not').check();
  await page.getByRole('button', { name: 'Query templates' }).click();
  await page.waitForFunction(() => /desktop: building/.test(document.querySelector('#cfg-templates')?.textContent || ''), null, { timeout: 30000 });
  await page.waitForFunction(() => (document.querySelector('#cfg-template-build #build-end')?.textContent || '') !== '', null, { timeout: 300000 });
  assert.match(await page.locator('#cfg-template-build #build-end').textContent(), /^Built/);
  assert.match(await page.locator('#cfg-template-build #build-log').textContent(), /── script/);
  await page.waitForFunction(() => /desktop: built/.test(document.querySelector('#cfg-templates')?.textContent || ''), null, { timeout: 30000 });
  await page.locator('#templates-query').scrollIntoViewIfNeeded();
  await shot('config-templates-build');
  // Making desktop its template is refused, before anything is built: the configuration
  // does not enable the desktop.
  await page.getByLabel('Build desktop if it is not').uncheck();
  await page.getByLabel('Make its template').selectOption('desktop');
  await page.getByRole('button', { name: 'Query templates' }).click();
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await page.locator('#error').textContent(), /invalid_sandbox_config.*request id req_/);
  await page.getByLabel('Make its template').selectOption('');
});

test('the skill catalog lists the uploaded skill where it is installed, and refuses to delete it while it is', async () => {
  await page.goto(`${CONSOLE}#/skills`);
  const row = page.locator('#catalog tr[data-name="console-demo"]');
  await row.waitFor();
  assert.match(await row.textContent(), /1\.0\.0.*upload.*DEMO_TOKEN.*console-cfg · ready/);
  assert.match(await page.locator('#catalog tr[data-name="docx"]').textContent(), /shipped/);
  await shot('catalog');
  await page.getByRole('button', { name: 'Delete console-demo from the catalog' }).click();
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await page.locator('#error').textContent(), /skill_in_use.*request id req_/);
});

test('an admin switches the workspace policy off and on again', async () => {
  await page.goto(`${CONSOLE}#/configs`);
  const box = page.getByLabel('Disable workspace scripts (skill install scripts)');
  await box.waitFor();
  assert.equal(await box.isChecked(), false);
  assert.equal(await page.locator('#workspace-scripts').textContent(), 'allowed');
  await box.check();
  await page.waitForFunction(() => /^disabled/.test(document.querySelector('#workspace-scripts')?.textContent || ''));
  await shot('workspace-policy');
  // As the API keeps it: a reload shows it disabled.
  await page.reload();
  await page.waitForFunction(() => /^disabled/.test(document.querySelector('#workspace-scripts')?.textContent || ''));
  await page.getByLabel('Disable workspace scripts (skill install scripts)').uncheck();
  await page.waitForFunction(() => (document.querySelector('#workspace-scripts')?.textContent || '') === 'allowed');
});

test('personal variables: set for a configuration and for a skill, shown by source only, deleted', async () => {
  await page.goto(`${CONSOLE}#/variables`);
  const card = page.locator('#my-vars section[data-config="console-cfg"]');
  await card.waitFor();
  assert.match(await card.locator('tr[data-name="CFG_TOKEN"]').textContent(), /the configuration's/);
  // The configuration's value of the skill's variable, set on its install above.
  assert.match(await card.locator('tr[data-scope="skill"][data-name="DEMO_TOKEN"]').textContent(), /skill console-demo.*the configuration's/);
  await page.getByRole('combobox', { name: /^For/ }).selectOption({ label: 'configuration console-cfg' });
  await page.getByLabel('Variable', { exact: true }).fill('MY_NOTE');
  await page.getByLabel('Value (never shown again)').fill('personal-secret-7');
  await page.getByRole('button', { name: 'Set variable' }).click();
  await card.locator('tr[data-name="MY_NOTE"]').waitFor();
  assert.match(await card.locator('tr[data-name="MY_NOTE"]').textContent(), /yours/);
  const skill = await page.locator('#myvar-target option', { hasText: 'skill console-demo' }).getAttribute('value');
  await page.getByRole('combobox', { name: /^For/ }).selectOption(skill);
  await page.getByLabel('Variable', { exact: true }).fill('DEMO_TOKEN');
  await page.getByLabel('Value (never shown again)').fill('skill-secret-8');
  await page.getByRole('button', { name: 'Set variable' }).click();
  await page.waitForFunction(() => /yours/.test(document.querySelector('#my-vars section[data-config="console-cfg"] tr[data-scope="skill"][data-name="DEMO_TOKEN"]')?.textContent || ''));
  const html = await page.content();
  assert.ok(!html.includes('personal-secret-7') && !html.includes('skill-secret-8'), 'a value reached the page');
  await shot('variables');
  await page.getByRole('button', { name: 'Delete my MY_NOTE for configuration console-cfg' }).click();
  await card.locator('tr[data-name="MY_NOTE"]').waitFor({ state: 'detached' });
});

test('an admin tops up a wallet and sees it charted per day', async () => {
  await page.goto(`${CONSOLE}#/wallet?user=alice`);
  await page.waitForSelector('#wallet');
  await page.getByLabel('Amount (€)').fill('5');
  await page.getByLabel('Note').fill('from the console test');
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  await page.waitForFunction(() => (document.querySelector('#balance')?.textContent || '').startsWith('5.00'));
  assert.match(await page.locator('#ledger tbody').textContent(), /top_up.*5\.00 €/);
  const bar = page.locator('#wallet-chart svg rect[data-series="added"]').last();
  assert.ok(Number(await bar.getAttribute('height')) > 0);
  await shot('wallet');
});

test('an admin lists the nodes', async () => {
  await page.goto(`${CONSOLE}#/nodes`);
  await page.waitForSelector('#nodes tbody tr');
  const row = await page.locator('#nodes tbody tr').first().textContent();
  assert.match(row, /this one/);
  assert.match(row, /live/);
  await shot('nodes');
});

test('a viewer key is offered no create or delete, and the API refuses a delete', async () => {
  await signOut();
  await signIn(env.SBX_VIEWER_KEY);
  await page.goto(`${CONSOLE}#/sandboxes`);
  // What the key cannot do and what to do instead, not an error over an empty list.
  await page.waitForSelector('#viewer-note');
  assert.match(await page.locator('#viewer-note').textContent(), /sign in with a member key/);
  assert.equal(await page.locator('#error').isVisible(), false);
  assert.equal(await page.getByRole('button', { name: /^Delete/ }).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'Create' }).count(), 0);
  const r = await page.evaluate(async (id) => {
    const res = await fetch(`/v1/sandboxes/${id}`, { method: 'DELETE',
      headers: { Authorization: `Bearer ${sessionStorage.getItem('sbx.console.key')}` } });
    return [res.status, (await res.json()).error.code];
  }, sandbox);
  assert.deepEqual(r, [403, 'member_required']);
  await shot('viewer');
});

test('a viewer reads configurations but is offered no change, and the API refuses one', async () => {
  await page.goto(`${CONSOLE}#/configs`);
  await page.waitForSelector('#configs tr[data-name="console-cfg"]');
  assert.equal(await page.getByRole('button', { name: 'Create configuration' }).count(), 0);
  await page.goto(`${CONSOLE}#/config/${config}`);
  await page.waitForSelector('#env-vars');
  for (const name of ['Save', 'Run the probe', 'Delete configuration', 'Install', 'Query templates'])
    assert.equal(await page.getByRole('button', { name, exact: true }).count(), 0, name);
  assert.match(await page.locator('#skills').textContent(), /admins only/);
  assert.equal(await page.locator('#config-sandboxes').count(), 0);
  await shot('viewer-config');
  const r = await page.evaluate(async (id) => {
    const res = await fetch(`/v1/sandbox-configs/${id}`, { method: 'PUT',
      headers: { Authorization: `Bearer ${sessionStorage.getItem('sbx.console.key')}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'taken-over', config: {} }) });
    return [res.status, (await res.json()).error.code];
  }, config);
  assert.deepEqual(r, [403, 'admin_required']);
  await page.goto(`${CONSOLE}#/templates`);
  await page.waitForSelector('#templates');
  assert.equal(await page.getByRole('button', { name: 'Build', exact: true }).count(), 0);
  await page.goto(`${CONSOLE}#/volumes`);
  await page.waitForSelector('#volumes');
  assert.equal(await page.getByRole('button', { name: 'Create volume' }).count(), 0);
  await page.goto(`${CONSOLE}#/wallet`);
  await page.waitForSelector('#wallet');
  assert.equal(await page.getByRole('button', { name: 'Add', exact: true }).count(), 0);
  await page.goto(`${CONSOLE}#/variables`);
  await page.waitForSelector('#my-vars section');
  assert.equal(await page.getByRole('button', { name: 'Set variable' }).count(), 0);
  await page.goto(`${CONSOLE}#/skills`);
  await page.waitForSelector('#catalog tr[data-name="console-demo"]');
  assert.equal(await page.getByRole('button', { name: /^(Delete|Install) / }).count(), 0);
  assert.equal(await page.locator('#catalog-bundle').count(), 0);
});

test('no page error or CSP violation on the way', () => {
  // The refusals this test provokes (a wrong key, a viewer, a taken name, a skill in use, a
  // replace the configuration does not allow) log their status.
  assert.deepEqual(pageErrors.filter((e) => !/status of 40[0139]/.test(e)), []);
});
