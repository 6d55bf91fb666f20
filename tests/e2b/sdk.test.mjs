// The unmodified e2b and @e2b/code-interpreter SDKs against sbx (docs/e2b.md), run by
// tests/e2e/test_e2b.py with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at a
// real sbxd, and SBX_URL/SBX_KEY to check through our own API that it is one system:
// the same ids, the same audit log, the same limits.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { CommandExitError, Sandbox } from 'e2b'

import { audit, sbx } from './sbxapi.mjs'

const SBX = process.env.SBX_URL
const KEY = process.env.SBX_KEY
const PER_KEY = Number(process.env.SBX_PER_KEY)
const API = process.env.E2B_API_URL
const DATA = process.env.E2B_SANDBOX_URL

async function liveIds() {
  const r = await sbx('GET', '/v1/sandboxes')
  return r.body.data.map((s) => s.id)
}

// One sandbox for the command and file cases (created by the first case).
let sb

after(async () => {
  for (const id of await liveIds()) await sbx('DELETE', `/v1/sandboxes/${id}`)
})

describe('control plane', () => {
  test('Sandbox.create makes an sbx sandbox, audited, with a token and our own domain', async () => {
    sb = await Sandbox.create({ timeoutMs: 600_000, metadata: { suite: 'e2b', n: 'a b' }, envs: { FROM_CREATE: 'yes' } })
    assert.match(sb.sandboxId, /^sb_[0-9a-f]{20}$/)
    const own = await sbx('GET', `/v1/sandboxes/${sb.sandboxId}`)
    assert.equal(own.status, 200)
    assert.equal(own.body.status, 'running')
    assert.equal(own.body.env.FROM_CREATE, 'yes')
    assert.match(sb.sandboxDomain, /^sbx\.localhost:\d+$/)
    const entries = await audit(sb.sandboxId, 'sandbox.create')
    assert.equal(entries.length, 1)
    assert.equal(entries[0].outcome, 'ok')
    assert.equal(entries[0].details.via, 'e2b')
    const info = await sb.getInfo()
    assert.equal(info.templateId, 'base')
    assert.deepEqual(info.metadata, { suite: 'e2b', n: 'a b' })
    assert.equal(info.state, 'running')
  })

  test('Sandbox.list pages and filters by metadata, and lists sandboxes made by our API', async () => {
    const other = await sbx('POST', '/v1/sandboxes', { ttl_seconds: 300 })
    assert.equal(other.status, 201)
    try {
      const all = []
      const pager = Sandbox.list({ limit: 1 })
      while (pager.hasNext) all.push(...(await pager.nextItems()))
      const ids = all.map((s) => s.sandboxId)
      assert.ok(ids.includes(sb.sandboxId) && ids.includes(other.body.id), ids.join(','))
      const mine = await Sandbox.list({ query: { metadata: { n: 'a b' } } }).nextItems()
      assert.deepEqual(mine.map((s) => s.sandboxId), [sb.sandboxId])
    } finally {
      await sbx('DELETE', `/v1/sandboxes/${other.body.id}`)
    }
  })

  test('setTimeout moves the expiry seen by our API, and is audited', async () => {
    await sb.setTimeout(120_000)
    const own = await sbx('GET', `/v1/sandboxes/${sb.sandboxId}`)
    const left = own.body.expires_at - Date.now() / 1000
    assert.ok(left > 100 && left <= 121, `expires in ${left} s`)
    await sb.setTimeout(600_000)
    const entries = await audit(sb.sandboxId, 'sandbox.timeout')
    assert.equal(entries.length, 2)
  })

  test('Sandbox.connect reaches a sandbox made by our API', async () => {
    const own = await sbx('POST', '/v1/sandboxes', { ttl_seconds: 300 })
    assert.equal(own.status, 201)
    const c = await Sandbox.connect(own.body.id)
    assert.equal(c.sandboxId, own.body.id)
    const r = await c.commands.run('echo connected')
    assert.equal(r.stdout, 'connected\n')
    assert.equal(await c.kill(), true)
  })

  test('pause checkpoints the sandbox; Sandbox.connect resumes it with its files', async () => {
    const p = await Sandbox.create()
    try {
      await p.commands.run('echo kept > /home/user/k.txt')
      assert.equal(await p.pause(), true)
      assert.equal(await p.pause(), false)
      assert.equal((await p.getInfo()).state, 'paused')
      assert.equal(await p.isRunning(), false)
      assert.equal((await sbx('GET', `/v1/sandboxes/${p.sandboxId}`)).body.status, 'paused')
      const c = await Sandbox.connect(p.sandboxId)
      assert.equal((await c.commands.run('cat /home/user/k.txt')).stdout, 'kept\n')
      assert.equal((await audit(p.sandboxId, 'sandbox.pause')).length, 1)
      assert.equal((await audit(p.sandboxId, 'sandbox.resume')).length, 1)
    } finally {
      await p.kill()
    }
  })

  test('kill answers true, then false; the sandbox is gone from our API and audited', async () => {
    const k = await Sandbox.create()
    assert.equal(await k.kill(), true)
    assert.equal(await Sandbox.kill(k.sandboxId), false)
    assert.equal((await sbx('GET', `/v1/sandboxes/${k.sandboxId}`)).status, 404)
    const entries = await audit(k.sandboxId, 'sandbox.destroy')
    assert.equal(entries.length, 1)
    assert.equal(await k.isRunning(), false)
  })

  test('the per-key limit applies to E2B creates as to our own', async () => {
    const made = []
    try {
      const live = (await liveIds()).length
      for (let i = live; i < PER_KEY; i++) made.push(await Sandbox.create())
      await assert.rejects(Sandbox.create(), (e) => e.name === 'RateLimitError' && /per key/.test(e.message))
      const own = await sbx('POST', '/v1/sandboxes', {})
      assert.equal(own.status, 429)
    } finally {
      for (const m of made) await m.kill()
    }
  })

  test('bad requests get E2B JSON errors', async () => {
    const post = (path, body, key = KEY) =>
      fetch(API + path, { method: 'POST', headers: { 'X-API-KEY': key, 'Content-Type': 'application/json' }, body })
    let r = await post('/sandboxes', '{"templateID":"base"}', 'sbx_nope')
    assert.equal(r.status, 401)
    assert.equal((await r.json()).code, 401)
    r = await post('/sandboxes', '{"templateID":"base"}', process.env.SBX_BASIC_KEY)
    assert.equal(r.status, 403)
    assert.equal((await r.json()).code, 403)
    r = await post('/v2/sandboxes', '{not json')
    assert.equal(r.status, 400)
    r = await post('/v2/sandboxes', '{"templateID":"base","timeout":0}')
    assert.equal(r.status, 400)
    assert.equal((await r.json()).code, 400)
    r = await post('/v2/sandboxes', '{"templateID":"no-such-template"}')
    assert.ok(r.status >= 400 && r.status < 500)
    r = await post('/v2/sandboxes', '{"templateID":"base","metadata":{"a":1}}')
    assert.equal(r.status, 400)
    r = await post(`/sandboxes/${sb.sandboxId}/timeout`, '{"timeout":"x"}')
    assert.equal(r.status, 400)
    r = await fetch(API + '/sandboxes/sb_00000000000000000000', { headers: { 'X-API-KEY': KEY } })
    assert.equal(r.status, 404)
    assert.equal((await r.json()).code, 404)
    await assert.rejects(Sandbox.getInfo('sb_00000000000000000000'), { name: 'SandboxNotFoundError' })
  })
})

describe('commands', () => {
  test('run returns the output; create-time envs apply', async () => {
    const r = await sb.commands.run('echo "hi $FROM_CREATE"; echo oops >&2; pwd')
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hi yes\n/home/user\n')
    assert.equal(r.stderr, 'oops\n')
    // The command is on the audit log: who, which key, which sandbox, what ran.
    const cmd = 'echo "hi $FROM_CREATE"; echo oops >&2; pwd'
    const started = (await audit(sb.sandboxId, 'process.start')).filter((e) =>
      e.details.command.endsWith(cmd))
    assert.equal(started.length, 1)
    const e = started[0]
    assert.equal(e.user, 'e2b-user')
    assert.ok(e.key_id)
    assert.equal(e.outcome, 'started')
    const { createHash } = await import('node:crypto')
    assert.equal(e.details.command_sha256,
      createHash('sha256').update(e.details.command).digest('hex'))
  })

  test('a non-zero exit raises CommandExitError with the exit code', async () => {
    await assert.rejects(sb.commands.run('echo partial; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError)
      assert.equal(e.exitCode, 3)
      assert.equal(e.stdout, 'partial\n')
      return true
    })
  })

  test('onStdout and onStderr stream in order', async () => {
    const seen = []
    await sb.commands.run('echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three', {
      onStdout: (d) => seen.push(`out:${d}`),
      onStderr: (d) => seen.push(`err:${d}`),
    })
    assert.deepEqual(seen, ['out:one\n', 'err:two\n', 'out:three\n'])
  })

  test('background commands run at once, each with its stdin, listed, killed', async () => {
    const cat = await sb.commands.run('cat', { background: true, stdin: true })
    const sleeper = await sb.commands.run('sleep 300', { background: true })
    // A third command while both run: no one-at-a-time lock.
    assert.equal((await sb.commands.run('echo meanwhile')).stdout, 'meanwhile\n')
    const listed = await sb.commands.list()
    const pids = listed.map((p) => p.pid)
    assert.ok(pids.includes(cat.pid) && pids.includes(sleeper.pid), JSON.stringify(listed))
    const entry = listed.find((p) => p.pid === cat.pid)
    assert.equal(entry.cmd, '/bin/bash')
    assert.deepEqual(entry.args, ['-l', '-c', 'cat'])
    await sb.commands.sendStdin(cat.pid, 'hello stdin\n')
    await sb.commands.closeStdin(cat.pid)
    const done = await cat.wait()
    assert.equal(done.stdout, 'hello stdin\n')
    assert.equal(await sb.commands.kill(sleeper.pid), true)
    await assert.rejects(sleeper.wait(), (e) => e.exitCode === -1 && /signal: killed/.test(e.message))
    assert.equal(await sb.commands.kill(sleeper.pid), false)
    await assert.rejects(sb.commands.sendStdin(sleeper.pid, 'x'))
  })

  test('commands.connect follows a running command to its exit', async () => {
    const h = await sb.commands.run('sleep 1; echo late', { background: true })
    const c = await sb.commands.connect(h.pid)
    const r = await c.wait()
    assert.equal(r.stdout, 'late\n')
    await assert.rejects(sb.commands.connect(999999))
  })

  test('a bad cwd is refused', async () => {
    await assert.rejects(sb.commands.run('true', { cwd: '/etc' }), { name: 'InvalidArgumentError' })
  })
})

describe('files', () => {
  test('write, read, exists, list, makeDir, rename, remove — in the workspace, audited', async () => {
    const info = await sb.files.write('/home/user/notes/a.txt', 'hello file')
    assert.equal(info.path, '/home/user/notes/a.txt')
    assert.equal(await sb.files.read('/home/user/notes/a.txt'), 'hello file')
    assert.equal(await sb.files.read('notes/a.txt'), 'hello file')
    // The same file through our API and from inside the sandbox.
    const own = await fetch(`${SBX}/v1/sandboxes/${sb.sandboxId}/files/notes/a.txt`, {
      headers: { Authorization: `Bearer ${KEY}` },
    })
    assert.equal(await own.text(), 'hello file')
    assert.equal((await sb.commands.run('cat /home/user/notes/a.txt /workspace/notes/a.txt')).stdout, 'hello filehello file')
    assert.equal(await sb.files.exists('/home/user/notes/a.txt'), true)
    assert.equal(await sb.files.exists('/home/user/nope'), false)
    assert.equal(await sb.files.makeDir('/home/user/d/e'), true)
    assert.equal(await sb.files.makeDir('/home/user/d/e'), false)
    const names = (await sb.files.list('/home/user')).map((e) => `${e.name}:${e.type}`)
    assert.ok(names.includes('notes:dir') && names.includes('d:dir'), names.join(','))
    const deep = (await sb.files.list('/home/user', { depth: 2 })).map((e) => e.path)
    assert.ok(deep.includes('/home/user/notes/a.txt') && deep.includes('/home/user/d/e'), deep.join(','))
    const moved = await sb.files.rename('/home/user/notes/a.txt', '/home/user/d/b.txt')
    assert.equal(moved.path, '/home/user/d/b.txt')
    assert.equal(moved.type, 'file')
    assert.equal(moved.size, 10)
    await sb.files.remove('/home/user/d')
    assert.equal(await sb.files.exists('/home/user/d'), false)
    await sb.files.remove('/home/user/d') // removing what is gone is no error
    const multi = await sb.files.write([
      { path: '/home/user/m1.txt', data: 'one' },
      { path: 'm2.bin', data: new Uint8Array([0, 1, 2, 255]).buffer },
    ])
    assert.deepEqual(multi.map((m) => m.path), ['/home/user/m1.txt', '/home/user/m2.bin'])
    assert.deepEqual([...(await sb.files.read('m2.bin', { format: 'bytes' }))], [0, 1, 2, 255])
    assert.equal((await audit(sb.sandboxId, 'file.upload')).length, 3)
    assert.ok((await audit(sb.sandboxId, 'file.download')).length >= 3)
  })

  test('watchDir reports writes from the SDK and from commands, recursively', async () => {
    await sb.files.makeDir('/home/user/w/sub')
    const events = []
    const h = await sb.files.watchDir('/home/user/w', (e) => events.push(`${e.type}:${e.name}`), { recursive: true })
    await sb.files.write('/home/user/w/a.txt', 'x')
    await sb.commands.run('echo y > /home/user/w/sub/b.txt; rm /home/user/w/a.txt')
    for (let i = 0; i < 40 && !events.includes('remove:a.txt'); i++) await new Promise((r) => setTimeout(r, 100))
    await h.stop()
    for (const want of ['create:a.txt', 'create:sub/b.txt', 'write:sub/b.txt', 'remove:a.txt'])
      assert.ok(events.includes(want), `${want} in ${events.join(',')}`)
    assert.ok(!events.some((e) => e.includes('.sbx-upload')), events.join(','))
    await assert.rejects(sb.files.watchDir('/home/user/nope', () => {}), { name: 'FileNotFoundError' })
  })

  test('missing files and paths outside the workspace get the SDK errors', async () => {
    await assert.rejects(sb.files.read('/home/user/missing.txt'), { name: 'FileNotFoundError' })
    await assert.rejects(sb.files.list('/home/user/missing'), { name: 'FileNotFoundError' })
    // '..' leaves the workspace: /etc/x, which the sandbox user may not write.
    await assert.rejects(sb.files.write('/home/user/../../etc/x', 'no'), /403: permission denied/)
    // Outside the workspace the sandbox user's permissions decide (pty.test.mjs has more).
    await assert.rejects(sb.files.write('/etc/x', 'no', { useOctetStream: true }), /403: permission denied/)
    await assert.rejects(sb.files.write('/home/user/g.txt', 'gz', { gzip: true }), { name: 'InvalidArgumentError' })
    assert.equal(await sb.files.write('/home/user/empty.txt', '').then((i) => i.path), '/home/user/empty.txt')
    assert.equal(await sb.files.read('/home/user/empty.txt'), '')
  })

  test('the data plane wants the sandbox token and answers 502 for a gone sandbox', async () => {
    const rpc = (id, token) =>
      fetch(`${DATA}/filesystem.Filesystem/Stat`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', ...(token ? { 'X-Access-Token': token } : {}) },
        body: '{"path":"/home/user"}',
      })
    assert.equal((await rpc(sb.sandboxId)).status, 401)
    assert.equal((await rpc(sb.sandboxId, 'f'.repeat(48))).status, 401)
    const gone = await rpc('sb_00000000000000000000', 'x')
    assert.equal(gone.status, 502)
    assert.equal((await gone.json()).code, 502)
    const token = (await (await fetch(`${API}/v2/sandboxes/${sb.sandboxId}/connect`, {
      method: 'POST', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' }, body: '{}',
    })).json()).envdAccessToken
    const ok = await rpc(sb.sandboxId, token)
    assert.equal(ok.status, 200)
    assert.equal((await ok.json()).entry.type, 'FILE_TYPE_DIRECTORY')
    const bad = await fetch(`${DATA}/process.Process/SendSignal`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sb.sandboxId, 'X-Access-Token': token },
      body: '{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}',
    })
    assert.equal(bad.status, 404)
    assert.equal((await bad.json()).code, 'not_found')
  })
})

describe('code interpreter', () => {
  let ci
  before(async () => {
    ci = await CodeSandbox.create()
  })
  after(async () => {
    await ci?.kill()
  })

  test('runCode: 1+1 is "2", and state is kept between calls', async () => {
    const one = await ci.runCode('1+1')
    assert.equal(one.text, '2')
    assert.equal(one.error, undefined)
    await ci.runCode('x = 41')
    const two = await ci.runCode('x + 1')
    assert.equal(two.text, '42')
    assert.ok(two.executionCount > one.executionCount)
    const entries = await audit(ci.sandboxId, 'run_code')
    assert.equal(entries.length, 3)
  })

  test('runCode streams stdout and stderr', async () => {
    const out = []
    const ex = await ci.runCode('import sys\nprint("to out")\nprint("to err", file=sys.stderr)', {
      onStdout: (m) => out.push(m.line),
    })
    assert.deepEqual(out, ['to out\n'])
    assert.deepEqual(ex.logs, { stdout: ['to out\n'], stderr: ['to err\n'] })
  })

  test('an exception is execution.error, not a throw', async () => {
    const ex = await ci.runCode('1/0')
    assert.equal(ex.error.name, 'ZeroDivisionError')
    assert.equal(ex.error.value, 'division by zero')
    assert.match(ex.error.traceback, /ZeroDivisionError/)
  })

  test('a matplotlib plot is a PNG result', async () => {
    const ex = await ci.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()')
    assert.equal(ex.error, undefined)
    const png = ex.results.find((r) => r.png)
    assert.ok(png, JSON.stringify(ex.results.map((r) => r.formats())))
    assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
  })

  test('contexts: one python context; others are refused', async () => {
    const list = await ci.listCodeContexts()
    assert.deepEqual(list.map((c) => c.language), ['python'])
    // The SDK leaves its request timer running when the answer is an error, and a pending
    // timer keeps node alive after the last test: a short one, not the default 60 s.
    const quick = { requestTimeoutMs: 5000 }
    await assert.rejects(ci.runCode('1', { ...quick, context: { id: 'nope', language: 'python', cwd: '/' } }), { name: 'NotFoundError' })
    await assert.rejects(ci.runCode('1', { ...quick, language: 'r' }))
  })
})
