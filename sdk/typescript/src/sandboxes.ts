import { createReadStream, createWriteStream } from 'node:fs';
import { rename, stat, unlink } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';

import { SbxError } from './errors.js';
import type { CallOptions, Transport } from './http.js';
import { Terminal } from './terminal.js';
import type {
  Artifact, Deleted, EgressLog, EgressPolicy, ExecEvent, ExecRequest, ExecResult, FileList,
  FileWritten, ForkResult, KernelState, List, Preview, Process, ProcessLogEvent, ProcessLogs,
  ProcessStart, PtyCreate, PtyOutput, RunCodeEvent, RunCodeRequest, RunCodeResult, RunRequest,
  Sandbox, SandboxCreate, Session, SessionCreate, Snapshot,
} from './types.js';

const EXEC_LAST = new Set(['exit', 'error']);
const RUN_CODE_LAST = new Set(['result', 'error']);
const LOGS_LAST = new Set(['exit']);

export const seg = (s: string) => encodeURIComponent(s);
/** A workspace path in a URL: each component escaped, the slashes kept. URLs resolve `.`
 * and `..` (even escaped) before sending, so such paths are refused here, as sbxd would
 * (status 0: no request was made). */
export function wpath(p: string): string {
  const parts = p.split('/');
  if (parts.some((c) => c === '.' || c === '..'))
    throw new SbxError(0, 'invalid_path', `path ${JSON.stringify(p)} has a . or .. component`, null);
  return parts.map(encodeURIComponent).join('/');
}

export type FileContent =
  | string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>;

function isStream(c: FileContent): c is ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> {
  return c instanceof ReadableStream ||
    (typeof c === 'object' && c !== null && Symbol.asyncIterator in c);
}

/** Files of a sandbox's workspace; the same routes serve a volume's (volumes.ts), under
 * another base path. */
export class Files {
  constructor(protected readonly t: Transport,
              protected readonly base: (id: string) => string =
                (id) => `/v1/sandboxes/${seg(id)}`) {}

  /** Upload: a string, bytes, a Blob or a stream (streams are sent as they are read). */
  async put(id: string, path: string, content: FileContent,
            opts?: CallOptions): Promise<FileWritten> {
    const url = `${this.base(id)}/files/${wpath(path)}`;
    if (isStream(content))
      return this.t.upload(
        'PUT', url,
        content instanceof ReadableStream
          ? Readable.fromWeb(content as NodeReadableStream<Uint8Array>) : content,
        undefined, opts);
    return this.t.json({ method: 'PUT', path: url, body: content,
                         contentType: 'application/octet-stream' }, opts);
  }

  /** Upload a local file, streamed from disk (never held in memory). */
  async putFile(id: string, path: string, localPath: string,
                opts?: CallOptions): Promise<FileWritten> {
    const { size } = await stat(localPath); // a missing file fails here, not half-sent
    return this.t.upload('PUT', `${this.base(id)}/files/${wpath(path)}`,
                         createReadStream(localPath), size, opts);
  }

  /** The whole file in memory: for small files (see download / getStream). */
  async get(id: string, path: string, opts?: CallOptions): Promise<Uint8Array> {
    const res = await this.t.send(
      { method: 'GET', path: `${this.base(id)}/files/${wpath(path)}` }, opts);
    return new Uint8Array(await res.arrayBuffer());
  }

  async getText(id: string, path: string, opts?: CallOptions): Promise<string> {
    return new TextDecoder().decode(await this.get(id, path, opts));
  }

  /** The file as a stream of bytes. */
  async getStream(id: string, path: string,
                  opts?: CallOptions): Promise<ReadableStream<Uint8Array>> {
    const res = await this.t.send(
      { method: 'GET', path: `${this.base(id)}/files/${wpath(path)}` }, opts);
    return res.body as ReadableStream<Uint8Array>;
  }

  /** Download into a local file, streamed (written beside it, then renamed over it).
   * Answers the bytes written. */
  async download(id: string, path: string, localPath: string, opts?: CallOptions): Promise<number> {
    const body = await this.getStream(id, path, opts);
    const tmp = `${localPath}.sbx-${process.pid}-${Date.now()}`;
    try {
      await pipeline(Readable.fromWeb(body as NodeReadableStream<Uint8Array>),
                     createWriteStream(tmp, { flags: 'wx' }));
      await rename(tmp, localPath);
    } catch (e) {
      await unlink(tmp).catch(() => undefined);
      throw e;
    }
    return (await stat(localPath)).size;
  }

  list(id: string, query: { path?: string; recursive?: boolean } = {},
       opts?: CallOptions): Promise<FileList> {
    return this.t.json({ method: 'GET', path: `${this.base(id)}/files`, query }, opts);
  }

  async delete(id: string, path: string,
               opts?: CallOptions): Promise<{ object: 'file'; path: string; deleted: true }> {
    return this.t.json(
      { method: 'DELETE', path: `${this.base(id)}/files/${wpath(path)}` }, opts);
  }
}

export class Execs {
  constructor(private readonly t: Transport) {}

  /** An exec's record: `status` running / exited / timed_out / interrupted / failed. */
  get(id: string, execId: string, opts?: CallOptions): Promise<ExecResult> {
    return this.t.json({ method: 'GET', path: `/v1/sandboxes/${seg(id)}/execs/${seg(execId)}` },
                       opts);
  }
}

export class Sessions {
  constructor(private readonly t: Transport) {}

  create(id: string, body: SessionCreate = {}, opts?: CallOptions): Promise<Session> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/sessions`, json: body },
                       opts);
  }

  list(id: string, opts?: CallOptions): Promise<List<Session>> {
    return this.t.json({ method: 'GET', path: `/v1/sandboxes/${seg(id)}/sessions` }, opts);
  }

  delete(id: string, sessionId: string, opts?: CallOptions): Promise<Deleted> {
    return this.t.json(
      { method: 'DELETE', path: `/v1/sandboxes/${seg(id)}/sessions/${seg(sessionId)}` }, opts);
  }
}

export class Processes {
  constructor(private readonly t: Transport) {}

  start(id: string, body: ProcessStart, opts?: CallOptions): Promise<Process> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/processes`, json: body },
                       opts);
  }

  list(id: string, opts?: CallOptions): Promise<List<Process>> {
    return this.t.json({ method: 'GET', path: `/v1/sandboxes/${seg(id)}/processes` }, opts);
  }

  /** By `proc_N` id or pid. */
  get(id: string, processId: string | number, opts?: CallOptions): Promise<Process> {
    return this.t.json(
      { method: 'GET', path: `/v1/sandboxes/${seg(id)}/processes/${seg(String(processId))}` },
      opts);
  }

  /** SIGKILL to the process group; answered once it is reaped. */
  kill(id: string, processId: string | number, opts?: CallOptions): Promise<Process> {
    return this.t.json(
      { method: 'DELETE', path: `/v1/sandboxes/${seg(id)}/processes/${seg(String(processId))}` },
      opts);
  }

  signal(id: string, processId: string | number, signal: string | number,
         opts?: CallOptions): Promise<Process> {
    return this.t.json({
      method: 'POST',
      path: `/v1/sandboxes/${seg(id)}/processes/${seg(String(processId))}/signal`,
      json: { signal },
    }, opts);
  }

  /** The output so far. */
  logs(id: string, processId: string | number, opts?: CallOptions): Promise<ProcessLogs> {
    return this.t.json({
      method: 'GET', path: `/v1/sandboxes/${seg(id)}/processes/${seg(String(processId))}/logs`,
    }, opts);
  }

  /** Follow the output: what the ring holds, then live output, then `exit`. */
  logsStream(id: string, processId: string | number,
             opts?: CallOptions): AsyncGenerator<ProcessLogEvent> {
    return this.t.events<ProcessLogEvent>({
      method: 'GET', path: `/v1/sandboxes/${seg(id)}/processes/${seg(String(processId))}/logs`,
    }, { last: LOGS_LAST, sandboxId: id }, opts);
  }
}

export class Kernel {
  constructor(private readonly t: Transport) {}

  reset(id: string, opts?: CallOptions): Promise<KernelState> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/kernel/reset` }, opts);
  }

  interrupt(id: string, opts?: CallOptions): Promise<KernelState> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/kernel/interrupt` },
                       opts);
  }
}

export class Pty {
  constructor(private readonly t: Transport) {}

  /** exec_command: runs `bash -c command` in a PTY; `session_id` when it is still running. */
  execCommand(id: string, body: PtyCreate, opts?: CallOptions): Promise<PtyOutput> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/pty`, json: body }, opts);
  }

  /** write_stdin: writes input and answers the output after `since`. */
  writeStdin(id: string, ptyId: string,
             body: { input: string; since?: number; wait_seconds?: number },
             opts?: CallOptions): Promise<PtyOutput> {
    return this.t.json({
      method: 'POST', path: `/v1/sandboxes/${seg(id)}/pty/${seg(ptyId)}/input`, json: body,
    }, opts);
  }

  read(id: string, ptyId: string, query: { since?: number; wait_seconds?: number } = {},
       opts?: CallOptions): Promise<PtyOutput> {
    return this.t.json(
      { method: 'GET', path: `/v1/sandboxes/${seg(id)}/pty/${seg(ptyId)}`, query }, opts);
  }

  delete(id: string, ptyId: string,
         opts?: CallOptions): Promise<{ object: 'pty'; session_id: string; deleted: true }> {
    return this.t.json({ method: 'DELETE', path: `/v1/sandboxes/${seg(id)}/pty/${seg(ptyId)}` },
                       opts);
  }
}

export class Egress {
  constructor(private readonly t: Transport) {}

  /** The policy and the connection log, newest first. */
  get(id: string, query: { limit?: number; before?: string } = {},
      opts?: CallOptions): Promise<EgressLog> {
    return this.t.json({ method: 'GET', path: `/v1/sandboxes/${seg(id)}/egress`, query }, opts);
  }

  put(id: string, policy: EgressPolicy, opts?: CallOptions): Promise<Sandbox> {
    return this.t.json({ method: 'PUT', path: `/v1/sandboxes/${seg(id)}/egress`, json: policy },
                       opts);
  }
}

export class Sandboxes {
  readonly files: Files;
  readonly execs: Execs;
  readonly sessions: Sessions;
  readonly processes: Processes;
  readonly kernel: Kernel;
  readonly pty: Pty;
  readonly egress: Egress;

  constructor(private readonly t: Transport) {
    this.files = new Files(t);
    this.execs = new Execs(t);
    this.sessions = new Sessions(t);
    this.processes = new Processes(t);
    this.kernel = new Kernel(t);
    this.pty = new Pty(t);
    this.egress = new Egress(t);
  }

  create(body: SandboxCreate = {}, opts?: CallOptions): Promise<Sandbox> {
    return this.t.json({ method: 'POST', path: '/v1/sandboxes', json: body }, opts);
  }

  list(opts?: CallOptions): Promise<List<Sandbox>> {
    return this.t.json({ method: 'GET', path: '/v1/sandboxes' }, opts);
  }

  get(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.t.json({ method: 'GET', path: `/v1/sandboxes/${seg(id)}` }, opts);
  }

  delete(id: string, opts?: CallOptions): Promise<Deleted> {
    return this.t.json({ method: 'DELETE', path: `/v1/sandboxes/${seg(id)}` }, opts);
  }

  /** Runs one command and answers once it has ended. */
  exec(id: string, body: ExecRequest, opts?: CallOptions): Promise<ExecResult> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/exec`, json: body }, opts);
  }

  /** Runs one command, yielding `start`, `stdout`/`stderr` chunks as they are written, then
   * `exit` (or `error`). A dropped stream throws SbxStreamError with the exec id. */
  execStream(id: string, body: ExecRequest, opts?: CallOptions): AsyncGenerator<ExecEvent> {
    return this.t.events<ExecEvent>(
      { method: 'POST', path: `/v1/sandboxes/${seg(id)}/exec`, json: body },
      { last: EXEC_LAST, sandboxId: id }, opts);
  }

  /** Creates a sandbox, runs one command, destroys it (the answer has `sandbox_id` and the
   * `artifacts` of out/). */
  run(body: RunRequest, opts?: CallOptions): Promise<ExecResult> {
    return this.t.json({ method: 'POST', path: '/v1/sandboxes/run', json: body }, opts);
  }

  runStream(body: RunRequest, opts?: CallOptions): AsyncGenerator<ExecEvent> {
    return this.t.events<ExecEvent>({ method: 'POST', path: '/v1/sandboxes/run', json: body },
                                    { last: EXEC_LAST }, opts);
  }

  /** Collects, hashes and scans every file under /workspace/out; clean ones get signed links. */
  artifacts(id: string, opts?: CallOptions): Promise<List<Artifact>> {
    return this.t.json({ method: 'GET', path: `/v1/sandboxes/${seg(id)}/artifacts` }, opts);
  }

  /** A cell in the sandbox's persistent Python kernel. */
  runCode(id: string, body: RunCodeRequest, opts?: CallOptions): Promise<RunCodeResult> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/run_code`, json: body },
                       opts);
  }

  runCodeStream(id: string, body: RunCodeRequest,
                opts?: CallOptions): AsyncGenerator<RunCodeEvent> {
    return this.t.events<RunCodeEvent>(
      { method: 'POST', path: `/v1/sandboxes/${seg(id)}/run_code`, json: body },
      { last: RUN_CODE_LAST, sandboxId: id }, opts);
  }

  pause(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/pause` }, opts);
  }

  resume(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/resume` }, opts);
  }

  /** Start a failed sandbox (or a running one, stopped first) cold from its workspace. */
  restart(id: string, opts?: CallOptions): Promise<Sandbox> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/restart` }, opts);
  }

  fork(id: string, body: { count?: number; ttl_seconds?: number } = {},
       opts?: CallOptions): Promise<ForkResult> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/fork`, json: body },
                       opts);
  }

  /** A v1 workspace snapshot (`snapshot_id` on create starts from it). */
  snapshot(id: string, opts?: CallOptions): Promise<Snapshot> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/snapshot` }, opts);
  }

  /** A signed URL to a port inside the sandbox: preview(id, 3000) or preview(id, {port, ttl_seconds}). */
  preview(id: string, port: number | { port?: number; ttl_seconds?: number },
          body: { ttl_seconds?: number } = {}, opts?: CallOptions): Promise<Preview> {
    const json = typeof port === 'number' ? { port, ...body } : port;
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/preview`, json }, opts);
  }

  terminalTicket(id: string, opts?: CallOptions):
      Promise<{ object: 'terminal_ticket'; ticket: string; expires_in: number }> {
    return this.t.json({ method: 'POST', path: `/v1/sandboxes/${seg(id)}/terminal-ticket` }, opts);
  }

  /** An interactive shell over WebSocket (a ticket is fetched first). `ptyId` re-attaches;
   * `provision` resumes a paused sandbox (or restarts a stopped one) first. A sandbox that
   * cannot open one makes `ready` reject with the server's code (SANDBOX_PAUSED, …). */
  async terminal(id: string,
                 q: { cols?: number; rows?: number; ptyId?: string; provision?: boolean } = {},
                 opts?: CallOptions): Promise<Terminal> {
    const { ticket } = await this.terminalTicket(id, opts);
    const url = this.t.url(`/v1/sandboxes/${seg(id)}/terminal`,
                           { ticket, cols: q.cols, rows: q.rows, pty_id: q.ptyId,
                             provision: q.provision ? 1 : undefined })
      .replace(/^http/, 'ws');
    return Terminal.open(url, opts?.signal);
  }
}
