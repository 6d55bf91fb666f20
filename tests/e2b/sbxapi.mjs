// sbx's own API beside the E2B SDK in the node suites: both surfaces are one system.
import assert from 'node:assert/strict'

const SBX = process.env.SBX_URL
const KEY = process.env.SBX_KEY
const API = process.env.E2B_API_URL

// {status, body: the parsed JSON answer or null when empty, text: the answer as it came}.
async function call(url, headers, method, body) {
  const res = await fetch(url, {
    method,
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null, text }
}

// sbx's own API (SBX_URL) as key, the suite's key (SBX_KEY) unless another is given.
export async function sbx(method, path, body, key = KEY) {
  return call(SBX + path, { Authorization: `Bearer ${key}` }, method, body)
}

// E2B's REST API (E2B_API_URL) as the SDK calls it, with key as X-API-KEY.
export async function e2bApi(method, path, body, key = KEY) {
  return call(API + path, { 'X-API-KEY': key }, method, body)
}

// The audit entries of one action on one sandbox.
export async function audit(sandboxId, action) {
  const r = await sbx('GET', `/v1/audit?sandbox_id=${sandboxId}&action=${action}`)
  assert.equal(r.status, 200)
  return r.body.data
}
