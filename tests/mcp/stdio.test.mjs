// The stdio bridge (build/sbx-mcp) under the SDK's StdioClientTransport, as a desktop MCP
// client launches it: the same server behind, reached through newline-delimited JSON-RPC.
// Run by tests/e2e/test_mcp.py (suite_mcp) with MCP_URL, SBX_API_KEY and SBX_MCP_BRIDGE.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

let client;
let sb;

function bridge(k) {
  return new StdioClientTransport({
    command: process.env.SBX_MCP_BRIDGE,
    env: { SBX_URL: process.env.MCP_URL, SBX_API_KEY: k, ...sanitizerEnv() },
    stderr: 'inherit',
  });
}

// A sanitized bridge reports leaks at exit like the daemon does; let it inherit the knobs.
function sanitizerEnv() {
  const e = {};
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'])
    if (process.env[k]) e[k] = process.env[k];
  return e;
}

before(async () => {
  client = new Client({ name: 'sbx-stdio-test', version: '1.0.0' });
  await client.connect(bridge(process.env.SBX_API_KEY));
});

after(async () => {
  if (sb)
    await client.callTool({ name: 'sandbox_kill', arguments: { sandbox_id: sb } });
  await client.close();
});

test('stdio: initialize, ping and tools/list through the bridge', async () => {
  assert.equal(client.getServerVersion().name, 'sbxd');
  assert.deepEqual(await client.ping(), {});
  const { tools } = await client.listTools();
  assert.equal(tools.length, 16);
});

test('stdio: tools run, and calls run side by side', async () => {
  const c = await client.callTool({ name: 'sandbox_create', arguments: { ttl_seconds: 600 } });
  sb = c.structuredContent.id;
  const slow = client.callTool({
    name: 'sandbox_bash', arguments: { sandbox_id: sb, command: 'sleep 1; echo slow' },
  });
  // While the command runs, the bridge still forwards other messages.
  assert.deepEqual(await client.ping(), {});
  const r = await slow;
  assert.equal(r.structuredContent.stdout, 'slow\n');
  const e = await client.callTool({ name: 'sandbox_bash', arguments: { sandbox_id: sb } });
  assert.equal(e.isError, true);
});

test('stdio: progress notifications arrive through the bridge', async () => {
  const seen = [];
  const r = await client.callTool(
    { name: 'sandbox_bash', arguments: { sandbox_id: sb, command: 'sleep 1.5; echo done' } },
    undefined, { onprogress: (p) => seen.push(p) });
  assert.equal(r.structuredContent.stdout, 'done\n');
  assert.ok(seen.length >= 1);
});

test('stdio: a wrong key is a JSON-RPC error, not a hang', async () => {
  const c = new Client({ name: 'sbx-stdio-bad', version: '1.0.0' });
  await assert.rejects(c.connect(bridge('sbx_' + '0'.repeat(48))), /upstream HTTP 401/);
  await c.close();
});
