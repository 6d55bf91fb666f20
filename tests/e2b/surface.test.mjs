// The newer parts of the pinned SDKs' surface (issue 42) against sbx, run by
// tests/e2e/test_e2b.py (suite_e2b_surface) with the same environment as sdk.test.mjs.
import assert from 'node:assert/strict'
import http from 'node:http'
import { after, before, describe, test } from 'node:test'

import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { Sandbox } from 'e2b'

import { sbx } from './sbxapi.mjs'

const KEY = process.env.SBX_KEY

let sb
before(async () => {
  sb = await Sandbox.create({ timeoutMs: 600_000 })
})
after(async () => {
  const r = await sbx('GET', '/v1/sandboxes')
  for (const s of r.body.data) await sbx('DELETE', `/v1/sandboxes/${s.id}`)
})

describe('files anywhere the sandbox user can reach', () => {
  test('exists, stat, list and read outside the workspace; missing paths are false', async () => {
    assert.equal(await sb.files.exists('/nope'), false)
    assert.equal(await sb.files.exists('/etc/passwd'), true)
    assert.equal(await sb.files.exists('/etc'), true)
    const info = await sb.files.getInfo('/etc/passwd')
    assert.equal(info.type, 'file')
    assert.equal(info.path, '/etc/passwd')
    assert.equal(info.owner, 'root')
    assert.match(await sb.files.read('/etc/passwd'), /^root:/)
    const names = (await sb.files.list('/etc')).map((e) => e.name)
    assert.ok(names.includes('passwd'), names.join(','))
    // What a command writes to /tmp, the files API sees.
    await sb.commands.run('mkdir -p /tmp/t/u && echo made > /tmp/t/u/f.txt')
    assert.equal(await sb.files.read('/tmp/t/u/f.txt'), 'made\n')
    const deep = (await sb.files.list('/tmp/t', { depth: 2 })).map((e) => e.path)
    assert.deepEqual(deep, ['/tmp/t/u', '/tmp/t/u/f.txt'])
    assert.equal(await sb.files.makeDir('/tmp/t/v'), true)
    assert.equal(await sb.files.makeDir('/tmp/t/v'), false)
    const moved = await sb.files.rename('/tmp/t/u/f.txt', '/tmp/t/v/g.txt')
    assert.equal(moved.path, '/tmp/t/v/g.txt')
    assert.equal(moved.owner, 'user')
    assert.equal((await sb.commands.run('cat /tmp/t/v/g.txt')).stdout, 'made\n')
    await sb.files.remove('/tmp/t')
    assert.equal(await sb.files.exists('/tmp/t'), false)
    await assert.rejects(sb.files.read('/tmp/missing'), { name: 'FileNotFoundError' })
    await assert.rejects(sb.files.list('/nope'), { name: 'FileNotFoundError' })
  })

  test('the sandbox user gets its own permission errors', async () => {
    // /root is root's (0700): the user cannot list it, as in E2B's sandboxes.
    await assert.rejects(sb.files.list('/root'), (e) => /permission_denied/.test(e.message))
    await assert.rejects(sb.files.makeDir('/etc/sbx-no'), (e) => /permission_denied/.test(e.message))
    await assert.rejects(sb.files.remove('/etc/passwd'), (e) => /permission_denied/.test(e.message))
    await assert.rejects(sb.files.read('/root/x'), (e) => /permission denied|403/.test(e.message))
  })
})

// GET / on the preview listener with exactly this Host (as a browser resolving *.localhost).
function getByHost(host, headers = {}) {
  const port = Number(host.split(':')[1])
  return new Promise((resolve, reject) => {
    const r = http.get({ host: '127.0.0.1', port, path: '/hello.txt', headers: { Host: host, ...headers } }, (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    r.on('error', reject)
  })
}

describe('getHost', () => {
  test('{port}-{id}.{domain} is a host the preview listener routes by name', async () => {
    const host = sb.getHost(3000)
    assert.match(host, new RegExp(`^3000-${sb.sandboxId}\\.sbx\\.localhost:\\d+$`))
    assert.doesNotThrow(() => new URL(`https://${host}`))
    await sb.files.write('/home/user/www/hello.txt', 'hello by name')
    await sb.commands.run('cd /home/user/www && python3 -m http.server 3000 --bind 127.0.0.1', { background: true })
    let r
    for (let i = 0; i < 100; i++) {
      r = await getByHost(host)
      if (r.status === 200) break
      await new Promise((res) => setTimeout(res, 100))
    }
    assert.equal(r.status, 200)
    assert.equal(r.body, 'hello by name')
    // A name that is no public E2B sandbox reaches nothing (and does not say whether it exists).
    const other = await getByHost(host.replace(sb.sandboxId, 'sb_00000000000000000000'))
    assert.equal(other.status, 403)
  })

  test('allowPublicTraffic: false wants the trafficAccessToken', async () => {
    const p = await Sandbox.create({ network: { allowPublicTraffic: false } })
    try {
      assert.match(p.trafficAccessToken, /^[0-9a-f]{48}$/)
      await p.files.write('/home/user/hello.txt', 'private')
      await p.commands.run('cd /home/user && python3 -m http.server 3001 --bind 127.0.0.1', { background: true })
      const host = p.getHost(3001)
      let r
      for (let i = 0; i < 100; i++) {
        r = await getByHost(host, { 'e2b-traffic-access-token': p.trafficAccessToken })
        if (r.status === 200) break
        await new Promise((res) => setTimeout(res, 100))
      }
      assert.equal(r.body, 'private')
      assert.equal((await getByHost(host)).status, 403)
      assert.equal((await getByHost(host, { 'e2b-traffic-access-token': 'f'.repeat(48) })).status, 403)
    } finally {
      await p.kill()
    }
  })
})

describe('code contexts', () => {
  test('createCodeContext gives separate globals per context; the default keeps its own', async () => {
    const ci = await CodeSandbox.create()
    try {
      await ci.runCode('x = "default"')
      const a = await ci.createCodeContext()
      const b = await ci.createCodeContext({ language: 'python', cwd: '/tmp' })
      assert.notEqual(a.id, b.id)
      assert.equal(b.cwd, '/tmp')
      await ci.runCode('x = "a"', { context: a })
      assert.equal((await ci.runCode('x', { context: a })).text, 'a')
      const none = await ci.runCode('x', { context: b })
      assert.equal(none.error.name, 'NameError')
      assert.equal((await ci.runCode('x')).text, 'default')
      assert.equal((await ci.runCode('x', { language: 'python' })).text, 'default')
      const ids = (await ci.listCodeContexts()).map((c) => c.id)
      assert.deepEqual(ids, ['python', a.id, b.id])
      await ci.removeCodeContext(b)
      assert.deepEqual((await ci.listCodeContexts()).map((c) => c.id), ['python', a.id])
      // A short timer: the SDK leaves its request timer running after an error answer.
      const quick = { requestTimeoutMs: 5000 }
      await assert.rejects(ci.runCode('1', { ...quick, context: b }), { name: 'NotFoundError' })
      await assert.rejects(ci.createCodeContext({ ...quick, language: 'r' }), /400/)
    } finally {
      await ci.kill()
    }
  })
})

describe('fork', () => {
  test('sandbox.fork() makes a running copy with the files and memory of the moment', async () => {
    // A parent of its own: a listening server (getHost's) cannot be checkpointed by gVisor.
    const sb = await Sandbox.create()
    await sb.files.write('/home/user/before-fork.txt', 'parent')
    const sleeper = await sb.commands.run('sleep 600', { background: true })
    const kids = await sb.fork()
    assert.equal(kids.length, 1)
    const [kid] = kids
    assert.ok(kid instanceof Sandbox, String(kid))
    try {
      assert.notEqual(kid.sandboxId, sb.sandboxId)
      assert.match(kid.sandboxId, /^sb_[0-9a-f]{20}$/)
      assert.equal(await kid.files.read('/home/user/before-fork.txt'), 'parent')
      // The memory too: the background process runs on in the copy.
      assert.ok((await kid.commands.list()).some((p) => p.pid === sleeper.pid))
      // Each has its own workspace from now on.
      await kid.files.write('/home/user/before-fork.txt', 'kid')
      assert.equal(await sb.files.read('/home/user/before-fork.txt'), 'parent')
      assert.equal((await kid.getInfo()).state, 'running')
      assert.equal(await sb.isRunning(), true)
      const entries = (await sbx('GET', `/v1/audit?sandbox_id=${sb.sandboxId}&action=sandbox.fork`)).body.data
      assert.equal(entries.length, 1)
    } finally {
      await kid.kill()
      await sb.kill()
    }
    await assert.rejects(Sandbox.fork('sb_00000000000000000000'), { name: 'SandboxNotFoundError' })
  })
})

describe('network', () => {
  test('allowOut at create and updateNetwork are the sandbox egress policy', async () => {
    const policy = async (id) => (await sbx('GET', `/v1/sandboxes/${id}/egress`)).body.policy
    const n = await Sandbox.create({ network: { allowOut: ['example.com', 'pypi.org'], denyOut: ['0.0.0.0/0'] } })
    try {
      assert.deepEqual(await policy(n.sandboxId), { mode: 'allowlist', domains: ['example.com', 'pypi.org'] })
      await n.updateNetwork({ allowOut: ['registry.npmjs.org'] })
      assert.deepEqual(await policy(n.sandboxId), { mode: 'allowlist', domains: ['registry.npmjs.org'] })
      await n.updateNetwork({ denyOut: ['0.0.0.0/0'] })
      assert.deepEqual(await policy(n.sandboxId), { mode: 'none' })
      const entries = (await sbx('GET', `/v1/audit?sandbox_id=${n.sandboxId}&action=sandbox.egress`)).body.data
      assert.equal(entries.length, 2)
      // Addresses and CIDRs are the configuration-style network (docs/e2b.md), which
      // stands in for the sandbox's own policy (none); the address rules still hold.
      await n.updateNetwork({ allowOut: ['10.0.0.1', '8.8.8.0/24'] })
      assert.deepEqual(await policy(n.sandboxId), { mode: 'none' })
      await assert.rejects(n.updateNetwork({ allowOut: ['not a name'] }), (e) => /400: /.test(e.message))
      // Rules need a sandbox created with rules (resources.test.mjs covers those).
      const r = await fetch(`${process.env.E2B_API_URL}/sandboxes/${n.sandboxId}/network`, {
        method: 'PUT', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
        body: JSON.stringify({ allowOut: ['api.example.com'], rules: { 'api.example.com': [{ transform: { headers: { a: 'b' } } }] } }),
      })
      assert.equal(r.status, 501)
      assert.match((await r.json()).message, /rules/)
    } finally {
      await n.kill()
    }
    // Without a network, nothing is allowed: sbx's default.
    assert.deepEqual(await policy(sb.sandboxId), { mode: 'none' })
  })
})

describe('not supported yet', () => {
  const API = process.env.E2B_API_URL
  test('what is left answers 501 with a message', async () => {
    const routes = [
      ['PATCH', '/volumecontent/v1/path?path=/a'],
    ]
    for (const [method, path] of routes) {
      const r = await fetch(API + path, {
        method, headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
        body: method === 'GET' || method === 'DELETE' ? undefined : '{}',
      })
      assert.equal(r.status, 501, `${method} ${path}`)
      const b = await r.json()
      assert.equal(b.code, 501)
      assert.match(b.message, /not supported/)
    }
    // Without a key: 401 as everywhere, not 501.
    assert.equal((await fetch(API + '/secrets')).status, 401)
  })
})

describe('signed file URLs', () => {
  test('uploadUrl and downloadUrl work from a plain HTTP client until they expire', async () => {
    const up = await sb.uploadUrl('/home/user/signed.txt', { useSignatureExpiration: 60 })
    assert.match(up, /signature=v1_/)
    const form = new FormData()
    form.append('file', new Blob(['signed bytes']), 'signed.txt')
    let r = await fetch(up, { method: 'POST', body: form })
    assert.equal(r.status, 200, await r.clone().text())
    assert.equal(await sb.files.read('/home/user/signed.txt'), 'signed bytes')
    const down = await sb.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 60 })
    r = await fetch(down)
    assert.equal(r.status, 200)
    assert.equal(await r.text(), 'signed bytes')
    // Outside the workspace too, as the sandbox user.
    r = await fetch(await sb.downloadUrl('/etc/hostname'))
    assert.equal(r.status, 200)
    // The signature covers the path, the direction and the expiry.
    const other = new URL(down)
    other.searchParams.set('path', '/home/user/other.txt')
    assert.equal((await fetch(other)).status, 401)
    assert.equal((await fetch(up)).status, 401) // an upload's signature does not read
    const stale = new URL(down)
    stale.searchParams.set('signature_expiration', String(Math.floor(Date.now() / 1000) - 5))
    assert.equal((await fetch(stale)).status, 401)
    const noSig = new URL(down)
    noSig.searchParams.delete('signature')
    assert.equal((await fetch(noSig)).status, 401)
  })
})
