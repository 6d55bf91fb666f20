// Timings of the E2B surface beside our own API on the same daemon and sandbox
// (bench/bench_e2b.py runs it): each pair does the same work, so the ratio is what the
// E2B layer (and the SDK) adds. Prints one JSON object {name: [seconds...]}.
const sdk = new URL('../tests/e2b/node_modules/', import.meta.url)
const { Sandbox } = await import(new URL('e2b/dist/index.mjs', sdk))
const { Sandbox: CodeSandbox } = await import(new URL('@e2b/code-interpreter/dist/index.mjs', sdk))

const N = Number(process.env.BENCH_N || 20)
const SBX = process.env.SBX_URL
const KEY = process.env.SBX_KEY
const own = (method, path, body) =>
  fetch(SBX + path, {
    method,
    headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  }).then(async (r) => {
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`)
    return r.text()
  })

async function time(fn) {
  const t0 = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t0) / 1e9
}

const out = {}
async function measure(name, fn) {
  out[name] = []
  for (let i = 0; i < N; i++) out[name].push(await time(fn))
}

await measure('create e2b', async () => (await Sandbox.create()).kill())
await measure('create own', async () => {
  const sb = JSON.parse(await own('POST', '/v1/sandboxes', {}))
  await own('DELETE', `/v1/sandboxes/${sb.id}`)
})
const sb = await CodeSandbox.create({ timeoutMs: 600_000 })
const id = sb.sandboxId
await measure('run true e2b', () => sb.commands.run('true'))
await measure('run true own', () => own('POST', `/v1/sandboxes/${id}/exec`, { shell: 'true' }))
await measure('write 4KiB e2b', () => sb.files.write('/home/user/b.txt', 'x'.repeat(4096)))
await measure('write 4KiB own', () => own('PUT', `/v1/sandboxes/${id}/files/b.txt`, 'x'.repeat(4096)))
await measure('runCode e2b', () => sb.runCode('1+1'))
await measure('run_code own', () => own('POST', `/v1/sandboxes/${id}/run_code`, { code: '1+1' }))
await sb.kill()
console.log(JSON.stringify(out))
