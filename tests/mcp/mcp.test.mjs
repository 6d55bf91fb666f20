// The official MCP TypeScript SDK client (pinned in package.json) against a real sbxd over
// Streamable HTTP, calling every tool. Run by tests/e2e/test_mcp.py (suite_mcp), which
// starts the daemon and passes MCP_URL, SBX_API_KEY (alice) and SBX_OTHER_SANDBOX (bob's).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, afterEach, before, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.env.MCP_URL);
const key = process.env.SBX_API_KEY;
const ALL_TOOLS = [
  'sandbox_create', 'sandbox_list', 'sandbox_kill', 'sandbox_exec', 'sandbox_bash',
  'sandbox_run_code', 'repl_execute', 'exec_command', 'write_stdin', 'edit_file',
  'sandbox_files', 'sandbox_pause', 'sandbox_resume', 'sandbox_fork', 'sandbox_preview',
  'bsl_check',
];

function transport(k = key) {
  return new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${k}` } },
  });
}

let client;
// Each case stands alone: one that needs a sandbox's state makes its own sandbox (fresh,
// killed after the case: a key runs few at once), the others share one made on first use
// (shared), and none reads what another left.
const made = [];
let sharedId;

async function create() {
  const r = await ok('sandbox_create', { ttl_seconds: 900 });
  return r.structuredContent.id;
}

async function fresh() {
  const id = await create();
  made.push(id);
  return id;
}

async function shared() {
  if (!sharedId) sharedId = await create();
  return sharedId;
}

async function call(name, args, opts) {
  return client.callTool({ name, arguments: args }, undefined, opts);
}

// A successful call's structuredContent (and its text block says the same).
async function ok(name, args) {
  const r = await call(name, args);
  assert.ok(!r.isError, `${name} failed: ${JSON.stringify(r.content)}`);
  assert.equal(r.content[0].type, 'text');
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  return r;
}

// A failed call: isError, no structuredContent, the API code first in the text.
async function fails(name, args, code) {
  const r = await call(name, args);
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r)}`);
  assert.equal(r.structuredContent, undefined);
  assert.ok(r.content[0].text.startsWith(code + ':'), r.content[0].text);
  assert.equal(r._meta['sbx/error'].code, code);
  return r;
}

before(async () => {
  client = new Client({ name: 'sbx-test', version: '1.0.0' });
  await client.connect(transport());
});

afterEach(async () => {
  while (made.length) await call('sandbox_kill', { sandbox_id: made.pop() }).catch(() => {});
});

after(async () => {
  if (sharedId) await call('sandbox_kill', { sandbox_id: sharedId }).catch(() => {});
  await client.close();
});

test('initialize names the server and negotiates the latest version', async () => {
  assert.equal(client.getServerVersion().name, 'sbxd');
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  assert.equal(transport().protocolVersion, undefined); // a fresh transport has none yet
  assert.ok(client.getInstructions().includes('sandbox_id'));
});

test('tools/list has every tool with input and output schemas', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [...ALL_TOOLS].sort());
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(t.outputSchema.type, 'object', t.name);
    assert.equal(typeof t.description, 'string');
    if (t.name !== 'sandbox_create' && t.name !== 'sandbox_list')
      assert.ok(t.inputSchema.required.includes('sandbox_id'), t.name);
  }
});

test('ping answers {}', async () => {
  assert.deepEqual(await client.ping(), {});
});

test('sandbox_create and sandbox_list', async () => {
  const r = await ok('sandbox_create', { ttl_seconds: 900 });
  const sb = r.structuredContent.id;
  made.push(sb);
  assert.match(sb, /^sb_/);
  assert.equal(r.structuredContent.status, 'running');
  const l = await ok('sandbox_list', {});
  assert.ok(l.structuredContent.sandboxes.some((s) => s.id === sb));
});

test('sandbox_bash returns output, exit code and the files it wrote, as links', async () => {
  const sb = await fresh();
  const r = await ok('sandbox_bash', {
    sandbox_id: sb,
    command: 'mkdir -p out && printf report > out/r.txt && echo made && echo warn >&2; exit 3',
    description: 'write a report',
  });
  const s = r.structuredContent;
  assert.equal(s.exit_code, 3);
  assert.equal(s.stdout, 'made\n');
  assert.equal(s.stderr, 'warn\n');
  assert.equal(s.truncated, false);
  assert.equal(s.file_count, 1);
  assert.equal(s.files[0].path, 'out/r.txt');
  assert.equal(s.files[0].sha256, createHash('sha256').update('report').digest('hex'));
  const link = r.content.find((c) => c.type === 'resource_link');
  assert.equal(link.name, 'r.txt');
  assert.equal(link.uri, s.local_paths['out/r.txt']);
  const got = await fetch(link.uri); // a signed link: no key needed
  assert.equal(got.status, 200);
  assert.equal(await got.text(), 'report');
  // Outside out/ too; an unchanged file is not listed again.
  const n = await ok('sandbox_bash', {
    sandbox_id: sb, command: 'mkdir -p notes && printf y > notes/n.txt && cat out/r.txt',
  });
  assert.deepEqual(n.structuredContent.files.map((f) => f.path), ['notes/n.txt']);
  assert.match(n.structuredContent.local_paths['notes/n.txt'], /\/files\/notes\/n\.txt$/);
  const viaFiles = await fetch(n.structuredContent.local_paths['notes/n.txt'],
    { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(await viaFiles.text(), 'y');
});

test('sandbox_exec runs a shell line or code with a receipt', async () => {
  const sb = await shared();
  const r = await ok('sandbox_exec', { sandbox_id: sb, language: 'python', code: 'print(6*7)' });
  assert.equal(r.structuredContent.stdout, '42\n');
  assert.equal(r.structuredContent.exit_code, 0);
  assert.ok(r.structuredContent.receipt.command_sha256);
});

test('repl_execute keeps state between calls', async () => {
  const sb = await shared();
  await ok('repl_execute', { sandbox_id: sb, code: 'x = 20' });
  const r = await ok('repl_execute', { sandbox_id: sb, code: 'print("hi")\nx + 22' });
  assert.equal(r.structuredContent.result, '42');
  assert.equal(r.structuredContent.stdout, 'hi\n');
  assert.equal(r.structuredContent.error, null);
});

test('sandbox_run_code returns a matplotlib plot as an image block', async () => {
  const sb = await shared();
  const r = await ok('sandbox_run_code', {
    sandbox_id: sb,
    code: 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
      'plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
  });
  const img = r.content.find((c) => c.type === 'image');
  assert.ok(img, JSON.stringify(r.content.map((c) => c.type)));
  assert.equal(img.mimeType, 'image/png');
  const png = Buffer.from(img.data, 'base64');
  assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  // The bytes travel once: the structured answer points at the block.
  assert.match(r.structuredContent.outputs[0].data, /image content block 1/);
});

test('a kernel error is a result with error, not a tool failure', async () => {
  const sb = await shared();
  const r = await ok('repl_execute', { sandbox_id: sb, code: '1/0' });
  assert.equal(r.structuredContent.error.name, 'ZeroDivisionError');
});

test('exec_command and write_stdin drive a live PTY session', async () => {
  const sb = await shared();
  const quick = await ok('exec_command', { sandbox_id: sb, command: 'echo quick' });
  assert.equal(quick.structuredContent.alive, false);
  assert.equal(quick.structuredContent.exit_code, 0);
  assert.match(quick.structuredContent.stdout, /quick/);
  const live = await ok('exec_command', { sandbox_id: sb, command: 'cat', grace_seconds: 0.2 });
  assert.equal(live.structuredContent.alive, true);
  const sid = live.structuredContent.session_id;
  const w = await ok('write_stdin', {
    sandbox_id: sb, session_id: sid, input: 'hello pty\n', wait_seconds: 1,
    since: live.structuredContent.cursor,
  });
  assert.match(w.structuredContent.stdout, /hello pty/);
  assert.ok(w.structuredContent.cursor > live.structuredContent.cursor);
  await ok('write_stdin', { sandbox_id: sb, session_id: sid, input: '\u0004', wait_seconds: 1 });
});

test('edit_file: exact, then fuzzy; refusals come back with candidates', async () => {
  const sb = await fresh();
  await ok('sandbox_files', {
    sandbox_id: sb, op: 'write', path: 'src/app.py',
    content: 'def total(a, b):\n    s = a + b\n    return s\n\nprint(total(1, 2))\n',
  });
  const e = await ok('edit_file', {
    sandbox_id: sb, path: '/workspace/src/app.py', old_string: 'print(total(1, 2))',
    new_string: 'print(total(2, 2))',
  });
  assert.equal(e.structuredContent.strategy, 'exact');
  assert.match(e.structuredContent.diff, /^-print\(total\(1, 2\)\)$/m);
  assert.match(e.structuredContent.diff, /^\+print\(total\(2, 2\)\)$/m);
  // The agent's copy is slightly stale (one name changed): the similarity step finds it.
  const f = await ok('edit_file', {
    sandbox_id: sb, path: 'src/app.py',
    old_string: 'def total(a, b):\n    sum = a + b\n    return s\n',
    new_string: 'def total(a, b):\n    return a + b\n',
  });
  assert.equal(f.structuredContent.strategy, 'similarity');
  assert.ok(f.structuredContent.score >= 0.8 && f.structuredContent.score < 1);
  const out = await ok('sandbox_exec', { sandbox_id: sb, shell: 'python3 src/app.py' });
  assert.equal(out.structuredContent.stdout, '4\n');
  assert.equal(f.structuredContent.sha256,
    createHash('sha256').update('def total(a, b):\n    return a + b\n\nprint(total(2, 2))\n')
      .digest('hex'));
  const no = await fails('edit_file', {
    sandbox_id: sb, path: 'src/app.py', old_string: 'class Unrelated:\n    pass\n', new_string: 'x',
  }, 'edit_no_match');
  assert.match(no.content[0].text, /nearest candidates/);
  assert.ok(no._meta['sbx/error'].candidates[0].line >= 1);
  // The text-editor command shape.
  const v = await ok('edit_file', { sandbox_id: sb, path: 'src/app.py', command: 'view' });
  assert.match(v.structuredContent.content, /^ {5}1\tdef total/);
  await ok('edit_file', {
    sandbox_id: sb, path: 'src/app.py', command: 'insert', insert_line: 0, new_str: '# hi',
  });
  await ok('edit_file', {
    sandbox_id: sb, path: 'src/app.py', command: 'str_replace', old_str: '# hi', new_str: '# ho',
  });
  const c = await ok('edit_file', {
    sandbox_id: sb, path: 'notes.md', command: 'create', file_text: 'a\n',
  });
  assert.equal(c.structuredContent.created, true);
});

test('sandbox_files: list, read inline, a 1 MB file as a link with its SHA-256', async () => {
  const sb = await fresh();
  await ok('sandbox_bash', {
    sandbox_id: sb, command: 'mkdir -p out && printf report > out/r.txt && head -c 1048576 /dev/urandom > out/big.bin',
  });
  const sum = await ok('sandbox_exec', { sandbox_id: sb, shell: 'sha256sum out/big.bin' });
  const want = sum.structuredContent.stdout.split(' ')[0];
  const r = await ok('sandbox_files', { sandbox_id: sb, op: 'read', path: 'out/big.bin' });
  assert.equal(r.structuredContent.inline, false);
  assert.equal(r.structuredContent.size, 1048576);
  assert.equal(r.structuredContent.sha256, want);
  assert.equal(r.structuredContent.content, undefined);
  const link = r.content.find((c) => c.type === 'resource_link');
  assert.equal(link.size, 1048576);
  assert.equal(link.name, 'big.bin');
  const got = Buffer.from(await (await fetch(link.uri)).arrayBuffer());
  assert.equal(createHash('sha256').update(got).digest('hex'), want);
  const small = await ok('sandbox_files', { sandbox_id: sb, op: 'read', path: 'out/r.txt' });
  assert.equal(small.structuredContent.content, 'report');
  const l = await ok('sandbox_files', { sandbox_id: sb, op: 'list', path: 'out' });
  assert.deepEqual(l.structuredContent.entries.map((e) => e.path).sort(),
    ['out/big.bin', 'out/r.txt']);
  const a = await ok('sandbox_files', { sandbox_id: sb, op: 'artifacts' });
  assert.equal(a.structuredContent.artifacts.length, 2);
  assert.equal(a.content.filter((c) => c.type === 'resource_link').length, 2);
  await ok('sandbox_files', {
    sandbox_id: sb, op: 'write', path: 'b.bin', content: Buffer.from([0, 255, 1]).toString('base64'),
    encoding: 'base64',
  });
  const b = await ok('sandbox_files', { sandbox_id: sb, op: 'read', path: 'b.bin' });
  assert.equal(b.structuredContent.encoding, 'base64');
  assert.equal(b.structuredContent.content, 'AP8B');
});

test('a sandbox of another key is an error, as an unknown one', async () => {
  await fails('sandbox_bash', { sandbox_id: process.env.SBX_OTHER_SANDBOX, command: 'id' },
    'sandbox_not_found');
  await fails('sandbox_files', { sandbox_id: process.env.SBX_OTHER_SANDBOX, op: 'list' },
    'sandbox_not_found');
  await fails('edit_file', { sandbox_id: 'sb_nope', path: 'a', old_string: 'a', new_string: 'b' },
    'sandbox_not_found');
});

test('bad arguments are isError results, unknown tools protocol errors', async () => {
  const sb = await shared();
  await fails('sandbox_bash', { sandbox_id: sb, command: 5 }, 'invalid_request');
  await fails('sandbox_bash', { sandbox_id: sb, command: 'true', timeout_seconds: 100000 },
    'invalid_timeout');
  await fails('sandbox_files', { sandbox_id: sb, op: 'read', path: '../etc/passwd' }, 'invalid_path');
  await fails('sandbox_bash', { command: 'true' }, 'invalid_request');
  await assert.rejects(call('no_such_tool', {}), (e) => e instanceof McpError && e.code === -32602);
});

test('progress notifications while a command runs, over an SSE answer', async () => {
  const sb = await shared();
  const seen = [];
  const r = await call('sandbox_bash', { sandbox_id: sb, command: 'sleep 2.5; echo slept' },
    { onprogress: (p) => seen.push(p), resetTimeoutOnProgress: true });
  assert.equal(r.structuredContent.stdout, 'slept\n');
  assert.ok(seen.length >= 1, 'no progress');
  assert.ok(seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress));
});

test('a long command without progress answers a handle to poll', async () => {
  const sb = await shared();
  const r = await fails('sandbox_bash', { sandbox_id: sb, command: 'sleep 3; echo late' },
    'still_running');
  const h = r._meta['sbx/error'];
  assert.match(h.exec_id, /^ex_/);
  let rec;
  for (let i = 0; i < 100; i++) {
    rec = (await ok('sandbox_exec', { sandbox_id: sb, exec_id: h.exec_id })).structuredContent;
    if (rec.status !== 'running') break;
    await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(rec.stdout, 'late\n');
});

// Wait until a command or cell that is still running has written path in its workspace
// (a file read is not an exec: it is served while the sandbox is busy).
async function started(sb, path) {
  for (let i = 0; i < 300; i++) {
    const r = await call('sandbox_files', { sandbox_id: sb, op: 'read', path });
    if (!r.isError) return;
    assert.match(r.content[0].text, /^file_not_found:/);
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.fail(`${path} never appeared`);
}

test('a cancelled call kills its command', async () => {
  const sb = await fresh();
  const ac = new AbortController();
  const pending = call('sandbox_bash', {
    sandbox_id: sb, command: 'echo $$ > cancel.pid; sleep 30; echo finished > cancel.out',
  }, { signal: ac.signal, onprogress: () => {} });
  await started(sb, 'cancel.pid'); // the command runs: it wrote its pid
  ac.abort('user abort'); // the SDK posts notifications/cancelled
  await assert.rejects(pending);
  // The sandbox is free again within moments (not after 30 s), and the command never ended.
  let r;
  for (let i = 0; i < 50; i++) {
    r = await call('sandbox_bash', {
      sandbox_id: sb, command: 'kill -0 $(cat cancel.pid) 2>/dev/null && echo alive || echo gone',
    });
    if (!r.isError) break;
    assert.match(r.content[0].text, /^sandbox_busy:/);
    await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(r.structuredContent.stdout, 'gone\n');
  await fails('sandbox_files', { sandbox_id: sb, op: 'read', path: 'cancel.out' }, 'file_not_found');
});

test('a cancelled cell is interrupted; the kernel keeps its state', async () => {
  const sb = await fresh();
  await ok('repl_execute', { sandbox_id: sb, code: 'x = 20' });
  const ac = new AbortController();
  const pending = call('repl_execute', {
    sandbox_id: sb,
    code: "import time\nopen('/workspace/cell.started', 'w').close()\n"
      + 'for i in range(300):\n    time.sleep(0.1)\nx = -1',
  }, { signal: ac.signal });
  await started(sb, 'cell.started'); // the cell runs: it made its file
  ac.abort('user abort');
  await assert.rejects(pending);
  let r;
  for (let i = 0; i < 50; i++) {
    r = await call('repl_execute', { sandbox_id: sb, code: 'x' });
    if (!r.isError) break;
    assert.match(r.content[0].text, /^kernel_busy:/);
    await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(r.structuredContent.result, '20'); // not -1: the loop never finished
});

test('sandbox_preview, sandbox_pause, sandbox_resume, sandbox_fork', async () => {
  const sb = await fresh();
  await ok('repl_execute', { sandbox_id: sb, code: 'x = 20' });
  const p = await ok('sandbox_preview', { sandbox_id: sb, port: 8000 });
  assert.match(p.structuredContent.url, /^http/);
  const ps = await ok('sandbox_pause', { sandbox_id: sb });
  assert.equal(ps.structuredContent.status, 'paused');
  const rs = await ok('sandbox_resume', { sandbox_id: sb });
  assert.equal(rs.structuredContent.status, 'running');
  const again = await ok('repl_execute', { sandbox_id: sb, code: 'x' });
  assert.equal(again.structuredContent.result, '20'); // memory came back
  const f = await ok('sandbox_fork', { sandbox_id: sb, count: 1 });
  const kid = f.structuredContent.data[0].id;
  assert.match(kid, /^sb_/);
  const k = await ok('sandbox_kill', { sandbox_id: kid });
  assert.equal(k.structuredContent.deleted, true);
});

test('sandbox_kill, then the sandbox is gone', async () => {
  const sb = await fresh();
  await ok('sandbox_kill', { sandbox_id: sb });
  await fails('sandbox_bash', { sandbox_id: sb, command: 'true' }, 'sandbox_not_found');
});

test('a terminated session answers 404; a new transport starts a new one', async () => {
  const c = new Client({ name: 'sbx-test-2', version: '1.0.0' });
  const t = transport();
  await c.connect(t);
  const stale = t.sessionId;
  await t.terminateSession();
  await c.close();
  const t2 = new StreamableHTTPClientTransport(url, {
    sessionId: stale, requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  const c2 = new Client({ name: 'sbx-test-3', version: '1.0.0' });
  await c2.connect(t2); // skips initialize: the stale id is used as is
  await assert.rejects(c2.listTools(), (e) => e instanceof StreamableHTTPError && e.code === 404);
  await c2.close();
  const c3 = new Client({ name: 'sbx-test-4', version: '1.0.0' });
  await c3.connect(transport());
  assert.ok((await c3.listTools()).tools.length > 0);
  await c3.close();
});

test('a wrong key fails the connection with 401', async () => {
  const c = new Client({ name: 'sbx-test-5', version: '1.0.0' });
  await assert.rejects(c.connect(transport('sbx_' + '0'.repeat(48))),
    (e) => e instanceof StreamableHTTPError && e.code === 401);
});
