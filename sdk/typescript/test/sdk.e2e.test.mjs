// The SDK through a real sbxd: SBX_URL and SBX_API_KEY (an admin key) come from the suite
// (tests/e2e/test_sdk.py). One shared sandbox; each test that needs more creates and
// deletes its own, so a key never holds more than 3 running.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Sbx, SbxError } from '../dist/index.js';

const client = new Sbx();
let sb;
let tmp;

before(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'sbx-sdk-'));
  sb = await client.sandboxes.create({ ttl_seconds: 900 });
});

after(async () => {
  if (sb) await client.sandboxes.delete(sb.id).catch(() => undefined);
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

async function fileSha256(path) {
  const h = createHash('sha256');
  for await (const c of createReadStream(path)) h.update(c);
  return h.digest('hex');
}

test('spec 000 SDK example (TypeScript, names adapted)', async () => {
  const client = new Sbx({ apiKey: process.env.SBX_API_KEY });
  const sb = await client.sandboxes.create({ ttl_seconds: 1800 });
  try {
    await client.sandboxes.files.put(sb.id, 'in/date.csv', 'client,suma\nSC Exemplu SRL,1200\n');
    const shell = 'python3 -c "import pandas as pd; print(pd.read_csv(\'in/date.csv\'))"';
    let stdout = '';
    let exit;
    for await (const ev of client.sandboxes.execStream(sb.id, { shell })) {
      if (ev.type === 'stdout') stdout += ev.data;
      if (ev.type === 'exit') exit = ev;
    }
    assert.match(stdout, /SC Exemplu SRL\s+1200/);
    assert.equal(exit.exit_code, 0);
    assert.equal(exit.receipt.command_sha256, sha256(shell));
    const { data } = await client.sandboxes.artifacts(sb.id);
    assert.ok(Array.isArray(data));
  } finally {
    await client.sandboxes.delete(sb.id);
  }
  await assert.rejects(client.sandboxes.get(sb.id), (e) => e.code === 'sandbox_not_found');
});

test('spec 000 Sandbox-uri v2 example (TypeScript, names adapted)', async () => {
  const sb = await client.sandboxes.create({
    template: 'base', // the spec's codai-base
    egress: { mode: 'preset', preset: 'pypi' },
  }); // v2 by default
  const copies = [];
  try {
    assert.equal(sb.backend, 'v2');
    await client.sandboxes.runCode(sb.id, {
      code: 'import pandas as pd\ndf = pd.DataFrame({"a": [1, 2]})',
    });
    const r = await client.sandboxes.runCode(sb.id, { code: 'df["a"].sum()' });
    assert.equal(r.result, '3');
    const { data } = await client.sandboxes.fork(sb.id, { count: 3 });
    copies.push(...data.map((c) => c.id));
    assert.equal(data.length, 3);
    for (const c of data) assert.equal(c.error, undefined);
    // As written, the spec's example resumes with its 3 copies still running, which its own
    // limit (3 running per key) refuses: the copies go first here.
    for (const id of copies.splice(0)) await client.sandboxes.delete(id);
    await client.sandboxes.pause(sb.id);
    const back = await client.sandboxes.resume(sb.id);
    assert.equal(typeof back.restored, 'boolean');
    assert.equal(typeof back.ready_ms, 'number');
  } finally {
    for (const id of copies) await client.sandboxes.delete(id).catch(() => undefined);
    await client.sandboxes.delete(sb.id);
  }
});

test('execStream yields the first stdout event while the command still runs', async () => {
  const events = [];
  let execId;
  let statusAtFirstChunk;
  for await (const ev of client.sandboxes.execStream(sb.id, {
    shell: 'echo first; sleep 2; echo second',
  })) {
    events.push(ev.type);
    if (ev.type === 'start') execId = ev.exec_id;
    if (ev.type === 'stdout' && statusAtFirstChunk === undefined) {
      assert.equal(ev.data, 'first\n');
      // The exec record is still running when the first chunk reaches us.
      statusAtFirstChunk = (await client.sandboxes.execs.get(sb.id, execId)).status;
    }
  }
  assert.equal(statusAtFirstChunk, 'running');
  assert.equal(events[0], 'start');
  assert.equal(events.at(-1), 'exit');
  const rec = await client.sandboxes.execs.get(sb.id, execId);
  assert.equal(rec.status, 'exited');
  assert.equal(rec.stdout, 'first\nsecond\n');
});

test('exec, idempotency replay and typed errors', async () => {
  const r = await client.sandboxes.exec(sb.id, { language: 'python', code: 'print(6*7)' });
  assert.equal(r.stdout, '42\n');
  assert.equal(r.exit_code, 0);
  const a = await client.sandboxes.exec(sb.id, { shell: 'echo once' }, { idempotencyKey: 'ts-1' });
  const b = await client.sandboxes.exec(sb.id, { shell: 'echo once' }, { idempotencyKey: 'ts-1' });
  assert.equal(a.id, b.id);
  await assert.rejects(
    client.sandboxes.exec(sb.id, { shell: 'echo other' }, { idempotencyKey: 'ts-1' }),
    (e) => e instanceof SbxError && e.status === 409 && e.code === 'idempotency_key_mismatch');
  await assert.rejects(client.sandboxes.get('sb_doesnotexist'), (e) =>
    e instanceof SbxError && e.status === 404 && e.code === 'sandbox_not_found' &&
    typeof e.message === 'string' && e.message.length > 0 && /\S/.test(e.requestId ?? ''));
  await assert.rejects(client.sandboxes.exec(sb.id, { shell: 'true', timeout_seconds: 0 }),
                       (e) => e.status === 400 && e.code === 'invalid_timeout');
  const bad = new Sbx({ apiKey: 'sbx_' + 'x'.repeat(40) });
  await assert.rejects(bad.sandboxes.list(), (e) => e.status === 401 && e.code === 'invalid_api_key');
});

test('files: put, list, get, a large upload and download streamed through disk, delete', async () => {
  await client.sandboxes.files.put(sb.id, 'docs/a b.txt', 'hello');
  assert.equal(await client.sandboxes.files.getText(sb.id, 'docs/a b.txt'), 'hello');
  const ls = await client.sandboxes.files.list(sb.id, { path: 'docs' });
  assert.deepEqual(ls.data.map((e) => e.path), ['docs/a b.txt']);

  const big = join(tmp, 'big.bin');
  const chunk = Buffer.alloc(1 << 20);
  for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 31 + 7) & 0xff;
  const parts = [];
  for (let i = 0; i < 24; i++) parts.push(Buffer.concat([chunk, Buffer.from([i])]));
  await writeFile(big, Buffer.concat(parts));
  const size = (await stat(big)).size;
  const up = await client.sandboxes.files.putFile(sb.id, 'big/big.bin', big);
  assert.equal(up.size, size);
  const back = join(tmp, 'back.bin');
  assert.equal(await client.sandboxes.files.download(sb.id, 'big/big.bin', back), size);
  assert.equal(await fileSha256(back), await fileSha256(big));
  const inside = await client.sandboxes.exec(sb.id, { shell: 'sha256sum big/big.bin' });
  assert.equal(inside.stdout.split(' ')[0], await fileSha256(big));

  await client.sandboxes.files.delete(sb.id, 'big');
  await assert.rejects(client.sandboxes.files.get(sb.id, 'big/big.bin'),
                       (e) => e.status === 404 && e.code === 'file_not_found');
  await assert.rejects(client.sandboxes.files.put(sb.id, '/etc/x', 'no'),
                       (e) => e.status === 400 && e.code === 'invalid_path' && !!e.requestId);
  // URLs resolve `..` before sending: the SDK refuses it without a request.
  await assert.rejects(client.sandboxes.files.put(sb.id, 'a/../x', 'no'),
                       (e) => e.status === 0 && e.code === 'invalid_path');
});

test('artifacts of out/ come with signed links', async () => {
  await client.sandboxes.exec(sb.id, { shell: 'mkdir -p out && printf report > out/r.txt' });
  const { data } = await client.sandboxes.artifacts(sb.id);
  const a = data.find((x) => x.path === 'out/r.txt');
  assert.equal(a.sha256, sha256('report'));
  assert.equal(a.scan, 'clean');
  const res = await fetch(a.url);
  assert.equal(await res.text(), 'report');
});

test('sessions keep cd and exports between execs', async () => {
  const s = await client.sandboxes.sessions.create(sb.id, { id: 'ts' });
  assert.equal(s.id, 'ts');
  await client.sandboxes.exec(sb.id, { shell: 'cd /tmp && export A=1', session_id: 'ts' });
  const r = await client.sandboxes.exec(sb.id, { shell: 'echo $A $PWD', session_id: 'ts' });
  assert.equal(r.stdout, '1 /tmp\n');
  const ids = (await client.sandboxes.sessions.list(sb.id)).data.map((x) => x.id);
  assert.ok(ids.includes('ts'), ids);
  assert.equal((await client.sandboxes.sessions.delete(sb.id, 'ts')).deleted, true);
  await assert.rejects(client.sandboxes.sessions.delete(sb.id, 'ts'),
                       (e) => e.status === 404 && e.code === 'session_not_found');
});

test('processes: start, follow the log stream to exit, get, list, signal, kill', async () => {
  const p = await client.sandboxes.processes.start(sb.id, {
    command: 'for i in 1 2 3; do echo line$i; sleep 0.2; done',
  });
  let out = '';
  let exit;
  for await (const ev of client.sandboxes.processes.logsStream(sb.id, p.id)) {
    if (ev.type === 'stdout') out += ev.data;
    if (ev.type === 'exit') exit = ev;
  }
  assert.equal(out, 'line1\nline2\nline3\n');
  assert.equal(exit.status, 'completed');
  assert.equal((await client.sandboxes.processes.get(sb.id, p.id)).exit_code, 0);
  assert.equal((await client.sandboxes.processes.logs(sb.id, p.id)).stdout, out);

  const q = await client.sandboxes.processes.start(sb.id, { command: 'sleep 300' });
  assert.ok((await client.sandboxes.processes.list(sb.id)).data.some((x) => x.id === q.id));
  await client.sandboxes.processes.signal(sb.id, q.id, 'SIGSTOP');
  await client.sandboxes.processes.signal(sb.id, q.id, 'CONT');
  const killed = await client.sandboxes.processes.kill(sb.id, q.id);
  assert.equal(killed.status, 'killed');
  await assert.rejects(client.sandboxes.processes.signal(sb.id, q.id, 'TERM'),
                       (e) => e.status === 409 && e.code === 'process_not_running');
});

test('runCode keeps state; runCodeStream streams; kernel interrupt and reset', async () => {
  await client.sandboxes.runCode(sb.id, { code: 'x = 40' });
  const r = await client.sandboxes.runCode(sb.id, { code: 'x + 2' });
  assert.equal(r.result, '42');
  const types = [];
  let out = '';
  for await (const ev of client.sandboxes.runCodeStream(sb.id, { code: 'print("hi")\nx' })) {
    types.push(ev.type);
    if (ev.type === 'stdout') out += ev.data;
    if (ev.type === 'result') assert.equal(ev.result, '40');
  }
  assert.equal(out, 'hi\n');
  assert.equal(types[0], 'start');
  assert.equal(types.at(-1), 'result');
  assert.equal((await client.sandboxes.kernel.interrupt(sb.id)).object, 'kernel');
  const k = await client.sandboxes.kernel.reset(sb.id);
  assert.equal(k.restarted, true);
  const gone = await client.sandboxes.runCode(sb.id, { code: 'x' });
  assert.equal(gone.error.name, 'NameError');
});

test('pty exec_command and write_stdin', async () => {
  const p = await client.sandboxes.pty.execCommand(sb.id, {
    command: 'read line; echo "got $line"', grace_seconds: 0,
  });
  assert.equal(p.alive, true);
  let out = (await client.sandboxes.pty.writeStdin(sb.id, p.session_id,
                                                   { input: 'abc\n', wait_seconds: 10 })).stdout;
  // The answer ends once the output has been quiet for 100 ms: on a loaded host the
  // terminal's echo of the input can come that long before the command's own line.
  for (let i = 0; i < 6 && !/got abc/.test(out); i++) {
    out += (await client.sandboxes.pty.read(sb.id, p.session_id, { wait_seconds: 5 })).stdout;
  }
  assert.match(out, /got abc/);
  const again = await client.sandboxes.pty.read(sb.id, p.session_id, { since: 0 });
  assert.match(again.stdout, /got abc/);
  assert.equal((await client.sandboxes.pty.delete(sb.id, p.session_id)).deleted, true);
  await assert.rejects(client.sandboxes.pty.read(sb.id, p.session_id),
                       (e) => e.status === 404 && e.code === 'pty_not_found');
});

test('terminal over WebSocket', async () => {
  const t = await client.sandboxes.terminal(sb.id, { cols: 100, rows: 30 });
  const ready = await t.ready;
  assert.ok(ready.pty_id);
  t.resize(120, 40);
  t.write('echo sum-$((40+2)); stty size; exit\n');
  let screen = '';
  let exited;
  for await (const m of t) {
    if (m.type === 'data') screen += m.data.toString('utf8');
    if (m.type === 'exited') exited = m;
  }
  assert.match(screen, /sum-42/);
  assert.match(screen, /40 120/);
  assert.equal(exited.exit_code, 0);
});

test('terminal on a paused sandbox, and provision', async () => {
  const s = await client.sandboxes.create({ ttl_seconds: 900 });
  try {
    await client.sandboxes.pause(s.id);
    const refused = await client.sandboxes.terminal(s.id);
    await assert.rejects(refused.ready, (e) => e.code === 'SANDBOX_PAUSED');
    assert.equal((await client.sandboxes.get(s.id)).status, 'paused');
    const t = await client.sandboxes.terminal(s.id, { provision: true });
    assert.ok((await t.ready).pty_id);
    t.write('exit\n');
    let exited;
    for await (const m of t) if (m.type === 'exited') exited = m;
    assert.equal(exited.exit_code, 0);
    assert.equal((await client.sandboxes.get(s.id)).status, 'running');
  } finally {
    await client.sandboxes.delete(s.id);
  }
});

test('egress get and put', async () => {
  const e = await client.sandboxes.egress.get(sb.id);
  assert.equal(e.policy.mode, 'none');
  const s = await client.sandboxes.egress.put(sb.id, { mode: 'allowlist', domains: ['example.com'] });
  assert.deepEqual(s.egress.domains, ['example.com']);
  await assert.rejects(client.sandboxes.egress.put(sb.id, { mode: 'preset', preset: 'nope' }),
                       (e) => e.status === 400 && e.code === 'egress_unknown_preset');
  await client.sandboxes.egress.put(sb.id, { mode: 'none' });
});

test('preview, fork, pause and resume (v2)', async () => {
  const p = await client.sandboxes.preview(sb.id, 3000, { ttl_seconds: 600 });
  assert.equal(p.port, 3000);
  assert.match(p.url, /^https?:\/\//);
  await assert.rejects(client.sandboxes.preview(sb.id, 80),
                       (e) => e.status === 400 && e.code === 'invalid_port');
  await client.sandboxes.files.put(sb.id, 'state.txt', 'kept');
  const f = await client.sandboxes.fork(sb.id, { count: 1 });
  assert.equal(f.parent_id, sb.id);
  assert.equal(f.data.length, 1);
  try {
    assert.equal(f.data[0].error, undefined);
    assert.equal(await client.sandboxes.files.getText(f.data[0].id, 'state.txt'), 'kept');
  } finally {
    await client.sandboxes.delete(f.data[0].id).catch(() => undefined);
  }
  const paused = await client.sandboxes.pause(sb.id);
  assert.equal(paused.status, 'paused');
  await assert.rejects(client.sandboxes.exec(sb.id, { shell: 'true' }),
                       (e) => e.status === 409 && e.code === 'sandbox_not_running');
  const back = await client.sandboxes.resume(sb.id);
  assert.equal(back.status, 'running');
  assert.equal(typeof back.restored, 'boolean');
  assert.equal(await client.sandboxes.files.getText(sb.id, 'state.txt'), 'kept');
  await assert.rejects(client.sandboxes.snapshot(sb.id),
                       (e) => e.status === 409 && e.code === 'not_supported_on_v2');
});

test('run creates, runs and destroys in one call', async () => {
  const r = await client.sandboxes.run({
    shell: 'cat in/page.html | wc -c', inputs: [{ path: 'in/page.html', content: '<h1>x</h1>' }],
  });
  assert.equal(r.stdout.trim(), '10');
  assert.ok(r.sandbox_id);
  await assert.rejects(client.sandboxes.get(r.sandbox_id), (e) => e.code === 'sandbox_not_found');
});

test('keys and audit', async () => {
  const k = await client.keys.create({ user: 'ts-member', role: 'member', tool_level: 'sandbox' });
  assert.match(k.key, /^sbx_/);
  assert.ok((await client.keys.list()).data.some((x) => x.id === k.id));
  const member = new Sbx({ apiKey: k.key });
  await assert.rejects(member.sandboxes.get(sb.id), (e) => e.code === 'sandbox_not_found');
  await assert.rejects(member.keys.list(), (e) => e.status === 403 && e.code === 'admin_required');
  assert.deepEqual((await member.sandboxes.list()).data, []);
  await client.keys.delete(k.id);
  await assert.rejects(member.sandboxes.list(), (e) => e.status === 401 && e.code === 'invalid_api_key');

  const page = await client.audit.list({ sandbox_id: sb.id, limit: 5 });
  assert.ok(page.data.length > 0);
  assert.ok(page.data.every((e) => e.sandbox_id === sb.id));
  assert.equal((await client.audit.verify()).ok, true);
  assert.equal((await client.health()).status, 'ok');
  assert.equal((await client.openapi()).openapi, '3.1.0');
});

test('volumes outlive sandboxes: files without a sandbox, mounted at create, in use', async () => {
  const vol = await client.volumes.create({ name: 'ts-vol', size_mb: 32 });
  assert.equal(vol.object, 'volume');
  await client.volumes.files.put(vol.id, 'in/a.txt', 'from ts');
  assert.equal((await client.volumes.files.stat('ts-vol', 'in/a.txt')).size, 7);
  assert.equal((await client.volumes.files.mkdir(vol.id, 'made')).created, true);
  const s = await client.sandboxes.create({ ttl_seconds: 600,
                                            volumes: [{ volume: 'ts-vol', path: '/data' }] });
  try {
    const r = await client.sandboxes.exec(s.id, { shell: 'cat /data/in/a.txt; echo y > /data/made/b' });
    assert.equal(r.stdout, 'from ts');
    await assert.rejects(client.volumes.delete(vol.id),
                         (e) => e instanceof SbxError && e.code === 'volume_in_use');
  } finally {
    await client.sandboxes.delete(s.id);
  }
  assert.equal(await client.volumes.files.getText(vol.id, 'made/b'), 'y\n');
  const names = (await client.volumes.files.list(vol.id, { recursive: true })).data.map((e) => e.path);
  assert.deepEqual(names, ['in', 'in/a.txt', 'made', 'made/b']);
  await client.volumes.delete(vol.id);
  await assert.rejects(client.volumes.get(vol.id),
                       (e) => e instanceof SbxError && e.code === 'volume_not_found');
});
