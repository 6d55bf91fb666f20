// Secrets, network rules that inject them upstream, allowInternetAccess/denyOut and
// snapshots, through the pinned SDK against sbx (issue 42). Run by tests/e2e/test_e2b.py
// (suite_e2b_resources) with the egress tests' upstreams (tests/e2e/egress_upstream.py):
// allowed.example.com, other.example.com, ... resolve to UPSTREAM_ADDR, whose :443 answers
// /headers with the request's headers as it got them.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after, describe, test } from 'node:test'

import { Sandbox, Secret, Volume } from 'e2b'

import { e2bApi, sbx } from './sbxapi.mjs'

const API = process.env.E2B_API_URL
const KEY = process.env.SBX_KEY
const ADMIN = process.env.SBX_ADMIN_KEY
const VALUE = 'e2b-secret-value-5be1d'
const sha = (s) => createHash('sha256').update(s).digest('hex')

async function audit(action) {
  const r = await sbx('GET', `/v1/audit?action=${action}&limit=50`, undefined, ADMIN)
  assert.equal(r.status, 200, r.text)
  return r.body.data
}

// A request from inside the sandbox through its proxy: {status, sha of X-Api-Key, reason}.
const FETCH = `
import hashlib, json, sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=30)
    h = json.loads(r.read())
    k = h.get("x-api-key")
    print(json.dumps({"status": r.status, "sha": k and hashlib.sha256(k.encode()).hexdigest()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "reason": e.headers.get("X-Sbx-Egress-Reason")}))
except Exception as e:
    print(json.dumps({"status": 0, "error": str(e)}))
`
async function fetchFrom(sb, url) {
  await sb.files.write('/home/user/fetch.py', FETCH)
  const r = await sb.commands.run(`python3 /home/user/fetch.py ${url}`, { timeoutMs: 90_000 })
  return JSON.parse(r.stdout)
}

const made = []
after(async () => {
  for (const s of made) await Sandbox.kill(s).catch(() => {})
})

describe('secrets', () => {
  test('create, read, list, update, destroy: the value never comes back; audited', async () => {
    const info = await Secret.create('Team-Token', VALUE, { metadata: { env: 'test' } })
    assert.match(info.secretId, /^sec_[0-9a-f]{24}$/)
    assert.equal(info.name, 'team-token') // names are lower-cased, as E2B's
    assert.equal(info.version, 1)
    assert.deepEqual(info.metadata, { env: 'test' })
    assert.ok(info.createdAt instanceof Date && !isNaN(info.createdAt))
    const byName = await Secret.getInfo('team-token')
    assert.equal(byName.secretId, info.secretId)
    assert.equal(await Secret.exists(info.secretId), true)
    assert.equal(await Secret.exists('no-such-secret'), false)
    await assert.rejects(Secret.getInfo('no-such-secret'), { name: 'SecretNotFoundError' })
    const page = await Secret.list().nextItems()
    assert.ok(page.some((s) => s.secretId === info.secretId))
    await assert.rejects(Secret.create('team-token', 'x'), (e) => /exists/.test(e.message))
    await assert.rejects(Secret.create('sec_x', 'x'), (e) => /reserved/.test(e.message))
    const v2 = await Secret.update('team-token', VALUE + '-2')
    assert.equal(v2.version, 2)
    assert.deepEqual(v2.metadata, { env: 'test' })
    // Nothing a client can read holds the value: the raw answers, the audit entries.
    for (const path of ['/secrets', `/secrets/${info.secretId}`, '/secrets/team-token']) {
      const r = await e2bApi('GET', path)
      assert.equal(r.status, 200, r.text)
      assert.ok(!r.text.includes(VALUE), r.text)
      assert.ok(!r.text.includes('sbxenc'), r.text)
    }
    const entries = [...(await audit('secret.create')), ...(await audit('secret.update'))]
    assert.ok(entries.some((e) => e.details.secret_id === info.secretId && e.action === 'secret.create'))
    assert.ok(entries.some((e) => e.details.secret_id === info.secretId && e.action === 'secret.update'))
    assert.ok(!JSON.stringify(entries).includes(VALUE))
    // Another user's key sees none of them.
    const other = await sbx('POST', '/v1/keys', { user: 'e2b-other', role: 'member', tool_level: 'sandbox' }, ADMIN)
    assert.equal(other.status, 201, other.text)
    const r = await e2bApi('GET', `/secrets/${info.secretId}`, undefined, other.body.key)
    assert.equal(r.status, 404, r.text)
    assert.equal(await Secret.destroy(info.secretId), true)
    assert.equal(await Secret.destroy(info.secretId), false)
    assert.ok((await audit('secret.delete')).some((e) => e.details.secret_id === info.secretId))
  })

  test('bad input is E2B-shaped 4xx', async () => {
    const r = await e2bApi('POST', '/secrets', { name: 'a{b}', value: 'v' })
    assert.equal(r.status, 400, r.text)
    assert.equal(r.body.code, 400)
    const r2 = await e2bApi('POST', '/secrets', { name: 'ok', value: '' })
    assert.equal(r2.status, 400, r2.text)
  })
})

describe('network rules inject secrets upstream', () => {
  test('a rule header with ${e2b.secrets.name} reaches the upstream; the sandbox never sees it', async () => {
    await Secret.create('upstream-key', VALUE)
    const sb = await Sandbox.create({
      timeoutMs: 600_000,
      network: {
        allowOut: ({ rules }) => [...rules.keys()],
        rules: {
          'allowed.example.com': [
            { transform: { headers: { 'X-Api-Key': `Key ${Secret.fill('upstream-key')}` } } },
          ],
        },
      },
    })
    made.push(sb.sandboxId)
    const got = await fetchFrom(sb, 'https://allowed.example.com/headers')
    assert.equal(got.status, 200, JSON.stringify(got))
    assert.equal(got.sha, sha(`Key ${VALUE}`))
    // Not in the allowlist: refused by the proxy.
    const other = await fetchFrom(sb, 'http://other.example.com/headers')
    assert.equal(other.status, 403, JSON.stringify(other))
    // The value is nowhere the sandbox or a client can look.
    const env = await sb.commands.run("env; cat /proc/1/environ | tr '\\0' '\\n'; true")
    assert.ok(!env.stdout.includes(VALUE))
    const info = await e2bApi('GET', `/sandboxes/${sb.sandboxId}`)
    assert.ok(!info.text.includes(VALUE))
    const log = await sbx('GET', `/v1/sandboxes/${sb.sandboxId}/egress`)
    assert.ok(log.text.includes('injected 1 header'), log.text)
    assert.ok(!log.text.includes(VALUE))

    // updateNetwork replaces the rules: a plain value now, then nothing at all.
    await sb.updateNetwork({
      allowOut: ['allowed.example.com'],
      rules: { 'allowed.example.com': [{ transform: { headers: { 'X-Api-Key': 'plain-v2' } } }] },
    })
    assert.equal((await fetchFrom(sb, 'https://allowed.example.com/headers')).sha, sha('plain-v2'))
    await sb.updateNetwork({})
    const none = await fetchFrom(sb, 'https://allowed.example.com/headers')
    assert.notEqual(none.status, 200, JSON.stringify(none))
    await Secret.destroy('upstream-key')
    await sb.kill()
  })

  test('an unknown secret, an identity token, an egress proxy: clear errors', async () => {
    await assert.rejects(
      Sandbox.create({
        network: {
          allowOut: ['allowed.example.com'],
          rules: { 'allowed.example.com': [{ transform: { headers: { A: Secret.fill('missing') } } }] },
        },
      }),
      (e) => /secret missing not found/.test(e.message),
    )
    const r = await e2bApi('POST', '/sandboxes', {
      templateID: 'base',
      network: { allowOut: ['allowed.example.com'], rules: { 'allowed.example.com': [{ transform: { headers: { A: '${e2b.identity.tokens.x}' } } }] } },
    })
    assert.equal(r.status, 501, r.text)
    const p = await e2bApi('POST', '/sandboxes', {
      templateID: 'base', network: { egressProxy: { address: 'p:1080' } },
    })
    assert.equal(p.status, 501, p.text)
  })

  test('allowInternetAccess and denyOut', async () => {
    // Open: everything the operator and the address rules allow, but denyOut.
    const open = await Sandbox.create({ allowInternetAccess: true })
    made.push(open.sandboxId)
    assert.equal((await fetchFrom(open, 'http://other.example.com/headers')).status, 200)
    const deny = await Sandbox.create({
      network: { denyOut: [`${process.env.UPSTREAM_ADDR}/32`] },
    })
    made.push(deny.sandboxId)
    const d = await fetchFrom(deny, 'http://other.example.com/headers')
    assert.equal(d.status, 403, JSON.stringify(d))
    assert.equal(d.reason, 'config_deny_out')
    // allowInternetAccess false: only allowOut; allowOut wins over denyOut [0.0.0.0/0].
    await open.updateNetwork({ allowOut: ['allowed.example.com'], denyOut: ['0.0.0.0/0'] })
    assert.equal((await fetchFrom(open, 'http://other.example.com/headers')).status, 403)
    assert.equal((await fetchFrom(open, 'http://allowed.example.com/headers')).status, 200)
    await Sandbox.kill(open.sandboxId)
    await Sandbox.kill(deny.sandboxId)
  })
})

describe('snapshots', () => {
  test('createSnapshot, listSnapshots, Sandbox.create(snapshot), deleteSnapshot', async () => {
    const sb = await Sandbox.create({ timeoutMs: 600_000 })
    made.push(sb.sandboxId)
    await sb.files.write('/home/user/kept.txt', 'kept in the snapshot')
    const snap = await sb.createSnapshot({ name: 'my-snap' })
    assert.match(snap.snapshotId, /^snapshot_[0-9a-f]{24}$/)
    assert.deepEqual(snap.names, ['my-snap'])
    // The sandbox goes on running; the snapshot outlives it.
    assert.equal((await sb.commands.run('echo alive')).stdout, 'alive\n')
    const mine = await Sandbox.listSnapshots({ sandboxId: sb.sandboxId }).nextItems()
    assert.deepEqual(mine.map((s) => s.snapshotId), [snap.snapshotId])
    assert.equal((await audit('sandbox.snapshot')).filter((e) => e.sandbox_id === sb.sandboxId).length, 1)
    await sb.kill()
    const copy = await Sandbox.create(snap.snapshotId, { timeoutMs: 600_000 })
    made.push(copy.sandboxId)
    assert.equal(await copy.files.read('/home/user/kept.txt'), 'kept in the snapshot')
    const byName = await Sandbox.create('my-snap')
    made.push(byName.sandboxId)
    assert.equal(await byName.files.read('/home/user/kept.txt'), 'kept in the snapshot')
    await byName.kill()
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    assert.deepEqual(await Sandbox.listSnapshots({ sandboxId: sb.sandboxId }).nextItems(), [])
    await assert.rejects(Sandbox.create(snap.snapshotId), (e) => /not found/.test(e.message))
    await copy.kill()
  })
})

describe('volumes', () => {
  test('create, the file API with the volume token, volumeMounts, delete', async () => {
    const vol = await Volume.create('e2b-data')
    assert.match(vol.volumeId, /^vol_/)
    const w = await vol.writeFile('/dir/a.txt', 'volume bytes')
    assert.equal(w.type, 'file')
    assert.equal(w.size, 12)
    assert.equal(w.path, '/dir/a.txt')
    assert.equal(await vol.readFile('/dir/a.txt'), 'volume bytes')
    assert.deepEqual((await vol.list('/dir')).map((e) => e.name), ['a.txt'])
    assert.deepEqual((await vol.list('/', { depth: 2 })).map((e) => e.path), ['/dir', '/dir/a.txt'])
    const dir = await vol.makeDir('/made/deep')
    assert.equal(dir.type, 'directory')
    assert.equal(dir.path, '/made/deep')
    assert.equal((await vol.getInfo('/dir/a.txt')).size, 12)
    assert.equal(await vol.exists('/nope'), false)
    await assert.rejects(vol.readFile('/nope'), { name: 'VolumePathNotFoundError' })
    await assert.rejects(vol.readFile('/../etc/passwd'), (e) => e.name !== 'AssertionError')
    const info = await Volume.getInfo('e2b-data')
    assert.equal(info.volumeId, vol.volumeId)
    assert.equal(info.token, vol.token)
    assert.ok((await Volume.list()).some((v) => v.volumeId === vol.volumeId && v.name === 'e2b-data'))
    // The file API takes the volume's token, not the API key, and no other token.
    const url = `${API}/volumecontent/${vol.volumeId}/file?path=/dir/a.txt`
    assert.equal((await fetch(url, { headers: { Authorization: 'Bearer ' + '0'.repeat(48) } })).status, 401)
    assert.equal((await fetch(url, { headers: { Authorization: 'Bearer ' + KEY } })).status, 401)
    assert.equal((await fetch(url, { headers: { Authorization: 'Bearer ' + vol.token } })).status, 200)

    const sb = await Sandbox.create({ volumeMounts: { '/mnt/data': vol }, timeoutMs: 600_000 })
    made.push(sb.sandboxId)
    assert.equal((await sb.commands.run('cat /mnt/data/dir/a.txt')).stdout, 'volume bytes')
    await sb.commands.run('echo from-sandbox > /mnt/data/b.txt')
    assert.equal(await vol.readFile('/b.txt'), 'from-sandbox\n')
    await assert.rejects(Volume.destroy(vol.volumeId), (e) => /in use|mount/.test(e.message))
    await sb.kill()
    await vol.remove('/dir/a.txt')
    assert.equal(await vol.exists('/dir/a.txt'), false)
    await assert.rejects(vol.remove('/dir/a.txt'), { name: 'VolumePathNotFoundError' })
    assert.equal(await Volume.destroy(vol.volumeId), true)
    assert.equal(await Volume.destroy(vol.volumeId), false)
    assert.ok((await audit('volume.file.upload')).some((e) => e.sandbox_id === vol.volumeId || JSON.stringify(e).includes(vol.volumeId)))
  })
})
