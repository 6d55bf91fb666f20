// The client's own behaviour against a small local server (127.0.0.1) that answers what a
// test needs: retries only on 503 sandbox_capacity, never on 4xx; timeoutMs and AbortSignal;
// a stream dropped mid-way raises with the exec id.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Sbx, SbxError, SbxStreamError } from '../dist/index.js';

let server;
let base;
const seen = [];
let script = () => {};

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      script(req, res, seen.length);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server.closeAllConnections();
  server.close();
});

function answer(res, status, obj, rid = 'req_test') {
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': rid });
  res.end(JSON.stringify(obj));
}

const client = () => new Sbx({ baseUrl: base, apiKey: 'sbx_test', retryBaseMs: 5 });

test('503 sandbox_capacity is retried with backoff, then succeeds', async () => {
  seen.length = 0;
  script = (req, res, n) => n < 3
    ? answer(res, 503, { error: { code: 'sandbox_capacity', message: 'full' } })
    : answer(res, 201, { id: 'sb_1', object: 'sandbox' });
  const sb = await client().sandboxes.create({ backend: 'v2' }, { idempotencyKey: 'k1' });
  assert.equal(sb.id, 'sb_1');
  assert.equal(seen.length, 3);
  for (const s of seen) {
    assert.equal(s.headers['idempotency-key'], 'k1');
    assert.equal(s.headers.authorization, 'Bearer sbx_test');
    assert.deepEqual(JSON.parse(s.body), { backend: 'v2' });
  }
});

test('503 sandbox_capacity gives up after maxRetries with the API error', async () => {
  seen.length = 0;
  script = (req, res) => answer(res, 503, { error: { code: 'sandbox_capacity', message: 'full' } });
  const c = new Sbx({ baseUrl: base, apiKey: 'sbx_test', retryBaseMs: 1, maxRetries: 2 });
  await assert.rejects(c.sandboxes.create(), (e) =>
    e instanceof SbxError && e.status === 503 && e.code === 'sandbox_capacity' &&
    e.requestId === 'req_test');
  assert.equal(seen.length, 3);
});

test('4xx and other 503s are never retried', async () => {
  for (const [status, code] of [[429, 'sandbox_concurrency_limit'], [409, 'sandbox_busy'],
                                [400, 'invalid_ttl'], [503, 'kernel_unavailable']]) {
    seen.length = 0;
    script = (req, res) => answer(res, status, { error: { code, message: 'no' } }, 'req_' + code);
    await assert.rejects(client().sandboxes.create({ ttl_seconds: 5 }), (e) =>
      e instanceof SbxError && e.status === status && e.code === code && e.message === 'no' &&
      e.requestId === 'req_' + code);
    assert.equal(seen.length, 1, code);
  }
});

test('timeoutMs ends a call that gets no answer', async () => {
  script = () => {}; // never answers
  await assert.rejects(client().sandboxes.get('sb_1', { timeoutMs: 100 }),
                       (e) => e instanceof SbxError && e.code === 'timeout');
});

test('an AbortSignal cancels a call', async () => {
  script = () => {};
  const ac = new AbortController();
  const p = client().sandboxes.list({ signal: ac.signal });
  setTimeout(() => ac.abort(), 20);
  await assert.rejects(p, (e) => e.name === 'AbortError');
});

test('a dropped exec stream raises SbxStreamError with the exec id', async () => {
  script = (req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req_s' });
    res.write('data: {"type":"start","exec_id":"ex_42","sandbox_id":"sb_1"}\n\n');
    res.write('data: {"type":"stdout","data":"partial"}\n\n');
    setTimeout(() => res.destroy(), 20); // the connection drops without an exit event
  };
  const got = [];
  await assert.rejects(async () => {
    for await (const ev of client().sandboxes.execStream('sb_1', { shell: 'x' })) got.push(ev.type);
  }, (e) => e instanceof SbxStreamError && e.execId === 'ex_42' && e.sandboxId === 'sb_1' &&
    e.requestId === 'req_s' && /ex_42/.test(e.message));
  assert.deepEqual(got, ['start', 'stdout']);
  assert.equal(seen.at(-1).headers.accept, 'text/event-stream');
});

test('a stream that ends cleanly without its last event is a drop too', async () => {
  script = (req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('data: {"type":"start","exec_id":"ex_7","sandbox_id":"sb_1"}\n\n');
  };
  await assert.rejects(async () => {
    for await (const _ of client().sandboxes.execStream('sb_1', { shell: 'x' })); // eslint-disable-line
  }, (e) => e instanceof SbxStreamError && e.execId === 'ex_7');
});

test('file paths keep their slashes and escape the rest; env configures the client', async () => {
  script = (req, res) => answer(res, 200, { object: 'file', path: 'a b/c', size: 1 });
  process.env.SBX_URL = base;
  process.env.SBX_API_KEY = 'sbx_from_env';
  try {
    await new Sbx().sandboxes.files.put('sb_1', 'dir one/x#y.txt', 'z');
  } finally {
    delete process.env.SBX_URL;
    delete process.env.SBX_API_KEY;
  }
  const s = seen.at(-1);
  assert.equal(s.url, '/v1/sandboxes/sb_1/files/dir%20one/x%23y.txt');
  assert.equal(s.headers.authorization, 'Bearer sbx_from_env');
  assert.equal(s.body, 'z');
});

test('a large upload is streamed from disk, not held in memory', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sbx-up-'));
  const file = join(dir, 'big.bin');
  const mib = 256;
  const out = createWriteStream(file);
  const block = Buffer.alloc(1 << 20, 7);
  for (let i = 0; i < mib; i++) if (!out.write(block)) await once(out, 'drain');
  out.end();
  await once(out, 'finish');
  let received = 0;
  script = (req, res) => answer(res, 200, { object: 'file', path: 'big.bin', size: received });
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    req.on('data', (c) => (received += c.length));
    req.on('end', () => script(req, res));
  });
  try {
    const before = process.resourceUsage().maxRSS;
    const r = await client().sandboxes.files.putFile('sb_1', 'big.bin', file);
    const grown = (process.resourceUsage().maxRSS - before) >> 10;
    assert.equal(r.size, mib << 20);
    // fetch with a stream body held about the whole file (+256 MiB here); node:http waits
    // for the socket. The bound is loose on purpose: it only separates the two.
    assert.ok(grown < mib / 2, `peak RSS grew by ${grown} MiB for a ${mib} MiB upload`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
