// PTYs through envd's process service, JavaScript and TypeScript cells, and files.write
// anywhere the sandbox user may write (issue 42), with the pinned SDKs against sbx; run by
// tests/e2e/test_e2b.py (suite_e2b_pty) with the same environment as sdk.test.mjs.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { Sandbox } from 'e2b'

import { audit, sbx } from './sbxapi.mjs'

// Resolves once the text seen so far matches re (the terminal's output arrives in pieces).
function screen() {
  const dec = new TextDecoder()
  let text = ''
  let waiters = []
  return {
    onData(bytes) {
      text += dec.decode(bytes, { stream: true })
      waiters = waiters.filter((w) => !(w.re.test(text) && (w.resolve(text), true)))
    },
    until(re, ms = 20_000) {
      if (re.test(text)) return Promise.resolve(text)
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no ${re} in ${JSON.stringify(text)}`)), ms)
        waiters.push({ re, resolve: (v) => (clearTimeout(t), resolve(v)) })
      })
    },
    get text() {
      return text
    },
  }
}

const enc = new TextEncoder()

let sb
before(async () => {
  sb = await Sandbox.create({ timeoutMs: 600_000 })
})
after(async () => {
  const r = await sbx('GET', '/v1/sandboxes')
  for (const s of r.body.data) await sbx('DELETE', `/v1/sandboxes/${s.id}`)
})

describe('PTYs', () => {
  test('create with a size, type into it, resize, and see its output as onData', async () => {
    const s = screen()
    const h = await sb.pty.create({
      cols: 100, rows: 30, onData: s.onData, envs: { PTY_MARK: 'marked' }, cwd: '/home/user', timeoutMs: 0,
    })
    assert.ok(h.pid > 0)
    await sb.pty.sendInput(h.pid, enc.encode('stty size; echo "[$PTY_MARK] $(pwd) $TERM"; tty\n'))
    await s.until(/30 100/)
    await s.until(/\[marked\] \/home\/user xterm-256color/)
    await s.until(/\/dev\/pts\/\d+/)
    await sb.pty.resize(h.pid, { cols: 120, rows: 40 })
    await sb.pty.sendInput(h.pid, enc.encode('stty size\n'))
    await s.until(/40 120/)
    // Control characters reach the terminal as bytes: ^C interrupts the foreground job.
    await sb.pty.sendInput(h.pid, enc.encode('sleep 100\n'))
    await sb.pty.sendInput(h.pid, enc.encode('\x03echo after-$((6*7))\n'))
    await s.until(/after-42/)
    await sb.pty.sendInput(h.pid, enc.encode('exit 3\n'))
    await assert.rejects(h.wait(), (e) => e.name === 'CommandExitError' && e.exitCode === 3)
    // Audited as the start of a process, with the size.
    const e = (await audit(sb.sandboxId, 'process.start')).find((x) => x.details.pty)
    assert.ok(e, 'a process.start entry with pty')
    assert.equal(e.outcome, 'started')
    assert.deepEqual(e.details.pty, { cols: 100, rows: 30 })
    assert.equal(e.details.via, 'e2b')
  })

  test('kill ends it with the signal; a gone PTY is false; commands.kill works on it too', async () => {
    const s = screen()
    const h = await sb.pty.create({ cols: 80, rows: 24, onData: s.onData })
    await sb.pty.sendInput(h.pid, enc.encode('echo ready\n'))
    await s.until(/ready/)
    assert.equal(await sb.pty.kill(h.pid), true)
    await assert.rejects(h.wait(), (e) => e.exitCode === -1 && /signal: killed/.test(e.error))
    assert.equal(await sb.pty.kill(h.pid), false)
    await assert.rejects(sb.pty.sendInput(h.pid, enc.encode('x')), { name: 'NotFoundError' })
    await assert.rejects(sb.pty.resize(h.pid, { cols: 10, rows: 10 }), { name: 'NotFoundError' })
    const h2 = await sb.pty.create({ cols: 80, rows: 24, onData: () => {} })
    assert.equal(await sb.commands.kill(h2.pid), true)
    await assert.rejects(h2.wait(), (e) => e.exitCode === -1)
  })

  test('disconnect leaves it running; connect follows its live output', async () => {
    const first = screen()
    const h = await sb.pty.create({ cols: 80, rows: 24, onData: first.onData, timeoutMs: 0 })
    // The output, not the echo of what was typed (which arrives first).
    await sb.pty.sendInput(h.pid, enc.encode('echo o""ne\n'))
    await first.until(/\rone\r\n/)
    await h.disconnect()
    const s = screen()
    const c = await sb.pty.connect(h.pid, { onData: s.onData })
    assert.equal(c.pid, h.pid)
    await sb.pty.sendInput(h.pid, enc.encode('echo two-$((1+1))\n'))
    await s.until(/two-2/)
    assert.ok(!/one/.test(s.text), 'a connect sends live output only')
    await sb.pty.sendInput(h.pid, enc.encode('exit\n'))
    const r = await c.wait()
    assert.equal(r.exitCode, 0)
    await assert.rejects(sb.pty.connect(987654), { name: 'NotFoundError' })
  })

  test("Connect-Timeout-Ms is the PTY's lifetime, as for envd", async () => {
    const h = await sb.pty.create({ cols: 80, rows: 24, onData: () => {}, timeoutMs: 1500 })
    const r = await h.wait().then(() => null, (e) => e)
    // The SDK's own deadline or the agent's kill, whichever it sees first: either way the
    // PTY is gone afterwards.
    assert.ok(r, 'the PTY ended')
    const gone = await sb.commands.run(`kill -0 ${h.pid} 2>/dev/null && echo alive || echo gone`)
    assert.equal(gone.stdout.trim(), 'gone')
  })
})

describe('JavaScript and TypeScript cells', () => {
  test("runCode({language: 'js'|'ts'}): results, logs, errors, state, separate contexts", async () => {
    const ci = await CodeSandbox.create()
    try {
      const one = await ci.runCode('const a = 20; a + 22', { language: 'js' })
      assert.equal(one.text, '42')
      assert.equal(one.error, undefined)
      // State is kept between cells of a context.
      assert.equal((await ci.runCode('a * 2', { language: 'javascript' })).text, '40')
      const out = []
      const logs = await ci.runCode('console.log("to out", 1); console.error("to err"); "s"', {
        language: 'js', onStdout: (m) => out.push(m.line),
      })
      assert.deepEqual(logs.logs.stdout, ['to out 1\n'])
      assert.deepEqual(logs.logs.stderr, ['to err\n'])
      assert.deepEqual(out, ['to out 1\n'])
      assert.equal(logs.text, 's')
      assert.equal((await ci.runCode('({x: [1, 2], y: "z"})', { language: 'js' })).text, "{ x: [ 1, 2 ], y: 'z' }")
      const err = await ci.runCode('null.f()', { language: 'js' })
      assert.equal(err.error.name, 'TypeError')
      assert.match(err.error.value, /null/)
      assert.match(err.error.traceback, /TypeError/)
      const thrown = await ci.runCode('throw new RangeError("too far")', { language: 'js' })
      assert.deepEqual([thrown.error.name, thrown.error.value], ['RangeError', 'too far'])
      // Top-level await and require.
      const aw = await ci.runCode('const fs = require("fs"); await new Promise((r) => setTimeout(r, 10)); console.log(fs.existsSync("/etc/passwd"))', { language: 'js' })
      assert.deepEqual(aw.logs.stdout, ['true\n'])
      assert.equal((await ci.runCode('Promise.resolve(7)', { language: 'js' })).text, '7')
      // TypeScript: the types are stripped; its default context is not JavaScript's.
      const ts = await ci.runCode('const n: number = 5; function sq(x: number): number { return x * x }; sq(n)', { language: 'ts' })
      assert.equal(ts.text, '25')
      assert.equal((await ci.runCode('typeof a', { language: 'typescript' })).text, 'undefined')
      // Contexts: separate globals per context, and none leak into Python's.
      const c1 = await ci.createCodeContext({ language: 'js' })
      const c2 = await ci.createCodeContext({ language: 'javascript' })
      assert.equal(c1.language, 'js')
      await ci.runCode('var v = "one"', { context: c1 })
      await ci.runCode('globalThis.v = "two"', { context: c2 })
      assert.equal((await ci.runCode('v', { context: c1 })).text, 'one')
      assert.equal((await ci.runCode('v', { context: c2 })).text, 'two')
      assert.equal((await ci.runCode('typeof v', { language: 'js' })).text, 'undefined')
      const py = await ci.runCode('v')
      assert.equal(py.error.name, 'NameError')
      const tctx = await ci.createCodeContext({ language: 'ts' })
      assert.equal((await ci.runCode('let q: string = "typed"; q', { context: tctx })).text, 'typed')
      const langs = (await ci.listCodeContexts()).map((c) => c.language)
      assert.deepEqual(langs, ['python', 'js', 'js', 'ts'])
      // An interrupted-by-timeout cell does not disturb the next one.
      assert.equal((await ci.runCode('[1,2,3].map((x) => x * 2).join(",")', { language: 'js' })).text, '2,4,6')
      await assert.rejects(ci.runCode('1', { language: 'r', requestTimeoutMs: 5000 }), /400/)
    } finally {
      await ci.kill()
    }
  })
})

describe('files.write anywhere the user may write', () => {
  test('outside the workspace as the sandbox user; E2B errors where it may not', async () => {
    const info = await sb.files.write('/tmp/w/deep/x.txt', 'outside')
    assert.equal(info.path, '/tmp/w/deep/x.txt')
    assert.equal(info.name, 'x.txt')
    assert.equal(await sb.files.read('/tmp/w/deep/x.txt'), 'outside')
    const who = await sb.commands.run('stat -c %U /tmp/w/deep/x.txt; cat /tmp/w/deep/x.txt')
    assert.equal(who.stdout, 'user\noutside')
    // Octet-stream bodies and several files at once, binary too.
    await sb.files.write('/tmp/w/raw.bin', new Uint8Array([0, 255, 1]).buffer, { useOctetStream: true })
    assert.deepEqual([...(await sb.files.read('/tmp/w/raw.bin', { format: 'bytes' }))], [0, 255, 1])
    const many = await sb.files.write([
      { path: '/tmp/w/a.txt', data: 'A' },
      { path: '/home/user/in-ws.txt', data: 'W' },
    ])
    assert.deepEqual(many.map((i) => i.path), ['/tmp/w/a.txt', '/home/user/in-ws.txt'])
    assert.equal(await sb.files.read('/tmp/w/a.txt'), 'A')
    // No temporary file is left in the workspace.
    const ls = await sb.commands.run('ls -A /home/user')
    assert.ok(!/\.sbx-upload/.test(ls.stdout), ls.stdout)
    // Permission errors are the user's own: E2B answers 403, which the SDK raises as its
    // SandboxError with the status.
    await assert.rejects(sb.files.write('/etc/x', 'no'), (e) => e.name === 'SandboxError' && /403: permission denied: '\/etc\/x'/.test(e.message))
    await assert.rejects(sb.files.write('/root/x', 'no'), /403: permission denied/)
    assert.equal(await sb.files.exists('/etc/x'), false)
    assert.equal(await sb.files.exists('/nope'), false)
    // Audited with the target path.
    const paths = (await audit(sb.sandboxId, 'file.upload')).map((x) => `${x.details.path}:${x.outcome}`)
    assert.ok(paths.includes('/tmp/w/deep/x.txt:ok'), paths.join(','))
    assert.ok(paths.includes('/etc/x:path_permission_denied'), paths.join(','))
  })
})
