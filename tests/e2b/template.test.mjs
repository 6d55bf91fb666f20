// Template builds from the pinned SDK's Template builder (issue 42, docs/e2b.md "Templates"),
// run by tests/e2e/test_e2b.py (suite_e2b_template) against a daemon with a template cache
// of its own (base only), with the same environment as sdk.test.mjs.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'

import { BuildError, Sandbox, Template, TemplateError } from 'e2b'

import { e2bApi, sbx } from './sbxapi.mjs'

const KEY = process.env.SBX_KEY
const API = process.env.E2B_API_URL
const NAME = 'e2b-tpl'

// The files a COPY step sends: a context directory of their own.
let ctx
before(() => {
  ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-e2b-tpl-'))
  fs.writeFileSync(path.join(ctx, 'hello.txt'), 'hello from a copy, ș ț\n')
  fs.mkdirSync(path.join(ctx, 'app'))
  fs.writeFileSync(path.join(ctx, 'app', 'run.sh'), '#!/bin/sh\necho app ran\n', { mode: 0o755 })
})
after(async () => {
  fs.rmSync(ctx, { recursive: true, force: true })
  const r = await sbx('GET', '/v1/sandboxes')
  for (const s of r.body.data) await sbx('DELETE', `/v1/sandboxes/${s.id}`)
})

function recipe(from) {
  return from(Template({ fileContextPath: ctx }))
    .copy('hello.txt', '/opt/e2b-test/hello.txt')
    .copy('app', '/opt/e2b-test/app/', { mode: 0o755 })
    .setEnvs({ GREETING: "salut l'ami" })
    .setWorkdir('/opt/e2b-test')
    .runCmd('echo "built by run: $GREETING" > run.txt && cat hello.txt && ./app/run.sh')
    .runCmd('echo "as $(id -un)"', { user: 'user' })
}

describe('Template.build on sbx custom templates', () => {
  let built
  test('fromTemplate, copy, runCmd and setEnvs build, with the logs as onBuildLogs', async () => {
    const logs = []
    built = await Template.build(recipe((t) => t.fromTemplate('base')), `${NAME}:v1`, {
      onBuildLogs: (e) => logs.push(e),
    })
    assert.equal(built.templateId, NAME)
    assert.equal(built.name, `${NAME}:v1`)
    assert.deepEqual(built.tags, ['v1'])
    assert.match(built.buildId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    const text = logs.map((e) => `${e.level} ${e.message}`).join('\n')
    // The SDK's own lines, then the build's: its steps and what the commands printed.
    assert.match(text, /Uploaded 'hello.txt'/)
    assert.match(text, /hello from a copy, ș ț/)
    assert.match(text, /info app ran/)
    assert.match(text, /info as user/)
    assert.match(text, /Template is ready/)
    assert.match(logs.at(-1).message, /Build finished/)
    // Audited as sbx's own builds, through E2B.
    const a = (await sbx('GET', '/v1/audit?action=template.build')).body.data
    assert.ok(a.some((e) => e.details.via === 'e2b' && e.details.name === NAME && e.outcome === 'started'), JSON.stringify(a))
    const rq = (await sbx('GET', '/v1/audit?action=template.build_request')).body.data
    assert.ok(rq.some((e) => e.details.build_id === built.buildId && e.details.name === NAME), JSON.stringify(rq))
    const up = (await sbx('GET', '/v1/audit?action=template.upload')).body.data
    assert.equal(up.filter((e) => e.details.build_id === built.buildId).length, 2)
    // The same template through our API.
    const t = await sbx('GET', `/v1/templates/${NAME}`)
    assert.equal(t.status, 200)
    assert.equal(t.body.from, 'base')
  })

  test('Sandbox.create(alias) runs on it and sees the files, the commands and the env', async () => {
    const sb = await Sandbox.create(NAME)
    try {
      const r = await sb.commands.run('cat /opt/e2b-test/hello.txt /opt/e2b-test/run.txt; /opt/e2b-test/app/run.sh; echo "$GREETING"')
      assert.equal(r.stdout, "hello from a copy, ș ț\nbuilt by run: salut l'ami\napp ran\nsalut l'ami\n")
      assert.equal((await sb.getInfo()).templateId, NAME)
      // The template's root is read-only, as every template's.
      await assert.rejects(sb.commands.run('touch /opt/e2b-test/x', { user: 'root' }))
    } finally {
      await sb.kill()
    }
    // name:tag works while the tag names the newest build.
    const tagged = await Sandbox.create(`${NAME}:v1`)
    assert.equal((await tagged.commands.run('cat /opt/e2b-test/run.txt')).exitCode, 0)
    await tagged.kill()
    await assert.rejects(Sandbox.create(`${NAME}:nope`), /no tag 'nope'/)
  })

  test('exists, tags and the template itself', async () => {
    assert.equal(await Template.exists(NAME), true)
    assert.equal(await Template.exists('base'), true)
    assert.equal(await Template.exists('no-such-tpl'), false)
    let tags = await Template.getTags(NAME)
    assert.deepEqual(tags.map((t) => t.tag).sort(), ['default', 'v1'])
    assert.ok(tags.every((t) => t.buildId === built.buildId && t.createdAt instanceof Date))
    const assigned = await Template.assignTags(`${NAME}:v1`, ['prod', 'stable'])
    assert.deepEqual(assigned, { buildId: built.buildId, tags: ['prod', 'stable'] })
    await Template.removeTags(NAME, 'stable')
    tags = await Template.getTags(NAME)
    assert.deepEqual(tags.map((t) => t.tag).sort(), ['default', 'prod', 'v1'])
    await assert.rejects(Template.removeTags(NAME, 'default'), (e) => e instanceof TemplateError && /400: Cannot delete the 'default' tag/.test(e.message))
    await assert.rejects(Template.assignTags(`${NAME}:nope`, 'x'), /404: .*tag 'nope' not found/)
    await assert.rejects(Template.getTags('no-such-tpl'), /404/)
    const t = await e2bApi('GET', `/templates/${NAME}`)
    assert.equal(t.status, 200)
    assert.equal(t.body.templateID, NAME)
    assert.deepEqual(t.body.names, [NAME])
    assert.equal(t.body.builds[0].buildID, built.buildId)
    assert.equal(t.body.builds[0].status, 'ready')
    const audit = (await sbx('GET', '/v1/audit?action=template.tags')).body.data
    assert.equal(audit.length, 4, JSON.stringify(audit))
  })

  test('the same steps from fromImage(sbx-base) are sbx\'s cached build', async () => {
    const logs = []
    const t0 = Date.now()
    const b = await Template.build(recipe((t) => t.fromImage('sbx-base')), NAME, { onBuildLogs: (e) => logs.push(e.message) })
    assert.notEqual(b.buildId, built.buildId)
    assert.ok(logs.some((m) => /same steps were built before/.test(m)), logs.join('\n'))
    assert.ok(Date.now() - t0 < 30_000)
    const status = await Template.getBuildStatus(b)
    assert.equal(status.status, 'ready')
    assert.ok(status.logEntries.length > 0)
  })

  test('a failing step is a BuildError with its output; unavailable images are refused', async () => {
    const bad = Template().fromTemplate('base').runCmd('echo about to fail; echo boom >&2; exit 3')
    await assert.rejects(Template.build(bad, 'e2b-tpl-bad'), (e) => e instanceof BuildError && /^step 1: run 1\/1 exited with 3: boom/.test(e.message))
    await assert.rejects(Template.build(Template().fromImage('python:3').runCmd('true'), 'e2b-tpl-img'),
      (e) => e instanceof BuildError && /400: the image python:3 is not available on this sbx server/.test(e.message))
    await assert.rejects(Template.build(Template().fromTemplate('base').runCmd('true'), 'Bad_Name'),
      (e) => e instanceof BuildError && /400: Invalid name 'bad_name'/.test(e.message))
    // The operator's templates are not anyone's to rebuild.
    await assert.rejects(Template.build(Template().fromTemplate('base').runCmd('true'), 'base'),
      (e) => e instanceof BuildError && /409: Alias 'base' is already used/.test(e.message))
  })

  test('the wire: bad hashes, upload links and unknown builds', async () => {
    const req = await e2bApi('POST', '/v3/templates', { name: 'e2b-tpl-wire' })
    assert.equal(req.status, 202)
    assert.deepEqual(req.body.tags, ['default'])
    const id = req.body.templateID, build = req.body.buildID
    assert.equal((await e2bApi('GET', `/templates/${id}/files/nothex`)).status, 400)
    const link = await e2bApi('GET', `/templates/${id}/files/${'a'.repeat(64)}`)
    assert.equal(link.status, 201)
    assert.equal(link.body.present, false)
    // The link is the credential: without its token, nothing is kept.
    const bad = await fetch(link.body.url.replace(/token=[0-9a-f]+/, 'token=' + '0'.repeat(48)), { method: 'PUT', body: 'x' })
    assert.equal(bad.status, 403)
    const ok = await fetch(link.body.url, { method: 'PUT', body: 'not a tar' })
    assert.equal(ok.status, 200)
    assert.equal((await e2bApi('GET', `/templates/${id}/files/${'a'.repeat(64)}`)).body.present, true)
    let st = await e2bApi('GET', `/templates/${id}/builds/${build}/status`)
    assert.equal(st.status, 200)
    assert.equal(st.body.status, 'waiting')
    assert.equal((await e2bApi('GET', `/templates/${id}/builds/00000000-0000-4000-8000-000000000000/status`)).status, 404)
    // Steps sbx does not map, and a COPY whose files never came.
    let r = await e2bApi('POST', `/v2/templates/${id}/builds/${build}`, { fromTemplate: 'base', steps: [{ type: 'ARG', args: [] }] })
    assert.equal(r.status, 400)
    assert.match(r.body.message, /ARG steps are not supported/)
    r = await e2bApi('POST', `/v2/templates/${id}/builds/${build}`, { fromTemplate: 'base', steps: [{ type: 'COPY', args: ['a', '/b'], filesHash: 'b'.repeat(64) }] })
    assert.equal(r.status, 400)
    assert.match(r.body.message, /were not uploaded/)
    r = await e2bApi('POST', `/v2/templates/${id}/builds/${build}`, { fromTemplate: 'base', steps: [{ type: 'COPY', args: ['a', '/home/user/a'], filesHash: 'a'.repeat(64) }] })
    assert.equal(r.status, 400)
    assert.match(r.body.message, /own workspace/)
    r = await e2bApi('POST', `/v2/templates/${id}/builds/${build}`, { fromTemplate: 'base', fromImage: 'sbx-base' })
    assert.equal(r.status, 400)
    // A newer request supersedes a build that never started, as on E2B.
    const again = await e2bApi('POST', '/v3/templates', { name: 'e2b-tpl-wire' })
    st = await e2bApi('GET', `/templates/${id}/builds/${build}/status`)
    assert.equal(st.body.status, 'error')
    assert.match(st.body.reason.message, /superseded/)
    r = await e2bApi('POST', `/v2/templates/${id}/builds/${build}`, { fromTemplate: 'base' })
    assert.equal(r.status, 400)
    assert.equal(again.status, 202)
    // Another user sees none of it.
    const other = await sbx('POST', '/v1/keys', { user: 'someone-else', role: 'member', tool_level: 'sandbox' }, process.env.SBX_ADMIN_KEY)
    const res = await fetch(`${API}/templates/${id}/builds/${again.body.buildID}/status`, { headers: { 'X-API-KEY': other.body.key } })
    assert.equal(res.status, 404)
    const alias = await fetch(`${API}/templates/aliases/${NAME}`, { headers: { 'X-API-KEY': other.body.key } })
    assert.equal(alias.status, 403)
    const del = await fetch(`${API}/templates/${NAME}`, { method: 'DELETE', headers: { 'X-API-KEY': other.body.key } })
    assert.equal(del.status, 404)
  })

  test('DELETE /templates/{id} deletes it (false the second time, for the SDK)', async () => {
    let r = await e2bApi('DELETE', `/templates/${NAME}`)
    assert.equal(r.status, 204)
    assert.equal(await Template.exists(NAME), false)
    r = await e2bApi('DELETE', `/templates/${NAME}`)
    assert.equal(r.status, 404)
    // Snapshot ids are no template names: 404, which deleteSnapshot answers as false.
    assert.equal(await Sandbox.deleteSnapshot('snap_0123'), false)
    assert.equal((await e2bApi('DELETE', '/templates/base')).status, 409)
    const del = (await sbx('GET', '/v1/audit?action=template.delete')).body.data
    assert.deepEqual(del.map((e) => [e.details.via, e.details.name, e.outcome]).sort(),
      [['e2b', '', 'template_not_found'], ['e2b', 'base', 'template_builtin'], ['e2b', NAME, 'ok'], ['e2b', NAME, 'template_not_found']])
    await assert.rejects(Sandbox.create(NAME), /400/)
  })
})
