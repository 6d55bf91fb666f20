import WebSocket from 'ws';

import { SbxError } from './errors.js';

export type TerminalMessage =
  | { type: 'data'; data: Buffer }
  | { type: 'ready'; pty_id: string; backend: string; reattachable: boolean }
  | { type: 'exited'; exit_code: number | null }
  | { type: 'error'; code: string }
  | { type: 'close'; code: number; reason: string };

/** An interactive terminal over the sandbox's WebSocket (docs/terminals.md). Iterate it for
 * output and control messages; the iteration ends when the socket closes. */
export class Terminal implements AsyncIterable<TerminalMessage> {
  private readonly queue: TerminalMessage[] = [];
  private waiters: ((m: TerminalMessage | null) => void)[] = [];
  private closed = false;
  /** The first message: `{type: 'ready', pty_id}` (use pty_id to re-attach later). */
  readonly ready: Promise<{ pty_id: string; backend: string; reattachable: boolean }>;

  private constructor(private readonly ws: WebSocket) {
    let onReady!: (v: { pty_id: string; backend: string; reattachable: boolean }) => void;
    let onFail!: (e: unknown) => void;
    this.ready = new Promise((res, rej) => {
      onReady = res;
      onFail = rej;
    });
    this.ready.catch(() => undefined);
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) return this.push({ type: 'data', data });
      const m = JSON.parse(data.toString('utf8')) as TerminalMessage;
      if (m.type === 'ready') onReady(m);
      // Refused after the upgrade (spec 002: SANDBOX_PAUSED, SANDBOX_STOPPED, …).
      if (m.type === 'error')
        onFail(new SbxError(0, m.code, `the terminal was refused: ${m.code}`, null));
      this.push(m);
    });
    ws.on('close', (code: number, reason: Buffer) => {
      onFail(new SbxError(0, 'terminal_closed', `closed before ready (${code})`, null));
      this.push({ type: 'close', code, reason: reason.toString('utf8') });
      this.closed = true;
      for (const w of this.waiters.splice(0)) w(null);
    });
  }

  /** Opens the socket; rejects with SbxError when sbxd refuses the upgrade. */
  static open(url: string, signal?: AbortSignal): Promise<Terminal> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      if (signal) {
        const onAbort = () => ws.terminate();
        if (signal.aborted) onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        ws.once('close', () => signal.removeEventListener('abort', onAbort));
      }
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let code = `http_${res.statusCode}`;
          let message = code;
          try {
            const b = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            code = b.error.code;
            message = b.error.message;
          } catch {
            /* keep the status */
          }
          const rid = res.headers['x-request-id'];
          reject(new SbxError(res.statusCode ?? 0, code, message,
                              typeof rid === 'string' ? rid : null));
        });
      });
      ws.once('error', reject);
      const t = new Terminal(ws);
      ws.once('open', () => resolve(t));
    });
  }

  private push(m: TerminalMessage): void {
    const w = this.waiters.shift();
    if (w) w(m);
    else this.queue.push(m);
  }

  /** Keystrokes (bytes or text) to the shell. */
  write(data: string | Uint8Array): void {
    this.ws.send(typeof data === 'string' ? Buffer.from(data, 'utf8') : data, { binary: true });
  }

  resize(cols: number, rows: number): void {
    this.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /** Detaches: the shell keeps running for the grace period and can be re-attached. */
  close(): void {
    this.ws.close(1000);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TerminalMessage> {
    for (;;) {
      const m = this.queue.shift() ?? (this.closed ? null : await new Promise<TerminalMessage | null>(
        (res) => this.waiters.push(res)));
      if (!m) return;
      yield m;
      if (m.type === 'close') return;
    }
  }
}
