// sbx's own API beside the E2B SDK in the node suites: both surfaces are one system.
import assert from 'node:assert/strict'

const SBX = process.env.SBX_URL
const KEY = process.env.SBX_KEY

export async function sbx(method, path, body) {
  const res = await fetch(SBX + path, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

// The audit entries of one action on one sandbox.
export async function audit(sandboxId, action) {
  const r = await sbx('GET', `/v1/audit?sandbox_id=${sandboxId}&action=${action}`)
  assert.equal(r.status, 200)
  return r.body.data
}
