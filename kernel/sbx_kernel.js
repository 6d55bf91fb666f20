// sbx's JavaScript/TypeScript cells (docs/kernel.md): a node process the Python kernel
// (sbx_kernel.py) starts on the first such cell as `node -e <this file> <fd>` and keeps
// for as long as it lives. Over stdin come lines of JSON {"id", "code", "ctx", "lang"};
// each cell runs in the vm context named ctx (made on first use: separate globals per
// E2B code context) and its answer goes to fd as one line {"id", "result", "error"}.
// console.log and process.stdout write to fd 1 like the Python kernel's prints, so the
// agent streams them; they are written synchronously (pipes are, on Linux), so a cell's
// output is out before its answer.
'use strict';
const fs = require('node:fs');
const nodeModule = require('node:module');
const path = require('node:path');
const readline = require('node:readline');
const util = require('node:util');
const vm = require('node:vm');

const RESULT_MAX = 64 * 1024; // characters of a result's text, as the Python kernel's
const replyFd = Number(process.argv[1]);
const contexts = new Map();

// An interrupt (the agent's SIGINT to the kernel's group) stops a synchronous cell through
// breakOnSigint; between cells and while a cell awaits, it must not end this process.
process.on('SIGINT', () => {});

function context(name) {
  let c = contexts.get(name);
  if (c) return c;
  const req = nodeModule.createRequire(path.join(process.cwd(), '[cell]'));
  // The globals a node script has, in a context of their own.
  const g = {
    console, process, Buffer, require: req, module: { exports: {} }, URL, URLSearchParams,
    TextEncoder, TextDecoder, AbortController, AbortSignal, Event, EventTarget, atob, btoa,
    setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
    queueMicrotask, structuredClone, performance, fetch, Headers, Request, Response,
    FormData, Blob, crypto: globalThis.crypto, WebAssembly,
  };
  g.exports = g.module.exports;
  c = vm.createContext(g);
  contexts.set(name, c);
  return c;
}

function text(v) {
  const s = typeof v === 'string' ? v : util.inspect(v, { depth: 4 });
  return s.length > RESULT_MAX ? s.slice(0, RESULT_MAX) + `\n...[cut: ${s.length} characters in full]` : s;
}

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return { name: String(e.name || 'Error'), value: String(e.message ?? ''),
      traceback: String(e.stack || `${e.name}: ${e.message}`) };
  }
  return { name: 'Error', value: String(e), traceback: `Uncaught ${util.inspect(e)}` };
}

// Top-level await: such a cell cannot be a script, so it runs as the body of an async
// function (its last expression is then not its value: `return` it).
function compile(code, filename) {
  try {
    return new vm.Script(code, { filename });
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/await/.test(e.message)) throw e;
    return new vm.Script(`(async () => {\n${code}\n})()`, { filename, lineOffset: -1 });
  }
}

async function run(msg) {
  const reply = { id: msg.id, result: null, error: null };
  try {
    let code = msg.code;
    if (msg.lang === 'ts') code = nodeModule.stripTypeScriptTypes(code);
    const script = compile(code, `<cell ${msg.id}>`);
    let value = script.runInContext(context(`${msg.lang}:${msg.ctx || ''}`), { breakOnSigint: true });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) reply.result = text(value);
  } catch (e) {
    reply.error = errorOf(e);
  }
  fs.writeSync(replyFd, JSON.stringify(reply) + '\n');
}

(async () => {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      continue;
    }
    await run(msg);
  }
  process.exit(0); // the Python kernel is gone
})();
